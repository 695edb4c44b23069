"""The tight validity loop agrees with the full scan on every list (issue 17)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
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
