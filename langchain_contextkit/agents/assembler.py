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

`WindowAssembler`'s methods are the steps of one request's layout, kept in one class.
"""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypedDict

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_contextkit._async import run_sync
from langchain_contextkit.agents.ledger import Anchor, CallLedger
from langchain_contextkit.agents.offload import (
    STORE_OFFLOAD_MIN_TOKENS,
    OffloadConfig,
    OffloadOutcome,
    ToolResultOffloader,
    with_offload_tally,
)
from langchain_contextkit.agents.offload_stores import OffloadStore
from langchain_contextkit.agents.turn_fit import CutTurn, ResultCutter
from langchain_contextkit.budget import ContextConfig
from langchain_contextkit.builder.runnable import ContextBuilder
from langchain_contextkit.compaction.compactor import (
    AViewSummarize,
    CompactionResult,
    HistoryCompactor,
    RunningSummary,
    ViewSummarize,
)
from langchain_contextkit.compaction.recap import is_recap
from langchain_contextkit.errors import ConfigError, ContextWindowExceeded
from langchain_contextkit.messages import (
    CleanScan,
    MessageRepair,
    SystemPlacement,
    repair_messages,
    resume_scan,
    split_system,
    system_placement_for,
)
from langchain_contextkit.reducers.agent import reduce_agent
from langchain_contextkit.sources.notes import NoteSource
from langchain_contextkit.tokens import (
    REPLY_PRIMING,
    TokenCounter,
    count_fixed_tokens,
    count_message_tokens,
    count_tokens,
)
from langchain_contextkit.window_budget import WindowBudget, WindowBudgetConfig

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence
    from typing import TypeAlias

    from langchain_contextkit.builder.report import ContextReport
    from langchain_contextkit.calibration import Calibration
    from langchain_contextkit.notes import NoteStore
    from langchain_contextkit.sources.base import ContextSource

    _Cut: TypeAlias = Callable[[list[BaseMessage], int | None], Awaitable[CutTurn | None]]
    """`ResultCutter.acut`'s shape; a target of None cuts every result to its marker."""

__all__ = [
    "HISTORY_PREVIEW_SHARE",
    "OUTPUT_RESERVE_FLOOR",
    "RETRIEVAL_ID",
    "WindowAssembler",
    "WindowAssembly",
]

