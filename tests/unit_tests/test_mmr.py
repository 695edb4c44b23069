"""Tests for `langchain_contextkit.retrieval.mmr`."""

from __future__ import annotations

import itertools
import math
import textwrap
import typing

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from langchain_core.documents import Document
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.retrieval import mmr
from langchain_contextkit.retrieval.mmr import MMRRanking, mmr_select
from langchain_contextkit.retrieval.result import RetrievalResult

NO_DEDUP = 1.01


def result(content, score, embedding=None, source="test", **metadata):
    return RetrievalResult(
        content=content, score=score, source=source, embedding=embedding, metadata=metadata
    )


def contents(results):
    return [r.content for r in results]


# --------------------------------------------------------------------------------------
# A plain reference implementation: the textbook incremental algorithm with Python loops.
# Similarities use the module's documented formula, (a . b) * inv|b| * inv|a| clipped to
# [-1, 1], so with integer-valued vectors (exact dot products) every number matches the
# vectorised code bit for bit, and ties are broken identically.
# --------------------------------------------------------------------------------------


def _inv_norm(vector):
    if vector is None:
        return 0.0
    sq = float(vector @ vector)
    return 0.0 if sq == 0 else 1.0 / math.sqrt(sq)


def _cosine(candidate, pick):
    """Similarity of `candidate` to `pick` (either may be None = no embedding)."""
    if candidate is None or pick is None:
        return 0.0
    raw = float(candidate @ pick)
    value = (raw * _inv_norm(pick)) * _inv_norm(candidate)
    return min(1.0, max(-1.0, value))


def _vector(r):
    return None if r.embedding is None else np.asarray(r.embedding, dtype=np.float64)


def _merged(candidates):
    best = {}
    for i, c in enumerate(candidates):
        j = best.get(c.content)
        if j is None or c.score > candidates[j].score:
            best[c.content] = i
    return [candidates[i] for i in sorted(best.values())]


def reference_mmr(candidates, *, top_k=None, lambda_=0.7, dedup_threshold=0.95):
    pool = _merged(candidates)
    n = len(pool)
    limit = n if top_k is None else min(top_k, n)
    if limit == 0:
        return []
    vectors = [_vector(c) for c in pool]
    first = 0
    for i in range(1, n):
        if pool[i].score > pool[first].score:
            first = i
    picks = [first]
    alive = [i for i in range(n) if i != first]
    max_sim = dict.fromkeys(range(n), -math.inf)
    while len(picks) < limit:
        newest = vectors[picks[-1]]
        for i in alive:
            max_sim[i] = max(max_sim[i], _cosine(vectors[i], newest))
        alive = [i for i in alive if max_sim[i] < dedup_threshold]
        if not alive:
            break
        winner, winner_score = None, -math.inf
        for i in alive:  # ascending index: strict > keeps the earliest of equal scores
            score = lambda_ * pool[i].score - (1.0 - lambda_) * max_sim[i]
            if winner is None or score > winner_score:
                winner, winner_score = i, score
        picks.append(winner)
        alive.remove(winner)
    return [pool[i] for i in picks]


# --------------------------------------------------------------------------------------
# The specification's example
# --------------------------------------------------------------------------------------


def test_spec_example_prints_exactly_two_lines(capsys):
    candidates = [
        RetrievalResult(
            content="Cats are great pets.", score=0.9, source="rag", embedding=[1.0, 0.0]
        ),
        RetrievalResult(
            content="Cats make wonderful pets.", score=0.8, source="rag", embedding=[0.99, 0.01]
        ),
        RetrievalResult(
            content="The Eiffel Tower is in Paris.", score=0.6, source="rag", embedding=[0.0, 1.0]
        ),
    ]
    selected = mmr_select(candidates, top_k=2, lambda_=0.7)
    for r in selected:
        print(r.content)  # noqa: T201 - the specification example prints
    assert capsys.readouterr().out == "Cats are great pets.\nThe Eiffel Tower is in Paris.\n"
    assert selected[0] is candidates[0]
    assert selected[1] is candidates[2]


