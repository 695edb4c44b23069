"""The retrieval-block filter looks only at new messages, and still drops every block."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_contextkit.agents.retrieval_block import RETRIEVAL_ID, BlockFree


def _turn(i: int) -> list[BaseMessage]:
    return [HumanMessage(f"q{i}", id=f"h{i}"), AIMessage(f"a{i}", id=f"a{i}")]


def test_blocks_are_dropped_wherever_they_appear() -> None:
    blocks = BlockFree()
    history = _turn(0) + _turn(1)
    assert blocks.without_blocks(history) == history
    block = HumanMessage("retrieved", id=RETRIEVAL_ID)
    grown = [*history, block, *_turn(2)]  # a block among the new messages
    assert blocks.without_blocks(grown) == [*history, *grown[5:]]
    assert all(m.id != RETRIEVAL_ID for m in blocks.without_blocks(grown))
    # A block swapped in for an old message (the list no longer extends the last one).
    edited = [block, *history[1:]]
    assert blocks.without_blocks(edited) == history[1:]
    # After a list with a block, the next call checks everything again.
    assert blocks.without_blocks([*history, block]) == history


def test_an_extension_is_checked_from_where_the_last_list_ended() -> None:
    blocks = BlockFree()
    history = _turn(0)
    blocks.without_blocks(history)
    # An old message renamed in place to the block id is not looked at again (the stored
    # history never holds a block; only what is new is read) ...
    history[0].id = RETRIEVAL_ID
    assert blocks.without_blocks([*history, *_turn(1)])[0] is history[0]
    # ... but a fresh list (other objects) is read whole.
    copies = [m.model_copy() for m in history]
    assert blocks.without_blocks(copies) == copies[1:]
