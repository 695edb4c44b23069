"""Properties of `HistoryCompactor.compact_view`, and the upstream compaction bugs it fixes."""

from __future__ import annotations

import dataclasses
import itertools
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_contextkit.compaction.compactor import (
    RECAP_ID_PREFIX,
    CompactionResult,
    HistoryCompactor,
    RunningSummary,
)
from langchain_contextkit.compaction.facts import RECAP_SECTIONS
from langchain_contextkit.compaction.summarizers import (
    NEW_MESSAGES_LABEL,
    PREVIOUS_SUMMARY_LABEL,
    render_transcript,
)
from langchain_contextkit.errors import ContextWindowExceeded
from langchain_contextkit.messages.lists import (
    find_message_problems,
    message_costs,
    split_system,
    unit_starts,
)
from langchain_contextkit.prompts import PromptRegistry
from langchain_contextkit.tokens.count import count_message_tokens, count_tokens

HEADING = "[Recap]"
MARKER = re.compile(r"MK\d{4}X")

# --- conversations (the same generator as test_messages.py) ---------------------------------

_ALPHABET = st.sampled_from(
    list("abcdefghij xyz0123456789.,!?;:-_\n") + list("你好世界中文数据。！？；，") + ["😀", "é"]
)
_TEXT = st.text(alphabet=_ALPHABET, max_size=60)  # no capitals: markers (MK0001X) stay unique


def _call(call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": "lookup", "args": args, "id": call_id, "type": "tool_call"}


@st.composite
def conversations(
    draw: st.DrawFn,
    *,
    human_first: bool | None = None,
    humans: bool = True,
    system: bool | None = None,
    min_units: int = 1,
    first_marker: int = 0,
    max_turns: int = 5,
) -> list[BaseMessage]:
    """A valid conversation: system prefix, then turns of human, AI and tool-call units.

    Every message carries a unique marker ``MK0000X`` (numbered from `first_marker`), in
    its text or, for an AI message with tool calls, in the call arguments.
    """
    numbers = itertools.count(first_marker)

    def text() -> str:
        return f"MK{next(numbers):04d}X {draw(_TEXT)}"

    n_system = draw(st.integers(0, 2)) if system is None else int(system)
    messages: list[BaseMessage] = [SystemMessage(text()) for _ in range(n_system)]
    if human_first is None:
        human_first = humans and draw(st.booleans())
    turns = draw(st.integers(1, max_turns))
    units = 0
    for turn in range(turns):
        if humans and (turn > 0 or human_first):
            messages.append(HumanMessage(text()))
            units += 1
        kinds = draw(st.lists(st.sampled_from(["ai", "tools"]), max_size=3))
        if turn == turns - 1 and units + len(kinds) < min_units:
            kinds += draw(
                st.lists(
                    st.sampled_from(["ai", "tools"]),
                    min_size=min_units - units - len(kinds),
                    max_size=min_units - units - len(kinds),
                )
            )
        units += len(kinds)
        for kind in kinds:
            if kind == "ai":
                messages.append(AIMessage(text()))
                continue
            ids = [f"call_{next(numbers)}" for _ in range(draw(st.integers(1, 4)))]
            marker = text()
            content = marker if draw(st.booleans()) else ""
            messages.append(AIMessage(content, tool_calls=[_call(i, q=marker) for i in ids]))
            messages.extend(
                ToolMessage(text(), tool_call_id=i, name="lookup")
                for i in draw(st.permutations(ids))
            )
    return messages


def _markers(message: BaseMessage) -> set[str]:
    found = set(MARKER.findall(message.text))
    for call in getattr(message, "tool_calls", None) or []:
        found |= set(MARKER.findall(str(call["args"])))
    return found


def _same(left: list[BaseMessage], right: list[BaseMessage]) -> bool:
    return len(left) == len(right) and all(a is b for a, b in zip(left, right, strict=True))


@dataclass
class Recorder:
    """A deterministic summariser that records what it was asked; can fail or go quiet."""

    reply: str = "summary"
    fail: bool = False
    calls: list[tuple[str, str]] = field(default_factory=list)

    def __call__(self, text: str, instruction: str) -> str:
        self.calls.append((text, instruction))
        if self.fail:
            msg = "summariser is down"
            raise RuntimeError(msg)
        return f"{self.reply} #{len(self.calls)}"


@dataclass
class Parts:
    system: list[BaseMessage]
    recap: BaseMessage | None
    tail: list[BaseMessage]


def _parts(result: CompactionResult, n_system: int) -> Parts:
    view = result.messages
    system = view[:n_system]
    rest = view[n_system:]
    if rest and _is_recap(rest[0]):
        return Parts(system, rest[0], rest[1:])
    return Parts(system, None, rest)


def _is_recap(message: BaseMessage) -> bool:
    return isinstance(message.id, str) and message.id.startswith(RECAP_ID_PREFIX)


def _recap_text(recap: BaseMessage) -> str:
    assert recap.text.startswith(f"{HEADING} ")
    return recap.text.removeprefix(f"{HEADING} ")


def _units(messages: list[BaseMessage]) -> int:
    return len(unit_starts(messages))


def knobs(max_trigger: int = 400) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "keep_recent": st.integers(1, 4),
            "trigger_tokens": st.integers(0, max_trigger),
            "max_summary_tokens": st.integers(5, 120),
            "require_human_first": st.booleans(),
        }
    )