@pytest.mark.parametrize("doc", [mmr.__doc__, mmr_select.__doc__], ids=["module", "function"])
def test_docstring_examples_run_and_print_the_documented_lines(doc):
    code = textwrap.dedent(doc.split("```python\n", 1)[1].split("```", 1)[0])
    printed = []
    namespace = {"print": printed.append, "RetrievalResult": RetrievalResult}
    namespace["mmr_select"] = mmr_select
    exec(code, namespace)  # noqa: S102 - our own docstring
    assert printed == ["Cats are great pets.", "The Eiffel Tower is in Paris."]
    assert "# Cats are great pets.\n# The Eiffel Tower is in Paris." in code


def test_mmr_indices_docstring_example_prints_the_documented_picks(capsys):
    code = textwrap.dedent(mmr.mmr_indices.__doc__.split("```python\n", 1)[1].split("```", 1)[0])
    exec(code, {})  # noqa: S102 - our own docstring
    assert capsys.readouterr().out == "[0, 2]\n"
    assert "# [0, 2]" in code


# --------------------------------------------------------------------------------------
# Behaviour
# --------------------------------------------------------------------------------------


def test_identical_contents_are_merged_keeping_the_highest_score():
    low = result("same text", 0.2, [1.0, 0.0])
    high = result("same text", 0.9, [0.0, 1.0])
    other = result("other text", 0.5, [1.0, 1.0])
    selected = mmr_select([low, other, high], dedup_threshold=NO_DEDUP)
    assert len(selected) == 2
    assert selected[0] is high
    assert selected[1] is other
    assert all(r is not low for r in selected)


def test_merge_tie_keeps_the_earliest_and_only_byte_identical_contents_merge():
    first = result("text", 0.5)
    second = result("text", 0.5)
    padded = result("text ", 0.5)  # differs by one byte: a different passage
    selected = mmr_select([first, second, padded])
    assert selected == [first, padded]
    assert selected[0] is first


def test_without_embeddings_results_come_in_score_order():
    candidates = [result(f"doc {i}", s) for i, s in enumerate([0.1, 0.7, 0.3, 0.7, 0.9])]
    selected = mmr_select(candidates, lambda_=0.5)
    # Similarity 0 to everything: no penalty, no dropping; ties keep input order.
    assert contents(selected) == ["doc 4", "doc 1", "doc 3", "doc 2", "doc 0"]


def test_missing_embedding_counts_as_similarity_zero():
    a = result("a", 0.9, [1.0, 0.0])
    near_a = result("near a", 0.85, [1.0, 0.05])
    no_vector = result("no vector", 0.5)
    selected = mmr_select([a, near_a, no_vector], top_k=2, lambda_=0.5, dedup_threshold=NO_DEDUP)
    # near_a: 0.5 * 0.85 - 0.5 * 0.9988 < no_vector: 0.5 * 0.5 - 0.5 * 0
    assert selected == [a, no_vector]


def test_zero_vector_counts_as_similarity_zero():
    a = result("a", 0.9, [1.0, 0.0])
    opposite = result("opposite", 0.5, [-1.0, 0.0])
    zero = result("zero", 0.5, [0.0, 0.0])
    selected = mmr_select([a, opposite, zero], lambda_=0.5, dedup_threshold=NO_DEDUP)
    # opposite: 0.25 - 0.5 * (-1) = 0.75 > zero: 0.25 - 0 = 0.25
    assert selected == [a, opposite, zero]
    selected = mmr_select([zero, a], dedup_threshold=0.0)  # similarity 0 >= 0: dropped
    assert selected == [a]


def test_picking_a_vectorless_result_lifts_negative_similarities_to_zero():
    a = result("a", 0.9, [1.0, 0.0])
    none = result("none", 0.8)
    opposite = result("opposite", 0.1, [-1.0, 0.0])
    orthogonal = result("orthogonal", 0.2, [0.0, 1.0])
    selected = mmr_select([a, none, opposite, orthogonal], lambda_=0.5)
    # After "a": none 0.4, opposite 0.05 + 0.5 = 0.55, orthogonal 0.1 -> opposite.
    # After "opposite": none 0.4 - 0, orthogonal 0.1 - 0 -> none; then orthogonal.
    assert contents(selected) == ["a", "opposite", "none", "orthogonal"]


