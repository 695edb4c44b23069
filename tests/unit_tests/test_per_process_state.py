"""What a worker keeps in memory never changes a thread's requests or state.

A deployment runs many workers that pick up any thread (see the README's "Several workers,
one PostgreSQL"); the end-to-end proof is `test_scaleout_postgres.py`. These are the fast
checks of the one piece of per-process state that used to reach a thread: the calibration
a process learnt on other threads, which seeded a new thread's first call.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_contextkit import ContextKitMiddleware
from langchain_contextkit.calibration import CALIBRATION_KEY
from langchain_contextkit.middleware import LEDGER_KEY
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
    assert on_busy[LEDGER_KEY] == on_fresh[LEDGER_KEY]
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
    assert moved[LEDGER_KEY] == kept[LEDGER_KEY]
    assert moved[LEDGER_KEY][-1]["factor"] != 1.0  # learnt, and carried by the state


def test_a_caller_without_a_thread_keeps_what_the_process_learnt() -> None:
    agent = _agent(checkpointer=None)
    _ask(agent, None)
    again = _ask(agent, None)  # no state carried over: the process's calibration serves
    assert again[LEDGER_KEY][0]["factor"] != 1.0
