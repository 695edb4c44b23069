"""`AnthropicStub`: Anthropic's checks and caching rules, and an agent run through it."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from provider_stubs.anthropic_stub import AnthropicStub, Reply, ToolCall

from langchain_contextkit import CallableSource, ContextKitMiddleware, RetrievalResult
from langchain_contextkit.dashboard.figures import summarize_ledgers

MARK = {"type": "ephemeral"}


def _stub(**kwargs: Any) -> AnthropicStub:
    return AnthropicStub(lambda kind, messages: Reply(text="ok"), window=20_000, **kwargs)


def _text(words: int, word: str = "alpha", *, mark: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": f" {word}" * words}
    return {**block, "cache_control": MARK} if mark else block


def _body(messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 100, "messages": messages, **extra}


def test_refuses_what_anthropic_refuses() -> None:
    stub = _stub()
    user = {"role": "user", "content": "hi"}
    use = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
    }
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "1"}],
    }
    tools = [{"name": "f", "input_schema": {"type": "object"}}]
    refused = [
        _body([{"role": "system", "content": "late"}, user]),
        _body([user, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}]}]),
        _body([user, use, {"role": "user", "content": "no result"}]),
        _body([user], tools=tools, tool_choice={"type": "tool", "name": "none"}),
        _body([user], tool_choice={"type": "nothing"}),
        _body([{"role": "user", "content": [_text(1, mark=True)] * 5}]),
        _body([{"role": "user", "content": [{"type": "text", "text": " "}]}]),
        _body([{"role": "user", "content": "word " * 30_000}]),
    ]
    answers = [stub.handle(body) for body in refused]
    assert [status for status, _ in answers] == [400] * len(refused)
    assert all(body["error"]["type"] == "invalid_request_error" for _, body in answers)
    assert "prompt is too long" in answers[-1][1]["error"]["message"]
    # Merged consecutive user turns, a proper pair, "none" with tools: all accepted.
    accepted = _body([user, user, use, result], tools=tools, tool_choice={"type": "none"})
    assert stub.handle(accepted)[0] == 200
    assert stub.records[-1].kind == "other"


def test_entries_are_written_only_at_breakpoints_over_the_minimum() -> None:
    stub = _stub()
    prefix = [_text(1_500)]
    first = stub.handle(_body([{"role": "user", "content": [*prefix, _text(10, "q1")]}]))[1]
    assert first["usage"]["cache_creation_input_tokens"] == 0  # no breakpoint, no entry
    marked = [{**prefix[0], "cache_control": MARK}]
    second = stub.handle(_body([{"role": "user", "content": [*marked, _text(10, "q2")]}]))[1]
    third = stub.handle(_body([{"role": "user", "content": [*marked, _text(10, "q3")]}]))[1]
    assert second["usage"]["cache_creation_input_tokens"] == 1_500
    assert third["usage"]["cache_read_input_tokens"] == 1_500
    assert third["usage"]["input_tokens"] == second["usage"]["input_tokens"] > 0
    small = [_text(500, "beta", mark=True)]
    for question in ("a", "b"):
        usage = stub.handle(_body([{"role": "user", "content": [*small, _text(3, question)]}]))[1]
        assert usage["usage"]["cache_read_input_tokens"] == 0  # under 1,024 tokens: never cached


def test_a_breakpoint_reads_back_within_the_lookback_only() -> None:
    stub = _stub()
    head = [_text(1_100, "head", mark=True)]
    stub.handle(_body([{"role": "user", "content": head}]))
    near = [*[_text(2, f"n{i}") for i in range(19)]]
    usage = stub.handle(
        _body([{"role": "user", "content": [*head, *near[:-1], _text(2, "x", mark=True)]}])
    )
    assert usage[1]["usage"]["cache_read_input_tokens"] >= 1_100
    stub2 = _stub()
    plain = [_text(1_100, "head")]
    stub2.handle(_body([{"role": "user", "content": [{**plain[0], "cache_control": MARK}]}]))
    far = [_text(2, f"f{i}") for i in range(25)]
    usage = stub2.handle(
        _body([{"role": "user", "content": [*plain, *far, _text(2, "y", mark=True)]}])
    )
    assert usage[1]["usage"]["cache_read_input_tokens"] == 0  # 26 blocks back: not found
    # A top-level cache_control marks the last block.
    top = stub2.handle(_body([{"role": "user", "content": [*plain, *far]}], cache_control=MARK))[1]
    assert top["usage"]["cache_creation_input_tokens"] > 0


# -- an agent through ChatAnthropic -----------------------------------------------------


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
    return [RetrievalResult(f"Passage about {query[-12:]}: " + "policy " * 60, 0.9, "faq")]


@pytest.mark.allow_hosts(["127.0.0.1"])
@pytest.mark.parametrize("marks", [True, False])
def test_an_agent_with_a_retrieval_block_reads_its_older_turns_from_the_cache(
    *, marks: bool
) -> None:
    with AnthropicStub(_respond, window=6_000) as stub:
        model = stub.chat_model(max_tokens=500)
        kit = ContextKitMiddleware.for_model(
            model, sources=[CallableSource("faq", _faq)], cache_breakpoints=marks
        )
        agent = create_agent(
            model,
            tools=[lookup],
            system_prompt="You track orders. " + "rule " * 300,
            middleware=[AnthropicPromptCachingMiddleware(), kit],
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": "t"}}
        for turn in range(14):
            agent.invoke({"messages": [HumanMessage(f"Where is order O-{turn}?")]}, config)
        records = stub.records
        ledgers = agent.get_state(config).values["contextkit_ledger"]
    # The ledger reads Anthropic's usage: the whole input, and the cache's two parts of it.
    last = ledgers[-1]
    assert last["reported"] == records[-1].prompt_tokens
    assert (last["cache_read"], last["cache_write"]) == (
        records[-1].cache_read,
        records[-1].cache_write,
    )
    figures = summarize_ledgers(ledgers).overall
    assert "written to the cache" in summarize_ledgers(ledgers).text()
    assert figures.cache_write_rate is not None
    assert figures.input_cost is not None
    if marks:
        assert figures.input_cost < sum(r["reported"] for r in ledgers)
    assert all(r.status == 200 for r in records), [r.error for r in records if r.status != 200]
    summaries = [r for r in records if r.kind == "summary"]
    firsts = [
        r for r in records if r.kind == "agent" and "Where is order" in r.text.splitlines()[-1]
    ]
    read = sum(r.cache_read for r in firsts[3:]) / sum(r.prompt_tokens for r in firsts[3:])
    if marks:
        assert summaries, "the window should have forced a recap"
        assert read > 0.5  # each turn's first call reads the older turns
    else:
        assert read < 0.5  # the block changes before the tail: only system + tools


@pytest.mark.allow_hosts(["127.0.0.1"])
@pytest.mark.parametrize("ours_first", [False, True])
def test_both_stacking_orders_stay_within_four_breakpoints_and_read_the_older_turns(
    *, ours_first: bool
) -> None:
    # The stub refuses a request with more than four breakpoints: every call must pass.
    with AnthropicStub(_respond, window=6_000) as stub:
        model = stub.chat_model(max_tokens=500)
        kit = ContextKitMiddleware.for_model(model, sources=[CallableSource("faq", _faq)])
        caching = AnthropicPromptCachingMiddleware()
        agent = create_agent(
            model,
            tools=[lookup],
            system_prompt="You track orders. " + "rule " * 1_100,
            middleware=[kit, caching] if ours_first else [caching, kit],
            checkpointer=InMemorySaver(),
        )
        config = {"configurable": {"thread_id": "t"}}
        for turn in range(24):
            agent.invoke({"messages": [HumanMessage(f"Where is order O-{turn}?")]}, config)
        records = stub.records
    assert all(r.status == 200 for r in records), [r.error for r in records if r.status != 200]
    summaries = [r for r in records if r.kind == "summary"]
    assert summaries
    assert min(r.cache_read / r.prompt_tokens for r in summaries) >= 0.8
    firsts = [
        r for r in records if r.kind == "agent" and "Where is order" in r.text.splitlines()[-1]
    ]
    read = sum(r.cache_read for r in firsts[3:]) / sum(r.prompt_tokens for r in firsts[3:])
    assert read > 0.6  # the system prompt alone is about a third of the input