def _compactor(knobs: dict[str, Any], **extra: Any) -> HistoryCompactor:
    return HistoryCompactor(None, **knobs, **extra)


# --- the core properties ------------------------------------------------------------------


def _codes(messages: list[BaseMessage], *, human_first: bool) -> set[str]:
    return {p.code for p in find_message_problems(messages, require_human_first=human_first)}


_ITEM_PREFIX = re.compile(
    r"^- (?:(?:User|Assistant|System|Note|Tool(?: \([^)]*\))?):\s+)?", re.MULTILINE
)


def _is_reduction(recap: str, reply: str, aged: list[BaseMessage]) -> bool:
    """`recap` is `reply`, or pieces of it (never cut at its end), and the floor's items.

    Every word of the recap is the reply's or an aged message's (an item the reply lacked,
    added back from the extractive recap), and no ellipsis marks a cut.
    """
    reply = reply.strip()
    if recap == reply:
        return True
    headings = {PromptRegistry().recap_heading(section) for section in RECAP_SECTIONS}
    source = f"{reply}\n{render_transcript(aged)}"
    body = _ITEM_PREFIX.sub("", recap)
    words = [w for w in body.split() if w not in headings]
    return bool(words) and "…" not in recap.replace(reply, "") and all(w in source for w in words)


def _new_part(text: str) -> str:
    """The part of a summariser's text that holds messages (not the previous recap)."""
    return text.split(f"{NEW_MESSAGES_LABEL}:\n", 1)[-1]


@given(
    messages=conversations(),
    knobs=knobs(),
    reply=st.text(alphabet=_ALPHABET, max_size=300),
    data=st.data(),
)
@settings(max_examples=100, deadline=None)
def test_compact_view_invariants(
    messages: list[BaseMessage], knobs: dict[str, Any], reply: str, data: st.DataObject
) -> None:
    human_first = knobs["require_human_first"]
    target = data.draw(st.none() | st.integers(0, knobs["trigger_tokens"]), label="target")
    compactor = _compactor(knobs, target_tokens=target)
    summarize = Recorder(reply=f"S{reply}")
    original = list(messages)
    result = compactor.compact_view(messages, summarize=summarize)
    assert _same(messages, original)  # the history itself is never modified

    system, rest = split_system(messages)
    parts = _parts(result, len(system))
    before = count_message_tokens(messages)
    assert result.tokens_before == before
    assert result.tokens_after == count_message_tokens(result.messages)
    assert find_message_problems(result.messages) == []
    assert _codes(result.messages, human_first=human_first) <= _codes(
        messages, human_first=human_first
    )
    assert _same(parts.system, system)

    if before <= compactor.trigger_tokens or _units(rest) <= compactor.keep_recent:
        # below the trigger, or too few turns: the input itself, and no summariser call
        assert summarize.calls == []
        assert not result.compacted
        assert _same(result.messages, messages)
        assert result.summary is None
        return

    # above the trigger with more than keep_recent turns: one call, a recap, a tail of units
    assert len(summarize.calls) == 1
    assert result.compacted
    assert result.summarizer == "callback"
    assert parts.recap is not None
    aged = len(rest) - len(parts.tail)
    assert aged == result.aged_out > 0
    assert aged in unit_starts(rest)
    assert _same(parts.tail, rest[aged:])
    assert _units(parts.tail) >= compactor.keep_recent
    assert not any(_is_recap(m) for m in parts.tail)

    # the callback was given exactly the aged-out messages, with the summary instruction
    text, instruction = summarize.calls[0]
    assert set(MARKER.findall(text)) == set().union(*(_markers(m) for m in rest[:aged]))
    assert instruction == compactor.prompts.summary_instruction(
        max_tokens=compactor.max_summary_tokens
    )

    # the recap: the callback's reply, capped, placed right after the system prefix
    recap = _recap_text(parts.recap)
    assert count_tokens(recap) <= compactor.max_summary_tokens
    assert _is_reduction(recap, f"S{reply} #1", rest[:aged])
    # (a callback's recap carries its floor, the extractive recap of the same span)
    assert result.summary is not None
    assert dataclasses.replace(result.summary, floor=None) == RunningSummary(recap, aged, None)
    if human_first:
        assert find_message_problems(result.messages, require_human_first=True) == []
    as_human = human_first and not (parts.tail and isinstance(parts.tail[0], HumanMessage))
    assert isinstance(parts.recap, HumanMessage if as_human else SystemMessage)