def test_near_duplicates_are_dropped():
    a = result("a", 0.9, [1.0, 0.0])
    near_a = result("near a", 0.89, [1.0, 0.01])  # cosine 0.99995
    b = result("b", 0.1, [0.0, 1.0])
    assert mmr_select([a, near_a, b], lambda_=1.0) == [a, b]
    assert mmr_select([a, near_a, b], lambda_=1.0, top_k=2) == [a, b]
    # The threshold is inclusive: similarity exactly 1 >= 1.0.
    twin = result("twin", 0.5, [2.0, 0.0])
    assert mmr_select([a, twin, b], lambda_=1.0, dedup_threshold=1.0) == [a, b]


def test_threshold_above_one_disables_dropping():
    a = result("a", 0.9, [1.0, 0.0])
    twin = result("twin", 0.8, [3.0, 0.0])  # cosine exactly 1
    b = result("b", 0.1, [0.0, 1.0])
    assert mmr_select([a, twin, b], lambda_=1.0, dedup_threshold=NO_DEDUP) == [a, twin, b]
    assert mmr_select([a, twin, b], lambda_=1.0, dedup_threshold=1.0 + 1e-12) == [a, twin, b]


def test_rounding_above_one_is_clipped():
    # With these vectors the similarity formula rounds to 1 + 2**-52 (and -1 - 2**-52).
    v = [3.0, 3.0]
    a = result("a", 0.9, v)
    twin = result("twin", 0.8, v)
    just_above_one = float(np.nextafter(1.0, 2.0))
    assert mmr_select([a, twin], dedup_threshold=just_above_one) == [a, twin]


def test_rounding_below_minus_one_is_clipped():
    # cos(-v, v) rounds to -1 - 2**-52 and cos(-3v, v) to -1 exactly; both must count as
    # -1, so the two equal-score candidates tie and the earlier one wins.
    a = result("a", 1.0, [3.0, 3.0])
    triple = result("triple", 0.5, [-9.0, -9.0])
    single = result("single", 0.5, [-3.0, -3.0])
    selected = mmr_select([a, triple, single], lambda_=0.5, dedup_threshold=NO_DEDUP)
    assert selected == [a, triple, single]


def test_lambda_one_is_pure_relevance_order_with_dedup_still_applied():
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((30, 8))
    vectors[5] = vectors[2] * 1.001  # a near-duplicate of candidate 2
    scores = rng.permutation(np.linspace(0.0, 1.0, 30))
    scores[5] = scores[2] - 1e-6  # ranked right after it, but must be dropped
    candidates = [
        result(f"doc {i}", float(s), v)
        for i, (s, v) in enumerate(zip(scores, vectors, strict=True))
    ]
    selected = mmr_select(candidates, lambda_=1.0)
    expected = [c for c in sorted(candidates, key=lambda c: -c.score) if c is not candidates[5]]
    assert selected == expected


def test_lambda_zero_picks_by_diversity_only_after_the_first():
    a = result("a", 0.1, [1.0, 0.0])
    close = result("close", 0.9, [1.0, 0.2])
    far = result("far", 0.0, [0.0, 1.0])
    start = result("start", 1.0, [1.0, 0.1])
    assert mmr_select([a, close, far, start], lambda_=0.0, dedup_threshold=NO_DEDUP)[:2] == [
        start,
        far,
    ]


def test_top_k_limits():
    candidates = [result(f"doc {i}", 1.0 - i / 10, [1.0, float(i)]) for i in range(6)]
    assert mmr_select(candidates, top_k=0) == []
    assert mmr_select([], top_k=3) == []
    assert mmr_select([]) == []
    assert mmr_select(candidates, top_k=1) == [candidates[0]]
    assert len(mmr_select(candidates, top_k=3, dedup_threshold=NO_DEDUP)) == 3
    assert len(mmr_select(candidates, top_k=100, dedup_threshold=NO_DEDUP)) == 6
    assert len(mmr_select(candidates, top_k=None, dedup_threshold=NO_DEDUP)) == 6
    assert mmr_select(candidates, top_k=np.int64(2), dedup_threshold=NO_DEDUP) == mmr_select(
        candidates, top_k=2, dedup_threshold=NO_DEDUP
    )


