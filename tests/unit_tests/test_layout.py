"""`lay_out`: the one place that orders a request's parts, and the spans it returns."""

from __future__ import annotations

from hypothesis import given, strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_contextkit.agent.layout import lay_out
from langchain_contextkit.agent.plan import RETRIEVAL_ID
from langchain_contextkit.agent.providers import layout_ends, stable_prefix_ends
from langchain_contextkit.compaction import HistoryCompactor

_RECAP = HistoryCompactor(keep_recent=2, trigger_tokens=50).compact(
    [HumanMessage(f"Turn {i}: order {i} shipped.") for i in range(40)]
)[0]


def _turns(n: int, tag: str) -> list[BaseMessage]:
    return [
        HumanMessage(f"{tag} question {i}") if i % 2 == 0 else AIMessage(f"{tag} answer {i}")
        for i in range(n)
    ]


def test_the_recap_is_a_recap() -> None:
    assert stable_prefix_ends([_RECAP])[0] == 0


@given(
    system=st.integers(0, 2),
    recap=st.booleans(),
    older=st.integers(0, 6),
    block=st.booleans(),
    turn=st.integers(1, 4),
)
def test_spans_cover_the_request_in_order_and_agree_with_the_scan(
    system: int, recap: bool, older: int, block: bool, turn: int
) -> None:
    parts = {
        "system": [SystemMessage(f"rule {i}") for i in range(system)],
        "recap": [_RECAP] if recap else [],
        "older": _turns(older, "old"),
        "retrieval": [HumanMessage("[Knowledge] x", id=RETRIEVAL_ID)] if block else [],
        # A turn opens with the user's message; the agent's work follows.
        "turn": [HumanMessage("now"), *(AIMessage(f"step {i}") for i in range(turn - 1))],
    }
    layout = lay_out(
        system=parts["system"],
        recap=parts["recap"][0] if recap else None,
        older=parts["older"],
        retrieval=parts["retrieval"][0] if block else None,
        turn=parts["turn"],
    )
    position = 0
    for name in ("system", "recap", "older", "retrieval", "turn"):
        start, end = layout.spans[name]  # type: ignore[index]
        assert start == position
        assert layout.messages[start:end] == parts[name]
        position = end
    assert position == len(layout.messages)
    # The cache marks read the spans; the scan of the ids finds the same ends.
    assert layout_ends(layout) == stable_prefix_ends(layout.messages)


def test_a_retrieval_block_sent_back_is_dropped_and_rebuilt_next_to_the_question() -> None:
    from langchain_contextkit import CallableSource, RetrievalResult
    from langchain_contextkit.agent import WindowAssembler

    def faq(query: str) -> list[RetrievalResult]:
        return [RetrievalResult(f"Answer for {query}.", 0.9, "rag")]

    assembler = WindowAssembler(window=4_000, sources=[CallableSource("rag", faq)])
    old_block = HumanMessage("[Knowledge] stale", id=RETRIEVAL_ID)
    history = [*_turns(4, "old"), old_block, AIMessage("ok"), HumanMessage("now?")]
    assembly = assembler.assemble(history)
    blocks = [m for m in assembly.messages if m.id == RETRIEVAL_ID]
    assert len(blocks) == 1
    assert "stale" not in blocks[0].text
    assert assembly.messages[-2] is blocks[0]
    assert assembly.messages[-1].text == "now?"
    assert assembly.layout is not None
    assert assembly.layout.part("retrieval") == blocks
