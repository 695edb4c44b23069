"""Tests for `langchain_contextkit.retrieval.sources.base`."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import threading
from typing import Any
from unittest import mock

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests
from pydantic import Field

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.retrieval.result import RetrievalResult
from langchain_contextkit.retrieval.sources import base as sources
from langchain_contextkit.retrieval.sources.base import ContextSource, Scope
from langchain_contextkit.retrieval.sources.callable import CallableSource
from langchain_contextkit.retrieval.sources.retriever import RetrieverSource

TEXTS = [
    "Meals are capped at 80 per day, no receipt needed.",
    "Hotels are capped at 500 per night, receipt required.",
    "Taxis are reimbursed with a receipt.",
    "Flights must be booked through the travel desk.",
    "Per diem abroad depends on the country.",
    "Conference fees are paid by the team budget.",
]
# One shared, read-only store: building it is the slowest part of these tests.
STORE = InMemoryVectorStore.from_texts(TEXTS, DeterministicFakeEmbedding(size=8))
SCOPE = Scope(user="ada", thread="t-1", agent="planner")
UNSET = object()


def search_store(query: str) -> list[Document]:
    return STORE.similarity_search(query, k=len(TEXTS))


class RecordingHandler(BaseCallbackHandler):
    """Records every retriever run start: (name, run_id, parent_run_id)."""

    def __init__(self) -> None:
        self.starts: list[tuple[str | None, Any, Any]] = []

    def on_retriever_start(self, serialized, query, *, run_id, parent_run_id=None, **kwargs):
        self.starts.append((kwargs.get("name"), run_id, parent_run_id))


class CountingEmbeddings(DeterministicFakeEmbedding):
    """Counts batched calls; `aembed_documents` is native (does not go through the sync one)."""

    sync_calls: list[list[str]] = Field(default_factory=list)
    async_calls: list[list[str]] = Field(default_factory=list)

    def embed_documents(self, texts):
        self.sync_calls.append(list(texts))
        return [self._get_embedding(seed=self._get_seed(t)) for t in texts]

    async def aembed_documents(self, texts):
        self.async_calls.append(list(texts))
        return [self._get_embedding(seed=self._get_seed(t)) for t in texts]


class ListRetriever(BaseRetriever):
    """Returns fixed documents."""

    docs: list[Document]

    def _get_relevant_documents(self, query, *, run_manager):
        return list(self.docs)


def query_only(retriever):
    """`retriever.invoke` as a one-argument function.

    The bound `invoke(input, config=None)` has two positional parameters, so it would
    receive the scope as its config.
    """

    def search(query):
        return retriever.invoke(query)

    return search


def contents(results):
    return [r.content for r in results]


# --------------------------------------------------------------------------------------
# Scope
# --------------------------------------------------------------------------------------


def test_scope_is_frozen_keyword_only_with_none_defaults():
    scope = Scope(user="ada")
    assert (scope.user, scope.thread, scope.agent) == ("ada", None, None)
    assert scope == Scope(user="ada")
    with pytest.raises(dataclasses.FrozenInstanceError):
        scope.user = "bo"  # type: ignore[misc]
    with pytest.raises(TypeError):
        Scope("ada")  # type: ignore[misc]
    assert not hasattr(scope, "__dict__")  # slots


# --------------------------------------------------------------------------------------
# Argument validation
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "   ", None, 3])
def test_bad_name_is_a_config_error(name):
    with pytest.raises(ConfigError, match="name"):
        CallableSource(name, search_store)
    with pytest.raises(ConfigError, match="name"):
        RetrieverSource(name, STORE.as_retriever())


@pytest.mark.parametrize("k", [0, -1, True, 2.0, "3"])
def test_bad_k_is_a_config_error(k):
    with pytest.raises(ConfigError, match="k must be"):
        CallableSource("rag", search_store, k=k)
    with pytest.raises(ConfigError, match="k must be"):
        RetrieverSource("rag", STORE.as_retriever(), k=k)


def test_bad_k_at_invoke_is_a_config_error():
    with pytest.raises(ConfigError, match="k must be"):
        CallableSource("rag", search_store).invoke("meals", k=0)


async def test_bad_k_at_invoke_is_a_config_error_async():
    with pytest.raises(ConfigError, match="k must be"):
        await CallableSource("rag", search_store).ainvoke("meals", k=0)


def test_bad_adapter_arguments_are_config_errors():
    with pytest.raises(ConfigError, match="callable"):
        CallableSource("rag", "not a function")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="pass_scope"):
        CallableSource("rag", search_store, pass_scope="yes")  # type: ignore[arg-type]  # noqa: S106
    with pytest.raises(ConfigError, match=r"as_retriever\(\)"):
        RetrieverSource("rag", STORE)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="Embeddings"):
        RetrieverSource("rag", STORE.as_retriever(), embeddings=len)  # type: ignore[arg-type]


def test_context_source_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        ContextSource(name="rag")  # type: ignore[abstract]


def test_keyword_construction_and_fields():
    source = CallableSource(name="rag", fn=search_store, k=2, tags=["kb"])
    assert (source.name, source.k, source.pass_scope, source.tags) == ("rag", 2, None, ["kb"])
    assert source.get_name() == "rag"  # runs are named after the source in traces


# --------------------------------------------------------------------------------------
# pass_scope: which arguments the callable actually receives
# --------------------------------------------------------------------------------------


class Calls:
    """Collects the (args, kwargs) each callable below received."""

    def __init__(self) -> None:
        self.seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def one(self, query):
        self.seen.append(((query,), {}))
        return ["x"]

    def two(self, query, scope):
        self.seen.append(((query, scope), {}))
        return ["x"]

    def keyword_only(self, query, *, scope=UNSET):
        kwargs = {} if scope is UNSET else {"scope": scope}
        self.seen.append(((query,), kwargs))
        return ["x"]

    def optional_second(self, query, scope=UNSET):
        args = (query,) if scope is UNSET else (query, scope)
        self.seen.append((args, {}))
        return ["x"]

    def var_args(self, *args, **kwargs):
        self.seen.append((args, kwargs))
        return ["x"]


def _auto_cases(calls: Calls) -> list[tuple[str, Any, int]]:
    """(label, callable, positional arguments expected) for pass_scope=None."""

    class Positional:
        def __call__(self, query, scope, /):
            calls.seen.append(((query, scope), {}))
            return ["x"]

    class Uninspectable:
        __signature__ = "not a signature"  # inspect.signature raises TypeError

        def __call__(self, *args):
            calls.seen.append((args, {}))
            return ["x"]

    def three(prefix, query, scope):
        calls.seen.append(((query, scope), {}))
        return ["x"]

    def with_top_k(query, top_k=5):
        calls.seen.append(((query,) if top_k == 8 else (query, top_k), {}))
        return ["x"]

    return [
        ("one positional", calls.one, 1),
        ("two positional", calls.two, 2),
        ("bound method, self not counted", calls.keyword_only, 1),
        ("defaulted second positional counts", calls.optional_second, 2),
        ("*args counts as more", calls.var_args, 2),
        ("lambda q, s", lambda q, s: calls.two(q, s), 2),  # noqa: PLW0108 - its own signature
        ("lambda q", lambda q: calls.one(q), 1),  # noqa: PLW0108
        ("callable object, positional-only", Positional(), 2),
        ("partial leaves two", functools.partial(three, "p"), 2),
        ("partial keyword makes top_k keyword-only", functools.partial(with_top_k, top_k=8), 1),
        ("uninspectable counts as one", Uninspectable(), 1),
    ]


@pytest.mark.parametrize("index", range(11))
def test_pass_scope_auto_counts_positional_parameters(index):
    calls = Calls()
    label, fn, expected = _auto_cases(calls)[index]
    CallableSource("rag", fn).fetch("q", SCOPE)
    (args, kwargs), *_ = calls.seen
    assert len(args) == expected, label
    assert kwargs == {}, label
    if expected == 2:
        assert args[1] is SCOPE, label


def test_pass_scope_auto_never_fills_keyword_only_scope():
    calls = Calls()
    CallableSource("memory", calls.keyword_only).fetch("q", SCOPE)
    assert calls.seen == [(("q",), {})]


def test_pass_scope_true_passes_scope_by_keyword():
    calls = Calls()
    CallableSource("rag", calls.keyword_only, pass_scope=True).fetch("q", SCOPE)
    CallableSource("rag", calls.var_args, pass_scope=True).fetch("q", SCOPE)
    CallableSource("rag", calls.keyword_only, pass_scope=True).fetch("q")
    assert calls.seen == [
        (("q",), {"scope": SCOPE}),
        (("q",), {"scope": SCOPE}),
        (("q",), {"scope": None}),
    ]


def test_pass_scope_false_never_passes_scope():
    calls = Calls()
    CallableSource("rag", calls.optional_second, pass_scope=False).fetch("q", SCOPE)
    CallableSource("rag", calls.var_args, pass_scope=False).fetch("q", SCOPE)
    assert calls.seen == [(("q",), {}), (("q",), {})]


def test_positional_scope_is_passed_even_when_none():
    calls = Calls()
    CallableSource("rag", calls.two).fetch("q")
    assert calls.seen == [(("q", None), {})]


def test_scope_detection_happens_once_at_construction():
    calls = Calls()
    source = CallableSource("rag", calls.two)
    with mock.patch.object(sources.inspect, "signature", side_effect=AssertionError):
        source.fetch("q", SCOPE)
        source.invoke("q", scope=SCOPE)
    assert [len(args) for args, _ in calls.seen] == [2, 2]


def test_invoke_forwards_scope():
    calls = Calls()
    CallableSource("rag", calls.two).invoke("q", scope=SCOPE)
    assert calls.seen == [(("q", SCOPE), {})]


async def test_invoke_forwards_scope_async():
    calls = Calls()
    await CallableSource("rag", calls.two).ainvoke("q", scope=SCOPE)
    assert calls.seen == [(("q", SCOPE), {})]


# --------------------------------------------------------------------------------------
# The seed's examples
# --------------------------------------------------------------------------------------


class Memory:
    def __init__(self) -> None:
        self.scopes: list[Scope | None] = []

    def search(self, query, *, scope=None):
        self.scopes.append(scope)
        return [RetrievalResult(content=f"memory about {query}", score=0.8, source="memory")]


class Rag:
    def __init__(self) -> None:
        self.calls: list[tuple[int, Scope | None]] = []

    def retrieve(self, query, top_k=5, *, scope=None):
        self.calls.append((top_k, scope))
        return [Document(page_content=f"doc {i} about {query}") for i in range(top_k)]


def test_seed_search_docs():
    def search_docs(query: str) -> list[RetrievalResult]:
        return [
            RetrievalResult(
                content="Meals are capped at 80 per day, no receipt needed.",
                score=0.9,
                source="rag",
            ),
            RetrievalResult(
                content="Hotels are capped at 500 per night, receipt required.",
                score=0.7,
                source="rag",
            ),
        ]

    source = CallableSource("rag", search_docs)
    assert source.fetch("meals", SCOPE) == search_docs("meals")


def test_seed_memory_search_keeps_its_own_scope():
    memory = Memory()
    CallableSource("memory", memory.search).fetch("tea", SCOPE)
    assert memory.scopes == [None]


def test_seed_lambda_scopes_by_the_runs_user():
    memory = Memory()
    source = CallableSource("memory", lambda q, s: memory.search(q, scope=Scope(user=s.user)))
    results = source.fetch("tea", SCOPE)
    assert memory.scopes == [Scope(user="ada")]
    assert contents(results) == ["memory about tea"]


def test_seed_rag_retrieve_with_forced_keyword_scope():
    rag = Rag()
    results = CallableSource("rag", rag.retrieve, pass_scope=True).fetch("visa", SCOPE)
    assert rag.calls == [(5, SCOPE)]
    assert len(results) == 5


def test_seed_rag_retrieve_custom_top_k_without_scope():
    rag = Rag()
    results = CallableSource("rag", lambda q: rag.retrieve(q, top_k=8)).fetch("visa", SCOPE)
    assert rag.calls == [(8, None)]
    assert len(results) == 8
    assert {r.source for r in results} == {"rag"}


# --------------------------------------------------------------------------------------
# Sync and async callables through every entry point
# --------------------------------------------------------------------------------------


def _sync_fn(query, scope):
    return [f"{query} for {scope.user}", "second"]


async def _async_fn(query, scope):
    await asyncio.sleep(0)
    return [f"{query} for {scope.user}", "second"]


class _AsyncCallable:
    async def __call__(self, query, scope):
        return await _async_fn(query, scope)


FLAVOURS = {
    "sync": _sync_fn,
    "coroutine function": _async_fn,
    "lambda returning a coroutine": lambda q, s: _async_fn(q, s),  # noqa: PLW0108
    "async callable object": _AsyncCallable(),
    "partial of coroutine function": functools.partial(_async_fn),
}
EXPECTED = [("tea for ada", 1.0), ("second", 0.5)]


def _pairs(results):
    return [(r.content, r.score) for r in results]


def _doc_pairs(docs):
    return [(d.page_content, d.metadata["contextkit_score"]) for d in docs]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_fetch_and_invoke_any_callable(flavour):
    source = CallableSource("memory", FLAVOURS[flavour])
    assert _pairs(source.fetch("tea", SCOPE)) == EXPECTED
    assert _doc_pairs(source.invoke("tea", scope=SCOPE)) == EXPECTED


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_fetch_and_invoke_any_callable_async(flavour):
    source = CallableSource("memory", FLAVOURS[flavour])
    assert _pairs(await source.afetch("tea", SCOPE)) == EXPECTED
    assert _doc_pairs(await source.ainvoke("tea", scope=SCOPE)) == EXPECTED


async def test_sync_fetch_of_async_callable_inside_running_loop():
    threads = []

    async def fn(query):
        threads.append(threading.get_ident())
        await asyncio.sleep(0)
        return [query]

    source = CallableSource("rag", fn)
    assert contents(source.fetch("q")) == ["q"]  # the loop is busy: run in a worker thread
    assert threads[0] != threading.get_ident()


def test_sync_fetch_of_async_callable_without_loop_runs_here():
    threads = []

    async def fn(query):
        threads.append(threading.get_ident())
        return [query]

    assert contents(CallableSource("rag", fn).fetch("q")) == ["q"]
    assert threads == [threading.get_ident()]


async def test_afetch_awaits_async_natively_and_runs_sync_in_executor():
    threads = {}

    async def afn(query):
        threads["async"] = threading.get_ident()
        return [query]

    def fn(query):
        threads["sync"] = threading.get_ident()
        return [query]

    await CallableSource("a", afn).afetch("q")
    await CallableSource("s", fn).afetch("q")
    assert threads["async"] == threading.get_ident()
    assert threads["sync"] != threading.get_ident()


# --------------------------------------------------------------------------------------
# What the callable may return
# --------------------------------------------------------------------------------------


def test_documents_strings_and_results_are_converted():
    returned = [
        Document(page_content="scored", metadata={"score": 0.4, "source": "file.md", "page": 2}),
        Document(page_content="relevance", metadata={"relevance_score": 0.6}),
        Document(page_content="by rank"),
        "plain",
        RetrievalResult(
            content="result", score=0.3, source="other", embedding=[1.0, 0.0], metadata={"a": 1}
        ),
    ]
    results = CallableSource("rag", lambda q: returned).fetch("q")
    assert _pairs(results) == [
        ("scored", 0.4),
        ("relevance", 0.6),
        ("by rank", 1 / 3),
        ("plain", 0.25),
        ("result", 0.3),
    ]
    assert {r.source for r in results} == {"rag"}  # overwrites what the callable said
    assert results[0].metadata == {"score": 0.4, "source": "file.md", "page": 2}  # intact
    assert results[4].metadata == {"a": 1}
    assert list(results[4].embedding) == [1.0, 0.0]


async def test_documents_strings_and_results_are_converted_async():
    async def fn(query):
        return [Document(page_content="d", metadata={"score": 0.4}), "s"]

    assert _pairs(await CallableSource("rag", fn).afetch("q")) == [("d", 0.4), ("s", 0.5)]


def test_generators_are_accepted_and_capped_lazily():
    source = CallableSource("rag", lambda q: (f"item {i}" for i in itertools.count()), k=3)
    assert contents(source.fetch("q")) == ["item 0", "item 1", "item 2"]


@pytest.mark.parametrize(
    ("returned", "what"),
    [
        ([RetrievalResult(content="ok", score=1.0, source="rag"), 42], "int at position 1"),
        ([{"content": "dict"}], "dict at position 0"),
        (None, "got NoneType"),
        ("a single string", "got str"),
        (Document(page_content="one"), "got Document"),
        ({"a": 1}, "got dict"),
        (7, "got int"),
    ],
)
def test_anything_else_is_a_type_error_naming_the_source(returned, what):
    with pytest.raises(TypeError, match=rf"source 'kb'.*{what}"):
        CallableSource("kb", lambda q: returned).fetch("q")


async def test_anything_else_is_a_type_error_naming_the_source_async():
    async def fn(query):
        return [3.5]

    with pytest.raises(TypeError, match=r"source 'kb'.*float at position 0"):
        await CallableSource("kb", fn).afetch("q")


def test_non_numeric_document_score_is_a_type_error():
    doc = Document(page_content="d", metadata={"score": "high"})
    with pytest.raises(TypeError, match=r"source 'kb'.*'score'"):
        CallableSource("kb", lambda q: [doc]).fetch("q")


# --------------------------------------------------------------------------------------
# k and Documents
# --------------------------------------------------------------------------------------


def ten(query):
    return [f"r{i}" for i in range(10)]


def test_k_caps_fetch_and_invoke():
    source = CallableSource("rag", ten, k=2)
    assert contents(source.fetch("q")) == ["r0", "r1"]
    assert len(source.invoke("q")) == 2
    assert len(source.invoke("q", k=1)) == 1
    assert len(source.invoke("q", k=5)) == 5  # a per-call k replaces the source's own
    assert len(CallableSource("rag", ten).invoke("q")) == 10


async def test_k_caps_fetch_and_invoke_async():
    source = CallableSource("rag", ten, k=2)
    assert contents(await source.afetch("q")) == ["r0", "r1"]
    assert len(await source.ainvoke("q")) == 2
    assert len(await source.ainvoke("q", k=1)) == 1
    assert len(await source.ainvoke("q", k=5)) == 5


def test_documents_carry_score_and_source_but_never_embeddings():
    result = RetrievalResult(
        content="c", score=0.7, source="x", embedding=[0.1] * 8, metadata={"page": 3}
    )
    (doc,) = CallableSource("rag", lambda q: [result]).invoke("q")
    assert doc.page_content == "c"
    assert doc.metadata == {"page": 3, "contextkit_score": 0.7, "contextkit_source": "rag"}


# --------------------------------------------------------------------------------------
# ContextSource subclasses
# --------------------------------------------------------------------------------------


class OldStyleSource(ContextSource):
    """A subclass whose `fetch` does not take `callbacks`."""

    def fetch(self, query, scope=None):
        user = scope.user if scope else None
        return [
            RetrievalResult(content=f"{query} {user} {i}", score=1.0, source="wrong")
            for i in range(4)
        ]


class CallbackSource(ContextSource):
    received: list[Any] = Field(default_factory=list)

    def fetch(self, query, scope=None, *, callbacks=None):
        self.received.append(callbacks)
        return [RetrievalResult(content=query, score=1.0, source=self.name)]


class BrokenSource(ContextSource):
    def fetch(self, query, scope=None, *, callbacks=None):
        return ["not a result"]


def test_subclass_without_callbacks_works_and_is_labelled_and_capped():
    source = OldStyleSource(name="notes", k=3)
    docs = source.invoke("q", scope=SCOPE)
    assert [d.page_content for d in docs] == ["q ada 0", "q ada 1", "q ada 2"]
    assert {d.metadata["contextkit_source"] for d in docs} == {"notes"}
    assert len(source.invoke("q", k=1)) == 1


async def test_subclass_without_callbacks_works_and_is_labelled_and_capped_async():
    source = OldStyleSource(name="notes", k=3)
    assert contents(await source.afetch("q", SCOPE)) == ["q ada 0", "q ada 1", "q ada 2", "q ada 3"]
    docs = await source.ainvoke("q", scope=SCOPE)
    assert [d.page_content for d in docs] == ["q ada 0", "q ada 1", "q ada 2"]
    assert {d.metadata["contextkit_source"] for d in docs} == {"notes"}


def test_subclass_receives_child_callbacks_on_the_retriever_path():
    source = CallbackSource(name="notes")
    source.invoke("q")
    source.fetch("q")
    assert source.received[0] is not None  # the run's child callback manager
    assert source.received[1] is None


async def test_subclass_default_afetch_runs_fetch():
    source = CallbackSource(name="notes")
    assert contents(await source.afetch("q")) == ["q"]
    assert contents(await source.afetch("q", callbacks=[])) == ["q"]
    assert source.received == [None, []]


def test_subclass_returning_wrong_types_is_a_type_error():
    with pytest.raises(TypeError, match=r"source 'notes'.*str at position 0"):
        BrokenSource(name="notes").invoke("q")


# --------------------------------------------------------------------------------------
# RetrieverSource
# --------------------------------------------------------------------------------------


def test_retriever_scores_from_metadata_else_rank():
    retriever = ListRetriever(
        docs=[
            Document(page_content="a", metadata={"score": 0.2}),
            Document(page_content="b", metadata={"relevance_score": 0.9}),
            Document(page_content="c", metadata={"source": "file.md"}),
        ]
    )
    source = RetrieverSource("rag", retriever)
    results = source.fetch("q", SCOPE)
    assert _pairs(results) == [("a", 0.2), ("b", 0.9), ("c", 1 / 3)]
    assert {r.source for r in results} == {"rag"}
    assert all(r.embedding is None for r in results)


async def test_retriever_scores_from_metadata_else_rank_async():
    retriever = ListRetriever(docs=[Document(page_content="a", metadata={"score": 0.2})] * 2)
    assert _pairs(await RetrieverSource("rag", retriever).afetch("q")) == [("a", 0.2), ("a", 0.2)]


def test_retriever_over_vector_store_scores_by_rank_and_caps():
    source = RetrieverSource("rag", STORE.as_retriever(search_kwargs={"k": 5}), k=3)
    results = source.fetch("hotel receipts")
    assert [r.score for r in results] == [1.0, 0.5, 1 / 3]
    assert set(contents(results)) <= set(TEXTS)
    assert len(source.invoke("hotel receipts", k=5)) == 5


def test_retriever_embeds_once_per_fetch_after_capping():
    embeddings = CountingEmbeddings(size=8)
    source = RetrieverSource("rag", STORE.as_retriever(), embeddings=embeddings, k=3)
    results = source.fetch("meals")
    assert len(embeddings.sync_calls) == 1
    assert embeddings.sync_calls[0] == contents(results)
    assert len(results) == 3
    assert all(len(r.embedding) == 8 for r in results)
    assert results[0].embedding == embeddings.embed_query(results[0].content)
    docs = source.invoke("meals")
    assert len(embeddings.sync_calls) == 2
    assert all(set(d.metadata) == {"contextkit_score", "contextkit_source"} for d in docs)


async def test_retriever_embeds_once_per_fetch_after_capping_async():
    embeddings = CountingEmbeddings(size=8)
    source = RetrieverSource("rag", STORE.as_retriever(), embeddings=embeddings, k=3)
    results = await source.afetch("meals")
    assert len(results) == 3
    assert embeddings.sync_calls == []
    assert embeddings.async_calls == [contents(results)]
    assert all(len(r.embedding) == 8 for r in results)
    docs = await source.ainvoke("meals")
    assert len(embeddings.async_calls) == 2
    assert all(set(d.metadata) == {"contextkit_score", "contextkit_source"} for d in docs)


def test_retriever_with_no_hits_does_not_embed():
    embeddings = CountingEmbeddings(size=8)
    source = RetrieverSource("rag", ListRetriever(docs=[]), embeddings=embeddings)
    assert source.fetch("q") == []
    assert embeddings.sync_calls == []


def test_retriever_embeddings_count_mismatch_is_an_error():
    class Short(CountingEmbeddings):
        def embed_documents(self, texts):
            return []

    source = RetrieverSource("rag", STORE.as_retriever(), embeddings=Short(size=8))
    with pytest.raises(ValueError, match="0 vectors for 4 documents"):
        source.fetch("q")


# --------------------------------------------------------------------------------------
# Callbacks reach the inner retriever
# --------------------------------------------------------------------------------------


def _assert_nested(handler, outer_name):
    (outer, outer_id, outer_parent), (inner, _, inner_parent) = handler.starts
    assert outer == outer_name
    assert outer_parent is None
    assert inner_parent == outer_id
    assert inner != outer_name


def test_retriever_source_nests_the_inner_run():
    handler = RecordingHandler()
    RetrieverSource("rag", STORE.as_retriever()).invoke("q", config={"callbacks": [handler]})
    _assert_nested(handler, "rag")


async def test_retriever_source_nests_the_inner_run_async():
    handler = RecordingHandler()
    source = RetrieverSource("rag", STORE.as_retriever())
    await source.ainvoke("q", config={"callbacks": [handler]})
    _assert_nested(handler, "rag")


def test_fetch_passes_callbacks_to_the_inner_retriever():
    handler = RecordingHandler()
    RetrieverSource("rag", STORE.as_retriever()).fetch("q", callbacks=[handler])
    inner = STORE.as_retriever()
    CallableSource("kb", query_only(inner)).fetch("q", callbacks=[handler])
    assert len(handler.starts) == 2
    assert all(parent is None for _, _, parent in handler.starts)


async def test_fetch_passes_callbacks_to_the_inner_retriever_async():
    handler = RecordingHandler()
    await RetrieverSource("rag", STORE.as_retriever()).afetch("q", callbacks=[handler])
    inner = STORE.as_retriever()

    async def fn(query):
        return await inner.ainvoke(query)

    await CallableSource("kb", fn).afetch("q", callbacks=[handler])
    await CallableSource("kb", query_only(inner)).afetch("q", callbacks=[handler])
    assert len(handler.starts) == 3


def test_callable_source_nests_runs_its_callable_invokes():
    handler = RecordingHandler()
    inner = STORE.as_retriever()
    CallableSource("kb", query_only(inner)).invoke("q", config={"callbacks": [handler]})
    _assert_nested(handler, "kb")


@pytest.mark.parametrize("native", [True, False])
async def test_callable_source_nests_runs_its_callable_invokes_async(native):
    handler = RecordingHandler()
    inner = STORE.as_retriever()

    async def fn(query):
        return await inner.ainvoke(query)

    source = CallableSource("kb", fn if native else (query_only(inner)))
    await source.ainvoke("q", config={"callbacks": [handler]})
    _assert_nested(handler, "kb")


async def test_sync_fetch_of_async_callable_in_worker_thread_keeps_callbacks():
    handler = RecordingHandler()
    inner = STORE.as_retriever()

    async def fn(query):
        return await inner.ainvoke(query)

    CallableSource("kb", fn).invoke("q", config={"callbacks": [handler]})
    _assert_nested(handler, "kb")


# --------------------------------------------------------------------------------------
# LangChain's standard retriever suite
# --------------------------------------------------------------------------------------


class TestCallableSourceStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[CallableSource]:
        return CallableSource

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"name": "rag", "fn": search_store}

    @property
    def retriever_query_example(self) -> str:
        return "hotel receipts"


class TestRetrieverSourceStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[RetrieverSource]:
        return RetrieverSource

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {
            "name": "rag",
            "retriever": STORE.as_retriever(search_kwargs={"k": len(TEXTS)}),
            "embeddings": DeterministicFakeEmbedding(size=8),
        }

    @property
    def retriever_query_example(self) -> str:
        return "hotel receipts"
