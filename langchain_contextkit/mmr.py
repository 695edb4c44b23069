"""Maximal marginal relevance (MMR) selection of retrieval results.

Retrieval often returns several passages that say the same thing. Sending all of them to
the model wastes context tokens. `mmr_select` picks a subset that is both relevant (high
`score`) and diverse (low cosine similarity to what was already picked), and drops
near-duplicates outright:

```python
from langchain_contextkit.mmr import RetrievalResult, mmr_select

candidates = [
    RetrievalResult(content="Cats are great pets.", score=0.9, source="rag", embedding=[1.0, 0.0]),
    RetrievalResult(
        content="Cats make wonderful pets.", score=0.8, source="rag", embedding=[0.99, 0.01]
    ),
    RetrievalResult(
        content="The Eiffel Tower is in Paris.", score=0.6, source="rag", embedding=[0.0, 1.0]
    ),
]
selected = mmr_select(candidates, top_k=2, lambda_=0.7)
for r in selected:
    print(r.content)
# Cats are great pets.
# The Eiffel Tower is in Paris.
```

The selection is a *lazy greedy* variant of the textbook incremental algorithm and picks
exactly the same items; see `mmr_select` for how it avoids most similarity computations.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Iterator, Sequence  # noqa: TC003 - runtime: get_type_hints(RetrievalResult)
from dataclasses import dataclass, field
from typing import Any, SupportsIndex, TypeAlias

import numpy as np
import numpy.typing as npt
from langchain_core.documents import Document

from langchain_contextkit.errors import ConfigError

# Defined at runtime (not under TYPE_CHECKING) so that `typing.get_type_hints` works on
# `RetrievalResult`, as pydantic and schema generators need.
FloatArray: TypeAlias = npt.NDArray[np.floating[Any]]
IndexArray: TypeAlias = npt.NDArray[np.intp]

__all__ = ["MMRRanking", "RetrievalResult", "mmr_select"]

# Metadata keys that `RetrievalResult.to_document` fills from the result's own fields.
_SCORE_KEY = "score"
_SOURCE_KEY = "source"

# Lazy-greedy tuning. A refresh block larger than this fraction of all candidates is
# computed against the whole embedding matrix: gathering that many rows into a temporary
# costs more memory traffic than multiplying the rows we do not need.
_FULL_MATRIX_FRACTION = 0.3
# Block sizes: picks are made from a block of the candidates with the highest bounds for
# as long as the block's best score beats every bound outside it. A couple of candidates
# per remaining pick usually last for many picks; the floor keeps the block useful near
# the end, the cap keeps each pick's matrix-vector product over the block small.
# (Measured on the benchmark grid; within a few percent of the best settings tried.)
_BLOCK_PER_PICK = 2
_MIN_BLOCK = 64
_MAX_BLOCK = 512
# An open-ended `MMRRanking` sizes its first blocks for this many picks.
_EXPECTED_PICKS = 16
# Refreshes against at most this many picks use matrix-vector products (see `_update`).
_GEMV_MAX_PICKS = 3
# Embeddings stacked into a matrix: one row per candidate.
_MATRIX_NDIM = 2


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
            `metadata` plus `"score"` and `"source"` (these two override same-named keys
            of `metadata`).
        """
        metadata = dict(self.metadata)
        metadata[_SCORE_KEY] = self.score
        metadata[_SOURCE_KEY] = self.source
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
        a result equal to `r` (unless `r.metadata` itself held `"score"` or `"source"`).

        Args:
            doc: The document to convert.
            source: Source to use; defaults to `doc.metadata["source"]`.
            score: Score to use; defaults to `doc.metadata["score"]`, else 0.0.
            embedding: The document's embedding, if known.

        Returns:
            A result whose metadata is the document's metadata without `"score"` and
            `"source"`.

        Raises:
            ConfigError: If no source is given and the metadata has none, if the source is
                not a string, or if the score is not a number.
        """
        if source is None:
            source = doc.metadata.get(_SOURCE_KEY)
            if source is None:
                msg = (
                    "cannot build a RetrievalResult: pass source=... or put a 'source' "
                    "key in the document's metadata"
                )
                raise ConfigError(msg)
        if not isinstance(source, str):
            msg = f"source must be a string, got {type(source).__name__}: {source!r}"
            raise ConfigError(msg)
        raw_score = doc.metadata.get(_SCORE_KEY, 0.0) if score is None else score
        try:
            final_score = float(raw_score)
        except (TypeError, ValueError):
            msg = f"score must be a number, got {type(raw_score).__name__}: {raw_score!r}"
            raise ConfigError(msg) from None
        metadata = {
            key: value
            for key, value in doc.metadata.items()
            if key not in {_SCORE_KEY, _SOURCE_KEY}
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


def mmr_select(
    candidates: Sequence[RetrievalResult],
    *,
    top_k: int | None = None,
    lambda_: float = 0.7,
    dedup_threshold: float = 0.95,
) -> list[RetrievalResult]:
    """Pick relevant but mutually diverse results by maximal marginal relevance.

    Steps:

    1. Candidates with byte-identical `content` are merged, keeping the highest score
       (ties: the earliest).
    2. The first pick is the highest score (ties: the earliest).
    3. Every later pick maximises `lambda_ * score - (1 - lambda_) * max_sim`, where
       `max_sim` is the largest cosine similarity to an already picked result. Ties go
       to the earliest candidate.
    4. A candidate whose similarity to any picked result is `>= dedup_threshold` is
       dropped, never picked; a threshold above 1 disables dropping.

    A candidate without an embedding, or with an all-zero one, has similarity 0 to
    everything. Embeddings keep their dtype when float32 or float64 numpy arrays; lists
    become float64.

    ```python
    from langchain_contextkit.mmr import RetrievalResult, mmr_select

    candidates = [
        RetrievalResult(
            content="Cats are great pets.", score=0.9, source="rag", embedding=[1.0, 0.0]
        ),
        RetrievalResult(
            content="Cats make wonderful pets.",
            score=0.8,
            source="rag",
            embedding=[0.99, 0.01],
        ),
        RetrievalResult(
            content="The Eiffel Tower is in Paris.",
            score=0.6,
            source="rag",
            embedding=[0.0, 1.0],
        ),
    ]
    selected = mmr_select(candidates, top_k=2, lambda_=0.7)
    for r in selected:
        print(r.content)
    # Cats are great pets.
    # The Eiffel Tower is in Paris.
    ```

    How it stays fast: the textbook algorithm compares every remaining candidate with
    each new pick. Here a candidate's running `max_sim` covers only the picks it has
    been compared with, so it is a lower bound, and the MMR score computed from it is an
    upper bound that can only fall. A candidate is compared with new picks only when its
    bound could still beat the best exact score, in vectorised batches. Picks come from a
    block of the highest bounds, using the block's small Gram matrix, for as long as the
    block's best score beats every bound outside it. The picks are exactly those of the
    textbook algorithm, ties included.

    Embeddings of candidates merged away in step 1 are not inspected.

    Args:
        candidates: The results to choose from.
        top_k: Maximum number of results to return; `None` means no limit (only merging
            and near-duplicate dropping remove results).
        lambda_: Weight of relevance against diversity, in [0, 1]; 1 ranks by score alone
            (near-duplicates are still dropped).
        dedup_threshold: Cosine similarity at or above which a candidate counts as a
            near-duplicate of a picked result and is dropped.

    Returns:
        The chosen candidate objects themselves (not copies), in pick order. Empty when
        `candidates` is empty or `top_k` is 0 (then `candidates` are not inspected).

    Raises:
        ConfigError: If `lambda_` is outside [0, 1] or NaN, `top_k` is negative or not an
            integer, `dedup_threshold` is NaN, a score is not a finite number, or an
            embedding is not a one-dimensional vector of finite numbers of the same size as
            the others.
    """
    lam = _checked_lambda(lambda_)
    limit = _checked_top_k(top_k)
    threshold = _checked_threshold(dedup_threshold)
    if not candidates or limit == 0:
        return []

    pool, scores, matrix, inv_norm = _prepared(candidates)
    limit = len(pool) if limit is None else min(limit, len(pool))
    picks = _lazy_greedy(scores, matrix, inv_norm, limit=limit, lam=lam, threshold=threshold)
    return [pool[i] for i in picks]


def _prepared(
    candidates: Sequence[RetrievalResult],
) -> tuple[list[RetrievalResult], FloatArray, FloatArray, FloatArray]:
    """Check scores, merge byte-identical contents, stack the embeddings.

    Returns:
        The merged candidates, their scores, their embedding matrix and inverse norms.
    """
    scores = _checked_scores(candidates)
    keep = _merge_identical(candidates, scores)
    pool = list(candidates) if keep is None else [candidates[i] for i in keep]
    if keep is not None:
        scores = scores[keep]
    matrix, inv_norm = _embedding_matrix(pool, keep)
    return pool, scores, matrix, inv_norm


class MMRRanking:
    """MMR as a lazy ranking: iterate to get picks in order, computed only as pulled.

    The same picks, in the same order, as `mmr_select` with no `top_k`; but a consumer
    that stops after a few picks pays only for those (the context builder pulls picks
    while a source's budget still has room). Iterating again replays the picks already
    made and then continues.

    Example:
        ```python
        from itertools import islice

        from langchain_contextkit.mmr import MMRRanking, RetrievalResult

        ranking = MMRRanking(
            [
                RetrievalResult("Cats are great pets.", 0.9, "rag", embedding=[1.0, 0.0]),
                RetrievalResult("Cats make wonderful pets.", 0.8, "rag", embedding=[0.99, 0.01]),
                RetrievalResult("The Eiffel Tower is in Paris.", 0.6, "rag", embedding=[0.0, 1.0]),
            ]
        )
        print([ranking.candidates[i].content for i in islice(ranking, 2)])
        # ['Cats are great pets.', 'The Eiffel Tower is in Paris.']
        ```
    """

    def __init__(
        self,
        candidates: Sequence[RetrievalResult],
        *,
        lambda_: float = 0.7,
        dedup_threshold: float = 0.95,
    ) -> None:
        """Check the arguments and prepare the ranking; no pick is made yet.

        Args:
            candidates: The results to rank.
            lambda_: Weight of relevance against diversity, in [0, 1].
            dedup_threshold: Cosine similarity at or above which a candidate is dropped as
                a near-duplicate of a pick; above 1 disables dropping.

        Raises:
            ConfigError: For the same bad arguments as `mmr_select`.
        """
        lam = _checked_lambda(lambda_)
        threshold = _checked_threshold(dedup_threshold)
        self._picks: list[int] = []
        self._state: _LazyGreedy | None = None
        self._iterator: Iterator[int] = iter(())
        if not candidates:
            self.candidates: list[RetrievalResult] = []
            self.merged = 0
            return
        self.candidates, scores, matrix, inv_norm = _prepared(candidates)
        self.merged = len(candidates) - len(self.candidates)
        n = len(self.candidates)
        self._state = _LazyGreedy(scores, matrix, inv_norm, limit=n, lam=lam, threshold=threshold)
        self._state.expected_picks = _EXPECTED_PICKS
        self._iterator = self._state.iter_picks(int(np.argmax(scores)))

    @property
    def dropped(self) -> int:
        """Near-duplicates dropped so far (the whole count once the ranking is exhausted)."""
        return 0 if self._state is None else self._state.dropped

    def __iter__(self) -> Iterator[int]:
        """Yield indices into `candidates` in pick order."""
        yield from self._picks[:]
        position = len(self._picks)
        while True:
            if position < len(self._picks):  # another iterator computed it meanwhile
                yield self._picks[position]
            else:
                index = next(self._iterator, None)
                if index is None:
                    return
                self._picks.append(index)
                yield index
            position += 1


def _checked_lambda(lambda_: object) -> float:
    """Validate `lambda_` and return it as a float."""
    if not isinstance(lambda_, numbers.Real):
        msg = f"lambda_ must be a number in [0, 1], got {lambda_!r}"
        raise ConfigError(msg)
    lam = float(lambda_)
    if not 0.0 <= lam <= 1.0:  # also rejects NaN: every comparison with NaN is False
        msg = f"lambda_ must be in [0, 1], got {lambda_!r}"
        raise ConfigError(msg)
    return lam


def _checked_top_k(top_k: object) -> int | None:
    """Validate `top_k` and return it as an int (or `None` for no limit)."""
    if top_k is None:
        return None
    if isinstance(top_k, bool):  # bool is an int subclass, but True is surely a mistake
        msg = f"top_k must be an int or None, got {top_k!r}"
        raise ConfigError(msg)
    if not isinstance(top_k, SupportsIndex):  # int, numpy integers; not float or str
        msg = f"top_k must be an int or None, got {type(top_k).__name__}: {top_k!r}"
        raise ConfigError(msg)
    limit = operator.index(top_k)
    if limit < 0:
        msg = f"top_k must be >= 0 or None, got {limit}"
        raise ConfigError(msg)
    return limit


def _checked_threshold(dedup_threshold: object) -> float:
    """Validate `dedup_threshold` and return it as a float."""
    if not isinstance(dedup_threshold, numbers.Real):
        msg = f"dedup_threshold must be a number, got {dedup_threshold!r}"
        raise ConfigError(msg)
    threshold = float(dedup_threshold)
    if math.isnan(threshold):
        msg = "dedup_threshold must not be NaN"
        raise ConfigError(msg)
    return threshold


def _checked_scores(candidates: Sequence[RetrievalResult]) -> FloatArray:
    """Collect all scores into one float64 array, rejecting non-numbers, NaN and inf."""
    try:
        scores: FloatArray = np.array([c.score for c in candidates], dtype=np.float64)
    except (TypeError, ValueError):
        bad = next((i for i, c in enumerate(candidates) if not _is_number(c.score)), None)
        if bad is None:  # every score converts alone, but not all together (an array?)
            msg = "every candidate's score must be a single number"
        else:
            msg = f"candidate {bad} has a score that is not a number: {candidates[bad].score!r}"
        raise ConfigError(msg) from None
    if scores.ndim != 1:
        msg = "every candidate's score must be a single number"
        raise ConfigError(msg)
    finite = np.isfinite(scores)
    if not finite.all():
        bad = int(np.argmin(finite))
        msg = f"candidate {bad} has a non-finite score: {candidates[bad].score!r}"
        raise ConfigError(msg)
    return scores


def _is_number(value: object) -> bool:
    """Tell whether `float(value)` succeeds and gives a single number."""
    try:
        float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True


def _merge_identical(candidates: Sequence[RetrievalResult], scores: FloatArray) -> list[int] | None:
    """Find the candidates that survive merging byte-identical contents.

    Returns:
        Input indices of the survivors in input order, or `None` when every content is
        unique (the common case, so callers can skip re-indexing).
    """
    contents = [c.content for c in candidates]
    if len(set(contents)) == len(contents):
        return None
    best: dict[str, int] = {}
    values = scores.tolist()  # Python floats compare much faster than numpy scalars
    for i, text in enumerate(contents):
        j = best.get(text)
        if j is None or values[i] > values[j]:  # strict: the earliest wins a tie
            best[text] = i
    return sorted(best.values())


def _embedding_matrix(
    pool: Sequence[RetrievalResult], keep: list[int] | None
) -> tuple[FloatArray, FloatArray]:
    """Stack the embeddings into one matrix and compute inverse row norms.

    Rows of candidates without an embedding are zero, which makes every similarity with
    them 0 without any special case in the selection loop. Rows are not normalised in
    place: that would be one more pass over the largest array we have; scaling the few
    similarities we compute by `inv_norm` is much cheaper.

    Args:
        pool: The candidates after merging.
        keep: Their indices in the caller's list (`None`: the same as in `pool`), used in
            error messages.

    Returns:
        The `(n, d)` matrix and the `(n,)` inverse norms (0 for zero rows), both float32
        or float64.

    Raises:
        ConfigError: If an embedding is not a one-dimensional numeric vector, if sizes
            differ, or if a value is NaN or infinite.
    """
    embeddings = [c.embedding for c in pool]
    matrix: FloatArray | None
    try:
        # One C-level conversion in the common case (every candidate has a vector of the
        # same size); anything unusual falls through to the slow, diagnosing path.
        stacked = np.asarray(embeddings)
    except (ValueError, TypeError):
        matrix = None
    else:
        matrix = stacked if stacked.ndim == _MATRIX_NDIM and stacked.dtype.kind in "biuf" else None
    if matrix is None:
        matrix = _embedding_matrix_slow(embeddings, keep)
    matrix = _as_float_matrix(matrix)

    sq_norm = _row_dots(matrix)
    finfo = np.finfo(matrix.dtype)
    # NaN fails both comparisons, so this one mask also catches NaN/inf values (their
    # squared norm is not finite), all-zero rows and rows whose squared norm overflows or
    # underflows; all are rare and handled below without slowing down the common case.
    suspicious = np.flatnonzero(~((sq_norm >= finfo.tiny) & (sq_norm <= finfo.max / 4)))
    if suspicious.size and matrix.shape[1]:
        _rescale_rows(matrix, sq_norm, suspicious, keep)
    with np.errstate(divide="ignore"):
        inv_norm: FloatArray = 1.0 / np.sqrt(sq_norm)
    inv_norm[sq_norm == 0] = 0.0
    return matrix, inv_norm


def _embedding_matrix_slow(
    embeddings: list[Sequence[float] | FloatArray | None], keep: list[int] | None
) -> FloatArray:
    """Build the embedding matrix one candidate at a time, with precise error messages."""
    present: list[int] = []
    vectors: list[npt.NDArray[Any]] = []
    first_of_size: dict[int, int] = {}
    for i, embedding in enumerate(embeddings):
        if embedding is None:
            continue
        where = i if keep is None else keep[i]
        vector = np.asarray(embedding)
        if vector.ndim != 1:
            msg = (
                f"candidate {where} has an embedding of shape {vector.shape}; "
                "expected a one-dimensional vector"
            )
            raise ConfigError(msg)
        if vector.dtype.kind not in "biuf":
            msg = f"candidate {where} has an embedding of non-numeric dtype {vector.dtype}"
            raise ConfigError(msg)
        first_of_size.setdefault(vector.shape[0], where)
        present.append(i)
        vectors.append(vector)
    if len(first_of_size) > 1:
        sizes = ", ".join(
            f"{size} (first at candidate {where})" for size, where in first_of_size.items()
        )
        msg = f"embeddings must all have the same size; found sizes {sizes}"
        raise ConfigError(msg)
    if not vectors:
        # No candidate has an embedding: zero columns make every similarity 0.
        return np.zeros((len(embeddings), 0), dtype=np.float64)
    stacked = np.asarray(vectors)
    matrix = np.zeros((len(embeddings), stacked.shape[1]), dtype=stacked.dtype)
    matrix[present] = stacked
    return matrix


def _as_float_matrix(matrix: npt.NDArray[Any]) -> FloatArray:
    """Keep float32/float64 as they are; everything else becomes a float BLAS can use."""
    if matrix.dtype in (np.float32, np.float64):
        return matrix
    if matrix.dtype == np.float16:
        return matrix.astype(np.float32)
    return matrix.astype(np.float64)


def _row_dots(matrix: FloatArray) -> FloatArray:
    """Squared norm of every row, without an `(n, d)` temporary."""
    vecdot = getattr(np, "vecdot", None)  # numpy >= 2.0; faster than einsum
    # Overflow to inf is expected for huge rows and handled by the caller: no warning.
    with np.errstate(over="ignore", invalid="ignore"):
        if vecdot is not None:
            result: FloatArray = vecdot(matrix, matrix)
        else:  # pragma: no cover - numpy 1.x
            result = np.einsum("ij,ij->i", matrix, matrix)
    return result


def _rescale_rows(
    matrix: FloatArray, sq_norm: FloatArray, rows: IndexArray, keep: list[int] | None
) -> None:
    """Reject non-finite rows; rescale rows whose squared norm over- or underflows.

    Cosine similarity ignores a row's scale, so such rows are multiplied by a power of
    two (exact in binary floating point) that brings their largest entry near 1. All-zero
    rows stay zero and get an inverse norm of 0. Updates `matrix` and `sq_norm` in place.
    """
    sub = matrix[rows]
    finite = np.isfinite(sub).all(axis=1)
    if not finite.all():
        bad = int(rows[int(np.argmin(finite))])
        where = bad if keep is None else keep[bad]
        msg = f"candidate {where} has an embedding with NaN or infinite values"
        raise ConfigError(msg)
    largest = np.abs(sub).max(axis=1)
    nonzero = largest > 0
    if not nonzero.any():
        return
    rows = rows[nonzero]
    exponent = np.frexp(largest[nonzero])[1]
    scaled = np.ldexp(sub[nonzero], -exponent[:, np.newaxis]).astype(matrix.dtype)
    matrix[rows] = scaled
    sq_norm[rows] = _row_dots(scaled)


class _LazyGreedy:
    """State of one lazy-greedy MMR run over `n` candidates.

    Per candidate `i` it keeps `max_sim[i]`, the largest similarity to the first
    `compared[i]` picks. That is a lower bound of the true largest similarity to all
    picks; it starts at -1, the smallest cosine similarity (similarities are clipped to
    [-1, 1], the lower end by this very starting value). So `bound[i] = lam * score[i] -
    (1 - lam) * max_sim[i]` is an upper bound of the candidate's current MMR score, exact
    once `compared[i]` equals the number of picks. Picked and dropped candidates have
    bound -inf.

    Every similarity is computed as `(row . pick) * inv_norm[pick] * inv_norm[row]` in
    that order, whichever code path computes it, so all paths agree bit for bit whenever
    the dot products are exact.
    """

    def __init__(
        self,
        scores: FloatArray,
        matrix: FloatArray,
        inv_norm: FloatArray,
        *,
        limit: int,
        lam: float,
        threshold: float,
    ) -> None:
        """Set up the state for picking at most `limit` candidates."""
        n = scores.shape[0]
        self.matrix = matrix
        self.inv_norm = inv_norm
        self.limit = limit
        self.threshold = threshold
        self.weighted_score: FloatArray = lam * scores
        self.penalty_weight = 1.0 - lam
        self.max_sim: FloatArray = np.full(n, -1.0)
        self.compared: IndexArray = np.zeros(n, dtype=np.intp)
        # Computed with the same expression as every later update, so a bound equals the
        # exact score bit for bit once the candidate is up to date.
        self.bound: FloatArray = self.weighted_score - self.penalty_weight * self.max_sim
        # Pick indices in an array too, to gather the picks' rows for a refresh; the rows
        # are not copied at pick time, since most picks are made inside a block and many
        # candidates are never refreshed against them.
        self.pick_array: IndexArray = np.empty(limit, dtype=np.intp)
        self.picks: list[int] = []
        self.dropped = 0  # near-duplicates dropped so far
        self.expected_picks: int | None = None  # set by open-ended rankings
        self.full_threshold = max(1, int(n * _FULL_MATRIX_FRACTION))

    def run(self, first: int) -> list[int]:
        """Pick `first`, then the others; return all picks in order."""
        return list(self.iter_picks(first))

    def iter_picks(self, first: int) -> Iterator[int]:
        """Pick `first`, then the others, yielding each pick as soon as it is made.

        A consumer may stop early: picks are computed only as far as they are pulled.
        """
        self._add_pick(first)
        yield first
        # Compare everyone with the first pick at once (one matrix-vector product). Bounds
        # from max_sim = -1 are so loose that the lazy refreshes would reach most
        # candidates anyway, in several smaller, slower batches (measured: up to 2x slower
        # on clustered data).
        self.refresh(np.flatnonzero(self.bound > -np.inf))
        while len(self.picks) < self.limit:
            block = self._top_block()
            if block is None:
                break  # every candidate is picked or dropped
            rows, outside = block
            self.refresh(rows)
            best = float(self.bound[rows].max())
            if best > outside:
                yield from self._pick_in_block(rows, outside)
            else:
                picked = self._pick_one(best)
                if picked is not None:
                    yield picked

    def _add_pick(self, index: int) -> None:
        """Record `index` as the next pick."""
        self.pick_array[len(self.picks)] = index
        self.picks.append(index)
        self.bound[index] = -np.inf

    def _top_block(self) -> tuple[IndexArray, float] | None:
        """The live candidates with the highest bounds, and the best bound of the rest.

        Returns:
            Sorted indices of the block and the largest bound outside it (-inf when the
            block holds every live candidate), or `None` when no candidate is live.
        """
        bound = self.bound
        n = bound.shape[0]
        remaining = self.limit - len(self.picks)
        if self.expected_picks is not None:
            # An open-ended ranking: size blocks for the picks likely to be pulled next
            # (as many again as so far), not for every candidate.
            remaining = min(remaining, max(self.expected_picks, len(self.picks)))
        size = min(_MAX_BLOCK, max(_MIN_BLOCK, _BLOCK_PER_PICK * remaining))
        if size >= n:
            rows = np.arange(n)
            outside = -np.inf
        else:
            order = np.argpartition(bound, n - size - 1)
            rows = order[n - size :]
            outside = float(bound[order[n - size - 1]])
        rows = np.sort(rows[bound[rows] > -np.inf])  # sorted: argmax ties go to the earliest
        return (rows, outside) if rows.size else None

    def _pick_in_block(self, rows: IndexArray, outside: float) -> Iterator[int]:
        """Pick from the exact block `rows` while its best score beats `outside`.

        Candidates outside the block have bounds <= `outside`, so a block score above it
        is the global best. Each pick costs one matrix-vector product over the block (not
        over all candidates) and a few block-sized operations; once no block score beats
        `outside`, the caller re-forms the block around the refreshed bounds.
        """
        block = self.matrix[rows]
        inv = self.inv_norm[rows]
        max_sim = self.max_sim[rows]
        weighted = self.weighted_score[rows]  # a copy: picked members become -inf
        penalty = self.penalty_weight
        picks = self.picks
        threshold = self.threshold
        scores = weighted - penalty * max_sim
        best = int(scores.argmax())
        while True:
            if max_sim[best] < threshold:
                index = int(rows[best])
                self.pick_array[len(picks)] = index
                picks.append(index)
                yield index
                if len(picks) == self.limit:
                    return  # nothing else will read the state
                # Similarity of every member to the pick, in the order `_update` uses.
                # One column per pick, not a Gram matrix up front: many blocks end after
                # a pick or two.
                column = block @ block[best]
                column *= inv[best]
                column *= inv
                _clip_above(column)
                np.maximum(max_sim, column, out=max_sim)
            else:
                self.dropped += 1
            weighted[best] = -np.inf  # picked, or dropped as a near-duplicate
            scores = weighted - penalty * max_sim
            best = int(scores.argmax())
            if not scores[best] > outside:
                break
        self.max_sim[rows] = max_sim
        self.compared[rows] = len(picks)
        self.bound[rows] = scores

    def _pick_one(self, best: float) -> int | None:
        """Make one pick (or drop) when candidates outside the block may beat it.

        Every candidate whose bound reaches `best`, the block's best exact score, is
        refreshed; then the top bound is exact, and the argmax also breaks ties towards
        the earliest candidate. This always makes progress, even when many candidates
        share one score.
        """
        self.refresh(np.flatnonzero(self.bound >= best))
        winner = int(self.bound.argmax())
        if self.max_sim[winner] >= self.threshold:
            self.bound[winner] = -np.inf  # a near-duplicate of a pick: dropped for good
            self.dropped += 1
            return None
        self._add_pick(winner)
        return winner

    def refresh(self, rows: IndexArray) -> None:
        """Compare live candidates `rows` with every pick they have not seen yet."""
        t = len(self.picks)
        rows = rows[self.compared[rows] < t]
        if rows.size == 0:
            return
        recent = self.compared[rows] == t - 1
        if recent.all():
            self._update(rows, t - 1)
        elif not recent.any():
            self._update(rows, int(self.compared[rows].min()))
        else:
            # Most rows usually lag one pick behind; comparing them with every pick the
            # stalest row needs would multiply their work by the lag.
            self._update(rows[recent], t - 1)
            older = rows[~recent]
            self._update(older, int(self.compared[older].min()))

    def _update(self, rows: IndexArray, start: int) -> None:
        """Fold similarities of `rows` with picks `start..` into the state."""
        t = len(self.picks)
        picked = self.pick_array[start:t]
        picks = self.matrix[picked]
        picks_inv = self.inv_norm[picked]
        # A large batch multiplies all rows: cheaper than gathering most of them first.
        full = rows.size > self.full_threshold
        source = self.matrix if full else self.matrix[rows]
        if picked.size > _GEMV_MAX_PICKS:
            raw = source @ picks.T
            raw *= picks_inv
            sims = raw.max(axis=1)
        else:
            # BLAS handles a product with 2-3 columns worse than 2-3 matrix-vector products
            # (OpenBLAS: up to 3x slower), and this case is common: most candidates lag
            # only a pick or two behind.
            sims = source @ picks[0]
            sims *= picks_inv[0]
            for j in range(1, picked.size):
                column = source @ picks[j]
                column *= picks_inv[j]
                np.maximum(sims, column, out=sims)
        if full:
            sims = sims[rows]
        # Scaling by the row's own positive inverse norm is monotone, so it can come after
        # the max and still give exactly max(sim) of the per-pair formula.
        sims *= self.inv_norm[rows]
        _clip_above(sims)
        max_sim = np.maximum(self.max_sim[rows], sims)
        self.max_sim[rows] = max_sim
        self.compared[rows] = t
        self.bound[rows] = self.weighted_score[rows] - self.penalty_weight * max_sim


def _clip_above(values: FloatArray) -> None:
    """Clip similarities to at most 1 in place (rounding can overshoot by an ulp).

    This keeps "a threshold above 1 disables dropping" true. The lower end needs no clip:
    every running max starts at -1, so it never holds anything below -1.
    """
    # A bare ufunc: `np.clip` adds microseconds of dispatch, and this runs on every refresh.
    np.minimum(values, 1.0, out=values)


def _lazy_greedy(
    scores: FloatArray,
    matrix: FloatArray,
    inv_norm: FloatArray,
    *,
    limit: int,
    lam: float,
    threshold: float,
) -> list[int]:
    """Run MMR and return the picked row indices in pick order."""
    # The first pick ignores lambda_: with nothing picked yet, relevance alone decides.
    first = int(np.argmax(scores))
    if limit == 1:
        return [first]
    state = _LazyGreedy(scores, matrix, inv_norm, limit=limit, lam=lam, threshold=threshold)
    return state.run(first)
