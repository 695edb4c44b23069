"""`ContextReport`: what a build produced and why, one ledger line per source.

`str(report)` renders the ledger as a table; `as_dict()` gives the figures for JSON and
callbacks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_contextkit.retrieval.result import RetrievalResult

__all__ = ["ContextReport", "SourceReport"]


@dataclass(frozen=True, slots=True)
class SourceReport:
    """One source's line of the ledger."""

    name: str
    quota: int
    """Round-one quota: the source's ratio of the budget."""
    borrowed: int
    used: int
    """Tokens of the source's section as allocated (heading included)."""
    fetched: int
    merged: int
    """Byte-identical duplicates merged before MMR."""
    dropped_by_mmr: int
    """Near-duplicates dropped by MMR."""
    dropped_for_budget: int
    kept: int
    error: str | None
    """`Type: message` of the exception the source raised, if it failed."""
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        """The figures as a JSON-friendly dict."""
        return {field: getattr(self, field) for field in self.__slots__}


@dataclass(frozen=True, slots=True)
class ContextReport:
    """What a build produced and why: the text and every source's ledger line.

    `str(report)` renders the ledger as a table.
    """

    text: str
    """The built text (the flat prompt from `build_report`, the block from `build_block_report`)."""

    budget: int
    """Tokens the dynamic block was allowed."""

    block_tokens: int
    """Tokens the dynamic block took (measured on the rendered text)."""

    sources: tuple[SourceReport, ...]

    items: tuple[RetrievalResult, ...] = field(default=(), hash=False)
    """The kept candidates, in layout order (embeddings included; not in `as_dict`;
    results are unhashable, so the report's hash leaves them out)."""

    @property
    def failures(self) -> dict[str, str]:
        """Sources that raised, with the error."""
        return {s.name: s.error for s in self.sources if s.error}

    def as_dict(self) -> dict[str, Any]:
        """The figures (not the text) as a JSON-friendly dict, as sent to callbacks."""
        return {
            "budget": self.budget,
            "block_tokens": self.block_tokens,
            "sources": [s.as_dict() for s in self.sources],
        }

    def __str__(self) -> str:
        """Render the ledger as a fixed-width table."""
        header = (
            f"{'source':10} {'quota':>7} {'borrow':>7} {'used':>7} {'fetched':>8} "
            f"{'merged':>7} {'mmr':>5} {'budget':>7} {'kept':>5}  note"
        )
        lines = [header, "-" * len(header)]
        for s in self.sources:
            note = f"FAILED {s.error}" if s.error else ""
            lines.append(
                f"{s.name:10} {s.quota:7} {s.borrowed:7} {s.used:7} {s.fetched:8} "
                f"{s.merged:7} {s.dropped_by_mmr:5} {s.dropped_for_budget:7} {s.kept:5}  "
                f"{note}".rstrip()
            )
        lines.append(f"block: {self.block_tokens} of {self.budget} tokens")
        return "\n".join(lines)
