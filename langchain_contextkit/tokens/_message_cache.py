"""The one cache of what is derived from a message's content: its cost per counter, its digest.

An agent re-sends its whole conversation on every model call, so each call would re-count
every message it keeps. This is the process's only per-message cache: every count of a
message (and the recap grid's digest) is looked up here, keyed by the message's content
(`_message_parts.message_key`: its type, role, content, name, tool calls and the id of
the call it answers), never by object or id. So it serves a caller whose messages carry
no ids and arrive as new objects every call (an HTTP caller converting OpenAI dicts) as
well as one that keeps its objects; a message whose content changes is a new key, and a
hit is always what a fresh count would give. Texts are cached the same way, keyed by the
text itself (`text_counts`): role names, and long texts counted twice in one call (a tool
result capped, then costed with its message).

Bounded (the oldest keys go first) and safe for LangGraph's thread pool: reads are plain
dict lookups, writes take one lock.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

    from langchain_core.messages import BaseMessage

    TokenCounter = Callable[[str], int]


MAX_ENTRIES = 65_536
"""Enough for a 10,000-message history with room to spare; the oldest keys go first."""

LONG_TEXT = 256
"""Texts of at least this many characters have their counts kept (`text_counts`);
shorter ones cost less to count again than to look up."""


class MessageCache:
    """Values by content key, then by what they are (a counter's scale, "digest", ...)."""

    __slots__ = ("_entries", "_lock", "max_entries")

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        """Start empty, holding at most `max_entries` keys."""
        self.max_entries = max_entries
        self._entries: OrderedDict[Hashable, dict[Hashable, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, what: Hashable) -> Any:  # noqa: ANN401 - per `what`
        """The value stored as `what` for `key`, or None."""
        entry = self._entries.get(key)
        return None if entry is None else entry.get(what)

    def put_many(self, items: Iterable[tuple[Hashable, Hashable, object]]) -> None:
        """Store each `(key, what, value)`, then evict the oldest keys past the bound."""
        entries = self._entries
        with self._lock:
            for key, what, value in items:
                entry = entries.get(key)
                if entry is None:
                    entries[key] = {what: value}
                else:
                    entry[what] = value
            for _ in range(len(entries) - self.max_entries):
                entries.popitem(last=False)

    def __len__(self) -> int:
        """How many keys are held."""
        return len(self._entries)


MESSAGE_CACHE = MessageCache()
"""The process's one per-message cache."""


def text_counts(
    texts: list[str],
    counter: Hashable,
    batch: Callable[[list[str]], list[int]],
    *,
    shortest: int = LONG_TEXT,
) -> list[int]:
    """`batch(texts)`, with the counts of texts of at least `shortest` characters cached.

    A counter that cannot be hashed cannot key the cache: it counts everything.
    """
    try:
        hash(counter)
    except TypeError:
        return batch(texts)
    get = MESSAGE_CACHE.get
    counts = [get(text, counter) if len(text) >= shortest else None for text in texts]
    missing = [i for i, count in enumerate(counts) if count is None]
    if not missing:
        return counts  # type: ignore[return-value]  # none is None
    fresh = batch([texts[i] for i in missing])
    for i, count in zip(missing, fresh, strict=True):
        counts[i] = count
    MESSAGE_CACHE.put_many(
        (texts[i], counter, count)
        for i, count in zip(missing, fresh, strict=True)
        if len(texts[i]) >= shortest
    )
    return counts  # type: ignore[return-value]  # every None was filled above


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