def test_top_k_none_returns_everything_but_dropped_near_duplicates():
    candidates = [
        result("a", 0.9, [1.0, 0.0]),
        result("a'", 0.8, [1.0, 0.001]),
        result("b", 0.7, [0.0, 1.0]),
        result("b'", 0.6, [0.001, 1.0]),
        result("c", 0.5, [1.0, 1.0]),
    ]
    assert contents(mmr_select(candidates)) == ["a", "b", "c"]


def test_returns_input_objects_without_duplicates():
    candidates = [result(f"doc {i}", float(i % 3), [float(i), 1.0]) for i in range(8)]
    selected = mmr_select(candidates, top_k=5, dedup_threshold=NO_DEDUP)
    assert len({id(r) for r in selected}) == 5
    assert all(any(r is c for c in candidates) for r in selected)


def test_float32_and_float64_inputs_give_the_same_picks():
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((200, 32))
    scores = rng.random(200)
    as64 = [
        result(f"d{i}", float(s), row)
        for i, (s, row) in enumerate(zip(scores, matrix, strict=True))
    ]
    rows32 = matrix.astype(np.float32)
    as32 = [
        result(f"d{i}", float(s), row)
        for i, (s, row) in enumerate(zip(scores, rows32, strict=True))
    ]
    picks64 = mmr_select(as64, top_k=20, dedup_threshold=0.5)
    picks32 = mmr_select(as32, top_k=20, dedup_threshold=0.5)
    assert contents(picks32) == contents(picks64)
    assert all(r.embedding.dtype == np.float32 for r in picks32)


@pytest.mark.parametrize(
    ("embeddings", "dtype"),
    [
        ([np.ones(3, dtype=np.float32), np.arange(3, dtype=np.float32)], np.float32),
        ([np.ones(3), np.arange(3.0)], np.float64),
        ([[1.0, 1.0, 1.0], [0.0, 1.0, 2.0]], np.float64),
        ([[1, 1, 1], [0, 1, 2]], np.float64),
        ([np.ones(3, dtype=np.float16), np.arange(3, dtype=np.float16)], np.float32),
        ([np.ones(3, dtype=np.float32), None], np.float32),
    ],
)
def test_embedding_dtype_is_kept_or_made_float(embeddings, dtype):
    pool = [result(f"d{i}", 0.5, e) for i, e in enumerate(embeddings)]
    matrix, inv_norm = mmr._stacked_embeddings([c.embedding for c in pool])
    assert matrix.dtype == dtype
    assert inv_norm.dtype == dtype
    assert matrix.shape == (len(embeddings), 3)


def test_mixed_list_and_array_embeddings():
    candidates = [
        result("list", 0.9, [1.0, 0.0]),
        result("array", 0.8, np.array([0.0, 1.0], dtype=np.float32)),
        result("tuple", 0.7, (1, 1)),
        result("none", 0.6),
    ]
    assert contents(mmr_select(candidates, lambda_=0.5)) == ["list", "array", "none", "tuple"]


def test_only_zero_length_embeddings():
    candidates = [result("a", 0.2, []), result("b", 0.9, [])]
    assert contents(mmr_select(candidates)) == ["b", "a"]


def test_extreme_magnitudes_keep_their_direction():
    # Squared norms overflow (1e200) or underflow (1e-200) in float64: rows are rescaled.
    huge = result("huge", 0.9, [1e200, 0.0])
    tiny_twin = result("tiny twin", 0.8, [1e-200, 0.0])
    other = result("other", 0.1, [0.0, 1e-200])
    assert mmr_select([huge, tiny_twin, other], lambda_=1.0) == [huge, other]
    assert mmr_select([huge, tiny_twin, other], dedup_threshold=NO_DEDUP, lambda_=1.0) == [
        huge,
        tiny_twin,
        other,
    ]


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------

GOOD = [result("a", 0.5, [1.0, 0.0]), result("b", 0.4, [0.0, 1.0])]


@pytest.mark.parametrize("lambda_", [-0.01, 1.01, math.nan, math.inf, "high", None])
def test_bad_lambda(lambda_):
    with pytest.raises(ConfigError, match="lambda_"):
        mmr_select(GOOD, lambda_=lambda_)


@pytest.mark.parametrize("top_k", [-1, 1.5, "3", True])
def test_bad_top_k(top_k):
    with pytest.raises(ConfigError, match="top_k"):
        mmr_select(GOOD, top_k=top_k)


