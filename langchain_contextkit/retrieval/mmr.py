"""Maximal marginal relevance (MMR): relevant but mutually diverse retrieval results.

`mmr_select` picks a subset that is both relevant (high `score`) and diverse (low cosine
similarity to what was already picked), and drops near-duplicates outright:

```python
from langchain_contextkit.retrieval.mmr import mmr_select
from langchain_contextkit.retrieval.result import RetrievalResult

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

`mmr_indices` is the same selection on a score vector and an embedding matrix (the inputs
of langchain-core's `maximal_marginal_relevance`), without copying the matrix;
`MMRRanking` yields the picks lazily, as the context builder pulls them.
"""

from __future__ import annotations

import itertools
import math
import numbers
import operator
from typing import TYPE_CHECKING, Any, SupportsIndex

import numpy as np

from langchain_contextkit.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import numpy.typing as npt

    from langchain_contextkit.retrieval.result import FloatArray, RetrievalResult

__all__ = ["MMRRanking", "mmr_indices", "mmr_select"]

_MATRIX_NDIM = 2


def mmr_select(
    candidates: Sequence[RetrievalResult],
    *,
    top_k: int | None = None,
    lambda_: float = 0.7,
    dedup_threshold: float = 0.95,
) -> list[RetrievalResult]:
    """Pick relevant but mutually diverse results by maximal marginal relevance.

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
    become float64. Embeddings of candidates merged away in step 1 are not inspected.

    ```python
    from langchain_contextkit.retrieval.mmr import mmr_select
    from langchain_contextkit.retrieval.result import RetrievalResult

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
    limit = _checked_top_k(top_k)
    ranking = MMRRanking(
        candidates if limit != 0 else [], lambda_=lambda_, dedup_threshold=dedup_threshold
    )
    return [ranking.candidates[i] for i in itertools.islice(ranking, limit)]


def mmr_indices(
    scores: npt.ArrayLike,
    embeddings: npt.ArrayLike | None = None,
    *,
    top_k: int | None = None,
    lambda_: float = 0.7,
    dedup_threshold: float = 0.95,
) -> list[int]:
    """Maximal marginal relevance on arrays: the picks of `mmr_select`, as row indices.

    For callers that already hold the embeddings as one matrix (a vector store's search
    results, a batch from `Embeddings.embed_documents`): a float32 or float64 matrix is
    used where it is, never copied nor modified. The rules are those of `mmr_select`
    except the first (there is no content to merge); an all-zero row has similarity 0 to
    everything.

    ```python
    import numpy as np

    from langchain_contextkit.retrieval.mmr import mmr_indices

    scores = np.array([0.9, 0.8, 0.6])
    embeddings = np.array([[1.0, 0.0], [0.99, 0.01], [0.0, 1.0]])
    print(mmr_indices(scores, embeddings, top_k=2, lambda_=0.7))
    # [0, 2]
    ```

    Args:
        scores: Relevance of each candidate, shape `(n,)`; higher is more relevant.
        embeddings: Row `i` is candidate `i`'s embedding, shape `(n, d)`. `None`: no
            embeddings (every similarity is 0).
        top_k: Maximum number of picks; `None` means no limit.
        lambda_: Weight of relevance against diversity, in [0, 1].
        dedup_threshold: Cosine similarity at or above which a candidate counts as a
            near-duplicate of a pick and is dropped; above 1 disables dropping.

    Returns:
        Indices into `scores` in pick order. Empty when there are no scores or `top_k`
        is 0 (then the arrays are not inspected).

    Raises:
        ConfigError: For the bad arguments `mmr_select` rejects, if `scores` is not a
            one-dimensional array of finite numbers, or if `embeddings` is not a numeric
            `(n, d)` matrix of finite values.
    """
    lam = _checked_lambda(lambda_)
    limit = _checked_top_k(top_k)
    threshold = _checked_threshold(dedup_threshold)
    if limit == 0:
        return []
    score_array = _checked_score_array(scores)
    n = score_array.shape[0]
    if embeddings is None:
        matrix: FloatArray = np.zeros((n, 0))  # zero columns: every similarity is 0
        inv_norm: FloatArray = np.zeros(n)
    else:
        matrix, inv_norm = _checked_embedding_matrix(embeddings, n)
    picks = _greedy(score_array, matrix, inv_norm, lam=lam, threshold=threshold, dropped=[0])
    return list(itertools.islice(picks, limit))


class MMRRanking:
    """MMR as a lazy ranking: iterate to get picks in order, computed only as pulled.

    The same picks, in the same order, as `mmr_select` with no `top_k`; a consumer that
    stops after a few picks pays only for those (the context builder pulls picks while a
    source's budget still has room). Iterating again replays the picks already made and
    then continues.

    Example:
        ```python
        from itertools import islice

        from langchain_contextkit.retrieval.mmr import MMRRanking
        from langchain_contextkit.retrieval.result import RetrievalResult

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
        """Check the arguments, merge identical contents; no pick is made yet.

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
        self._dropped = [0]
        self.candidates: list[RetrievalResult] = []
        self._iterator: Iterator[int] = iter(())
        if candidates:
            scores = _checked_scores(candidates)
            keep = _merge_identical(candidates, scores)
            self.candidates = list(candidates) if keep is None else [candidates[i] for i in keep]
            if keep is not None:
                scores = scores[keep]
            matrix, inv_norm = _stacked_embeddings([c.embedding for c in self.candidates], keep)
            self._iterator = _greedy(
                scores, matrix, inv_norm, lam=lam, threshold=threshold, dropped=self._dropped
            )
        self.merged = len(candidates) - len(self.candidates)
        """Byte-identical duplicates merged away before ranking."""

    @property
    def dropped(self) -> int:
        """Near-duplicates dropped so far (the whole count once the ranking is exhausted)."""
        return self._dropped[0]

    def __iter__(self) -> Iterator[int]:
        """Yield indices into `candidates` in pick order."""
        position = 0
        while True:
            if position == len(self._picks):  # not computed yet, by this or another iterator
                index = next(self._iterator, None)
                if index is None:
                    return
                self._picks.append(index)
            yield self._picks[position]
            position += 1


def _greedy(
    scores: FloatArray,
    matrix: FloatArray,
    inv_norm: FloatArray,
    *,
    lam: float,
    threshold: float,
    dropped: list[int],
) -> Iterator[int]:
    """Yield the MMR picks one by one: one matrix-vector product per pick.

    Similarities are `(row . pick) * inv_norm[pick] * inv_norm[row]`, clipped to 1 (rounding
    can overshoot, and "a threshold above 1 disables dropping" must hold) and, through the
    running max starting at -1, to -1. A near-duplicate is dropped when it would be the
    next pick; `dropped[0]` counts them.
    """
    n = scores.shape[0]
    if n == 0:
        return
    weighted = lam * scores
    max_sim: FloatArray = np.full(n, -1.0)
    done = np.zeros(n, dtype=bool)
    pick = int(np.argmax(scores))  # the first pick: relevance alone, whatever lambda_
    while True:
        done[pick] = True
        yield pick
        sims = matrix @ matrix[pick]
        sims *= inv_norm[pick]
        sims *= inv_norm
        np.minimum(sims, 1.0, out=sims)
        np.maximum(max_sim, sims, out=max_sim)
        values = weighted - (1.0 - lam) * max_sim
        values[done] = -np.inf
        while True:
            pick = int(np.argmax(values))
            if values[pick] == -np.inf:
                return
            if max_sim[pick] < threshold:
                break
            dropped[0] += 1
            done[pick] = True
            values[pick] = -np.inf


def _checked_lambda(lambda_: object) -> float:
    """Validate `lambda_` and return it as a float."""
    if not isinstance(lambda_, numbers.Real):
        msg = f"lambda_ must be a number in [0, 1], got {lambda_!r}"
        raise ConfigError(msg)
    try:
        lam = float(lambda_)
    except OverflowError:  # an int too large for a float: far outside [0, 1] anyway
        lam = math.nan
    if not 0.0 <= lam <= 1.0:  # also rejects NaN
        msg = f"lambda_ must be in [0, 1], got {lambda_!r}"
        raise ConfigError(msg)
    return lam


def _checked_top_k(top_k: object) -> int | None:
    """Validate `top_k` and return it as an int (or `None` for no limit)."""
    if top_k is None:
        return None
    msg = f"top_k must be an int or None, got {type(top_k).__name__}: {top_k!r}"
    # bool is an int subclass, but True is surely a mistake; numpy integers are fine.
    if isinstance(top_k, bool) or not isinstance(top_k, SupportsIndex):
        raise ConfigError(msg)
    try:
        limit = operator.index(top_k)
    except TypeError:  # has __index__ but refuses, e.g. a 0-d float array
        raise ConfigError(msg) from None
    if limit < 0:
        msg = f"top_k must be >= 0 or None, got {limit}"
        raise ConfigError(msg)
    return limit


def _checked_threshold(dedup_threshold: object) -> float:
    """Validate `dedup_threshold` and return it as a float."""
    if not isinstance(dedup_threshold, numbers.Real):
        msg = f"dedup_threshold must be a number, got {dedup_threshold!r}"
        raise ConfigError(msg)
    try:
        threshold = float(dedup_threshold)
    except OverflowError:  # an int too large for a float: as good as infinity
        threshold = -math.inf if dedup_threshold < 0 else math.inf
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
    bad = _first_non_finite(scores)
    if bad is not None:
        msg = f"candidate {bad} has a non-finite score: {candidates[bad].score!r}"
        raise ConfigError(msg)
    return scores


def _checked_score_array(scores: npt.ArrayLike) -> FloatArray:
    """Validate the scores given to `mmr_indices` and return them as float64."""
    try:
        raw = np.asarray(scores)
    except (TypeError, ValueError):  # ragged nested sequences
        raw = None
    if raw is None or raw.ndim != 1 or raw.dtype.kind not in "biuf":
        msg = "scores must be a one-dimensional sequence of numbers"
        raise ConfigError(msg)
    with np.errstate(over="ignore"):  # long doubles beyond float64: inf, reported below
        array: FloatArray = raw.astype(np.float64, copy=False)
    bad = _first_non_finite(array)
    if bad is not None:
        msg = f"score {bad} is not finite: {float(array[bad])}"
        raise ConfigError(msg)
    return array


def _first_non_finite(values: FloatArray) -> int | None:
    """Index of the first NaN or infinite value, or `None` when every value is finite."""
    finite = np.isfinite(values)
    return None if finite.all() else int(np.argmin(finite))


def _is_number(value: object) -> bool:
    """Tell whether `float(value)` succeeds and gives a single number."""
    try:
        float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True


def _merge_identical(candidates: Sequence[RetrievalResult], scores: FloatArray) -> list[int] | None:
    """Input indices of the candidates left after merging identical contents, in order.

    `None` when every content is unique (the common case: no re-indexing needed).
    """
    contents = [c.content for c in candidates]
    if len(set(contents)) == len(contents):
        return None
    best: dict[str, int] = {}
    values = scores.tolist()
    for i, text in enumerate(contents):
        j = best.get(text)
        if j is None or values[i] > values[j]:  # strict: the earliest wins a tie
            best[text] = i
    return sorted(best.values())


# --- embedding matrices: one row per candidate, never normalised in place; the inverse
# norms are computed once (0 for a zero row, which makes its similarities 0) -----------------


def _stacked_embeddings(
    embeddings: Sequence[Sequence[float] | FloatArray | None],
    positions: Sequence[int] | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Stack per-candidate embeddings (`None`: a zero row) into a new matrix.

    `positions` are the candidates' indices in the caller's list, for error messages.

    Raises:
        ConfigError: If an embedding is not a one-dimensional numeric vector, if sizes
            differ, or if a value is NaN or infinite.
    """
    try:
        # One C-level conversion in the common case; anything unusual takes the slow,
        # diagnosing path.
        stacked = np.asarray(embeddings)
    except (ValueError, TypeError):
        stacked = None
    if stacked is None or stacked.ndim != _MATRIX_NDIM or stacked.dtype.kind not in "biuf":
        stacked = _stacked_one_by_one(embeddings, positions)
    return _with_inverse_norms(_as_float_matrix(stacked), positions, owned=True)


def _checked_embedding_matrix(embeddings: npt.ArrayLike, n: int) -> tuple[FloatArray, FloatArray]:
    """Check a caller's `(n, d)` matrix: float32/float64 is used as is, never modified.

    Raises:
        ConfigError: If it is not a numeric `(n, d)` matrix of finite values.
    """
    try:
        raw = np.asarray(embeddings)
    except (ValueError, TypeError) as error:  # ragged nested lists
        msg = f"embeddings must be a numeric matrix with one row per score: {error}"
        raise ConfigError(msg) from None
    if n == 0 and raw.ndim == 1 and raw.size == 0:
        raw = raw.reshape(0, 0)  # `[]`: the embeddings of an empty search result
    if raw.ndim != _MATRIX_NDIM or raw.shape[0] != n:
        msg = f"embeddings must have shape ({n}, d), one row per score; got shape {raw.shape}"
        raise ConfigError(msg)
    if raw.dtype.kind not in "biuf":
        msg = f"embeddings must be numeric, got dtype {raw.dtype}"
        raise ConfigError(msg)
    matrix = _as_float_matrix(raw)
    if not (matrix.flags.c_contiguous or matrix.flags.f_contiguous):
        # A strided view would be copied by BLAS on every product.
        matrix = np.ascontiguousarray(matrix)
    # Only a conversion made here is ours to modify; `raw` may be the caller's memory.
    return _with_inverse_norms(matrix, None, owned=matrix is not raw)


def _stacked_one_by_one(
    embeddings: Sequence[Sequence[float] | FloatArray | None], positions: Sequence[int] | None
) -> npt.NDArray[Any]:
    """Build the embedding matrix one candidate at a time, with precise error messages."""
    present: list[int] = []
    vectors: list[npt.NDArray[Any]] = []
    first_of_size: dict[int, int] = {}
    for i, embedding in enumerate(embeddings):
        if embedding is None:
            continue
        where = i if positions is None else positions[i]
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
    # A long double beyond the float64 range becomes inf, which the row checks report.
    with np.errstate(over="ignore"):
        return matrix.astype(np.float64)


def _with_inverse_norms(
    matrix: FloatArray, positions: Sequence[int] | None, *, owned: bool
) -> tuple[FloatArray, FloatArray]:
    """Validate the rows and compute their inverse norms.

    Rows whose squared norm over- or underflows are multiplied by a power of two (exact,
    and cosine ignores scale) that brings their largest entry near 1; in a copy unless
    `matrix` is `owned`.

    Raises:
        ConfigError: If a row holds NaN or infinite values.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # huge rows: handled below
        sq_norm: FloatArray = np.einsum("ij,ij->i", matrix, matrix)
    finfo = np.finfo(matrix.dtype)
    # One mask catches NaN/inf, zero rows and squared norms that overflow or underflow.
    suspicious = np.flatnonzero(~((sq_norm >= finfo.tiny) & (sq_norm <= finfo.max / 4)))
    if suspicious.size and matrix.shape[1]:
        sub = matrix[suspicious]
        finite = np.isfinite(sub).all(axis=1)
        if not finite.all():
            bad = int(suspicious[int(np.argmin(finite))])
            where = bad if positions is None else positions[bad]
            msg = f"candidate {where} has an embedding with NaN or infinite values"
            raise ConfigError(msg)
        largest = np.abs(sub).max(axis=1)
        nonzero = largest > 0
        if nonzero.any():
            rows = suspicious[nonzero]
            exponent = np.frexp(largest[nonzero])[1]
            scaled = np.ldexp(sub[nonzero], -exponent[:, np.newaxis]).astype(matrix.dtype)
            if not owned:
                matrix = matrix.copy()
            matrix[rows] = scaled
            sq_norm[rows] = np.einsum("ij,ij->i", scaled, scaled)
    with np.errstate(divide="ignore"):
        inv_norm: FloatArray = 1.0 / np.sqrt(sq_norm)
    inv_norm[sq_norm == 0] = 0.0
    return matrix, inv_norm
