"""Recaps shared through a LangGraph store, and the bounded cold start of a fresh worker.

A "worker" here is a fresh compactor (or a fresh `create_agent` + middleware): nothing in
its process memo. Three of them answer the same stateless thread, one after another, on
one store: the first makes at most `cold_start_calls` summariser calls, the others none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from _postgres import LOCALHOST
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.store.memory import InMemoryStore

from langchain_contextkit import ContextKitMiddleware, HistoryCompactor
from langchain_contextkit.agent.middleware import LEDGER_KEY
from langchain_contextkit.compaction.recap_store import (
    RECAP_NAMESPACE,
    RecapStore,
    SharedRecap,
)
from langchain_contextkit.testing import ScriptedChatModel

if TYPE_CHECKING:
    from collections.abc import Iterator

    from langgraph.store.base import BaseStore

USER = "[user]"


def thread(n: int) -> list[BaseMessage]:
    """About `n` messages: questions with facts, a tool call and its result, an answer."""
    out: list[BaseMessage] = []
    turn = 0
    while len(out) < n:
        turn += 1
        call = {"name": "lookup", "args": {"id": turn}, "id": f"c{turn}", "type": "tool_call"}
        out += [
            HumanMessage(f"{USER} Order ORD-{turn:05d} must reach dock {100 + turn % 800}."),
            AIMessage("", tool_calls=[call]),
            ToolMessage(f"row {turn % 7} ok; " * 30, tool_call_id=f"c{turn}", name="lookup"),
            AIMessage(f"Noted order {turn}, it is on its way to the dock as asked."),
        ]
    return out


class Counting:
    """A `summarize(text, instruction)` callback that counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str, instruction: str) -> str:
        del instruction
        self.calls += 1
        return f"Facts:\n- User: summary {self.calls} of {len(text)} characters."


def run_worker(store: BaseStore | None, history: list[BaseMessage]) -> tuple[int, Any]:
    """A fresh compactor's compaction of `history` with the shared store; its calls."""
    summarize = Counting()
    compactor = HistoryCompactor()
    recaps = None if store is None else RecapStore(store=store)
    result = compactor.compact_view(
        history, summarize=summarize, room_tokens=3_000, summarizer_window=8_000, recaps=recaps
    )
    return summarize.calls, result


def check_three_workers(store: BaseStore) -> None:
    history = thread(1_200)
    first_calls, first = run_worker(store, history)
    assert first.compacted
    assert 1 <= first_calls <= 2
    assert first.summarizer_calls == first_calls
    assert first.summarizer_chars > 0
    for _ in range(2):
        calls, again = run_worker(store, history)
        assert calls == 0
        assert again.shared
        assert again.summarizer_calls == 0
        assert [m.text for m in again.messages] == [m.text for m in first.messages]


def test_three_workers_on_one_in_memory_store_summarise_once() -> None:
    check_three_workers(InMemoryStore())


@pytest.fixture(scope="module")
def postgres_store(postgres_url: str) -> Iterator[BaseStore]:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(postgres_url) as store:
        store.setup()
        yield store


@LOCALHOST
def test_three_workers_on_one_postgres_store_summarise_once(postgres_store: BaseStore) -> None:
    check_three_workers(postgres_store)


def test_without_a_store_every_fresh_worker_pays_the_bounded_cold_start() -> None:
    history = thread(1_200)
    wide_calls, wide = run_worker(None, history)
    for _ in range(2):
        calls, again = run_worker(None, history)
        assert calls == wide_calls
        assert 1 <= calls <= 2
        assert not again.shared
    # The older part is the extractive fold: the user's oldest and newest orders are in it.
    recap = wide.messages[0].text
    assert "ORD-00001" in recap


