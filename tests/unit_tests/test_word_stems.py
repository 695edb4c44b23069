"""`pattern_stems`: every match of a word list holds one of the stems read off its pattern."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings, strategies as st

from langchain_contextkit.compaction import facts
from langchain_contextkit.compaction._word_stems import pattern_stems

# The word lists the cold fold skips by their stems, and patterns written the same way.
PATTERNS = [
    facts._DECIDED.ascii.pattern,
    facts._DECISION.ascii.pattern,
    r"\b(?:go(?:ing)? with|ship(?:s|ped)?|x[a-c]+y|re-?open\w*|a{2}b|[^z]ok)\b|完成",
    r"(?:alpha|be(?:ta)?)\s+gamma|delta\d+|(eps)+ilon|zeta\b",
]
FRAGMENTS = [
    "decided", "agree on", "go with", "going  with", "ships", "shipped", "xaby", "reopened",
    "re-open", "aab", "ok", "zok", "alpha gamma", "be  gamma", "delta7", "epsepsilon", "zeta",
    "root cause", "so we", "完成", "因此", "the answer is", "x", " ", "-", "\n",
]  # fmt: skip


@pytest.mark.parametrize("pattern", PATTERNS)
@settings(max_examples=400, deadline=None)
@given(words=st.lists(st.sampled_from(FRAGMENTS), max_size=6), glue=st.sampled_from(["", " "]))
def test_every_match_holds_a_stem(pattern: str, words: list[str], glue: str) -> None:
    stems = pattern_stems(pattern)
    assert stems is not None
    text = glue.join(words)
    if re.search(pattern, text, re.IGNORECASE):
        lowered = " ".join(text.lower().split())
        assert any(" ".join(stem.split()) in lowered for stem in stems), (pattern, text)


def test_a_word_added_to_a_list_is_a_stem_of_its_own() -> None:
    before = pattern_stems(r"\b(?:settled on|chose)\b")
    after = pattern_stems(r"\b(?:settled on|chose|signed off)\b")
    assert before == ("settled on", "chose")
    assert after == ("settled on", "chose", "signed off")


def test_optional_characters_groups_and_classes_are_not_stems() -> None:
    assert pattern_stems(r"agreed?") == ("agree",)
    assert pattern_stems(r"go(?:ing)? with") == (" with",)
    assert pattern_stems(r"[A-Z]+ok\w*") == ("ok",)
    assert pattern_stems(r"conclu\w+|决定") == ("conclu", "决定")


def test_an_alternative_without_a_plain_character_has_no_stems() -> None:
    assert pattern_stems(r"\w+\d|x") is None
    assert pattern_stems(r"a|(?:b|\d+)") is None
