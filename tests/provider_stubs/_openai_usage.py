"""How OpenAI counts a chat request's prompt tokens and the share its prompt cache served.

`request_tokens` lays the request out as one token sequence, counted the way OpenAI
documents for chat: the compact JSON of every tool schema first, then per message 3
framing tokens, the role, the content, the name (+1), each tool call's name, arguments
and id, and a tool message's `tool_call_id`; `REPLY_PRIMING` tokens are added for the
reply. `PrefixCache` gives the longest token prefix a request shares with any earlier
one, rounded down to `CACHE_STEP_TOKENS` steps and 0 below `CACHE_MIN_TOKENS`, as
OpenAI's prompt cache reports it.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from typing import TYPE_CHECKING, Any

from provider_stubs._script import content_text

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "CACHE_MIN_TOKENS",
    "CACHE_STEP_TOKENS",
    "REPLY_PRIMING",
    "PrefixCache",
    "request_tokens",
]

CACHE_MIN_TOKENS = 1024
"""OpenAI caches prompts from 1,024 tokens on ..."""

CACHE_STEP_TOKENS = 128
"""... and reports cache hits in 128-token steps."""

REPLY_PRIMING = 3
"""Tokens added to every prompt for priming the assistant's reply."""

# Markers that stand for OpenAI's per-message framing tokens: outside cl100k's vocabulary,
# so text can never imitate a message boundary.
_MESSAGE_START = (1 << 20, (1 << 20) + 1, (1 << 20) + 2)
_NAME_MARK = (1 << 20) + 3


def request_tokens(
    encode: Callable[[str], list[int]],
    tools: list[dict[str, Any]],
    messages: list[dict[str, Any]],
) -> list[int]:
    """The request as one token sequence: tools first, then messages, deterministically.

    Args:
        encode: The tokenizer (an encoding's `encode_ordinary`).
        tools: The request's tool schemas.
        messages: Its messages, as OpenAI dicts.

    Returns:
        The tokens, `REPLY_PRIMING` not included.
    """
    tokens: list[int] = []
    for schema in tools:
        tokens += encode(json.dumps(schema, ensure_ascii=False, separators=(",", ":")))
    for message in messages:
        tokens += _MESSAGE_START
        tokens += encode(str(message.get("role", "")))
        tokens += encode(content_text(message.get("content")))
        if message.get("name"):
            tokens += [*encode(str(message["name"])), _NAME_MARK]
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            tokens += encode(str(function.get("name", "")))
            tokens += encode(str(function.get("arguments", "")))
            tokens += encode(str(call.get("id", "")))
        if message.get("tool_call_id"):
            tokens += encode(str(message["tool_call_id"]))
    return tokens


class PrefixCache:
    """One stub's prompt cache: the token prefixes of the requests it accepted so far."""

    def __init__(self) -> None:
        """Start empty: nothing is cached before the first request."""
        self._seen_prefixes: set[bytes] = set()

    def cached_tokens(self, tokens: list[int]) -> int:
        """Longest prefix shared with an earlier accepted request, in whole 128-token steps.

        Each 128-token step of the prefix is keyed by a running hash of everything up to
        it, so a hit on step k means the first k steps all match one earlier request, and
        the longest hit is found in one pass instead of comparing every earlier request.
        `tokens` is remembered for the requests after it.
        """
        data = array("I", tokens)
        running = hashlib.blake2b(digest_size=16)
        keys: list[bytes] = []
        for start in range(0, len(data) - CACHE_STEP_TOKENS + 1, CACHE_STEP_TOKENS):
            running.update(data[start : start + CACHE_STEP_TOKENS].tobytes())
            keys.append(running.digest())
        shared = 0
        for key in keys:
            if key not in self._seen_prefixes:
                break
            shared += CACHE_STEP_TOKENS
        self._seen_prefixes.update(keys)
        return shared if shared >= CACHE_MIN_TOKENS else 0
