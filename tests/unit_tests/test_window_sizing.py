"""The window drives the agent path: sized compaction, a byte-stable prefix, stateless callers.

Every test here goes through the untuned front door (`ContextKitMiddleware.for_model`, or
`WindowAssembler` with a default `HistoryCompactor`) unless it says otherwise.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_contextkit import (
    CallableSource,
    CompactionConfig,
    CompactionMiddleware,
    ContextKitConfig,
    ContextKitMiddleware,
    HistoryCompactor,
    RetrievalResult,
    count_message_tokens,
    find_message_problems,
)
from langchain_contextkit.agent.middleware import LEDGER_KEY, SUMMARY_KEY
from langchain_contextkit.agent.plan import RETRIEVAL_ID, WindowAssembler
from langchain_contextkit.compaction.compactor import DEFAULT_TRIGGER_TOKENS, RECAP_ID_PREFIX
from langchain_contextkit.testing import ScriptedChatModel

SYSTEM = "You are the support agent of a parcel service. " * 30
VIEW_INSTRUCTION = "Pause the task. Write a summary"


@tool
def track(parcel: str) -> str:
    """Track a parcel by its id."""
    return f"Parcel {parcel}: " + "scanned at hub H-7, " * 12 + "out for delivery."


def turn_text(turn: int) -> str:
    return f"Turn {turn}: where is parcel P-{1000 + turn}? FACT-{turn:02d}: code {4000 + turn}."


def scripted(messages: list[BaseMessage]) -> AIMessage:
    """A tool call for each question, an answer after each result, recaps on request."""
    last = messages[-1]
    if isinstance(last, HumanMessage) and last.text.startswith(VIEW_INSTRUCTION):
        facts = sorted({w for m in messages for w in m.text.split() if w.startswith("FACT-")})
        return AIMessage("Recap: " + ", ".join(facts) + ". Parcels were tracked.")
    if isinstance(last, ToolMessage):
        return AIMessage(f"It is {last.text[-17:]}")
    turn = sum(isinstance(m, HumanMessage) and m.text.startswith("Turn ") for m in messages)
    return AIMessage(
        "", tool_calls=[{"name": "track", "args": {"parcel": f"P-{turn}"}, "id": f"c{turn}"}]
    )


def agent_requests(model: ScriptedChatModel) -> list[list[BaseMessage]]:
    return [r for r in model.requests if not r[-1].text.startswith(VIEW_INSTRUCTION)]


def summary_requests(model: ScriptedChatModel) -> list[list[BaseMessage]]:
    return [r for r in model.requests if r[-1].text.startswith(VIEW_INSTRUCTION)]


def serialised(messages: list[BaseMessage]) -> list[str]:
    return [json.dumps(m, sort_keys=True) for m in convert_to_openai_messages(messages)]


def dynamic_tail(request: list[BaseMessage]) -> int:
    """Where the request's dynamic tail starts: the block, else the current question."""
    for index, message in enumerate(request):
        if message.id == RETRIEVAL_ID:
            return index
    return max(i for i, m in enumerate(request) if isinstance(m, HumanMessage))


