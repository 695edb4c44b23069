"""Recaps shared by every worker through a LangGraph store: each history summarised once.

A recap is a deterministic function of the messages it covers and the compactor's
settings, so it is kept by the content digest of those messages (the digest the
compactor's grid names each cut with) and written once for all workers: N workers (N
agents, processes or machines on one `BaseStore`) that meet the same history make its
recap once (a compactor given none keeps its own in memory).

Where it lives: namespace `RECAP_NAMESPACE` (``("contextkit", "recaps")``), key
``<settings>.<digest>`` (`recap_key`): the settings part names the compactor's
fidelity, language, instruction and summariser, so compactors set up differently never
read each other's recaps. The value is ``{"recap": str, "floor": str | None}``; anything
else read back is ignored (a store is shared, so its content is not trusted).

Size: one entry per compaction (a grid cut, the newest epoch of a cold start and what
it folded), each at most the recap's cap (a few kB). Entries expire after
`ttl_minutes` (default 7 days) on a store that supports TTL (`PostgresStore` with a
``ttl`` config); on one that does not (`InMemoryStore`), they stay until the namespace
is cleared. A failing store never fails a call: a lookup that raises is a miss, a write
that raises is skipped (both logged).

Example:
    ```python
    from langgraph.store.memory import InMemoryStore

    from langchain_contextkit.compaction.recap_store import RecapStore, SharedRecap

    shared = RecapStore(store=InMemoryStore())
    shared.save([("s1.800.ab12", SharedRecap("- User: Order 7 broke.", None))])
    print(shared.lookup(["s1.800.ab12", "s1.800.ffff"]))
    # {'s1.800.ab12': SharedRecap(recap='- User: Order 7 broke.', floor=None)}
    ```
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from langgraph.store.base import BaseStore, GetOp, PutOp

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = [
    "DEFAULT_RECAP_TTL_MINUTES",
    "RECAP_NAMESPACE",
    "RecapStore",
    "SharedRecap",
    "recap_key",
    "settings_tag",
]

logger = logging.getLogger(__name__)

RECAP_NAMESPACE: tuple[str, ...] = ("contextkit", "recaps")
"""Where recaps live in the store."""

DEFAULT_RECAP_TTL_MINUTES = 7 * 24 * 60.0
"""How long a recap is kept on a store that supports TTL (a week)."""

_MAX_TEXT = 1 << 20
"""A stored recap longer than this is not one of ours (1 MiB of text): ignored."""


class SharedRecap(NamedTuple):
    """A recap as stored: its text, and the extractive floor a model's recap carries."""

    recap: str
    floor: str | None


def recap_key(digest: str, settings: str = "") -> str:
    """The key of the recap of the messages named `digest`, whatever the cap it was made for."""
    return f"{settings}.{digest}" if settings else digest


def settings_tag(*parts: object) -> str:
    """A short, stable name for the settings a recap depends on (`recap_key`)."""
    text = "\x1f".join(repr(part) for part in parts)
    return hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


@dataclass(frozen=True, kw_only=True, slots=True)
class RecapStore:
    """Recaps by key in a LangGraph `BaseStore`, read and written in one batch each.

    Give one to `HistoryCompactor.compact_view(recaps=...)`; `ContextKitMiddleware`
    uses the agent's own store (`create_agent(store=...)`) by default.
    """

    store: BaseStore
    """The LangGraph store (`InMemoryStore`, `PostgresStore`, ...)."""

    namespace: tuple[str, ...] = RECAP_NAMESPACE
    """Where the recaps live in it."""

    ttl_minutes: float | None = DEFAULT_RECAP_TTL_MINUTES
    """How long a recap is kept, on a store that supports TTL (None: for ever)."""

    def lookup(self, keys: Sequence[str]) -> dict[str, SharedRecap]:
        """The recaps stored under `keys` (a miss is left out); {} when the store fails."""
        if not keys:
            return {}
        try:
            items = self.store.batch([GetOp(self.namespace, key) for key in keys])
        except Exception:
            logger.warning("recap store lookup failed; summarising instead", exc_info=True)
            return {}
        return _found(keys, items)

    async def alookup(self, keys: Sequence[str]) -> dict[str, SharedRecap]:
        """Async `lookup`."""
        if not keys:
            return {}
        try:
            items = await self.store.abatch([GetOp(self.namespace, key) for key in keys])
        except Exception:
            logger.warning("recap store lookup failed; summarising instead", exc_info=True)
            return {}
        return _found(keys, items)

    def save(self, entries: Iterable[tuple[str, SharedRecap]]) -> None:
        """Write `entries` (key, recap) in one batch; a failing store is logged, not raised."""
        ops = self._puts(entries)
        if not ops:
            return
        try:
            self.store.batch(ops)
        except Exception:
            logger.warning("recap store write failed; the recap is not shared", exc_info=True)

    async def asave(self, entries: Iterable[tuple[str, SharedRecap]]) -> None:
        """Async `save`."""
        ops = self._puts(entries)
        if not ops:
            return
        try:
            await self.store.abatch(ops)
        except Exception:
            logger.warning("recap store write failed; the recap is not shared", exc_info=True)

    def _puts(self, entries: Iterable[tuple[str, SharedRecap]]) -> list[PutOp]:
        ttl = self.ttl_minutes if self.store.supports_ttl else None
        return [
            PutOp(
                self.namespace,
                key,
                {"recap": shared.recap, "floor": shared.floor},
                index=False,  # looked up by key only: nothing to embed
                ttl=ttl,
            )
            for key, shared in dict(entries).items()
        ]


def _found(keys: Sequence[str], items: Sequence[Any]) -> dict[str, SharedRecap]:
    """The well-formed recaps among `items` (one per key, None for a miss)."""
    out: dict[str, SharedRecap] = {}
    for key, item in zip(keys, items, strict=False):
        value = getattr(item, "value", None)
        if not isinstance(value, dict):
            continue
        recap, floor = value.get("recap"), value.get("floor")
        if not isinstance(recap, str) or not recap.strip() or len(recap) > _MAX_TEXT:
            continue
        if floor is not None and (not isinstance(floor, str) or len(floor) > _MAX_TEXT):
            continue
        out[key] = SharedRecap(recap, floor)
    return out
