"""Context sources: where the builder's candidates come from.

A source has a `name` (the budget quota it draws from) and returns
[`RetrievalResult`][langchain_contextkit.mmr.RetrievalResult]s from
`fetch(query, scope=None)` and its async twin `afetch`. Every source is also a LangChain
`BaseRetriever`, so it works wherever LangChain expects one (`invoke`, `ainvoke`, LCEL,
tracing), returning `Document`s with `contextkit_score` and `contextkit_source` in their
metadata (a loader's own `source` path, when a result came from one, is kept as it was).

Most of the time you do not subclass anything:

- [`CallableSource`][langchain_contextkit.sources.base.CallableSource] adapts a function
  `(query)` or `(query, scope)`, sync or async, returning results, `Document`s or
  strings.
- [`RetrieverSource`][langchain_contextkit.sources.base.RetrieverSource] adapts any LangChain
  retriever or vector store (`store.as_retriever()`), optionally embedding the hits so
  MMR can compare them.

```python
from langchain_contextkit.sources.base import CallableSource, Scope


def recall(query, scope):
    return [f"{scope.user} prefers short answers."]


source = CallableSource("memory", recall)
for result in source.fetch("how long?", Scope(user="ada")):
    print(result.source, result.score, result.content)
# memory 1.0 ada prefers short answers.
```
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager
from contextvars import Context, copy_context
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.config import (
    RunnableConfig,
    ensure_config,
    run_in_executor,
    set_config_context,
)
from pydantic import PrivateAttr

from langchain_contextkit._async import run_sync
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.mmr import RetrievalResult

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
        Callbacks,
    )

__all__ = ["CallableSource", "ContextSource", "RetrieverSource", "Scope"]


# Document metadata keys read as a relevance score, in order of preference.
_SCORE_KEYS = ("score", "relevance_score")

# How `CallableSource` hands the run's scope to its callable.
_ScopeMode = Literal["positional", "keyword", "none"]
# Positional parameters a callable needs to get the scope as its second argument.
_POSITIONAL_FOR_SCOPE = 2


def _accepts_keyword(function: Callable[..., Any], keyword: str) -> bool:
    """Tell whether `function` accepts `keyword=` (by name or through `**kwargs`)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError, NameError):
        return False
    return any(
        (p.name == keyword and p.kind is not inspect.Parameter.POSITIONAL_ONLY)
        or p.kind is inspect.Parameter.VAR_KEYWORD
        for p in parameters
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Scope:
    """The session a run belongs to, passed to every source.

    Sources use it to isolate data: a memory store searches only the user's memories,
    a notes store only the thread's notes. Every field is optional; `None` means "not
    scoped by this".

    ```python
    from langchain_contextkit.sources.base import Scope

    scope = Scope(user="ada", thread="t-1")
    print(scope.user, scope.thread, scope.agent)
    # ada t-1 None
    narrower = Scope(user=scope.user)
    print(narrower)
    # Scope(user='ada', thread=None, agent=None)
    ```
    """

    user: str | None = None
    """The end user the run serves (for per-user memory)."""

    thread: str | None = None
    """The conversation thread (for per-conversation notes and history)."""

    agent: str | None = None
    """The agent running (for agents that keep their own memory in a shared store)."""


class ContextSource(BaseRetriever, ABC):
    """Base class of everything that supplies candidates to the context builder.

    Subclasses implement `fetch`; override `afetch` too when the source has native
    async I/O (the default runs `fetch` in an executor). The builder calls `fetch` /
    `afetch` directly. As a `BaseRetriever`, a source also answers
    `invoke(query, scope=..., k=...)` and `ainvoke`, returning `Document`s whose
    metadata carries `contextkit_score` and `contextkit_source` (never the embedding).

    On the retriever path results are relabelled with this source's `name` and capped
    at `k` (a `k` passed to `invoke` replaces the source's own for that call). Adapters
    ([`CallableSource`][langchain_contextkit.sources.base.CallableSource],
    [`RetrieverSource`][langchain_contextkit.sources.base.RetrieverSource]) do the same in
    `fetch` itself; a subclass's `fetch` should return results whose `source` is
    `self.name`.

    `fetch` takes a keyword-only `callbacks` argument: LangChain callbacks to pass to
    any runnable or retriever the source calls, so traces nest under the caller's run.
    A subclass may leave it out of its signature; it is then never passed.

    ```python
    from langchain_contextkit.mmr import RetrievalResult
    from langchain_contextkit.sources.base import ContextSource, Scope


    class GreetingSource(ContextSource):
        def fetch(self, query, scope=None, *, callbacks=None):
            user = scope.user if scope and scope.user else "someone"
            text = f"{user} asked about {query}."
            return [RetrievalResult(content=text, score=1.0, source=self.name)]


    source = GreetingSource(name="memory")
    print(source.fetch("refunds", Scope(user="ada"))[0].content)
    # ada asked about refunds.
    docs = source.invoke("refunds", scope=Scope(user="bo"))
    print(docs[0].page_content, docs[0].metadata)
    # bo asked about refunds. {'contextkit_score': 1.0, 'contextkit_source': 'memory'}
    ```
    """

    name: str
    """The source's name: the budget quota it draws from (a key of `source_ratios`)."""

    k: int | None = None
    """Maximum number of results per fetch; `None` for no cap."""

    # Whether the subclass's `fetch` / `afetch` accept `callbacks=`; set per subclass.
    _fetch_takes_callbacks: ClassVar[bool] = True
    _afetch_takes_callbacks: ClassVar[bool] = True

    def __init__(self, **data: Any) -> None:  # noqa: ANN401 - the model's fields
        """Validate `name` and `k`, then build the model.

        Args:
            **data: The model's fields: `name`, `k`, and any subclass fields.

        Raises:
            ConfigError: If `name` is not a non-empty string or `k` is not an integer
                >= 1 (or `None`).
        """
        _check_name(data.get("name"))
        _check_k(data.get("k"))
        super().__init__(**data)

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Record whether the subclass's `fetch` and `afetch` accept `callbacks=`."""
        super().__init_subclass__(**kwargs)
        cls._fetch_takes_callbacks = _accepts_keyword(cls.fetch, "callbacks")
        cls._afetch_takes_callbacks = _accepts_keyword(cls.afetch, "callbacks")

    @abstractmethod
    def fetch(
        self,
        query: str,
        scope: Scope | None = None,
        *,
        callbacks: Callbacks = None,
    ) -> list[RetrievalResult]:
        """Return candidates for `query`, best first.

        Args:
            query: What the run is about (usually the current question).
            scope: The run's session, for sources that isolate data per user, thread
                or agent.
            callbacks: LangChain callbacks to pass to any runnable or retriever this
                source calls, so its runs nest under the caller's.

        Returns:
            The candidates, each with `source == self.name`, at most `k` of them.
        """

    async def afetch(
        self,
        query: str,
        scope: Scope | None = None,
        *,
        callbacks: Callbacks = None,
    ) -> list[RetrievalResult]:
        """Async twin of `fetch`; by default runs `fetch` in an executor.

        Args:
            query: What the run is about (usually the current question).
            scope: The run's session.
            callbacks: LangChain callbacks to pass to any runnable or retriever this
                source calls.

        Returns:
            The candidates, each with `source == self.name`, at most `k` of them.
        """
        return await run_in_executor(None, self._call_fetch, query, scope, callbacks)

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        scope: Scope | None = None,
        k: int | None = None,
    ) -> list[Document]:
        """Fetch and convert to `Document`s (the retriever interface).

        Args:
            query: The query.
            run_manager: The retriever run's callback manager.
            scope: The run's session.
            k: Cap on the number of results for this call; defaults to `self.k`.

        Returns:
            One `Document` per result, with `contextkit_score` and `contextkit_source` in
                its metadata.
        """
        limit = self.k if k is None else _check_k(k)
        results = self._fetch_capped(query, scope, limit=limit, callbacks=run_manager.get_child())
        return [result.to_document() for result in results]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        scope: Scope | None = None,
        k: int | None = None,
    ) -> list[Document]:
        """Async twin of `_get_relevant_documents`, through `afetch`.

        Args:
            query: The query.
            run_manager: The retriever run's callback manager.
            scope: The run's session.
            k: Cap on the number of results for this call; defaults to `self.k`.

        Returns:
            One `Document` per result, with `contextkit_score` and `contextkit_source` in
                its metadata.
        """
        limit = self.k if k is None else _check_k(k)
        results = await self._afetch_capped(
            query, scope, limit=limit, callbacks=run_manager.get_child()
        )
        return [result.to_document() for result in results]

    def collect(
        self, query: str, scope: Scope | None = None, *, callbacks: Callbacks = None
    ) -> list[RetrievalResult]:
        """Fetch as the builder does: capped at `k`, labelled with `name`, checked.

        Unlike `fetch`, this works for every subclass whatever its `fetch` signature
        (callbacks are passed only where accepted) and rejects results that are not
        `RetrievalResult`s with a `TypeError` naming the source.

        Args:
            query: What the run is about.
            scope: The run's session.
            callbacks: LangChain callbacks for the source's own runs.
        """
        return self._fetch_capped(query, scope, limit=self.k, callbacks=callbacks)

    async def acollect(
        self, query: str, scope: Scope | None = None, *, callbacks: Callbacks = None
    ) -> list[RetrievalResult]:
        """Async twin of `collect`."""
        return await self._afetch_capped(query, scope, limit=self.k, callbacks=callbacks)

    def _fetch_capped(
        self, query: str, scope: Scope | None, *, limit: int | None, callbacks: Callbacks
    ) -> list[RetrievalResult]:
        """Fetch at most `limit` results labelled with this source's name.

        Adapters override this (and `_afetch_capped`) so that a per-call `k` can raise
        the cap as well as lower it; the default post-processes `fetch`.
        """
        return self._labelled(self._call_fetch(query, scope, callbacks), limit)

    async def _afetch_capped(
        self, query: str, scope: Scope | None, *, limit: int | None, callbacks: Callbacks
    ) -> list[RetrievalResult]:
        """Async twin of `_fetch_capped`."""
        if self._afetch_takes_callbacks:
            results = await self.afetch(query, scope, callbacks=callbacks)
        else:
            results = await self.afetch(query, scope)
        return self._labelled(results, limit)

    def _call_fetch(
        self, query: str, scope: Scope | None, callbacks: Callbacks
    ) -> list[RetrievalResult]:
        """Call `fetch`, passing `callbacks` only if the subclass accepts them."""
        if self._fetch_takes_callbacks:
            return self.fetch(query, scope, callbacks=callbacks)
        return self.fetch(query, scope)

    def _labelled(self, results: Sequence[object], limit: int | None) -> list[RetrievalResult]:
        """Cap `results` at `limit` and relabel them with this source's name.

        `results` is typed `object`: a subclass's `fetch` may break its contract.
        """
        labelled = []
        for position, result in enumerate(results if limit is None else results[:limit]):
            if not isinstance(result, RetrievalResult):
                msg = (
                    f"source {self.name!r}: fetch must return RetrievalResult objects, got "
                    f"{type(result).__name__} at position {position}"
                )
                raise TypeError(msg)
            labelled.append(_relabel(result, self.name))
        return labelled