def run_agent(
    window: int, turns: int, *, stateless: bool, **kwargs: Any
) -> tuple[ScriptedChatModel, list[BaseMessage], list[dict[str, Any]]]:
    model = ScriptedChatModel(
        respond=scripted, profile={"max_input_tokens": window, "max_output_tokens": 256}
    )
    middleware = ContextKitMiddleware.for_model(model, ledger_size=1000, **kwargs)
    agent = create_agent(
        model,
        [track],
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=None if stateless else InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    messages: list[BaseMessage] = []
    ledgers: list[dict[str, Any]] = []
    for turn in range(1, turns + 1):
        question = HumanMessage(turn_text(turn))
        if stateless:
            state = agent.invoke({"messages": [*messages, question]})
            messages = state["messages"]
        else:
            state = agent.invoke({"messages": [question]}, config)
            messages = state["messages"]
        ledgers = state[LEDGER_KEY] if not stateless else [*ledgers, *state[LEDGER_KEY]]
    return model, messages, ledgers


# --- sizing -----------------------------------------------------------------------------------


def test_a_large_window_never_compacts_a_short_conversation() -> None:
    model, messages, ledgers = run_agent(128_000, 60, stateless=False)
    assert not any(entry["compacted"] for entry in ledgers)
    assert summary_requests(model) == []
    last = agent_requests(model)[-1]
    assert all(turn_text(turn) in [m.text for m in last] for turn in range(1, 61))
    assert len(messages) == 60 * 4


def test_a_small_window_compacts_rarely_and_each_compaction_frees_many_turns() -> None:
    window = 4000
    model, _, ledgers = run_agent(window, 60, stateless=False)
    compactions = [entry["call"] for entry in ledgers if entry["compacted"]]
    assert 1 <= len(compactions) <= 8
    # Hysteresis: compactions are far apart (many turns, two calls each, between them).
    assert all(b - a >= 8 for a, b in itertools.pairwise(compactions))
    # Every request stayed inside the window minus the output reserve, and valid.
    for request, entry in zip(agent_requests(model), ledgers, strict=True):
        assert count_message_tokens(request) <= window - entry["output_reserve"]
        assert find_message_problems(request) == []
    # The model wrote the recaps, in place: the agent's own prefix, then the instruction.
    assert len(summary_requests(model)) == len(compactions)
    recap = next(m for m in agent_requests(model)[-1] if (m.id or "").startswith(RECAP_ID_PREFIX))
    assert "FACT-01" in recap.text


def test_the_default_trigger_is_the_seeds_and_an_explicit_one_wins() -> None:
    assert HistoryCompactor().trigger_tokens == 2000
    assert HistoryCompactor().config.trigger_tokens is None
    assert HistoryCompactor().sized_by_window
    assert not HistoryCompactor(trigger_tokens=2000).sized_by_window
    assert DEFAULT_TRIGGER_TOKENS == 2000
    # Standalone, the default behaves exactly like the same number written out.
    history: list[BaseMessage] = []
    for turn in range(40):
        history += [HumanMessage(turn_text(turn) * 3), AIMessage(f"Noted {turn}.")]
    assert HistoryCompactor().compact(history) == HistoryCompactor(trigger_tokens=2000).compact(
        history
    )
    # In an agent, an explicit trigger keeps compacting at that size.
    _, _, ledgers = run_agent(
        128_000,
        12,
        stateless=False,
        compactor=HistoryCompactor(trigger_tokens=600, keep_recent=2),
    )
    assert any(entry["compacted"] for entry in ledgers)


@pytest.mark.parametrize("route", ["yaml", "from_config"])
def test_a_default_config_survives_a_round_trip_and_stays_sized_by_the_window(route: str) -> None:
    if route == "yaml":
        text = ContextKitConfig().to_yaml()
        assert "trigger_tokens: null" in text
        config = ContextKitConfig.from_yaml(text).compaction
    else:
        config = CompactionConfig.from_dict(CompactionConfig().to_dict())
    assert config == CompactionConfig()
    compactor = HistoryCompactor.from_config(None, config)
    assert compactor.sized_by_window
    # Standalone, the round-tripped default still triggers at the seed's 2000.
    history: list[BaseMessage] = []
    for turn in range(40):
        history += [HumanMessage(turn_text(turn) * 3), AIMessage(f"Noted {turn}.")]
    compacted = compactor.compact(history)
    assert compacted == HistoryCompactor(trigger_tokens=2000).compact(history)
    assert len(compacted) < len(history)
    # In a 128k window, 60 short turns fit: the agent never compacts.
    model, _, ledgers = run_agent(128_000, 60, stateless=False, compactor=compactor)
    assert len(ledgers) == 120
    assert not any(entry["compacted"] for entry in ledgers)
    assert summary_requests(model) == []


def test_summaries_extractive_makes_no_llm_calls_of_its_own() -> None:
    model, _, ledgers = run_agent(4000, 40, stateless=False, summaries="extractive")
    assert any(entry["compacted"] for entry in ledgers)
    assert summary_requests(model) == []
    assert len(model.requests) == 80


def test_a_failing_summary_call_falls_back_to_the_extractive_recap() -> None:
    def flaky(messages: list[BaseMessage]) -> AIMessage:
        if messages[-1].text.startswith(VIEW_INSTRUCTION):
            msg = "summariser down"
            raise RuntimeError(msg)
        return scripted(messages)

    model = ScriptedChatModel(respond=flaky, profile={"max_input_tokens": 4000})
    agent = create_agent(
        model,
        [track],
        system_prompt=SYSTEM,
        middleware=[ContextKitMiddleware.for_model(model)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in range(1, 41):
        state = agent.invoke({"messages": [HumanMessage(turn_text(turn))]}, config)
    assert any(entry["compacted"] for entry in state[LEDGER_KEY])
    recap = agent.get_state(config).values[SUMMARY_KEY]["text"]
    assert "FACT-01" in recap  # the extractive recap keeps facts


def test_compaction_middleware_and_its_default_compactor_are_sized_too() -> None:
    model = ScriptedChatModel(respond=scripted, profile={"max_input_tokens": 128_000})
    agent = create_agent(
        model,
        [track],
        system_prompt=SYSTEM,
        middleware=[CompactionMiddleware()],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in range(1, 31):
        agent.invoke({"messages": [HumanMessage(turn_text(turn))]}, config)
    # ~6k tokens: far below a 128k window's marks.
    assert agent.get_state(config).values.get(SUMMARY_KEY) is None
    last = [m.text for m in model.requests[-1]]
    assert all(turn_text(turn) in last for turn in range(1, 31))


# --- stateless callers ------------------------------------------------------------------------


@pytest.mark.parametrize("summaries", ["model", "extractive"])
def test_a_stateless_caller_gets_the_same_requests_as_a_checkpointed_one(summaries: str) -> None:
    stateful, kept, _ = run_agent(4000, 45, stateless=False, summaries=summaries)
    stateless, passed, _ = run_agent(4000, 45, stateless=True, summaries=summaries)
    assert [serialised(r) for r in stateless.requests] == [serialised(r) for r in stateful.requests]
    assert [m.text for m in passed] == [m.text for m in kept]


def test_a_fresh_process_recomputes_the_same_recap_from_the_history_alone() -> None:
    _, messages, _ = run_agent(4000, 45, stateless=True, summaries="extractive")
    views = []
    for _ in range(2):  # two assemblers with nothing in common but the history
        assembler = WindowAssembler(window=4000)
        views.append(
            assembler.assemble(
                [*messages, HumanMessage("And P-1001?")], system_message=SystemMessage(SYSTEM)
            )
        )
    assert serialised(views[0].messages) == serialised(views[1].messages)
    assert views[0].summary is not None
    assert views[0].summary.covered > 0


# --- the layout, as a property ------------------------------------------------------------------


def _policy(query: str) -> list[RetrievalResult]:
    number = sum(ord(ch) for ch in query) % 7
    return [
        RetrievalResult(f"Policy {number}: parcels wait {number + 2} days at a hub.", 0.9, "rag")
    ]


turn_shapes = st.lists(
    st.tuples(
        st.integers(min_value=1, max_value=60),  # words in the question
        st.integers(min_value=0, max_value=2),  # parallel tool calls (0: a direct answer)
        st.integers(min_value=1, max_value=120),  # words per tool result
    ),
    min_size=5,
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shapes=turn_shapes,
    window=st.integers(min_value=2500, max_value=12_000),
    with_sources=st.booleans(),
)
def test_between_compactions_each_request_extends_the_last_byte_for_byte(
    shapes: list[tuple[int, int, int]], window: int, with_sources: bool
) -> None:
    sources = [CallableSource("rag", _policy)] if with_sources else []
    checkpointed = WindowAssembler(window=window, sources=sources)
    stateless = WindowAssembler(window=window, sources=sources)
    system = SystemMessage("You help with parcels. " * 20)
    history: list[BaseMessage] = []
    summary = None
    previous: list[BaseMessage] | None = None
    previous_summary = None

    def call() -> None:
        nonlocal summary, previous, previous_summary
        one = checkpointed.assemble(history, system_message=system, summary=summary)
        two = stateless.assemble(history, system_message=system)
        request = [system, *one.messages]
        # Stateless: the same request from the history alone.
        assert serialised([system, *two.messages]) == serialised(request)
        assert find_message_problems(request) == []
        assert one.ledger.prompt <= window - one.ledger.output_reserve
        # No system message after the first non-system one (Anthropic, Gemini).
        first_other = next(i for i, m in enumerate(request) if not isinstance(m, SystemMessage))
        assert not any(isinstance(m, SystemMessage) for m in request[first_other:])
        # The dynamic tail is the block and the current turn, nothing older: every older
        # turn sits in the stable part.
        tail = dynamic_tail(request)
        current = max(i for i, m in enumerate(history) if isinstance(m, HumanMessage))
        if not one.ledger.reduced:
            moving = [m for m in request[tail:] if m.id != RETRIEVAL_ID]
            assert serialised(moving) == serialised(history[current:])
        if previous is not None and one.summary == previous_summary:
            stable = dynamic_tail(previous)
            assert serialised(request[:stable]) == serialised(previous[:stable])
        previous, previous_summary, summary = request, one.summary, one.summary

    for turn, (words, calls, result_words) in enumerate(shapes):
        history.append(HumanMessage(f"Turn {turn}: " + "where is my parcel " * (words // 4 + 1)))
        call()
        if calls:
            ids = [f"c{turn}-{i}" for i in range(calls)]
            history.append(
                AIMessage(
                    "", tool_calls=[{"name": "track", "args": {"parcel": i}, "id": i} for i in ids]
                )
            )
            history += [
                ToolMessage("scan " * result_words, tool_call_id=i, name="track") for i in ids
            ]
            call()
        history.append(AIMessage(f"Answer {turn}."))


# --- what the providers' adapters accept -----------------------------------------------------


@pytest.mark.parametrize("human_recap", [False, True])
def test_every_request_is_accepted_by_the_anthropic_and_gemini_adapters(
    human_recap: bool,
) -> None:
    # The adapters' own converters: what ChatAnthropic and ChatGoogleGenerativeAI run on
    # every request before it leaves the process (both raise on what their API refuses).
    anthropic = pytest.importorskip("langchain_anthropic.chat_models")
    gemini = pytest.importorskip("langchain_google_genai.chat_models")
    model = ScriptedChatModel(
        respond=scripted, profile={"max_input_tokens": 4000, "max_output_tokens": 256}
    )
    middleware = ContextKitMiddleware.for_model(
        model,
        sources=[CallableSource("rag", _policy)],
        compactor=HistoryCompactor(model, require_human_first=human_recap),
        ledger_size=1000,
    )
    agent = create_agent(
        model, [track], system_prompt=SYSTEM, middleware=[middleware], checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    for turn in range(1, 41):
        state = agent.invoke({"messages": [HumanMessage(turn_text(turn))]}, config)
    assert any(entry["compacted"] for entry in state[LEDGER_KEY])
    requests = agent_requests(model)
    assert any(any((m.id or "").startswith(RECAP_ID_PREFIX) for m in r) for r in requests)
    for request in requests:
        system, turns = anthropic._format_messages(request, model="claude-sonnet-4-5")
        assert SYSTEM.strip() in json.dumps(system)
        assert "Policy" in json.dumps(turns)  # the block travels with the question
        instruction, contents = gemini._parse_chat_history(request, model="gemini-2.5-flash")
        assert instruction is not None
        assert "Policy" not in str(instruction)  # not hoisted into the system instruction
        assert contents


# --- the graph nodes ---------------------------------------------------------------------------


def _long_history(turns: int) -> list[BaseMessage]:
    history: list[BaseMessage] = []
    for turn in range(1, turns + 1):
        history += [HumanMessage(turn_text(turn) * 4), AIMessage(f"Parcel {turn} is on its way.")]
    return history


@pytest.mark.parametrize("window", [128_000, 3_000])
def test_the_nodes_size_a_default_compactor_by_the_models_window(window: int) -> None:
    from langchain_contextkit.agent.nodes import compaction_node, context_node

    model = ScriptedChatModel(responses=[], profile={"max_input_tokens": window})
    history = _long_history(60)  # ~7k tokens
    compacted = compaction_node(HistoryCompactor(), model=model).invoke({"messages": history})
    assembled = context_node(model=model).invoke({"messages": [*history, HumanMessage("Hi")]})
    if window == 128_000:  # far below the marks: nothing is summarised
        assert compacted["contextkit_summary"] is None
        assert assembled["contextkit_summary"] is None
        assert len(compacted["llm_input_messages"]) == len(history)
    else:  # over the room's high mark: compacted, the recap within 10% of the room
        for update in (compacted, assembled):
            recap = next(
                m for m in update["llm_input_messages"] if (m.id or "").startswith(RECAP_ID_PREFIX)
            )
            assert count_message_tokens([recap]) <= window // 10
    # An explicit trigger still wins over the window.
    explicit = compaction_node(HistoryCompactor(trigger_tokens=500), model=model)
    assert explicit.invoke({"messages": history})["contextkit_summary"] is not None
