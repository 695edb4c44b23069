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

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable

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
