"""What the OpenAI chat-completions service refuses, with the error body it answers.

`check_request` raises `RequestRejectedError` for a streaming request (the stub does not
stream), an empty message list, a tool message that answers no tool call of the nearest
preceding assistant message, a tool call left unanswered, and a prompt whose tokens plus
the requested completion exceed the window (code `context_length_exceeded`). A system
message after other messages is accepted, as OpenAI does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RequestRejectedError", "bad_json_body", "check_request", "max_tokens"]


class RequestRejectedError(Exception):
    """A request the real service would refuse; carries the OpenAI error fields."""

    def __init__(self, message: str, *, param: str | None, code: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """The error body OpenAI answers with HTTP 400."""
        return {
            "error": {
                "message": self.message,
                "type": "invalid_request_error",
                "param": self.param,
                "code": self.code,
            }
        }


def check_request(
    body: dict[str, Any], messages: list[dict[str, Any]], prompt_tokens: int, *, window: int
) -> None:
    """Raise `RequestRejectedError` where OpenAI would refuse the request.

    Args:
        body: The decoded request body.
        messages: Its messages (an empty list when it has none).
        prompt_tokens: The prompt's size, as the service counts it.
        window: The model's context window in tokens.
    """
    if body.get("stream"):
        msg = "This stub serves non-streaming requests only; set disable_streaming."
        raise RequestRejectedError(msg, param="stream", code=None)
    if not messages:
        msg = "Invalid 'messages': empty array."
        raise RequestRejectedError(msg, param="messages", code="empty_array")
    _check_tool_order(messages)
    _check_window(body, prompt_tokens, window)


def _check_tool_order(messages: list[dict[str, Any]]) -> None:
    """Raise `RequestRejectedError` where OpenAI would reject the tool-message order."""
    answerable: set[str] = set()  # calls of the nearest preceding assistant message
    pending: dict[str, int] = {}  # its calls not answered yet -> index of that message
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in answerable:
                msg = (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'."
                )
                raise RequestRejectedError(msg, param=f"messages.[{index}].role", code=None)
            pending.pop(str(call_id), None)
            continue
        _raise_unanswered(pending)
        calls = (message.get("tool_calls") or []) if role == "assistant" else []
        answerable = {str(call.get("id")) for call in calls}
        pending = {str(call.get("id")): index for call in calls}
    _raise_unanswered(pending)


def _raise_unanswered(pending: dict[str, int]) -> None:
    if pending:
        index = min(pending.values())
        msg = (
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(sorted(pending))}"
        )
        raise RequestRejectedError(msg, param=f"messages.[{index}].role", code=None)


def _check_window(body: dict[str, Any], prompt_tokens: int, window: int) -> None:
    completion = max_tokens(body)
    if prompt_tokens + completion <= window:
        return
    if completion:
        detail = (
            f"However, you requested {prompt_tokens + completion} tokens "
            f"({prompt_tokens} in the messages, {completion} in the completion)."
        )
    else:
        detail = f"However, your messages resulted in {prompt_tokens} tokens."
    msg = (
        f"This model's maximum context length is {window} tokens. {detail} "
        "Please reduce the length of the messages or completion."
    )
    raise RequestRejectedError(msg, param="messages", code="context_length_exceeded")


def max_tokens(body: dict[str, Any]) -> int:
    """The completion limit a request asks for (`max_completion_tokens` first); 0 if none."""
    value = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    return value if isinstance(value, int) else 0


def bad_json_body(message: str) -> dict[str, Any]:
    """OpenAI's error body for a request that is not JSON."""
    return RequestRejectedError(message, param=None, code=None).body()