RETRIEVAL_ID = "contextkit-retrieval"
"""Id of the retrieval-block message, so it is recognised (and never stored as history)."""
_ID = operator.attrgetter("id")


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
    """

    messages: list[BaseMessage]
    summary: RunningSummary | None
    ledger: CallLedger
    compaction: CompactionResult
    block: ContextReport | None = None


class WindowAssembler:
    """Assemble every model call of an agent under one window ledger (see the module).

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

        from langchain_contextkit import CallableSource, HistoryCompactor, RetrievalResult
        from langchain_contextkit.agents.assembler import WindowAssembler


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
                `OffloadStore` with its defaults; see `langchain_contextkit.agents.offload`).
                Default: off.

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
        self.offloader = _offloader_for(offload, self.counter)
        self._block_free = _BlockFree()
        self._lock = threading.Lock()
        # The cutter saves to the configured store; a call's own store gets its pair.
        configured = None if self.offloader is None else self.offloader.config.store
        self._own_cutter = ResultCutter(self.counter, configured)
        self._per_store: dict[int, tuple[OffloadStore, ToolResultOffloader, ResultCutter]] = {}
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
        fallback_window: int | None = None,
    ) -> WindowBudget:
        """The call's window ledger.

        Args:
            model: The model called: its profile gives the window unless `window` was set.
            system_message: The request's system message (measured).
            tools: The tools bound for the call (their schemas measured).
            fallback_window: The window when neither `window` nor the profile states one.

        Raises:
            ConfigError: When neither `window`, the model's profile nor `fallback_window`
                gives the window.
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
        reuse_recaps: bool = True,
        store: OffloadStore | None = None,
    ) -> WindowAssembly:
        """Lay out one model call (sync). See `aassemble`."""
        start = self._start(messages, system_message, tools, model, budget, calibration, shrink)
        offloader, cutter = self._store_tools(store)
        if offloader is not None:
            start.offload = offloader.offload(start.view, room=start.room, tools=tools)
            start.view = start.offload.messages
        history, turn = self._split(start, cutter)
        report = self._block(turn, start.budget)
        fit = self._fit_as_is(history, summary, turn, start, report)
        lent = fit is None
        if fit is None:
            fit = run_sync(self._fit(history, summary, turn, start, report, _sync_cut(cutter)))

        def compact(fit: _Fit) -> CompactionResult:
            return self.compactor.compact_view(
                history,
                summary=summary,
                summarize_view=summarize_view,
                reuse_recaps=reuse_recaps,
                **self._sizing(fit.budget, fit.block, fit.turn, start.calibration),
            )

        try:
            compaction = compact(fit)
        except ContextWindowExceeded:
            if not lent:
                raise
            # The history needed more than the turn left it: give it its full recap share.
            fit = run_sync(
                self._fit(history, summary, turn, start, report, _sync_cut(cutter), lend=False)
            )
            compaction = compact(fit)
        return self._done(compaction, fit, start, call=call, anchor=anchor)

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
        reuse_recaps: bool = True,
        store: OffloadStore | None = None,
    ) -> WindowAssembly:
        """Lay out one model call: the messages to send after the system message.

        What does not fit gives way in this order, and nothing else is refused: the
        recap's share is held only when there is a history to recap; the current turn's
        tool loop is reduced (`reduce_agent`); its largest tool results are cut to head +
        tail with a marker (saved whole to `store` first, when there is one); the
        retrieval block is left out; the output reserve shrinks to
        `OUTPUT_RESERVE_FLOOR`.

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
            reuse_recaps: Let a recap the compactor remembers stand in for a new one
                (`HistoryCompactor.compact_view`); False for a checkpointed thread.
            store: Where tool results go when `offload=` gave no store (the middleware
                passes the agent's LangGraph store): results over `STORE_OFFLOAD_MIN_TOKENS`
                (or a tenth of the trajectory budget) are offloaded to it, and a result
                cut to fit is saved to it.

        Raises:
            ContextWindowExceeded: Only when the system prompt, the tool schemas, the
                user's last message and the output reserve's floor alone exceed the
                window; the message names each part and its size.
        """
        start = self._start(messages, system_message, tools, model, budget, calibration, shrink)
        offloader, cutter = self._store_tools(store)
        if offloader is not None:
            start.offload = await offloader.aoffload(start.view, room=start.room, tools=tools)
            start.view = start.offload.messages
        history, turn = self._split(start, cutter)
        report = await self._ablock(turn, start.budget)
        fit = self._fit_as_is(history, summary, turn, start, report)
        lent = fit is None
        if fit is None:
            fit = await self._fit(history, summary, turn, start, report, cutter.acut)

        async def compact(fit: _Fit) -> CompactionResult:
            return await self.compactor.acompact_view(
                history,
                summary=summary,
                asummarize_view=asummarize_view,
                reuse_recaps=reuse_recaps,
                **self._sizing(fit.budget, fit.block, fit.turn, start.calibration),
            )

        try:
            compaction = await compact(fit)
        except ContextWindowExceeded:
            if not lent:
                raise
            fit = await self._fit(history, summary, turn, start, report, cutter.acut, lend=False)
            compaction = await compact(fit)
        return self._done(compaction, fit, start, call=call, anchor=anchor)

    def _start(  # noqa: PLR0917 - assemble's own arguments, passed through
        self,
        messages: Sequence[BaseMessage],
        system_message: SystemMessage | None,
        tools: Sequence[Any],
        model: object,
        budget: WindowBudget | None,
        calibration: Calibration | None,
        shrink: int,
    ) -> _Start:
        """The call's ledger (real and in the counter's tokens) and the block-free view.

        A caller's broken pairs are repaired in the request only; system messages stay
        where they are until the layout is final (a note made of one here would become
        the latest human message and move the turn's start).
        """
        messages, repairs = repair_messages(messages, system_messages="anywhere")
        if budget is None:
            budget = self.budget_for(model=model, system_message=system_message, tools=tools)
        return _Start(
            real=budget,
            budget=self.estimator_budget(budget, calibration, shrink),
            calibration=calibration,
            shrink=shrink,
            view=self._block_free.without_blocks(messages),
            room=self.history_room(budget),
            repairs=repairs,
            placement=system_placement_for(model),
        )

    def _split(
        self, start: _Start, cutter: ResultCutter
    ) -> tuple[list[BaseMessage], list[BaseMessage]]:
        """(history, current turn), the history's results capped at what a window shows.

        A tool result over half the history's room could never be shown whole, and the
        turn that fetched it showed a cut of it: the history carries a preview of it
        (`HISTORY_PREVIEW_SHARE` of the room), so compaction summarises what the model
        saw instead of re-reading the whole result on every compaction.
        """
        history, turn = _split_turn(start.view)
        capped = cutter.cap(
            history,
            threshold=start.room // 2,
            size=int(start.room * HISTORY_PREVIEW_SHARE),
        )
        if capped.cut:
            start.history_cut = capped
            history = capped.messages
        return history, turn

    def _store_tools(
        self, store: OffloadStore | None
    ) -> tuple[ToolResultOffloader | None, ResultCutter]:
        """The offloader and the result cutter of a call.

        The configured ones when `offload=` was given (or the call brings no store);
        else a pair over the call's store (large results only), kept per store.
        """
        if self.offloader is not None or store is None:
            return self.offloader, self._own_cutter
        with self._lock:
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

    def _done(
        self,
        compaction: CompactionResult,
        fit: _Fit,
        start: _Start,
        *,
        call: int,
        anchor: Anchor | None,
    ) -> WindowAssembly:
        assembly = self._finish(
            fit.budget,
            compaction,
            fit.block,
            fit.turn,
            reduced=fit.reduced,
            call=call,
            real=fit.real,
            calibration=start.calibration,
            anchor=anchor,
            report=fit.report,
            placement=start.placement,
        )
        assembly = _repairs_tallied(_tallied(assembly, start.offload), start.repairs)
        cuts = [c for c in (fit.cut, start.history_cut) if c is not None and c.cut]
        if cuts:
            ledger = replace(
                assembly.ledger,
                cut=sum(c.cut for c in cuts),
                cut_tokens=sum(c.cut_tokens for c in cuts),
            )
            assembly = replace(assembly, ledger=ledger)
        return assembly

    def _sizing(
        self,
        budget: WindowBudget,
        block: HumanMessage | None,
        turn: list[BaseMessage],
        calibration: Calibration | None,
    ) -> _Sizing:
        """What the compactor is told of the window, the same for both twins.

        The recap's cap is stated to the summariser in the provider's tokens: the
        calibration's ratio (its line's slope: a part of a request pays no per-request
        overhead) times the cap in the counter's tokens.
        """
        return _Sizing(
            overhead_tokens=self._overhead(budget, block, turn),
            ceiling_tokens=budget.window - budget.output_reserve,
            room_tokens=self.history_room(budget),
            summarizer_window=budget.window,
            cap_scale=1.0 if calibration is None else min(max(calibration.ratio, 1e-3), 1e5),
        )

    @staticmethod
    def estimator_budget(
        budget: WindowBudget, calibration: Calibration | None = None, shrink: int = 0
    ) -> WindowBudget:
        """`budget` in the counter's own tokens: the window a calibrated request may fill.

        The provider's ceiling (window minus output reserve, minus `shrink`; the window
        the provider stated in a refusal when smaller) in the counter's tokens, by the
        calibration's fitted overhead and ratio (`Calibration.estimated`), is what the
        counter's estimate of the request may reach.
        """
        stated = None if calibration is None else calibration.window
        learnt = calibration is not None and bool(calibration.observations)
        if not learnt and shrink == 0 and stated is None:
            return budget
        window = budget.window if stated is None else min(budget.window, stated)
        ceiling = max(0, window - budget.output_reserve - shrink)
        estimated = ceiling if calibration is None else calibration.estimated(ceiling)
        return replace(budget, window=max(1, budget.output_reserve + estimated))

    def history_room(self, budget: WindowBudget) -> int:
        """What the conversation may take: the trajectory budget (the block's share kept)."""
        return budget.trajectory_budget(rag_in_scope=self.builder is None)

    # -- parts ----------------------------------------------------------------------------

    def _block(self, turn: list[BaseMessage], budget: WindowBudget) -> ContextReport | None:
        if self.builder is None or not turn or budget.rag_budget <= 0:
            return None
        return self.builder.build_block_report(_query(turn), budget=budget.rag_budget)

    async def _ablock(self, turn: list[BaseMessage], budget: WindowBudget) -> ContextReport | None:
        if self.builder is None or not turn or budget.rag_budget <= 0:
            return None
        return await self.builder.abuild_block_report(_query(turn), budget=budget.rag_budget)

    def _turn_room(self, budget: WindowBudget, block: HumanMessage | None) -> int:
        """What the current turn may take: the ceiling minus the fixed parts and block."""
        block_tokens = _message_tokens([block], self.counter)
        return budget.window - budget.output_reserve - budget.fixed - block_tokens - REPLY_PRIMING

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
        own = _message_tokens(history, self.counter)
        if summary is not None:
            own += self.counter(summary.text) + _RECAP_MESSAGE
        return min(own, self._recap_room(room))

    def _fit_as_is(
        self,
        history: Sequence[BaseMessage],
        summary: RunningSummary | None,
        turn: list[BaseMessage],
        start: _Start,
        report: ContextReport | None,
    ) -> _Fit | None:
        """The common case: the turn fits beside a full recap share (None otherwise)."""
        block = _block_message(report)
        room = self._turn_room(start.budget, block)
        tokens = _message_tokens(turn, self.counter)
        if tokens <= room - self._recap_room(room) or (
            not self.reduce_trajectory
            and tokens <= room - self._history_need(history, summary, room)
        ):
            return _Fit(
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
        start: _Start,
        report: ContextReport | None,
        cut: _Cut,
        *,
        lend: bool = True,
    ) -> _Fit:
        """Fit a turn that outgrew its share: see `aassemble` for what gives way, in order."""
        stages = [(start.real, report)]
        if report is not None:
            stages.append((start.real, None))
        floor = min(start.real.output_reserve, OUTPUT_RESERVE_FLOOR)
        if floor < start.real.output_reserve:
            stages.append((replace(start.real, output_reserve=floor), None))
        need = 0
        for real, stage_report in stages:
            budget = self.estimator_budget(real, start.calibration, start.shrink)
            block = _block_message(stage_report)
            room = self._turn_room(budget, block)
            need = self._history_need(history, summary, room, lend=lend)
            fitted = await self._fit_within(turn, room - need, cut)
            if fitted is not None:
                view, reduced, cut_turn = fitted
                return _Fit(
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
        if _message_tokens(turn, self.counter) <= target:
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
        self, turn: list[BaseMessage], real: WindowBudget, start: _Start, history: int
    ) -> ContextWindowExceeded:
        """The one refusal: the fixed parts and the user's message leave no room.

        `turn` is the current turn at its smallest (every tool result cut to its marker)
        and `history` what the earlier conversation needs at least (its recap).
        """
        budget = self.estimator_budget(real, start.calibration, start.shrink)
        question = _message_tokens(turn[:1], self.counter)
        rest = _message_tokens(turn[1:], self.counter)
        ceiling = budget.window - budget.output_reserve
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
        report: ContextReport | None = None,
        placement: SystemPlacement = "leading",
    ) -> WindowAssembly:
        system, rest = split_system(compaction.messages)
        stable = [m for m in system if not is_recap(m)]
        recap = [m for m in system if is_recap(m)]
        if rest and is_recap(rest[0]):  # a recap in a human message (require_human_first)
            recap, rest = [rest[0]], rest[1:]
        # Cache-first: stable system messages, the summary and older turns (byte-stable
        # between compactions), then the dynamic tail: the block, the current turn last.
        messages = [*stable, *recap, *rest, *([block] if block else []), *turn]
        counter = self.counter
        summary_tokens = _message_tokens(recap, counter)
        rest = [*stable, *rest]  # a system prompt kept in the messages counts as history
        block_tokens = _message_tokens([block], counter)
        kept = rest[len(stable) :]
        indexed = self.compactor.known_history(kept)
        history_tokens = self._history_tokens(stable, kept, indexed)
        head, tail = [*stable, *recap], [*([block] if block else []), *turn]
        repairs: list[MessageRepair] = []
        if not _valid_request(head, kept, indexed, tail):
            # Late system messages the provider would move or refuse become notes now that
            # the layout is done; any other problem (a layout bug) is mended, not raised.
            sent, repairs = repair_messages(messages, system_messages=placement)
            if repairs:  # a note's marker costs a few tokens: counted with the history
                history_tokens += _message_tokens(sent, counter) - _message_tokens(
                    messages, counter
                )
                messages = sent
        turn_tokens = _message_tokens(turn, counter) + (REPLY_PRIMING if messages else 0)
        ceiling = budget.window - budget.output_reserve
        prompt = budget.fixed + summary_tokens + block_tokens + history_tokens + turn_tokens
        if prompt > ceiling:
            msg = (
                f"the request takes {prompt} tokens, more than the window minus the output "
                f"reserve ({ceiling})"
            )
            raise ContextWindowExceeded(msg, required=prompt, budget=ceiling)
        # The ledger speaks the provider's tokens: each part scaled by the calibration.
        # The fitted line's value at this request's size: right after a tiny call the
        # latest call's own factor is mostly the provider's fixed overhead.
        factor = 1.0 if calibration is None else calibration.factor_at(prompt)
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
            repairs=len(repairs),
        )
        block_report = report if block is not None else None
        return WindowAssembly(messages, compaction.summary, ledger, compaction, block_report)

    def _history_tokens(
        self,
        stable: list[BaseMessage],
        kept: list[BaseMessage],
        known: tuple[int, CleanScan | None] | None,
    ) -> int:
        """Tokens of the stable system messages and the kept history.

        The kept history ends the history the compactor just indexed, so its cost is
        `known` (a difference of running totals there); counted message by message when
        it is not, or when the compactor counts with another counter.
        """
        if known is None or self.compactor.token_counter is not self.counter:
            return _message_tokens([*stable, *kept], self.counter)
        return _message_tokens(stable, self.counter) + known[0]


