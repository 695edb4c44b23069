"""Between compactions a compactor shows the very same recap message, and never a stale one."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_contextkit import HistoryCompactor
from langchain_contextkit.compaction.recap import is_recap


def _history(turns: int, start: int = 0) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for turn in range(start, start + turns):
        out += [
            HumanMessage(f"Order ORD-{turn:05d} must reach dock {100 + turn}.", id=f"h{turn}"),
            AIMessage(f"Noted order {turn}: it goes to dock {100 + turn} as asked.", id=f"a{turn}"),
        ]
    return out


def _recap(compactor: HistoryCompactor, history: list[BaseMessage]) -> BaseMessage:
    result = compactor.compact_view(history, summarize=_summary, room_tokens=600)
    recaps = [m for m in result.messages if is_recap(m)]
    assert len(recaps) == 1
    return recaps[0]


def _summary(text: str, instruction: str) -> str:
    del instruction
    return f"Facts:\n- User: {len(text)} characters summarised."


def test_the_same_recap_is_the_same_object_until_it_changes() -> None:
    compactor = HistoryCompactor()
    history = _history(60)
    first = _recap(compactor, history)
    again = _recap(compactor, [*history, *_history(1, start=60)])
    assert again is first  # one turn more: the same recap, shown as the same message

    # A recap edited in place downstream (another middleware) is never shown again.
    shown = first.text
    first.content = "tampered"
    fresh = _recap(compactor, [*history, *_history(1, start=60)])
    assert fresh is not first
    assert fresh.text == shown


def test_a_new_recap_is_a_new_message() -> None:
    compactor = HistoryCompactor()
    first = _recap(compactor, _history(60))
    later = _recap(compactor, _history(200))
    assert later is not first
    assert later.text != first.text or later.id != first.id
