"""Providers whose conversation must open with the user, and Bedrock Converse's cache points.

`for_model` sets `require_human_first` for Claude and Bedrock: after a compaction the kept
history may start with an assistant ``tool_use``, and the recap then opens the list as the
user's message. Checked end to end, 60 turns, against `AnthropicStub` with its user-first
rule and through the real `ChatBedrockConverse` (langchain-aws) on `ConverseClient`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from provider_stubs.anthropic_stub import AnthropicStub, Reply, ToolCall

from langchain_contextkit import CallableSource, ContextKitMiddleware, RetrievalResult
from langchain_contextkit.agent.providers import (
    MAX_CACHE_BREAKPOINTS,
    count_cache_marks,
    mark_stable_prefix,
    marks_with_cache_points,
    requires_human_first,
)
from langchain_contextkit.compaction.compactor import RECAP_ID_PREFIX, HistoryCompactor

TURNS = 60


@tool
def lookup(order: str) -> str:
    """Look an order up by its id."""
    return f"{order}: in transit. " + "detail " * 150


def _respond(kind: str, messages: list[dict[str, Any]]) -> Reply:
    if kind == "summary":
        return Reply(text="Facts:\n- The user asked about orders.")
    last = messages[-1]["content"]
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        return Reply(text="It is in transit. " + "note " * 40)
    return Reply(
        tool_calls=(ToolCall("lookup", {"order": f"O-{len(messages)}"}, f"toolu_{len(messages)}"),)
    )


def _faq(query: str) -> list[RetrievalResult]:
    return [
        RetrievalResult(f"Passage {i} on {query[-12:]}: " + "policy " * 60, 0.9, "faq")
        for i in range(3)
    ]


def _play(agent: Any, *, stateless: bool) -> list[int]:
    """Play the turns; the turns whose invoke raised."""
    failed: list[int] = []
    messages: list[Any] = []
    config = {"configurable": {"thread_id": "t"}}
    for turn in range(TURNS):
        question = HumanMessage(f"Where is order O-{turn}?")
        try:
            if stateless:
                messages = agent.invoke({"messages": [*messages, question]})["messages"]
            else:
                agent.invoke({"messages": [question]}, config)
        except Exception:  # noqa: BLE001 - a refused call fails the turn; counted
            failed.append(turn)
    return failed


def test_for_model_opens_with_the_user_for_claude_and_bedrock() -> None:
    from langchain_anthropic import ChatAnthropic
    from langchain_openai import ChatOpenAI

    profile = {"max_input_tokens": 8_000, "max_output_tokens": 500}
    claude = ChatAnthropic(model="claude-sonnet-4-5", api_key="t", profile=profile)  # type: ignore[arg-type,call-arg]
    gpt = ChatOpenAI(model="gpt-4o", api_key="t", profile=profile)  # type: ignore[arg-type]

    class ChatBedrockConverse:  # the class name decides; langchain-aws need not be installed
        model_id = "amazon.nova-pro-v1:0"

    assert [requires_human_first(m) for m in (claude, gpt, ChatBedrockConverse())] == [
        True,
        False,
        True,
    ]
    assert marks_with_cache_points(ChatBedrockConverse())
    assert not marks_with_cache_points(claude)
    for model, expected in ((claude, True), (gpt, False)):
        kit = ContextKitMiddleware.for_model(model)
        assert kit.assembler.compactor.require_human_first is expected


def test_the_stub_refuses_an_assistant_turn_first_when_told() -> None:
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "assistant", "content": "Hi"}, {"role": "user", "content": "Q"}],
    }
    lenient = AnthropicStub(_respond, window=5_000)
    strict = AnthropicStub(_respond, window=5_000, require_user_first=True)
    assert lenient.handle(body)[0] == 200
    status, answer = strict.handle(body)
    assert status == 400
    assert "first message must use the" in answer["error"]["message"]


@pytest.mark.allow_hosts(["127.0.0.1"])
@pytest.mark.parametrize(
    ("human_first", "stateless"), [(True, False), (True, True), (False, False)]
)
def test_sixty_turns_with_the_user_first_rule(*, human_first: bool, stateless: bool) -> None:
    with AnthropicStub(_respond, window=6_000, require_user_first=True) as stub:
        model = stub.chat_model(max_tokens=500)
        # The control builds the compactor for_model would have built, but without the rule.
        extra = {} if human_first else {"compactor": HistoryCompactor(model)}
        agent = create_agent(
            model,
            tools=[lookup],
            system_prompt="You track orders. " + "rule " * 300,
            middleware=[
                AnthropicPromptCachingMiddleware(),
                ContextKitMiddleware.for_model(model, **extra),
            ],
            checkpointer=None if stateless else InMemorySaver(),
        )
        failed = _play(agent, stateless=stateless)
        refused = [r.error for r in stub.records if r.status != 200]
        summaries = [r for r in stub.records if r.kind == "summary"]
    assert summaries, "the window should have forced compactions"
    if human_first:
        assert failed == []
        assert refused == []
    else:  # the kept history opens with the assistant's tool_use: refused
        assert failed
        assert any("first message" in error for error in refused)


# -- Bedrock Converse, through langchain-aws' own adapter ---------------------------------


def _converse_agent(stub: AnthropicStub, *, human_first: bool, ours_first: bool) -> Any:
    caching = pytest.importorskip("langchain_aws.middleware").BedrockPromptCachingMiddleware()
    from provider_stubs.converse_stub import bedrock_model

    model = bedrock_model(stub, max_tokens=500)
    extra = {} if human_first else {"compactor": HistoryCompactor(model)}
    kit = ContextKitMiddleware.for_model(model, sources=[CallableSource("faq", _faq)], **extra)
    return create_agent(
        model,
        tools=[lookup],
        system_prompt="You track orders. " + "rule " * 1_100,
        middleware=[kit, caching] if ours_first else [caching, kit],
        checkpointer=InMemorySaver(),
    )


@pytest.mark.parametrize("ours_first", [False, True])
def test_sixty_turns_on_bedrock_converse_read_the_cache(*, ours_first: bool) -> None:
    pytest.importorskip("langchain_aws")
    stub = AnthropicStub(_respond, window=6_000)
    agent = _converse_agent(stub, human_first=True, ours_first=ours_first)
    failed = _play(agent, stateless=False)
    assert failed == []
    assert all(r.status == 200 for r in stub.records)
    summaries = [r for r in stub.records if r.kind == "summary"]
    assert summaries
    for recap in summaries:  # the recap request reads the agent's prefix
        assert recap.cache_read >= 0.8 * recap.prompt_tokens
    agent_calls = [r for r in stub.records if r.kind == "agent"]
    read = sum(r.cache_read for r in agent_calls) / sum(r.prompt_tokens for r in agent_calls)
    assert read > 0.8


def test_converse_refuses_an_assistant_turn_first_without_the_rule() -> None:
    pytest.importorskip("langchain_aws")
    stub = AnthropicStub(_respond, window=6_000)
    failed = _play(_converse_agent(stub, human_first=False, ours_first=False), stateless=False)
    assert failed  # Converse refuses the list before the stub sees it


def _converse_body(model: Any, messages: list[Any], **settings: Any) -> dict[str, Any]:
    client = model.client
    model.bind_tools([lookup]).invoke(messages, **settings)
    return client.requests[-1]  # type: ignore[no-any-return]


def _history(turns: int) -> list[Any]:
    messages: list[Any] = []
    for turn in range(turns):
        call = {"name": "lookup", "args": {"order": f"O-{turn}"}, "id": f"toolu_{turn}"}
        messages += [
            HumanMessage(f"Where is order O-{turn}?"),
            AIMessage("", tool_calls=[call]),
            ToolMessage(f"O-{turn}: in transit", tool_call_id=f"toolu_{turn}"),
            AIMessage(f"Order O-{turn} is in transit."),
        ]
    return messages


@pytest.mark.parametrize("tail", [True, False])
def test_converse_cache_points_reach_the_wire_within_four(*, tail: bool) -> None:
    pytest.importorskip("langchain_aws")
    from provider_stubs.converse_stub import bedrock_model

    stub = AnthropicStub(_respond, window=50_000)
    model = bedrock_model(stub, max_tokens=100)
    recap = HumanMessage("[Recap] The user asked about orders.", id=f"{RECAP_ID_PREFIX}8")
    block = HumanMessage("[Knowledge] Depots open at 9.", id="contextkit-retrieval")
    # After a compaction the kept turns open with the assistant's call: the recap is the user's.
    messages = [recap, *_history(3)[1:], block, HumanMessage("And O-9?")]
    system = SystemMessage("You track orders.")
    settings = {"cache_control": {"type": "ephemeral"}} if tail else {}
    system_out, marked = mark_stable_prefix(
        messages, system_message=system, tools=[lookup], model_settings=settings, cache_point=True
    )
    assert count_cache_marks(system_message=None, tools=[], messages=marked, model_settings={}) == 2
    body = _converse_body(model, [system_out, *marked], **settings)
    points = json.dumps(body).count('"cachePoint"')
    assert points == (MAX_CACHE_BREAKPOINTS if tail else 2)
    recap_blocks = body["messages"][0]["content"]
    assert "cachePoint" in recap_blocks[-1]  # the recap opens the list, marked
    older_end = body["messages"][-2]["content"]  # the last older answer, before the block
    assert older_end[0]["text"] == "Order O-2 is in transit."
    assert "cachePoint" in older_end[-1]
    assert stub.records[-1].status == 200
