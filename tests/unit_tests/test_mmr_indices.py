"""Adversarial tests for `langchain_contextkit.retrieval.mmr.mmr_indices`.

`mmr_indices` is the array form of `mmr_select`: the same MMR picks as row indices, on a
caller's score vector and embedding matrix, which it must never modify. These tests check
it against `mmr_select`, against langchain-core's `maximal_marginal_relevance`, and against
two references written here (a plain-Python textbook loop and a vectorised numpy one), on
every input layout and dtype it accepts, and check the errors it raises.

Most data is integer-valued, so dot products are exact and MMR scores tie exactly: the
references use the library's documented similarity formula, `(a . b) * inv|b| * inv|a|`
clipped to [-1, 1], so they agree with it bit for bit and ties are broken identically.
"""

from __future__ import annotations

import math
import tracemalloc
import warnings
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.retrieval.mmr import mmr_indices, mmr_select
from langchain_contextkit.retrieval.result import RetrievalResult

NO_DEDUP = 1.01
LAMBDAS = [0.0, 0.3, 0.7, 1.0]
THRESHOLDS = [0.5, 0.9, NO_DEDUP]


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def select_positions(scores, matrix, **options):
    """Run `mmr_select` on one uniquely named candidate per row; return row positions."""
    rows = [None] * len(scores) if matrix is None else list(matrix)
    candidates = [
        RetrievalResult(content=f"d{i}", score=float(s), source="t", embedding=row)
        for i, (s, row) in enumerate(zip(scores, rows, strict=True))
    ]
    position = {id(c): i for i, c in enumerate(candidates)}
    return [position[id(r)] for r in mmr_select(candidates, **options)]


def inverse_norm(row):
    """1 / |row| as the library computes it, in Python floats (0 for a zero row)."""
    squared = float(np.dot(row, row))
    return 0.0 if squared == 0 else 1.0 / math.sqrt(squared)


def similarity(a, b, inv_a, inv_b):
    """Cosine of candidate `a` to pick `b`: `(a . b) * inv|b| * inv|a|`, in [-1, 1]."""
    value = float(np.dot(a, b)) * inv_b * inv_a
    return min(1.0, max(-1.0, value))


def plain_reference(scores, matrix, *, top_k=None, lambda_=0.7, dedup_threshold=0.95):
    """Textbook incremental MMR with Python loops, over float64 data."""
    scores = [float(s) for s in scores]
    n = len(scores)
    limit = n if top_k is None else min(top_k, n)
    if limit == 0:
        return []
    rows = [np.zeros(0)] * n if matrix is None else [np.asarray(r, np.float64) for r in matrix]
    inv = [inverse_norm(r) for r in rows]
    first = 0
    for i in range(1, n):
        if scores[i] > scores[first]:
            first = i
    picks = [first]
    live = [i for i in range(n) if i != first]
    max_sim = [-math.inf] * n
    while len(picks) < limit:
        newest = picks[-1]
        for i in live:
            max_sim[i] = max(max_sim[i], similarity(rows[i], rows[newest], inv[i], inv[newest]))
        live = [i for i in live if max_sim[i] < dedup_threshold]
        if not live:
            break
        winner, best = -1, -math.inf
        for i in live:  # ascending: strict > keeps the earliest of equal values
            value = lambda_ * scores[i] - (1.0 - lambda_) * max_sim[i]
            if winner < 0 or value > best:
                winner, best = i, value
        picks.append(winner)
        live.remove(winner)
    return picks


def vectorised_reference(scores, matrix, *, top_k=None, lambda_=0.7, dedup_threshold=0.95):
    """The same textbook MMR with one matrix-vector product per pick.

    Similarities are computed in the matrix's own dtype, as the library does, so float32
    integer data gives bit-identical values and ties.
    """
    scores = np.asarray(scores, dtype=np.float64)
    matrix = np.ascontiguousarray(matrix)
    n = scores.shape[0]
    limit = n if top_k is None else min(top_k, n)
    if limit == 0:
        return []
    squared = np.einsum("ij,ij->i", matrix, matrix)
    with np.errstate(divide="ignore"):
        inv = 1.0 / np.sqrt(squared)
    inv[squared == 0] = 0.0
    weighted = lambda_ * scores
    penalty = 1.0 - lambda_
    max_sim = np.full(n, -np.inf)
    live = np.ones(n, dtype=bool)
    picks = [int(np.argmax(scores))]
    live[picks[0]] = False
    while len(picks) < limit:
        newest = picks[-1]
        sims = (matrix @ matrix[newest]) * inv[newest] * inv
        max_sim = np.maximum(max_sim, np.clip(sims, -1.0, 1.0))
        live &= max_sim < dedup_threshold
        if not live.any():
            break
        values = np.where(live, weighted - penalty * max_sim, -np.inf)
        winner = int(np.argmax(values))
        picks.append(winner)
        live[winner] = False
    return picks


def power_of_two_problem(seed, n, *, d=16):
    """Integer vectors whose norms are powers of two, and quarter-step scores.

    Every cosine between these rows is a multiple of 1/16, computed exactly in float16,
    float32 and float64 alike, so all dtypes and layouts must give identical picks; the
    few distinct values make exact ties common. Includes zero rows and repeated rows.
    """
    rng = np.random.default_rng(seed)
    matrix = np.zeros((n, d))
    kind = rng.integers(0, 4, size=n)
    for i in range(n):
        if kind[i] == 1:  # a scaled basis vector: norm 1, 2 or 4
            matrix[i, rng.integers(0, d)] = rng.choice([-4, -2, -1, 1, 2, 4])
        elif kind[i] >= 2:  # a sign vector (norm 4) or twice one (norm 8)
            matrix[i] = rng.choice([-1.0, 1.0], size=d) * rng.choice([1, 2])
    repeats = rng.random(n) < 0.15
    matrix[repeats] = matrix[rng.integers(0, n, size=int(repeats.sum()))]
    scores = rng.integers(-2, 5, size=n) / 4
    return scores, matrix