class CallableSource(ContextSource):
    """A source backed by a plain function, sync or async.

    The callable receives the query and, depending on `pass_scope`, the run's scope:

    - `pass_scope=None` (default): counted once, at construction. A callable with two
      or more positional parameters (or `*args`) gets the scope as its second
      positional argument; any other callable is called with the query alone. A
      keyword-only `scope` (`def f(query, *, scope=None)`) is *not* detected: such a
      callable keeps using its own scope. Note that a defaulted second positional
      parameter counts too (`def f(query, top_k=5)` would receive the scope as
      `top_k`): pass `pass_scope=False` for those.
    - `pass_scope=True`: always called as `fn(query, scope=scope)`.
    - `pass_scope=False`: always called as `fn(query)`.

    The callable returns an iterable of `RetrievalResult`s, LangChain `Document`s or
    strings (mixing is fine), best first. A `Document`'s score comes from its
    `score` or `relevance_score` metadata; strings and `Document`s without one are
    scored by rank, `1 / (rank + 1)`. Every result is relabelled with this source's
    `name`, and at most `k` are kept.

    Async callables (coroutine functions, or callables returning an awaitable) are
    awaited natively by `afetch` / `ainvoke`. `fetch` runs them to completion: with
    `asyncio.run` when no event loop is running, otherwise in a worker thread with
    its own loop (so an async callable tied to one event loop's resources should be
    used through `afetch`). Sync callables run in an executor under `afetch`.

    ```python
    from langchain_core.documents import Document

    from langchain_contextkit.mmr import RetrievalResult
    from langchain_contextkit.sources.base import CallableSource, Scope


    def search_docs(query):
        return [
            RetrievalResult(content="Meals are capped at 80 per day.", score=0.9, source="x"),
            Document(page_content="Hotels need a receipt.", metadata={"score": 0.7}),
            "Taxis are reimbursed.",
        ]


    source = CallableSource("rag", search_docs, k=3)
    for r in source.fetch("expenses"):
        print(r.source, round(r.score, 2), r.content)
    # rag 0.9 Meals are capped at 80 per day.
    # rag 0.7 Hotels need a receipt.
    # rag 0.33 Taxis are reimbursed.

    memory = CallableSource("memory", lambda q, s: [f"{s.user} likes tea"])
    print(memory.invoke("drinks", scope=Scope(user="ada"))[0].page_content)
    # ada likes tea
    ```
    """

    fn: Callable[..., Any]
    """The callable that produces the candidates."""

    pass_scope: bool | None = None
    """How the scope is passed: `None` detects, `True` by keyword, `False` never."""

    _scope_mode: _ScopeMode = PrivateAttr(default="none")
    _fn_is_async: bool = PrivateAttr(default=False)

    def __init__(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        pass_scope: bool | None = None,
        k: int | None = None,
        **kwargs: Any,  # noqa: ANN401 - other retriever fields (tags, metadata)
    ) -> None:
        """Adapt `fn` as the source `name`.

        Args:
            name: The budget quota this source draws from.
            fn: The callable: `(query)` or `(query, scope)`, sync or async.
            pass_scope: `None` to detect from `fn`'s positional parameters, `True` to
                pass `scope=` by keyword, `False` to never pass the scope.
            k: Maximum number of results per fetch; `None` for no cap.
            **kwargs: Other retriever fields (`tags`, `metadata`).

        Raises:
            ConfigError: If `name` is empty, `k` is not an integer >= 1, `fn` is not
                callable or `pass_scope` is not a bool or `None`.
        """
        _check_callable_args(name, fn, pass_scope)
        super().__init__(name=name, fn=fn, pass_scope=pass_scope, k=k, **kwargs)
        self._scope_mode = _scope_mode_for(fn, pass_scope=pass_scope)
        self._fn_is_async = _is_async_callable(fn)

    def fetch(
        self,
        query: str,
        scope: Scope | None = None,
        *,
        callbacks: Callbacks = None,
    ) -> list[RetrievalResult]:
        """Call the callable and convert what it returns.

        Args:
            query: The query.
            scope: The run's session, passed on as `pass_scope` says.
            callbacks: LangChain callbacks; runnables and retrievers the callable
                invokes nest under them.

        Returns:
            At most `k` results labelled with this source's name.

        Raises:
            TypeError: If the callable returns something other than an iterable of
                `RetrievalResult`s, `Document`s and strings.
        """
        return self._fetch_capped(query, scope, limit=self.k, callbacks=callbacks)

    async def afetch(
        self,
        query: str,
        scope: Scope | None = None,
        *,
        callbacks: Callbacks = None,
    ) -> list[RetrievalResult]:
        """Async twin of `fetch`: awaits async callables, runs sync ones in an executor.

        Args:
            query: The query.
            scope: The run's session, passed on as `pass_scope` says.
            callbacks: LangChain callbacks; runnables and retrievers the callable
                invokes nest under them.

        Returns:
            At most `k` results labelled with this source's name.

        Raises:
            TypeError: If the callable returns something other than an iterable of
                `RetrievalResult`s, `Document`s and strings.
        """
        return await self._afetch_capped(query, scope, limit=self.k, callbacks=callbacks)

    def _fetch_capped(
        self, query: str, scope: Scope | None, *, limit: int | None, callbacks: Callbacks
    ) -> list[RetrievalResult]:
        """Call the callable (running an awaitable to completion) and convert."""
        with _callbacks_context(callbacks) as ctx:
            raw = ctx.run(self._call_to_completion, query, scope)
        return _results_from(raw, source=self.name, limit=limit)

    async def _afetch_capped(
        self, query: str, scope: Scope | None, *, limit: int | None, callbacks: Callbacks
    ) -> list[RetrievalResult]:
        """Call the callable natively async (sync callables in an executor) and convert."""
        with _callbacks_context(callbacks) as ctx:
            if self._fn_is_async:
                raw = ctx.run(self._call, query, scope)
            else:
                raw = await run_in_executor(None, ctx.run, self._call, query, scope)
            if inspect.isawaitable(raw):
                # A task created inside `ctx` runs in (a copy of) it.
                raw = await ctx.run(asyncio.ensure_future, raw)
        return _results_from(raw, source=self.name, limit=limit)

    def _call(self, query: str, scope: Scope | None) -> object:
        """Call `fn` with the arguments the scope mode says."""
        if self._scope_mode == "positional":
            return self.fn(query, scope)
        if self._scope_mode == "keyword":
            return self.fn(query, scope=scope)
        return self.fn(query)

    def _call_to_completion(self, query: str, scope: Scope | None) -> object:
        """Call `fn` and, if it returned an awaitable, run that to completion."""
        raw = self._call(query, scope)
        if inspect.isawaitable(raw):
            return run_sync(raw)
        return raw