@given(messages=conversations(), slack=st.integers(0, 50), keep_recent=st.integers(1, 4))
@settings(max_examples=50, deadline=None)
def test_below_the_trigger_nothing_happens(
    messages: list[BaseMessage], slack: int, keep_recent: int
) -> None:
    trigger = count_message_tokens(messages) + slack
    summarize = Recorder()
    for callback in (summarize, None):  # None: the extractive summariser would run
        compactor = HistoryCompactor(None, keep_recent=keep_recent, trigger_tokens=trigger)
        result = compactor.compact_view(messages, summarize=callback)
        assert _same(result.messages, messages)
        assert (result.compacted, result.summary, result.summarizer) == (False, None, None)
        assert result.tokens_after == result.tokens_before
    assert summarize.calls == []


def _outcome(call: Any) -> CompactionResult | ContextWindowExceeded:
    try:
        return call()
    except ContextWindowExceeded as error:
        return error


def _recap_reserve(compactor: HistoryCompactor) -> int:
    """What a full-size recap message may take (the compactor plans with this)."""
    return compactor.max_summary_tokens + message_costs([SystemMessage(HEADING)])[0]


@given(
    messages=conversations(),
    knobs=knobs(),
    reply=st.text(alphabet=_ALPHABET, max_size=300),
    data=st.data(),
)
@settings(max_examples=80, deadline=None)
def test_ceiling_is_respected_or_raised(
    messages: list[BaseMessage], knobs: dict[str, Any], reply: str, data: st.DataObject
) -> None:
    overhead = data.draw(st.sampled_from([0, 0, 7, 40]), label="overhead (tool schemas)")
    before = count_message_tokens(messages) + overhead
    ceiling = data.draw(
        st.integers(0, before + 60) | st.integers(before // 2, before), label="ceiling"
    )
    compactor = _compactor(knobs)
    original = list(messages)
    result = _outcome(
        lambda: compactor.compact_view(
            messages,
            summarize=Recorder(reply=f"S{reply}"),
            ceiling_tokens=ceiling,
            overhead_tokens=overhead,
        )
    )
    assert _same(messages, original)
    if isinstance(result, ContextWindowExceeded):
        assert result.budget == ceiling
        assert result.required > ceiling
        return
    assert result.tokens_after <= ceiling
    assert result.tokens_after == count_message_tokens(result.messages) + overhead
    assert find_message_problems(result.messages) == []
    system, rest = split_system(messages)
    parts = _parts(result, len(system))
    assert _same(parts.system, system)
    assert _same(parts.tail, rest[len(rest) - len(parts.tail) :])
    kept = _units(parts.tail)
    assert kept >= 1
    if kept < min(compactor.keep_recent, _units(rest)):  # only a ceiling forces fewer turns
        assert result.compacted
        keep_start = unit_starts(rest)[-min(compactor.keep_recent, _units(rest))]
        planned = count_message_tokens(system) + (0 if system else 3) + overhead
        planned += _recap_reserve(compactor) + sum(message_costs(rest[keep_start:]))
        assert planned > ceiling


@pytest.mark.parametrize(
    "history",
    [
        [HumanMessage("word " * 200)],
        [SystemMessage("rule " * 200), HumanMessage("hi")],
        [SystemMessage("rule " * 200)],
    ],
    ids=["one-turn", "system-and-one-turn", "system-only"],
)
def test_ceiling_with_nothing_to_age_out_raises(history: list[BaseMessage]) -> None:
    compactor = HistoryCompactor(None, keep_recent=1, trigger_tokens=10)
    summarize = Recorder()
    with pytest.raises(ContextWindowExceeded, match="no turn could age out") as info:
        compactor.compact_view(history, summarize=summarize, ceiling_tokens=50)
    assert (info.value.required, info.value.budget) == (count_message_tokens(history), 50)
    assert summarize.calls == []


def test_ceiling_with_a_failed_summary_and_no_fallback_raises() -> None:
    history = [HumanMessage("q1 " * 100), AIMessage("a1 " * 100), HumanMessage("last")]
    compactor = HistoryCompactor(None, keep_recent=1, trigger_tokens=10, fallback=False)
    with pytest.raises(ContextWindowExceeded, match="summariser is down"):
        compactor.compact_view(history, summarize=Recorder(fail=True), ceiling_tokens=100)
    # without a ceiling the same call keeps the history as it was
    result = compactor.compact_view(history, summarize=Recorder(fail=True))
    assert _same(result.messages, history)


# --- the running summary: extend, never re-read ---------------------------------------------


@given(
    first=conversations(),
    new=conversations(system=False, human_first=True, first_marker=5000, max_turns=3),
    keep_recent=st.integers(1, 3),
    trigger=st.integers(0, 300),
    feed_view=st.booleans(),
)
@settings(max_examples=70, deadline=None)
def test_running_summary_is_extended_not_rebuilt(
    first: list[BaseMessage],
    new: list[BaseMessage],
    keep_recent: int,
    trigger: int,
    feed_view: bool,
) -> None:
    compactor = HistoryCompactor(
        None, keep_recent=keep_recent, trigger_tokens=trigger, max_summary_tokens=200
    )
    one = compactor.compact_view(first, summarize=Recorder(reply="first summary"))
    system, first_rest = split_system(first)
    # Either the full history (graph state, "view" mode) or the compacted view is fed back.
    history = [*(one.messages if feed_view else first), *new]
    again = Recorder(reply="second summary")
    two = compactor.compact_view(history, summary=one.summary, summarize=again)
    assert find_message_problems(two.messages) == []
    assert _same(two.messages[: len(system)], system)

    if not one.compacted:  # nothing to extend: a second compaction starts from scratch
        assert one.summary is None
        assert all(not text.startswith(PREVIOUS_SUMMARY_LABEL) for text, _ in again.calls)
        return
    assert one.summary is not None
    old_recap = _parts(one, len(system)).recap
    assert old_recap is not None
    covered = one.summary.covered
    # what the second call starts from: the messages after the previous cut
    pending = [*(_parts(one, len(system)).tail if feed_view else first_rest[covered:]), *new]
    already = set().union(*(_markers(m) for m in first_rest[:covered]))
    parts = _parts(two, len(system))
    assert parts.recap is not None
    if not two.compacted:  # the old recap stays, byte for byte (prompt caching)
        assert again.calls == []
        assert parts.recap.text == old_recap.text
        assert two.summary == one.summary
        assert _same(parts.tail, pending)
        return
    assert len(again.calls) == 1
    text, instruction = again.calls[0]
    assert text.startswith(
        f"{PREVIOUS_SUMMARY_LABEL}:\n{one.summary.text}\n\n{NEW_MESSAGES_LABEL}:\n"
    )
    assert instruction == compactor.prompts.extend_instruction(max_tokens=200)
    seen = set(MARKER.findall(_new_part(text)))
    assert not seen & already
    assert seen == set().union(*(_markers(m) for m in pending[: two.aged_out]))
    assert _same(parts.tail, pending[two.aged_out :])
    # The reply, then the user's facts it lacks (the floor, from the extractive recap).
    assert _recap_text(parts.recap).split("\n")[0] == "second summary #1"
    assert two.summary is not None
    if not feed_view:
        assert two.summary.covered == covered + two.aged_out


@given(
    first=conversations(),
    rounds=st.integers(2, 3),
    data=st.data(),
    keep_recent=st.integers(1, 3),
    trigger=st.integers(0, 250),
    feed_view=st.booleans(),
    human_first=st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_over_many_rounds_each_message_is_summarised_at_most_once(  # noqa: PLR0917 - one argument per strategy
    first: list[BaseMessage],
    rounds: int,
    data: st.DataObject,
    keep_recent: int,
    trigger: int,
    feed_view: bool,
    human_first: bool,
) -> None:
    compactor = HistoryCompactor(
        None,
        keep_recent=keep_recent,
        trigger_tokens=trigger,
        max_summary_tokens=200,
        require_human_first=human_first,
    )
    summarize = Recorder(reply="running summary")
    full = list(first)
    result = compactor.compact_view(full, summarize=summarize)
    for round_number in range(1, rounds + 1):
        turns = data.draw(
            conversations(
                system=False, human_first=True, max_turns=2, first_marker=1000 * round_number
            ),
            label=f"round {round_number}",
        )
        full = [*full, *turns]
        history = [*result.messages, *turns] if feed_view else full
        result = compactor.compact_view(history, summary=result.summary, summarize=summarize)
        assert find_message_problems(result.messages) == []
        if human_first:
            assert _codes(result.messages, human_first=True) <= _codes(first, human_first=True)
    read = [set(MARKER.findall(_new_part(text))) for text, _ in summarize.calls]
    assert sum(len(markers) for markers in read) == len(set().union(set(), *read))  # once each
    visible = set().union(*(_markers(m) for m in result.messages))
    assert set().union(*(_markers(m) for m in full)) == visible | set().union(set(), *read)


def _dialogue(start: int, stop: int) -> list[BaseMessage]:
    """Alternating human and AI messages with markers and ids (as LangGraph state has)."""
    return [
        (HumanMessage if i % 2 == 0 else AIMessage)(f"MK{i:04d}X line {i} of the chat", id=f"m{i}")
        for i in range(start, stop)
    ]


def test_a_summary_of_another_history_is_ignored() -> None:
    history = _dialogue(0, 10)
    compactor = HistoryCompactor(None, keep_recent=2, trigger_tokens=0)
    one = compactor.compact_view(history, summarize=Recorder())
    assert one.summary is not None
    assert one.summary.last_id == f"m{one.summary.covered - 1}"
    edited = [history[0], *history[2:]]  # a message was removed: the count no longer matches
    again = Recorder()
    compactor.compact_view(edited, summary=one.summary, summarize=again)
    assert not again.calls[0][0].startswith(PREVIOUS_SUMMARY_LABEL)
    assert "MK0000X" in again.calls[0][0]  # re-read from the start, not misapplied


def test_between_compactions_the_prefix_is_byte_stable() -> None:
    """Hysteresis: after a compaction, the next small turns reuse the recap untouched."""
    system = SystemMessage("You are a support agent.")
    history = [system, *_dialogue(0, 30)]
    trigger = count_message_tokens(history) - 1
    compactor = HistoryCompactor(None, keep_recent=2, trigger_tokens=trigger)
    summarize = Recorder(reply="The user and the agent chatted.")
    one = compactor.compact_view(history, summarize=summarize)
    assert one.compacted
    assert one.tokens_after <= compactor.target_tokens + _recap_reserve(compactor)
    summary = one.summary
    for stop in range(32, 60, 2):  # one turn at a time, full history in state
        history = [*history, *_dialogue(stop - 2, stop)]
        result = compactor.compact_view(history, summary=summary, summarize=summarize)
        if result.compacted:
            break
        assert result.messages[:2] == one.messages[:2]
        assert result.summary == summary
    assert stop > 40  # several turns fit under the trigger before the next compaction
    assert result.compacted
    assert len(summarize.calls) == 2
    assert summarize.calls[1][0].startswith(f"{PREVIOUS_SUMMARY_LABEL}:\n{summary.text}\n")


# --- failing summarisers never cost history -------------------------------------------------


@given(
    messages=conversations(max_turns=3),
    keep_recent=st.integers(1, 3),
    trigger=st.integers(0, 100),
    human_first=st.booleans(),
)
@settings(max_examples=80, deadline=None)
def test_failing_summariser_falls_back_without_losing_a_fact(
    messages: list[BaseMessage], keep_recent: int, trigger: int, human_first: bool
) -> None:
    compactor = HistoryCompactor(
        None,
        keep_recent=keep_recent,
        trigger_tokens=trigger,
        max_summary_tokens=8000,  # room for every fact: the cap is not under test here
        require_human_first=human_first,
    )
    broken = Recorder(fail=True)
    result = compactor.compact_view(messages, summarize=broken)
    assert find_message_problems(result.messages) == []
    everything = set().union(*(_markers(m) for m in messages))
    kept = set().union(*(_markers(m) for m in result.messages if not _is_recap(m)))
    recap = next((m for m in result.messages if _is_recap(m)), None)
    recapped = set() if recap is None else set(MARKER.findall(recap.text))
    assert everything == kept | recapped
    if broken.calls:
        assert result.error is not None
        assert "RuntimeError: summariser is down" in result.error
    if result.compacted:
        assert result.summarizer == "extractive"
        assert recap is not None
        assert "summariser is down" not in recap.text


@given(
    messages=conversations(),
    keep_recent=st.integers(1, 3),
    trigger=st.integers(0, 100),
    blank_reply=st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_failing_summariser_without_fallback_leaves_the_view_unchanged(
    messages: list[BaseMessage], keep_recent: int, trigger: int, blank_reply: bool
) -> None:
    compactor = HistoryCompactor(
        None, keep_recent=keep_recent, trigger_tokens=trigger, fallback=False
    )
    failing = Recorder(fail=True)

    def empty(text: str, instruction: str) -> str:
        failing.calls.append((text, instruction))
        return "  \n "

    result = compactor.compact_view(messages, summarize=empty if blank_reply else failing)
    assert _same(result.messages, messages)
    assert (result.compacted, result.summary, result.summarizer) == (False, None, None)
    assert result.tokens_after == result.tokens_before
    if failing.calls:
        assert result.error is not None
        assert ("returned no text" if blank_reply else "summariser is down") in result.error
    else:
        assert result.error is None


@given(messages=conversations(), knobs=knobs(150))
@settings(max_examples=80, deadline=None)
def test_default_extractive_path(messages: list[BaseMessage], knobs: dict[str, Any]) -> None:
    compactor = _compactor(knobs)
    result = compactor.compact_view(messages)  # llm=None, no callback: extractive
    assert find_message_problems(result.messages) == []
    recap = next((m for m in result.messages if _is_recap(m)), None)
    if not result.compacted:
        assert recap is None
        assert _same(result.messages, messages)
        return
    assert result.summarizer == "extractive"
    assert recap is not None
    text = _recap_text(recap)
    assert count_tokens(text) <= compactor.max_summary_tokens
    _assert_extracted(text, split_system(messages)[1][: result.aged_out])


def _assert_extracted(recap: str, aged: list[BaseMessage]) -> None:
    """Every recap line is a sentence of the aged-out messages: never a placeholder.

    The recap is structured (issue 19): section headings, then ``- Role: sentence``
    lines, an action item followed by its owner/deadline note.
    """
    if PromptRegistry().is_empty_recap(recap):
        return  # nothing worth keeping: a small recap that says so
    source = " ".join(render_transcript(aged).split())
    headings = {PromptRegistry().recap_heading(section) for section in RECAP_SECTIONS}
    lines = [line for line in recap.split("\n") if line not in headings]
    assert lines
    assert recap.split("\n", maxsplit=1)[0] in headings
    for line in lines:
        assert line.startswith("- ")
        sentence = line.split(": ", 1)[1].removesuffix("…")
        sentence = re.sub(r" \((?:owner|due): [^()]*\)$", "", sentence)
        assert sentence
        assert sentence in source


def test_a_recap_is_never_just_an_ellipsis() -> None:
    history = [
        HumanMessage("Refund order 7 please, it arrived broken."),
        AIMessage("Refund for order 7 approved on 2024-05-02."),
        HumanMessage("thanks"),
        AIMessage("welcome"),
    ]
    compactor = HistoryCompactor(None, keep_recent=1, trigger_tokens=0, max_summary_tokens=2)
    result = compactor.compact_view(
        history, summarize=lambda text, instruction: "Refund for order 7 approved on 2024-05-02."
    )
    if result.compacted:
        recap = _parts(result, 0).recap
        assert recap is not None
        assert _recap_text(recap).strip("… ")
    else:
        assert _same(result.messages, history)


async def test_async_failing_summariser_falls_back() -> None:
    history = [
        HumanMessage("My invoice INV-88213 was charged twice."),
        AIMessage("", tool_calls=[_call("c1", q="INV-88213")]),
        ToolMessage("Charged 49 EUR on 2024-03-05 twice.", tool_call_id="c1", name="lookup"),
        AIMessage("We decided to refund the second charge."),
        HumanMessage("Thanks."),
        AIMessage("You are welcome."),
    ]
    calls: list[str] = []

    async def down(text: str, instruction: str) -> str:
        calls.append(text)
        msg = "timeout"
        raise TimeoutError(msg)

    compactor = HistoryCompactor(None, keep_recent=2, trigger_tokens=0)
    result = await compactor.acompact_view(history, summarize=down)
    assert len(calls) == 1
    assert result.compacted
    assert result.summarizer == "extractive"
    assert result.error is not None
    assert "TimeoutError" in result.error
    assert find_message_problems(result.messages) == []
    recap = _recap_text(result.messages[0])
    for fact in ("INV-88213", "2024-03-05", "refund the second charge"):
        assert fact in recap
    assert _same(result.messages[1:], history[4:])


# --- regressions: upstream bugs -------------------------------------------------------------


def _tool_history() -> list[BaseMessage]:
    """A support conversation with single and parallel tool calls, in the style of the reports."""
    return [
        SystemMessage("You are a support agent. Always cite the order id."),
        HumanMessage("Where are orders 41, 42 and 43?"),
        AIMessage(
            "Checking all three.",
            tool_calls=[_call(f"c{n}", order=n) for n in (41, 42, 43)],
        ),
        ToolMessage("Order 41 shipped 2024-05-01.", tool_call_id="c42", name="lookup"),
        ToolMessage("Order 42 is delayed until 2024-06-10.", tool_call_id="c41", name="lookup"),
        ToolMessage("Order 43 was cancelled by the user.", tool_call_id="c43", name="lookup"),
        AIMessage("41 shipped, 42 is delayed, 43 was cancelled."),
        HumanMessage("Refund order 43 then."),
        AIMessage("", tool_calls=[_call("r1", order=43)]),
        ToolMessage("Refund RF-9931 created for 59 EUR.", tool_call_id="r1", name="refund"),
        AIMessage("Refund RF-9931 of 59 EUR is on its way."),
        HumanMessage("And the delay on 42?"),
        AIMessage("", tool_calls=[_call("e1", order=42), _call("e2", order=42)]),
        ToolMessage("Carrier DHL reports a customs hold.", tool_call_id="e2", name="lookup"),
        ToolMessage("Escalation ESC-17 opened.", tool_call_id="e1", name="escalate"),
        AIMessage("It is held in customs; I opened ESC-17."),
    ]


def _every_compaction(history: list[BaseMessage]) -> list[tuple[str, CompactionResult]]:
    """Compact with every keep_recent, both recap placements, a callback and the extractive."""
    runs = []
    _, rest = split_system(history)
    for keep_recent, human_first, callback in itertools.product(
        range(1, _units(rest) + 1), (False, True), (True, False)
    ):
        compactor = HistoryCompactor(
            None, keep_recent=keep_recent, trigger_tokens=0, require_human_first=human_first
        )
        summarize = Recorder(reply="The user asked about orders.") if callback else None
        label = f"keep_recent={keep_recent} human_first={human_first} callback={callback}"
        runs.append((label, compactor.compact_view(history, summarize=summarize)))
    return runs


def test_langchain_34282_kept_tail_never_starts_with_an_orphaned_tool_result() -> None:
    """The kept tail must never start with a result whose call was summarised away.

    After summarisation, the provider answered 400 "No tool call found".
    """
    history = _tool_history()
    # the anchor: keeping the last k messages, as a message-count summariser does, orphans
    naive = [history[-k:] for k in range(1, len(history))]
    assert any(find_message_problems(tail) for tail in naive)
    compacted = 0
    for label, result in _every_compaction(history):
        tail = _parts(result, 1).tail
        assert find_message_problems(result.messages) == [], label
        assert not isinstance(tail[0], ToolMessage), label
        compacted += result.compacted
    assert compacted >= 2 * 2 * (_units(history[1:]) - 1)  # all but keep_recent=units


def test_langmem_126_parallel_tool_results_survive_together() -> None:
    """Summarising around parallel tool calls kept only some of their results."""
    history = _tool_history()
    blocks = {
        id(m): {c["id"] for c in m.tool_calls}
        for m in history
        if isinstance(m, AIMessage) and m.tool_calls
    }
    for label, result in _every_compaction(history):
        answered = {m.tool_call_id for m in result.messages if isinstance(m, ToolMessage)}
        for message in result.messages:
            if id(message) in blocks:
                assert blocks[id(message)] <= answered, label
        for ids in blocks.values():
            assert ids <= answered or not ids & answered, label  # all or none


class _DownModel(GenericFakeChatModel):
    """A chat model whose every call fails, like a provider outage."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        msg = "provider unavailable"
        raise ConnectionError(msg)


FACTS = ("RF-9931", "59 EUR", "2024-06-10", "ESC-17", "2024-05-01")


@pytest.mark.parametrize(
    "make",
    [
        lambda: {"summarize": Recorder(fail=True)},
        lambda: {"llm": GenericFakeChatModel(messages=iter([AIMessage("")]))},
        lambda: {"llm": _DownModel(messages=iter([]))},
    ],
    ids=["raising-callback", "llm-returns-empty", "llm-raises"],
)
def test_langchain_39261_a_failed_summary_never_replaces_history(make: Any) -> None:
    """A failing (or empty) summary replaced the history with a placeholder."""
    history = _tool_history()
    options = make()
    compactor = HistoryCompactor(options.get("llm"), keep_recent=1, trigger_tokens=0)
    result = compactor.compact_view(history, summarize=options.get("summarize"))
    assert result.compacted
    assert result.summarizer == "extractive"
    assert result.error is not None
    assert find_message_problems(result.messages) == []
    visible = "\n".join(m.text for m in result.messages)
    for fact in FACTS:
        assert fact in visible
    recap = _recap_text(result.messages[1])
    assert "provider unavailable" not in recap
    assert "summariser is down" not in recap
    _assert_extracted(recap, history[1 : 1 + result.aged_out])


@given(
    messages=conversations(humans=False),
    knobs=knobs(150),
    callback=st.booleans(),
)
@settings(max_examples=60, deadline=None)
def test_langchain_39261_no_human_message_at_all(
    messages: list[BaseMessage], knobs: dict[str, Any], callback: bool
) -> None:
    """A history without a human message was replaced by a placeholder."""
    assert not any(isinstance(m, HumanMessage) for m in messages)
    compactor = _compactor(knobs)
    summarize = Recorder(reply="The assistant looked things up.") if callback else None
    result = compactor.compact_view(messages, summarize=summarize)
    assert find_message_problems(result.messages) == []
    if not result.compacted:
        assert _same(result.messages, messages)
        return
    recap = _parts(result, len(split_system(messages)[0])).recap
    assert recap is not None
    text = _recap_text(recap)
    if callback:
        aged = split_system(messages)[1][: result.aged_out]
        assert _is_reduction(text, "The assistant looked things up. #1", aged)
    else:
        _assert_extracted(text, split_system(messages)[1][: result.aged_out])
    if knobs["require_human_first"]:  # the recap, as a human message, opens the conversation
        assert find_message_problems(result.messages, require_human_first=True) == []
