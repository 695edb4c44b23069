"""One ledger per model call: lay a request out under the window, cache-first.

`WindowAssembler` is what `ContextKitMiddleware` and `context_node` run before every
model call. From the model's window it computes the call's `WindowBudget` (output
reserve, measured system prompt and tool schemas), builds the retrieval block from the
configured sources within `rag_budget`, then fits the conversation into what is left:

- the *current turn* (the latest human message and the agent's work on it) stays, and a
  long tool loop inside it is reduced with `reduce_agent` (the question is its task);
- the *history* before it is compacted by `HistoryCompactor` (running summary kept),
  sized by the ledger: the history's room is the trajectory budget, and a compactor left
  at its default trigger compacts at the room's high-water mark down to its low one;

and lays the request out cache-first: `[system][recap][older turns verbatim][retrieval
block][current turn]`. Everything before the retrieval block changes only when a
compaction does, so each request extends the previous one byte for byte up to its
dynamic tail, and the provider's prompt cache serves it; the block sits next to the
question it was retrieved for, and the question stays last (seed 004's golden
positions). The block is a human message: Anthropic rejects, and Gemini hoists, a system
message in the middle of a conversation. Every call's ledger says where each token went;
the request never exceeds the window minus the output reserve, or
`ContextWindowExceeded` is raised and nothing is sent.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_contextkit._async import run_sync
from langchain_contextkit.budget import (
    ContextConfig,
    WindowBudget,
    WindowBudgetConfig,
)
from langchain_contextkit.builder import ContextBuilder
from langchain_contextkit.compaction import (
    RECAP_ID_PREFIX,
    AViewSummarize,
    CompactionResult,
    HistoryCompactor,
    RunningSummary,
    ViewSummarize,
)
from langchain_contextkit.errors import ConfigError, ContextWindowExceeded
from langchain_contextkit.messages import find_message_problems, split_system
from langchain_contextkit.reducers import reduce_agent
from langchain_contextkit.tokens import (
    TokenCounter,
    count_fixed_tokens,
    count_message_tokens,
    count_tokens,
)
from langchain_contextkit.tools.notes import NoteSource

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_contextkit.calibration import Calibration, Usage
    from langchain_contextkit.notes import NoteStore
    from langchain_contextkit.sources import ContextSource

__all__ = [
    "RETRIEVAL_ID",
    "Anchor",
    "CallLedger",
    "WindowAssembler",
    "WindowAssembly",
    "next_call_number",
    "with_ledger",
]

RETRIEVAL_ID = "contextkit-retrieval"
"""Id of the retrieval-block message, so it is recognised (and never stored as history)."""

_REPLY_PRIMING = 3
_BAR_PARTS = (  # in the request's own order: the cache-first layout
    ("system", "S"),
    ("tools", "T"),
    ("summary", "R"),
    ("history", "H"),
    ("retrieval", "K"),
    ("turn", "Q"),
    ("free", "."),
    ("output_reserve", "O"),
)


@dataclass(frozen=True, slots=True)
class Anchor:
    """The previous call's request: the ledger's estimate and the provider's report."""

    estimated: int
    reported: int
    growth: float | None = None
    """Provider tokens per estimated token of what recent calls *added* to the one
    before (None when unknown): the new part of this request is priced by it."""


