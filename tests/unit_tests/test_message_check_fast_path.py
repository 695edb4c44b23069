"""The tight validity loop agrees with the full scan on every list (issue 17)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_contextkit import messages as messages_module
from langchain_contextkit.messages import find_message_problems

ids = st.sampled_from(["c1", "c2", "c3"])
message = st.one_of(
    st.builds(lambda: HumanMessage("q")),
    st.builds(lambda: SystemMessage("s")),
    st.builds(lambda: AIMessage("a")),
    st.builds(
        lambda calls: AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": c} for c in calls]),
        st.lists(ids, min_size=1, max_size=3),
    ),
    st.builds(lambda c: ToolMessage("r", tool_call_id=c), ids),
)


def _full_scan(messages: list[BaseMessage], **flags: bool) -> list[object]:
    scan = messages_module._Scan(
        len(messages), allow_pending_tool_calls=flags.get("allow_pending_tool_calls", False)
    )
    for i, m in enumerate(messages):
        scan.visit(i, m)
    scan.close_block(len(messages))
    return scan.problems


@given(st.lists(message, max_size=12), st.booleans(), st.booleans())
@settings(max_examples=600, deadline=None)
def test_the_fast_check_agrees_with_the_full_scan(
    messages: list[BaseMessage], pending: bool, human_first: bool
) -> None:
    clean = messages_module._clean(messages, allow_pending=pending)
    assert clean == (_full_scan(messages, allow_pending_tool_calls=pending) == [])
    problems = find_message_problems(
        messages, require_human_first=human_first, allow_pending_tool_calls=pending
    )
    first = next((m for m in messages if not isinstance(m, SystemMessage)), None)
    first_bad = human_first and first is not None and not isinstance(first, HumanMessage)
    assert (problems == []) == (clean and not first_bad)


@given(st.lists(message, max_size=14), st.integers(0, 14))
@settings(max_examples=600, deadline=None)
def test_a_resumed_scan_equals_one_scan(messages: list[BaseMessage], split: int) -> None:
    """Scanning a list in two pieces ends where one scan of it ends (or fails in both)."""
    whole = messages_module.resume_scan(messages_module.CleanScan(), messages)
    first = messages_module.resume_scan(messages_module.CleanScan(), messages[:split])
    resumed = None if first is None else messages_module.resume_scan(first, messages[split:])
    assert resumed == whole


@given(st.lists(message, max_size=14), st.lists(message, max_size=4))
@settings(max_examples=600, deadline=None)
def test_the_index_clean_state_never_hides_a_problem(
    history: list[BaseMessage], tail: list[BaseMessage]
) -> None:
    """What `_finish` takes as valid without the full check, the full check finds valid.

    For every unit start of a random history, a request made of a recap, the history
    from there and a random tail: when the layout's fast check accepts it, the full
    check finds no problem; and on a clean history with a clean tail it does accept it.
    """
    from langchain_contextkit import count_tokens
    from langchain_contextkit.agents.request_layout import _valid_request
    from langchain_contextkit.messages import CleanScan, resume_scan

    costs = messages_module.message_costs(history, count_tokens)
    scan = resume_scan(CleanScan(), history)
    starts = messages_module.unit_starts(history)
    head: list[BaseMessage] = [SystemMessage("prompt"), SystemMessage("recap")]
    for start in range(len(history)):
        kept = history[start:]
        known = (sum(costs[start:]), scan if start in starts else None)
        request = [*head, *kept, *tail]
        if _valid_request(head, kept, known, tail):
            assert find_message_problems(request) == []
        if start in messages_module.unit_starts(history) and not find_message_problems(
            [*history, *tail]
        ):
            assert _valid_request(head, kept, known, tail)
