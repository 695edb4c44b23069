"""Maximal marginal relevance (MMR) selection of retrieval results.

Retrieval often returns several passages that say the same thing. Sending all of them to
the model wastes context tokens. `mmr_select` picks a subset that is both relevant (high
`score`) and diverse (low cosine similarity to what was already picked), and drops
near-duplicates outright:

```python
from langchain_contextkit.mmr import mmr_select
from langchain_contextkit.retrieval import RetrievalResult

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
`mmr_indices` is the same selection on a score vector and an embedding matrix (the
inputs langchain-core's `maximal_marginal_relevance` takes), without copying the matrix.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Iterator, Sequence  # noqa: TC003 - runtime: get_type_hints(RetrievalResult)
from typing import TYPE_CHECKING, SupportsIndex

import numpy as np

from langchain_contextkit._mmr_greedy import LazyGreedy

# Imported at runtime (not under TYPE_CHECKING) so that `typing.get_type_hints` works on
# `RetrievalResult`, as pydantic and schema generators need.
from langchain_contextkit._mmr_matrix import (
    FloatArray,
    checked_embedding_matrix,
    stacked_embeddings,
)
from langchain_contextkit.errors import ConfigError

if TYPE_CHECKING:
    import numpy.typing as npt

    from langchain_contextkit.retrieval import RetrievalResult

__all__ = ["MMRRanking", "mmr_indices", "mmr_select"]


# An open-ended `MMRRanking` sizes its first blocks for this many picks.
_EXPECTED_PICKS = 16


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
    from langchain_contextkit.mmr import mmr_select
    from langchain_contextkit.retrieval import RetrievalResult

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
    block of the highest bounds, with similarities computed only among its members, for
    as long as the block's best score beats every bound outside it. The picks are
    exactly those of the textbook algorithm, ties included.

    The embeddings are copied into one matrix first; with thousands of candidates that
    copy costs more than the selection. When they already are one matrix (a vector
    store's search result), `mmr_indices` takes it as it is.

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
    picks = LazyGreedy(scores, matrix, inv_norm, limit=limit, lam=lam, threshold=threshold).run()
    return [pool[i] for i in picks]


def mmr_indices(
    scores: npt.ArrayLike,
    embeddings: npt.ArrayLike | None = None,
    *,
    top_k: int | None = None,
    lambda_: float = 0.7,
    dedup_threshold: float = 0.95,
) -> list[int]:
    """Maximal marginal relevance on arrays: the picks of `mmr_select`, as row indices.

    For callers that already hold the candidates' embeddings as one matrix (a vector
    store's search results, a batch from `Embeddings.embed_documents`): a float32 or
    float64 matrix is used where it is, with no per-candidate objects and no copy, which
    at thousands of candidates costs more than the selection itself. The rules are those
    of `mmr_select` except the first (there is no content to merge): the first pick is
    the highest score, every later one maximises `lambda_ * score - (1 - lambda_) *
    max_sim`, ties go to the lowest index, and a candidate whose cosine similarity to a
    pick is `>= dedup_threshold` is dropped. An all-zero row has similarity 0 to
    everything, like a candidate without an embedding.

    ```python
    import numpy as np

    from langchain_contextkit.mmr import mmr_indices

    scores = np.array([0.9, 0.8, 0.6])
    embeddings = np.array([[1.0, 0.0], [0.99, 0.01], [0.0, 1.0]])
    print(mmr_indices(scores, embeddings, top_k=2, lambda_=0.7))
    # [0, 2]
    ```

    Args:
        scores: Relevance of each candidate, shape `(n,)`; higher is more relevant.
        embeddings: Row `i` is candidate `i`'s embedding, shape `(n, d)`. `None`: no
            embeddings (every similarity is 0, so with `lambda_ > 0` the picks come in
            score order). Never modified.
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
        # Zero columns make every similarity 0, as for candidates without embeddings.
        matrix: FloatArray = np.zeros((n, 0))
        inv_norm: FloatArray = np.zeros(n)
    else:
        matrix, inv_norm = checked_embedding_matrix(embeddings, n)
    if n == 0:
        return []
    greedy = LazyGreedy(score_array, matrix, inv_norm, limit=limit, lam=lam, threshold=threshold)
    return greedy.run()


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
    matrix, inv_norm = stacked_embeddings([c.embedding for c in pool], keep)
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

        from langchain_contextkit.mmr import MMRRanking
        from langchain_contextkit.retrieval import RetrievalResult

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
        self._state: LazyGreedy | None = None
        self._iterator: Iterator[int] = iter(())
        if not candidates:
            self.candidates: list[RetrievalResult] = []
            self.merged = 0
            return
        self.candidates, scores, matrix, inv_norm = _prepared(candidates)
        self.merged = len(candidates) - len(self.candidates)
        self._state = LazyGreedy(scores, matrix, inv_norm, limit=None, lam=lam, threshold=threshold)
        self._state.expected_picks = _EXPECTED_PICKS
        self._iterator = self._state.iter_picks()

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
    try:
        lam = float(lambda_)
    except OverflowError:  # an int too large for a float: far outside [0, 1] anyway
        lam = math.nan
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
    msg = f"top_k must be an int or None, got {type(top_k).__name__}: {top_k!r}"
    if not isinstance(top_k, SupportsIndex):  # int, numpy integers; not float or str
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
