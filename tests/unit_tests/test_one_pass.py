"""One pass per model call: each part counted once, sources asked once, who asks passed on."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.checkpoint.memory import InMemorySaver

from langchain_contextkit import (
    CallableSource,
    ContextKitMiddleware,
    RetrievalResult,
    RetrieverSource,
)
from langchain_contextkit.agent.plan import RETRIEVAL_ID
from langchain_contextkit.retrieval.sources.base import Scope
from langchain_contextkit.testing import ScriptedChatModel
from langchain_contextkit.tokens.count import count_tokens

if TYPE_CHECKING:
    from uuid import UUID

FACTS = [
    ("Ticket T-{n}: the parcel for order {n} left the Leeds depot at 06:{m:02d}.", 0.9),
    ("Order {n} is insured up to 250 EUR; claims need the signed delivery note.", 0.6),
]


def _passages(query: str, scope: Scope) -> list[RetrievalResult]:
    n = sum(map(ord, query)) % 1000
    return [
        RetrievalResult(text.format(n=n, m=n % 60), score, "rag")
        for text, score in FACTS
        if scope is not None
    ]


def test_a_refused_call_is_retried_without_asking_the_sources_again() -> None:
    asked: list[str] = []

    def source(query: str, scope: Scope) -> list[RetrievalResult]:
        asked.append(query)
        return _passages(query, scope)

    refusals = iter([True, False, False, False])

    def respond(messages: list[BaseMessage]) -> AIMessage:
        if next(refusals, False):
            # A refusal without figures: the retry gives up a share of the window.
            msg = "context_length_exceeded: the request is too long for this model"
            raise ContextOverflowError(msg)
        return AIMessage(f"Noted ({len(messages)} messages).")

    model = ScriptedChatModel(respond=respond, context_window=8_000)
    middleware = ContextKitMiddleware.for_model(
        model, sources=[CallableSource("rag", source)], summaries="extractive"
    )
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "retry"}}
    agent.invoke({"messages": [HumanMessage("Where is order 4411?")]}, config)
    agent.invoke({"messages": [HumanMessage("Is order 4411 insured?")]}, config)

    assert len(model.requests) == 3  # the refused call, its retry, the second turn
    assert asked == ["Where is order 4411?", "Is order 4411 insured?"]  # once per call
    retried = model.requests[1]
    assert any(m.id == RETRIEVAL_ID for m in retried)  # the retry still has its block


def test_sources_get_the_threads_scope_and_the_runs_callbacks() -> None:
    scopes: list[Scope] = []

    def source(query: str, scope: Scope) -> list[RetrievalResult]:
        scopes.append(scope)
        return _passages(query, scope)

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_texts(["Order 4411 ships from Leeds.", "Refunds take 5 days."])

    class Retrievals(BaseCallbackHandler):
        def __init__(self) -> None:
            self.queries: list[str] = []

        def on_retriever_start(
            self, serialized: dict[str, Any], query: str, *, run_id: UUID, **kwargs: Any
        ) -> None:
            self.queries.append(query)

    model = ScriptedChatModel(["Done."], context_window=8_000)
    sources = [
        CallableSource("rag", source),
        RetrieverSource("docs", store.as_retriever(search_kwargs={"k": 1})),
    ]
    middleware = ContextKitMiddleware.for_model(model, sources=sources)
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    handler = Retrievals()
    config: Any = {
        "configurable": {"thread_id": "t-7", "user_id": "ada"},
        "callbacks": [handler],
    }
    agent.invoke({"messages": [HumanMessage("Where is order 4411?")]}, config)

    assert scopes == [Scope(user="ada", thread="t-7")]
    # The vector store's retriever ran as a child of the agent's run: its handler saw it.
    assert handler.queries == ["Where is order 4411?"]


def test_each_part_of_a_request_is_counted_once_per_call() -> None:
    """Within one model call no text goes through the counter twice.

    The one exception is the retrieval block: the builder measures the block it must
    fit, and the request counts it as a message (at most twice, never more).
    """
    counted: Counter[str] = Counter()

    def counter(text: str) -> int:
        counted[text] += 1
        return count_tokens(text)

    model = ScriptedChatModel(respond=lambda messages: AIMessage("Noted."), context_window=6_000)
    middleware = ContextKitMiddleware(
        token_counter=counter,
        sources=[CallableSource("rag", _passages)],
        window=6_000,
    )
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "parts"}}
    for turn in range(40):
        counted.clear()
        agent.invoke({"messages": [HumanMessage(f"Turn {turn}: where is order {turn}?")]}, config)
        block = [text for text in counted if text.startswith("[Knowledge]")]
        assert block  # the block is built every call
        twice = {text[:60]: n for text, n in counted.items() if n > (2 if text in block else 1)}
        assert not twice, (turn, twice)
    ledgers = agent.get_state(config).values["contextkit_ledger"]
    assert any(ledger["compacted"] for ledger in ledgers) or len(model.requests) == 40
