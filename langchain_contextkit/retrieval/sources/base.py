"""Context sources: where the builder's candidates come from.

A source ([`ContextSource`][langchain_contextkit.retrieval.sources.base.ContextSource]) is a
LangChain `BaseRetriever` with a `name` (the budget quota it draws from) that returns
[`RetrievalResult`][langchain_contextkit.retrieval.result.RetrievalResult]s from
`fetch(query, scope=None)` and its async twin `afetch`. Most of the time you do not subclass
anything: `CallableSource` adapts a function, `RetrieverSource` any retriever or vector store.
"""

from __future__ import annotations

import dataclasses
import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.config import run_in_executor

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.retrieval.result import RetrievalResult

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
        Callbacks,
    )
    from langchain_core.documents import Document

__all__ = ["ContextSource", "Scope"]

# Document metadata keys read as a relevance score, in order of preference.
_SCORE_KEYS = ("score", "relevance_score")


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
    from langchain_contextkit.retrieval.sources.base import Scope

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
    async I/O (the default runs `fetch` in an executor). As a `BaseRetriever`, a source
    also answers `invoke(query, scope=..., k=...)` and `ainvoke`, returning `Document`s
    whose metadata carries `contextkit_score` and `contextkit_source` (never the
    embedding); results are relabelled with `name` and capped at `k` (a `k` passed to
    `invoke` replaces the source's own for that call).

    `fetch`'s keyword-only `callbacks` are LangChain callbacks to pass to any runnable the
    source calls, so traces nest under the caller's run; a subclass may leave it out of
    its signature, and it is then never passed.

    ```python
    from langchain_contextkit.retrieval.result import RetrievalResult
    from langchain_contextkit.retrieval.sources.base import ContextSource, Scope


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
        """Async twin of `fetch`; by default runs `fetch` in an executor."""
        return await run_in_executor(None, self._call_fetch, query, scope, callbacks)

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        scope: Scope | None = None,
        k: int | None = None,
    ) -> list[Document]:
        """Fetch at most `k` results (this call's `k`, else the source's) as `Document`s."""
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
        """Async twin of `_get_relevant_documents`, through `afetch`."""
        limit = self.k if k is None else _check_k(k)
        results = await self._afetch_capped(
            query, scope, limit=limit, callbacks=run_manager.get_child()
        )
        return [result.to_document() for result in results]

    def collect(
        self, query: str, scope: Scope | None = None, *, callbacks: Callbacks = None
    ) -> list[RetrievalResult]:
        """Fetch as the builder does: capped at `k`, labelled with `name`, type-checked.

        Callbacks are passed only to a `fetch` that accepts them; a result that is not a
        `RetrievalResult` is a `TypeError` naming the source.
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
        """Fetch at most `limit` results labelled with `name`.

        Adapters override it so that a per-call `k` can raise the cap, not only lower it.
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
