"""The cold start's one-pass extractive fold (`compaction._cold_fold.fold_recap`)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_contextkit.compaction import _cold_fold, _fact_bound, extractive
from langchain_contextkit.compaction._cold_fold import fold_recap
from langchain_contextkit.compaction._fact_bound import score_bound
from langchain_contextkit.compaction.extractive import _score
from langchain_contextkit.compaction.facts import fact_tokens, has_identifier
from langchain_contextkit.compaction.summarizers import ExtractiveSummarizer, render_transcript

WORDS = [
    "the", "order", "must", "ship", "we", "decided", "因此", "结论", "计划", "INV-4471",
    "2024-03-05", "$1,250", "db-7", "snake_case", "\\fB2\\fR", "<b>", "&amp;", "so", "root",
    "cause", "v3.11.7", "7", "42", "Friday", "确认", "。", ".", "?", "\n", "APT::Cache",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=14),
    st.sampled_from(["User", "Assistant", "Tool", "Tool (lookup)", "System", "Note"]),
)
def test_score_bound_is_never_below_the_score(words: list[str], label: str) -> None:
    sentence = " ".join(words)
    assert score_bound(sentence, label) >= _score(sentence, label)


@pytest.fixture
def scored_labels(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The label of every sentence the fold scores, in order (a spy on its `_scored`)."""
    labels: list[str] = []
    scored = extractive._scored

    def spy(position: int, label: str, section: object, sentence: str) -> object:
        labels.append(label)
        return scored(position, label, section, sentence)  # type: ignore[arg-type]

    monkeypatch.setattr(_cold_fold, "_scored", spy)
    return labels


def _thread(turns: int, seed: int = 3) -> list[BaseMessage]:
    rng = random.Random(seed)  # noqa: S311 - test data
    out: list[BaseMessage] = []
    for turn in range(turns):
        out.append(HumanMessage(f"Order ORD-{turn:04d} must ship to dock {rng.randint(100, 999)}."))
        call = {"name": "lookup", "args": {"id": turn}, "id": f"c{turn}", "type": "tool_call"}
        out.append(AIMessage("", tool_calls=[call]))
        noise = " ".join(f"row {rng.randint(0, 99)} value_{i} ok." for i in range(20))
        out.append(ToolMessage(noise, tool_call_id=f"c{turn}", name="lookup"))
        out.append(AIMessage("Noted, looking into it now for you."))
    return out


def test_a_span_that_fits_is_the_summarisers_own_recap() -> None:
    messages = _thread(3)
    summarizer = ExtractiveSummarizer(max_tokens=4_000)
    assert fold_recap(summarizer, messages) == summarizer.recap(render_transcript(messages))


def test_a_long_span_keeps_the_users_facts_without_scoring_tool_output(
    scored_labels: list[str],
) -> None:
    messages = _thread(300)
    summarizer = ExtractiveSummarizer(max_tokens=300)
    recap, tier = fold_recap(summarizer, messages)
    assert tier == "low"
    assert summarizer.counter(recap) <= summarizer.max_tokens
    kept = [line for line in recap.splitlines() if line.startswith("- ")]
    assert len(kept) > 5
    assert all(line.startswith("- User: Order ORD-") for line in kept)
    assert not any(label.startswith("Tool") for label in scored_labels)  # never scored
    # Ties keep both ends of the span: its first order and its last.
    assert any("ORD-0000 " in line for line in kept)
    assert any("ORD-0299 " in line for line in kept)


def test_the_fold_extends_an_earlier_recap_and_is_deterministic() -> None:
    summarizer = ExtractiveSummarizer(max_tokens=300)
    earlier = "Decisions:\n- User: We decided to refund invoice INV-88213 on 2024-03-05."
    first = fold_recap(summarizer, _thread(200), earlier)
    assert "INV-88213" in first[0]
    assert first == fold_recap(summarizer, _thread(200), earlier)


def test_a_tool_fact_is_kept_when_nothing_outranks_it() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("hi"),
        AIMessage("", tool_calls=[{"name": "q", "args": {}, "id": "c1", "type": "tool_call"}]),
        ToolMessage("The build of db-7 failed with exit code 137.", tool_call_id="c1", name="q"),
        AIMessage("ok"),
    ]
    recap, _ = fold_recap(ExtractiveSummarizer(max_tokens=200), messages)
    assert "exit code 137" in recap