def _valid_request(
    head: list[BaseMessage],
    kept: list[BaseMessage],
    known: tuple[int, CleanScan | None] | None,
    tail: list[BaseMessage],
) -> bool:
    """Whether `[*head, *kept, *tail]` keeps every message rule, checking what is new.

    The kept history was checked when it was indexed: when it was clean from a unit
    start, the check resumes at its end and reads only the block and the current turn.
    False means "not shown here", and the caller runs the full check.
    """
    scan = resume_scan(CleanScan(), head)
    if kept:
        scan = None if scan is None or known is None else known[1]
    if scan is not None:
        scan = resume_scan(scan, tail)
    return scan is not None and not scan.open_calls


def _offloader_for(
    offload: OffloadConfig | OffloadStore | None, counter: TokenCounter
) -> ToolResultOffloader | None:
    """The offloader of the `offload=` argument (None when off)."""
    given: object = offload  # checked at run time: callers are not always typed
    if given is None:
        return None
    if isinstance(given, OffloadStore):
        given = OffloadConfig(store=given)
    if not isinstance(given, OffloadConfig):
        msg = (
            f"offload takes an OffloadConfig or an OffloadStore, got {type(given).__name__}: "
            "for example offload=WorkspaceOffloadStore.for_terminal(terminal_tool)"
        )
        raise ConfigError(msg)
    return ToolResultOffloader(given, token_counter=counter)


