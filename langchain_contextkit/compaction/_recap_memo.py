"""A bounded, thread-safe memo of recaps by the digest of what they cover."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping


class RecapMemo:
    """Recaps by the digest of what they cover: bounded, shared across threads."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._items: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

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
            self._items[digest] = text
            self._items.move_to_end(digest)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