class RetrieverSource(ContextSource):
    """A source backed by any LangChain retriever (or vector store, via `as_retriever`).

    The retriever is invoked with the query (the scope is not passed: a retriever has
    no notion of it) and with the caller's callbacks, so its run nests in traces. A
    document's score comes from its `score` or `relevance_score` metadata, else from
    its rank, `1 / (rank + 1)`. At most `k` documents are kept; the retriever's own
    settings (such as `search_kwargs={"k": ...}`) decide how many come back at all.

    With `embeddings`, the kept documents are embedded in one batched
    `embed_documents` call per fetch (`aembed_documents` in `afetch`) so MMR can tell
    near-duplicates apart; without, results carry no embedding. The vectors never
    appear in the `Document`s that `invoke` returns.

    ```python
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    from langchain_contextkit.sources.base import RetrieverSource

    embeddings = DeterministicFakeEmbedding(size=8)
    store = InMemoryVectorStore.from_texts(
        ["Meals are capped at 80 per day.", "Hotels need a receipt.", "Taxis are fine."],
        embeddings,
    )
    source = RetrieverSource("rag", store.as_retriever(), embeddings=embeddings, k=2)
    results = source.fetch("hotel receipts")
    print(len(results), [r.score for r in results], len(results[0].embedding))
    # 2 [1.0, 0.5] 8
    print(sorted(source.invoke("hotel receipts")[0].metadata))
    # ['contextkit_score', 'contextkit_source']
    ```
    """

    retriever: BaseRetriever
    """The retriever to adapt."""

    embeddings: Embeddings | None = None
    """Embeddings for the results' vectors (used by MMR); `None` leaves them empty."""

    def __init__(
        self,
        name: str,
        retriever: BaseRetriever,
        *,
        embeddings: Embeddings | None = None,
        k: int | None = None,
        **kwargs: Any,  # noqa: ANN401 - other retriever fields (tags, metadata)
    ) -> None:
        """Adapt `retriever` as the source `name`.

        Args:
            name: The budget quota this source draws from.
            retriever: Any LangChain retriever.
            embeddings: Embeddings to compute the results' vectors with, or `None`.
            k: Maximum number of results per fetch; `None` for no cap.
            **kwargs: Other retriever fields (`tags`, `metadata`).

        Raises:
            ConfigError: If `name` is empty, `k` is not an integer >= 1, `retriever`
                is not a `BaseRetriever` or `embeddings` is not an `Embeddings`.
        """
        _check_retriever_args(name, retriever, embeddings)
        super().__init__(name=name, retriever=retriever, embeddings=embeddings, k=k, **kwargs)

    def fetch(
        self,
        query: str,
        scope: Scope | None = None,  # noqa: ARG002 - a retriever has no notion of scope
        *,
        callbacks: Callbacks = None,
    ) -> list[RetrievalResult]:
        """Invoke the retriever and convert its documents.

        Args:
            query: The query.
            scope: Ignored: retrievers are not scoped.
            callbacks: LangChain callbacks for the retriever's run.

        Returns:
            At most `k` results labelled with this source's name, with embeddings when
            `embeddings` is set.
        """
        return self._fetch_capped(query, None, limit=self.k, callbacks=callbacks)

    async def afetch(
        self,
        query: str,
        scope: Scope | None = None,  # noqa: ARG002 - a retriever has no notion of scope
        *,
        callbacks: Callbacks = None,
    ) -> list[RetrievalResult]:
        """Async twin of `fetch`, through `ainvoke` and `aembed_documents`.

        Args:
            query: The query.
            scope: Ignored: retrievers are not scoped.
            callbacks: LangChain callbacks for the retriever's run.

        Returns:
            At most `k` results labelled with this source's name, with embeddings when
            `embeddings` is set.
        """
        return await self._afetch_capped(query, None, limit=self.k, callbacks=callbacks)

    def _fetch_capped(
        self,
        query: str,
        scope: Scope | None,  # noqa: ARG002 - a retriever has no notion of scope
        *,
        limit: int | None,
        callbacks: Callbacks,
    ) -> list[RetrievalResult]:
        """Invoke, cap, embed in one batch, convert."""
        docs = self.retriever.invoke(query, config=RunnableConfig(callbacks=callbacks))
        docs = docs if limit is None else docs[:limit]
        vectors = None
        if self.embeddings is not None and docs:
            vectors = self.embeddings.embed_documents([doc.page_content for doc in docs])
        return self._results(docs, vectors)

    async def _afetch_capped(
        self,
        query: str,
        scope: Scope | None,  # noqa: ARG002 - a retriever has no notion of scope
        *,
        limit: int | None,
        callbacks: Callbacks,
    ) -> list[RetrievalResult]:
        """Async twin of `_fetch_capped`."""
        docs = await self.retriever.ainvoke(query, config=RunnableConfig(callbacks=callbacks))
        docs = docs if limit is None else docs[:limit]
        vectors = None
        if self.embeddings is not None and docs:
            vectors = await self.embeddings.aembed_documents([doc.page_content for doc in docs])
        return self._results(docs, vectors)

    def _results(
        self, docs: Sequence[Document], vectors: Sequence[Sequence[float]] | None
    ) -> list[RetrievalResult]:
        """Convert documents (and their vectors, if any) to results."""
        if vectors is None:
            return [_from_document(doc, rank, self.name) for rank, doc in enumerate(docs)]
        if len(vectors) != len(docs):
            msg = (
                f"source {self.name!r}: embeddings returned {len(vectors)} vectors "
                f"for {len(docs)} documents"
            )
            raise ValueError(msg)
        return [
            _from_document(doc, rank, self.name, embedding=vector)
            for rank, (doc, vector) in enumerate(zip(docs, vectors, strict=True))
        ]


