"""Memos of what is derived from messages: token counts by content, and by message object.

An agent re-sends its whole conversation on every model call, so without a memo each call
re-counts every message it keeps: the cost grows with the window's content, not with what
is new. A key holds the counted fields themselves (the content string, the tool calls'
JSON, the role, ...), never an id alone, so a message that keeps its id but changes its
content is a new key, and a hit is always the count a fresh count would give. Keys refer
to the message's own strings (no copies), and CPython caches a string's hash on the
string, so looking a message up again costs a tuple hash, not a pass over its text.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Iterable

    from langchain_core.messages import BaseMessage

DEFAULT_MAX_ENTRIES = 65_536
"""Enough for a 10,000-message history with room to spare; the oldest entries go first."""


class CountMemo:
    """Counts by key, at most `max_entries` of them, evicting the oldest first.

    Reads take no lock (a dict lookup is atomic); writes and evictions do, so threads that
    share one memo never see a half-written entry. An `OrderedDict`, so evicting the oldest
    is O(1): a plain dict's first key is found by skipping the holes its deletions leave,
    and a full memo (a long-lived process) paid that scan on every put.
    """

    __slots__ = ("_counts", "_lock", "max_entries")

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        """Start empty.

        Args:
            max_entries: How many counts to keep; at least 1.

        Raises:
            ValueError: If `max_entries` is below 1.
        """
        if max_entries < 1:
            msg = f"max_entries must be >= 1, got {max_entries}."
            raise ValueError(msg)
        self.max_entries = max_entries
        self._counts: OrderedDict[Hashable, int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> int | None:
        """The count stored under `key`, or None."""
        return self._counts.get(key)

    def put(self, key: Hashable, count: int) -> None:
        """Store `count` under `key`, evicting the oldest entries past the bound."""
        self.put_many(((key, count),))

    def put_many(self, items: Iterable[tuple[Hashable, int]]) -> None:
        """Store each `(key, count)`, then evict the oldest past the bound: one lock a batch."""
        counts = self._counts
        with self._lock:
            counts.update(items)
            # Insertion order is age: the first keys are the oldest.
            for _ in range(len(counts) - self.max_entries):
                counts.popitem(last=False)

    def clear(self) -> None:
        """Forget every count."""
        with self._lock:
            self._counts.clear()

    def __len__(self) -> int:
        """How many counts are stored."""
        return len(self._counts)


class SeenMessages:
    """Values derived from message objects (a count, a digest), found again by identity.

    Building a message's full key (its fields, its tool calls' JSON) costs microseconds;
    an agent's history re-sent on every call holds the same objects. So an object seen
    before, whose sent fields are still the very same objects, reuses what was derived
    from it. Assigning a new value to a field (``message.content = ...``), `model_copy`,
    and `add_messages` replacing a message by id are all seen; an edit inside a field's
    own object (appending to a content list in place) is not, as LangChain never makes
    one. Entries go when their message is garbage-collected.
    """

    __slots__ = ("_by_id", "_lock")

    def __init__(self) -> None:
        """Start empty."""
        self._by_id: dict[int, tuple[weakref.ref[BaseMessage], tuple[object, ...], dict[Any, Any]]]
        self._by_id = {}
        # Re-entrant: a weakref callback (`_forget`) can run inside `put` on this very
        # thread, when creating the new entry triggers a garbage collection.
        self._lock = threading.RLock()

    def get(self, message: BaseMessage, what: Hashable) -> Any:  # noqa: ANN401 - per `what`
        """What was stored as `what` for this very message, unchanged since; else None."""
        seen = self._by_id.get(id(message))
        if seen is None or seen[0]() is not message or seen[1] != sent_fields(message):
            return None
        return seen[2].get(what)

    def put(self, message: BaseMessage, what: Hashable, value: object) -> None:
        """Store `value` as `what` for `message` (as its fields are now)."""
        key, fields = id(message), sent_fields(message)
        with self._lock:
            seen = self._by_id.get(key)
            if seen is not None and seen[0]() is message and seen[1] == fields:
                seen[2][what] = value
                return
            try:
                ref = weakref.ref(message, functools.partial(self._forget, key))
            except TypeError:  # an object without weak references is not remembered
                return
            self._by_id[key] = (ref, fields, {what: value})

    def _forget(self, key: int, ref: weakref.ref[BaseMessage]) -> None:
        with self._lock:
            seen = self._by_id.get(key)
            if seen is not None and seen[0] is ref:
                del self._by_id[key]

    def __len__(self) -> int:
        """How many message objects are remembered."""
        return len(self._by_id)


_SENT_FIELDS = (
    "content",
    "type",
    "role",
    "name",
    "tool_calls",
    "invalid_tool_calls",
    "tool_call_id",
)


def sent_fields(message: BaseMessage) -> tuple[object, ...]:
    """The fields of `message` that a request sends (and a count or digest reads)."""
    # The field objects themselves: a tuple compares them by identity first (C speed),
    # and holding them costs nothing while the message lives (ids would be new ints).
    # pydantic keeps fields in the instance dict (getattr of a missing one is slow), and
    # map() keeps the loop in C: this runs for every message of every call.
    return tuple(map(vars(message).get, _SENT_FIELDS))


SEEN_MESSAGES = SeenMessages()
"""The process's one identity memo, shared by the token counts and the prefix digests."""


LONG_TEXT = 256
"""Texts of at least this many characters have their counts kept (`long_counts_kept`);
shorter ones cost less to count again than to look up."""
_LONG_TEXTS = CountMemo(8_192)
"""Counts of long texts, keyed by counter and text (the text's own string: no copy)."""


def long_counts_kept(
    texts: list[str], counter: Hashable, batch: Callable[[list[str]], list[int]]
) -> list[int]:
    """`batch(texts)`, with the counts of long texts kept and looked up by `counter`.

    A long text is often counted twice in one call (a tool result capped by the result
    cutter, then costed with its message by the history index): the second is a lookup.
    """
    try:
        hash(counter)
    except TypeError:  # a counter that cannot be hashed cannot key the memo
        return batch(texts)
    counts = [
        _LONG_TEXTS.get((counter, text)) if len(text) >= LONG_TEXT else None for text in texts
    ]
    missing = [i for i, count in enumerate(counts) if count is None]
    if not missing:
        return counts  # type: ignore[return-value]  # none is None
    fresh = batch([texts[i] for i in missing])
    for i, count in zip(missing, fresh, strict=True):
        counts[i] = count
    # One lock for the batch: a cold history brings thousands of long texts at once.
    _LONG_TEXTS.put_many(
        ((counter, texts[i]), count)
        for i, count in zip(missing, fresh, strict=True)
        if len(texts[i]) >= LONG_TEXT
    )
    return counts  # type: ignore[return-value]  # every None was filled above
