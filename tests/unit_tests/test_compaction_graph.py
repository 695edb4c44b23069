"""The compaction node in real LangGraph graphs, with a checkpointer, across turns."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from langchain_contextkit import (
    CompactionGraphState,
    ConfigError,
    HistoryCompactor,
    compaction_node,
    count_message_tokens,
    find_message_problems,
)
from langchain_contextkit.compaction import RECAP_ID_PREFIX
from langchain_contextkit.testing import ScriptedChatModel


def build(node: Any, seen: list[list[BaseMessage]], *, key: str = "llm_input_messages") -> Any:
    def respond(state: dict[str, Any]) -> dict[str, Any]:
        view = state[key]
        seen.append(list(view))
        return {"messages": [AIMessage(f"Answered with {len(view)} messages in view.")]}

    builder = StateGraph(CompactionGraphState)
    builder.add_node("compact", node)
    builder.add_node("respond", respond)
    builder.add_edge(START, "compact")
    builder.add_edge("compact", "respond")
    return builder.compile(checkpointer=InMemorySaver())


def turn_text(turn: int) -> str:
    return f"Turn {turn}: the code for locker L{turn} is {1000 + turn}, remember it please."


def test_view_mode_keeps_full_history_and_extends_the_summary() -> None:
    seen: list[list[BaseMessage]] = []
    compactor = HistoryCompactor(keep_recent=2, trigger_tokens=150, max_summary_tokens=400)
    graph = build(compaction_node(compactor), seen)
    config = {"configurable": {"thread_id": "t1"}}
    covered: list[int] = []
    for turn in range(12):
        state = graph.invoke({"messages": [HumanMessage(turn_text(turn))]}, config)
        if state["running_summary"]:
            covered.append(state["running_summary"]["covered"])
    # The full history is intact in the checkpoint.
    assert len(state["messages"]) == 24
    assert [m.text for m in state["messages"][::2]] == [turn_text(t) for t in range(12)]
    # The model saw a compacted, valid view that grew back below the trigger.
    assert len(seen[-1]) < 24
    assert all(find_message_problems(view) == [] for view in seen)
    assert seen[-1][0].id is not None
    assert seen[-1][0].id.startswith(RECAP_ID_PREFIX)
    # The summary was extended several times and never went backwards.
    assert covered == sorted(covered)
    assert len(set(covered)) >= 2
    # Facts from the first turn survive in the recap (extractive summariser keeps numbers).
    assert "1000" in seen[-1][0].text


def test_view_mode_persists_summary_between_graph_instances_via_checkpointer() -> None:
    saver = InMemorySaver()
    compactor = HistoryCompactor(keep_recent=2, trigger_tokens=120)

    def make() -> Any:
        builder = StateGraph(CompactionGraphState)
        builder.add_node("compact", compaction_node(compactor))
        builder.add_node("respond", lambda s: {"messages": [AIMessage("ok, noted the code")]})
        builder.add_edge(START, "compact")
        builder.add_edge("compact", "respond")
        return builder.compile(checkpointer=saver)

    config = {"configurable": {"thread_id": "t2"}}
    for turn in range(6):
        state = make().invoke({"messages": [HumanMessage(turn_text(turn))]}, config)
    summary = state["running_summary"]
    assert summary is not None
    assert summary["covered"] > 0
    assert summary["last_id"] == state["messages"][summary["covered"] - 1].id


def test_replace_mode_rewrites_messages_with_one_recap() -> None:
    seen: list[list[BaseMessage]] = []
    compactor = HistoryCompactor(keep_recent=2, trigger_tokens=150)
    graph = build(compaction_node(compactor, mode="replace"), seen, key="messages")
    config = {"configurable": {"thread_id": "t3"}}
    for turn in range(12):
        state = graph.invoke({"messages": [HumanMessage(turn_text(turn))]}, config)
    messages = state["messages"]
    assert len(messages) < 24
    recaps = [m for m in messages if m.id and m.id.startswith(RECAP_ID_PREFIX)]
    assert len(recaps) == 1
    assert messages[0] is not None
    assert messages[0].id == recaps[0].id
    assert find_message_problems(messages) == []
    assert "1000" in recaps[0].text  # the first turn's fact, carried through extensions


def test_replace_mode_leaves_messages_alone_when_the_summary_fails() -> None:
    failing = ScriptedChatModel(responses=[])  # every call raises
    compactor = HistoryCompactor(failing, keep_recent=2, trigger_tokens=50, fallback=False)
    seen: list[list[BaseMessage]] = []
    graph = build(compaction_node(compactor, mode="replace"), seen, key="messages")
    config = {"configurable": {"thread_id": "t4"}}
    for turn in range(5):
        state = graph.invoke({"messages": [HumanMessage(turn_text(turn))]}, config)
    assert len(state["messages"]) == 10
    assert [m.text for m in state["messages"][::2]] == [turn_text(t) for t in range(5)]


async def test_async_graph_uses_the_async_path() -> None:
    calls: list[str] = []

    async def respond(state: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [AIMessage("fine, stored it")]}

    llm = ScriptedChatModel(respond=lambda messages: calls.append("llm") or "Summary: codes noted.")
    builder = StateGraph(CompactionGraphState)
    builder.add_node(
        "compact", compaction_node(HistoryCompactor(llm, keep_recent=2, trigger_tokens=80))
    )
    builder.add_node("respond", respond)
    builder.add_edge(START, "compact")
    builder.add_edge("compact", "respond")
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t5"}}
    for turn in range(6):
        state = await graph.ainvoke({"messages": [HumanMessage(turn_text(turn))]}, config)
    assert calls
    assert state["llm_input_messages"][0].text.startswith("[Recap] Summary: codes noted.")


def test_tools_and_system_prompt_count_towards_the_trigger() -> None:
    @tool
    def lookup_locker(locker_id: str, include_history: bool = False) -> str:
        """Look up a locker by id and return its owner, code and full access history."""
        return locker_id

    history = {"messages": [HumanMessage(turn_text(t)) for t in range(3)]}
    tokens = count_message_tokens(history["messages"])
    compactor = HistoryCompactor(keep_recent=1, trigger_tokens=tokens + 5)
    plain = compaction_node(compactor).invoke(history)
    with_tools = compaction_node(
        compactor, tools=[lookup_locker], system_prompt="You manage lockers."
    ).invoke(history)
    assert plain["running_summary"] is None
    assert with_tools["running_summary"] is not None


def test_model_window_becomes_a_hard_ceiling() -> None:
    model = ScriptedChatModel(profile={"max_input_tokens": 400, "max_output_tokens": 100})
    compactor = HistoryCompactor(keep_recent=4, trigger_tokens=100_000, max_summary_tokens=60)
    node = compaction_node(compactor, model=model)
    messages: list[BaseMessage] = [SystemMessage("Be brief.")]
    for turn in range(10):
        messages += [HumanMessage(turn_text(turn)), AIMessage("Noted.")]
    out = node.invoke({"messages": messages})
    view = out["llm_input_messages"]
    assert count_message_tokens(view) <= 400 - 100
    assert view[0] is messages[0]


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match="mode"):
        compaction_node(HistoryCompactor(), mode="destroy")  # type: ignore[arg-type]
