"""Message surgery: the provider rules, safe cuts, trimming, and the upstream bugs they fix."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)

from langchain_contextkit.errors import ContextKitError, ContextWindowExceeded, InvalidMessagesError
from langchain_contextkit.messages.lists import (
    MessageProblem,
    check_messages,
    find_message_problems,
    message_costs,
    next_human_start,
    safe_cut,
    split_system,
    tail_start,
    trim_to_budget,
    unit_starts,
)
from langchain_contextkit.tokens.count import count_message_tokens, count_tokens

# --- builders ------------------------------------------------------------------------------


def _call(call_id: str, name: str = "lookup", **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def _ai_calls(*ids: str, text: str = "") -> AIMessage:
    return AIMessage(text, tool_calls=[_call(i, q=i) for i in ids])


def _result(call_id: str, text: str = "ok") -> ToolMessage:
    return ToolMessage(text, tool_call_id=call_id, name="lookup")


def _codes(messages: list[BaseMessage], **kwargs: bool) -> list[tuple[str, int]]:
    return [(p.code, p.index) for p in find_message_problems(messages, **kwargs)]


def _same(left: list[BaseMessage], right: list[BaseMessage]) -> bool:
    """Same messages (the very objects) in the same order."""
    return len(left) == len(right) and all(a is b for a, b in zip(left, right, strict=True))


# --- find_message_problems: valid lists ------------------------------------------------------


VALID = {
    "empty": [],
    "system-only": [SystemMessage("a"), SystemMessage("b")],
    "plain": [SystemMessage("s"), HumanMessage("q"), AIMessage("a"), HumanMessage("q2")],
    "single-call": [HumanMessage("q"), _ai_calls("c1"), _result("c1"), AIMessage("done")],
    "parallel-reordered": [
        HumanMessage("q"),
        _ai_calls("c1", "c2", "c3"),
        _result("c3"),
        _result("c1"),
        _result("c2"),
        AIMessage("done"),
    ],
    "back-to-back-blocks": [
        HumanMessage("q"),
        _ai_calls("c1"),
        _result("c1"),
        _ai_calls("c2", "c3"),
        _result("c2"),
        _result("c3"),
    ],
    "block-then-human": [HumanMessage("q"), _ai_calls("c1"), _result("c1"), HumanMessage("q2")],
    "reused-id-in-a-later-block": [
        HumanMessage("q"),
        _ai_calls("call_0"),
        _result("call_0"),
        _ai_calls("call_0"),
        _result("call_0"),
    ],
    "starts-with-ai": [AIMessage("Hello, how can I help?"), HumanMessage("q")],
}


@pytest.mark.parametrize("messages", list(VALID.values()), ids=list(VALID))
def test_valid_lists_have_no_problems(messages: list[BaseMessage]) -> None:
    assert find_message_problems(messages) == []
    check_messages(messages)  # does not raise


# --- find_message_problems: each rule ------------------------------------------------------


def test_system_after_the_conversation_began() -> None:
    messages = [SystemMessage("s"), HumanMessage("q"), SystemMessage("late"), AIMessage("a")]
    assert _codes(messages) == [("misplaced_system", 2)]
    assert _codes([HumanMessage("q"), SystemMessage("late")]) == [("misplaced_system", 1)]
    # a leading tool message already began the conversation
    assert ("misplaced_system", 1) in _codes([_result("x"), SystemMessage("late")])


def test_tool_result_without_a_call() -> None:
    assert _codes([HumanMessage("q"), _result("c1")]) == [("orphan_tool_result", 1)]
    assert _codes([_result("c1"), HumanMessage("q")]) == [("orphan_tool_result", 0)]
    # after a plain AI message (no tool calls)
    assert _codes([HumanMessage("q"), AIMessage("a"), _result("c1")]) == [("orphan_tool_result", 2)]
    # an id the preceding AI message did not ask for
    messages = [HumanMessage("q"), _ai_calls("c1"), _result("c1"), _result("zz")]
    assert _codes(messages) == [("orphan_tool_result", 3)]


def test_tool_result_must_answer_the_nearest_ai_message() -> None:
    messages = [HumanMessage("q"), _ai_calls("c1"), AIMessage("thinking"), _result("c1")]
    assert _codes(messages) == [("unanswered_tool_call", 1), ("orphan_tool_result", 3)]


def test_tool_result_answered_twice() -> None:
    messages = [HumanMessage("q"), _ai_calls("c1", "c2"), _result("c1"), _result("c2")]
    assert _codes([*messages, _result("c1")]) == [("duplicate_tool_result", 4)]
    assert _codes([*messages[:3], _result("c1"), messages[3]]) == [("duplicate_tool_result", 3)]


def test_tool_call_without_a_result_before_the_next_message() -> None:
    # one of two parallel calls unanswered: reported once, at the AI message
    messages = [HumanMessage("q"), _ai_calls("c1", "c2"), _result("c1"), HumanMessage("q2")]
    assert _codes(messages) == [("unanswered_tool_call", 1)]
    # both unanswered: one problem per call
    assert _codes([HumanMessage("q"), _ai_calls("c1", "c2"), AIMessage("a")]) == [
        ("unanswered_tool_call", 1),
        ("unanswered_tool_call", 1),
    ]
    # at the very end of the list
    assert _codes([HumanMessage("q"), _ai_calls("c1")]) == [("unanswered_tool_call", 1)]


def test_pending_tool_calls_are_allowed_only_in_the_last_unit() -> None:
    last = [HumanMessage("q"), _ai_calls("c1", "c2"), _result("c2")]
    assert _codes(last) == [("unanswered_tool_call", 1)]
    assert _codes(last, allow_pending_tool_calls=True) == []
    assert _codes(last[:2], allow_pending_tool_calls=True) == []
    middle = [HumanMessage("q"), _ai_calls("c1"), HumanMessage("q2")]
    assert _codes(middle, allow_pending_tool_calls=True) == [("unanswered_tool_call", 1)]
    # pending calls never excuse an orphan
    orphan = [HumanMessage("q"), _ai_calls("c1"), _result("zz")]
    assert _codes(orphan, allow_pending_tool_calls=True) == [("orphan_tool_result", 2)]


def test_require_human_first() -> None:
    starts_with_ai = [SystemMessage("s"), AIMessage("hello"), HumanMessage("q")]
    assert _codes(starts_with_ai) == []
    assert _codes(starts_with_ai, require_human_first=True) == [("first_not_human", 1)]
    assert _codes([AIMessage("hello")], require_human_first=True) == [("first_not_human", 0)]
    assert ("first_not_human", 0) in _codes([_result("c1")], require_human_first=True)
    for fine in ([], [SystemMessage("s")], [SystemMessage("s"), HumanMessage("q")]):
        assert _codes(fine, require_human_first=True) == []


def test_problems_come_in_list_order_with_a_readable_detail() -> None:
    messages = [
        AIMessage("hi"),
        _ai_calls("c1"),
        SystemMessage("late"),
        _result("c1"),
    ]
    problems = find_message_problems(messages, require_human_first=True)
    assert [p.index for p in problems] == sorted(p.index for p in problems)
    assert [(p.code, p.index) for p in problems] == [
        ("first_not_human", 0),
        ("unanswered_tool_call", 1),
        ("misplaced_system", 2),
        ("orphan_tool_result", 3),
    ]
    assert str(problems[1]).startswith("message 1: ")
    assert "'c1'" in problems[1].detail


# --- check_messages -------------------------------------------------------------------------


def test_check_messages_raises_listing_every_problem() -> None:
    messages = [HumanMessage("q"), _result("c9"), SystemMessage("late")]
    with pytest.raises(InvalidMessagesError) as info:
        check_messages(messages)
    error = info.value
    assert isinstance(error, ValueError)
    assert isinstance(error, ContextKitError)
    assert error.problems == tuple(find_message_problems(messages))
    assert [p.code for p in error.problems] == ["orphan_tool_result", "misplaced_system"]
    assert "message 1: " in str(error)
    assert "message 2: " in str(error)


def test_check_messages_passes_the_flags_through() -> None:
    pending = [HumanMessage("q"), _ai_calls("c1")]
    check_messages(pending, allow_pending_tool_calls=True)
    with pytest.raises(InvalidMessagesError, match="no tool result"):
        check_messages(pending)
    check_messages([AIMessage("hi")])
    with pytest.raises(InvalidMessagesError) as info:
        check_messages([AIMessage("hi")], require_human_first=True)
    assert [p.code for p in info.value.problems] == ["first_not_human"]


def test_check_messages_shortens_a_long_list_of_problems() -> None:
    messages = [HumanMessage("q"), *(_result(f"c{i}") for i in range(7))]
    with pytest.raises(InvalidMessagesError, match=r"\(and 2 more\)") as info:
        check_messages(messages)
    assert len(info.value.problems) == 7


# --- units and cuts -------------------------------------------------------------------------


PARALLEL = [
    SystemMessage("s"),
    HumanMessage("q"),
    _ai_calls("c1", "c2"),
    _result("c2"),
    _result("c1"),
    AIMessage("done"),
    HumanMessage("q2"),
]


def test_unit_starts() -> None:
    assert unit_starts(PARALLEL) == [0, 1, 2, 5, 6]
    assert unit_starts([]) == []
    # a stray leading tool message is a unit of its own; later strays stay glued
    stray = [_result("x"), _result("y"), HumanMessage("q")]
    assert unit_starts(stray) == [0, 2]


@pytest.mark.parametrize(
    ("index", "expected"),
    [(-5, 0), (0, 0), (1, 1), (2, 2), (3, 2), (4, 2), (5, 5), (7, 7), (99, 7)],
)
def test_safe_cut_moves_back_to_a_unit_start(index: int, expected: int) -> None:
    assert safe_cut(PARALLEL, index) == expected


def test_split_system_and_next_human_start() -> None:
    system, rest = split_system(PARALLEL)
    assert _same(system, PARALLEL[:1])
    assert _same(rest, PARALLEL[1:])
    assert split_system([]) == ([], [])
    assert next_human_start(rest, 1) == 5
    assert next_human_start(rest, 0) == 0
    assert next_human_start(rest, 6) == 6


def test_tail_start_budget_edges() -> None:
    rest = PARALLEL[1:]  # units: [q] [call, r, r] [done] [q2]
    costs = message_costs(rest)
    last = costs[5]
    assert tail_start(rest, last) == 5  # exactly equal fits
    assert tail_start(rest, last - 1) == 6  # one short: the empty tail
    block = sum(costs[1:])
    assert tail_start(rest, block) == 1
    assert tail_start(rest, block - 1) == 4  # the tool block is all or nothing
    assert tail_start(rest, sum(costs)) == 0
    assert tail_start(rest, -1) == 6
    assert tail_start([], 100) == 0


def test_tail_start_min_units_keeps_turns_over_budget() -> None:
    rest = PARALLEL[1:]
    assert tail_start(rest, 0, min_units=1) == 5
    assert tail_start(rest, 0, min_units=3) == 1
    assert tail_start(rest, 0, min_units=99) == 0
    # beyond the minimum, the budget still decides
    assert tail_start(rest, sum(message_costs(rest)), min_units=1) == 0


def test_tail_start_uses_precomputed_costs() -> None:
    def refuse(text: str) -> int:
        raise AssertionError("the counter must not be called when costs are given")

    rest = PARALLEL[1:]
    costs = [10, 1, 1, 1, 10, 10]
    assert tail_start(rest, 20, counter=refuse, costs=costs) == 4
    assert tail_start(rest, 23, counter=refuse, costs=costs) == 1


def test_message_costs_add_up_to_the_request_count() -> None:
    messages = [
        SystemMessage("You are terse."),
        HumanMessage("退款需要多久？ How long do refunds take?", name="alice"),
        _ai_calls("c1", "c2", text="Checking."),
        _result("c1", "Refunds take 5 days."),
        _result("c2", "最多五个工作日。"),
        AIMessage([{"type": "text", "text": "Up to five days."}]),
    ]
    for counter in (count_tokens, len):
        costs = message_costs(messages, counter)
        assert len(costs) == len(messages)
        assert all(c > 0 for c in costs)
        assert sum(costs) + 3 == count_message_tokens(messages, counter)
    assert message_costs([]) == []


# --- trim_to_budget ------------------------------------------------------------------------


HISTORY = [
    SystemMessage("You are terse."),
    HumanMessage("Look up order 7. " * 20),
    _ai_calls("c7"),
    _result("c7", "Order 7 shipped on 2024-05-02."),
    AIMessage("It shipped on 2 May."),
    HumanMessage("And order 8?"),
    AIMessage("Let me check."),
]


def test_trim_keeps_the_system_prefix_and_a_tail_of_whole_units() -> None:
    costs = message_costs(HISTORY)
    for budget in range(costs[0] + 3, count_message_tokens(HISTORY) + 5):
        out = trim_to_budget(HISTORY, budget)
        assert out[0] is HISTORY[0]
        assert find_message_problems(out) == []
        assert count_message_tokens(out) <= budget
        assert _same(out[1:], HISTORY[len(HISTORY) - len(out) + 1 :])
    assert _same(trim_to_budget(HISTORY, count_message_tokens(HISTORY)), HISTORY)


def test_trim_budget_exactly_equal_fits() -> None:
    costs = message_costs(HISTORY)
    exact = costs[0] + sum(costs[2:]) + 3  # system + tool block + the rest
    assert [m.type for m in trim_to_budget(HISTORY, exact)] == [
        "system",
        "ai",
        "tool",
        "ai",
        "human",
        "ai",
    ]
    assert [m.type for m in trim_to_budget(HISTORY, exact - 1)] == ["system", "ai", "human", "ai"]


def test_trim_returns_a_new_list() -> None:
    out = trim_to_budget(HISTORY, 10_000)
    assert out == HISTORY
    assert out is not HISTORY


def test_trim_raises_when_the_system_prefix_alone_is_over() -> None:
    system_cost = message_costs(HISTORY)[0] + 3
    assert trim_to_budget(HISTORY, system_cost) == [HISTORY[0]]
    with pytest.raises(ContextWindowExceeded) as info:
        trim_to_budget(HISTORY, system_cost - 1)
    assert (info.value.required, info.value.budget) == (system_cost, system_cost - 1)


def test_trim_require_human_first() -> None:
    costs = message_costs(HISTORY)
    budget = costs[0] + sum(costs[2:]) + 3  # the tail would start with the AI tool call
    out = trim_to_budget(HISTORY, budget, require_human_first=True)
    assert [m.type for m in out] == ["system", "human", "ai"]
    assert find_message_problems(out, require_human_first=True) == []
    # no human message fits: only the system prefix
    assert trim_to_budget(HISTORY, costs[0] + costs[-1] + 3, require_human_first=True) == [
        HISTORY[0]
    ]


@pytest.mark.parametrize("messages", [[], [HumanMessage("hi")]], ids=["empty", "no-system"])
def test_trim_without_system_messages_never_raises(messages: list[BaseMessage]) -> None:
    for budget in range(3):
        assert trim_to_budget(messages, budget) == []


# --- hypothesis: random valid conversations -------------------------------------------------

_ALPHABET = st.sampled_from(
    list("abcdefghij xyz0123456789.,!?;:-_\n") + list("你好世界中文数据。！？；，") + ["😀", "é"]
)
_TEXT = st.text(alphabet=_ALPHABET, max_size=60)  # no capitals: markers (MK0001X) stay unique


@st.composite
def conversations(
    draw: st.DrawFn, *, human_first: bool | None = None, min_tool_blocks: int = 0
) -> list[BaseMessage]:
    """A valid conversation: system prefix, then turns of human, AI and tool-call units.

    Every message carries a unique marker ``MK0000X``; tool call ids are unique.
    """
    numbers = itertools.count()

    def text() -> str:
        return f"MK{next(numbers):04d}X {draw(_TEXT)}"

    messages: list[BaseMessage] = [SystemMessage(text()) for _ in range(draw(st.integers(0, 2)))]
    if human_first is None:
        human_first = draw(st.booleans())
    turns = draw(st.integers(1, 5))
    blocks = 0
    for turn in range(turns):
        if turn > 0 or human_first:
            messages.append(HumanMessage(text()))
        kinds = draw(st.lists(st.sampled_from(["ai", "tools"]), max_size=3))
        if turn == 0 and not human_first and not kinds:
            kinds = ["ai"]
        if turn == turns - 1 and blocks + kinds.count("tools") < min_tool_blocks:
            kinds += ["tools"] * (min_tool_blocks - blocks - kinds.count("tools"))
        for kind in kinds:
            if kind == "ai":
                messages.append(AIMessage(text()))
                continue
            blocks += 1
            ids = [f"call_{next(numbers)}" for _ in range(draw(st.integers(1, 4)))]
            content = draw(st.sampled_from(["", "text"]))
            marker = text()
            messages.append(
                AIMessage(
                    marker if content else "",
                    tool_calls=[_call(i, q=f"{marker} {i}") for i in ids],
                )
            )
            order = draw(st.permutations(ids))
            messages.extend(
                ToolMessage(text(), tool_call_id=call_id, name="lookup") for call_id in order
            )
    return messages


def _first_other(messages: list[BaseMessage]) -> int:
    return len(split_system(messages)[0])


@given(messages=conversations())
@settings(max_examples=100, deadline=None)
def test_generated_conversations_are_valid(messages: list[BaseMessage]) -> None:
    assert find_message_problems(messages) == []
    first = _first_other(messages)
    expected = [] if isinstance(messages[first], HumanMessage) else [("first_not_human", first)]
    assert _codes(messages, require_human_first=True) == expected
    assert sum(message_costs(messages)) + 3 == count_message_tokens(messages)


@given(data=st.data(), messages=conversations(), require_human=st.booleans())
@settings(max_examples=100, deadline=None)
def test_trim_to_budget_properties(
    data: st.DataObject, messages: list[BaseMessage], require_human: bool
) -> None:
    system, rest = split_system(messages)
    total = count_message_tokens(messages)
    budget = data.draw(st.integers(0, total + 10), label="budget")
    system_cost = sum(message_costs(system)) + 3
    if system and system_cost > budget:
        with pytest.raises(ContextWindowExceeded):
            trim_to_budget(messages, budget, require_human_first=require_human)
        return
    out = trim_to_budget(messages, budget, require_human_first=require_human)
    assert _same(out[: len(system)], system)
    tail = out[len(system) :]
    assert _same(tail, rest[len(rest) - len(tail) :])
    assert find_message_problems(out) == []
    if require_human:
        assert not tail or isinstance(tail[0], HumanMessage)
        assert find_message_problems(tail, require_human_first=True) == []
    assert count_message_tokens(out) <= budget
    if not require_human and len(tail) < len(rest):
        # the longest tail: one more unit would not fit
        starts = unit_starts(rest)
        start = len(rest) - len(tail)
        previous = max(s for s in starts if s < start)
        assert count_message_tokens([*system, *rest[previous:]]) > budget


@given(messages=conversations())
@settings(max_examples=80, deadline=None)
def test_every_safe_cut_splits_into_two_valid_parts(messages: list[BaseMessage]) -> None:
    starts = unit_starts(messages)
    for index in range(-2, len(messages) + 3):
        cut = safe_cut(messages, index)
        assert 0 <= cut <= max(index, 0)
        assert cut in starts or cut == len(messages)
        head, tail = messages[:cut], messages[cut:]
        assert find_message_problems(head) == []
        assert find_message_problems(tail) == []
        assert not tail or not isinstance(tail[0], ToolMessage)
        # nothing between the cut and the requested index starts a unit
        assert not [s for s in starts if cut < s <= index]


@given(messages=conversations(min_tool_blocks=1), data=st.data())
@settings(max_examples=80, deadline=None)
def test_random_cut_then_safe_cut_never_starts_with_a_tool_result(
    messages: list[BaseMessage], data: st.DataObject
) -> None:
    index = data.draw(st.integers(0, len(messages)), label="cut")
    tail = messages[safe_cut(messages, index) :]
    assert not tail or not isinstance(tail[0], ToolMessage)
    # a naive cut inside a tool block is exactly what the checker flags
    if index < len(messages) and isinstance(messages[index], ToolMessage):
        assert find_message_problems(messages[index:])[0].code == "orphan_tool_result"


@given(messages=conversations(), data=st.data())
@settings(max_examples=80, deadline=None)
def test_tail_start_returns_a_unit_start_within_budget(
    messages: list[BaseMessage], data: st.DataObject
) -> None:
    _, rest = split_system(messages)
    costs = message_costs(rest)
    budget = data.draw(st.integers(-1, sum(costs) + 5), label="budget")
    min_units = data.draw(st.integers(0, 3), label="min_units")
    start = tail_start(rest, budget, costs=costs, min_units=min_units)
    starts = unit_starts(rest)
    assert start in starts or start == len(rest)
    kept_units = len([s for s in starts if s >= start])
    assert kept_units >= min(min_units, len(starts))
    if kept_units > min_units:
        assert sum(costs[start:]) <= budget


# --- hypothesis: invalid mutations are caught with the right code ---------------------------


def _blocks(messages: list[BaseMessage]) -> list[tuple[int, list[int]]]:
    """(index of each AI message with tool calls, indices of its results)."""
    out: list[tuple[int, list[int]]] = []
    for i, message in enumerate(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            out.append((i, []))
        elif isinstance(message, ToolMessage):
            out[-1][1].append(i)
    return out


@st.composite
def mutations(draw: st.DrawFn) -> tuple[str, list[BaseMessage], set[tuple[str, int]]]:
    """A valid conversation broken in one way, and the problems that must be reported."""
    messages = draw(conversations(min_tool_blocks=1))
    kind = draw(st.sampled_from(["drop_result", "late_system", "duplicate_result", "interrupt"]))
    ai, results = draw(st.sampled_from(_blocks(messages)))
    if kind == "drop_result":
        dropped = draw(st.sampled_from(results))
        return kind, messages[:dropped] + messages[dropped + 1 :], {("unanswered_tool_call", ai)}
    if kind == "duplicate_result":
        original = draw(st.sampled_from(results))
        at = draw(st.integers(original + 1, results[-1] + 1))
        broken = [*messages[:at], messages[original], *messages[at:]]
        return kind, broken, {("duplicate_tool_result", at)}
    if kind == "interrupt":
        at = draw(st.integers(ai + 1, results[-1]))
        broken = [*messages[:at], HumanMessage("wait"), *messages[at:]]
        expected = {("unanswered_tool_call", ai)}
        expected |= {("orphan_tool_result", i + 1) for i in results if i >= at}
        return kind, broken, expected
    # late_system: move a leading system message (or a new one) after the conversation began
    system, rest = split_system(messages)
    moved = system.pop(draw(st.integers(0, len(system) - 1))) if system else SystemMessage("late")
    base = system + rest
    at = draw(st.integers(len(system) + 1, len(base)))
    return kind, [*base[:at], moved, *base[at:]], {("misplaced_system", at)}


@given(case=mutations())
@settings(max_examples=100, deadline=None)
def test_invalid_mutations_are_detected(
    case: tuple[str, list[BaseMessage], set[tuple[str, int]]],
) -> None:
    kind, broken, expected = case
    found = set(_codes(broken))
    assert expected <= found, kind
    if kind != "late_system":  # a system message dropped inside a tool block also splits it
        assert found == expected, kind
    with pytest.raises(InvalidMessagesError):
        check_messages(broken)


# --- regressions: upstream bugs -------------------------------------------------------------


def _tokens(messages: list[BaseMessage]) -> int:
    return count_message_tokens(messages)


def test_langchain_33245_trim_messages_last_orphans_a_tool_result() -> None:
    """`trim_messages(strategy="last")` keeps a ToolMessage whose AI call was cut away."""
    history = [
        HumanMessage("What is the status of order 7? " * 3),
        _ai_calls("c1"),
        _result("c1", "Order 7 shipped on 2024-05-02 via DHL, tracking 123."),
        AIMessage("It shipped."),
    ]
    broken_budgets = []
    for budget in range(3, _tokens(history) + 2):
        theirs = trim_messages(history, max_tokens=budget, token_counter=_tokens, strategy="last")
        if find_message_problems(theirs):
            broken_budgets.append(budget)
            assert isinstance(theirs[0], ToolMessage)
            assert [p.code for p in find_message_problems(theirs)] == ["orphan_tool_result"]
        ours = trim_to_budget(history, budget)
        assert find_message_problems(ours) == []
        assert count_message_tokens(ours) <= budget
    assert broken_budgets, "the anchor: langchain's trim_messages must break on this input"


def test_langmem_126_parallel_results_are_kept_all_or_none() -> None:
    """Trimming around parallel tool calls must not keep only some of their results."""
    ids = ["c1", "c2", "c3", "c4"]
    history = [
        SystemMessage("You are a travel agent."),
        HumanMessage("Compare flights, hotels, cars and trains for Lisbon."),
        _ai_calls(*ids),
        *(_result(i, f"Result {i}: option {n} costs {100 * n} EUR.") for n, i in enumerate(ids)),
        AIMessage("Flights are cheapest."),
    ]
    partial_upstream = False
    for budget in range(message_costs(history)[0] + 3, _tokens(history) + 2):
        theirs = trim_messages(
            history, max_tokens=budget, token_counter=_tokens, strategy="last", include_system=True
        )
        kept_results = [m for m in theirs if isinstance(m, ToolMessage)]
        if 0 < len(kept_results) < len(ids):
            partial_upstream = True
            assert find_message_problems(theirs)
        ours = trim_to_budget(history, budget)
        assert find_message_problems(ours) == []
        ours_results = {m.tool_call_id for m in ours if isinstance(m, ToolMessage)}
        assert ours_results in (set(), set(ids))
        assert any(m is history[2] for m in ours) == bool(ours_results)
    assert partial_upstream, "the anchor: langchain's trim_messages keeps a partial block"


def test_invalid_messages_error_is_exported_with_message_problem() -> None:
    problem = MessageProblem(2, "orphan_tool_result", "tool result for call 'x' is an orphan")
    error = InvalidMessagesError([problem])
    assert error.problems == (problem,)
    assert str(problem) in str(error)
