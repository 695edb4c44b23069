"""Where a compaction cuts: the seed's trigger, or the window's grid in an agent."""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_contextkit.compaction._chunked_summary import stated_cap
from langchain_contextkit.compaction._compactor_core import CompactorCore
from langchain_contextkit.compaction._recap_grid import WaterMarks, grid_cuts
from langchain_contextkit.compaction.recap import CompactionResult, RunningSummary, ViewParts
from langchain_contextkit.messages import (
    message_costs,
    tail_start,
    unit_starts,
)
from langchain_contextkit.tokens import REPLY_PRIMING, count_message_tokens

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.messages import BaseMessage

    from langchain_contextkit.compaction._history_index import HistoryArrays
    from langchain_contextkit.prompts import Fidelity


logger = logging.getLogger(__name__)


@dataclass(slots=True)
class Plan:
    """Everything decided before the summariser runs."""

    system: list[BaseMessage]
    pending: list[BaseMessage]  # messages after the system prefix not yet summarised
    covered: int
    previous: str | None
    current: RunningSummary | None  # the summary in force before this call
    cut: int  # pending[:cut] ages out
    tokens_before: int
    overhead: int
    view: list[BaseMessage]  # the view before this compaction, as the model saw it
    cap: int  # the recap's cap for this call
    digest: str | None = None  # names pending[:cut] with what precedes it (sized plans)
    summarizer_window: int | None = None  # the transcript summariser's window, when known
    # Sized plans: the grid's cuts inside pending[:cut] (the last is `cut`), each with the
    # digest of what it covers; a chain of recaps walks them in order.
    cuts: tuple[int, ...] = ()
    cut_digests: tuple[str | None, ...] = ()
    fidelity: Fidelity | None = None  # the tier the extractive recap was written at
    cap_scale: float = 1.0  # the summariser's tokens per counter token (the stated cap)
    floor: str | None = None  # the extractive recap of this plan, once made: a model's floor
    previous_floor: str | None = None  # the floor in force (None: `previous` is its own)
    arrays: HistoryArrays | None = None  # sized plans: the arrays of the history after `system`
    # A bounded cold start: pending[:folded] is one epoch, read once by the extractive fold.
    folded: int = 0
    # Recaps this call made, by the digest they cover: (digest, recap, floor), to share.
    fresh: list[tuple[str, str, str | None]] = dataclasses.field(default_factory=list)
    # The fold, once made (the model's chain and its floor's both start with it).
    fold: tuple[int, str | None, str, Fidelity | None] | None = None

    def epochs(self) -> list[tuple[int, int, str | None]]:
        """`(start, end, digest)` of each epoch in pending: one, unless the grid has more.

        The epochs a cold start folds (`folded`) are one, ending where the last of them ends.
        """
        if not self.cuts:
            return [(0, self.cut, self.digest)]
        starts = (0, *self.cuts[:-1])
        epochs = list(zip(starts, self.cuts, self.cut_digests, strict=True))
        if self.folded:
            inside = [epoch for epoch in epochs if epoch[1] <= self.folded]
            epochs = [(0, inside[-1][1], inside[-1][2]), *epochs[len(inside) :]]
        return epochs