def test_a_cold_start_over_its_bound_falls_back_to_the_extractive_recap() -> None:
    summarize = Counting()
    # A summariser window this small splits the newest epoch into several requests (map,
    # then reduce): more than the one call allowed, so the extractive recap is used.
    result = HistoryCompactor(cold_start_calls=1).compact_view(
        thread(1_200), summarize=summarize, room_tokens=3_000, summarizer_window=1_200
    )
    assert result.compacted
    assert summarize.calls == 1
    assert result.summarizer == "extractive"
    assert result.error is not None
    assert "more than 1 summariser calls" in result.error


def test_the_store_ignores_what_it_did_not_write_and_survives_a_failing_store() -> None:
    store = InMemoryStore()
    shared = RecapStore(store=store)
    store.put(RECAP_NAMESPACE, "a", {"recap": 7})
    store.put(RECAP_NAMESPACE, "b", {"recap": "x" * (2 << 20)})
    store.put(RECAP_NAMESPACE, "c", {"recap": "ok", "floor": ["not", "text"]})
    store.put(RECAP_NAMESPACE, "d", {"note": "not a recap"})
    shared.save([("e", SharedRecap("- User: Order 7 broke.", None))])
    assert shared.lookup(["a", "b", "c", "d", "e", "missing"]) == {
        "e": SharedRecap("- User: Order 7 broke.", None)
    }

    class Broken(InMemoryStore):
        def batch(self, ops: Any) -> Any:
            raise OSError

    broken = RecapStore(store=Broken())
    assert broken.lookup(["e"]) == {}
    broken.save([("e", SharedRecap("text", None))])  # logged, not raised
    calls, result = run_worker(Broken(), thread(1_200))
    assert result.compacted
    assert calls >= 1


async def test_the_async_twins_share_through_the_store() -> None:
    store = InMemoryStore()
    history = thread(1_200)
    calls = 0

    async def asummarize(text: str, instruction: str) -> str:
        nonlocal calls
        del instruction
        calls += 1
        return f"Facts:\n- User: summary of {len(text)} characters."

    first = await HistoryCompactor().acompact_view(
        history, summarize=asummarize, room_tokens=3_000, recaps=RecapStore(store=store)
    )
    made = calls
    again = await HistoryCompactor().acompact_view(
        history, summarize=asummarize, room_tokens=3_000, recaps=RecapStore(store=store)
    )
    assert 1 <= made <= 2
    assert calls == made
    assert again.shared
    assert [m.text for m in again.messages] == [m.text for m in first.messages]


# -- the scenario: three create_agent workers, one InMemoryStore, one thread ------


def summariser() -> tuple[ScriptedChatModel, list[int]]:
    """A model at 8k that answers the user and counts every other request (a recap)."""
    summaries = [0]

    def respond(messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, HumanMessage) and last.text.startswith(USER):
            return AIMessage("Answered.")
        summaries[0] += 1
        return AIMessage("Facts:\n- User: the orders go to their docks.")

    model = ScriptedChatModel(respond=respond, context_window=8_000, max_output_tokens=512)
    return model, summaries


def agent_worker(store: BaseStore) -> tuple[Any, list[int]]:
    model, summaries = summariser()
    middleware = ContextKitMiddleware.for_model(model)
    return create_agent(model, [], middleware=[middleware], store=store), summaries


def test_three_agents_on_one_store_answer_a_stateless_thread_with_one_cold_start() -> None:
    store = InMemoryStore()
    payload = {"messages": [*thread(2_000), HumanMessage(f"{USER} Which orders?")]}
    counts, ledgers = [], []
    for _ in range(3):
        agent, summaries = agent_worker(store)
        state = agent.invoke(payload)
        counts.append(summaries[0])
        ledgers.append(state[LEDGER_KEY][-1])
    assert 1 <= counts[0] <= 2
    assert counts[1:] == [0, 0]
    assert ledgers[0]["summarizer_calls"] == counts[0]
    assert ledgers[0]["summarizer_chars"] > 0
    assert [ledger["shared_recap"] for ledger in ledgers] == [False, True, True]
