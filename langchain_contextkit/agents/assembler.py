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

import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypedDict

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from langchain_contextkit._async import run_sync
from langchain_contextkit._content_witness import ContentWitness, vouching
from langchain_contextkit._validate import one_of
from langchain_contextkit.agents.known_messages import KnownMessages
from langchain_contextkit.agents.offload import (
    STORE_OFFLOAD_MIN_TOKENS,
    OffloadConfig,
    OffloadOutcome,
    ToolResultOffloader,
    offloader_for,
    with_offload_tally,
)
from langchain_contextkit.agents.request_layout import WindowAssembly
from langchain_contextkit.agents.result_cutter import ResultCutter
from langchain_contextkit.agents.retrieval_block import (
    RETRIEVAL_ID,
    BlockFree,
    CallRetrieval,
    config_for,
    query_of,
)
from langchain_contextkit.agents.turn_fitting import (
    OUTPUT_RESERVE_FLOOR,
    Fit,
    Start,
    TurnFitting,
    sync_cut,
)
from langchain_contextkit.builder.runnable import ContextBuilder
from langchain_contextkit.compaction.compactor import (
    AViewSummarize,
    CompactionResult,
    HistoryCompactor,
    RunningSummary,
    ViewSummarize,
)
from langchain_contextkit.errors import ConfigError, ContextWindowExceeded
from langchain_contextkit.messages import (
    MessageRepair,
    repair_messages,
    system_placement_for,
)
from langchain_contextkit.sources.notes import NoteSource
from langchain_contextkit.tokens import (
    TokenCounter,
    count_fixed_tokens,
    count_tokens,
)
from langchain_contextkit.window_budget import WindowBudget, WindowBudgetConfig

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_contextkit.agents.ledger import Anchor
    from langchain_contextkit.agents.offload_stores import OffloadStore
    from langchain_contextkit.budget import ContextConfig
    from langchain_contextkit.builder.report import ContextReport
    from langchain_contextkit.calibration import Calibration
    from langchain_contextkit.compaction.recap_store import RecapStore
    from langchain_contextkit.notes import NoteStore
    from langchain_contextkit.sources.base import ContextSource


__all__ = [
    "HISTORY_PREVIEW_SHARE",
    "OUTPUT_RESERVE_FLOOR",
    "RETRIEVAL_ID",
    "WindowAssembler",
    "WindowAssembly",
]


HISTORY_PREVIEW_SHARE = 0.125
"""A tool result in the history over half the history's room is shown as a preview of
this share of the room (head + tail + a marker)."""


_STORES_KEPT = 8
"""Stores (and their offloaders and cutters) an assembler remembers across calls."""


