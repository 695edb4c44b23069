"""`ResultCutter.cap` reads a grown list from where the last call ended, with the same result."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_contextkit.agent.tool_results import ResultCutter

_THRESHOLD, _SIZE = 200, 10


def _unit(i: int, chars: int) -> list[BaseMessage]:
    call = {"name": "look", "args": {"i": i}, "id": f"c{i}"}
    return [
        HumanMessage(f"question {i}", id=f"h{i}"),
        AIMessage("", tool_calls=[call], id=f"a{i}"),
        ToolMessage("word " * (chars // 5), tool_call_id=f"c{i}", id=f"t{i}"),
        AIMessage(f"answer {i}", id=f"r{i}"),
    ]


def _texts(messages: list[BaseMessage]) -> list[str]:
    return [m.text for m in messages]


def _cap(cutter: ResultCutter, messages: list[BaseMessage]) -> tuple[list[str], int, int]:
    capped = cutter.cap(messages, threshold=_THRESHOLD, size=_SIZE)
    return _texts(capped.messages), capped.cut, capped.cut_tokens


def test_a_grown_list_is_capped_as_a_fresh_cutter_caps_it() -> None:
    history = [m for i in range(6) for m in _unit(i, 100 if i % 2 else 1_000)]
    warm = ResultCutter(len)
    _cap(warm, history)
    grown = [*history, *_unit(6, 2_000), *_unit(7, 50)]
    assert _cap(warm, grown) == _cap(ResultCutter(len), grown)
    assert _cap(warm, grown)[1] == 4  # the long results of units 0, 2, 4 and 6


def test_a_content_reassigned_in_place_is_read_again() -> None:
    history = [m for i in range(4) for m in _unit(i, 100)]
    cutter = ResultCutter(len)
    assert _cap(cutter, history)[1] == 0
    history[2].content = "word " * 400  # the same object, now a long result
    assert _cap(cutter, history) == _cap(ResultCutter(len), history)
    assert _cap(cutter, history)[1] == 1


def test_another_list_or_threshold_is_read_whole() -> None:
    first = [m for i in range(4) for m in _unit(i, 1_000)]
    other = [m for i in range(4) for m in _unit(i, 100)]
    cutter = ResultCutter(len)
    _cap(cutter, first)
    assert _cap(cutter, other) == _cap(ResultCutter(len), other)
    wide = cutter.cap(first, threshold=10_000, size=_SIZE)
    assert wide.cut == 0
