"""A bounded, thread-safe memo of recaps by the digest of what they cover."""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


class RecapMemo:
    """Recaps by the digest of what they cover: bounded, shared across threads."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._items: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self.version = 0
        """Bumped by every `put` (which may also evict): what is known may have changed."""

    def get(self, digest: str) -> str | None:
        # A miss (the common case: every unit start is tried) needs no lock: a dict read
        # is atomic. A hit is moved to the end under the lock, as the most recent.
        if digest not in self._items:
            return None
        with self._lock:
            text = self._items.get(digest)
            if text is not None:
                self._items.move_to_end(digest)
            return text

    def __len__(self) -> int:
        return len(self._items)

    @property
    def known(self) -> Mapping[str, str]:
        """The recaps by digest, for membership tests (read without the lock)."""
        return self._items

    def put(self, digest: str, text: str) -> None:
        with self._lock:
            self.version += 1
            self._items[digest] = text
            self._items.move_to_end(digest)
            while len(self._items) > self._size:
                self._items.popitem(last=False)


@dataclass(frozen=True, slots=True)
class _Scan:
    version: int  # the memo's version when it ran
    base: int
    end: int  # the last unit start it read
    digest: str  # that start's prefix digest then: equal now, the same history up to it
    found: int | None  # the newest unit start read whose recap is known


class NewestKnown:
    """The newest unit start of a history whose recap a `RecapMemo` holds.

    A caller that keeps no state re-sends its whole list; the recap made for its latest
    cut is found by trying every unit start, newest first. Each thread remembers where
    its last search ended: while the memo is unchanged and the history still has the same
    prefix up to there (its prefix digest is the same), only the unit starts after it are
    tried, so a steady call tries its new ones, not the whole history's.
    """

    def __init__(self, memo: RecapMemo) -> None:
        self._memo = memo
        self._last = threading.local()

    def find(self, starts: Sequence[int], base: int, digests: Sequence[str]) -> int | None:
        """The newest of `starts` after `base` whose prefix's recap is known, else None."""
        first = bisect.bisect_right(starts, base)
        if first >= len(starts) or not self._memo:
            return None
        version = self._memo.version
        last: _Scan | None = getattr(self._last, "scan", None)
        found = None
        if (
            last is not None
            and (last.version, last.base) == (version, base)
            and last.end < len(digests)
            and digests[last.end] == last.digest
        ):
            first, found = bisect.bisect_right(starts, last.end, lo=first), last.found
        newest_first = starts[first:][::-1]
        # The search runs in C (most are misses): the digest first, then its start.
        known = self._memo.known
        digest = next(filter(known.__contains__, map(digests.__getitem__, newest_first)), None)
        if digest is not None:
            found = next(c for c in newest_first if digests[c] == digest)
        end = starts[-1]
        self._last.scan = _Scan(version, base, end, digests[end], found)
        return found