# -- helpers ---------------------------------------------------------------------------


def _check_name(name: object) -> str:
    """Validate a source name (a non-empty string) and return it."""
    if not isinstance(name, str) or not name.strip():
        msg = f"a source needs a non-empty string name, got {name!r}"
        raise ConfigError(msg)
    return name


def _check_k(k: object) -> int | None:
    """Validate a result cap (`None` or an integer >= 1) and return it."""
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int):
        msg = f"k must be an integer >= 1 or None, got {type(k).__name__}: {k!r}"
        raise ConfigError(msg)
    if k < 1:
        msg = f"k must be >= 1 or None, got {k}"
        raise ConfigError(msg)
    return k


def _check_callable_args(name: str, fn: object, pass_scope: object) -> None:
    """Validate `CallableSource` arguments (typed `object`: they come from users)."""
    if not callable(fn):
        msg = f"source {name!r}: fn must be callable, got {type(fn).__name__}"
        raise ConfigError(msg)
    if pass_scope is not None and not isinstance(pass_scope, bool):
        msg = f"source {name!r}: pass_scope must be True, False or None, got {pass_scope!r}"
        raise ConfigError(msg)


def _check_retriever_args(name: str, retriever: object, embeddings: object) -> None:
    """Validate `RetrieverSource` arguments (typed `object`: they come from users)."""
    if not isinstance(retriever, BaseRetriever):
        msg = (
            f"source {name!r}: retriever must be a BaseRetriever (for a vector store, "
            f"pass store.as_retriever()), got {type(retriever).__name__}"
        )
        raise ConfigError(msg)
    if embeddings is not None and not isinstance(embeddings, Embeddings):
        msg = (
            f"source {name!r}: embeddings must be an Embeddings instance, "
            f"got {type(embeddings).__name__}"
        )
        raise ConfigError(msg)


