"""The request plan: one model call's request under the window, as a generator.

`WindowAssembler` is what every entry point runs before a model call (the middleware,
`context_node`). Its plan is plain code with no I/O: a generator that yields what it needs
(`Retrieve` the block, `Offload` or `Cut` tool results, the tool loop's summaries,
`Compact` the history) and returns the laid-out `WindowAssembly`. Two short drivers answer it,
`run_steps` (sync, no event loop) and `arun_steps` (async): the pattern of httpx's
``auth_flow``. The steps, in one direction:

1. **Inputs.** The messages (a caller's broken pairs repaired in the request only), the
   call's `WindowBudget` (from the model's profile) and its calibration.
2. **Fit the turn.** The current turn (the latest human message and the agent's work on
   it) keeps its room beside the history's recap: a long tool loop is reduced, its
   largest results are cut to head and tail, the retrieval block gives way, the output
   reserve shrinks to `OUTPUT_RESERVE_FLOOR`; refused only when the fixed parts and the
   user's message alone do not fit.
3. **Compact** the history before the turn (`HistoryCompactor.compact_view`).
4. **Lay out** cache-first (`lay_out`) and write the call's `CallLedger`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from typing_extensions import Unpack

from langchain_contextkit.agent.layout import Layout, lay_out
from langchain_contextkit.agent.ledger import CallLedger
from langchain_contextkit.agent.tool_results import (
    STORE_OFFLOAD_MIN_TOKENS,
    CutTurn,
    OffloadConfig,
    OffloadOutcome,
    ResultCutter,
    ToolResultOffloader,
    offloader_for,
    with_offload_tally,
)
from langchain_contextkit.agent.window_budget import WindowBudget, WindowBudgetConfig
from langchain_contextkit.compaction.compactor import (
    CompactionResult,
    HistoryCompactor,
    RunningSummary,
)
from langchain_contextkit.errors import ConfigError, ContextWindowExceeded
from langchain_contextkit.messages.lists import MessageRepair, repair_messages, system_placement_for
from langchain_contextkit.reducers.agent import _reduce_agent
from langchain_contextkit.reducers.base import SummaryCall, arun_steps, run_steps
from langchain_contextkit.retrieval.budget import ContextConfig
from langchain_contextkit.retrieval.builder.runnable import ContextBuilder
from langchain_contextkit.retrieval.sources.notes import NoteSource
from langchain_contextkit.tokens.count import (
    REPLY_PRIMING,
    TokenCounter,
    count_fixed_tokens,
    count_message_tokens,
    count_tokens,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Sequence

    from langchain_core.callbacks import Callbacks

    from langchain_contextkit.agent.ledger import Anchor
    from langchain_contextkit.agent.offload_stores import OffloadStore
    from langchain_contextkit.agent.window_budget import Calibration
    from langchain_contextkit.compaction.recap_store import RecapStore
    from langchain_contextkit.notes import NoteStore
    from langchain_contextkit.retrieval.builder.gather import Gathered
    from langchain_contextkit.retrieval.builder.report import ContextReport
    from langchain_contextkit.retrieval.sources.base import ContextSource, Scope

__all__ = [
    "HISTORY_PREVIEW_SHARE",
    "OUTPUT_RESERVE_FLOOR",
    "RETRIEVAL_ID",
    "UNKNOWN_WINDOW",
    "CallInputs",
    "CallRetrieval",
    "WindowAssembler",
    "WindowAssembly",
    "block_message",
    "config_for",
    "handed_down",
    "query_of",
]


OUTPUT_RESERVE_FLOOR = 256
"""The output reserve shrinks to this (or stays below it if it was) before a request is
refused: room for a tool call or a short answer. When the model's own `max_tokens` is
larger, the middleware lowers it for that call, so the provider does not refuse the
request for the prompt plus the completion it asked for."""

HISTORY_PREVIEW_SHARE = 0.125
"""A tool result in the history over half the history's room is shown as a preview of
this share of the room (head + tail + a marker)."""

_RECAP_MESSAGE = 16
"""Tokens a recap message adds to its text (heading and message overhead), generously."""

UNKNOWN_WINDOW = 2**62
"""The window of a ledger whose model states none (`budget_for(required=False)`)."""

_REFITS = 3
"""Times the turn is fitted again, smaller, when the compacted history needs more room."""

_STORES_KEPT = 8
"""Stores (and their offloaders and cutters) an assembler remembers across calls."""


@dataclass(frozen=True, slots=True)
class WindowAssembly:
    """The request for one model call, and its ledger.

    Attributes:
        messages: What to send, after the system message (which stays the request's own).
        summary: The running summary after this call.
        ledger: Where the tokens went.
        compaction: What the compactor did.
        block: The retrieval block's report (its kept items, embeddings included), or
            None when no block was built.
        layout: Where each part lies in `messages` (`lay_out`'s spans).
    """

    messages: list[BaseMessage]
    summary: RunningSummary | None
    ledger: CallLedger
    compaction: CompactionResult
    block: ContextReport | None = None
    layout: Layout | None = None


class CallInputs(TypedDict, total=False):
    """One model call's inputs to the plan (`WindowAssembler.plan`); each is optional."""

    system_message: SystemMessage | None
    """The request's system message (stays the request's own)."""
    tools: Sequence[Any]
    """The tools bound for this call."""
    model: object
    """The chat model (its profile gives the window when `window` is None)."""
    summary: RunningSummary | None
    """The running summary so far."""
    call: int
    """The call's number, for the ledger."""
    summarize_view: Callable[..., Any] | None
    """Writes a recap in place (`HistoryCompactor.compact_view`): sync for `run_steps`,
    async for `arun_steps`."""
    budget: WindowBudget | None
    """The call's ledger when the caller has already computed it."""
    calibration: Calibration | None
    """What earlier calls' reported usage taught: the window is divided by its factor."""
    shrink: int
    """Provider tokens to keep free on top (a retry after an overflow refusal)."""
    anchor: Anchor | None
    """The previous call's estimate and report, when this request extends that one."""
    reuse_recaps: bool
    """Let a stored recap for the same messages stand in for a new one (default True;
    False for a checkpointed thread)."""
    store: OffloadStore | None
    """Where tool results go when `offload=` gave no store (the agent's LangGraph store)."""
    retrieval: CallRetrieval | None
    """The call's retrieval; a retry passes the same one and the sources are not asked
    again."""
    recaps: RecapStore | None
    """Recaps shared with other workers (`HistoryCompactor.compact_view`)."""


# -- what the plan asks for -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Retrieve:
    """The retrieval block's report for `query` within `budget` tokens."""

    retrieval: CallRetrieval
    builder: ContextBuilder
    query: str
    budget: int

    def run(self) -> ContextReport:
        """Fetch (once per call) and budget the block."""
        return self.retrieval.report(self.builder, self.query, self.budget)

    async def arun(self) -> ContextReport:
        """Async `run`."""
        return await self.retrieval.areport(self.builder, self.query, self.budget)


@dataclass(frozen=True, slots=True)
class Offload:
    """Large tool results stored whole and shown as head + tail + a pointer."""

    offloader: ToolResultOffloader
    messages: list[BaseMessage]
    room: int
    tools: Sequence[Any]

    def run(self) -> OffloadOutcome:
        """Offload with the store's sync `save`."""
        return self.offloader.offload(self.messages, room=self.room, tools=self.tools)

    async def arun(self) -> OffloadOutcome:
        """Offload with the store's `asave`."""
        return await self.offloader.aoffload(self.messages, room=self.room, tools=self.tools)


@dataclass(frozen=True, slots=True)
class Cut:
    """The turn's largest results cut to head + tail until it fits `target` (None: all)."""

    cutter: ResultCutter
    turn: list[BaseMessage]
    target: int | None

    def run(self) -> CutTurn | None:
        """Cut, saving what is cut with the store's sync `save`."""
        return self.cutter.cut(self.turn, self.target)

    async def arun(self) -> CutTurn | None:
        """Cut, saving with `asave`."""
        return await self.cutter.acut(self.turn, self.target)


@dataclass(frozen=True, slots=True)
class Compact:
    """The history compacted to fit beside the turn (`HistoryCompactor.compact_view`)."""

    compactor: HistoryCompactor
    history: list[BaseMessage]
    arguments: dict[str, Any]

    def run(self) -> CompactionResult:
        """Compact with the sync summarisers."""
        return self.compactor.compact_view(self.history, **self.arguments)

    async def arun(self) -> CompactionResult:
        """Compact with the async summarisers."""
        return await self.compactor.acompact_view(self.history, **self.arguments)


Step: TypeAlias = "Retrieve | Offload | Cut | Compact | SummaryCall"
Plan: TypeAlias = "Generator[Step, Any, WindowAssembly]"


# -- the plan -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Fit:
    """The current turn as it will be sent, and the ledger and block it was fitted under."""

    turn: list[BaseMessage]
    reduced: bool
    block: HumanMessage | None
    report: ContextReport | None
    budget: WindowBudget
    real: WindowBudget
    cut: CutTurn | None = None


class WindowAssembler:
    """Assemble every model call of an agent under one window ledger (see the module).

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        from langchain_contextkit import CallableSource, HistoryCompactor, RetrievalResult
        from langchain_contextkit.agent import WindowAssembler


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
        offload: OffloadConfig | OffloadStore | None = None,
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
            offload: Show tool results over a share of the trajectory budget as head +
                tail + a pointer to the whole, stored there (`OffloadConfig`, or an
                `OffloadStore` with its defaults). Default: off.

        Raises:
            ConfigError: When `compactor` counts with another counter than
                `token_counter`, or `offload` is neither a config nor a store.
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
        self.offloader = offloader_for(offload, self.counter)
        configured = None if self.offloader is None else self.offloader.config.store
        self._own_cutter = ResultCutter(self.counter, configured)
        self._per_store: dict[int, tuple[OffloadStore, ToolResultOffloader, ResultCutter]] = {}
        self.builder = (
            ContextBuilder(
                context_config or config_for(self.sources),
                sources=self.sources,
                prompts=self.compactor.prompts,
                token_counter=self.counter,
            )
            if self.sources
            else None
        )

    def budget_for(
        self,
        *,
        model: object = None,
        system_message: SystemMessage | None = None,
        tools: Sequence[Any] = (),
        fallback_window: int | None = None,
        required: bool = True,
    ) -> WindowBudget:
        """The call's window ledger.

        Args:
            model: The model called: its profile gives the window unless `window` was set.
            system_message: The request's system message (measured).
            tools: The tools bound for the call (their schemas measured).
            fallback_window: The window when neither `window` nor the profile states one.
            required: False to accept an unknown window: the ledger then has
                `UNKNOWN_WINDOW` and no output reserve, and only the compactor's own
                `trigger_tokens` compacts.

        Raises:
            ConfigError: When `required` and neither `window`, the model's profile nor
                `fallback_window` gives the window.
        """
        system, tool_tokens = count_fixed_tokens(system_message, tools, self.counter)
        budget = WindowBudget.for_run(
            llm=model,
            window=self.window,
            cfg=self.budget_config,
            system_tokens=system,
            tool_tokens=tool_tokens,
            fallback_window=fallback_window,
        )
        if budget is None and not required:
            return WindowBudget(
                window=UNKNOWN_WINDOW,
                output_reserve=0,
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

    def history_room(self, budget: WindowBudget) -> int:
        """What the conversation may take: the trajectory budget (the block's share kept)."""
        return budget.trajectory_budget(rag_in_scope=self.builder is None)

    # -- the drivers ------------------------------------------------------------------------

    def assemble(
        self, messages: Sequence[BaseMessage], **inputs: Unpack[CallInputs]
    ) -> WindowAssembly:
        """Lay out one model call (sync; a `summarize_view` is sync too). See `plan`."""
        return run_steps(self.plan(messages, **inputs))

    async def aassemble(
        self, messages: Sequence[BaseMessage], **inputs: Unpack[CallInputs]
    ) -> WindowAssembly:
        """Async `assemble` (a `summarize_view` is async). See `plan`."""
        return await arun_steps(self.plan(messages, **inputs))

    # -- the plan ---------------------------------------------------------------------------

    def plan(self, messages: Sequence[BaseMessage], **inputs: Unpack[CallInputs]) -> Plan:
        """One model call's request: a generator of its I/O steps, driven by `run_steps`.

        What does not fit gives way in this order, and nothing else is refused: the
        recap's share is held only when there is a history to recap; the current turn's
        tool loop is reduced (`reduce_agent`); its largest tool results are cut to head +
        tail with a marker (saved whole to `store` first, when there is one); the
        retrieval block is left out; the output reserve shrinks to
        `OUTPUT_RESERVE_FLOOR`.

        Args:
            messages: The conversation as stored (system prompt not included).
            **inputs: The call's inputs (`CallInputs`; each one optional).

        Raises:
            ContextWindowExceeded: Only when the system prompt, the tool schemas, the
                user's last message and the output reserve's floor alone exceed the
                window; the message names each part and its size.
        """
        system_message = inputs.get("system_message")
        tools = inputs.get("tools", ())
        model = inputs.get("model")
        summary = inputs.get("summary")
        calibration = inputs.get("calibration")
        shrink = inputs.get("shrink", 0)
        # 1. Inputs: a caller's broken pairs repaired in the request only; system messages
        # stay where they are until the layout is final.
        view, repairs = repair_messages(messages, system_messages="anywhere")
        view = [m for m in view if m.id != RETRIEVAL_ID]  # rebuilt every call
        real = inputs.get("budget") or self.budget_for(
            model=model, system_message=system_message, tools=tools
        )
        room = self.history_room(real)
        offloader, cutter = self._store_tools(inputs.get("store"))
        offload: OffloadOutcome | None = None
        if offloader is not None:
            offload = yield Offload(offloader, view, room, tools)
            view = offload.messages
        history, turn = _split_turn(view)
        # A tool result over half the history's room could never be shown whole: the
        # history carries the preview the turn that fetched it showed.
        history_cut = cutter.cap(
            history, threshold=room // 2, size=int(room * HISTORY_PREVIEW_SHARE)
        )
        history = history_cut.messages
        report: ContextReport | None = None
        if self.builder is not None and turn and real.rag_budget > 0:
            retrieval = inputs.get("retrieval") or CallRetrieval()
            report = yield Retrieve(retrieval, self.builder, query_of(turn), real.rag_budget)

        # 2. Fit the turn.
        fitted = self._fit_as_is(history, summary, turn, real, calibration, shrink, report)
        if fitted is None:
            fitted = yield from self._fit(
                history, summary, turn, real, calibration, shrink, report, cutter
            )

        # 3. Compact the history beside it. The compactor cuts only on the grid (a
        # restarted caller must cut the same), so when what the grid leaves does not fit
        # beside the turn, the turn gives way by the excess the compactor reports.
        extra = 0
        for _ in range(_REFITS):
            try:
                compaction = yield self._compact(fitted, history, inputs)
                break
            except ContextWindowExceeded as error:
                extra += max(1, error.required - error.budget)
                fitted = yield from self._fit(
                    history, summary, turn, real, calibration, shrink, report, cutter, extra=extra
                )
        else:
            compaction = yield self._compact(fitted, history, inputs)

        # 4. Lay out and account.
        assembly = self._laid_out(
            compaction,
            fitted,
            calibration,
            inputs.get("anchor"),
            call=inputs.get("call", 1),
            placement=model,
        )
        ledger = with_offload_tally(assembly.ledger, offload)
        cuts = [c for c in (fitted.cut, history_cut) if c is not None and c.cut]
        ledger = replace(
            ledger,
            repairs=ledger.repairs + len(repairs),
            cut=sum(c.cut for c in cuts),
            cut_tokens=sum(c.cut_tokens for c in cuts),
        )
        return replace(assembly, ledger=ledger)

    # -- the plan's parts -------------------------------------------------------------------

    def _store_tools(
        self, store: OffloadStore | None
    ) -> tuple[ToolResultOffloader | None, ResultCutter]:
        """The offloader and the result cutter of a call.

        The configured ones when `offload=` was given (or the call brings no store);
        else a pair over the call's store (large results only), kept per store.
        """
        if self.offloader is not None or store is None:
            return self.offloader, self._own_cutter
        known = self._per_store.get(id(store))
        if known is None or known[0] is not store:
            config = OffloadConfig(
                store=store, min_tokens=STORE_OFFLOAD_MIN_TOKENS, require_reader=False
            )
            offloader = ToolResultOffloader(config, token_counter=self.counter)
            known = (store, offloader, ResultCutter(self.counter, store))
            self._per_store[id(store)] = known
            while len(self._per_store) > _STORES_KEPT:
                self._per_store.pop(next(iter(self._per_store)))
        return known[1], known[2]

    def _tokens(self, messages: Sequence[BaseMessage | None]) -> int:
        """Tokens of the messages present (None skipped), without reply priming."""
        present = [m for m in messages if m is not None]
        return count_message_tokens(present, self.counter, reply_priming=False) if present else 0

    def _turn_room(self, budget: WindowBudget, block: HumanMessage | None) -> int:
        """What the current turn may take: the ceiling minus the fixed parts and block."""
        return budget.ceiling - budget.fixed - self._tokens([block]) - REPLY_PRIMING

    def _recap_room(self, room: int) -> int:
        """Room kept for the history's recap: a full one, but at most a quarter of `room`."""
        cap = self.compactor.max_summary_tokens
        if self.compactor.sized_by_window:
            cap = self.compactor.marks(max(1, room)).recap
        return min(cap + _RECAP_MESSAGE, room // 4)

    def _history_need(
        self,
        history: Sequence[BaseMessage],
        summary: RunningSummary | None,
        room: int,
        *,
        lend: bool = True,
    ) -> int:
        """The least the history must keep beside the turn: nothing when there is none.

        A history is compacted to its recap at worst, and a short one needs no more than
        itself, so the recap's share is lent to the turn whenever it is idle (`lend=False`:
        a full recap share whenever there is a history).
        """
        if not history and summary is None:
            return 0
        if not lend:
            return self._recap_room(room)
        own = self._tokens(history)
        if summary is not None:
            own += self.counter(summary.text) + _RECAP_MESSAGE
        return min(own, self._recap_room(room))

    def _fit_as_is(  # noqa: PLR0917 - the call's parts, in layout order
        self,
        history: Sequence[BaseMessage],
        summary: RunningSummary | None,
        turn: list[BaseMessage],
        real: WindowBudget,
        calibration: Calibration | None,
        shrink: int,
        report: ContextReport | None,
    ) -> _Fit | None:
        """The common case: the turn fits beside a full recap share (None otherwise)."""
        budget = real.calibrated(calibration, shrink)
        block = block_message(report)
        room = self._turn_room(budget, block)
        tokens = self._tokens(turn)
        if tokens <= room - self._recap_room(room) or (
            not self.reduce_trajectory
            and tokens <= room - self._history_need(history, summary, room)
        ):
            return _Fit(turn, reduced=False, block=block, report=report, budget=budget, real=real)
        return None

    def _fit(  # noqa: PLR0917 - the call's parts, in layout order
        self,
        history: Sequence[BaseMessage],
        summary: RunningSummary | None,
        turn: list[BaseMessage],
        start: WindowBudget,
        calibration: Calibration | None,
        shrink: int,
        report: ContextReport | None,
        cutter: ResultCutter,
        *,
        extra: int = 0,
    ) -> Generator[Step, Any, _Fit]:
        """Fit a turn that outgrew its share: what gives way, in order (see `plan`).

        `extra`: tokens the history needs beyond its recap share (the compactor said so);
        the recap's share is then held in full, not lent.
        """
        stages = [(start, report)]
        if report is not None:
            stages.append((start, None))
        floor = min(start.output_reserve, OUTPUT_RESERVE_FLOOR)
        if floor < start.output_reserve:
            stages.append((replace(start, output_reserve=floor), None))
        need = 0
        for real, stage_report in stages:
            budget = real.calibrated(calibration, shrink)
            block = block_message(stage_report)
            room = self._turn_room(budget, block)
            need = self._history_need(history, summary, room, lend=not extra) + extra
            fitted = yield from self._fit_within(turn, room - need, cutter)
            if fitted is not None:
                view, reduced, cut_turn = fitted
                return _Fit(view, reduced, block, stage_report, budget, real, cut_turn)
        smallest = yield Cut(cutter, turn, None)
        rest = turn if smallest is None else smallest.messages
        raise self._irreducible(rest, stages[-1][0].calibrated(calibration, shrink), need)

    def _fit_within(
        self, turn: list[BaseMessage], target: int, cutter: ResultCutter
    ) -> Generator[Step, Any, tuple[list[BaseMessage], bool, CutTurn | None] | None]:
        """The turn within `target`: as is, reduced, cut, or cut and reduced (None: no)."""
        if target <= 0:
            return None
        if self._tokens(turn) <= target:
            return turn, False, None
        if self.reduce_trajectory:
            reduced = yield from self._reduce(turn, target)
            if reduced is not None:
                return reduced, True, None
        shown = yield Cut(cutter, turn, target)
        if shown is not None:
            return shown.messages, False, shown
        if self.reduce_trajectory:
            markers = yield Cut(cutter, turn, None)  # every result down to its marker line
            if markers is not None:
                reduced = yield from self._reduce(markers.messages, target)
                if reduced is not None:
                    return reduced, True, markers
        return None

    def _reduce(
        self, turn: list[BaseMessage], target: int
    ) -> Generator[Step, Any, list[BaseMessage] | None]:
        """`reduce_agent` to `target`, keeping fewer recent steps verbatim if it must.

        None when even the task and the last step alone do not fit.
        """
        for steps in sorted({self.keep_recent_steps, 1, 0}, reverse=True):
            if steps > self.keep_recent_steps:
                continue
            try:
                reduced: list[BaseMessage] = yield from _reduce_agent(
                    turn,
                    target + REPLY_PRIMING,
                    counter=self.counter,
                    keep_recent_steps=steps,
                    prompts=self.compactor.prompts,
                )
            except ContextWindowExceeded:
                continue
            return reduced
        return None

    def _irreducible(
        self, turn: list[BaseMessage], budget: WindowBudget, history: int
    ) -> ContextWindowExceeded:
        """The one refusal: the fixed parts and the user's message leave no room.

        `turn` is the current turn at its smallest (every tool result cut to its marker)
        and `history` what the earlier conversation needs at least (its recap).
        """
        question = self._tokens(turn[:1])
        rest = self._tokens(turn[1:])
        ceiling = budget.ceiling
        fixed = budget.fixed + question + REPLY_PRIMING
        msg = (
            f"nothing can be sent: the system prompt ({budget.system_tokens} tokens), the "
            f"tool schemas ({budget.tool_tokens}) and the user's last message ({question}) "
            f"take {fixed} tokens; with the rest of the turn at its smallest ({rest}, every "
            f"tool result cut to its marker) and the earlier conversation's recap ({history}) "
            f"that exceeds the {ceiling} tokens the window ({budget.window}) leaves for "
            f"input in the counter's tokens with the output reserve at its floor "
            f"({budget.output_reserve})"
        )
        return ContextWindowExceeded(msg, required=fixed + rest + history, budget=ceiling)

    def _compact(self, fitted: _Fit, history: list[BaseMessage], inputs: CallInputs) -> Compact:
        """The compaction step, told what the window leaves the history.

        The recap's cap is stated to the summariser in the provider's tokens: the
        calibration's ratio times the cap in the counter's tokens.
        """
        calibration = inputs.get("calibration")
        budget = fitted.budget
        overhead = budget.fixed + self._tokens([fitted.block]) + self._tokens(fitted.turn)
        known = fitted.real.window != UNKNOWN_WINDOW
        return Compact(
            self.compactor,
            history,
            {
                "summary": inputs.get("summary"),
                "summarize_view": inputs.get("summarize_view"),
                "reuse_recaps": inputs.get("reuse_recaps", True),
                "recaps": inputs.get("recaps"),
                "overhead_tokens": overhead,
                "ceiling_tokens": budget.ceiling if known else None,
                "room_tokens": self.history_room(budget) if known else None,
                "summarizer_window": budget.window if known else None,
                "cap_scale": 1.0 if calibration is None else min(max(calibration.ratio, 1e-3), 1e5),
            },
        )

    def _laid_out(
        self,
        compaction: CompactionResult,
        fitted: _Fit,
        calibration: Calibration | None,
        anchor: Anchor | None,
        *,
        call: int,
        placement: object,
    ) -> WindowAssembly:
        """The request laid out cache-first (`lay_out`), checked, and its ledger."""
        parts = compaction.view_parts
        layout = lay_out(
            system=parts.system,
            recap=parts.recap,
            older=parts.kept,
            retrieval=fitted.block,
            turn=fitted.turn,
        )
        messages = layout.messages
        # Late system messages the provider would move or refuse become notes now that
        # the layout is done. Every other rule already holds: the caller's list was
        # repaired before the fit, and the compactor cuts only between units.
        repairs: list[MessageRepair] = []
        if any(isinstance(m, SystemMessage) for m in messages[layout.spans["older"][0] :]):
            sent, repairs = repair_messages(
                messages, system_messages=system_placement_for(placement)
            )
            messages = sent if repairs else messages
        budget = fitted.budget
        # Stable system messages and older turns (priced by the compactor when it could),
        # plus any note a repair added.
        if parts.kept_tokens is not None and self.compactor.token_counter is self.counter:
            history = self._tokens(parts.system) + parts.kept_tokens
        else:
            history = self._tokens([*parts.system, *parts.kept])
        if repairs:
            history += self._tokens(messages) - self._tokens(layout.messages)
        tokens = {
            "summary": self._tokens(layout.part("recap")),
            "retrieval": self._tokens([fitted.block]),
            "history": history,
            "turn": self._tokens(fitted.turn) + (REPLY_PRIMING if messages else 0),
        }
        prompt = budget.fixed + sum(tokens.values())
        if prompt > budget.ceiling:
            msg = (
                f"the request takes {prompt} tokens, more than the window minus the output "
                f"reserve ({budget.ceiling})"
            )
            raise ContextWindowExceeded(msg, required=prompt, budget=budget.ceiling)
        # The ledger speaks the provider's tokens: each part scaled by the calibration, or
        # priced through the previous call's reported size when this request extends it.
        factor = 1.0 if calibration is None else calibration.factor_at(prompt)
        scale = factor
        if anchor is not None and not compaction.compacted and prompt >= anchor.estimated:
            rate = factor if anchor.growth is None else anchor.growth
            known = anchor.reported + (prompt - anchor.estimated) * rate
            scale = known / prompt if prompt else factor
        scaled = {
            name: round(value * scale)
            for name, value in (
                ("system", budget.system_tokens),
                ("tools", budget.tool_tokens),
                *tokens.items(),
            )
        }
        real = fitted.real
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
            free=max(0, real.ceiling - sum(scaled.values())),
            compacted=compaction.compacted,
            reduced=fitted.reduced,
            estimated=prompt,
            factor=factor,
            fidelity=compaction.fidelity if compaction.compacted else None,
            repairs=len(repairs),
            summarizer_calls=compaction.summarizer_calls,
            summarizer_chars=compaction.summarizer_chars,
            shared_recap=compaction.shared,
        )
        report = fitted.report if fitted.block is not None else None
        return WindowAssembly(
            messages,
            compaction.summary,
            ledger,
            compaction,
            report,
            layout if not repairs else None,
        )


def _split_turn(messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """Split at the latest human message: (history before it, the current turn)."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return list(messages[:index]), list(messages[index:])
    return list(messages), []


def handed_down(assembler: WindowAssembler | None, options: dict[str, Any]) -> WindowAssembler:
    """`assembler`, or one built from `options` (a middleware's or a node's keywords).

    Raises:
        ConfigError: When an assembler is given together with an option of its own
            (they would silently disagree), or is not a `WindowAssembler`.
    """
    given: object = assembler  # checked at run time: callers are not always typed
    if given is None:
        return WindowAssembler(**options)
    if not isinstance(given, WindowAssembler):
        msg = f"assembler takes a WindowAssembler, got {type(given).__name__}"
        raise ConfigError(msg)
    defaults = inspect.signature(WindowAssembler.__init__).parameters
    clashing = sorted(
        name
        for name, value in options.items()
        if value is not None and value != defaults[name].default
    )
    if clashing:
        msg = f"pass {', '.join(clashing)} to the WindowAssembler, not beside assembler="
        raise ConfigError(msg)
    return given


RETRIEVAL_ID = "contextkit-retrieval"
"""Id of the retrieval-block message, so it is recognised (and never stored as history)."""


def config_for(sources: Sequence[ContextSource]) -> ContextConfig:
    """Equal shares for the given sources (the block's budget comes from the ledger)."""
    names = sorted({source.name for source in sources})
    return ContextConfig(source_ratios=dict.fromkeys(names, 1 / len(names)), min_chunk_tokens=1)


def query_of(turn: Sequence[BaseMessage]) -> str:
    """What the block is retrieved for: the text of the turn's user message."""
    return turn[0].text if turn else ""


def block_message(report: ContextReport | None) -> HumanMessage | None:
    """The block as a message, or None when the report has no text."""
    # A human message: providers accept it anywhere before the question (a system
    # message mid-conversation is rejected by Anthropic and hoisted by Gemini).
    if report is None or not report.text.strip():
        return None
    return HumanMessage(report.text, id=RETRIEVAL_ID)


class CallRetrieval:
    """One model call's retrieval: who asks (scope, the run's callbacks) and what came back.

    The sources are asked once per call: a retry after a refusal budgets the same
    candidates into its smaller block instead of fetching them again.
    """

    def __init__(self, scope: Scope | None = None, callbacks: Callbacks = None) -> None:
        """Remember who asks; nothing is fetched yet."""
        self.scope = scope
        self.callbacks = callbacks
        self._fetched: tuple[str, Gathered] | None = None

    def report(self, builder: ContextBuilder, query: str, budget: int) -> ContextReport:
        """The block for `query` within `budget`, fetched on the first call only."""
        gathered = self._known(query)
        if gathered is None:
            gathered = builder.gather(query, scope=self.scope, callbacks=self.callbacks)
            self._fetched = (query, gathered)
        return builder.build_block_report(query, budget=budget, gathered=gathered)

    async def areport(self, builder: ContextBuilder, query: str, budget: int) -> ContextReport:
        """Async `report`."""
        gathered = self._known(query)
        if gathered is None:
            gathered = await builder.agather(query, scope=self.scope, callbacks=self.callbacks)
            self._fetched = (query, gathered)
        return await builder.abuild_block_report(query, budget=budget, gathered=gathered)

    def _known(self, query: str) -> Gathered | None:
        fetched = self._fetched
        return fetched[1] if fetched is not None and fetched[0] == query else None
