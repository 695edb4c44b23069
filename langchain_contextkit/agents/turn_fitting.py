"""How the current turn is fitted beside the history: what gives way, in order.

The recap's share is lent while the history does not need it; then the turn's tool loop
is reduced, its largest results are cut to head and tail, the retrieval block is left
out, and the output reserve shrinks to `OUTPUT_RESERVE_FLOOR`. When even that fails,
one refusal names the parts that do not fit (`_irreducible`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from langchain_contextkit.agents.request_layout import RequestLayout, message_tokens
from langchain_contextkit.agents.retrieval_block import block_message
from langchain_contextkit.errors import ContextWindowExceeded
from langchain_contextkit.reducers.agent import reduce_agent
from langchain_contextkit.tokens import (
    REPLY_PRIMING,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from typing import TypeAlias

    from langchain_core.messages import BaseMessage, HumanMessage

    from langchain_contextkit.agents.offload import (
        OffloadOutcome,
    )
    from langchain_contextkit.agents.result_cutter import CutTurn, ResultCutter
    from langchain_contextkit.builder.report import ContextReport
    from langchain_contextkit.calibration import Calibration
    from langchain_contextkit.compaction.compactor import (
        RunningSummary,
    )
    from langchain_contextkit.messages import (
        MessageRepair,
        SystemPlacement,
    )
    from langchain_contextkit.window_budget import WindowBudget

    _Cut: TypeAlias = Callable[[list[BaseMessage], int | None], Awaitable[CutTurn | None]]
    """`ResultCutter.acut`'s shape; a target of None cuts every result to its marker."""

__all__ = ["OUTPUT_RESERVE_FLOOR", "TurnFitting"]

OUTPUT_RESERVE_FLOOR = 256
"""The output reserve shrinks to this (or stays below it if it was) before a request is
refused: room for a tool call or a short answer. When the model's own `max_tokens` is
larger, the middleware lowers it for that call, so the provider does not refuse the
request for the prompt plus the completion it asked for."""


_RECAP_MESSAGE = 16
"""Tokens a recap message adds to its text (heading and message overhead), generously."""


