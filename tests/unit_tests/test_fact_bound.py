"""The cold fold's cheaper searches (`_fact_bound`, `_cold_fold`) find what the old ones find."""

from __future__ import annotations

import re

from hypothesis import given, settings, strategies as st
from langchain_core.messages import AIMessage, HumanMessage

from langchain_contextkit.compaction import _cold_fold, _fact_bound
from langchain_contextkit.compaction.extractive import ExtractiveSummarizer
from langchain_contextkit.compaction.facts import has_decision, is_decided, split_sentences

# The patterns the fold used before: the cheaper forms must agree with them everywhere.
OLD_NAME_DIGIT_HINT = re.compile(r"(?<![A-Za-z])[A-Za-z][A-Za-z_\-./#:@]*+\d|`")
OLD_LONG_NUMBER = re.compile(r"[$€£¥]\d|\d[\d.,:/\-]\d|\d\d%")
OLD_NAME_HINT = re.compile(r"\w[_\-./#:@]+\w|[A-Za-z]\d|[a-z][A-Z]|[A-Z][A-Z]|`")
OLD_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")

FRAGMENTS = [
    "decided", "DECİDED", "decıde", "ſo we", "So  We", "agree on", "going with", "go with",
    "root cause", "NEXT STEP", "planning", "will", "wıll", "must", "\u212aeep", "thus", "决定",
    "原因是", "结果", "下一步", "opted", "settled on", "the answer is", "x", "a", "。", ".", " ",
    "\n", "_", "db-7", "K9", "\u0307", "because", "fixed", "deadline", "confirmed",
]  # fmt: skip


@settings(max_examples=800, deadline=None)
@given(st.text(alphabet="aZk9_-./#:@` Ab1$%,\u00a0\u3000", max_size=18))
def test_the_name_digit_hint_is_the_pattern_it_replaces(text: str) -> None:
    expected = OLD_NAME_DIGIT_HINT.search(text) is not None
    assert _fact_bound._name_digit_hint(text) == expected


@settings(max_examples=800, deadline=None)
@given(st.text(alphabet="1²9.,:/-%$€£¥ a٣", max_size=12))
def test_the_long_number_search_is_the_pattern_it_replaces(text: str) -> None:
    assert _fact_bound._long_number(text) == (OLD_LONG_NUMBER.search(text) is not None)


@settings(max_examples=1_000, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=8), st.sampled_from(["", " ", "\n ", "\t"]))
def test_a_word_search_skipped_by_its_stems_would_have_found_nothing(
    words: list[str], glue: str
) -> None:
    """The stems are looked for in the text as it is; the word lists read it collapsed."""
    text = glue.join(words)
    collapsed = " ".join(text.split())
    if is_decided(collapsed):
        assert _fact_bound._may_hold(_fact_bound._DECIDED_STEMS, text)
    if has_decision(collapsed):
        assert _fact_bound._may_hold(_fact_bound._DECISION_STEMS, text)


@settings(max_examples=1_000, deadline=None)
@given(st.text(alphabet="aZk9_-./#:@` Ab\u00b2\u0663\u00e9\u00c9\u4e00\n", max_size=16))
def test_the_name_hint_is_the_pattern_it_replaces(text: str) -> None:
    assert _fact_bound._name_hint(text) == (OLD_NAME_HINT.search(text) is not None)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([*FRAGMENTS, "Order 4471 is late.", "\\fB2\\fR", "<b>x</b>", "v3.11.7"]),
        min_size=1,
        max_size=10,
    ),
    st.sampled_from(["human", "ai"]),
    st.lists(st.integers(min_value=0, max_value=13), min_size=1, max_size=4),
)
def test_a_sentence_bounded_within_its_message_is_bounded_the_same(
    words: list[str], kind: str, levels: list[int]
) -> None:
    """What the message's searches did not find only saves searches: every `at` agrees."""
    text = " ".join(words)
    message = HumanMessage(text) if kind == "human" else AIMessage(text)
    whole = _cold_fold._message_facts(message)
    if whole is None:
        return  # read through its transcript: bounded sentence by sentence
    levels = sorted(levels, reverse=True)
    for level in levels[:2]:
        whole.at(level)  # what the fold searched of the message before reading it
    prompts = ExtractiveSummarizer().prompts
    for label, _, sentence in _cold_fold._read(message, prompts):
        alone = _fact_bound.FactBound(sentence, label)
        within = _fact_bound.FactBound(sentence, label, within=whole)
        assert within.holds() == alone.holds()
        for level in levels:
            assert within.at(level) == alone.at(level)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab 1\t\n\u00a0\u3000\u2028\x85é决", max_size=12))
def test_the_wide_character_search_is_the_whitespace_free_ascii_test(text: str) -> None:
    """`_NOT_ASCII` finds nothing exactly where the text without whitespace is ASCII."""
    expected = "".join(text.split()).isascii()
    assert (_fact_bound._NOT_ASCII.search(text) is None) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([*FRAGMENTS, "Order 4471", "\\fB2\\fR", "<b>", "x²"]), max_size=10),
    st.sampled_from(["User", "Assistant", "Tool", "Tool (lookup)", "System", "Note"]),
    st.booleans(),
)
def test_a_fresh_bound_before_word_searches_is_at_of_a_level_above_all(
    words: list[str], label: str, spaced: bool
) -> None:
    text = " ".join(words)
    first = _fact_bound.first_facts(text, spaced=spaced)
    assert _fact_bound.first_bound(first, label) == (
        _fact_bound.FactBound(text, label, spaced=spaced).at(_cold_fold._STATED_BOUND + 1)
    )


@settings(max_examples=1_000, deadline=None)
@given(st.text(alphabet="ab .!?。！？；\n\t\r\u3000\u2028x", max_size=24))
def test_the_sentence_split_is_the_pattern_it_replaces(text: str) -> None:
    pieces = (" ".join(piece.split()) for piece in OLD_SENTENCE_END.split(text))
    assert split_sentences(text) == [piece for piece in pieces if piece]
