"""A scan resumed from where the known part ended agrees with one scan (issue 17)."""

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


def test_the_rules_can_state_geminis_turn_before_a_call() -> None:
    """A function call must follow a user turn or a function response (Gemini's rule)."""
    from langchain_contextkit._message_rules import scan
    from langchain_contextkit.messages import ListRules

    gemini = ListRules(human_first=True, call_after=(HumanMessage, ToolMessage))
    call = [{"name": "f", "args": {}, "id": "c1"}]
    ok = [HumanMessage("q"), AIMessage("", tool_calls=call), ToolMessage("r", tool_call_id="c1")]
    assert scan(ok, gemini)[0] == []
    late = [HumanMessage("q"), AIMessage("thinking"), AIMessage("", tool_calls=call)]
    late.append(ToolMessage("r", tool_call_id="c1"))
    assert [(p.code, p.index) for p in scan(late, gemini)[0]] == [("call_not_after_user", 2)]
    assert scan(late, ListRules())[0] == []
