"""OpenAIStub: rejects what OpenAI rejects, counts prompts and cached tokens like it."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_openai import ChatOpenAI
from provider_stubs.openai_stub import (
    CACHE_MIN_TOKENS,
    CACHE_STEP_TOKENS,
    OpenAIStub,
    Reply,
    ToolCall,
)

from langchain_contextkit import count_message_tokens, tiktoken_counter

LOCALHOST = pytest.mark.allow_hosts(["127.0.0.1"])
CL100K = tiktoken_counter("cl100k_base")


def answer(kind: str, messages: list[dict[str, Any]]) -> Reply:
    if messages[-1]["role"] == "user" and kind == "agent":
        calls = (
            ToolCall("lookup", {"id": "R-1"}, "call_a"),
            ToolCall("lookup", {"id": "R-2"}, "call_b"),
        )
        return Reply(tool_calls=calls)
    return Reply(text=f"{kind} reply")


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def calls_message(*ids: str) -> dict[str, Any]:
    calls = [
        {"id": i, "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
        for i in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def tool(call_id: str, text: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


LOOKUP_SCHEMA = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a record up.",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
    },
}


@pytest.fixture
def stub() -> OpenAIStub:
    return OpenAIStub(answer, window=2_000)


def test_a_valid_tool_loop_is_answered(stub: OpenAIStub) -> None:
    status, body = stub.handle({"model": "m", "messages": [user("R-1?")], "tools": [LOOKUP_SCHEMA]})
    assert status == 200
    message = body["choices"][0]["message"]
    assert [c["id"] for c in message["tool_calls"]] == ["call_a", "call_b"]
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert json.loads(message["tool_calls"][0]["function"]["arguments"]) == {"id": "R-1"}
    # Parallel calls answered in any order, then a system message mid-conversation: accepted.
    messages = [
        user("R-1?"),
        calls_message("call_a", "call_b"),
        tool("call_b"),
        tool("call_a"),
        {"role": "system", "content": "Late system note."},
        user("thanks"),
    ]
    status, body = stub.handle({"model": "m", "messages": messages})
    assert status == 200
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "other reply"}
    assert [r.status for r in stub.records] == [200, 200]


@pytest.mark.parametrize(
    ("messages", "param", "fragment"),
    [
        pytest.param(
            [user("hi"), tool("call_x")], "messages.[1].role", "must be a response", id="orphan"
        ),
        pytest.param(
            [user("hi"), calls_message("call_a"), user("again")],
            "messages.[1].role",
            "call_a",
            id="unanswered-then-user",
        ),
        pytest.param(
            [user("hi"), calls_message("call_a", "call_b"), tool("call_a")],
            "messages.[1].role",
            "call_b",
            id="unanswered-at-end",
        ),
        pytest.param(
            [user("hi"), calls_message("call_a"), tool("call_a"), tool("call_a2")],
            "messages.[3].role",
            "must be a response",
            id="answer-to-a-call-never-made",
        ),
        pytest.param(
            [calls_message("call_a"), user("hi"), tool("call_a")],
            "messages.[0].role",
            "call_a",
            id="answer-after-a-user-turn",
        ),
    ],
)
def test_invalid_tool_order_is_a_400(
    stub: OpenAIStub, messages: list[dict[str, Any]], param: str, fragment: str
) -> None:
    status, body = stub.handle({"model": "m", "messages": messages})
    assert status == 400
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["param"] == param
    assert fragment in body["error"]["message"]
    (record,) = stub.records
    assert record.status == 400
    assert fragment in record.error
    assert record.completion_tokens == 0


def test_the_window_counts_prompt_plus_requested_completion() -> None:
    messages = [
        SystemMessage("You are terse."),
        HumanMessage("Summarise the ledger of record R-7 for me, 请用中文。"),
    ]
    prompt = count_message_tokens(messages, CL100K)
    sent = [{"role": "system", "content": messages[0].text}, user(messages[1].text)]
    stub = OpenAIStub(answer, window=prompt + 100)
    status, body = stub.handle({"model": "m", "messages": sent, "max_tokens": 100})
    assert status == 200  # exactly at the limit
    assert body["usage"]["prompt_tokens"] == prompt  # OpenAI's documented chat accounting
    status, body = stub.handle({"model": "m", "messages": sent, "max_completion_tokens": 101})
    assert status == 400
    assert body["error"]["code"] == "context_length_exceeded"
    assert f"maximum context length is {prompt + 100} tokens" in body["error"]["message"]
    status, body = OpenAIStub(answer, window=prompt - 1).handle({"model": "m", "messages": sent})
    assert status == 400
    assert f"resulted in {prompt} tokens" in body["error"]["message"]
    assert [(r.status, r.max_tokens) for r in stub.records] == [(200, 100), (400, 101)]


def test_prompt_tokens_include_tool_calls_names_and_schemas(stub: OpenAIStub) -> None:
    call = {"name": "lookup", "args": {"id": "R-1"}, "id": "call_a"}
    messages = [
        HumanMessage("R-1?", name="ana"),
        AIMessage("", tool_calls=[call]),
        ToolMessage("R-1 is settled.", tool_call_id="call_a"),
    ]
    sent = [
        {**user("R-1?"), "name": "ana"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"id": "R-1"}'},
                }
            ],
        },
        tool("call_a", "R-1 is settled."),
    ]
    schema_tokens = CL100K(json.dumps(LOOKUP_SCHEMA, separators=(",", ":")))
    _, body = stub.handle({"model": "m", "messages": sent, "tools": [LOOKUP_SCHEMA]})
    assert body["usage"]["prompt_tokens"] == count_message_tokens(messages, CL100K) + schema_tokens


def test_cached_tokens_are_the_shared_prefix_in_128_token_steps(stub: OpenAIStub) -> None:
    stub.window = 100_000
    # One word is one cl100k token here, so the prefix lengths are easy to reason about.
    long_text = " word" * 3_000
    first = [{"role": "system", "content": long_text}, user("first question")]
    second = [{"role": "system", "content": long_text}, user("second question")]
    _, body = stub.handle({"model": "m", "messages": first})
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0  # nothing seen yet
    _, body = stub.handle({"model": "m", "messages": second})
    cached = body["usage"]["prompt_tokens_details"]["cached_tokens"]
    shared = 3 + 1 + 3_000  # framing, role, the system text; the user turn differs
    assert cached == shared // CACHE_STEP_TOKENS * CACHE_STEP_TOKENS
    assert stub.records[1].cached_tokens == cached
    # A prefix under the minimum is never reported as cached.
    short = " word" * (CACHE_MIN_TOKENS - 200)
    stub.handle({"model": "m", "messages": [{"role": "system", "content": short}, user("a")]})
    _, body = stub.handle(
        {"model": "m", "messages": [{"role": "system", "content": short}, user("b")]}
    )
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    # A request that differs in its first message shares nothing with the others.
    _, body = stub.handle({"model": "m", "messages": [user(long_text)]})
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def test_a_rejected_request_does_not_warm_the_cache(stub: OpenAIStub) -> None:
    stub.window = 100_000
    text = " word" * 2_000
    stub.handle({"model": "m", "messages": [user(text), tool("call_x")]})  # 400
    _, body = stub.handle({"model": "m", "messages": [user(text)]})
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def test_kinds_agent_summary_other(stub: OpenAIStub) -> None:
    tools = [LOOKUP_SCHEMA]
    stub.handle({"model": "m", "messages": [user("Summarise this.")], "tools": tools})
    stub.handle({"model": "m", "messages": [user("Summarise this.")]})
    stub.handle({"model": "m", "messages": [user("请总结以上对话。")]})
    stub.handle(
        {
            "model": "m",
            "messages": [user("summary of R-1?"), user("Write the recap now.")],
            "tools": tools,
            "tool_choice": "none",
        }
    )
    stub.handle(
        {
            "model": "m",
            "messages": [user("summary of R-1?"), user("Go on.")],
            "tools": tools,
            "tool_choice": "none",
        }
    )
    stub.handle({"model": "m", "messages": [user("Hello.")]})
    assert [r.kind for r in stub.records] == [
        "agent",
        "summary",
        "summary",
        "summary",
        "other",
        "other",
    ]


def test_streaming_and_empty_requests_are_refused(stub: OpenAIStub) -> None:
    status, body = stub.handle({"model": "m", "messages": [user("hi")], "stream": True})
    assert (status, body["error"]["param"]) == (400, "stream")
    status, body = stub.handle({"model": "m", "messages": []})
    assert (status, body["error"]["code"]) == (400, "empty_array")


def test_a_responder_that_raises_gets_a_500(stub: OpenAIStub) -> None:
    def broken(kind: str, messages: list[dict[str, Any]]) -> Reply:
        msg = "no script for this turn"
        raise LookupError(msg)

    stub.respond = broken
    status, body = stub.handle({"model": "m", "messages": [user("hi")]})
    assert status == 500
    assert "LookupError: no script for this turn" in body["error"]["message"]
    assert stub.records[0].status == 500


def test_bad_window_and_base_url_before_start() -> None:
    with pytest.raises(ValueError, match="window must be >= 1"):
        OpenAIStub(answer, window=0)
    with pytest.raises(RuntimeError, match="not started"):
        _ = OpenAIStub(answer, window=10).base_url


def chat(stub: OpenAIStub, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=stub.base_url,
        api_key="x",
        model="stub-model",
        max_retries=0,
        disable_streaming=True,
        use_responses_api=False,
        **kwargs,
    )


@LOCALHOST
def test_through_chat_openai_over_http() -> None:
    with OpenAIStub(answer, window=3_000) as stub:
        llm = chat(stub, max_tokens=200)
        ai = llm.bind_tools([LOOKUP_SCHEMA]).invoke("R-1 and R-2?")
        assert [c["args"] for c in ai.tool_calls] == [{"id": "R-1"}, {"id": "R-2"}]
        history = [
            HumanMessage("R-1 and R-2?"),
            ai,
            ToolMessage("R-1 settled.", tool_call_id="call_a"),
            ToolMessage("R-2 open.", tool_call_id="call_b"),
        ]
        final = llm.bind_tools([LOOKUP_SCHEMA]).invoke(history)
        assert final.text == "agent reply"
        assert final.usage_metadata is not None
        assert final.usage_metadata["input_tokens"] == stub.records[-1].prompt_tokens
        # What the real service refuses surfaces as the SDK's errors.
        with pytest.raises(openai.BadRequestError, match="must be a response"):
            llm.invoke([HumanMessage("hi"), ToolMessage("orphan", tool_call_id="call_z")])
        with pytest.raises(openai.BadRequestError) as overflow:
            llm.invoke("word " * 3_000)
        assert overflow.value.code == "context_length_exceeded"
        with pytest.raises(openai.BadRequestError, match="did not have response messages"):
            llm.invoke(history[:3])
        # The prompt cache shows up as cache reads in the usage metadata.
        long = "Our shipping rules. " + "Pallets ship from WH-5. " * 300
        first = llm.invoke([SystemMessage(long), HumanMessage("one?")])
        second = llm.invoke([SystemMessage(long), HumanMessage("two?")])
    assert first.usage_metadata is not None
    assert second.usage_metadata is not None
    assert first.usage_metadata.get("input_token_details", {}).get("cache_read", 0) == 0
    cache_read = second.usage_metadata.get("input_token_details", {}).get("cache_read", 0)
    assert cache_read >= CACHE_MIN_TOKENS
    assert cache_read % CACHE_STEP_TOKENS == 0
    assert [r.status for r in stub.records] == [200, 200, 400, 400, 400, 200, 200]


@LOCALHOST
def test_unknown_routes_and_bad_json_over_http() -> None:
    import httpx

    with OpenAIStub(answer, window=100) as stub, httpx.Client(base_url=stub.base_url) as client:
        assert client.post("/embeddings", json={}).status_code == 404
        response = client.post(
            "/chat/completions", content=b"{not json", headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 400
        assert "Invalid JSON body" in response.json()["error"]["message"]
    assert stub.records == []  # neither reached the script


@LOCALHOST
def test_the_ledger_counts_tool_calls_as_chat_openai_sends_them() -> None:
    args = {
        "action": "create",
        "title": "Task T001: billing export",
        "content": "Review started.",
        "note_type": "task_state",
        "tags": ["billing", "t001"],
    }
    history = [
        HumanMessage("Turn 1: open a task note."),
        AIMessage("", tool_calls=[{"name": "note", "args": args, "id": "call_1"}]),
        ToolMessage("Created note note_1.", tool_call_id="call_1"),
    ]
    with OpenAIStub(answer, window=10_000) as stub:
        chat(stub).invoke(history)
    # Measured: the stub counts 79 tokens, count_message_tokens 69.
    assert stub.records[0].prompt_tokens == count_message_tokens(history, CL100K)