@pytest.mark.parametrize("threshold", [math.nan, "0.9"])
def test_bad_threshold(threshold):
    with pytest.raises(ConfigError, match="dedup_threshold"):
        mmr_select(GOOD, dedup_threshold=threshold)


def test_argument_errors_even_without_candidates():
    with pytest.raises(ConfigError):
        mmr_select([], lambda_=2.0)
    with pytest.raises(ConfigError):
        mmr_select([], top_k=-1)


def test_mismatched_embedding_sizes_name_both_sizes():
    candidates = [result("a", 0.5, [1.0, 0.0]), result("b", 0.4), result("c", 0.3, [1.0, 2, 3])]
    with pytest.raises(
        ConfigError, match=r"2 \(first at candidate 0\).*3 \(first at candidate 2\)"
    ):
        mmr_select(candidates)
    arrays = [result("a", 0.5, np.zeros(4)), result("b", 0.4, np.zeros(5))]
    with pytest.raises(ConfigError, match=r"4 .*5 "):
        mmr_select(arrays)


@pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf])
def test_non_finite_score(score):
    candidates = [result("a", 0.5), result("b", score)]
    with pytest.raises(ConfigError, match="candidate 1 has a non-finite score"):
        mmr_select(candidates)


def test_non_numeric_score():
    with pytest.raises(ConfigError, match=r"candidate 1 .*not a number"):
        mmr_select([result("a", 0.5), result("b", "high")])


@pytest.mark.parametrize("bad", [math.nan, math.inf])
@pytest.mark.parametrize("as_array", [False, True])
def test_non_finite_embedding(bad, as_array):
    vector = [1.0, bad]
    candidates = [
        result("a", 0.5, [1.0, 0.0]),
        result("b", 0.4, [0.5, 0.5]),
        result("c", 0.3, np.array(vector) if as_array else vector),
    ]
    with pytest.raises(ConfigError, match="candidate 2 has an embedding with NaN"):
        mmr_select(candidates)


def test_error_names_the_input_position_after_merging():
    candidates = [result("dup", 0.1), result("dup", 0.2), result("x", 0.3, [math.nan])]
    with pytest.raises(ConfigError, match="candidate 2 "):
        mmr_select(candidates)


def test_embedding_must_be_a_numeric_vector():
    with pytest.raises(ConfigError, match="shape"):
        mmr_select([result("a", 0.5, [[1.0, 0.0]]), result("b", 0.4, [1.0, 0.0])])
    with pytest.raises(ConfigError, match="non-numeric"):
        mmr_select([result("a", 0.5, ["x", "y"]), result("b", 0.4, [1.0, 0.0])])


def test_config_error_is_a_value_error():
    with pytest.raises(ValueError, match="lambda_"):
        mmr_select(GOOD, lambda_=-1)


# --------------------------------------------------------------------------------------
# Documents
# --------------------------------------------------------------------------------------


def test_to_document_has_score_and_source_but_no_embedding():
    r = result("text", 0.75, np.arange(1536, dtype=np.float32), source="wiki", lang="en")
    doc = r.to_document()
    assert isinstance(doc, Document)
    assert doc.page_content == "text"
    assert doc.metadata == {"lang": "en", "contextkit_score": 0.75, "contextkit_source": "wiki"}
    assert "embedding" not in repr(doc)
    doc.metadata["lang"] = "fr"
    assert r.metadata == {"lang": "en"}  # a copy, not the result's own dict


def test_from_document_reads_score_and_source_from_metadata():
    doc = Document(page_content="p", metadata={"source": "s.txt", "score": 0.25, "page": 3})
    r = RetrievalResult.from_document(doc)
    # A loader's own keys give the defaults, and stay in the metadata as they were.
    assert (r.content, r.score, r.source) == ("p", 0.25, "s.txt")
    assert r.metadata == {"source": "s.txt", "score": 0.25, "page": 3}
    assert doc.metadata == {"source": "s.txt", "score": 0.25, "page": 3}  # untouched


