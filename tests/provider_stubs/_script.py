"""What a scripted model is asked and answers: the vocabulary every provider stub shares.

A stub hands its `Responder` the request's `Kind` (who it thinks is calling) and the
messages as OpenAI dicts; the responder returns a `Reply` (text, `ToolCall`s, or both),
which each stub serialises in its own provider's shape.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["SUMMARY_REQUEST", "Kind", "Reply", "Responder", "ToolCall", "content_text"]

Kind = Literal["agent", "summary", "other"]
"""Who the stub thinks is calling (see `openai_stub`): the agent, a summariser, or other."""

SUMMARY_REQUEST = re.compile(r"summar|recap|摘要|总结|概括", re.IGNORECASE)
"""Words (English or Chinese) of a request that asks for a summary."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of a scripted reply."""

    name: str
    """The tool's name."""

    args: dict[str, Any]
    """Its arguments (sent as compact JSON)."""

    id: str
    """The call id, which the tool message answering it must quote."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What the scripted model answers: text, tool calls, or both."""

    text: str = ""
    """The assistant's text (sent as `null` content when empty)."""

    tool_calls: tuple[ToolCall, ...] = ()
    """Tool calls, made in parallel when there are several."""


Responder = Callable[[Kind, list[dict[str, Any]]], Reply]
"""The scripted model: the request's kind and its messages (OpenAI dicts) in, a reply out."""


def content_text(content: object) -> str:
    """The text of an OpenAI message content: a string, a list of parts, or null.

    Args:
        content: A message's ``content`` as sent.

    Returns:
        The text parts joined (other parts as their JSON); "" for null.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if part.get("type") == "text" else json.dumps(part)
            for part in content
            if isinstance(part, dict)
        )
    return ""
