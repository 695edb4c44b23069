"""A compaction's bounded cold start, its summariser meter, and recaps shared through a store.

A call that finds no recap in force for a long history would summarise it epoch by
epoch: one summariser call per grid step of the window (15 calls for 2,000 messages at
8k). Beyond `cold_start_calls` epochs, everything before the newest epoch is folded
into one extractive recap read once (`_cold_fold.fold_recap`: deterministic, local, no
call), and the summariser writes only the newest epoch, extending it. The summariser
calls of the whole compaction are metered (`SummarizerMeter`) and bounded: one more
than the bound fails the attempt, and the extractive recap takes over.

Recaps are kept by the digest of the messages they cover, first in this process's
memo, then in a `RecapStore` (any LangGraph `BaseStore`) that many workers share: a
worker asks the store for the grid's cuts of its plan before it summarises, and writes
back every recap it made.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from langchain_contextkit.compaction._compactor_core import CompactorCore
from langchain_contextkit.compaction.recap_store import SharedRecap, recap_key

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from langchain_core.messages import BaseMessage

    from langchain_contextkit.compaction._plan import Plan

__all__ = ["DEFAULT_COLD_START_CALLS", "ColdStart", "SummarizerMeter"]

DEFAULT_COLD_START_CALLS = 2
"""Summariser calls a compaction that finds no recap may make (`HistoryCompactor`)."""


class _OverBoundError(RuntimeError):
    """A cold start's summariser calls went over their bound.

    Never seen by a caller: the compactor records it as the attempt's error and the
    extractive recap follows (a control-flow signal, not part of the error tree).
    """


@dataclasses.dataclass(slots=True)
class SummarizerMeter:
    """Counts a compaction's summariser calls and the characters they send; bounds them."""

    limit: int | None = None
    """Calls allowed (None: any number); one more fails the summariser's attempt."""
    calls: int = 0
    chars: int = 0

    def _count(self, chars: int) -> None:
        if self.limit is not None and self.calls >= self.limit:
            msg = f"more than {self.limit} summariser calls on a cold start"
            raise _OverBoundError(msg)
        self.calls += 1
        self.chars += chars

    def text(self, summarize: Callable[[str, str], str]) -> Callable[[str, str], str]:
        """`summarize(text, instruction)`, metered."""

        def metered(text: str, instruction: str) -> str:
            self._count(len(text) + len(instruction))
            return summarize(text, instruction)

        return metered

    def atext(
        self, asummarize: Callable[[str, str], Awaitable[str]]
    ) -> Callable[[str, str], Awaitable[str]]:
        """Async `text`."""

        async def metered(text: str, instruction: str) -> str:
            self._count(len(text) + len(instruction))
            return await asummarize(text, instruction)

        return metered

    def view(
        self, summarize_view: Callable[[list[BaseMessage], str], str | None]
    ) -> Callable[[list[BaseMessage], str], str | None]:
        """`summarize_view(view, instruction)`, metered (its messages' text counted)."""

        def metered(view: list[BaseMessage], instruction: str) -> str | None:
            self._count(_view_chars(view) + len(instruction))
            return summarize_view(view, instruction)

        return metered

    def aview(
        self, asummarize_view: Callable[[list[BaseMessage], str], Awaitable[str | None]]
    ) -> Callable[[list[BaseMessage], str], Awaitable[str | None]]:
        """Async `view`."""

        async def metered(view: list[BaseMessage], instruction: str) -> str | None:
            self._count(_view_chars(view) + len(instruction))
            return await asummarize_view(view, instruction)

        return metered


def _view_chars(view: Sequence[BaseMessage]) -> int:
    return sum(len(message.text) for message in view)


class ColdStart(CompactorCore):
    """The bounded cold start and the shared recaps of `HistoryCompactor` (module docs)."""

    cold_start_calls: int
    _recap_settings: str

    def _bounded(self, plan: Plan) -> SummarizerMeter:
        """Fold all but the newest epoch of a cold plan over the bound; its meter.

        Cold: no recap in force. A plan of at most `cold_start_calls` epochs runs as it
        did; the meter then only counts.
        """
        epochs = plan.epochs()
        if plan.previous is not None or len(epochs) <= self.cold_start_calls:
            return SummarizerMeter()
        plan.folded = epochs[-1][0]  # pending[:folded] is read once, extractively
        return SummarizerMeter(limit=self.cold_start_calls)

    def _shared_keys(self, plan: Plan) -> list[str]:
        """The keys a store may hold a recap for: the plan's grid cuts, newest first."""
        return [self._key(d, plan) for d in reversed(plan.cut_digests) if d is not None]

    def _adopt(self, plan: Plan, found: Mapping[str, SharedRecap]) -> bool:
        """Put the newest recap `found` for `plan`'s cuts in the memo; whether there was one."""
        for digest in reversed(plan.cut_digests):
            shared = None if digest is None else found.get(self._key(digest, plan))
            if digest is not None and shared is not None:
                self._recaps.put(digest, shared.recap)
                if shared.floor is not None:
                    self._floors.put(digest, shared.floor)
                return True
        return False

    def _shared_entries(self, plan: Plan) -> list[tuple[str, SharedRecap]]:
        """The recaps this call made for `plan`, keyed for the store."""
        return [
            (self._key(digest, plan), SharedRecap(recap, floor))
            for digest, recap, floor in plan.fresh
        ]

    def _key(self, digest: str, plan: Plan) -> str:
        return recap_key(digest, plan.cap, self._recap_settings)
