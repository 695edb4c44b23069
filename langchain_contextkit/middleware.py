"""`create_agent` middleware: compaction alone, or every model call under one ledger.

`CompactionMiddleware` wraps each model call (`wrap_model_call` / `awrap_model_call`):
it measures the request the way the provider will (system prompt and tool schemas
included, langchain #34664), lets `HistoryCompactor` build the view the model should see,
and sends that instead of the raw history. The history in the agent's state stays whole;
only the running summary is stored beside it (a private state key), so the next call
extends the summary instead of re-reading old turns, and the prefix the provider caches
stays byte-stable between compactions.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    OmitFromInput,
    PrivateStateAttr,
)
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.types import Command
from typing_extensions import NotRequired

from langchain_contextkit._checks import check_count
from langchain_contextkit.budget import (
    ContextConfig,
    WindowBudget,
    WindowBudgetConfig,
    model_limits,
)
from langchain_contextkit.compaction import (
    AViewSummarize,
    CompactionResult,
    HistoryCompactor,
    RunningSummary,
    ViewSummarize,
)
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.summarizers import SUMMARY_CONFIG
from langchain_contextkit.tokens import count_fixed_tokens
from langchain_contextkit.window import (
    WindowAssembler,
    WindowAssembly,
    next_call_number,
    with_ledger,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AnyMessage
    from langchain_core.runnables import Runnable

    from langchain_contextkit.notes import NoteStore
    from langchain_contextkit.sources import ContextSource

__all__ = [
    "LEDGER_KEY",
    "SUMMARY_KEY",
    "CompactionMiddleware",
    "CompactionState",
    "ContextKitMiddleware",
    "ContextKitState",
]

SUMMARY_KEY = "contextkit_summary"
"""The agent-state key that holds the running summary (a `RunningSummary.to_dict()`)."""


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
        """
        super().__init__()
        self.compactor = compactor if compactor is not None else HistoryCompactor()
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

    @staticmethod
    def _respond(
        result: CompactionResult, response: ModelResponse[Any]
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        if not result.compacted or result.summary is None:
            return response
        update = {SUMMARY_KEY: result.summary.to_dict()}
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def _summary_request(
        self, request: ModelRequest[Any], view: list[BaseMessage], instruction: str
    ) -> tuple[Runnable[Any, BaseMessage], list[BaseMessage]]:
        """The model and messages of an in-place summary call (same prefix as the agent's)."""
        llm = self.compactor.llm
        assert llm is not None  # noqa: S101 - only called when there is one
        model: Runnable[Any, BaseMessage] = llm
        if request.tools:
            try:
                model = llm.bind_tools(request.tools, tool_choice="none")
            except (NotImplementedError, TypeError, ValueError):
                model = llm  # no tools bound: the prefix differs, the summary still works
        system = [request.system_message] if request.system_message else []
        return model, [*system, *view, HumanMessage(instruction)]

    def _view_summarizer(self, request: ModelRequest[Any]) -> ViewSummarize | None:
        if not self.summarize_in_place or self.compactor.llm is None:
            return None

        def summarize(view: list[BaseMessage], instruction: str) -> str:
            model, messages = self._summary_request(request, view, instruction)
            return model.invoke(messages, config=SUMMARY_CONFIG).text

        return summarize

    def _aview_summarizer(self, request: ModelRequest[Any]) -> AViewSummarize | None:
        if not self.summarize_in_place or self.compactor.llm is None:
            return None

        async def summarize(view: list[BaseMessage], instruction: str) -> str:
            model, messages = self._summary_request(request, view, instruction)
            return (await model.ainvoke(messages, config=SUMMARY_CONFIG)).text

        return summarize

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any] | ExtendedModelResponse[Any]:
        """Send the compacted view instead of the whole history."""
        overhead, budget = self._ledger(request)
        result = self.compactor.compact_view(
            request.messages,
            summary=self._summary(request),
            summarize_view=self._view_summarizer(request),
            overhead_tokens=overhead,
            ceiling_tokens=None if budget is None else budget.window - budget.output_reserve,
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
        result = await self.compactor.acompact_view(
            request.messages,
            summary=self._summary(request),
            asummarize_view=self._aview_summarizer(request),
            overhead_tokens=overhead,
            ceiling_tokens=None if budget is None else budget.window - budget.output_reserve,
        )
        response = await handler(
            request.override(messages=cast("list[AnyMessage]", result.messages))
        )
        return self._respond(result, response)


LEDGER_KEY = "contextkit_ledger"
"""The agent-state key that holds the recent calls' ledgers (`CallLedger.to_dict()`)."""


class ContextKitState(AgentState[Any]):
    """Agent state with the running summary and the per-call window ledgers."""

    contextkit_summary: NotRequired[Annotated[dict[str, Any] | None, PrivateStateAttr]]
    contextkit_ledger: NotRequired[Annotated[list[dict[str, Any]], OmitFromInput]]


class ContextKitMiddleware(AgentMiddleware[ContextKitState, Any, Any]):
    """Every model call of a `create_agent` agent assembled under one window ledger.

    Per call (see `WindowAssembler`): the `WindowBudget` from the model's window and the
    measured system prompt and tool schemas; the retrieval block from `sources` (and a
    `NoteSource` over `note_store`) within `rag_budget`; the current turn kept (its tool
    loop reduced when it outgrows its room), the history before it compacted; the request
    laid out cache-first; the call's `CallLedger` appended to ``contextkit_ledger`` in
    state (the last `ledger_size` calls). The request never exceeds the window minus the
    output reserve: `ContextWindowExceeded` is raised instead, and nothing is sent.

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
    ) -> None:
        """Configure the middleware.

        Args:
            window: The model's window; default: the model's profile at each call.
            compactor: Compacts old turns (default `HistoryCompactor()`, extractive).
            sources: Retrieval sources for the block.
            note_store: When given, a `NoteSource` over it joins the sources.
            context_config: MMR and per-source ratios of the block.
            budget_config: The ledger's knobs (output reserve, `rag_ratio`).
            reduce_trajectory: Reduce an overlong tool loop of the current turn.
            keep_recent_steps: Tool steps of the current turn kept verbatim.
            ledger_size: How many calls' ledgers state keeps.

        Raises:
            ConfigError: When `ledger_size` < 1, or sources meet a `require_human_first`
                compactor.
        """
        super().__init__()
        check_count("ledger_size", ledger_size, minimum=1)
        self.assembler = WindowAssembler(
            window=window,
            compactor=compactor,
            sources=sources,
            note_store=note_store,
            context_config=context_config,
            budget_config=budget_config,
            reduce_trajectory=reduce_trajectory,
            keep_recent_steps=keep_recent_steps,
        )
        self.ledger_size = ledger_size

    @classmethod
    def for_model(
        cls,
        model: BaseChatModel,
        *,
        fallback_window: int | None = None,
        **kwargs: Any,  # noqa: ANN401 - the other constructor arguments
    ) -> ContextKitMiddleware:
        """Build for `model`: its profile's window and output limit pin the ledger.

        Args:
            model: The agent's chat model.
            fallback_window: The window to use when the profile does not say.
            **kwargs: Any other constructor argument.

        Raises:
            ConfigError: When the window is unknown and no `fallback_window` is given.
        """
        window, max_output = model_limits(model)
        window = window or fallback_window
        if window is None:
            msg = (
                f"{type(model).__name__} has no max_input_tokens in its profile: pass "
                "fallback_window=... (or window=... to the constructor)"
            )
            raise ConfigError(msg)
        budget_config = kwargs.pop("budget_config", None) or WindowBudgetConfig()
        if max_output is not None:
            budget_config = dataclasses.replace(
                budget_config,
                desired_output_tokens=min(budget_config.desired_output_tokens, max_output),
            )
        return cls(window=window, budget_config=budget_config, **kwargs)

    def _state(self, request: ModelRequest[Any]) -> tuple[RunningSummary | None, list[Any]]:
        summary = RunningSummary.from_state(request.state.get(SUMMARY_KEY))
        ledgers = request.state.get(LEDGER_KEY)
        return summary, list(ledgers) if isinstance(ledgers, list) else []

    def _respond(
        self, assembly: WindowAssembly, ledgers: list[Any], response: ModelResponse[Any]
    ) -> ExtendedModelResponse[Any]:
        update: dict[str, Any] = {
            LEDGER_KEY: with_ledger(ledgers, assembly.ledger, self.ledger_size)
        }
        if assembly.compaction.compacted and assembly.summary is not None:
            update[SUMMARY_KEY] = assembly.summary.to_dict()
        return ExtendedModelResponse(model_response=response, command=Command(update=update))

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ExtendedModelResponse[Any]:
        """Send the assembled request instead of the raw history."""
        summary, ledgers = self._state(request)
        assembly = self.assembler.assemble(
            request.messages,
            system_message=request.system_message,
            tools=request.tools,
            model=request.model,
            summary=summary,
            call=next_call_number(ledgers),
        )
        response = handler(request.override(messages=cast("list[AnyMessage]", assembly.messages)))
        return self._respond(assembly, ledgers, response)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ExtendedModelResponse[Any]:
        """Async `wrap_model_call`."""
        summary, ledgers = self._state(request)
        assembly = await self.assembler.aassemble(
            request.messages,
            system_message=request.system_message,
            tools=request.tools,
            model=request.model,
            summary=summary,
            call=next_call_number(ledgers),
        )
        response = await handler(
            request.override(messages=cast("list[AnyMessage]", assembly.messages))
        )
        return self._respond(assembly, ledgers, response)
