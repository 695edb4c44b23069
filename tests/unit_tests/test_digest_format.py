"""The content digests that key shared recaps keep their byte format (stored keys stay valid)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from langchain_contextkit.compaction._recap_grid import _fingerprint, prefix_digests


def test_each_field_is_length_prefixed_in_order() -> None:
    call = {"name": "look", "args": {"q": "ü"}, "id": "c1"}
    assert _fingerprint(HumanMessage("héllo")) == b"5:human6:h\xc3\xa9llo0:0:0:"
    assert _fingerprint(AIMessage("", tool_calls=[call])) == (
        b'2:ai0:0:29:[["look", {"q": "\xc3\xbc"}, "c1"]]0:'
    )
    assert _fingerprint(ToolMessage("r", tool_call_id="c1")) == b"4:tool1:r0:0:2:c1"
    blocks = HumanMessage([{"type": "text", "text": "x"}])
    assert _fingerprint(blocks) == b'5:human0:31:[{"text": "x", "type": "text"}]0:0:'


def test_ids_are_left_out_and_the_digests_chain() -> None:
    first = [HumanMessage("a", id="1"), AIMessage("b", id="2")]
    second = [HumanMessage("a", id="x"), AIMessage("b", id="y")]
    assert prefix_digests(first) == prefix_digests(second)
    assert len(set(prefix_digests(first))) == 3
