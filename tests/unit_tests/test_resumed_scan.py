"""A scan resumed from where the known part ended agrees with one scan (issue 17)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_contextkit.messages import lists as messages_module

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


def test_the_rules_can_state_geminis_turn_before_a_call() -> None:
    """A function call must follow a user turn or a function response (Gemini's rule)."""
    from langchain_contextkit.messages.lists import ListRules, scan

    gemini = ListRules(human_first=True, call_after=(HumanMessage, ToolMessage))
    call = [{"name": "f", "args": {}, "id": "c1"}]
    ok = [HumanMessage("q"), AIMessage("", tool_calls=call), ToolMessage("r", tool_call_id="c1")]
    assert scan(ok, gemini)[0] == []
    late = [HumanMessage("q"), AIMessage("thinking"), AIMessage("", tool_calls=call)]
    late.append(ToolMessage("r", tool_call_id="c1"))
    assert [(p.code, p.index) for p in scan(late, gemini)[0]] == [("call_not_after_user", 2)]
    assert scan(late, ListRules())[0] == []