def _tallied(assembly: WindowAssembly, offload: OffloadOutcome | None) -> WindowAssembly:
    """The assembly with the offloads recorded in its ledger."""
    ledger = with_offload_tally(assembly.ledger, offload)
    return assembly if ledger is assembly.ledger else replace(assembly, ledger=ledger)


def _repairs_tallied(assembly: WindowAssembly, repairs: Sequence[MessageRepair]) -> WindowAssembly:
    """The assembly with the repairs made to the incoming messages added to its ledger."""
    if not repairs:
        return assembly
    ledger = replace(assembly.ledger, repairs=assembly.ledger.repairs + len(repairs))
    return replace(assembly, ledger=ledger)


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


class _Sizing(TypedDict):
    """`compact_view`'s window arguments, as both assembly twins pass them."""

    overhead_tokens: int
    ceiling_tokens: int
    room_tokens: int
    summarizer_window: int
    cap_scale: float


class _BlockFree:
    """Drops retrieval blocks a previous layout left in (they are rebuilt every call).

    Stored histories hold none (the request is a view), so each thread remembers the last
    list it found free of them: a call that extends it (the same message objects, a
    pointer comparison) looks only at the new messages, not at every message's id.
    """

    def __init__(self) -> None:
        self._last = threading.local()

    def without_blocks(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        last: tuple[BaseMessage, ...] = getattr(self._last, "messages", ())
        known = len(last)
        if known > len(messages) or not all(map(operator.is_, messages[:known], last)):
            known = 0
        if RETRIEVAL_ID in map(_ID, messages[known:]):
            self._last.messages = ()
            return [m for m in messages if m.id != RETRIEVAL_ID]
        self._last.messages = tuple(messages)
        return list(messages)


def _query(turn: Sequence[BaseMessage]) -> str:
    return turn[0].text if turn else ""


def _block_message(report: ContextReport | None) -> HumanMessage | None:
    # A human message: providers accept it anywhere before the question (a system
    # message mid-conversation is rejected by Anthropic and hoisted by Gemini).
    if report is None or not report.text.strip():
        return None
    return HumanMessage(report.text, id=RETRIEVAL_ID)


@dataclass(slots=True)
class _Start:
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
class _Fit:
    """The current turn as it will be sent, and the ledger and block it was fitted under."""

    turn: list[BaseMessage]
    reduced: bool
    block: HumanMessage | None
    report: ContextReport | None
    budget: WindowBudget
    real: WindowBudget
    cut: CutTurn | None = None


def _sync_cut(cutter: ResultCutter) -> _Cut:
    """The cutter's sync `cut` in the shape `_fit` awaits (the store's sync `save`)."""

    async def cut(turn: list[BaseMessage], target: int | None) -> CutTurn | None:
        return cutter.cut(turn, target)

    return cut
