"""A bounded, thread-safe memo of token counts, keyed by exactly what was counted.

An agent re-sends its whole conversation on every model call, so without a memo each call
re-counts every message it keeps: the cost grows with the window's content, not with what
is new. A key holds the counted fields themselves (the content string, the tool calls'
JSON, the role, ...), never an id alone, so a message that keeps its id but changes its
content is a new key, and a hit is always the count a fresh count would give. Keys refer
to the message's own strings (no copies), and CPython caches a string's hash on the
string, so looking a message up again costs a tuple hash, not a pass over its text.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Hashable

DEFAULT_MAX_ENTRIES = 65_536
"""Enough for a 10,000-message history with room to spare; the oldest entries go first."""


class CountMemo:
    """Counts by key, at most `max_entries` of them, evicting the oldest first.

    Reads take no lock (a dict lookup is atomic); writes and evictions do, so threads that
    share one memo never see a half-written entry.
    """

    __slots__ = ("_counts", "_lock", "hits", "max_entries", "misses")

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
        self._counts: dict[Hashable, int] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> int | None:
        """The count stored under `key`, or None."""
        count = self._counts.get(key)
        if count is None:
            self.misses += 1
        else:
            self.hits += 1
        return count

    def put(self, key: Hashable, count: int) -> None:
        """Store `count` under `key`, evicting the oldest entries past the bound."""
        with self._lock:
            self._counts[key] = count
            excess = len(self._counts) - self.max_entries
            if excess > 0:
                # Insertion order is age: the first keys are the oldest.
                for old in [k for k, _ in zip(self._counts, range(excess), strict=False)]:
                    del self._counts[old]

    def clear(self) -> None:
        """Forget every count (and the hit and miss tallies)."""
        with self._lock:
            self._counts.clear()
            self.hits = self.misses = 0

    def __len__(self) -> int:
        """How many counts are stored."""
        return len(self._counts)