def clustered_problem(seed, n, d, dtype):
    """Random float data with clusters (so near-duplicates exist) and distinct scores."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(2, n // 10), d))
    matrix = centres[rng.integers(0, len(centres), size=n)]
    matrix = matrix + 0.15 * rng.standard_normal((n, d))
    return rng.random(n), matrix.astype(dtype)


@st.composite
def integer_problems(draw, *, max_n=12, thresholds=(0.5, 0.9, NO_DEDUP)):
    """Small integer-valued problems: zero rows, repeated rows and equal scores."""
    n = draw(st.integers(0, max_n))
    d = draw(st.integers(1, 4))
    fresh = st.lists(st.integers(-2, 2), min_size=d, max_size=d)
    rows: list[list[int]] = []
    for _ in range(n):
        kind = draw(st.sampled_from(["fresh", "zero", "repeat"] if rows else ["fresh", "zero"]))
        if kind == "fresh":
            rows.append(draw(fresh))
        elif kind == "zero":
            rows.append([0] * d)
        else:
            rows.append(list(draw(st.sampled_from(rows))))
    scores = draw(st.lists(st.integers(-2, 4).map(lambda v: v / 4), min_size=n, max_size=n))
    top_k = draw(st.none() | st.integers(0, n + 2))
    lambda_ = draw(st.sampled_from(LAMBDAS))
    threshold = draw(st.sampled_from(thresholds))
    matrix = np.array(rows, dtype=np.float64).reshape(n, d)
    return np.array(scores, dtype=np.float64), matrix, top_k, lambda_, threshold


def options(top_k, lambda_, threshold):
    return {"top_k": top_k, "lambda_": lambda_, "dedup_threshold": threshold}


# --------------------------------------------------------------------------------------
# 0. The documented example and basic rules
# --------------------------------------------------------------------------------------


def test_docstring_example():
    scores = np.array([0.9, 0.8, 0.6])
    embeddings = np.array([[1.0, 0.0], [0.99, 0.01], [0.0, 1.0]])
    assert mmr_indices(scores, embeddings, top_k=2, lambda_=0.7) == [0, 2]


def test_returns_a_list_of_python_ints():
    picks = mmr_indices(np.array([0.1, 0.9, 0.5]), np.eye(3, dtype=np.float32))
    assert type(picks) is list
    assert picks == [1, 2, 0]
    assert all(type(i) is int for i in picks)


def test_first_pick_ties_go_to_the_lowest_index():
    scores = [0.5, 0.9, 0.9, 0.9]
    assert mmr_indices(scores, np.eye(4), top_k=1) == [1]
    assert mmr_indices(scores, np.eye(4), top_k=1, lambda_=0.0) == [1]


def test_later_ties_go_to_the_lowest_index():
    # After picking 0, candidates 1..3 all have similarity 0 and equal scores.
    matrix = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, -1.0], [0.0, 2.0]])
    assert mmr_indices([1.0, 0.5, 0.5, 0.5], matrix, top_k=2, dedup_threshold=NO_DEDUP) == [0, 1]
    # Then 3 is a twin of 1 (similarity 1) and 2 its opposite (-1): 2 must win.
    assert mmr_indices([1.0, 0.5, 0.5, 0.5], matrix, dedup_threshold=NO_DEDUP) == [0, 1, 2, 3]


def test_threshold_is_inclusive_and_above_one_disables_dropping():
    matrix = np.array([[1.0, 0.0], [3.0, 0.0], [0.0, 1.0]])  # rows 0 and 1: cosine 1
    assert mmr_indices([0.9, 0.8, 0.1], matrix, lambda_=1.0, dedup_threshold=1.0) == [0, 2]
    assert mmr_indices([0.9, 0.8, 0.1], matrix, lambda_=1.0, dedup_threshold=NO_DEDUP) == [
        0,
        1,
        2,
    ]
    assert mmr_indices([0.9, 0.8, 0.1], matrix, lambda_=1.0, dedup_threshold=math.inf) == [
        0,
        1,
        2,
    ]


def test_rounding_above_one_never_drops_with_a_threshold_just_above_one():
    # (3,3).(3,3) * inv * inv rounds to 1 + 2**-52; the library clips it to 1.
    matrix = np.array([[3.0, 3.0], [3.0, 3.0]])
    just_above_one = float(np.nextafter(1.0, 2.0))
    assert mmr_indices([0.9, 0.8], matrix, dedup_threshold=just_above_one) == [0, 1]


def test_zero_rows_have_similarity_zero_to_everything():
    matrix = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.0]])
    # opposite: 0.25 + 0.5 = 0.75 beats the zero row's 0.25 - 0.
    assert mmr_indices([0.9, 0.5, 0.5], matrix, lambda_=0.5, dedup_threshold=NO_DEDUP) == [
        0,
        1,
        2,
    ]
    # Similarity 0 >= threshold 0: the zero row is dropped; the opposite row is not.
    assert mmr_indices([0.9, 0.5, 0.5], matrix, dedup_threshold=0.0) == [0, 1]


def test_zero_width_embeddings_behave_like_none():
    scores = [0.2, 0.9, 0.5]
    assert mmr_indices(scores, np.zeros((3, 0))) == mmr_indices(scores) == [1, 2, 0]
    assert mmr_indices(scores, [[], [], []], dedup_threshold=0.0) == [1]


def test_top_k_none_larger_than_n_and_numpy_integers():
    scores, matrix = power_of_two_problem(0, 40)
    everything = mmr_indices(scores, matrix, dedup_threshold=NO_DEDUP)
    assert sorted(everything) == list(range(40))
    assert mmr_indices(scores, matrix, top_k=10**9, dedup_threshold=NO_DEDUP) == everything
    assert mmr_indices(scores, matrix, top_k=np.int64(7)) == mmr_indices(scores, matrix, top_k=7)
    assert mmr_indices(scores, matrix, top_k=np.uint8(7)) == mmr_indices(scores, matrix, top_k=7)


def test_lambda_and_threshold_accept_other_real_types():
    scores, matrix = power_of_two_problem(1, 30)
    expected = mmr_indices(scores, matrix, lambda_=0.5, dedup_threshold=0.5)
    assert mmr_indices(scores, matrix, lambda_=Fraction(1, 2), dedup_threshold=0.5) == expected
    assert (
        mmr_indices(scores, matrix, lambda_=np.float32(0.5), dedup_threshold=np.float64(0.5))
        == expected
    )


def test_empty_scores_return_nothing():
    assert mmr_indices([]) == []
    assert mmr_indices(np.zeros(0)) == []
    assert mmr_indices([], np.zeros((0, 5))) == []
    assert mmr_indices([], np.zeros((0, 5), dtype=np.float32), top_k=3) == []


def test_empty_scores_with_an_empty_embedding_list_return_nothing():
    # Regression (bug at c687027): an empty search result's embeddings, `[]`, have
    # shape (0,), and were rejected for not being (0, d).
    assert mmr_indices([], []) == []
    assert mmr_indices(np.zeros(0), np.zeros(0, dtype=np.float32), top_k=5) == []
    with pytest.raises(ConfigError, match="shape"):
        mmr_indices([0.5], [])  # one score, no rows: still an error


def test_single_candidate():
    assert mmr_indices([0.3], [[1.0, 2.0]]) == [0]
    assert mmr_indices([0.3], [[0.0, 0.0]], dedup_threshold=-5.0) == [0]
    assert mmr_indices([-7.0]) == [0]


# --------------------------------------------------------------------------------------
# 1. Agreement with mmr_select
# --------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(problem=integer_problems())
def test_same_picks_as_mmr_select_on_integer_problems(problem):
    scores, matrix, top_k, lambda_, threshold = problem
    expected = select_positions(scores, matrix, **options(top_k, lambda_, threshold))
    assert mmr_indices(scores, matrix, **options(top_k, lambda_, threshold)) == expected


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [50, 500, 3000])
@pytest.mark.parametrize("d", [8, 384])
@pytest.mark.parametrize("k", [1, 10, 50])
def test_same_picks_as_mmr_select_on_random_data(dtype, n, d, k):
    scores, matrix = clustered_problem(n * 7 + d + k, n, d, dtype)
    for lambda_, threshold in [(0.7, 0.9), (0.3, NO_DEDUP)]:
        kwargs = options(k, lambda_, threshold)
        picks = mmr_indices(scores, matrix, **kwargs)
        assert picks == select_positions(scores, matrix, **kwargs)
        if threshold > 1:
            assert len(picks) == min(k, n)


def test_same_picks_as_mmr_select_with_many_exact_ties_at_scale():
    # Enough candidates for several blocks, lazy refreshes and the full-matrix path.
    scores, matrix = power_of_two_problem(5, 2000)
    for lambda_, threshold in [(0.7, 0.9), (0.3, 0.5), (0.0, NO_DEDUP), (1.0, 0.9)]:
        kwargs = options(200, lambda_, threshold)
        assert mmr_indices(scores, matrix, **kwargs) == select_positions(scores, matrix, **kwargs)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(2))
def test_exact_ties_at_scale_match_the_vectorised_reference(dtype, seed):
    # Thousands of candidates whose similarities are multiples of 1/16: MMR scores tie
    # exactly, and land exactly on thresholds, across block boundaries and stale bounds.
    scores, matrix = power_of_two_problem(60 + seed, 3000)
    matrix = matrix.astype(dtype)
    for lambda_ in LAMBDAS:
        for threshold in (0.25, 0.5, 1.0, NO_DEDUP):
            kwargs = options(300, lambda_, threshold)
            assert mmr_indices(scores, matrix, **kwargs) == vectorised_reference(
                scores, matrix, **kwargs
            ), (lambda_, threshold)


def test_scores_keep_full_float64_precision():
    # Differences far below float32 resolution must still order the picks.
    scores = 0.5 + np.array([0.0, 3e-12, 1e-12, 2e-12])
    matrix = np.eye(4)
    assert mmr_indices(scores, matrix, lambda_=0.7) == [1, 3, 2, 0]
    assert mmr_indices(scores, lambda_=0.3) == [1, 3, 2, 0]
    assert mmr_indices(scores.tolist(), matrix.astype(np.float32), lambda_=1.0) == [1, 3, 2, 0]


# --------------------------------------------------------------------------------------
# 2. Agreement with langchain-core
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("lambda_", [0.0, 0.25, 0.5, 0.7, 1.0])
@pytest.mark.parametrize("seed", range(4))
def test_same_picks_as_langchain_core(lambda_, seed):
    rng = np.random.default_rng(100 + seed)
    n, d, k = 80, 16, 20
    if seed % 2:  # clustered: langchain-core never drops, so neither may we
        centres = rng.standard_normal((5, d))
        matrix = centres[rng.integers(0, 5, size=n)] + 0.05 * rng.standard_normal((n, d))
    else:
        matrix = rng.standard_normal((n, d))
    query = rng.standard_normal(d)
    scores = (matrix @ query) / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))
    expected = maximal_marginal_relevance(query, list(matrix), lambda_mult=lambda_, k=k)
    picks = mmr_indices(scores, matrix, top_k=k, lambda_=lambda_, dedup_threshold=NO_DEDUP)
    assert picks == expected
    as32 = matrix.astype(np.float32)
    scores32 = (as32 @ query.astype(np.float32)) / (
        np.linalg.norm(as32, axis=1) * np.linalg.norm(query.astype(np.float32))
    )
    expected32 = maximal_marginal_relevance(query, list(as32), lambda_mult=lambda_, k=k)
    assert mmr_indices(scores32, as32, top_k=k, lambda_=lambda_, dedup_threshold=2.0) == (
        expected32
    )


# --------------------------------------------------------------------------------------
# 3. An independent reference
# --------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(problem=integer_problems(max_n=16, thresholds=(-0.5, 0.0, 0.5, 0.9, 1.0, NO_DEDUP)))
def test_same_picks_as_the_plain_reference(problem):
    scores, matrix, top_k, lambda_, threshold = problem
    kwargs = options(top_k, lambda_, threshold)
    expected = plain_reference(scores, matrix, **kwargs)
    assert mmr_indices(scores, matrix, **kwargs) == expected
    # The two references of this file agree too (on float64 they compute the same bits).
    if len(scores):
        assert vectorised_reference(scores, matrix, **kwargs) == expected


@pytest.mark.parametrize("seed", range(3))
def test_plain_reference_on_hand_made_ties(seed):
    # Duplicate rows, opposite rows, zero rows and equal scores; several hundred rows so
    # that block boundaries fall inside runs of equal MMR scores.
    rng = np.random.default_rng(seed)
    base = rng.integers(-1, 2, size=(6, 3)).astype(np.float64)
    matrix = np.concatenate([base, -base, 2 * base, np.zeros((2, 3))])
    matrix = matrix[rng.integers(0, len(matrix), size=300)]
    scores = rng.integers(0, 3, size=300) / 2
    for lambda_ in LAMBDAS:
        for threshold in (0.5, 1.0, NO_DEDUP):
            kwargs = options(None, lambda_, threshold)
            assert mmr_indices(scores, matrix, **kwargs) == plain_reference(
                scores, matrix, **kwargs
            )


# --------------------------------------------------------------------------------------
# 4. Invariants
# --------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(problem=integer_problems(max_n=20, thresholds=(-1.0, 0.0, 0.5, 0.9, 1.0, NO_DEDUP)))
def test_invariants(problem):
    scores, matrix, top_k, lambda_, threshold = problem
    n = len(scores)
    picks = mmr_indices(scores, matrix, **options(top_k, lambda_, threshold))

    if top_k is not None:
        assert len(picks) <= top_k
    assert len(set(picks)) == len(picks)
    assert all(0 <= i < n for i in picks)
    if n and top_k != 0:
        assert picks[0] == int(np.argmax(scores))
    else:
        assert picks == []

    inv = [inverse_norm(row) for row in matrix]
    for later, b in enumerate(picks):
        for a in picks[:later]:
            assert similarity(matrix[b], matrix[a], inv[b], inv[a]) < threshold

    if threshold > 1:
        limit = n if top_k is None else min(top_k, n)
        assert len(picks) == limit  # nothing is dropped
        if lambda_ == 1.0:
            stable_order = sorted(range(n), key=lambda i: -scores[i])
            assert picks == stable_order[:limit]


@settings(max_examples=100, deadline=None)
@given(problem=integer_problems(max_n=20, thresholds=(0.5, 0.9, NO_DEDUP)))
def test_top_k_picks_are_a_prefix_of_the_unlimited_picks(problem):
    scores, matrix, _, lambda_, threshold = problem
    unlimited = mmr_indices(scores, matrix, lambda_=lambda_, dedup_threshold=threshold)
    for k in range(len(scores) + 2):
        limited = mmr_indices(scores, matrix, top_k=k, lambda_=lambda_, dedup_threshold=threshold)
        assert limited == unlimited[:k]


def test_row_scale_does_not_matter():
    scores, matrix = power_of_two_problem(3, 300)
    scale = np.ldexp(1.0, np.random.default_rng(3).integers(-20, 20, size=(300, 1)))
    for lambda_, threshold in [(0.7, 0.9), (0.3, 0.5)]:
        kwargs = options(60, lambda_, threshold)
        assert mmr_indices(scores, matrix * scale, **kwargs) == mmr_indices(
            scores, matrix, **kwargs
        )


# --------------------------------------------------------------------------------------
# 5. The caller's arrays are never modified
# --------------------------------------------------------------------------------------


def assert_untouched(array, snapshot):
    assert array.dtype == snapshot.dtype
    assert array.shape == snapshot.shape
    assert array.tobytes() == snapshot.tobytes()


def extreme_matrix(dtype):
    """Rows whose squared norms overflow or underflow in `dtype`, among normal rows."""
    big, small = (1e200, 1e-200) if dtype == np.float64 else (1e30, 1e-30)
    rng = np.random.default_rng(9)
    matrix = rng.standard_normal((200, 6))
    matrix[3] = [big, 0, 0, 0, 0, 0]
    matrix[4] = [small, 0, 0, 0, 0, 0]  # same direction as row 3
    matrix[5] = [0, small, small, 0, 0, 0]
    matrix[6] = [0, big, big, 0, 0, 0]
    matrix[7] = [big, small, 0, 0, 0, 0]  # mixed: the squared norm overflows
    matrix[8] = 0.0
    matrix[9, 2] = -big
    return matrix.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("readonly", [False, True])
@pytest.mark.parametrize("extreme", [False, True])
def test_inputs_are_byte_identical_after_the_call(dtype, readonly, extreme):
    matrix = extreme_matrix(dtype) if extreme else clustered_problem(4, 200, 6, dtype)[1]
    scores = np.random.default_rng(4).random(len(matrix))
    snapshot_scores, snapshot_matrix = scores.copy(), matrix.copy()
    if readonly:
        scores.setflags(write=False)
        matrix.setflags(write=False)
    for lambda_, threshold in [(0.7, 0.9), (0.3, NO_DEDUP), (1.0, 0.0)]:
        picks = mmr_indices(scores, matrix, lambda_=lambda_, dedup_threshold=threshold)
        assert_untouched(scores, snapshot_scores)
        assert_untouched(matrix, snapshot_matrix)
        fresh = mmr_indices(
            snapshot_scores.copy(),
            snapshot_matrix.copy(),
            lambda_=lambda_,
            dedup_threshold=threshold,
        )
        assert picks == fresh


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "layout", ["fortran", "strided", "transposed", "reversed", "column_strided"]
)
def test_extreme_rows_in_views_are_rescaled_in_a_copy(dtype, layout):
    base = extreme_matrix(dtype)
    if layout == "fortran":
        matrix = np.asfortranarray(base)
    elif layout == "strided":
        big = np.zeros((2 * len(base), base.shape[1]), dtype=dtype)
        big[::2] = base
        matrix = big[::2]
    elif layout == "transposed":
        matrix = np.ascontiguousarray(base.T).T
    elif layout == "reversed":
        matrix = np.ascontiguousarray(base[::-1])[::-1]  # negative row stride
    else:
        wide = np.zeros((len(base), 2 * base.shape[1]), dtype=dtype)
        wide[:, ::2] = base
        matrix = wide[:, ::2]
    owner = matrix.base if matrix.base is not None else matrix
    snapshot = owner.copy()
    scores = np.linspace(1.0, 0.0, len(base))
    picks = mmr_indices(scores, matrix, dedup_threshold=0.9)
    assert_untouched(owner, snapshot)
    assert np.array_equal(matrix, base)
    assert picks == mmr_indices(scores, base.copy(), dedup_threshold=0.9)


def test_extreme_magnitudes_keep_their_direction():
    # Squared norms overflow (1e200) or underflow (1e-200) in float64.
    matrix = np.array([[1e200, 0.0], [1e-200, 0.0], [0.0, 1e-200]])
    matrix.setflags(write=False)
    assert mmr_indices([0.9, 0.8, 0.1], matrix, lambda_=1.0) == [0, 2]
    assert mmr_indices([0.9, 0.8, 0.1], matrix, lambda_=1.0, dedup_threshold=NO_DEDUP) == [
        0,
        1,
        2,
    ]
    as32 = np.array([[1e30, 0.0], [1e-30, 0.0], [0.0, 1e-44]], dtype=np.float32)
    as32.setflags(write=False)
    assert mmr_indices([0.9, 0.8, 0.1], as32, lambda_=1.0) == [0, 2]
    assert as32[2, 1] != 0  # a float32 subnormal, still a direction


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_at_the_ends_of_the_float_range_keep_their_direction(dtype):
    info = np.finfo(dtype)
    smallest = np.nextafter(dtype(0), dtype(1))  # the smallest subnormal
    directions = np.array(
        [[1, 1, 1, 1, 1, 1], [1, -1, 1, -1, 1, -1], [1, 0, 0, 0, 0, 0], [0, 1, 1, 0, 0, 0]],
        dtype=dtype,
    )
    scales = np.array([info.max, smallest, info.max / 3, info.tiny], dtype=dtype)[:, None]
    extremes = directions * scales
    matrix = np.concatenate([extremes, directions])  # rows 4..7 are twins of rows 0..3
    matrix.setflags(write=False)
    snapshot = matrix.copy()
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2])
    assert mmr_indices(scores, matrix, lambda_=1.0, dedup_threshold=0.999) == [0, 1, 2, 3]
    expected = vectorised_reference(scores, np.concatenate([directions, directions]))
    assert mmr_indices(scores, matrix, top_k=None) == expected
    assert_untouched(matrix, snapshot)


def test_extreme_magnitudes_agree_with_scaled_rows():
    scores, matrix = power_of_two_problem(8, 120)
    scale = np.ldexp(1.0, np.random.default_rng(8).choice([-700, -500, 0, 500, 700], (120, 1)))
    huge = matrix * scale  # exact: powers of two
    huge.setflags(write=False)
    snapshot = huge.copy()
    for lambda_, threshold in [(0.7, 0.9), (0.3, 0.5), (1.0, NO_DEDUP)]:
        kwargs = options(None, lambda_, threshold)
        assert mmr_indices(scores, huge, **kwargs) == plain_reference(scores, matrix, **kwargs)
    assert_untouched(huge, snapshot)


def test_a_memmap_opened_for_writing_is_not_written(tmp_path):
    base = extreme_matrix(np.float64)
    path = tmp_path / "embeddings.f64"
    mapped = np.memmap(path, dtype=np.float64, mode="w+", shape=base.shape)
    mapped[:] = base
    mapped.flush()
    before = path.read_bytes()
    scores = np.linspace(0.0, 1.0, len(base))
    picks = mmr_indices(scores, mapped, dedup_threshold=0.9)
    mapped.flush()
    assert path.read_bytes() == before
    assert picks == mmr_indices(scores, base, dedup_threshold=0.9)
    del mapped


def peak_allocation(function):
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_float32_matrix_is_not_copied():
    rng = np.random.default_rng(12)
    matrix = rng.standard_normal((20000, 128)).astype(np.float32)
    matrix.setflags(write=False)
    scores = rng.random(20000)
    peak = peak_allocation(lambda: mmr_indices(scores, matrix, top_k=10))
    assert peak < 0.5 * matrix.nbytes


def test_a_matrix_with_a_zero_row_is_not_copied():
    # Regression (bug at c687027): zero rows were flagged for rescaling, and the whole
    # matrix was copied before finding that no row needed it.
    rng = np.random.default_rng(12)
    matrix = rng.standard_normal((20000, 128)).astype(np.float32)
    matrix[17] = 0.0  # a candidate without an embedding
    matrix.setflags(write=False)
    scores = rng.random(20000)
    peak = peak_allocation(lambda: mmr_indices(scores, matrix, top_k=10))
    assert peak < 0.5 * matrix.nbytes


# --------------------------------------------------------------------------------------
# 6. Layouts and dtypes
# --------------------------------------------------------------------------------------


def layouts(matrix, tmp_path):
    """The same rows in every form `mmr_indices` accepts."""
    n, d = matrix.shape
    big = np.full((2 * n, d), 99.0)
    big[::2] = matrix
    wide = np.full((n, 3 * d), -7.0)
    wide[:, ::3] = matrix
    readonly = matrix.astype(np.float32)
    readonly.setflags(write=False)
    mapped = np.memmap(tmp_path / "m.f32", dtype=np.float32, mode="w+", shape=(n, d))
    mapped[:] = matrix
    mapped.flush()
    readonly_map = np.memmap(tmp_path / "m.f32", dtype=np.float32, mode="r", shape=(n, d))
    unaligned_buffer = bytearray(matrix.nbytes + 1)
    unaligned = np.frombuffer(unaligned_buffer, dtype=np.float64, offset=1).reshape(n, d)
    unaligned[...] = matrix
    return {
        "list of lists": matrix.tolist(),
        "list of int lists": matrix.astype(int).tolist(),
        "list of row arrays": list(matrix.astype(np.float32)),
        "int64": matrix.astype(np.int64),
        "int8": matrix.astype(np.int8),
        "float16": matrix.astype(np.float16),
        "float32": matrix.astype(np.float32),
        "float64": matrix.copy(),
        "big-endian float64": matrix.astype(">f8"),
        "fortran": np.asfortranarray(matrix),
        "fortran float32": np.asfortranarray(matrix, dtype=np.float32),
        "every other row": big[::2],
        "every third column": wide[:, ::3],
        "T.T": matrix.T.T,
        "transposed back": np.ascontiguousarray(matrix.T).T,
        "read-only float32": readonly,
        "memmap": mapped,
        "read-only memmap": readonly_map,
        "unaligned": unaligned,
    }


@pytest.mark.parametrize("seed", range(3))
def test_every_layout_and_dtype_gives_the_same_picks(seed, tmp_path):
    scores, matrix = power_of_two_problem(20 + seed, 400)
    settings_grid = [
        (top_k, lambda_, THRESHOLDS[(i + j) % 3])
        for i, top_k in enumerate((None, 25))
        for j, lambda_ in enumerate(LAMBDAS)
    ]
    expected = {grid: mmr_indices(scores, matrix, **options(*grid)) for grid in settings_grid}
    for name, form in layouts(matrix, tmp_path).items():
        for grid in settings_grid:
            assert mmr_indices(scores, form, **options(*grid)) == expected[grid], name


@settings(max_examples=150, deadline=None)
@given(problem=integer_problems(max_n=16))
def test_conversions_give_the_picks_of_the_float_they_convert_to(problem):
    # Integer values are exact in every dtype: ints and lists must give the float64
    # picks, float16 the float32 picks (ties included, so no lower precision is used).
    scores, matrix, top_k, lambda_, threshold = problem
    kwargs = options(top_k, lambda_, threshold)
    as64 = mmr_indices(scores, matrix, **kwargs)
    assert mmr_indices(scores, matrix.tolist(), **kwargs) == as64  # `[]` when n == 0
    assert mmr_indices(scores, matrix.astype(np.int8), **kwargs) == as64
    assert mmr_indices(scores, matrix.astype(np.int64), **kwargs) == as64
    assert mmr_indices(scores, np.asfortranarray(matrix), **kwargs) == as64
    as32 = mmr_indices(scores, matrix.astype(np.float32), **kwargs)
    assert mmr_indices(scores, matrix.astype(np.float16), **kwargs) == as32
    assert mmr_indices(scores, matrix.astype(np.float32)[:, ::-1], **kwargs) == as32


@pytest.mark.parametrize("seed", range(3))
def test_float16_is_computed_at_float32_precision(seed):
    rng = np.random.default_rng(seed)
    matrix = rng.integers(-40, 41, size=(400, 24)).astype(np.float16)  # exact in float16
    scores = rng.random(400)
    for lambda_, threshold in [(0.7, 0.6), (0.3, NO_DEDUP), (0.0, 0.8)]:
        kwargs = options(50, lambda_, threshold)
        assert mmr_indices(scores, matrix, **kwargs) == vectorised_reference(
            scores, matrix.astype(np.float32), **kwargs
        )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_views_give_the_same_picks_as_contiguous_copies_on_random_data(dtype):
    rng = np.random.default_rng(31)
    big = rng.standard_normal((6000, 48)).astype(dtype)
    scores = rng.random(3000)
    for view in (big[::2], np.asfortranarray(big[::2]), big[1::2][::-1][::-1], big[:3000].T.T):
        contiguous = np.ascontiguousarray(view)
        for lambda_, threshold in [(0.7, 0.5), (0.3, NO_DEDUP)]:
            kwargs = options(40, lambda_, threshold)
            assert mmr_indices(scores, view, **kwargs) == mmr_indices(scores, contiguous, **kwargs)


SCORE_FORMS = {
    "list": lambda s: s.tolist(),
    "tuple": lambda s: tuple(s.tolist()),
    "list of numpy scalars": lambda s: list(s.astype(np.float32)),
    "float32": lambda s: s.astype(np.float32),
    "float16": lambda s: s.astype(np.float16),
    "longdouble": lambda s: s.astype(np.longdouble),
    "strided": lambda s: np.repeat(s, 2)[::2],
    "negative stride": lambda s: np.ascontiguousarray(s[::-1])[::-1],
    "read-only": lambda s: np.lib.stride_tricks.as_strided(s, writeable=False),
}


@pytest.mark.parametrize("form", SCORE_FORMS)
def test_score_forms_give_the_same_picks(form):
    scores, matrix = power_of_two_problem(40, 200)  # quarter steps: exact in float16
    converted = SCORE_FORMS[form](scores)
    for grid in [(None, 1.0, NO_DEDUP), (30, 0.7, 0.9), (30, 0.3, 0.5), (None, 0.0, 0.5)]:
        assert mmr_indices(converted, matrix, **options(*grid)) == mmr_indices(
            scores, matrix, **options(*grid)
        )


@pytest.mark.parametrize("dtype", [np.int64, np.int8, np.uint16])
def test_integer_scores_are_converted(dtype):
    rng = np.random.default_rng(41)
    _, matrix = power_of_two_problem(41, 150)
    scores = rng.integers(0, 100, size=150).astype(dtype)
    for grid in [(None, 1.0, NO_DEDUP), (20, 0.7, 0.9), (20, 0.01, 0.5)]:
        assert mmr_indices(scores, matrix, **options(*grid)) == mmr_indices(
            scores.astype(np.float64), matrix, **options(*grid)
        )


# --------------------------------------------------------------------------------------
# 7. Errors
# --------------------------------------------------------------------------------------

SCORES = np.array([0.5, 0.4])
MATRIX = np.array([[1.0, 0.0], [0.0, 1.0]])


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


@pytest.mark.parametrize(
    "lambda_", [-0.01, 1.01, -math.inf, math.inf, math.nan, np.float64("nan"), "0.5", None]
)
def test_bad_lambda(lambda_):
    with pytest.raises(ConfigError, match="lambda_"):
        mmr_indices(SCORES, MATRIX, lambda_=lambda_)


@pytest.mark.parametrize("top_k", [-1, np.int64(-3), 1.5, 2.0, "3", True, np.float64(2.0)])
def test_bad_top_k(top_k):
    with pytest.raises(ConfigError, match="top_k"):
        mmr_indices(SCORES, MATRIX, top_k=top_k)


@pytest.mark.parametrize("threshold", [math.nan, np.float32("nan"), "0.9", None])
def test_bad_threshold(threshold):
    with pytest.raises(ConfigError, match="dedup_threshold"):
        mmr_indices(SCORES, MATRIX, dedup_threshold=threshold)


@pytest.mark.parametrize(
    "lambda_", [10**400, -(10**400), Fraction(10**400, 3)], ids=["1e400", "-1e400", "fraction"]
)
def test_huge_integer_lambda_is_a_config_error(lambda_):
    # Regression (bug at c687027): float(10**400) raised OverflowError.
    with pytest.raises(ConfigError, match="lambda_"):
        mmr_indices(SCORES, MATRIX, lambda_=lambda_)


def test_huge_integer_threshold_disables_dropping():
    # Regression (bug at c687027): float(10**400) raised OverflowError.
    twins = np.array([[1.0, 0.0], [1.0, 0.0]])
    assert mmr_indices(SCORES, twins, dedup_threshold=10**400) == [0, 1]
    assert mmr_indices(SCORES, np.eye(2), dedup_threshold=-(10**400)) == [0]


@pytest.mark.parametrize("top_k", [np.array(2.5), np.array([1, 2]), np.array(True)])
def test_non_integer_array_top_k_is_a_config_error(top_k):
    # Regression (bug at c687027): arrays pass the SupportsIndex check, then
    # operator.index raised TypeError.
    with pytest.raises(ConfigError, match="top_k"):
        mmr_indices(SCORES, MATRIX, top_k=top_k)


def test_argument_errors_come_before_the_empty_and_zero_shortcuts():
    with pytest.raises(ConfigError, match="lambda_"):
        mmr_indices([], lambda_=2.0)
    with pytest.raises(ConfigError, match="top_k"):
        mmr_indices([], top_k=-1)
    with pytest.raises(ConfigError, match="dedup_threshold"):
        mmr_indices(SCORES, "garbage", top_k=0, dedup_threshold=math.nan)


@pytest.mark.parametrize(
    ("scores", "embeddings"),
    [
        ("garbage", "garbage"),
        ([[1.0], [2.0, 3.0]], None),
        (np.array([[0.5, 0.4]]), object()),
        ([0.5, math.nan], [[1.0, math.nan]]),
        ([0.5, 0.4], [[1.0, 0.0]]),
    ],
)
def test_top_k_zero_does_not_inspect_the_arrays(scores, embeddings):
    assert mmr_indices(scores, embeddings, top_k=0) == []


@pytest.mark.parametrize(
    "scores",
    [
        np.array([[0.5, 0.4]]),  # 2-D
        np.array([[0.5], [0.4]]),
        np.float64(0.5),  # 0-D
        0.5,
        [[0.5], [0.4, 0.3]],  # ragged
        np.array([0.5 + 1j, 0.4]),  # complex
        ["0.5", "0.4"],  # strings
        np.array(["a", "b"]),
        [0.5, None],  # object
        [0.5, "x"],
        np.array([0.5, 0.4], dtype=object),
        np.array(["2024-01-01", "2024-01-02"], dtype="datetime64[D]"),
        np.array([1, 2], dtype="timedelta64[s]"),
    ],
    ids=repr,
)
def test_scores_must_be_a_one_dimensional_numeric_array(scores):
    with pytest.raises(ConfigError, match="scores must be a one-dimensional sequence of numbers"):
        mmr_indices(scores)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("with_embeddings", [False, True])
def test_non_finite_scores_name_the_position(bad, with_embeddings):
    embeddings = np.eye(3) if with_embeddings else None
    with pytest.raises(ConfigError, match=r"score 2 is not finite"):
        mmr_indices([0.5, 0.4, bad], embeddings)
    with pytest.raises(ConfigError, match=r"score 1 is not finite"):
        mmr_indices(np.array([0.5, bad, bad], dtype=np.float32), embeddings)


def huge_longdouble():
    """A finite long double beyond the float64 range (where long double is wider)."""
    value = np.longdouble(np.finfo(np.float64).max) * 4
    if not np.isfinite(value):  # pragma: no cover - long double is float64 here
        pytest.skip("long double is no wider than float64 on this platform")
    return value


def test_scores_beyond_float64_are_not_finite():
    scores = np.array([1.0, huge_longdouble()], dtype=np.longdouble)
    with pytest.raises(ConfigError, match="score 1 is not finite"):
        mmr_indices(scores)
    embeddings = np.array([[1.0, 0.0], [huge_longdouble(), 0.0]], dtype=np.longdouble)
    with pytest.raises(ConfigError, match="1 has an embedding with NaN or infinite"):
        mmr_indices([0.5, 0.4], embeddings)


@pytest.mark.parametrize("where", ["scores", "embeddings"])
def test_values_beyond_float64_raise_config_error_without_a_warning(where):
    # Regression (bug at c687027): the cast to float64 warned "overflow encountered in
    # cast" first, so under warnings-as-errors the caller got a RuntimeWarning.
    if where == "scores":
        scores = np.array([1.0, huge_longdouble()], dtype=np.longdouble)
        embeddings = None
    else:
        scores = np.array([0.5, 0.4])
        embeddings = np.array([[1.0, 0.0], [huge_longdouble(), 0.0]], dtype=np.longdouble)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConfigError):
            mmr_indices(scores, embeddings)


@pytest.mark.parametrize(
    ("embeddings", "phrase"),
    [
        (np.zeros((3, 2)), r"shape \(2, d\).*got shape \(3, 2\)"),  # too many rows
        (np.zeros((1, 2)), r"shape \(2, d\).*got shape \(1, 2\)"),  # too few rows
        ([[1.0, 0.0]], r"got shape \(1, 2\)"),
        (np.zeros((2, 2)).T[:1], r"got shape \(1, 2\)"),
        (np.zeros(2), r"got shape \(2,\)"),  # 1-D
        ([1.0, 0.0], r"got shape \(2,\)"),
        (np.zeros((2, 2, 2)), r"got shape \(2, 2, 2\)"),  # 3-D
        (np.float64(1.0), r"got shape \(\)"),
        ([[1.0, 0.0], [1.0]], "numeric matrix"),  # ragged
        ([[1.0, [0.0]], [1.0, 0.0]], "numeric matrix"),
        (np.array([["a", "b"], ["c", "d"]]), "numeric, got dtype <U1"),  # strings
        ([["a", "b"], ["c", "d"]], "numeric"),
        (np.ones((2, 2), dtype=complex), "numeric, got dtype complex128"),
        (np.ones((2, 2), dtype=object), "numeric, got dtype object"),
        ([[1.0, None], [0.0, 1.0]], "numeric"),
    ],
    ids=repr,
)
def test_embeddings_must_be_a_numeric_n_by_d_matrix(embeddings, phrase):
    with pytest.raises(ConfigError, match=phrase):
        mmr_indices(SCORES, embeddings)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("row", [0, 1])
def test_non_finite_embeddings(dtype, bad, row):
    matrix = np.ones((2, 3), dtype=dtype)
    matrix[row, 1] = bad
    snapshot = matrix.copy()
    matrix.setflags(write=False)
    with pytest.raises(ConfigError, match=rf"{row} has an embedding with NaN or infinite"):
        mmr_indices(SCORES, matrix)
    with pytest.raises(ConfigError, match="NaN or infinite"):
        mmr_indices(SCORES, np.asfortranarray(matrix))
    with pytest.raises(ConfigError, match="NaN or infinite"):
        mmr_indices(SCORES, matrix.tolist())
    assert_untouched(matrix, snapshot)


def test_nan_embedding_in_a_row_that_would_never_be_picked_is_still_an_error():
    matrix = np.eye(3)
    matrix[2, 0] = math.nan
    with pytest.raises(ConfigError, match="NaN"):
        mmr_indices([0.9, 0.8, 0.1], matrix, top_k=1)


def test_errors_even_with_empty_scores():
    with pytest.raises(ConfigError, match="shape"):
        mmr_indices([], np.zeros((1, 3)))
    with pytest.raises(ConfigError, match="one-dimensional"):
        mmr_indices(np.zeros((0, 2)))


# --------------------------------------------------------------------------------------
# 8. No embeddings
# --------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(
    scores=st.lists(st.integers(-3, 3).map(lambda v: v / 2), max_size=15),
    top_k=st.none() | st.integers(0, 17),
    lambda_=st.sampled_from([0.3, 0.7, 1.0]),
    threshold=st.sampled_from([1e-9, 0.5, 1.0, NO_DEDUP]),
)
def test_without_embeddings_picks_come_in_stable_score_order(scores, top_k, lambda_, threshold):
    n = len(scores)
    limit = n if top_k is None else min(top_k, n)
    expected = sorted(range(n), key=lambda i: -scores[i])[:limit]
    picks = mmr_indices(scores, top_k=top_k, lambda_=lambda_, dedup_threshold=threshold)
    assert picks == expected
    assert picks == mmr_indices(
        scores, np.zeros((n, 3)), top_k=top_k, lambda_=lambda_, dedup_threshold=threshold
    )


@settings(max_examples=150, deadline=None)
@given(
    scores=st.lists(st.integers(-3, 3).map(lambda v: v / 2), max_size=15),
    top_k=st.none() | st.integers(0, 17),
    lambda_=st.sampled_from(LAMBDAS),
    threshold=st.sampled_from([-1.5, -0.5, 0.0, 0.5, NO_DEDUP]),
)
def test_without_embeddings_same_picks_as_mmr_select(scores, top_k, lambda_, threshold):
    kwargs = options(top_k, lambda_, threshold)
    picks = mmr_indices(scores, **kwargs)
    assert picks == select_positions(scores, None, **kwargs)
    assert picks == plain_reference(scores, None, **kwargs)
    if threshold <= 0 and scores and top_k != 0:
        # Every similarity is 0 >= threshold: only the first pick survives.
        assert picks == [int(np.argmax(scores))]


def test_without_embeddings_and_lambda_zero_the_order_is_by_index_after_the_first():
    # With lambda_=0 every later candidate's MMR score is -(1 - 0) * 0 = 0: a tie that
    # goes to the lowest index, so "score order" holds only for lambda_ > 0.
    scores = [0.1, 0.5, 0.9, 0.7]
    assert mmr_indices(scores, lambda_=0.0) == [2, 0, 1, 3]
    assert select_positions(scores, None, lambda_=0.0) == [2, 0, 1, 3]
    assert mmr_indices(scores, lambda_=1e-9) == [2, 3, 1, 0]


# --------------------------------------------------------------------------------------
# 9. Large-ish exactness against the vectorised reference
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lambda_", "threshold"), [(0.7, 0.5), (0.5, NO_DEDUP), (0.0, 0.3), (1.0, 0.4)]
)
def test_twenty_thousand_float32_rows_match_the_vectorised_reference(lambda_, threshold):
    rng = np.random.default_rng(2024)
    n, d, k = 20000, 64, 100
    matrix = rng.integers(-2, 3, size=(n, d)).astype(np.float32)
    matrix[rng.random(n) < 0.01] = 0.0
    repeats = rng.integers(0, n, size=500)
    matrix[rng.integers(0, n, size=500)] = matrix[repeats]
    scores = rng.integers(0, 200, size=n) / 200  # many equal scores
    matrix.setflags(write=False)
    picks = mmr_indices(scores, matrix, top_k=k, lambda_=lambda_, dedup_threshold=threshold)
    expected = vectorised_reference(
        scores, matrix, top_k=k, lambda_=lambda_, dedup_threshold=threshold
    )
    assert len(expected) == k
    assert picks == expected
    as64 = matrix.astype(np.float64)
    assert mmr_indices(scores, as64, top_k=k, lambda_=lambda_, dedup_threshold=threshold) == (
        vectorised_reference(scores, as64, top_k=k, lambda_=lambda_, dedup_threshold=threshold)
    )
