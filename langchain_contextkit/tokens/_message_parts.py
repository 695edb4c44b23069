"""What a message's token count reads of it: its cache key and the texts to count.

`tokens.message_token_costs` keys the one message cache (`_message_cache`) by every
counted field (`message_key`) and counts a missing message from its parts
(`message_parts`). A cold history needs both
for every message, so the parts are read from the key where the key already holds them:
each tool call's arguments are JSON-encoded once per call, not once for the key and again
for the parts (the JSON was most of a tool-calling message's cost).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from langchain_contextkit.tokens._message_cache import text_counts

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from langchain_core.messages import BaseMessage

    TokenCounter = Callable[[str], int]

# OpenAI's documented chat accounting: every message is wrapped in
# <|start|>{role}<|message|>...<|end|> (3 tokens plus the role), a name costs one more
# token, and every reply is primed with <|start|>assistant<|message|> (3 tokens).
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}

Call = tuple[Any, str, Any]
"""A tool call as the key holds it: its name, its arguments' JSON, its id (as given)."""
MessageKey = tuple[Any, ...]
"""`message_key`'s: type, role, content, name, valid calls, invalid calls, tool_call_id."""


def message_key(message: BaseMessage) -> MessageKey:
    """Everything `message_parts` reads of a message, as a hashable key.

    Its fifth and sixth fields are the valid and invalid calls (`Call`s), which
    `message_parts` takes back instead of encoding the arguments again.
    """
    fields = vars(message)  # pydantic keeps fields here; getattr of a missing one is slow
    content = fields["content"]
    valid, invalid = fields.get("tool_calls"), fields.get("invalid_tool_calls")
    return (
        fields["type"],
        fields.get("role"),
        content
        if isinstance(content, str)
        else tuple(b if isinstance(b, str) else as_text(b) for b in content),
        fields.get("name"),
        _calls_key(valid) if valid else (),  # (most messages call nothing)
        _calls_key(invalid) if invalid else (),
        fields.get("tool_call_id"),
    )


def _calls_key(calls: Sequence[Mapping[str, Any]]) -> tuple[Call, ...]:
    return tuple(
        (call.get("name"), as_arguments(call.get("args")), call.get("id")) for call in calls
    )


def count_parts(fixed: int, texts: list[str], counter: TokenCounter) -> int:
    """A message's tokens from its parts, one counter call per text."""
    return fixed + sum(counter(text) for text in texts)


def message_parts(
    message: BaseMessage,
    image_tokens: int,
    counter: TokenCounter,
    key: MessageKey | None = None,
) -> tuple[int, list[str]]:
    """A message's tokens as a fixed part plus the texts the counter must measure.

    Read from `key` (`message_key(message)`, built here when not given), which holds every
    field counted: only a content of blocks is read from the message again.
    """
    kind: str
    kind, role, content, name, valid, invalid, tool_call_id = (
        message_key(message) if key is None else key
    )
    fixed = TOKENS_PER_MESSAGE + _role_tokens(role or ROLES.get(kind, kind), counter)
    if isinstance(content, str):
        texts = [content]
    else:
        fixed, texts = _block_parts(
            vars(message)["content"], (*valid, *invalid), fixed, image_tokens
        )
    if name and kind != "tool":  # a tool message's name is not sent
        texts.append(name)
        fixed += TOKENS_PER_NAME
    for call_name, arguments, call_id in (*valid, *invalid):
        texts += (call_name or "", arguments, call_id or "")
    if isinstance(tool_call_id, str):
        texts.append(tool_call_id)
    return fixed, texts


def _block_parts(
    blocks: list[str | dict[str, Any]], calls: tuple[Call, ...], fixed: int, image_tokens: int
) -> tuple[int, list[str]]:
    """`fixed` plus the images' cost, and the texts of a content of blocks."""
    call_ids = {call_id for _, _, call_id in calls if call_id}
    texts: list[str] = []
    for block in blocks:
        if isinstance(block, str):
            texts.append(block)
            continue
        kind = block.get("type")
        if kind in {"image", "image_url"} or (
            kind == "file" and block.get("mime_type", "").startswith("image/")
        ):
            fixed += image_tokens
        elif not (kind in {"tool_use", "tool_call"} and block.get("id") in call_ids):
            # (a tool_use block repeating one of message.tool_calls is counted once, there)
            texts.append(_block_text(block))
    return fixed, texts


def _role_tokens(role: str, counter: TokenCounter) -> int:
    """Tokens of a role name, counted once per counter (a handful of names recur)."""
    return text_counts([role], counter, lambda texts: list(map(counter, texts)), shortest=0)[0]


def _block_text(block: Mapping[str, Any]) -> str:
    for key in ("text", "reasoning", "thinking"):
        value = block.get(key)
        if isinstance(value, str):
            return value
    return as_text(block)


def as_arguments(value: object) -> str:
    """Tool-call arguments as chat clients send them: JSON with the default separators.

    langchain-openai sends `json.dumps(args, ensure_ascii=False)` (", " and ": "); compact
    JSON would undercount every call by a token or more per argument.
    """
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return _ARGUMENTS(value)


def as_text(value: object) -> str:
    """A block or schema as compact JSON (a string as it is, None as "")."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return _COMPACT(value)


# `json.dumps` with any option builds a new encoder per call (most of a small call's
# cost); these are the very encoders it would build, made once (they keep no state).
_ARGUMENTS = json.JSONEncoder(ensure_ascii=False, default=str).encode
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=str).encode
