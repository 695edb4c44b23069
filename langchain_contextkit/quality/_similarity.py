"""Redundancy between kept items: cosine of embeddings, else token-shingle Jaccard.

Pure functions over `RetrievalResult`s; numpy only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_contextkit.retrieval import FloatArray, RetrievalResult

__all__ = ["SHINGLE_SIZE", "Redundancy", "redundancy", "shingles"]

SHINGLE_SIZE = 3
"""Tokens per shingle of the text similarity."""

# A CJK character is a token of its own (those scripts put no spaces between words);
# anything else is a run of letters and digits.
_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\W_]+")


@dataclass(frozen=True, slots=True)
class Redundancy:
    """The most similar pair of kept items, and how similarity was measured."""

    value: float
    """The largest pairwise similarity (0.0 with fewer than two items)."""
    method: Literal["cosine", "shingles"]
    """``"cosine"`` of embeddings (every item had one) or ``"shingles"`` (Jaccard)."""
    pair: tuple[int, int] | None
    """Positions of the most similar pair (None with fewer than two items)."""


def shingles(text: str, size: int = SHINGLE_SIZE) -> frozenset[tuple[str, ...]]:
    """The set of `size`-token shingles of `text` (lower-cased; one shingle if shorter)."""
    tokens = _TOKEN.findall(text.lower())
    if len(tokens) <= size:
        return frozenset([tuple(tokens)]) if tokens else frozenset()
    return frozenset(tuple(tokens[i : i + size]) for i in range(len(tokens) - size + 1))


def _jaccard(a: frozenset[tuple[str, ...]], b: frozenset[tuple[str, ...]]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def _embeddings(items: Sequence[RetrievalResult]) -> FloatArray | None:
    """The items' embeddings as rows of unit vectors, when every item has one of one size."""
    vectors = [item.embedding for item in items]
    if any(v is None for v in vectors):
        return None
    rows = [np.asarray(v, dtype=float).ravel() for v in vectors]
    if len({row.size for row in rows}) != 1 or rows[0].size == 0:
        return None
    matrix: FloatArray = np.vstack(rows)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: FloatArray = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return unit


def redundancy(items: Sequence[RetrievalResult]) -> Redundancy:
    """The largest pairwise similarity between `items`.

    Cosine of the embeddings when every item carries one (of one size), else the
    Jaccard similarity of their token shingles (`shingles`).

    Example:
        ```python
        from langchain_contextkit import RetrievalResult
        from langchain_contextkit.quality._similarity import redundancy

        items = [
            RetrievalResult("Refunds within 30 days.", 0.9, "rag", embedding=[1.0, 0.0]),
            RetrievalResult("Refunds are allowed for 30 days.", 0.8, "rag", embedding=[1.0, 0.1]),
        ]
        found = redundancy(items)
        print(found.method, round(found.value, 3), found.pair)
        # cosine 0.995 (0, 1)
        ```
    """
    if len(items) < 2:  # noqa: PLR2004 - a pair
        embedded = bool(items) and _embeddings(items) is not None
        return Redundancy(0.0, "cosine" if embedded else "shingles", None)
    unit = _embeddings(items)
    if unit is not None:
        gram = unit @ unit.T
        np.fill_diagonal(gram, -np.inf)
        i, j = divmod(int(np.argmax(gram)), len(items))
        return Redundancy(float(gram[i, j]), "cosine", (min(i, j), max(i, j)))
    sets = [shingles(item.content) for item in items]
    best, pair = -1.0, (0, 1)
    for i, j in combinations(range(len(items)), 2):
        value = _jaccard(sets[i], sets[j])
        if value > best:
            best, pair = value, (i, j)
    return Redundancy(best, "shingles", pair)