def test_a_loaders_source_path_survives_the_round_trip():
    doc = Document(page_content="p", metadata={"source": "docs/runbook.md", "page": 3})
    r = RetrievalResult.from_document(doc, source="rag", score=0.9)
    assert (r.source, r.metadata["source"]) == ("rag", "docs/runbook.md")
    back = r.to_document()
    assert back.metadata["source"] == "docs/runbook.md"
    assert (back.metadata["contextkit_source"], back.metadata["contextkit_score"]) == ("rag", 0.9)
    assert RetrievalResult.from_document(back) == r


def test_from_document_arguments_win_and_score_defaults_to_zero():
    doc = Document(page_content="p", metadata={"source": "meta", "score": 0.25})
    r = RetrievalResult.from_document(doc, source="arg", score=0.5, embedding=[1.0])
    assert (r.source, r.score, r.embedding) == ("arg", 0.5, [1.0])
    assert r.metadata == {"source": "meta", "score": 0.25}
    r = RetrievalResult.from_document(Document(page_content="p"), source="arg")
    assert r.score == 0.0
    assert isinstance(r.score, float)


def test_from_document_needs_a_source():
    with pytest.raises(ConfigError, match="source"):
        RetrievalResult.from_document(Document(page_content="p", metadata={"score": 1.0}))
    with pytest.raises(ConfigError, match="source must be a string"):
        RetrievalResult.from_document(Document(page_content="p", metadata={"source": 3}))
    with pytest.raises(ConfigError, match="score must be a number"):
        RetrievalResult.from_document(Document(page_content="p"), source="s", score="high")


@pytest.mark.parametrize(
    "embedding", [None, [0.5, -1.0], np.array([0.5, -1.0]), np.ones(3, dtype=np.float32)]
)
def test_document_round_trip(embedding):
    r = RetrievalResult(
        content="text", score=0.5, source="src", embedding=embedding, metadata={"k": [1, 2]}
    )
    back = RetrievalResult.from_document(r.to_document(), embedding=r.embedding)
    assert back == r
    assert back.embedding is r.embedding


def test_equality_compares_embedding_values():
    a = result("t", 0.5, np.array([1.0, 2.0]))
    assert a == result("t", 0.5, np.array([1.0, 2.0]))  # distinct arrays, same vector
    assert a == result("t", 0.5, [1.0, 2.0])
    assert a != result("t", 0.5, np.array([1.0, 3.0]))
    assert a != result("t", 0.5)
    assert a != result("t", 0.6, np.array([1.0, 2.0]))
    assert a != "t"


def test_type_hints_resolve_at_runtime():
    hints = typing.get_type_hints(RetrievalResult)
    assert hints["score"] is float
    assert set(hints) == {"content", "score", "source", "embedding", "metadata"}


def test_result_is_frozen():
    r = result("t", 0.5)
    with pytest.raises(AttributeError):
        r.score = 1.0  # type: ignore[misc]


# --------------------------------------------------------------------------------------
# Agreement with langchain-core and with the reference implementation
# --------------------------------------------------------------------------------------


def _cosine_to_query(matrix, query):
    return (matrix @ query) / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))


@pytest.mark.parametrize("lambda_", [0.0, 0.25, 0.5, 0.7, 0.9, 1.0])
@pytest.mark.parametrize("seed", range(4))
def test_same_picks_as_langchain_core(lambda_, seed):
    rng = np.random.default_rng(seed)
    n, d, k = 60, 12, 15
    if seed % 2:  # clustered: near-duplicates present
        centres = rng.standard_normal((6, d))
        matrix = centres[rng.integers(0, 6, n)] + 0.05 * rng.standard_normal((n, d))
    else:
        matrix = rng.standard_normal((n, d))
    query = rng.standard_normal(d)
    scores = _cosine_to_query(matrix, query)
    candidates = [
        result(f"d{i}", float(s), row)
        for i, (s, row) in enumerate(zip(scores, matrix, strict=True))
    ]
    expected = maximal_marginal_relevance(query, list(matrix), lambda_mult=lambda_, k=k)
    selected = mmr_select(candidates, top_k=k, lambda_=lambda_, dedup_threshold=NO_DEDUP)
    assert [candidates.index(r) for r in selected] == expected


