"""Fetching from sources: every source's candidates, failures and timings of one query.

A `Gathered` is what the builder budgets; keeping it lets a caller budget the same
candidates again (an agent's retry after a refusal) without fetching them twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from langchain_contextkit.retrieval.sources.base import Scope

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.callbacks import Callbacks

    from langchain_contextkit.retrieval.result import RetrievalResult
    from langchain_contextkit.retrieval.sources.base import ContextSource

__all__ = ["Gathered", "agather", "gather"]

logger = logging.getLogger(__name__)


class Gathered:
    """Candidates per source (in the sources' order), failures and timings of one gather.

    Example:
        ```python
        from langchain_contextkit.retrieval.builder.gather import gather
        from langchain_contextkit.retrieval.result import RetrievalResult
        from langchain_contextkit.retrieval.sources.callable import CallableSource

        faq = CallableSource(
            "faq", lambda query: [RetrievalResult(f"About {query}", 0.9, "faq")], section="rag"
        )
        gathered = gather("refunds", [faq])
        print(gathered.results["faq"][0].content, gathered.errors)
        # About refunds {}
        ```
    """

    def __init__(self) -> None:
        """Start empty."""
        self.results: dict[str, list[RetrievalResult]] = {}
        self.errors: dict[str, str] = {}
        self.seconds: dict[str, float] = {}

    def record_failure(self, source: ContextSource, exc: Exception, *, strict: bool) -> None:
        """Note a failed source (no candidates, its error kept); re-raise when `strict`."""
        if strict:
            raise exc
        logger.warning("context source %r failed, building without it: %r", source.name, exc)
        self.results[source.name] = []
        self.errors[source.name] = f"{type(exc).__name__}: {exc}"


def gather(
    query: str,
    sources: Sequence[ContextSource],
    scope: Scope | None = None,
    callbacks: Callbacks = None,
    *,
    strict: bool = False,
) -> Gathered:
    """Fetch `query` from every source in turn; a failing source gives no candidates.

    Raises:
        Exception: A source's error, when `strict`.
    """
    gathered = Gathered()
    # Callables that take a scope always get one, if only an empty one.
    scope = scope if scope is not None else Scope()
    for source in sources:
        start = time.perf_counter()
        try:
            results = source.collect(query, scope, callbacks=callbacks)
        except Exception as exc:  # noqa: BLE001 - one failing source must not sink the build
            gathered.record_failure(source, exc, strict=strict)
        else:
            gathered.results[source.name] = list(results)
        gathered.seconds[source.name] = time.perf_counter() - start
    return gathered


async def agather(
    query: str,
    sources: Sequence[ContextSource],
    scope: Scope | None = None,
    callbacks: Callbacks = None,
    *,
    strict: bool = False,
) -> Gathered:
    """Async `gather`: every source fetched concurrently, results in the sources' order.

    Raises:
        Exception: A source's error, when `strict`.
    """
    gathered = Gathered()
    scope = scope if scope is not None else Scope()

    async def one(source: ContextSource) -> None:
        start = time.perf_counter()
        try:
            results = await source.acollect(query, scope, callbacks=callbacks)
        except Exception as exc:  # noqa: BLE001 - one failing source must not sink the build
            gathered.record_failure(source, exc, strict=strict)
        else:
            gathered.results[source.name] = list(results)
        gathered.seconds[source.name] = time.perf_counter() - start

    await asyncio.gather(*(one(source) for source in sources))
    # Keep the order of `sources`, whatever order the fetches finished in.
    gathered.results = {s.name: gathered.results[s.name] for s in sources}
    return gathered