class Planner(CompactorCore):
    """Plans a compaction: what ages out, under which cap, from which recap."""

    def _plan(
        self,
        history: Sequence[BaseMessage],
        summary: RunningSummary | None,
        overhead: int,
        ceiling: int | None,
        room: int | None = None,
        *,
        reuse: bool = True,
    ) -> Plan | CompactionResult:
        if room is not None and self.sized_by_window:
            return self._plan_sized(history, summary, overhead, ceiling, room, reuse=reuse)
        system, rest, previous = self._split_recap(history)
        covered = 0
        if previous is None and summary is not None:
            previous, covered = self._summary_in_force(summary, rest, None)
        pending = rest[covered:]
        parts = self._parts(system, previous, covered, pending)
        view = parts.messages
        before = self._tokens(view, overhead)
        current = summary if previous is not None and summary is not None else None
        if previous is not None and current is None:
            current = RunningSummary(previous, covered, None)

        over_ceiling = ceiling is not None and before > ceiling
        units = len(unit_starts(pending))
        if not over_ceiling and (before <= self.trigger_tokens or units <= self.keep_recent):
            return _as_is(parts, current, before)

        costs = message_costs(pending, self.token_counter)
        recap_reserve = self.max_summary_tokens + self._heading_tokens()
        fixed = self._tokens(system, overhead) + (0 if system else REPLY_PRIMING) + recap_reserve
        target = self.target_tokens if ceiling is None else min(self.target_tokens, ceiling)
        cut = tail_start(pending, target - fixed, costs=costs, min_units=self.keep_recent)
        if ceiling is not None and fixed + sum(costs[cut:]) > ceiling:
            # The kept turns alone would overflow the window: keep fewer (at least one).
            cut = tail_start(pending, ceiling - fixed, costs=costs, min_units=1)
        if cut == 0:
            return _as_is(parts, current, before)

        return Plan(
            system,
            pending,
            covered,
            previous,
            current,
            cut,
            before,
            overhead,
            view,
            cap=self.max_summary_tokens,
            previous_floor=None if current is None else current.floor,
        )

    def _view_instruction(self, plan: Plan) -> str:
        """The in-place summary's instruction: all of the view but its kept tail."""
        return self.prompts.view_summary_instruction(
            max_tokens=stated_cap(plan.cap, plan.cap_scale),
            keep_last=len(plan.pending) - plan.cut,
            fidelity=self.fidelity,
        )

    def marks(self, room: int) -> WaterMarks:
        """The high- and low-water marks of a history room of `room` tokens (sized mode)."""
        marks = WaterMarks.for_room(room, max_summary_tokens=self.max_summary_tokens)
        target = self.config.target_tokens
        if target is not None and target < marks.high:
            marks = dataclasses.replace(marks, low=target)
        return marks

    def _summary_in_force(
        self, summary: RunningSummary, rest: Sequence[BaseMessage], digests: Sequence[str] | None
    ) -> tuple[str | None, int]:
        """The state's summary and what it covers, or nothing when it does not match."""
        if _summary_fits(summary, rest, digests):
            return summary.text, summary.covered
        logger.warning(
            "running summary (covering %d messages) does not match this history; ignoring it",
            summary.covered,
        )
        return None, 0

    def _latest_known(
        self, starts: Sequence[int], base: int, digests: Sequence[str]
    ) -> tuple[str, int] | None:
        """A recap this process already made for the latest possible cut, and that cut.

        A caller that re-sends the whole list and keeps no state gets the same text, so
        the same prefix, as the call that made it.
        """
        cut = self._newest_known.find(starts, base, digests)
        text = None if cut is None else self._recaps.get(digests[cut])
        return None if cut is None or text is None else (text, cut)

    def _plan_sized(
        self,
        history: Sequence[BaseMessage],
        summary: RunningSummary | None,
        overhead: int,
        ceiling: int | None,
        room: int,
        *,
        reuse: bool = True,
    ) -> Plan | CompactionResult:
        """Plan a window-sized compaction: cuts on the history's own grid (module docs)."""
        system, rest, previous = self._split_recap(history)
        marks = self.marks(room)
        # Costs, unit starts and digests of the history, extended by what is new since
        # the last call on it (`_history_index`), not recomputed from its start.
        arrays = self._index.arrays(rest)
        costs, starts = arrays.costs, arrays.starts
        # A recap inside the list (a compacted list fed back) has no content address.
        digests = arrays.digests if previous is None else None
        base = 0
        previous_floor: str | None = None
        if previous is None and summary is not None:
            previous, base = self._summary_in_force(summary, rest, digests)
            previous_floor = summary.floor if previous is not None else None
        if digests is not None and reuse:
            # A recap this process made for a later point (a caller that re-sends the whole
            # list and keeps no state): any unit start, as a call whose turn did not fit
            # may have cut off the grid (forced), and its checkpointed twin went on from there.
            known = self._latest_known(starts, base, digests)
            if known is not None:
                previous, base = known
                previous_floor = self._floors.get(digests[base])
        heading = self._heading_tokens()
        fixed = self._tokens(system, 0) + (0 if system else REPLY_PRIMING) + marks.recap + heading
        limit = None if ceiling is None else ceiling - overhead

        def cuts_from(start: int, *, forced: bool) -> list[int]:
            return grid_cuts(
                costs,
                starts,
                base=start,
                fixed=fixed,
                marks=marks,
                min_units=1 if forced else self.keep_recent,
                limit=limit,
                settled=not forced,
                totals=arrays.totals,
                unit_totals=arrays.unit_totals,
            )

        cuts = cuts_from(base, forced=False)
        end = cuts[-1] if cuts else base
        if limit is not None and fixed + arrays.cost(end) > limit:
            # The window wins over keep_recent and the grid's settling for this call.
            cuts += cuts_from(end, forced=True)
        target = cuts[-1] if cuts else base
        pending = rest[base:]
        parts = self._parts(system, previous, base, pending, (arrays, base))
        view = parts.messages
        # The view's head (system prefix, recap) is counted; its tail is the history's own.
        head = view[: len(view) - len(pending)]
        before = (
            count_message_tokens(head, self.token_counter, reply_priming=False)
            + arrays.cost(base)
            + (REPLY_PRIMING if view else 0)
            + overhead
        )
        current = None
        if previous is not None:
            current = RunningSummary(
                previous,
                base,
                _last_id(rest, base),
                None if digests is None else digests[base],
                previous_floor,
            )
        if target == base:
            return _as_is(parts, current, before)
        return Plan(
            system,
            pending,
            base,
            previous,
            current,
            target - base,
            before,
            overhead,
            view,
            cap=marks.recap,
            digest=None if digests is None else digests[target],
            cuts=tuple(c - base for c in cuts),
            cut_digests=tuple(None if digests is None else digests[c] for c in cuts),
            previous_floor=previous_floor,
            arrays=arrays,
        )


def _as_is(parts: ViewParts, current: RunningSummary | None, tokens: int) -> CompactionResult:
    """The view unchanged: no summary was made in this call."""
    return CompactionResult(
        parts.messages,
        current,
        compacted=False,
        summarizer=None,
        tokens_before=tokens,
        tokens_after=tokens,
        parts=parts,
    )


def _summary_fits(
    summary: RunningSummary, rest: Sequence[BaseMessage], digests: Sequence[str] | None = None
) -> bool:
    """Whether `summary` can describe the first `summary.covered` messages of `rest`."""
    if summary.covered > len(rest):
        return False
    if summary.digest is not None and digests is not None:
        return digests[summary.covered] == summary.digest
    if summary.covered == 0 or summary.last_id is None:
        return True
    return rest[summary.covered - 1].id == summary.last_id


def _last_id(rest: Sequence[BaseMessage], covered: int) -> str | None:
    last = rest[covered - 1].id if covered else None
    return last if isinstance(last, str) else None
