"""`CallableSource`: a context source over a function, sync or async.

The function takes `(query)` or `(query, scope)` and returns results, `Document`s or
strings; a sync source over an async function runs it through the one sync-over-async
bridge (`_async.run_sync`).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager
from contextvars import Context, copy_context
from itertools import islice
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.documents import Document
from langchain_core.runnables.config import (
    ensure_config,
    run_in_executor,
    set_config_context,
)
from pydantic import PrivateAttr

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.retrieval._async import run_sync
from langchain_contextkit.retrieval.result import RetrievalResult
from langchain_contextkit.retrieval.sources.base import (
    ContextSource,
    Scope,
    _from_document,
    _relabel,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from langchain_core.callbacks import Callbacks

__all__ = ["CallableSource"]

# How `CallableSource` hands the run's scope to its callable.
_ScopeMode = Literal["positional", "keyword", "none"]

# Positional parameters a callable needs to get the scope as its second argument.
_POSITIONAL_FOR_SCOPE = 2


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

    from langchain_contextkit.retrieval.result import RetrievalResult
    from langchain_contextkit.retrieval.sources.base import Scope
    from langchain_contextkit.retrieval.sources.callable import CallableSource


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
        """Call the callable (an awaitable it returns is run to completion) and convert.

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
        """Async twin of `fetch`: awaits async callables, runs sync ones in an executor."""
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


def _check_callable_args(name: str, fn: object, pass_scope: object) -> None:
    """Validate `CallableSource` arguments (typed `object`: they come from users)."""
    if not callable(fn):
        msg = f"source {name!r}: fn must be callable, got {type(fn).__name__}"
        raise ConfigError(msg)
    if pass_scope is not None and not isinstance(pass_scope, bool):
        msg = f"source {name!r}: pass_scope must be True, False or None, got {pass_scope!r}"
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