def _scope_mode_for(fn: Callable[..., Any], *, pass_scope: bool | None) -> _ScopeMode:
    """Decide how `fn` gets the scope (see `CallableSource`)."""
    if pass_scope is True:
        return "keyword"
    if pass_scope is False:
        return "none"
    return "positional" if _takes_two_positional(fn) else "none"


def _takes_two_positional(fn: Callable[..., Any]) -> bool:
    """Tell whether `fn` accepts at least two positional arguments.

    Callables whose signature cannot be inspected count as taking one.
    """
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError, NameError):
        return False
    positional = 0
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return True
        if parameter.kind in {
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        }:
            positional += 1
    return positional >= _POSITIONAL_FOR_SCOPE


def _is_async_callable(fn: Callable[..., Any]) -> bool:
    """Tell whether calling `fn` certainly returns a coroutine."""
    if inspect.iscoroutinefunction(fn):
        return True
    # A callable object whose class defines `async def __call__`.
    return inspect.iscoroutinefunction(getattr(type(fn), "__call__", None))  # noqa: B004


@contextmanager
def _callbacks_context(callbacks: Callbacks) -> Iterator[Context]:
    """A context in which runnables invoked by user code nest under `callbacks`."""
    if callbacks is None:
        yield copy_context()
        return
    config = ensure_config()
    config["callbacks"] = callbacks
    config.pop("run_name", None)  # they named the parent's run, not the children's
    config.pop("run_id", None)
    with set_config_context(config) as ctx:
        yield ctx


