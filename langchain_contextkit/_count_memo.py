"""Deprecated home of the message memo: the names `compaction` still imports.

The one per-message cache is `_message_cache`; this module goes once `_recap_grid`
reads it directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_contextkit._message_cache import LONG_TEXT, MESSAGE_CACHE
from langchain_contextkit._message_parts import message_key

if TYPE_CHECKING:
    from collections.abc import Hashable

    from langchain_core.messages import BaseMessage

__all__ = ["LONG_TEXT", "SEEN_MESSAGES"]


class _ByContent:
    """`MESSAGE_CACHE` read and written by message (its content key)."""

    def get(self, message: BaseMessage, what: Hashable) -> Any:  # noqa: ANN401 - per `what`
        return MESSAGE_CACHE.get(message_key(message), what)

    def put(self, message: BaseMessage, what: Hashable, value: object) -> None:
        MESSAGE_CACHE.put_many(((message_key(message), what, value),))


SEEN_MESSAGES = _ByContent()