def _integer_candidates(rng, n, d, *, missing=0.1, duplicates=0.1):
    """Candidates with small integer vectors (exact dot products, many exact ties)."""
    vectors = rng.integers(-2, 3, size=(n, d)).astype(np.float64)
    scores = rng.integers(0, 8, size=n) / 8
    candidates = []
    for i in range(n):
        text = f"doc {rng.integers(0, n // 2)}" if rng.random() < duplicates else f"doc {i}"
        embedding = None if rng.random() < missing else vectors[i]
        candidates.append(result(text, float(scores[i]), embedding))
    return candidates


def test_no_limit_picks_everything_in_reference_order():
    rng = np.random.default_rng(11)
    candidates = _integer_candidates(rng, 300, 5, duplicates=0.0)
    selected = mmr_select(candidates, lambda_=0.5, dedup_threshold=NO_DEDUP)
    expected = reference_mmr(candidates, lambda_=0.5, dedup_threshold=NO_DEDUP)
    assert len(selected) == 300
    assert [id(r) for r in selected] == [id(r) for r in expected]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("lambda_", [0.3, 0.7])
def test_matches_reference_on_larger_inputs_with_ties(seed, lambda_):
    # Large enough for several blocks, refresh batches and the full-matrix path.
    rng = np.random.default_rng(seed)
    candidates = _integer_candidates(rng, 400, 6)
    for threshold in (0.9, NO_DEDUP):
        expected = reference_mmr(candidates, top_k=60, lambda_=lambda_, dedup_threshold=threshold)
        selected = mmr_select(candidates, top_k=60, lambda_=lambda_, dedup_threshold=threshold)
        assert [id(r) for r in selected] == [id(r) for r in expected]


@pytest.mark.parametrize("seed", range(3))
def test_random_vectors_match_reference(seed):
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((150, 4))
    scores = rng.random(150)
    candidates = [
        result(f"d{i}", float(s), row)
        for i, (s, row) in enumerate(zip(scores, matrix, strict=True))
    ]
    for lambda_ in (0.3, 0.7):
        selected = mmr_select(candidates, top_k=30, lambda_=lambda_, dedup_threshold=0.9)
        expected = reference_mmr(candidates, top_k=30, lambda_=lambda_, dedup_threshold=0.9)
        assert [id(r) for r in selected] == [id(r) for r in expected]


@st.composite
def mmr_problems(draw):
    n = draw(st.integers(0, 14))
    d = draw(st.integers(1, 4))
    component = st.integers(-2, 2).map(float)
    embedding = st.one_of(st.none(), st.lists(component, min_size=d, max_size=d))
    score = st.one_of(st.sampled_from([0.0, 0.25, 0.5, 1.0, -0.5]), st.floats(-1, 1))
    text = st.sampled_from(["a", "b", "c", "d", "e"]) | st.text(min_size=1, max_size=3)
    candidates = [
        RetrievalResult(
            content=draw(text), score=draw(score), source="h", embedding=draw(embedding)
        )
        for _ in range(n)
    ]
    top_k = draw(st.none() | st.integers(0, n + 2))
    lambda_ = draw(st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]) | st.floats(0, 1))
    threshold = draw(st.sampled_from([-0.5, 0.0, 0.5, 0.9, 0.95, 1.0, 1.01]))
    return candidates, top_k, lambda_, threshold


@settings(max_examples=250, deadline=None)
@given(problem=mmr_problems())
def test_properties_and_agreement_with_reference(problem):
    check_against_reference(*problem)


def test_tie_between_a_stale_bound_and_the_best_exact_score():
    # Found by hypothesis: with lambda_=0 every bound and exact score is a multiple of
    # the same few values, so a never-refreshed candidate's bound can equal the best exact
    # score exactly; it must be refreshed before the tie is broken by position.
    vector = [1.0, 0.0, 0.0, 0.0]
    candidates = [
        result("a", 0.0, vector),
        result("a", 0.0),
        result("c", 0.0, vector),
        result("d", 0.25),
        result("b", 0.0),
        result("0", 0.0),
    ]
    check_against_reference(candidates, None, 0.0, 0.5)


