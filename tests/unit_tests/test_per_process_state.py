"""What a worker keeps in memory never changes a thread's requests or state.

A deployment runs many workers that pick up any thread (see the README's "Several workers,
one PostgreSQL"); the end-to-end proof is `test_scaleout_postgres.py`. These are the fast
checks of the two pieces of per-process state that used to reach a thread: the calibration
a process learnt on other threads, which seeded a new thread's first call, and the memo of
recaps, which let a thread whose opening turns matched another's take that thread's recap
instead of asking its own summariser (so one worker made a summary call, another none).
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from langchain_contextkit import (
    CompactionMiddleware,
    ContextKitMiddleware,
    HistoryCompactor,
    context_node,
)
from langchain_contextkit.agent.middleware import LEDGER_KEY
from langchain_contextkit.agent.nodes import ContextGraphState
from langchain_contextkit.agent.window_budget import CALIBRATION_KEY
from langchain_contextkit.testing import ScriptedChatModel


def _reply(messages: list[BaseMessage]) -> AIMessage:
    # The provider counts every request at 1,300 tokens: far from our estimate.
    usage = {"input_tokens": 1300, "output_tokens": 2, "total_tokens": 1302}
    return AIMessage("ok", usage_metadata=usage)  # type: ignore[arg-type]


def _agent(*, checkpointer: Any) -> Any:
    model = ScriptedChatModel(
        respond=_reply, profile={"max_input_tokens": 8000, "max_output_tokens": 256}
    )
    middleware = ContextKitMiddleware.for_model(model, summaries="extractive")
    return create_agent(model, middleware=[middleware], checkpointer=checkpointer)


def _ask(agent: Any, thread: str | None, text: str = "Where is parcel P-1?") -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}} if thread else None
    return agent.invoke({"messages": [HumanMessage(text)]}, config)


def test_a_new_thread_starts_from_its_own_state_not_from_other_threads() -> None:
    busy = _agent(checkpointer=InMemorySaver())  # a worker that served thread "a" before
    for _ in range(3):
        _ask(busy, "a")
    on_busy = _ask(busy, "b")
    fresh = _agent(checkpointer=InMemorySaver())  # a worker that never saw a thread
    on_fresh = _ask(fresh, "b")
    assert _untimed(on_busy[LEDGER_KEY]) == _untimed(on_fresh[LEDGER_KEY])
    config = {"configurable": {"thread_id": "b"}}
    stored = busy.get_state(config).values[CALIBRATION_KEY]
    assert stored == fresh.get_state(config).values[CALIBRATION_KEY]
    assert on_busy[LEDGER_KEY][0]["factor"] == 1.0


def test_a_thread_goes_on_from_its_checkpointed_calibration() -> None:
    saver = InMemorySaver()
    first, second = _agent(checkpointer=saver), _agent(checkpointer=saver)  # two workers
    _ask(first, "a")
    _ask(first, "a")
    moved = _ask(second, "a")  # the third turn lands on the other worker
    stayed = _agent(checkpointer=InMemorySaver())
    for _ in range(2):
        _ask(stayed, "a")
    kept = _ask(stayed, "a")
    assert _untimed(moved[LEDGER_KEY]) == _untimed(kept[LEDGER_KEY])
    assert moved[LEDGER_KEY][-1]["factor"] != 1.0  # learnt, and carried by the state


def test_a_caller_without_a_thread_keeps_what_the_process_learnt() -> None:
    agent = _agent(checkpointer=None)
    _ask(agent, None)
    again = _ask(agent, None)  # no state carried over: the process's calibration serves
    assert again[LEDGER_KEY][0]["factor"] != 1.0


class _Summariser:
    """A model whose recaps differ with what it was asked (as an LLM's do).

    A recap names the request it answers, so two workers' requests can be compared
    even when one thread's recap feeds the next summary request (a counter would make
    them differ by how many recaps the worker wrote before, not by what it was sent).
    """

    def __init__(self) -> None:
        self.requests: list[list[str]] = []

    def __call__(self, messages: list[BaseMessage]) -> AIMessage:
        self.requests.append([m.text for m in messages])
        if "summar" in messages[-1].text.lower():
            name = hashlib.sha256(messages[-1].text.encode()).hexdigest()[:8]
            return AIMessage(f"Recap {name}: parcels P-0 to P-9 were discussed.")
        return AIMessage("Noted. " + "word " * 120)


def _recap_agent(kind: str, model: ScriptedChatModel) -> Any:
    if kind == "contextkit":
        middleware: Any = ContextKitMiddleware.for_model(model)
    else:
        middleware = CompactionMiddleware(HistoryCompactor(model), window=3000)
    return create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())


def _same_opening(agent: Any, thread: str) -> None:
    config = {"configurable": {"thread_id": thread}}
    for turn in range(14):
        text = f"Turn {turn}: parcel P-{turn} " + "detail " * 60
        agent.invoke({"messages": [HumanMessage(text)]}, config)


@pytest.mark.parametrize("kind", ["contextkit", "compaction"])
def test_a_thread_never_takes_a_recap_another_thread_left_in_this_process(kind: str) -> None:
    profile = {"max_input_tokens": 3000, "max_output_tokens": 200}
    busy_model = _Summariser()
    busy = _recap_agent(kind, ScriptedChatModel(respond=busy_model, profile=profile))
    _same_opening(busy, "a")  # thread "a" compacts; its recap stays in this process's memo
    served_a = len(busy_model.requests)
    _same_opening(busy, "b")  # the same opening turns, on the same worker
    fresh_model = _Summariser()
    fresh = _recap_agent(kind, ScriptedChatModel(respond=fresh_model, profile=profile))
    _same_opening(fresh, "b")  # ... and on a worker that never saw thread "a"
    on_busy = busy_model.requests[served_a:]
    summaries = [r for r in on_busy if "summar" in r[-1].lower()]
    assert summaries, "the opening is meant to compact"
    assert len(on_busy) == len(fresh_model.requests)
    assert [r[-1] for r in on_busy] == [r[-1] for r in fresh_model.requests]


def _graph(model: ScriptedChatModel) -> Any:
    def call_model(state: ContextGraphState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["llm_input_messages"])]}

    builder = StateGraph(ContextGraphState)
    builder.add_node("context", context_node(model=model, compactor=HistoryCompactor(model)))
    builder.add_node("model", call_model)
    builder.add_edge(START, "context")
    builder.add_edge("context", "model")
    return builder.compile(checkpointer=InMemorySaver())


def test_a_graph_node_in_a_thread_never_takes_another_threads_recap() -> None:
    profile = {"max_input_tokens": 3000, "max_output_tokens": 200}
    busy_model, fresh_model = _Summariser(), _Summariser()
    busy = _graph(ScriptedChatModel(respond=busy_model, profile=profile))
    _same_opening(busy, "a")
    served_a = len(busy_model.requests)
    _same_opening(busy, "b")
    _same_opening(_graph(ScriptedChatModel(respond=fresh_model, profile=profile)), "b")
    on_busy = busy_model.requests[served_a:]
    assert any("summar" in r[-1].lower() for r in on_busy), "the opening is meant to compact"
    assert [r[-1] for r in on_busy] == [r[-1] for r in fresh_model.requests]


def _untimed(ledgers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ledgers without their wall times, which differ from run to run."""
    return [
        {k: v for k, v in ledger.items() if k not in {"model_ms", "middleware_ms"}}
        for ledger in ledgers
    ]
