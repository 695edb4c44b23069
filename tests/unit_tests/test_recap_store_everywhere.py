"""Every entry point shares recaps through the store it runs with, sync and async.

`ContextKitMiddleware` was first; here `CompactionMiddleware` (the agent's store),
`compaction_node` and `context_node` (the graph's store, `compile(store=...)`), an
explicit `recap_store=`, and the async paths over a sync and an async `PostgresStore`.
Each case runs three fresh workers on one stateless thread: the first pays the bounded
cold start, the other two make no summariser call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from _postgres import LOCALHOST
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.store.memory import InMemoryStore
from test_recap_store import USER, agent_worker as kit_agent, summariser, thread

from langchain_contextkit import CompactionMiddleware, HistoryCompactor
from langchain_contextkit.agent.nodes import (
    CompactionGraphState,
    ContextGraphState,
    compaction_node,
    context_node,
)
from langchain_contextkit.compaction.recap_store import RECAP_NAMESPACE

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Iterator

    from langgraph.store.base import BaseStore

QUESTION = HumanMessage(f"{USER} Which orders?")


def compaction_agent(store: BaseStore | None, recap_store: BaseStore | None = None) -> Any:
    model, calls = summariser()
    middleware = CompactionMiddleware(HistoryCompactor(model), recap_store=recap_store)
    return create_agent(model, [], middleware=[middleware], store=store), calls


def compaction_graph(store: BaseStore) -> Any:
    model, calls = summariser()
    builder = StateGraph(CompactionGraphState)
    builder.add_node("compact", compaction_node(HistoryCompactor(model), model=model))
    builder.add_edge(START, "compact")
    return builder.compile(store=store), calls


def context_graph(store: BaseStore) -> Any:
    model, calls = summariser()
    builder = StateGraph(ContextGraphState)
    builder.add_node("context", context_node(model=model, compactor=HistoryCompactor(model)))
    builder.add_edge(START, "context")
    return builder.compile(store=store), calls


def three_workers(make: Callable[[BaseStore], Any], store: BaseStore) -> list[int]:
    payload = {"messages": [*thread(2_000), QUESTION]}
    counts = []
    for _ in range(3):
        runnable, calls = make(store)
        runnable.invoke(payload)
        counts.append(calls[0])
    return counts


async def athree_workers(make: Callable[[BaseStore], Any], store: BaseStore) -> list[int]:
    payload = {"messages": [*thread(2_000), QUESTION]}
    counts = []
    for _ in range(3):
        runnable, calls = make(store)
        await runnable.ainvoke(payload)
        counts.append(calls[0])
    return counts


def cold_then_none(counts: list[int]) -> bool:
    return 1 <= counts[0] <= 2 and counts[1:] == [0, 0]


@pytest.mark.parametrize(
    "make",
    [compaction_agent, compaction_graph, context_graph],
    ids=["CompactionMiddleware", "compaction_node", "context_node"],
)
def test_each_entry_point_shares_through_the_store_it_runs_with(
    make: Callable[[BaseStore], Any],
) -> None:
    store = InMemoryStore()
    assert cold_then_none(three_workers(make, store))
    assert store.search(RECAP_NAMESPACE)  # the recaps are in the store, under our namespace


def test_without_a_store_each_worker_pays_its_own_cold_start() -> None:
    counts = []
    for _ in range(2):
        agent, calls = compaction_agent(None)
        agent.invoke({"messages": [*thread(2_000), QUESTION]})
        counts.append(calls[0])
    assert counts[0] >= 1
    assert counts[1] == counts[0]


def test_an_explicit_recap_store_wins_over_the_agents() -> None:
    shared, own = InMemoryStore(), [InMemoryStore() for _ in range(3)]
    counts = []
    for store in own:
        agent, calls = compaction_agent(store, recap_store=shared)
        agent.invoke({"messages": [*thread(2_000), QUESTION]})
        counts.append(calls[0])
    assert cold_then_none(counts)
    assert shared.search(RECAP_NAMESPACE)
    assert not any(store.search(RECAP_NAMESPACE) for store in own)


@pytest.mark.parametrize(
    "make", [compaction_agent, kit_agent, context_graph], ids=["compaction", "kit", "node"]
)
async def test_the_async_paths_share_through_an_in_memory_store(
    make: Callable[[BaseStore], Any],
) -> None:
    assert cold_then_none(await athree_workers(make, InMemoryStore()))


@pytest.fixture(scope="module")
def sync_postgres(postgres_url: str) -> Iterator[BaseStore]:
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(postgres_url) as store:
        store.setup()
        yield store


@pytest.fixture
async def async_postgres(postgres_url: str) -> AsyncIterator[BaseStore]:
    from langgraph.store.postgres.aio import AsyncPostgresStore

    async with AsyncPostgresStore.from_conn_string(postgres_url) as store:
        await store.setup()
        await store.adelete(RECAP_NAMESPACE, "absent")  # a round trip: the pool is up
        for item in await store.asearch(RECAP_NAMESPACE, limit=1_000):
            await store.adelete(item.namespace, item.key)  # a clean slate per test
        yield store


@LOCALHOST
async def test_an_async_agent_on_a_sync_postgres_store(sync_postgres: BaseStore) -> None:
    for item in sync_postgres.search(RECAP_NAMESPACE, limit=1_000):
        sync_postgres.delete(item.namespace, item.key)
    assert cold_then_none(await athree_workers(kit_agent, sync_postgres))


@LOCALHOST
async def test_an_async_agent_on_an_async_postgres_store(async_postgres: BaseStore) -> None:
    assert cold_then_none(await athree_workers(kit_agent, async_postgres))
