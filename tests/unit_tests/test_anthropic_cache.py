"""Provider-native prompt caching: "no tools" per provider, Claude's breakpoints.

Every check reads the body each adapter would put on the wire (its own request-payload
builder), not only its message converter: the refusals this guards against happen there.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_anthropic import ChatAnthropic
from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_google_genai import ChatGoogleGenerativeAI
from langchain_openai import ChatOpenAI

from langchain_contextkit import CallableSource, ContextKitMiddleware, RetrievalResult
from langchain_contextkit.agent.middleware import InPlaceSummary
from langchain_contextkit.agent.providers import (
    MAX_CACHE_BREAKPOINTS,
    caches_explicitly,
    count_cache_marks,
    mark_stable_prefix,
    no_tools_choice,
    provider_of,
    stable_prefix_ends,
)
from langchain_contextkit.compaction.compactor import RECAP_ID_PREFIX, HistoryCompactor


@tool
def lookup(order: str) -> str:
    """Look an order up by its id."""
    return order


PROFILE = {"max_input_tokens": 8_000, "max_output_tokens": 1_000}
INSTRUCTION = "Write a recap of the conversation so far."


def _claude() -> ChatAnthropic:
    return ChatAnthropic(model="claude-sonnet-4-5", api_key="test", profile=PROFILE)  # type: ignore[arg-type,call-arg]


def _gpt() -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o", api_key="test", profile=PROFILE)  # type: ignore[arg-type]


def _gemini() -> ChatGoogleGenerativeAI:
    return ChatGoogleGenerativeAI(model="gemini-2.5-flash", google_api_key="test")  # type: ignore[call-arg]


def _request(model: Any, messages: list[BaseMessage], **extra: Any) -> ModelRequest[Any]:
    return ModelRequest(
        model=model,
        messages=messages,  # type: ignore[arg-type]
        system_message=extra.pop("system_message", SystemMessage("You track orders.")),
        tools=extra.pop("tools", [lookup]),
        state={"messages": messages},  # type: ignore[typeddict-item]
        runtime=None,  # type: ignore[arg-type]
        **extra,
    )


def _history(turns: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for turn in range(turns):
        call = {"name": "lookup", "args": {"order": f"O-{turn}"}, "id": f"call_{turn}"}
        messages += [
            HumanMessage(f"Where is order O-{turn}? It ships to depot D{turn}."),
            AIMessage("", tool_calls=[call]),
            ToolMessage(f"O-{turn}: in transit to D{turn}", tool_call_id=f"call_{turn}"),
            AIMessage(f"Order O-{turn} is in transit to depot D{turn}."),
        ]
    return messages


def _recap_call(model: Any) -> tuple[Any, list[BaseMessage]]:
    request = _request(model, _history(2))
    summary = InPlaceSummary(HistoryCompactor(model), request, None, cache_marks=True)
    call = summary._call(list(request.messages), INSTRUCTION)
    assert call is not None
    return call


def _anthropic_body(binding: Any, messages: list[BaseMessage], **settings: Any) -> dict[str, Any]:
    llm = binding.bound if hasattr(binding, "bound") else binding
    kwargs = dict(getattr(binding, "kwargs", {}))
    return llm._get_request_payload(messages, **kwargs, **settings)  # type: ignore[no-any-return]


def _wire_marks(body: dict[str, Any]) -> int:
    """Breakpoints in an Anthropic body: blocks anywhere, tools, and a top-level mark."""
    text = json.dumps({k: v for k, v in body.items() if k != "cache_control"})
    return text.count('"cache_control"') + (1 if body.get("cache_control") else 0)


# -- "no tools" as each provider says it ------------------------------------------------


def test_recap_call_says_no_tools_the_anthropic_way() -> None:
    binding, messages = _recap_call(_claude())
    body = _anthropic_body(binding, messages)
    assert body["tool_choice"] == {"type": "none"}  # not {"type": "tool", "name": "none"}
    assert [t["name"] for t in body["tools"]] == ["lookup"]  # the agent's prefix, tools included


def test_recap_call_says_no_tools_the_openai_way() -> None:
    binding, messages = _recap_call(_gpt())
    body = binding.bound._get_request_payload(messages, **binding.kwargs)
    assert body["tool_choice"] == "none"
    assert [t["function"]["name"] for t in body["tools"]] == ["lookup"]
    assert not any("cache_control" in json.dumps(m) for m in body["messages"])  # OpenAI: unmarked


def test_recap_call_says_no_tools_the_gemini_way() -> None:
    binding, messages = _recap_call(_gemini())
    body = binding.bound._prepare_request(messages, **binding.kwargs)
    config = body["config"].tool_config.function_calling_config
    assert config.mode.value == "NONE"
    assert not config.allowed_function_names  # "none" is not read as a tool's name
    assert [d.name for d in body["config"].tools[0].function_declarations] == ["lookup"]


def test_provider_families_and_explicit_caching() -> None:
    assert provider_of(_claude()) == "anthropic"
    assert provider_of(_claude().bind_tools([lookup])) == "anthropic"
    assert provider_of(_gpt()) == "openai"
    assert provider_of(_gemini()) == "google"
    assert [caches_explicitly(m) for m in (_claude(), _gpt(), _gemini())] == [True, False, False]

    class ChatBedrockConverse:  # the class name is what counts; no langchain-aws needed
        model_id = "anthropic.claude-3-5-sonnet-20240620-v1:0"

    assert caches_explicitly(ChatBedrockConverse())
    assert no_tools_choice(ChatBedrockConverse()) is None  # Converse has no "none"
    ChatBedrockConverse.model_id = "amazon.nova-pro-v1:0"
    assert not caches_explicitly(ChatBedrockConverse())


# -- breakpoints on the agent's request -------------------------------------------------


def _faq(query: str) -> list[RetrievalResult]:
    return [RetrievalResult(f"Depots open at 9:00 ({query[:20]}).", 0.9, "faq")]


def _sent(middlewares: list[Any], model: Any, messages: list[BaseMessage]) -> ModelRequest[Any]:
    """The request the last middleware hands the model, the stack called in order."""
    seen: list[ModelRequest[Any]] = []

    def model_call(request: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(request)
        return ModelResponse(result=[AIMessage("ok")])

    def chain(index: int) -> Any:
        if index == len(middlewares):
            return model_call
        return lambda request: middlewares[index].wrap_model_call(request, chain(index + 1))

    chain(0)(_request(model, messages))
    return seen[-1]


def _body_of(request: ModelRequest[Any]) -> dict[str, Any]:
    binding = request.model.bind_tools(request.tools)
    messages = [*([request.system_message] if request.system_message else []), *request.messages]
    return _anthropic_body(binding, messages, **request.model_settings)


def _kit(**kwargs: Any) -> ContextKitMiddleware:
    return ContextKitMiddleware.for_model(_claude(), summaries="extractive", **kwargs)


@pytest.mark.parametrize("order", ["caching_first", "ours_first", "ours_alone"])
@pytest.mark.parametrize("with_source", [True, False])
def test_breakpoint_ends_the_older_turns_in_either_stacking_order(
    order: str, *, with_source: bool
) -> None:
    kit = _kit(sources=[CallableSource("faq", _faq)] if with_source else [])
    caching = AnthropicPromptCachingMiddleware()
    stack = {
        "caching_first": [caching, kit],
        "ours_first": [kit, caching],
        "ours_alone": [kit],
    }[order]
    history = [*_history(3), HumanMessage("And order O-9?")]
    request = _sent(stack, _claude(), history)
    body = _body_of(request)
    assert _wire_marks(body) <= MAX_CACHE_BREAKPOINTS
    user_turns = [m for m in body["messages"] if m["role"] == "user"]
    # The last older turn's answer carries the mark: the block and the question come after.
    older_end = body["messages"][-2]
    assert older_end["role"] == "assistant"
    assert older_end["content"][-1]["text"] == "Order O-2 is in transit to depot D2."
    assert older_end["content"][-1]["cache_control"] == {"type": "ephemeral"}
    question = json.dumps(user_turns[-1])
    assert "O-9" in question
    if with_source:
        assert "Depots open" in question  # the block is after the mark, with the question
    if order != "ours_alone":
        assert body["cache_control"] or "cache_control" in json.dumps(body["messages"][-1])


def test_breakpoints_turned_off_leave_the_request_as_assembled() -> None:
    history = [*_history(3), HumanMessage("And order O-9?")]
    body = _body_of(_sent([_kit(cache_breakpoints=False)], _claude(), history))
    assert _wire_marks(body) == 0


def test_openai_requests_get_no_marks() -> None:
    history = [*_history(3), HumanMessage("And order O-9?")]
    kit = ContextKitMiddleware.for_model(_gpt(), summaries="extractive")
    request = _sent([kit], _gpt(), history)
    assert "cache_control" not in json.dumps([m.content for m in request.messages])


def _recap(text: str = "Facts:\n- O-0 ships to D0.") -> SystemMessage:
    return SystemMessage(text, id=f"{RECAP_ID_PREFIX}4")


def test_the_caching_middlewares_system_mark_moves_to_the_recap() -> None:
    tagged_system = SystemMessage(
        [{"type": "text", "text": "You track orders.", "cache_control": {"type": "ephemeral"}}]
    )
    messages = [_recap(), *_history(2), HumanMessage("Next?")]
    system, marked = mark_stable_prefix(
        messages, system_message=tagged_system, tools=[], model_settings={"cache_control": {}}
    )
    assert system is not None
    assert count_cache_marks(system_message=system, tools=[], messages=[], model_settings={}) == 0
    assert marked[0].content[0]["cache_control"] == {"type": "ephemeral"}  # type: ignore[index]
    body = _anthropic_body(_claude(), [system, *marked], cache_control={"type": "ephemeral"})
    # Anthropic's system: the prompt, then the recap ending the entry that covers both.
    assert [b.get("cache_control") is not None for b in body["system"]] == [False, True]
    assert _wire_marks(body) == 3  # recap, older turns, the automatic tail


def test_stable_prefix_ends_skip_calls_and_stop_at_the_recap() -> None:
    block = HumanMessage("[Knowledge] ...", id="contextkit-retrieval")
    messages = [_recap(), *_history(1), block, HumanMessage("Q")]
    assert stable_prefix_ends(messages) == (0, 4)
    assert stable_prefix_ends([_recap(), HumanMessage("Q")]) == (0, None)
    assert stable_prefix_ends([HumanMessage("Q")]) == (None, None)
    # An older turn ending on a tool call: the mark goes on the last text before the pair.
    loop = _history(1)[:3]
    _, marked = mark_stable_prefix(
        [*loop, block, HumanMessage("Q")], system_message=None, tools=[], model_settings={}
    )
    assert "cache_control" in json.dumps(marked[2].content)  # the tool result
    assert marked[:3] != loop


def test_marks_copy_the_messages_and_never_touch_the_history() -> None:
    history = [*_history(2), HumanMessage("And order O-9?")]
    before = [m.model_dump() for m in history]
    _sent([_kit()], _claude(), history)
    assert [m.model_dump() for m in history] == before


def test_recap_request_is_marked_like_the_agents() -> None:
    binding, messages = _recap_call(_claude())
    body = _anthropic_body(binding, messages)
    # No caching middleware: the end of the view (where the agent's last request ended).
    assert 1 <= _wire_marks(body) <= MAX_CACHE_BREAKPOINTS
    assert body["messages"][-2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert INSTRUCTION in json.dumps(body["messages"][-1])