def check_against_reference(candidates, top_k, lambda_, threshold):
    selected = mmr_select(candidates, top_k=top_k, lambda_=lambda_, dedup_threshold=threshold)

    # Same picks, in the same order, as the plain incremental algorithm.
    expected = reference_mmr(candidates, top_k=top_k, lambda_=lambda_, dedup_threshold=threshold)
    assert [id(r) for r in selected] == [id(r) for r in expected]

    # Never more than top_k; only input objects; no object twice; no content twice.
    if top_k is not None:
        assert len(selected) <= top_k
    input_ids = {id(c) for c in candidates}
    assert all(id(r) in input_ids for r in selected)
    assert len({id(r) for r in selected}) == len(selected)
    assert len({r.content for r in selected}) == len(selected)

    # No returned result is a near-duplicate of one returned before it.
    vectors = [_vector(r) for r in selected]
    for later in range(len(selected)):
        for earlier in range(later):
            assert _cosine(vectors[later], vectors[earlier]) < threshold

    # Nothing is lost without a reason: with no limit and no dropping, all unique
    # contents come back.
    if top_k is None and threshold > 1:
        assert len(selected) == len({c.content for c in candidates})


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 120),
    k=st.integers(1, 40),
    lambda_=st.floats(0, 1),
    threshold=st.sampled_from([0.5, 0.8, 0.95, NO_DEDUP]),
)
def test_random_real_vectors_agree_with_reference(seed, n, k, lambda_, threshold):
    # Continuous random data: no exact ties, so rounding differences cannot flip a pick.
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((n, 5))
    scores = rng.random(n)
    candidates = [
        result(f"d{i}", float(s), row)
        for i, (s, row) in enumerate(zip(scores, matrix, strict=True))
    ]
    selected = mmr_select(candidates, top_k=k, lambda_=lambda_, dedup_threshold=threshold)
    expected = reference_mmr(candidates, top_k=k, lambda_=lambda_, dedup_threshold=threshold)
    assert [id(r) for r in selected] == [id(r) for r in expected]


# --- MMRRanking: the lazy form the context builder uses --------------------------------------


@given(data=st.data())
@settings(max_examples=150, deadline=None)
def test_lazy_ranking_yields_exactly_the_picks_of_mmr_select(data: st.DataObject) -> None:
    n = data.draw(st.integers(0, 60))
    d = data.draw(st.integers(1, 6))
    vectors = data.draw(
        st.lists(
            st.lists(st.floats(-1, 1, width=32), min_size=d, max_size=d), min_size=n, max_size=n
        )
    )
    scores = data.draw(st.lists(st.floats(0, 1), min_size=n, max_size=n))
    texts = data.draw(st.lists(st.sampled_from("abcdefghij"), min_size=n, max_size=n))
    candidates = [
        RetrievalResult(content=t, score=s, source="rag", embedding=v)
        for t, s, v in zip(texts, scores, vectors, strict=True)
    ]
    lam = data.draw(st.floats(0, 1))
    threshold = data.draw(st.sampled_from([0.5, 0.95, 1.01]))
    expected = mmr_select(candidates, lambda_=lam, dedup_threshold=threshold)
    ranking = MMRRanking(candidates, lambda_=lam, dedup_threshold=threshold)
    stop = data.draw(st.integers(0, len(expected)))
    first = [ranking.candidates[i] for i in itertools.islice(ranking, stop)]
    assert [id(r) for r in first] == [id(r) for r in expected[:stop]]
    replay = [ranking.candidates[i] for i in ranking]  # replays, then continues
    assert [id(r) for r in replay] == [id(r) for r in expected]
    assert ranking.merged + ranking.dropped + len(expected) == len(candidates)


def test_lazy_ranking_computes_only_what_is_pulled() -> None:
    rng = np.random.default_rng(7)
    candidates = [
        RetrievalResult(
            content=f"doc {i}", score=1 - i / 5000, source="rag", embedding=rng.normal(size=16)
        )
        for i in range(5000)
    ]
    ranking = MMRRanking(candidates)
    first = list(itertools.islice(ranking, 3))
    assert first[0] == 0  # the best score
    assert list(itertools.islice(ranking, 3)) == first  # a second pass replays
    assert len(ranking._picks) == 3  # computed only as pulled, not all 5000


def test_lazy_ranking_of_nothing() -> None:
    ranking = MMRRanking([])
    assert list(ranking) == []
    assert (ranking.merged, ranking.dropped) == (0, 0)


def test_lazy_ranking_checks_arguments() -> None:
    with pytest.raises(ConfigError):
        MMRRanking([], lambda_=2.0)
