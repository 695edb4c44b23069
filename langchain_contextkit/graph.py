"""LangGraph nodes built on the library's compactor (more nodes join in later issues).

`compaction_node` drops into any `StateGraph` whose state has a `messages` channel (for
example `MessagesState`). By default it is non-destructive: the full history stays in
state, and the node writes the compacted view the model should see to another key
(`llm_input_messages`) together with the running summary, so a checkpointer persists
both and the next turn extends the summary. `mode="replace"` rewrites `messages`
instead, and only after a summary succeeded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import AnyMessage, RemoveMessage, SystemMessage
from langchain_core.runnables import RunnableLambda
from langgraph.graph import MessagesState
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from typing_extensions import NotRequired

from langchain_contextkit.budget import WindowBudget, WindowBudgetConfig
from langchain_contextkit.compaction import CompactionResult, HistoryCompactor, RunningSummary
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.tokens import count_message_tokens, count_tool_tokens

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from langchain_core.language_models import BaseChatModel

__all__ = [
    "CompactionGraphState",
    "CompactionMode",
    "compaction_node",
]

CompactionMode = Literal["view", "replace"]


class CompactionGraphState(MessagesState):
    """`MessagesState` plus the keys the compaction node writes (default names)."""

    llm_input_messages: NotRequired[list[AnyMessage]]
    running_summary: NotRequired[dict[str, Any] | None]


def compaction_node(
    compactor: HistoryCompactor,
    *,
    mode: CompactionMode = "view",
    messages_key: str = "messages",
    output_key: str = "llm_input_messages",
    summary_key: str = "running_summary",
    model: BaseChatModel | None = None,
    tools: Sequence[Any] = (),
    system_prompt: str | None = None,
    budget_config: WindowBudgetConfig | None = None,
) -> RunnableLambda[Mapping[str, Any], dict[str, Any]]:
    """Build a compaction node (sync and async) for a `StateGraph`.

    Args:
        compactor: Does the compaction.
        mode: ``"view"`` (default) keeps `messages` whole and writes the compacted view to
            `output_key`; ``"replace"`` rewrites `messages` with `RemoveMessage`s after a
            successful summary (the recap then lives in `messages`).
        messages_key: The state key holding the conversation.
        output_key: Where ``"view"`` mode writes what the model should see.
        summary_key: Where ``"view"`` mode keeps the running summary (a dict).
        model: The chat model that will read the messages: its profile's window turns the
            trigger into a hard ceiling (window minus output reserve).
        tools: The tools bound to that model: their schemas count towards the trigger.
        system_prompt: A system prompt sent beside the messages (not in them): counted too.
        budget_config: The window ledger's knobs (output reserve).

    Returns:
        A runnable node: ``builder.add_node("compact", compaction_node(compactor))``.

    Raises:
        ConfigError: On an unknown `mode`.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.graph import START, StateGraph

        from langchain_contextkit.compaction import HistoryCompactor
        from langchain_contextkit.graph import CompactionGraphState, compaction_node


        def respond(state: CompactionGraphState) -> dict:
            seen = len(state["llm_input_messages"])
            return {"messages": [AIMessage(f"I saw {seen} messages.")]}


        builder = StateGraph(CompactionGraphState)
        builder.add_node(
            "compact", compaction_node(HistoryCompactor(keep_recent=2, trigger_tokens=40))
        )
        builder.add_node("respond", respond)
        builder.add_edge(START, "compact")
        builder.add_edge("compact", "respond")
        graph = builder.compile(checkpointer=InMemorySaver())

        config = {"configurable": {"thread_id": "1"}}
        for turn in range(4):
            text = f"Ticket T-{turn}: printer on floor {turn} is offline again, please check."
            state = graph.invoke({"messages": [HumanMessage(text)]}, config)
        print(len(state["messages"]), len(state["llm_input_messages"]))
        # 8 3
        ```
    """
    if mode not in ("view", "replace"):
        msg = f"mode must be 'view' or 'replace', got {mode!r}."
        raise ConfigError(msg)
    overhead, ceiling = _fixed_costs(compactor, model, tools, system_prompt, budget_config)

    def summary_of(state: Mapping[str, Any]) -> RunningSummary | None:
        stored = state.get(summary_key) if mode == "view" else None
        return RunningSummary.from_dict(stored) if stored else None

    def update(result: CompactionResult) -> dict[str, Any]:
        if mode == "view":
            summary = None if result.summary is None else result.summary.to_dict()
            return {output_key: result.messages, summary_key: summary}
        if not result.compacted:
            return {}
        return {messages_key: [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result.messages]}

    def compact(state: Mapping[str, Any]) -> dict[str, Any]:
        result = compactor.compact_view(
            state[messages_key],
            summary=summary_of(state),
            overhead_tokens=overhead,
            ceiling_tokens=ceiling,
        )
        return update(result)

    async def acompact(state: Mapping[str, Any]) -> dict[str, Any]:
        result = await compactor.acompact_view(
            state[messages_key],
            summary=summary_of(state),
            overhead_tokens=overhead,
            ceiling_tokens=ceiling,
        )
        return update(result)

    return RunnableLambda(compact, afunc=acompact, name="compact_history")


def _fixed_costs(
    compactor: HistoryCompactor,
    model: BaseChatModel | None,
    tools: Sequence[Any],
    system_prompt: str | None,
    budget_config: WindowBudgetConfig | None,
) -> tuple[int, int | None]:
    """Tokens sent beside the messages, and the hard ceiling (None without a window)."""
    counter = compactor.token_counter
    tool_tokens = count_tool_tokens(tools, counter) if tools else 0
    system_tokens = (
        count_message_tokens([SystemMessage(system_prompt)], counter, reply_priming=False)
        if system_prompt
        else 0
    )
    if model is None:
        return tool_tokens + system_tokens, None
    budget = WindowBudget.for_run(
        llm=model,
        cfg=budget_config or WindowBudgetConfig(),
        system_tokens=system_tokens,
        tool_tokens=tool_tokens,
    )
    if budget is None:
        return tool_tokens + system_tokens, None
    return budget.fixed, budget.window - budget.output_reserve