class WindowAssembler(TurnFitting):
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
        self.offloader = offloader_for(offload, self.counter)
        self._block_free = BlockFree()
        self._known = KnownMessages()  # a checkpointer's copies, traded for the objects seen
        self._witness = ContentWitness()  # one read of the contents per call, for the memos
        self._lock = threading.Lock()
        # The cutter saves to the configured store; a call's own store gets its pair.
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
        retrieval: CallRetrieval | None = None,
        recaps: RecapStore | None = None,
    ) -> WindowAssembly:
        """Lay out one model call (sync). See `aassemble`."""
        messages = self._known.adopt(messages)
        with vouching(self._witness.read(messages)):
            start = self._start(messages, system_message, tools, model, budget, calibration, shrink)
            offloader, cutter = self._store_tools(store)
            if offloader is not None:
                start.offload = offloader.offload(start.view, room=start.room, tools=tools)
                start.view = start.offload.messages
            history, turn = self._split(start, cutter)
            report = self._block(turn, start.budget, retrieval)
            fit = self._fit_as_is(history, summary, turn, start, report)
            lent = fit is None
            if fit is None:
                fit = run_sync(self._fit(history, summary, turn, start, report, sync_cut(cutter)))

            def compact(fit: Fit) -> CompactionResult:
                return self.compactor.compact_view(
                    history,
                    summary=summary,
                    summarize_view=summarize_view,
                    reuse_recaps=reuse_recaps,
                    recaps=recaps,
                    **self._sizing(fit.budget, fit.block, fit.turn, start.calibration),
                )

            try:
                compaction = compact(fit)
            except ContextWindowExceeded:
                if not lent:
                    raise
                # The history needed more than the turn left it: give it its full recap share.
                fit = run_sync(
                    self._fit(history, summary, turn, start, report, sync_cut(cutter), lend=False)
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
        summarize_view: AViewSummarize | None = None,
        budget: WindowBudget | None = None,
        calibration: Calibration | None = None,
        shrink: int = 0,
        anchor: Anchor | None = None,
        reuse_recaps: bool = True,
        store: OffloadStore | None = None,
        retrieval: CallRetrieval | None = None,
        recaps: RecapStore | None = None,
        asummarize_view: AViewSummarize | None = None,
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
            summarize_view: Writes a recap in place (`HistoryCompactor.acompact_view`),
                async here; `assemble` takes the sync one.
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
            retrieval: The call's retrieval (`CallRetrieval`: its scope and the run's
                callbacks, passed to the sources); pass the same one to a retry of the
                call and the sources are not asked again.
            recaps: Recaps shared with other workers (`HistoryCompactor.compact_view`).
            asummarize_view: An alias of `summarize_view`.

        Raises:
            ContextWindowExceeded: Only when the system prompt, the tool schemas, the
                user's last message and the output reserve's floor alone exceed the
                window; the message names each part and its size.
        """
        summarize_view = one_of(
            "summarize_view", summarize_view, "asummarize_view", asummarize_view
        )
        messages = self._known.adopt(messages)
        with vouching(self._witness.read(messages)):
            start = self._start(messages, system_message, tools, model, budget, calibration, shrink)
            offloader, cutter = self._store_tools(store)
            if offloader is not None:
                start.offload = await offloader.aoffload(start.view, room=start.room, tools=tools)
                start.view = start.offload.messages
            history, turn = self._split(start, cutter)
            report = await self._ablock(turn, start.budget, retrieval)
            fit = self._fit_as_is(history, summary, turn, start, report)
            lent = fit is None
            if fit is None:
                fit = await self._fit(history, summary, turn, start, report, cutter.acut)

            async def compact(fit: Fit) -> CompactionResult:
                return await self.compactor.acompact_view(
                    history,
                    summary=summary,
                    summarize_view=summarize_view,
                    reuse_recaps=reuse_recaps,
                    recaps=recaps,
                    **self._sizing(fit.budget, fit.block, fit.turn, start.calibration),
                )

            try:
                compaction = await compact(fit)
            except ContextWindowExceeded:
                if not lent:
                    raise
                fit = await self._fit(
                    history, summary, turn, start, report, cutter.acut, lend=False
                )
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
    ) -> Start:
        """The call's ledger (real and in the counter's tokens) and the block-free view.

        A caller's broken pairs are repaired in the request only; system messages stay
        where they are until the layout is final (a note made of one here would become
        the latest human message and move the turn's start).
        """
        messages, repairs = repair_messages(messages, system_messages="anywhere")
        if budget is None:
            budget = self.budget_for(model=model, system_message=system_message, tools=tools)
        return Start(
            real=budget,
            budget=budget.calibrated(calibration, shrink),
            calibration=calibration,
            shrink=shrink,
            view=self._block_free.without_blocks(messages),
            room=self.history_room(budget),
            repairs=repairs,
            placement=system_placement_for(model),
        )

    def _split(
        self, start: Start, cutter: ResultCutter
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
        fit: Fit,
        start: Start,
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
        assembly = _tallied(assembly, start.offload, start.repairs)
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
            ceiling_tokens=budget.ceiling,
            room_tokens=self.history_room(budget),
            summarizer_window=budget.window,
            cap_scale=1.0 if calibration is None else min(max(calibration.ratio, 1e-3), 1e5),
        )

    def history_room(self, budget: WindowBudget) -> int:
        """What the conversation may take: the trajectory budget (the block's share kept)."""
        return budget.trajectory_budget(rag_in_scope=self.builder is None)

    # -- parts ----------------------------------------------------------------------------

    def _block(
        self, turn: list[BaseMessage], budget: WindowBudget, retrieval: CallRetrieval | None
    ) -> ContextReport | None:
        if self.builder is None or not turn or budget.rag_budget <= 0:
            return None
        retrieval = retrieval or CallRetrieval()
        return retrieval.report(self.builder, query_of(turn), budget.rag_budget)

    async def _ablock(
        self, turn: list[BaseMessage], budget: WindowBudget, retrieval: CallRetrieval | None
    ) -> ContextReport | None:
        if self.builder is None or not turn or budget.rag_budget <= 0:
            return None
        retrieval = retrieval or CallRetrieval()
        return await retrieval.areport(self.builder, query_of(turn), budget.rag_budget)


def _tallied(
    assembly: WindowAssembly, offload: OffloadOutcome | None, repairs: Sequence[MessageRepair]
) -> WindowAssembly:
    """The assembly with the offloads and the repairs of the incoming messages in its ledger."""
    ledger = with_offload_tally(assembly.ledger, offload)
    if repairs:
        ledger = replace(ledger, repairs=ledger.repairs + len(repairs))
    return assembly if ledger is assembly.ledger else replace(assembly, ledger=ledger)


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