def _relabel(result: RetrievalResult, source: str) -> RetrievalResult:
    """`result` with `source` as its source (the same object if it already is)."""
    if result.source == source:
        return result
    return dataclasses.replace(result, source=source)


def _document_score(doc: Document, rank: int, source: str) -> float:
    """A document's score from its metadata, else from its rank."""
    for key in _SCORE_KEYS:
        value = doc.metadata.get(key)
        if value is None:
            continue
        try:
            return float(value)
        except (TypeError, ValueError):
            msg = (
                f"source {source!r}: document at position {rank} has a non-numeric "
                f"{key!r} in its metadata: {value!r}"
            )
            raise TypeError(msg) from None
    return 1.0 / (rank + 1)


def _from_document(
    doc: Document, rank: int, source: str, *, embedding: Sequence[float] | None = None
) -> RetrievalResult:
    """Convert a document at position `rank` to a result of `source`."""
    return RetrievalResult.from_document(
        doc, source=source, score=_document_score(doc, rank, source), embedding=embedding
    )


def _results_from(raw: object, *, source: str, limit: int | None) -> list[RetrievalResult]:
    """Convert what a source's callable returned to at most `limit` results."""
    if (
        raw is None
        or isinstance(raw, (str, bytes, Document, RetrievalResult, Mapping))
        or not isinstance(raw, Iterable)
    ):
        msg = (
            f"source {source!r}: the callable must return a list of RetrievalResult, "
            f"Document or str, got {type(raw).__name__}"
        )
        raise TypeError(msg)
    items = list(raw) if limit is None else list(islice(raw, limit))
    results = []
    for rank, item in enumerate(items):
        if isinstance(item, RetrievalResult):
            results.append(_relabel(item, source))
        elif isinstance(item, Document):
            results.append(_from_document(item, rank, source))
        elif isinstance(item, str):
            results.append(RetrievalResult(content=item, score=1.0 / (rank + 1), source=source))
        else:
            msg = (
                f"source {source!r}: the callable returned a {type(item).__name__} at "
                f"position {rank}; expected RetrievalResult, Document or str"
            )
            raise TypeError(msg)
    return results
