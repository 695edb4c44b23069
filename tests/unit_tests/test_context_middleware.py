"""ContextKitMiddleware and context_node: one window ledger per model call."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from langchain_contextkit import (
    CallableSource,
    ConfigError,
    ContextKitMiddleware,
    ContextWindowExceeded,
    HistoryCompactor,
    RetrievalResult,
    count_message_tokens,
    count_tool_tokens,
    find_message_problems,
)
from langchain_contextkit.agent.ledger import CallLedger
from langchain_contextkit.agent.middleware import LEDGER_KEY
from langchain_contextkit.agent.nodes import ContextGraphState, context_node
from langchain_contextkit.agent.plan import RETRIEVAL_ID, WindowAssembler
from langchain_contextkit.notes import StoreNoteStore
from langchain_contextkit.testing import ScriptedChatModel

SYSTEM = "You are the on-call assistant. Answer from the runbook and the tools."


def runbook(query: str) -> list[RetrievalResult]:
    entries = [
        ("Restart the ingest worker with `svc restart ingest` when lag exceeds 5 minutes.", 0.9),
        ("Disk alerts on db-7 are usually the nightly backup; wait 20 minutes.", 0.7),
        ("Escalate to the database team after 2 failed restarts.", 0.5),
    ]
    return [RetrievalResult(text, score, "rag") for text, score in entries]


@tool
def check_service(name: str) -> str:
    """Return the status and the last log lines of a service."""
    return f"{name}: degraded since 03:10, lag 7 minutes. " + "log: retrying batch. " * 25


def agent_script(messages: list[BaseMessage]) -> AIMessage:
    last = messages[-1]
    if isinstance(last, HumanMessage):
        calls = [
            {
                "name": "check_service",
                "args": {"name": f"ingest-{len(messages)}"},
                "id": f"c{len(messages)}",
            },
            {
                "name": "check_service",
                "args": {"name": f"db-{len(messages)}"},
                "id": f"d{len(messages)}",
            },
        ]
        return AIMessage("Checking both services.", tool_calls=calls)
    return AIMessage("Restart ingest; db-7 is the backup.")


def make_agent(model: ScriptedChatModel, middleware: ContextKitMiddleware) -> Any:
    return create_agent(
        model,
        tools=[check_service],
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=InMemorySaver(),
    )


def test_every_call_is_laid_out_cache_first_under_the_ledger() -> None:
    window = 3000
    model = ScriptedChatModel(respond=agent_script, profile={"max_input_tokens": window})
    middleware = ContextKitMiddleware.for_model(
        model,
        sources=[CallableSource("rag", runbook)],
        compactor=HistoryCompactor(keep_recent=2, trigger_tokens=1200, max_summary_tokens=150),
    )
    agent = make_agent(model, middleware)
    config = {"configurable": {"thread_id": "oncall"}}
    for turn in range(15):
        state = agent.invoke(
            {"messages": [HumanMessage(f"Turn {turn}: ingest lag alert {turn}?")]}, config
        )

    ledgers = state[LEDGER_KEY]
    assert len(ledgers) == 30  # two model calls per turn
    assert [entry["call"] for entry in ledgers] == list(range(1, 31))
    for request, tools, entry in zip(model.requests, model.request_tools, ledgers, strict=True):
        ledger = CallLedger(**entry)
        # The request that reached the model is what the ledger says, within the window.
        sent = count_message_tokens(request) + count_tool_tokens(tools)
        assert sent == ledger.prompt
        assert sent <= window - ledger.output_reserve
        assert (
            sum(
                entry[k]
                for k in (
                    "system",
                    "tools",
                    "summary",
                    "retrieval",
                    "history",
                    "turn",
                    "free",
                    "output_reserve",
                )
            )
            == window
        )
        assert find_message_problems(request) == []
        # Cache-first layout: system prompt, (recap), history, retrieval block, current turn.
        assert request[0].text == SYSTEM
        kinds = [m.id for m in request]
        block_at = kinds.index(RETRIEVAL_ID)
        last_human = max(i for i, m in enumerate(request) if isinstance(m, HumanMessage))
        assert request[last_human].text.startswith("Turn ")
        # The block is the dynamic tail's head: right before the question it was built for.
        assert block_at == last_human - 1
        assert isinstance(request[block_at], HumanMessage)
        assert not any(isinstance(m, SystemMessage) for m in request[block_at:])
        assert "svc restart ingest" in request[block_at].text
    assert any(entry["compacted"] for entry in ledgers)
    # The stored history is complete.
    humans = [m for m in state["messages"] if isinstance(m, HumanMessage)]
    assert len(humans) == 15


async def test_async_with_a_note_store_and_a_long_tool_loop() -> None:
    from langgraph.store.memory import InMemoryStore

    store = StoreNoteStore(InMemoryStore())
    store.create(
        title="Ingest is flaky", content="Restart it twice before escalating.", note_type="blocker"
    )
    calls = iter(range(100))

    def long_loop(messages: list[BaseMessage]) -> AIMessage:
        step = next(calls)
        if step % 12 == 11:
            return AIMessage("Done.")
        return AIMessage(
            "",
            tool_calls=[{"name": "check_service", "args": {"name": f"s{step}"}, "id": f"x{step}"}],
        )

    model = ScriptedChatModel(respond=long_loop, profile={"max_input_tokens": 2500})
    middleware = ContextKitMiddleware.for_model(
        model, note_store=store, compactor=HistoryCompactor(keep_recent=2, trigger_tokens=900)
    )
    agent = make_agent(model, middleware)
    config = {"configurable": {"thread_id": "loop"}, "recursion_limit": 200}
    for turn in range(3):
        state = await agent.ainvoke(
            {"messages": [HumanMessage(f"Check everything, round {turn}.")]}, config
        )
    ledgers = state[LEDGER_KEY]
    assert any(entry["reduced"] for entry in ledgers)  # the 11-step loops were reduced
    for request, tools in zip(model.requests, model.request_tools, strict=True):
        assert count_message_tokens(request) + count_tool_tokens(tools) <= 2500 - min(4096, 1250)
        assert find_message_problems(request) == []
        assert "Ingest is flaky" in "\n".join(m.text for m in request)  # notes in the block


def test_context_node_in_a_state_graph() -> None:
    model = ScriptedChatModel(respond=lambda messages: AIMessage("Noted, will do."))

    def call_model(state: ContextGraphState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["llm_input_messages"])]}

    builder = StateGraph(ContextGraphState)
    builder.add_node(
        "context",
        context_node(
            model=model,
            window=1500,
            system_prompt=SYSTEM,
            sources=[CallableSource("rag", runbook)],
            compactor=HistoryCompactor(keep_recent=2, trigger_tokens=400),
            ledger_size=5,
        ),
    )
    builder.add_node("model", call_model)
    builder.add_edge(START, "context")
    builder.add_edge("context", "model")
    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "g"}}
    for turn in range(12):
        state = graph.invoke(
            {"messages": [HumanMessage(f"Turn {turn}: restart ingest {turn}? " * 3)]}, config
        )
    assert len(state["contextkit_ledger"]) == 5  # capped
    assert state["contextkit_ledger"][-1]["call"] == 12
    assert state["contextkit_summary"] is not None
    assert len(state["messages"]) == 24
    for request in model.requests:
        assert request[0].text == SYSTEM
        assert count_message_tokens(request) <= 1500 - 750


def test_unknown_window_and_bad_settings_are_refused() -> None:
    model = ScriptedChatModel(responses=["x"])
    with pytest.raises(ConfigError, match="max_input_tokens"):
        ContextKitMiddleware.for_model(model)
    # Was: the fallback frozen as the assembler's window; now each call reads the profile
    # of the model it goes to, and the fallback serves only where that states none.
    fallback = ContextKitMiddleware.for_model(model, fallback_window=8000)
    assert (fallback.assembler.window, fallback.fallback_window) == (None, 8000)
    with pytest.raises(ConfigError, match="ledger_size"):
        ContextKitMiddleware(ledger_size=0)
    with pytest.raises(ConfigError, match="summaries"):
        ContextKitMiddleware.for_model(model, fallback_window=8000, summaries="llm")  # type: ignore[arg-type]
    agent = create_agent(model, middleware=[ContextKitMiddleware()])
    with pytest.raises(ConfigError, match="window"):
        agent.invoke({"messages": [HumanMessage("hi")]})


def test_a_question_larger_than_the_window_raises_and_sends_nothing() -> None:
    model = ScriptedChatModel(responses=["x"], profile={"max_input_tokens": 400})
    agent = create_agent(model, middleware=[ContextKitMiddleware.for_model(model)])
    with pytest.raises(ContextWindowExceeded):
        agent.invoke({"messages": [HumanMessage("word " * 600)]})
    assert model.requests == []


def test_ledger_bar_is_exactly_as_wide_as_asked() -> None:
    ledger = CallLedger(
        call=1,
        window=1000,
        output_reserve=250,
        system=90,
        tools=60,
        summary=40,
        retrieval=200,
        history=130,
        turn=80,
        free=150,
        compacted=True,
        reduced=False,
    )
    for width in (10, 33, 60, 80):
        assert len(ledger.bar(width)) == width
    assert ledger.prompt == 600


# -- the ledger invariant, property-tested ----------------------------------------------

WORDS = st.sampled_from(
    ["ingest", "lag", "db-7", "restart", "备份", "数据库", "alert", "42", "2025-01-02"]
)
TEXT = st.lists(WORDS, min_size=1, max_size=60).map(" ".join)


@st.composite
def conversations(draw: st.DrawFn) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for turn in range(draw(st.integers(1, 8))):
        messages.append(HumanMessage(draw(TEXT)))
        for step in range(draw(st.integers(0, 3))):
            width = draw(st.integers(1, 3))
            calls = [
                {
                    "name": "check_service",
                    "args": {"name": draw(TEXT)[:20]},
                    "id": f"t{turn}s{step}c{c}",
                }
                for c in range(width)
            ]
            messages.append(AIMessage(draw(TEXT), tool_calls=calls))
            messages += [
                ToolMessage(draw(TEXT) * draw(st.integers(1, 4)), tool_call_id=c["id"])
                for c in calls
            ]
        if draw(st.booleans()):
            messages.append(AIMessage(draw(TEXT)))
    return messages


def make_tool(index: int, description: str) -> StructuredTool:
    def run(query: str) -> str:
        return query

    return StructuredTool.from_function(run, name=f"tool_{index}", description=description)


@given(
    messages=conversations(),
    system=TEXT,
    tool_descriptions=st.lists(TEXT, max_size=4),
    window=st.integers(300, 4000),
    with_sources=st.booleans(),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_request_never_exceeds_the_window_minus_the_output_reserve(
    messages: list[BaseMessage],
    system: str,
    tool_descriptions: list[str],
    window: int,
    with_sources: bool,
) -> None:
    tools = [make_tool(i, d) for i, d in enumerate(tool_descriptions)]
    assembler = WindowAssembler(
        window=window,
        sources=[CallableSource("rag", runbook)] if with_sources else (),
        compactor=HistoryCompactor(
            keep_recent=2, trigger_tokens=window // 2, max_summary_tokens=80
        ),
    )
    try:
        result = assembler.assemble(messages, system_message=SystemMessage(system), tools=tools)
    except ContextWindowExceeded as exc:
        assert exc.required > exc.budget  # noqa: PT017 - either outcome is allowed here
        return
    ledger = result.ledger
    sent = count_message_tokens([SystemMessage(system), *result.messages]) + count_tool_tokens(
        tools
    )
    assert sent == ledger.prompt
    assert sent <= window - ledger.output_reserve
    assert find_message_problems([SystemMessage(system), *result.messages]) == []
    # The current question is always there, verbatim.
    question = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
    assert messages[question] in result.messages
