"""Bedrock's Converse API for `ChatBedrockConverse`, served by an `AnthropicStub`.

`ConverseClient` stands where langchain-aws keeps its boto3 ``bedrock-runtime`` client:
its `converse` takes the request langchain-aws built (the body that would go on the wire),
checks Converse's own rules (the conversation opens with the user and alternates roles),
translates it into a Messages API body (``cachePoint`` blocks become the ``cache_control``
of the block before them, as Bedrock applies Claude's caching) and lets the stub answer,
cache and record it. A refusal is raised as botocore's ``ClientError``
(``ValidationException``), as boto3 raises it.

Example:
    ```python
    from langchain_core.messages import HumanMessage

    from provider_stubs.anthropic_stub import AnthropicStub, Reply
    from provider_stubs.converse_stub import bedrock_model

    stub = AnthropicStub(lambda kind, messages: Reply(text="Hi!"), window=10_000)
    model = bedrock_model(stub, max_tokens=100)
    print(model.invoke([HumanMessage("Hello")]).text)
    print(stub.records[-1].status)
    # Hi!
    # 200
    ```
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from provider_stubs._script import SUMMARY_REQUEST

if TYPE_CHECKING:
    from langchain_aws import ChatBedrockConverse

    from provider_stubs._script import Kind
    from provider_stubs.anthropic_stub import AnthropicStub

__all__ = ["ConverseClient", "bedrock_model"]

DEFAULT_MODEL_ID = "anthropic.claude-3-5-sonnet-20240620-v1:0"
_MARK = {"type": "ephemeral"}
_STOP_REASONS = {"tool_use": "tool_use", "end_turn": "end_turn", "max_tokens": "max_tokens"}


def _refuse(message: str) -> Exception:
    # botocore ships no type hints.
    from botocore.exceptions import (  # type: ignore[import-untyped]
        ClientError,
    )

    # Bedrock words an over-long prompt its own way; langchain-aws reads it as an overflow.
    if message.startswith(("prompt is too long", "input length")):
        message = f"Input is too long for requested model. ({message})"
    error = {"Error": {"Code": "ValidationException", "Message": message}}
    refused: Exception = ClientError(error, "Converse")
    return refused


def _anthropic_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Converse blocks as Messages API blocks; a ``cachePoint`` marks the block before it."""
    out: list[dict[str, Any]] = []
    for block in blocks:
        if "cachePoint" in block:
            if out:
                out[-1] = {**out[-1], "cache_control": dict(_MARK)}
        elif "text" in block:
            out.append({"type": "text", "text": block["text"]})
        elif "toolUse" in block:
            use = block["toolUse"]
            out.append(
                {
                    "type": "tool_use",
                    "id": use["toolUseId"],
                    "name": use["name"],
                    "input": use.get("input", {}),
                }
            )
        elif "toolResult" in block:
            result = block["toolResult"]
            parts = [
                {"type": "text", "text": part["text"]}
                if "text" in part
                else {"type": "text", "text": json.dumps(part.get("json"), sort_keys=True)}
                for part in result.get("content", [])
            ]
            out.append(
                {"type": "tool_result", "tool_use_id": result["toolUseId"], "content": parts}
            )
        else:
            out.append({"type": next(iter(block), "unknown"), **block})
    return out


def _anthropic_tools(config: dict[str, Any] | None) -> tuple[list[dict[str, Any]], Any]:
    if not config:
        return [], None
    tools: list[dict[str, Any]] = []
    for entry in config.get("tools", []):
        if "cachePoint" in entry and tools:
            tools[-1] = {**tools[-1], "cache_control": dict(_MARK)}
        elif "toolSpec" in entry:
            spec = entry["toolSpec"]
            tools.append(
                {
                    "name": spec["name"],
                    "description": spec.get("description", ""),
                    "input_schema": spec.get("inputSchema", {}).get("json", {}),
                }
            )
    choice = config.get("toolChoice")
    if isinstance(choice, dict) and choice:
        kind = next(iter(choice))
        return tools, {"type": kind, **choice[kind]}
    return tools, None


