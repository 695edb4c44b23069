"""CompactionMiddleware in a real `create_agent` loop with tools, over many turns."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_contextkit import (
    CompactionMiddleware,
    ContextWindowExceeded,
    HistoryCompactor,
    count_message_tokens,
    count_tool_tokens,
    find_message_problems,
)
from langchain_contextkit.agent.middleware import SUMMARY_KEY
from langchain_contextkit.testing import ScriptedChatModel

SYSTEM_PROMPT = "You are a warehouse assistant. Use the tools to look things up."
WINDOW = 2400


@tool
def stock_level(sku: str) -> str:
    """Return the stock level and shelf notes for a SKU."""
    return f"SKU {sku}: 40 units on shelf A-{len(sku)}. " + "Shelf note: handle with care. " * 12


@tool
def shipping_eta(order_id: str) -> str:
    """Return the shipping ETA of an order."""
    return f"Order {order_id} ships on 2025-02-{10 + len(order_id) % 18:02d}."


def scripted_agent(messages: list[BaseMessage]) -> AIMessage:
    """Call tools for each user turn (every third turn two in parallel), then answer."""
    last = messages[-1]
    if isinstance(last, HumanMessage):
        turn = int(last.text.split()[1].rstrip(":"))
        calls = [{"name": "stock_level", "args": {"sku": f"SKU-{turn}"}, "id": f"s{turn}"}]
        if turn % 3 == 0:
            calls.append(
                {"name": "shipping_eta", "args": {"order_id": f"O{turn}"}, "id": f"e{turn}"}
            )
        return AIMessage("", tool_calls=calls)
    assert isinstance(last, ToolMessage)
    return AIMessage(f"Done: {last.text[:40]}")


def user_turn(turn: int) -> HumanMessage:
    fact = f" Remember FACT-{turn}: dock code {7000 + turn}." if turn < 3 else ""
    return HumanMessage(f"Turn {turn}: check SKU-{turn} please.{fact}")


def make_agent(model: ScriptedChatModel, middleware: CompactionMiddleware) -> Any:
    return create_agent(
        model,
        tools=[stock_level, shipping_eta],
        system_prompt=SYSTEM_PROMPT,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


def request_tokens(model: ScriptedChatModel, index: int) -> int:
    tools = model.request_tools[index]
    return count_message_tokens(model.requests[index]) + count_tool_tokens(tools)


def test_long_agent_loop_stays_valid_complete_and_under_budget() -> None:
    model = ScriptedChatModel(respond=scripted_agent)
    compactor = HistoryCompactor(keep_recent=3, trigger_tokens=900, max_summary_tokens=200)
    middleware = CompactionMiddleware(compactor, window=WINDOW)
    agent = make_agent(model, middleware)
    config = {"configurable": {"thread_id": "loop"}}
    turns = 30
    summaries: list[int] = []
    for turn in range(turns):
        agent.invoke({"messages": [user_turn(turn)]}, config)
        stored = agent.get_state(config).values.get(SUMMARY_KEY)
        if stored:
            summaries.append(stored["covered"])

    # 1. No provider-invalid list reached the model (the strict fake would have raised),
    #    and every request we recorded checks clean.
    assert len(model.requests) == 2 * turns
    for request in model.requests:
        assert find_message_problems(request) == []

    # 2. The history in state is complete: every turn, every tool call and result.
    history = agent.get_state(config).values["messages"]
    humans = [m.text for m in history if isinstance(m, HumanMessage)]
    assert humans == [user_turn(t).text for t in range(turns)]
    tool_results = [m for m in history if isinstance(m, ToolMessage)]
    assert len(tool_results) == turns + len(range(0, turns, 3))

    # 3. Every model input stays inside the window minus the output reserve.
    reserve = min(4096, WINDOW // 2)
    assert max(request_tokens(model, i) for i in range(len(model.requests))) <= WINDOW - reserve

    # 4. Compaction happened, rarely, and the running summary only moved forward.
    assert summaries == sorted(summaries)
    assert 2 <= len(set(summaries)) < turns

    # 5. Facts planted in the first turns are still visible to the model at the end.
    final_text = "\n".join(m.text for m in model.requests[-1])
    for turn in range(3):
        assert f"{7000 + turn}" in final_text


def test_prefix_is_byte_stable_between_compactions() -> None:
    model = ScriptedChatModel(respond=scripted_agent)
    compactor = HistoryCompactor(keep_recent=2, trigger_tokens=1100, max_summary_tokens=150)
    agent = make_agent(model, CompactionMiddleware(compactor, window=WINDOW))
    config = {"configurable": {"thread_id": "cache"}}
    for turn in range(20):
        agent.invoke({"messages": [user_turn(turn)]}, config)

    def serialised(request: list[BaseMessage]) -> list[str]:
        return [json.dumps([m.type, m.text, getattr(m, "tool_calls", [])]) for m in request]

    extensions = 0
    for before, after in zip(model.requests, model.requests[1:], strict=False):
        old, new = serialised(before), serialised(after)
        if new[: len(old)] == old:
            extensions += 1
    # Most consecutive calls only append: a provider's prompt cache keeps hitting.
    assert extensions >= 0.75 * (len(model.requests) - 1)


async def test_async_agent_loop() -> None:
    model = ScriptedChatModel(respond=scripted_agent)
    compactor = HistoryCompactor(keep_recent=2, trigger_tokens=700, max_summary_tokens=150)
    agent = make_agent(model, CompactionMiddleware(compactor, window=WINDOW))
    config = {"configurable": {"thread_id": "async"}}
    for turn in range(12):
        await agent.ainvoke({"messages": [user_turn(turn)]}, config)
    state = (await agent.aget_state(config)).values
    assert state[SUMMARY_KEY]["covered"] > 0
    assert len([m for m in state["messages"] if isinstance(m, HumanMessage)]) == 12
    assert all(find_message_problems(r) == [] for r in model.requests)


def test_window_read_from_the_model_profile() -> None:
    model = ScriptedChatModel(
        respond=scripted_agent, profile={"max_input_tokens": 1600, "max_output_tokens": 300}
    )
    compactor = HistoryCompactor(keep_recent=2, trigger_tokens=100_000, max_summary_tokens=120)
    agent = make_agent(model, CompactionMiddleware(compactor))
    config = {"configurable": {"thread_id": "profile"}}
    for turn in range(15):
        agent.invoke({"messages": [user_turn(turn)]}, config)
    # The trigger never fired on its own; the window (1600 - 300) forced compaction.
    assert agent.get_state(config).values[SUMMARY_KEY] is not None
    assert max(request_tokens(model, i) for i in range(len(model.requests))) <= 1300


def test_a_turn_that_cannot_fit_raises_instead_of_truncating() -> None:
    model = ScriptedChatModel(respond=lambda messages: AIMessage("ok"))
    agent = create_agent(model, middleware=[CompactionMiddleware(HistoryCompactor(), window=300)])
    with pytest.raises(ContextWindowExceeded):
        agent.invoke({"messages": [HumanMessage("word " * 400)]})
    assert model.requests == []


def test_summary_call_reuses_the_agent_prefix_for_prompt_caching() -> None:
    def agent_or_summary(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and last.text.startswith("Pause the task"):
            return AIMessage("Checked SKU-0 to SKU-9; FACT-0 dock code 7000.")
        return scripted_agent(messages)

    model = ScriptedChatModel(respond=agent_or_summary)
    compactor = HistoryCompactor(model, keep_recent=2, trigger_tokens=900, max_summary_tokens=120)
    agent = make_agent(model, CompactionMiddleware(compactor, window=WINDOW))
    config = {"configurable": {"thread_id": "prefix"}}
    for turn in range(12):
        agent.invoke({"messages": [user_turn(turn)]}, config)

    summary_calls = [
        i for i, r in enumerate(model.requests) if r[-1].text.startswith("Pause the task")
    ]
    assert summary_calls
    for i in summary_calls:
        previous, summary_request = model.requests[i - 1], model.requests[i]
        # Same system prompt and messages as the agent's last call up to its current turn
        # (all of it when the compaction comes with a new turn; the history before the
        # turn when the turn's own growth set it off), then the instruction: a provider's
        # prompt cache serves that prefix.
        turn_start = max(i for i, m in enumerate(previous) if isinstance(m, HumanMessage))
        shared = previous if len(summary_request) > len(previous) else previous[:turn_start]
        assert summary_request[: len(shared)] == shared
        assert len(shared) >= len(previous) // 2
        assert model.request_tools[i] == model.request_tools[i - 1]
        assert find_message_problems(summary_request) == []
    state = agent.get_state(config).values
    assert state[SUMMARY_KEY]["text"].startswith("Checked SKU-0")
    assert model.requests[-1][1].text.startswith("[Recap] Checked SKU-0")