class TurnFitting(RequestLayout):
    """Fits the current turn into the room the ledger leaves (a base of `WindowAssembler`)."""

    reduce_trajectory: bool
    keep_recent_steps: int

    def _turn_room(self, budget: WindowBudget, block: HumanMessage | None) -> int:
        """What the current turn may take: the ceiling minus the fixed parts and block."""
        block_tokens = message_tokens([block], self.counter)
        return budget.ceiling - budget.fixed - block_tokens - REPLY_PRIMING

    def _recap_room(self, room: int) -> int:
        """Room kept for the history's recap: a full one, but at most a quarter of `room`."""
        cap = self.compactor.max_summary_tokens
        if self.compactor.sized_by_window:
            cap = self.compactor.marks(max(1, room)).recap
        return min(cap + 16, room // 4)

    def _history_need(
        self,
        history: Sequence[BaseMessage],
        summary: RunningSummary | None,
        room: int,
        *,
        lend: bool = True,
    ) -> int:
        """The least the history must keep beside the turn: nothing when there is none.

        A history is compacted to its recap at worst, and a short one needs no more
        than itself, so the recap's share is lent to the turn whenever it is idle
        (`lend=False`: a full recap share whenever there is a history).
        """
        if not history and summary is None:
            return 0
        if not lend:
            return self._recap_room(room)
        own = message_tokens(history, self.counter)
        if summary is not None:
            own += self.counter(summary.text) + _RECAP_MESSAGE
        return min(own, self._recap_room(room))

    def _fit_as_is(
        self,
        history: Sequence[BaseMessage],
        summary: RunningSummary | None,
        turn: list[BaseMessage],
        start: Start,
        report: ContextReport | None,
    ) -> Fit | None:
        """The common case: the turn fits beside a full recap share (None otherwise)."""
        block = block_message(report)
        room = self._turn_room(start.budget, block)
        tokens = message_tokens(turn, self.counter)
        if tokens <= room - self._recap_room(room) or (
            not self.reduce_trajectory
            and tokens <= room - self._history_need(history, summary, room)
        ):
            return Fit(
                turn,
                reduced=False,
                block=block,
                report=report,
                budget=start.budget,
                real=start.real,
            )
        return None

    async def _fit(  # noqa: PLR0917 - the call's parts, in layout order
        self,
        history: Sequence[BaseMessage],
        summary: RunningSummary | None,
        turn: list[BaseMessage],
        start: Start,
        report: ContextReport | None,
        cut: _Cut,
        *,
        lend: bool = True,
    ) -> Fit:
        """Fit a turn that outgrew its share: see `aassemble` for what gives way, in order."""
        stages = [(start.real, report)]
        if report is not None:
            stages.append((start.real, None))
        floor = min(start.real.output_reserve, OUTPUT_RESERVE_FLOOR)
        if floor < start.real.output_reserve:
            stages.append((replace(start.real, output_reserve=floor), None))
        need = 0
        for real, stage_report in stages:
            budget = real.calibrated(start.calibration, start.shrink)
            block = block_message(stage_report)
            room = self._turn_room(budget, block)
            need = self._history_need(history, summary, room, lend=lend)
            fitted = await self._fit_within(turn, room - need, cut)
            if fitted is not None:
                view, reduced, cut_turn = fitted
                return Fit(
                    view,
                    reduced=reduced,
                    block=block,
                    report=stage_report,
                    budget=budget,
                    real=real,
                    cut=cut_turn,
                )
        smallest = await cut(turn, None)
        rest = turn if smallest is None else smallest.messages
        raise self._irreducible(rest, stages[-1][0], start, need)

    async def _fit_within(
        self, turn: list[BaseMessage], target: int, cut: _Cut
    ) -> tuple[list[BaseMessage], bool, CutTurn | None] | None:
        """The turn within `target`: as is, reduced, cut, or cut and reduced (None: no)."""
        if target <= 0:
            return None
        if message_tokens(turn, self.counter) <= target:
            return turn, False, None
        if self.reduce_trajectory:
            reduced = await self._reduce(turn, target)
            if reduced is not None:
                return reduced, True, None
        shown = await cut(turn, target)
        if shown is not None:
            return shown.messages, False, shown
        if self.reduce_trajectory:
            markers = await cut(turn, None)  # every result down to its marker line
            if markers is not None:
                reduced = await self._reduce(markers.messages, target)
                if reduced is not None:
                    return reduced, True, markers
        return None

    async def _reduce(self, turn: list[BaseMessage], target: int) -> list[BaseMessage] | None:
        """`reduce_agent` to `target`, keeping fewer recent steps verbatim if it must.

        None when even the task and the last step alone do not fit.
        """
        for steps in sorted({self.keep_recent_steps, 1, 0}, reverse=True):
            if steps > self.keep_recent_steps:
                continue
            try:
                return await reduce_agent(
                    turn,
                    target + REPLY_PRIMING,
                    counter=self.counter,
                    keep_recent_steps=steps,
                    prompts=self.compactor.prompts,
                )
            except ContextWindowExceeded:
                continue
        return None

    def _irreducible(
        self, turn: list[BaseMessage], real: WindowBudget, start: Start, history: int
    ) -> ContextWindowExceeded:
        """The one refusal: the fixed parts and the user's message leave no room.

        `turn` is the current turn at its smallest (every tool result cut to its marker)
        and `history` what the earlier conversation needs at least (its recap).
        """
        budget = real.calibrated(start.calibration, start.shrink)
        question = message_tokens(turn[:1], self.counter)
        rest = message_tokens(turn[1:], self.counter)
        ceiling = budget.ceiling
        fixed = budget.fixed + question + REPLY_PRIMING
        msg = (
            f"nothing can be sent: the system prompt ({budget.system_tokens} tokens), the "
            f"tool schemas ({budget.tool_tokens}) and the user's last message ({question}) "
            f"take {fixed} tokens; with the rest of the turn at its smallest ({rest}, every "
            f"tool result cut to its marker) and the earlier conversation's recap ({history}) "
            f"that exceeds the {ceiling} tokens the window ({real.window}) leaves for input "
            f"in the counter's tokens with the output reserve at its floor "
            f"({budget.output_reserve})"
        )
        return ContextWindowExceeded(msg, required=fixed + rest + history, budget=ceiling)


@dataclass(slots=True)
class Start:
    """What one call starts from: its ledger (real and in the counter's tokens), the view."""

    real: WindowBudget
    budget: WindowBudget
    calibration: Calibration | None
    shrink: int
    view: list[BaseMessage]
    room: int
    repairs: list[MessageRepair]
    placement: SystemPlacement
    offload: OffloadOutcome | None = None
    history_cut: CutTurn | None = None


@dataclass(frozen=True, slots=True, kw_only=False)
class Fit:
    """The current turn as it will be sent, and the ledger and block it was fitted under."""

    turn: list[BaseMessage]
    reduced: bool
    block: HumanMessage | None
    report: ContextReport | None
    budget: WindowBudget
    real: WindowBudget
    cut: CutTurn | None = None


def sync_cut(cutter: ResultCutter) -> _Cut:
    """The cutter's sync `cut` in the shape `_fit` awaits (the store's sync `save`)."""

    async def cut(turn: list[BaseMessage], target: int | None) -> CutTurn | None:
        return cutter.cut(turn, target)

    return cut
