"""The history index (issue 17): extended arrays always equal arrays computed afresh."""

from __future__ import annotations

from itertools import accumulate

from hypothesis import given, settings, strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_contextkit import count_message_tokens, count_tokens
from langchain_contextkit.compaction._history_index import HistoryIndex
from langchain_contextkit.compaction._recap_grid import prefix_digests
from langchain_contextkit.messages import message_costs, unit_starts

texts = st.text(alphabet=st.sampled_from(list("ab 12 é 你 \n")), max_size=30)


def _turn(i: int, text: str) -> list[BaseMessage]:
    call = {"name": "search", "args": {"q": text}, "id": f"c{i}"}
    return [
        HumanMessage(text, id=f"h{i}"),
        AIMessage("", tool_calls=[call], id=f"a{i}"),
        ToolMessage(text * 3, tool_call_id=f"c{i}", id=f"t{i}"),
    ]


def _suffix_cost(index: HistoryIndex, messages: list[BaseMessage]) -> int | None:
    """Tokens of `messages` read from the index's running totals (None: not its suffix)."""
    known = index.suffix(messages)
    return None if known is None else known[0].cost(known[1])


operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), texts),
        st.tuples(st.just("replace"), st.integers(0, 50), texts),  # same id, new message
        st.tuples(st.just("assign"), st.integers(0, 50), texts),  # content reassigned
        st.tuples(st.just("truncate"), st.integers(0, 50)),
        st.tuples(st.just("copy")),  # a stateless caller: equal messages, new objects
    ),
    max_size=12,
)


@given(ops=operations)
@settings(max_examples=120, deadline=None)
def test_extended_arrays_equal_fresh_arrays(ops: list[tuple[object, ...]]) -> None:
    index = HistoryIndex(count_tokens)
    history: list[BaseMessage] = _turn(0, "start")
    for n, op in enumerate(ops, start=1):
        kind = op[0]
        if kind == "append":
            history = history + _turn(n, str(op[1]))
        elif kind == "replace" and history:
            i = int(op[1]) % len(history)  # type: ignore[call-overload]
            history[i] = history[i].model_copy(update={"content": str(op[2])})
        elif kind == "assign" and history:
            history[int(op[1]) % len(history)].content = str(op[2])  # type: ignore[call-overload]
        elif kind == "truncate":
            history = history[: int(op[1]) % (len(history) + 1)]  # type: ignore[call-overload]
        elif kind == "copy":
            history = [m.model_copy() for m in history]
        arrays = index.arrays(history)
        costs = message_costs(history)
        assert list(arrays.costs) == costs
        assert list(arrays.totals) == [0, *accumulate(costs)]
        assert list(arrays.starts) == unit_starts(history)
        assert list(arrays.unit_totals) == [arrays.totals[u] for u in arrays.starts]
        assert list(arrays.digests) == prefix_digests(history)
        for start in (0, len(history) // 2, len(history)):
            tail = history[start:]
            expected = count_message_tokens(tail, reply_priming=False) if tail else 0
            assert _suffix_cost(index, tail) == expected


def test_a_suffix_of_other_messages_is_not_costed_from_the_totals() -> None:
    index = HistoryIndex(count_tokens)
    history = [m for i in range(5) for m in _turn(i, f"turn {i}")]
    index.arrays(history)
    lookalike = [m.model_copy() for m in history[-3:]]  # equal, but not the same objects
    assert _suffix_cost(index, lookalike) is None
    assert _suffix_cost(index, history[-3:]) == count_message_tokens(
        history[-3:], reply_priming=False
    )


def test_a_grown_history_counts_only_its_new_messages() -> None:
    calls: list[str] = []

    def counter(text: str) -> int:
        calls.append(text)
        return count_tokens(text)

    index = HistoryIndex(counter)
    history = [m for i in range(50) for m in _turn(i, f"turn {i} " * 4)]
    index.arrays(history)
    calls.clear()
    grown = history + _turn(99, "one more")
    arrays = index.arrays(grown)
    assert len(arrays.costs) == len(grown)
    # role, content, tool-call name/args/id, call id of the three new messages only
    assert 0 < len(calls) <= 12
    assert all("turn" not in text for text in calls)