def _check_turns(messages: list[dict[str, Any]]) -> None:
    roles = [str(m.get("role")) for m in messages]
    if roles and roles[0] != "user":
        msg = "A conversation must start with a user message. Try again with a conversation that starts with a user message."  # noqa: E501 - Bedrock's words
        raise _refuse(msg)
    for index in range(1, len(roles)):
        if roles[index] == roles[index - 1]:
            msg = "A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again."  # noqa: E501 - Bedrock's words
            raise _refuse(msg)


def _recap_kind(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Kind | None:
    """``summary`` for a recap request that binds the tools (Converse has no "none")."""
    if not tools or not messages or messages[-1].get("role") != "user":
        return None
    blocks = messages[-1].get("content") or []
    if any("toolResult" in block for block in blocks):
        return None
    texts = [block["text"] for block in blocks if "text" in block]
    return "summary" if texts and SUMMARY_REQUEST.search(texts[-1]) else None


class ConverseClient:
    """The ``bedrock-runtime`` client's `converse`, answered by an `AnthropicStub`."""

    def __init__(self, stub: AnthropicStub) -> None:
        """Serve through `stub` (its checks, cache, records and responder)."""
        self.stub = stub
        self.requests: list[dict[str, Any]] = []
        """Each request body as langchain-aws built it."""

    def converse(self, **request: Any) -> dict[str, Any]:
        """Answer one Converse request.

        Raises:
            ClientError: ``ValidationException`` where Bedrock refuses the request.
        """
        self.requests.append(request)
        messages: list[dict[str, Any]] = request.get("messages") or []
        _check_turns(messages)
        tools, choice = _anthropic_tools(request.get("toolConfig"))
        inference = request.get("inferenceConfig") or {}
        body: dict[str, Any] = {
            "model": request.get("modelId", DEFAULT_MODEL_ID),
            "max_tokens": inference.get("maxTokens", 1024),
            "system": _anthropic_blocks(request.get("system") or []),
            "messages": [
                {"role": m["role"], "content": _anthropic_blocks(m.get("content") or [])}
                for m in messages
            ],
        }
        if tools:
            body["tools"] = tools
        if choice is not None:
            body["tool_choice"] = choice
        status, answer = self.stub.handle(body, kind=_recap_kind(messages, tools))
        if status != 200:
            raise _refuse(str(answer["error"]["message"]))
        usage = answer["usage"]
        plain, read = usage["input_tokens"], usage["cache_read_input_tokens"]
        written = usage["cache_creation_input_tokens"]
        content = [
            {"text": block["text"]}
            if block["type"] == "text"
            else {
                "toolUse": {
                    "toolUseId": block["id"],
                    "name": block["name"],
                    "input": block["input"],
                }
            }
            for block in answer["content"]
        ]
        return {
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": _STOP_REASONS.get(answer["stop_reason"], "end_turn"),
            "usage": {
                "inputTokens": plain,
                "outputTokens": usage["output_tokens"],
                "totalTokens": plain + read + written + usage["output_tokens"],
                "cacheReadInputTokens": read,
                "cacheWriteInputTokens": written,
            },
            "metrics": {"latencyMs": 1},
        }


def bedrock_model(
    stub: AnthropicStub, *, max_tokens: int, model_id: str = DEFAULT_MODEL_ID
) -> ChatBedrockConverse:
    """A `ChatBedrockConverse` (Claude) served by `stub`, the stub's window in its profile."""
    from langchain_aws import ChatBedrockConverse

    return ChatBedrockConverse(
        model_id=model_id,
        client=ConverseClient(stub),
        region_name="us-east-1",
        aws_access_key_id="stub",
        aws_secret_access_key="stub",  # noqa: S106 - no real key
        max_tokens=max_tokens,
        profile={"max_input_tokens": stub.window, "max_output_tokens": max_tokens},
    )