LINES = [
    "Order 7 broke.", ".TH LS 1 2024", "Facts:", "User: not a speaker here", "  indented",
    "", "结论：必须退款。", "x\u2028y", "so\twe decided", "- Assistant: item", "\\fB2\\fR",
]  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(LINES), min_size=1, max_size=6),
    st.sampled_from(["human", "ai"]),
)
def test_reading_a_plain_message_is_reading_its_transcript(lines: list[str], kind: str) -> None:
    text = "\n".join(lines)
    message = HumanMessage(text) if kind == "human" else AIMessage(text)
    prompts = ExtractiveSummarizer().prompts
    expected = list(extractive._parsed(render_transcript([message]), prompts))
    assert list(_cold_fold._read(message, prompts)) == expected


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from([*WORDS, "x²_y", "thus", "opted", "API", "e.g", "100%"]), max_size=14),
    st.sampled_from(["User", "Assistant", "Tool", "Tool (lookup)", "System", "Note"]),
    st.integers(min_value=0, max_value=13),
)
def test_the_closer_bound_is_never_below_the_score_and_decides_the_level(
    words: list[str], label: str, level: int
) -> None:
    sentence = " ".join(words)
    closer = _fact_bound.tight_bound(sentence, label, level)
    score = _score(sentence, label)
    # Below the level: a bound of the score; else it says "at least the level" only.
    assert closer >= score if closer < level else closer >= level
    # At the score's own level, it never claims less than the score.
    assert _fact_bound.tight_bound(sentence, label, score) >= score


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from([*WORDS, "x²_y", "thus", "opted", "API", "100%"]), max_size=14),
    st.sampled_from(["User", "Assistant", "Tool", "System"]),
    st.lists(st.integers(min_value=0, max_value=13), min_size=1, max_size=6),
)
def test_a_bound_refined_level_after_level_stays_a_bound(
    words: list[str], label: str, levels: list[int]
) -> None:
    """A text that waits for a lower level keeps what was searched; its bound stays true."""
    sentence = " ".join(words)
    score = _score(sentence, label)
    bound = _fact_bound.FactBound(sentence, label)
    for level in sorted(levels, reverse=True):
        closer = bound.at(level)
        assert closer >= score if closer < level else closer >= level
        # Searching more never loosens it: a fresh bound at this level is no tighter.
        fresh = _fact_bound.tight_bound(sentence, label, level)
        if fresh < level:
            assert closer <= fresh
    assert bound.at(score) >= score


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from([*LINES, "We opted for db-7 because it will ship.", "thus  so we"]),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from(["human", "ai"]),
    st.integers(min_value=0, max_value=13),
)
def test_a_messages_closer_bound_covers_every_sentence_it_holds(
    lines: list[str], kind: str, level: int
) -> None:
    text = "\n".join(lines)
    message = HumanMessage(text) if kind == "human" else AIMessage(text)
    closer = _cold_fold._closer_bound(message, level)
    if closer is None:
        return  # markup or other line breaks: read as before
    prompts = ExtractiveSummarizer().prompts
    best = max((_score(s, label) for label, _, s in _cold_fold._read(message, prompts)), default=0)
    assert closer >= best if closer < level else closer >= level


def test_a_long_span_scores_few_sentences(scored_labels: list[str]) -> None:
    """Only the sentences whose closer bound reaches the chosen lines are scored."""
    messages = _thread(300)
    fold_recap(ExtractiveSummarizer(max_tokens=300), messages)
    users = sum(isinstance(m, HumanMessage) for m in messages)
    assert 0 < len(scored_labels) <= users  # not every user sentence, nor any tool's


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="aZk9_-./#:@` \u00b2\u4e00Ab", max_size=16))
def test_the_name_hint_is_found_wherever_a_name_is(text: str) -> None:
    if has_identifier(text):
        assert _fact_bound._name_hint(text)


def test_a_level_of_equal_scores_is_read_from_both_ends_until_the_cap_is_full(
    scored_labels: list[str],
) -> None:
    """Equal scores rank nearest either end first: the middle of a tied level is never read."""
    messages: list[BaseMessage] = []
    for turn in range(1_500):
        messages.append(HumanMessage(f"Order ORD-{turn:04d} must ship to dock {100 + turn % 800}."))
        messages.append(AIMessage("Noted, looking into it now for you."))
    summarizer = ExtractiveSummarizer(max_tokens=300)
    recap = fold_recap(summarizer, messages)
    assert len(scored_labels) < 1_500 // 4  # most of the tied orders are never scored
    # The same lines as the summariser that reads and scores everything.
    assert recap == summarizer.recap(render_transcript(messages))
    kept = [line for line in recap[0].splitlines() if line.startswith("- ")]
    assert "ORD-0000 " in kept[0]
    assert "ORD-1499 " in kept[-1]


@settings(max_examples=800, deadline=None)
@given(st.text(alphabet="aZk9_-./#:@` Ab1$%,", max_size=18))
def test_the_digit_name_hint_is_found_wherever_a_name_carries_a_digit(text: str) -> None:
    names = [t for t in fact_tokens(text) if not (t[0].isdigit() or t[0] in "$€£¥")]
    if any(any(ch.isdigit() for ch in name) for name in names):
        assert _fact_bound._name_digit_hint(text)
