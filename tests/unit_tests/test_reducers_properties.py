"""Properties of the trajectory reducers (issue 5): what each paradigm must never lose.

Random tool loops, plans and reflection loops are reduced to random budgets with the
default extractive summariser. Each reducer either raises `ContextWindowExceeded` or
returns a trajectory that fits the budget and keeps what its paradigm cannot lose. Bugs
found here are pinned by regression tests at the end of the file.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
from typing import Any

import pytest
from hypothesis import event, given, settings, strategies as st
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

import langchain_contextkit.compaction.facts as facts_module
from langchain_contextkit.compaction.facts import conclusion_sentences, fact_tokens, normalised
from langchain_contextkit.compaction.summarizers import ExtractiveSummarizer, summarizer_from_llm
from langchain_contextkit.errors import ContextWindowExceeded
from langchain_contextkit.messages.lists import find_message_problems, split_system, unit_starts
from langchain_contextkit.reducers.agent import reduce_agent
from langchain_contextkit.reducers.plan import reduce_plan
from langchain_contextkit.reducers.reflection import reduce_reflection
from langchain_contextkit.reducers.trajectories import (
    PlanStep,
    PlanTrajectory,
    ReflectionRound,
    ReflectionTrajectory,
)
from langchain_contextkit.tokens.count import count_message_tokens, count_tokens

# --- text with planted facts ---------------------------------------------------------------

_WORDS = st.sampled_from(
    ["the", "cache", "queue", "was", "slow", "quiet", "node", "again", "retry", "fine", "数据"]
)
_FILLER = st.lists(_WORDS, min_size=1, max_size=14).map(lambda ws: " ".join(ws) + ".")
_ALPHABET = st.sampled_from(
    list("abcdefghij xyz0123456789.,!?;:-_\n") + list("你好世界。！") + ["😀"]
)
_SUBJECTS = st.sampled_from(["cache", "index", "replica", "cron job", "gateway"])
_FACT = st.one_of(
    st.integers(0, 99_999).map(lambda n: f"Latency was {n} ms."),
    st.tuples(st.integers(2020, 2030), st.integers(1, 12), st.integers(1, 28)).map(
        lambda d: f"Seen on {d[0]}-{d[1]:02d}-{d[2]:02d}."
    ),
    st.integers(1000, 9999).map(lambda n: f"Filed as TKT-{n}."),
    st.integers(1, 99).map(lambda n: f"Retried {n}% of calls on db-{n}."),
    _SUBJECTS.map(lambda s: f"We concluded the {s} is stale."),
    st.text(_ALPHABET, max_size=40),
)
_RESULT = st.lists(st.one_of(_FACT, _FILLER, _FILLER), min_size=1, max_size=8).map(" ".join)
# Mostly filler, as real step results are: a few facts among many sentences without any.
_PADDING = st.tuples(_FILLER, st.integers(1, 8)).map(lambda fr: " ".join([fr[0]] * fr[1]))
_LONG_RESULT = st.tuples(
    st.lists(_FACT, max_size=3), st.lists(_PADDING, min_size=1, max_size=4)
).map(lambda parts: " ".join([*parts[1][:1], *parts[0], *parts[1][1:]]))
_SHORT = st.text(st.sampled_from(list("abcdefgh xyz")), min_size=1, max_size=12)


def _budget(full: int, must: int = 0) -> st.SearchStrategy[int]:
    return st.one_of(
        st.integers(0, full + 10),
        st.integers(min(must, full), full),
        st.floats(0.2, 1.0).map(lambda share: int(full * share)),
        st.just(full),
    )


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def attempt(coroutine: Any) -> tuple[Any, ContextWindowExceeded | None]:
    """Run a reduction: `(result, None)`, or `(None, the ContextWindowExceeded raised)`."""
    try:
        return run(coroutine), None
    except ContextWindowExceeded as exc:
        return None, exc


# --- the tool loop -------------------------------------------------------------------------


@st.composite
def tool_loops(draw: st.DrawFn) -> list[BaseMessage]:
    """A valid tool loop: system prefix, usually a task, then tool units.

    Single and parallel calls, some results with status="error", now and then a text
    reply or a new human turn.
    """
    ids = itertools.count()
    messages: list[BaseMessage] = [
        SystemMessage(f"Rule {i}: {draw(_RESULT)}") for i in range(draw(st.integers(0, 2)))
    ]
    if draw(st.integers(0, 4)):
        messages.append(HumanMessage(f"Task: {draw(_RESULT)}"))
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["tools"] * 5 + ["ai", "human"]))
        if kind == "ai":
            messages.append(AIMessage(draw(_RESULT)))
        elif kind == "human" and len(messages) > len(split_system(messages)[0]):
            messages.append(HumanMessage(draw(_RESULT)))
        else:
            call_ids = [f"call_{next(ids)}" for _ in range(draw(st.integers(1, 3)))]
            calls = [
                {"name": "lookup", "args": {"q": draw(_SHORT)}, "id": i, "type": "tool_call"}
                for i in call_ids
            ]
            content = draw(st.one_of(st.just(""), _FILLER))
            messages.append(AIMessage(content, tool_calls=calls))
            for call_id in draw(st.permutations(call_ids)):
                status = "error" if draw(st.integers(0, 3)) == 0 else "success"
                messages.append(
                    ToolMessage(draw(_RESULT), tool_call_id=call_id, name="lookup", status=status)
                )
    return messages


def _units(messages: list[BaseMessage]) -> list[list[BaseMessage]]:
    starts = unit_starts(messages)
    return [messages[a:b] for a, b in itertools.pairwise([*starts, len(messages)])]


def _is_tool_unit(unit: list[BaseMessage]) -> bool:
    return isinstance(unit[0], AIMessage) and bool(unit[0].tool_calls)


def _recent_suffix(messages: list[BaseMessage], steps: int) -> list[BaseMessage]:
    """Everything from the `steps`-th last tool unit after the system prefix and the task."""
    _, rest = split_system(messages)
    units = _units(rest)
    task = 1 if units and isinstance(units[0][0], HumanMessage) else 0
    tool_units = [i for i in range(task, len(units)) if _is_tool_unit(units[i])]
    if steps == 0:
        return units[-1] if len(units) > task else []
    first = tool_units[-steps] if len(tool_units) >= steps else task
    return [m for unit in units[first:] for m in unit]


def check_agent_output(
    messages: list[BaseMessage], out: list[BaseMessage], budget: int, steps: int
) -> None:
    if count_message_tokens(messages) <= budget:
        assert out == messages
        assert all(a is b for a, b in zip(out, messages, strict=True))
        return
    assert count_message_tokens(out) <= budget
    assert find_message_problems(out) == []
    system, rest = split_system(messages)
    assert out[: len(system)] == system
    task = [rest[0]] if rest and isinstance(rest[0], HumanMessage) else []
    assert out[len(system) : len(system) + len(task)] == task
    # The suffix: the last `steps` tool units (and what follows them), verbatim.
    suffix = _recent_suffix(messages, steps)
    assert suffix
    assert out[len(out) - len(suffix) :] == suffix
    assert all(a is b for a, b in zip(out[len(out) - len(suffix) :], suffix, strict=True))
    # Everything else is the input's messages in order, plus one summary entry right
    # after the system prefix and the task.
    position = {id(m): i for i, m in enumerate(messages)}
    new = [i for i, m in enumerate(out) if id(m) not in position]
    assert new == [len(system) + len(task)]
    entry = out[new[0]]
    assert isinstance(entry, AIMessage if task else SystemMessage)
    assert not getattr(entry, "tool_calls", None)
    kept = [position[id(m)] for m in out if id(m) in position]
    assert kept == sorted(set(kept))
    # Units are kept whole and contiguous: a tool call never loses a result.
    where = {id(m): i for i, m in enumerate(out)}
    for unit in _units(rest):
        present = [where.get(id(m)) for m in unit]
        if any(p is not None for p in present):
            assert None not in present
            assert present == list(range(present[0], present[0] + len(unit)))


@settings(max_examples=100, deadline=None)
@given(data=st.data(), messages=tool_loops(), steps=st.integers(0, 4))
def test_reduce_agent_fits_or_raises_and_keeps_the_loop_intact(
    data: st.DataObject, messages: list[BaseMessage], steps: int
) -> None:
    assert find_message_problems(messages) == []
    system, rest = split_system(messages)
    task = rest[:1] if rest and isinstance(rest[0], HumanMessage) else []
    must = count_message_tokens([*system, *task, *_recent_suffix(messages, steps)])
    budget = data.draw(_budget(count_message_tokens(messages), must), label="budget")
    out, exc = attempt(reduce_agent(messages, budget, keep_recent_steps=steps))
    if exc is not None:
        event("raised")
        # Not `exc.required > budget`: see test_reduce_agent_does_not_raise_when_... below.
        assert exc.budget == budget
        return
    event("reduced" if out != messages else "fits as is")
    check_agent_output(messages, out, budget, steps)


@settings(max_examples=50, deadline=None)
@given(messages=tool_loops(), steps=st.integers(1, 3))
def test_reduce_agent_with_room_for_the_must_keep_part_and_a_summary(
    messages: list[BaseMessage], steps: int
) -> None:
    """Budgets just above the must-keep part: the summary path, not the fast return."""
    system, rest = split_system(messages)
    task = rest[:1] if rest and isinstance(rest[0], HumanMessage) else []
    suffix = _recent_suffix(messages, steps)
    must = count_message_tokens([*system, *task, *suffix])
    full = count_message_tokens(messages)
    if full <= must + 60:
        return
    for budget in (must + 60, (must + full) // 2, full - 1):
        try:
            out = run(reduce_agent(messages, budget, keep_recent_steps=steps))
        except ContextWindowExceeded:
            event("raised")
            continue
        event("reduced")
        check_agent_output(messages, out, budget, steps)


def test_reduce_agent_pins_failed_steps_while_they_fit() -> None:
    messages: list[BaseMessage] = [HumanMessage("Reconcile invoice INV-1 against the ledger.")]
    for i in range(8):
        call = {"name": "ledger", "args": {"n": i}, "id": f"c{i}", "type": "tool_call"}
        status = "error" if i == 1 else "success"
        text = f"Error: timeout after {30 + i} s." if i == 1 else f"Row {i}: ok. " * 30
        messages += [
            AIMessage("", tool_calls=[call]),
            ToolMessage(text, tool_call_id=f"c{i}", status=status),
        ]
    budget = count_message_tokens(messages) // 2
    out = run(reduce_agent(messages, budget, keep_recent_steps=2))
    assert count_message_tokens(out) <= budget
    kept = {id(m) for m in out}
    assert id(messages[4]) in kept  # the failed result, verbatim
    assert id(messages[3]) in kept  # with its call


# --- plan and execute ----------------------------------------------------------------------

_STATUSES = st.sampled_from(["in_progress", "done", "done", "failed", "skipped"])


@st.composite
def plan_steps(draw: st.DrawFn, first: int = 1) -> list[PlanStep]:
    """Steps numbered from `first`: most have a result; pending ones come last."""
    count = draw(st.integers(4, 14))
    pending = draw(st.integers(0, 2))
    steps = []
    for number in range(first, first + count):
        status = "pending" if number >= first + count - pending else draw(_STATUSES)
        result = (
            None
            if status == "pending"
            else draw(st.one_of(_RESULT, _LONG_RESULT, _LONG_RESULT, st.none()))
        )
        description = f"Check the {draw(_SUBJECTS)} {draw(_SHORT)}"
        steps.append(PlanStep(number=number, description=description, status=status, result=result))
    return steps


@st.composite
def plans(draw: st.DrawFn) -> PlanTrajectory:
    return PlanTrajectory(goal=f"Goal: {draw(_FILLER)}", steps=tuple(draw(plan_steps())))


def _skeleton(plan: PlanTrajectory) -> list[tuple[int, str, str]]:
    return [(s.number, s.description, s.status) for s in plan.steps]


def check_plan_output(
    before: PlanTrajectory,
    out: PlanTrajectory,
    budget: int,
    keep: int,
    originals: dict[int, str],
) -> None:
    """`originals`: every step result ever seen, by step number (earlier reductions too)."""
    if count_tokens(before.render()) <= budget:
        assert out is before
        return
    text = out.render()
    assert count_tokens(text) <= budget
    assert _skeleton(out) == _skeleton(before)
    for step in out.steps:
        line = f"{step.number}. [{step.status}] {step.description}"
        assert line in text
    with_result = [s.number for s in before.steps if s.result is not None]
    recent = set(with_result[len(with_result) - keep :]) if keep else set()
    after = {s.number: s for s in out.steps}
    for step in before.steps:
        kept = after[step.number]
        if step.number in recent:
            assert kept.result == step.result
        if kept.result is not None:
            assert kept.result == step.result
        else:
            assert kept.summarized == (step.summarized or step.result is not None)
    flat = normalised(text)
    for step in out.steps:
        if not step.summarized:
            continue
        source = originals[step.number]
        for token in fact_tokens(source):
            assert token in text, (step.number, token)
        for sentence in conclusion_sentences(source):
            assert normalised(sentence) in flat, (step.number, sentence)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), plan=plans(), keep=st.integers(0, 3))
def test_reduce_plan_keeps_the_plan_and_every_fact(
    data: st.DataObject, plan: PlanTrajectory, keep: int
) -> None:
    full = count_tokens(plan.render())
    budget = data.draw(st.one_of(_budget(full), st.integers(full // 2, full - 1)), label="budget")
    out, exc = attempt(reduce_plan(plan, budget, keep_recent=keep))
    if exc is not None:
        event("raised")
        assert exc.budget == budget
        assert exc.required > budget
        return
    event("reduced" if out is not plan else "fits as is")
    originals = {s.number: s.result for s in plan.steps if s.result is not None}
    check_plan_output(plan, out, budget, keep, originals)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), plan=plans(), keep=st.integers(0, 3))
def test_reduce_plan_again_with_more_steps_keeps_everything(
    data: st.DataObject, plan: PlanTrajectory, keep: int
) -> None:
    """Feed the reduced plan back with steps appended: earlier facts must survive too."""
    originals = {s.number: s.result for s in plan.steps if s.result is not None}
    current = plan
    for _ in range(3):
        full = count_tokens(current.render())
        budget = data.draw(st.integers(full // 2, full), label="budget")
        out, exc = attempt(reduce_plan(current, budget, keep_recent=keep))
        if exc is not None:
            event("raised")
            assert exc.required > budget
            return
        event(f"reduced {'again ' if current is not plan else ''}")
        check_plan_output(current, out, budget, keep, originals)
        more = data.draw(plan_steps(first=out.steps[-1].number + 1), label="more steps")
        originals |= {s.number: s.result for s in more if s.result is not None}
        current = out.model_copy(update={"steps": (*out.steps, *more)})


# --- reflection ----------------------------------------------------------------------------

# Distinct points have distinct sets of words; near-duplicates differ in case,
# punctuation and spacing only.
_POINTS = (
    "Too long.",
    "Cite the sources.",
    "Mention the risks.",
    "The tone is too casual.",
    "Add an executive summary.",
    "Explain the 12% drop.",
    "Fix the chart on page 4.",
    "Use plain words.",
    "数据需要来源。",
    "Shorter intro",
)
_VARIANTS = (
    lambda p: p,
    lambda p: p.lower().rstrip(".") + "!",
    lambda p: p.upper(),
    lambda p: "  " + p.replace(" ", "  ") + " ?",
)
_POINT = st.tuples(st.sampled_from(_POINTS), st.sampled_from(_VARIANTS)).map(
    lambda pv: pv[1](pv[0])
)
_ROUND = st.builds(
    ReflectionRound,
    draft=st.lists(st.one_of(_FILLER, _FACT), min_size=1, max_size=10).map(" ".join),
    critique=st.lists(_POINT, max_size=3).map(tuple),
)


@st.composite
def reflections(draw: st.DrawFn) -> ReflectionTrajectory:
    folded = draw(st.integers(0, 3))
    return ReflectionTrajectory(
        task=f"Write {draw(_FILLER)}",
        rounds=tuple(draw(st.lists(_ROUND, min_size=1, max_size=8))),
        critique_points=tuple(draw(st.lists(_POINT, max_size=4))) if folded else (),
        folded_rounds=folded,
    )


def check_reflection_output(
    before: ReflectionTrajectory, out: ReflectionTrajectory, budget: int, seen: set[str]
) -> None:
    """`seen`: the normalised text of every critique point ever raised."""
    if count_tokens(before.render()) <= budget:
        assert out is before
        return
    assert count_tokens(out.render()) <= budget
    assert out.round_count == before.round_count
    assert [r.draft for r in out.rounds] == [before.rounds[-1].draft]
    keys = [normalised(p) for p in out.all_points()]
    assert len(keys) == len(set(keys))  # deduplicated
    assert seen <= set(keys)
    assert set(out.all_points()) <= set(before.all_points())  # first wordings, none invented


@settings(max_examples=100, deadline=None)
@given(data=st.data(), loop=reflections())
def test_reduce_reflection_keeps_every_distinct_point_and_the_latest_draft(
    data: st.DataObject, loop: ReflectionTrajectory
) -> None:
    budget = data.draw(_budget(count_tokens(loop.render())), label="budget")
    out, exc = attempt(reduce_reflection(loop, budget))
    if exc is not None:
        event("raised")
        assert exc.required > budget
        return
    event("reduced" if out is not loop else "fits as is")
    check_reflection_output(loop, out, budget, {normalised(p) for p in loop.all_points()})


@settings(max_examples=60, deadline=None)
@given(data=st.data(), loop=reflections())
def test_reduce_reflection_again_with_more_rounds(
    data: st.DataObject, loop: ReflectionTrajectory
) -> None:
    seen = {normalised(p) for p in loop.all_points()}
    current = loop
    for _ in range(3):
        full = count_tokens(current.render())
        budget = data.draw(st.integers(full // 3, full), label="budget")
        out, exc = attempt(reduce_reflection(current, budget))
        if exc is not None:
            event("raised")
            assert exc.required > budget
            return
        event(f"reduced {'again ' if current is not loop else ''}")
        check_reflection_output(current, out, budget, seen)
        more = data.draw(st.lists(_ROUND, min_size=1, max_size=4), label="more rounds")
        seen |= {normalised(p) for r in more for p in r.critique}
        current = out.model_copy(update={"rounds": (*out.rounds, *more)})


# --- summariser callbacks ------------------------------------------------------------------


def _long_loop() -> list[BaseMessage]:
    messages: list[BaseMessage] = [
        SystemMessage("You reconcile invoices."),
        HumanMessage("Reconcile the March invoices of account ACC-7781."),
    ]
    for i in range(10):
        call = {"name": "get_invoice", "args": {"n": i}, "id": f"c{i}", "type": "tool_call"}
        text = f"Invoice INV-{1000 + i} dated 2025-03-{i + 10} totals ${100 + i}.50. " + (
            "Nothing else of note was in the response body. " * 8
        )
        messages += [AIMessage("", tool_calls=[call]), ToolMessage(text, tool_call_id=f"c{i}")]
    return messages


def _long_plan() -> PlanTrajectory:
    filler = "The dashboards looked quiet and nothing stood out in the traces. " * 20
    return PlanTrajectory(
        goal="Find why checkout is slow",
        steps=tuple(
            PlanStep(
                number=n,
                description=f"Inspect shard {n}",
                status="done",
                result=f"Seen on 2025-03-{n + 10}: latency {300 + n} ms, TKT-{4800 + n}. {filler}"
                f"We concluded the cache of shard {n} is stale.",
            )
            for n in range(1, 9)
        ),
    )


async def _raise_async(text: str, instruction: str) -> str:
    raise RuntimeError("the model is down")


def _raise_sync(text: str, instruction: str) -> str:
    raise RuntimeError("the model is down")


async def _empty_async(text: str, instruction: str) -> str:
    return "   "


def _none_sync(text: str, instruction: str) -> Any:
    return None


_FAILING = [_raise_async, _raise_sync, _empty_async, _none_sync]


@pytest.mark.parametrize("summarize", _FAILING, ids=lambda f: f.__name__)
async def test_reduce_agent_falls_back_to_the_extractive_summary(
    summarize: Any, caplog: pytest.LogCaptureFixture
) -> None:
    messages = _long_loop()
    budget = count_message_tokens(messages) // 2
    expected = await reduce_agent(messages, budget)
    with caplog.at_level(logging.WARNING, logger="langchain_contextkit.reducers.base"):
        out = await reduce_agent(messages, budget, summarize)
    assert out == expected
    assert "INV-1000" in str(out[2].content)
    if "raise" in summarize.__name__:
        assert any("summariser failed" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("summarize", _FAILING, ids=lambda f: f.__name__)
async def test_reduce_plan_falls_back_to_the_extractive_summary(summarize: Any) -> None:
    plan = _long_plan()
    budget = count_tokens(plan.render()) // 2
    expected = await reduce_plan(plan, budget)
    out = await reduce_plan(plan, budget, summarize)
    assert out == expected
    assert out.summary


async def test_a_sync_summariser_is_accepted_and_facts_it_dropped_come_back() -> None:
    calls: list[tuple[str, str]] = []

    def summarize(text: str, instruction: str) -> str:
        calls.append((text, instruction))
        return "The shards were inspected one by one."

    plan = _long_plan()
    budget = count_tokens(plan.render()) // 2
    out = await reduce_plan(plan, budget, summarize)
    assert calls
    assert out.summary == "The shards were inspected one by one."
    text = out.render()
    assert count_tokens(text) <= budget
    for step in plan.steps[:5]:
        assert all(token in text for token in fact_tokens(step.result or ""))
        assert f"We concluded the cache of shard {step.number} is stale." in text

    messages = _long_loop()
    budget = count_message_tokens(messages) // 2
    reduced = await reduce_agent(messages, budget, summarize)
    assert "The shards were inspected one by one." in str(reduced[2].content)
    assert count_message_tokens(reduced) <= budget


async def test_summariser_objects_are_accepted() -> None:
    messages = _long_loop()
    budget = count_message_tokens(messages) // 2
    llm = GenericFakeChatModel(messages=iter([AIMessage("  Invoices INV-1000 to INV-1006 ok.  ")]))
    out = await reduce_agent(messages, budget, summarizer_from_llm(llm))
    assert "Invoices INV-1000 to INV-1006 ok." in str(out[2].content)
    out = await reduce_agent(messages, budget, ExtractiveSummarizer(max_tokens=40))
    assert count_message_tokens(out) <= budget
    assert find_message_problems(out) == []


async def test_a_summary_longer_than_the_room_is_cut_to_fit() -> None:
    def verbose(text: str, instruction: str) -> str:
        return "Everything went fine, really. " * 500

    messages = _long_loop()
    budget = count_message_tokens(messages) // 2
    out = await reduce_agent(messages, budget, verbose)
    assert count_message_tokens(out) <= budget
    plan = _long_plan()
    budget = count_tokens(plan.render()) // 2
    reduced = await reduce_plan(plan, budget, verbose)
    assert count_tokens(reduced.render()) <= budget


# --- regressions: bugs these properties found ----------------------------------------


async def test_reduce_agent_does_not_raise_when_the_must_keep_part_fits() -> None:
    messages: list[BaseMessage] = [HumanMessage("please look things up for me")]
    for i in range(6):
        call = {"name": "lookup", "args": {"q": "some words"}, "id": f"c{i}", "type": "tool_call"}
        text = "nothing interesting was found here at all, sorry about that " * 3
        messages += [AIMessage("", tool_calls=[call]), ToolMessage(text, tool_call_id=f"c{i}")]
    budget = count_message_tokens(messages) - 1  # 338 of 339
    # Got: ContextWindowExceeded("... takes 131 tokens, more than the trajectory budget of
    # 338"): the extractive summary of the four older units is "" (no sentence scores).
    out = await reduce_agent(messages, budget, keep_recent_steps=2)
    assert count_message_tokens(out) <= budget
    assert out[-4:] == messages[-4:]


async def test_reduce_plan_checks_facts_as_whole_tokens() -> None:
    filler = " The dashboards looked quiet and nothing stood out in the traces." * 10
    plan = PlanTrajectory(
        goal="Find why checkout is slow",
        steps=(
            PlanStep(
                number=1, description="Measure", status="done", result="Latency was 12 ms." + filler
            ),
            PlanStep(
                number=2, description="File", status="done", result="Filed as TKT-4812." + filler
            ),
            PlanStep(number=3, description="Wait", status="done", result="Nothing new." + filler),
        ),
    )

    def summarize(text: str, instruction: str) -> str:
        return "Filed as TKT-4812."

    out = await reduce_plan(plan, count_tokens(plan.render()) // 2, summarize, keep_recent=1)
    text = out.render()
    # Got: no key facts at all; "12" occurs only inside "TKT-4812".
    assert re.search(r"(?<![\w-])12(?!\w)", text), text


async def test_reduce_reflection_keeps_points_that_differ_in_word_order() -> None:
    loop = ReflectionTrajectory(
        task="Format the code sample",
        rounds=(
            ReflectionRound(draft="First draft. " * 60, critique=("Use 2 spaces, not 4.",)),
            ReflectionRound(draft="Second draft. " * 60, critique=("Use 4 spaces, not 2.",)),
            ReflectionRound(draft="Third draft."),
        ),
    )
    out = await reduce_reflection(loop, 60)
    # Got: ['Use 2 spaces, not 4.'] only.
    assert {normalised(p) for p in out.all_points()} == {
        "use 2 spaces not 4",
        "use 4 spaces not 2",
    }


def _normalised_chars(monkeypatch: pytest.MonkeyPatch, steps: int) -> int:
    """Characters `facts.normalised` processes while reducing a plan of `steps` steps."""
    seen = [0]
    original = facts_module.normalised

    def counting(text: str) -> str:
        seen[0] += len(text)
        return original(text)

    filler = " The dashboards looked quiet and nothing stood out in the traces." * 4
    plan = PlanTrajectory(
        goal="Audit the shards",
        steps=tuple(
            PlanStep(
                number=n,
                description=f"Inspect shard {n}",
                status="done",
                result=f"Latency {100 + n} ms, TKT-{1000 + n}.{filler}",
            )
            for n in range(1, steps + 1)
        ),
    )
    with monkeypatch.context() as patch:
        patch.setattr(facts_module, "normalised", counting)
        run(reduce_plan(plan, count_tokens(plan.render()) // 2))
    return seen[0]


def test_reduce_plan_work_grows_linearly_with_the_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    small = _normalised_chars(monkeypatch, 50)
    large = _normalised_chars(monkeypatch, 400)
    # Linear: 8x the steps, ~8x the characters. Got: ~60x.
    assert large / small <= 12, (small, large)
