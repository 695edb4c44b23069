"""`RetrievalResult`: the candidate every source returns and MMR ranks.

A passage with its relevance score, the source (budget quota) it came from and, optionally,
its embedding; convertible to and from LangChain `Document`s, with our fields under
namespaced metadata keys (`contextkit_score`, `contextkit_source`).
"""

from __future__ import annotations

from collections.abc import Sequence  # noqa: TC003 - runtime: get_type_hints(RetrievalResult)
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
from langchain_core.documents import Document

from langchain_contextkit.errors import ConfigError

__all__ = ["SCORE_KEY", "SOURCE_KEY", "RetrievalResult"]

FloatArray: TypeAlias = npt.NDArray[np.floating[Any]]
"""An embedding matrix or vector as numpy holds it (float32 or float64)."""


# Metadata keys that `RetrievalResult.to_document` fills from the result's own fields:
# namespaced, so a loader's own "source" (a file path) and "score" stay as they were.
SCORE_KEY = "contextkit_score"
SOURCE_KEY = "contextkit_source"
_LOADER_SOURCE_KEY = "source"
_LOADER_SCORE_KEY = "score"


@dataclass(frozen=True, slots=True, eq=False)
class RetrievalResult:
    """One retrieved passage with its relevance score and, optionally, its embedding.

    Attributes:
        content: The passage text.
        score: Relevance to the query; higher is more relevant.
        source: Where the passage came from (a retriever name, a file, a URL...).
        embedding: The passage's embedding vector, used by `mmr_select` for diversity.
            Never copied into `Document` metadata.
        metadata: Any other data about the passage.
    """

    content: str
    score: float
    source: str
    embedding: Sequence[float] | FloatArray | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        """Compare field by field, embeddings by value.

        The generated dataclass `__eq__` would compare numpy embeddings with `==`, which
        is element-wise and raises on `bool()`; comparing vector values is what callers
        mean.

        Args:
            other: The object to compare with.

        Returns:
            Whether both are `RetrievalResult`s with equal fields, or `NotImplemented`
            for other types.
        """
        if not isinstance(other, RetrievalResult):
            return NotImplemented
        return (
            self.content == other.content
            and self.score == other.score
            and self.source == other.source
            and self.metadata == other.metadata
            and _same_embedding(self.embedding, other.embedding)
        )

    # Results are mutable through `metadata` and compared by value: not hashable.
    __hash__ = None  # type: ignore[assignment]

    def to_document(self) -> Document:
        """Convert to a LangChain `Document`.

        The embedding is deliberately left out: a vector of a thousand floats in the
        metadata would flood every trace and log that prints the document.

        Returns:
            A `Document` whose `page_content` is `content` and whose metadata is a copy of
            `metadata` (a loader's `"source"` path included, untouched) plus
            ``"contextkit_score"`` and ``"contextkit_source"``.
        """
        metadata = dict(self.metadata)
        metadata[SCORE_KEY] = self.score
        metadata[SOURCE_KEY] = self.source
        return Document(page_content=self.content, metadata=metadata)

    @classmethod
    def from_document(
        cls,
        doc: Document,
        *,
        source: str | None = None,
        score: float | None = None,
        embedding: Sequence[float] | FloatArray | None = None,
    ) -> RetrievalResult:
        """Build a result from a LangChain `Document`.

        `RetrievalResult.from_document(r.to_document(), embedding=r.embedding)` gives back
        a result equal to `r`.

        Args:
            doc: The document to convert.
            source: Source to use; defaults to ``doc.metadata["contextkit_source"]``, else
                ``doc.metadata["source"]``.
            score: Score to use; defaults to ``doc.metadata["contextkit_score"]``, else
                ``doc.metadata["score"]``, else 0.0.
            embedding: The document's embedding, if known.

        Returns:
            A result whose metadata is the document's metadata without our two keys (a
            loader's `"source"` and `"score"` are kept as they were).

        Raises:
            ConfigError: If no source is given and the metadata has none, if the source is
                not a string, or if the score is not a number.
        """
        if source is None:
            source = doc.metadata.get(SOURCE_KEY, doc.metadata.get(_LOADER_SOURCE_KEY))
            if source is None:
                msg = (
                    "cannot build a RetrievalResult: pass source=... or put a 'source' "
                    "key in the document's metadata"
                )
                raise ConfigError(msg)
        if not isinstance(source, str):
            msg = f"source must be a string, got {type(source).__name__}: {source!r}"
            raise ConfigError(msg)
        raw_score = (
            doc.metadata.get(SCORE_KEY, doc.metadata.get(_LOADER_SCORE_KEY, 0.0))
            if score is None
            else score
        )
        try:
            final_score = float(raw_score)
        except (TypeError, ValueError):
            msg = f"score must be a number, got {type(raw_score).__name__}: {raw_score!r}"
            raise ConfigError(msg) from None
        metadata = {
            key: value for key, value in doc.metadata.items() if key not in {SCORE_KEY, SOURCE_KEY}
        }
        return cls(
            content=doc.page_content,
            score=final_score,
            source=source,
            embedding=embedding,
            metadata=metadata,
        )


def _same_embedding(
    left: Sequence[float] | FloatArray | None, right: Sequence[float] | FloatArray | None
) -> bool:
    """Tell whether two embeddings hold the same vector (both `None` counts as same)."""
    if left is right:
        return True
    if left is None or right is None:
        return False
    return bool(np.array_equal(np.asarray(left), np.asarray(right)))