@dataclass(frozen=True, slots=True)
class CallLedger:
    """Where every token of one model call's window went.

    `system + tools + summary + retrieval + history + turn + free + output_reserve ==
    window` (priming and message overheads are counted in the part they belong to). The
    parts are in the provider's tokens as far as the ledger knows them: the counter's
    estimate times the calibration `factor` learnt from earlier calls' reported usage.
    `estimated` is the request by the counter alone, and `reported` what the provider
    said it took once the call returned (`cache_read` of it from the prompt cache).
    """

    call: int
    window: int
    output_reserve: int
    system: int
    tools: int
    summary: int
    retrieval: int
    history: int
    turn: int
    free: int
    compacted: bool
    reduced: bool
    estimated: int = 0
    """The request as the ledger's counter measured it (before calibration)."""
    factor: float = 1.0
    """The calibration in force: provider tokens per estimated token."""
    reported: int | None = None
    """Input tokens the provider reported for this call (None until it returned)."""
    cache_read: int | None = None
    """Of `reported`, the tokens served from the provider's prompt cache."""
    retried: bool = False
    """The provider refused the first request as too long; this is the retry's ledger."""
    fidelity: str | None = None
    """The fidelity tier of the recap this call's compaction wrote (``"high"``,
    ``"medium"`` or ``"low"``: lower than configured when room was short); None when it
    wrote none."""

    @property
    def prompt(self) -> int:
        """Tokens of the request (everything but free space and the output reserve)."""
        return self.window - self.free - self.output_reserve

    def with_usage(self, usage: Usage | None) -> CallLedger:
        """This ledger with what the provider reported for the call (unchanged without)."""
        if usage is None:
            return self
        return replace(self, reported=usage.input_tokens, cache_read=usage.cache_read)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for graph state and JSON."""
        return asdict(self)

    def bar(self, width: int = 60) -> str:
        """The window drawn as one line of letters, one per part, in layout order (`LEGEND`).

        Example:
            ```python
            from langchain_contextkit.window import CallLedger

            ledger = CallLedger(
                call=1,
                window=1000,
                output_reserve=200,
                system=100,
                tools=100,
                summary=0,
                retrieval=200,
                history=100,
                turn=100,
                free=200,
                compacted=False,
                reduced=False,
            )
            print(ledger.bar(20))
            # SSTTHHKKKKQQ....OOOO
            ```
        """
        cells = []
        for name, glyph in _BAR_PARTS:
            cells.append((getattr(self, name), glyph))
        out = []
        used = 0
        total = 0
        for value, glyph in cells:
            total += value
            # Cumulative rounding keeps the bar exactly `width` wide.
            end = round(total * width / self.window) if self.window else 0
            out.append(glyph * max(0, end - used))
            used = max(used, end)
        return "".join(out)


def next_call_number(ledgers: Sequence[Any]) -> int:
    """The number of the call after the last stored ledger (1 when none is stored)."""
    last = ledgers[-1] if ledgers else None
    if isinstance(last, Mapping) and isinstance(last.get("call"), int):
        return int(last["call"]) + 1
    return 1


def with_ledger(ledgers: Sequence[Any], ledger: CallLedger, size: int) -> list[Any]:
    """The stored ledgers with `ledger` appended, the last `size` kept."""
    return [*ledgers, ledger.to_dict()][-size:]


LEGEND = (
    "S system  T tools  R summary  H history  K retrieval  Q current turn  . free  O output reserve"
)


@dataclass(frozen=True, slots=True)
class WindowAssembly:
    """The request for one model call, and its ledger.

    Attributes:
        messages: What to send, after the system message (which stays the request's own).
        summary: The running summary after this call.
        ledger: Where the tokens went.
        compaction: What the compactor did.
    """

    messages: list[BaseMessage]
    summary: RunningSummary | None
    ledger: CallLedger
    compaction: CompactionResult


class WindowAssembler:
    """Assemble every model call of an agent under one window ledger (see the module).

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        from langchain_contextkit import CallableSource, HistoryCompactor, RetrievalResult
        from langchain_contextkit.window import WindowAssembler


        def policy(query: str) -> list[RetrievalResult]:
            return [RetrievalResult("Refunds within 30 days of purchase.", 0.9, "rag")]


        assembler = WindowAssembler(
            window=2000, sources=[CallableSource("rag", policy)], compactor=HistoryCompactor()
        )
        history = []
        for turn in range(3):
            history += [HumanMessage(f"Question {turn}: can I get a refund?"), AIMessage("Yes.")]
        result = assembler.assemble(
            [*history, HumanMessage("And after 40 days?")],
            system_message=SystemMessage("Be brief."),
        )
        print(result.messages[-2].text.splitlines()[0], "|", result.messages[-1].text)
        # [Knowledge] | And after 40 days?
        assert result.ledger.prompt <= 2000 - result.ledger.output_reserve
        ```
    """

    def __init__(
        self,
        *,
        window: int | None = None,
        compactor: HistoryCompactor | None = None,
        sources: Sequence[ContextSource] = (),
        note_store: NoteStore | None = None,
        context_config: ContextConfig | None = None,
        budget_config: WindowBudgetConfig | None = None,
        reduce_trajectory: bool = True,
        keep_recent_steps: int = 3,
        token_counter: TokenCounter | None = None,
    ) -> None:
        """Configure the assembler.

        Args:
            window: The model's window; default: read from the model's profile per call.
            compactor: Compacts the history before the current turn (default
                `HistoryCompactor()`, extractive); its counter measures everything.
            sources: Where the retrieval block comes from.
            note_store: When given, a `NoteSource` named ``notes`` over it joins the
                sources (blocker notes first).
            context_config: MMR and per-source ratios of the retrieval block.
            budget_config: The window ledger's knobs (output reserve, `rag_ratio`).
            reduce_trajectory: Reduce the current turn's tool loop with `reduce_agent`
                when it alone outgrows its room (otherwise it only raises).
            keep_recent_steps: Tool steps of the current turn kept verbatim.
            token_counter: The one counter of every part of the ledger (default the
                compactor's, else `count_tokens`).

        Raises:
            ConfigError: When `compactor` counts with another counter than
                `token_counter`.
        """
        self.window = window
        if compactor is None:
            compactor = HistoryCompactor(token_counter=token_counter or count_tokens)
        elif token_counter is not None and compactor.token_counter is not token_counter:
            msg = (
                "the compactor counts tokens with another counter than token_counter=: give "
                "the same one to both (HistoryCompactor(..., token_counter=...))"
            )
            raise ConfigError(msg)
        self.compactor = compactor
        self.sources = list(sources)
        if note_store is not None:
            self.sources.append(NoteSource(name="notes", store=note_store))
        self.budget_config = budget_config or WindowBudgetConfig()
        self.reduce_trajectory = reduce_trajectory
        self.keep_recent_steps = keep_recent_steps
        self.counter = self.compactor.token_counter
        self.builder = (
            ContextBuilder(
                context_config or _config_for(self.sources),
                sources=self.sources,
                prompts=self.compactor.prompts,
                token_counter=self.counter,
            )
            if self.sources
            else None
        )

    # -- the ledger -----------------------------------------------------------------------

    def budget_for(
        self,
        *,
        model: object = None,
        system_message: SystemMessage | None = None,
        tools: Sequence[Any] = (),
    ) -> WindowBudget:
        """The call's window ledger.

        Raises:
            ConfigError: When neither `window` nor the model's profile gives the window.
        """
        system, tool_tokens = count_fixed_tokens(system_message, tools, self.counter)
        budget = WindowBudget.for_run(
            llm=model,
            window=self.window,
            cfg=self.budget_config,
            system_tokens=system,
            tool_tokens=tool_tokens,
        )
        if budget is None:
            msg = (
                "the model's window is unknown: pass window=... or use a model whose profile "
                "states max_input_tokens"
            )
            raise ConfigError(msg)
        return budget

    # -- assembling -----------------------------------------------------------------------

    def assemble(
        self,
        messages: Sequence[BaseMessage],
        *,
        system_message: SystemMessage | None = None,
        tools: Sequence[Any] = (),
        model: object = None,
        summary: RunningSummary | None = None,
        call: int = 1,
        summarize_view: ViewSummarize | None = None,
        budget: WindowBudget | None = None,
        calibration: Calibration | None = None,
        shrink: int = 0,
        anchor: Anchor | None = None,
    ) -> WindowAssembly:
        """Lay out one model call (sync). See `aassemble`."""
        if budget is None:
            budget = self.budget_for(model=model, system_message=system_message, tools=tools)
        real = budget
        budget = self.estimator_budget(real, calibration, shrink)
        history, turn = _split_turn(_without_blocks(messages))
        block = self._block(turn, budget)
        turn_view, reduced = self._fit_turn(turn, budget, block)
        compaction = self.compactor.compact_view(
            history,
            summary=summary,
            summarize_view=summarize_view,
            overhead_tokens=self._overhead(budget, block, turn_view),
            ceiling_tokens=budget.window - budget.output_reserve,
            room_tokens=self.history_room(budget),
            summarizer_window=budget.window,
        )
        return self._finish(
            budget,
            compaction,
            block,
            turn_view,
            reduced=reduced,
            call=call,
            real=real,
            calibration=calibration,
            anchor=anchor,
        )

    async def aassemble(
        self,
        messages: Sequence[BaseMessage],
        *,
        system_message: SystemMessage | None = None,
        tools: Sequence[Any] = (),
        model: object = None,
        summary: RunningSummary | None = None,
        call: int = 1,
        asummarize_view: AViewSummarize | None = None,
        budget: WindowBudget | None = None,
        calibration: Calibration | None = None,
        shrink: int = 0,
        anchor: Anchor | None = None,
    ) -> WindowAssembly:
        """Lay out one model call: the messages to send after the system message.

        Args:
            messages: The conversation as stored (system prompt not included).
            system_message: The request's system message (stays the request's own).
            tools: The tools bound for this call.
            model: The chat model (its profile gives the window when `window` is None).
            summary: The running summary so far.
            call: The call's number, for the ledger.
            asummarize_view: Writes a recap in place (`HistoryCompactor.acompact_view`);
                `assemble` takes the sync `summarize_view`.
            budget: The call's ledger when the caller has already computed it
                (`budget_for` with the same arguments).
            calibration: What earlier calls' reported usage taught: the window is
                divided by its factor, so the request fits in the provider's tokens.
            shrink: Provider tokens to keep free on top (a retry after the provider
                refused a request as too long).
            anchor: The previous call's estimate and reported usage, when this request
                extends that one: its shared part is then known exactly, and only what is
                new is estimated (the ledger's figure, not the budget's).

        Raises:
            ContextWindowExceeded: When the fixed parts and the current question alone do
                not fit the window minus the output reserve.
        """
        if budget is None:
            budget = self.budget_for(model=model, system_message=system_message, tools=tools)
        real = budget
        budget = self.estimator_budget(real, calibration, shrink)
        history, turn = _split_turn(_without_blocks(messages))
        block = await self._ablock(turn, budget)
        turn_view, reduced = await self._afit_turn(turn, budget, block)
        compaction = await self.compactor.acompact_view(
            history,
            summary=summary,
            asummarize_view=asummarize_view,
            overhead_tokens=self._overhead(budget, block, turn_view),
            ceiling_tokens=budget.window - budget.output_reserve,
            room_tokens=self.history_room(budget),
            summarizer_window=budget.window,
        )
        return self._finish(
            budget,
            compaction,
            block,
            turn_view,
            reduced=reduced,
            call=call,
            real=real,
            calibration=calibration,
            anchor=anchor,
        )

    @staticmethod
    def estimator_budget(
        budget: WindowBudget, calibration: Calibration | None = None, shrink: int = 0
    ) -> WindowBudget:
        """`budget` in the counter's own tokens: the window a calibrated request may fill.

        The provider's ceiling (window minus output reserve, minus `shrink`; the window
        the provider stated in a refusal when smaller) divided by the calibration's factor
        is what the counter's estimate of the request may reach.
        """
        factor = 1.0 if calibration is None else calibration.factor
        stated = None if calibration is None else calibration.window
        if factor == 1.0 and shrink == 0 and stated is None:
            return budget
        window = budget.window if stated is None else min(budget.window, stated)
        ceiling = max(0, window - budget.output_reserve - shrink)
        estimated = math.floor(ceiling / factor)
        return replace(budget, window=max(1, budget.output_reserve + estimated))

    def history_room(self, budget: WindowBudget) -> int:
        """What the conversation may take: the trajectory budget (the block's share kept)."""
        return budget.trajectory_budget(rag_in_scope=self.builder is None)

    # -- parts ----------------------------------------------------------------------------

    def _block(self, turn: list[BaseMessage], budget: WindowBudget) -> HumanMessage | None:
        if self.builder is None or not turn or budget.rag_budget <= 0:
            return None
        report = self.builder.build_block_report(_query(turn), budget=budget.rag_budget)
        return _block_message(report.text)

    async def _ablock(self, turn: list[BaseMessage], budget: WindowBudget) -> HumanMessage | None:
        if self.builder is None or not turn or budget.rag_budget <= 0:
            return None
        report = await self.builder.abuild_block_report(_query(turn), budget=budget.rag_budget)
        return _block_message(report.text)

    def _turn_room(self, budget: WindowBudget, block: HumanMessage | None) -> int:
        """What the current turn may take: the ceiling minus the fixed parts and block."""
        block_tokens = _message_tokens([block], self.counter)
        return budget.window - budget.output_reserve - budget.fixed - block_tokens - _REPLY_PRIMING

    def _needs_reduction(self, turn: list[BaseMessage], room: int) -> bool:
        # Leave the history room for a recap: the turn may take what the recap does not.
        return self.reduce_trajectory and _message_tokens(
            turn, self.counter
        ) > room - self._recap_room(room)

    def _recap_room(self, room: int) -> int:
        """Room kept for the history's recap: a full one, but at most a quarter of `room`."""
        cap = self.compactor.max_summary_tokens
        if self.compactor.sized_by_window:
            cap = self.compactor.marks(max(1, room)).recap
        return min(cap + 16, room // 4)

    def _fit_turn(
        self, turn: list[BaseMessage], budget: WindowBudget, block: HumanMessage | None
    ) -> tuple[list[BaseMessage], bool]:
        room = self._turn_room(budget, block)
        if not self._needs_reduction(turn, room):
            return turn, False
        reduced = run_sync(self._reduce(turn, room))
        return reduced, True

    async def _afit_turn(
        self, turn: list[BaseMessage], budget: WindowBudget, block: HumanMessage | None
    ) -> tuple[list[BaseMessage], bool]:
        room = self._turn_room(budget, block)
        if not self._needs_reduction(turn, room):
            return turn, False
        return await self._reduce(turn, room), True

    async def _reduce(self, turn: list[BaseMessage], room: int) -> list[BaseMessage]:
        target = max(0, room - self._recap_room(room)) + _REPLY_PRIMING
        return await reduce_agent(
            turn,
            target,
            counter=self.counter,
            keep_recent_steps=self.keep_recent_steps,
            prompts=self.compactor.prompts,
        )

    def _overhead(
        self, budget: WindowBudget, block: HumanMessage | None, turn: list[BaseMessage]
    ) -> int:
        """Everything sent beside the history: fixed parts, the block and the current turn."""
        block_tokens = _message_tokens([block], self.counter)
        return budget.fixed + block_tokens + _message_tokens(turn, self.counter)

    def _finish(
        self,
        budget: WindowBudget,
        compaction: CompactionResult,
        block: HumanMessage | None,
        turn: list[BaseMessage],
        *,
        reduced: bool,
        call: int,
        real: WindowBudget,
        calibration: Calibration | None,
        anchor: Anchor | None,
    ) -> WindowAssembly:
        system, rest = split_system(compaction.messages)
        stable = [m for m in system if not _is_recap(m)]
        recap = [m for m in system if _is_recap(m)]
        if rest and _is_recap(rest[0]):  # a recap in a human message (require_human_first)
            recap, rest = [rest[0]], rest[1:]
        # Cache-first: stable system messages, the summary and older turns (byte-stable
        # between compactions), then the dynamic tail: the block, the current turn last.
        messages = [*stable, *recap, *rest, *([block] if block else []), *turn]
        counter = self.counter
        summary_tokens = _message_tokens(recap, counter)
        rest = [*stable, *rest]  # a system prompt kept in the messages counts as history
        block_tokens = _message_tokens([block], counter)
        history_tokens = self._history_tokens(stable, rest[len(stable) :])
        turn_tokens = _message_tokens(turn, counter) + (_REPLY_PRIMING if messages else 0)
        ceiling = budget.window - budget.output_reserve
        prompt = budget.fixed + summary_tokens + block_tokens + history_tokens + turn_tokens
        if prompt > ceiling:
            msg = (
                f"the request takes {prompt} tokens, more than the window minus the output "
                f"reserve ({ceiling})"
            )
            raise ContextWindowExceeded(msg, required=prompt, budget=ceiling)
        problems = find_message_problems(messages)
        if problems:  # pragma: no cover - a bug in the layout, not a user error
            msg = f"assembled an invalid request: {problems}"
            raise AssertionError(msg)
        # The ledger speaks the provider's tokens: each part scaled by the calibration.
        factor = 1.0 if calibration is None else calibration.factor
        scale = factor
        if anchor is not None and not compaction.compacted and prompt >= anchor.estimated:
            # The request extends the previous one, whose real size the provider reported:
            # only the new part is an estimate.
            rate = factor if anchor.growth is None else anchor.growth
            known = anchor.reported + (prompt - anchor.estimated) * rate
            scale = known / prompt if prompt else factor
        parts = {
            "system": budget.system_tokens,
            "tools": budget.tool_tokens,
            "summary": summary_tokens,
            "retrieval": block_tokens,
            "history": history_tokens,
            "turn": turn_tokens,
        }
        scaled = {name: round(tokens * scale) for name, tokens in parts.items()}
        ledger = CallLedger(
            call=call,
            window=real.window,
            output_reserve=real.output_reserve,
            system=scaled["system"],
            tools=scaled["tools"],
            summary=scaled["summary"],
            retrieval=scaled["retrieval"],
            history=scaled["history"],
            turn=scaled["turn"],
            free=max(0, real.window - real.output_reserve - sum(scaled.values())),
            compacted=compaction.compacted,
            reduced=reduced,
            estimated=prompt,
            factor=factor,
            fidelity=compaction.fidelity if compaction.compacted else None,
        )
        return WindowAssembly(messages, compaction.summary, ledger, compaction)

    def _history_tokens(self, stable: list[BaseMessage], kept: list[BaseMessage]) -> int:
        """Tokens of the stable system messages and the kept history.

        The kept history ends the history the compactor just indexed, so its cost is a
        difference of running totals there; counted message by message otherwise.
        """
        same_counter = self.compactor.token_counter is self.counter
        known = self.compactor.history_cost(kept) if same_counter else None
        if known is None:
            return _message_tokens([*stable, *kept], self.counter)
        return _message_tokens(stable, self.counter) + known


def _config_for(sources: Sequence[ContextSource]) -> ContextConfig:
    """Equal shares for the given sources (the block's budget comes from the ledger)."""
    names = sorted({source.name for source in sources})
    return ContextConfig(source_ratios=dict.fromkeys(names, 1 / len(names)), min_chunk_tokens=1)


def _message_tokens(messages: Sequence[BaseMessage | None], counter: TokenCounter) -> int:
    """Tokens of the messages present (None skipped), without reply priming."""
    present = [m for m in messages if m is not None]
    return count_message_tokens(present, counter, reply_priming=False) if present else 0


def _split_turn(messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """Split at the latest human message: (history before it, the current turn)."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return list(messages[:index]), list(messages[index:])
    return list(messages), []


def _without_blocks(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Drop retrieval blocks a previous layout left in (they are rebuilt every call)."""
    return [m for m in messages if m.id != RETRIEVAL_ID]


def _query(turn: Sequence[BaseMessage]) -> str:
    return turn[0].text if turn else ""


def _block_message(text: str) -> HumanMessage | None:
    # A human message: providers accept it anywhere before the question (a system
    # message mid-conversation is rejected by Anthropic and hoisted by Gemini).
    return HumanMessage(text, id=RETRIEVAL_ID) if text.strip() else None


def _is_recap(message: BaseMessage) -> bool:
    return isinstance(message.id, str) and message.id.startswith(RECAP_ID_PREFIX)
