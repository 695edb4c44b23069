"""`CompactionMiddleware`: compaction alone, for a `create_agent` agent.

It measures the request the way the provider will (system prompt and tool schemas
included), lets `HistoryCompactor` build the view the model should see, and sends that
instead of the raw history. The history in the agent's state stays whole; only the
running summary is stored beside it (a private state key), so the next call extends the
summary instead of re-reading old turns, and the prefix the provider caches stays
byte-stable between compactions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langgraph.types import Command

from langchain_contextkit.agents._stores import SharedRecaps
from langchain_contextkit.agents.in_place import InPlaceSummary
from langchain_contextkit.agents.state import (
    MIDDLEWARE_NAME,
    SUMMARY_KEY,
    CompactionState,
    runs_in_thread,
)
from langchain_contextkit.compaction.compactor import (
    CompactionResult,
    HistoryCompactor,
    RunningSummary,
)
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.tokens import count_fixed_tokens
from langchain_contextkit.window_budget import WindowBudget, WindowBudgetConfig

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from langchain_core.messages import AnyMessage
    from langgraph.store.base import BaseStore


__all__ = ["CompactionMiddleware", "checked_compactor"]


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
        recap_store: BaseStore | None = None,
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
            recap_store: Where recaps are shared by all workers (`RecapStore`); default
                the agent's own store (`create_agent(store=...)`) when it has one.

        Raises:
            ConfigError: When `compactor` is not a `HistoryCompactor` (a chat model
                passed here belongs in `HistoryCompactor(model)`).
        """
        super().__init__()
        self.compactor = checked_compactor(compactor, "CompactionMiddleware") or HistoryCompactor()
        self.window = window
        self.budget_config = budget_config or WindowBudgetConfig()
        self.summarize_in_place = summarize_in_place
        self._recaps = SharedRecaps(recap_store)

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
            ceiling_tokens=None if budget is None else budget.ceiling,
            room_tokens=None if budget is None else budget.spendable,
            summarizer_window=None if budget is None else budget.window,
            reuse_recaps=not runs_in_thread(request),
            recaps=self._recaps.for_request(request),
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
            summarize_view=None if in_place is None else in_place.asummarize,
            overhead_tokens=overhead,
            ceiling_tokens=None if budget is None else budget.ceiling,
            room_tokens=None if budget is None else budget.spendable,
            summarizer_window=None if budget is None else budget.window,
            reuse_recaps=not runs_in_thread(request),
            recaps=self._recaps.for_request(request),
        )
        response = await handler(
            request.override(messages=cast("list[AnyMessage]", result.messages))
        )
        return self._respond(result, response)
