"""Message counts come from one content-keyed cache: a hit always equals a fresh count."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from hypothesis import given, settings, strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_contextkit import (
    count_message_tokens,
    count_tokens,
    tiktoken_counter,
)
from langchain_contextkit.tokens._message_cache import MessageCache

if TYPE_CHECKING:
    import pytest
from langchain_contextkit.messages.lists import message_costs


class CountingCounter:
    """`count_tokens`, tallying the calls and characters it is asked to count."""

    def __init__(self, scale: int = 1) -> None:
        self.scale = scale
        self.calls = 0
        self.chars = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        self.chars += len(text)
        return count_tokens(text) * self.scale


class Unhashable(CountingCounter):
    __hash__ = None  # type: ignore[assignment]


def fresh(messages: list[BaseMessage], counter: Any = count_tokens) -> list[int]:
    """Each message counted from scratch: a counter that cannot key the cache."""
    return message_costs(messages, _Uncached(counter))


class _Uncached:
    """`counter`, unhashable."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, counter: Any) -> None:
        self.counter = counter

    def __call__(self, text: str) -> int:
        return int(self.counter(text))


words = st.text(
    alphabet=st.sampled_from(list('abc xyz 0123 é ß 你好 \n{}":,')), min_size=0, max_size=40
)
block = st.one_of(
    words,
    st.builds(lambda t: {"type": "text", "text": t}, words),
    st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}),
    st.builds(lambda t: {"type": "custom", "payload": t}, words),
)
content = st.one_of(words, st.lists(block, max_size=3))
ids = st.sampled_from(["m1", "m2", "m3", None])


@st.composite
def messages(draw: st.DrawFn) -> BaseMessage:
    kind = draw(st.sampled_from(["human", "ai", "tool", "system"]))
    text = draw(content)
    mid = draw(ids)
    if kind == "human":
        return HumanMessage(text, id=mid, name=draw(st.sampled_from([None, "ann"])))
    if kind == "system":
        return SystemMessage(text, id=mid)
    if kind == "tool":
        return ToolMessage(text, tool_call_id=draw(st.sampled_from(["c1", "c2"])), id=mid)
    calls = [
        {"name": draw(st.sampled_from(["search", "read"])), "args": {"q": draw(words)}, "id": c}
        for c in draw(st.lists(st.sampled_from(["c1", "c2", "c3"]), max_size=2, unique=True))
    ]
    return AIMessage(text, tool_calls=calls, id=mid)


@given(
    history=st.lists(messages(), max_size=12),
    edits=st.lists(st.tuples(st.integers(0, 11), content), max_size=4),
)
@settings(max_examples=150, deadline=None)
def test_memoised_counts_always_equal_fresh_counts(
    history: list[BaseMessage], edits: list[tuple[int, Any]]
) -> None:
    assert message_costs(history) == fresh(history)
    assert message_costs(history) == fresh(history)  # now from the memo
    # A message that keeps its id but changes (as add_messages replaces by id) is new.
    for index, new_content in edits:
        if history:
            i = index % len(history)
            history[i] = history[i].model_copy(update={"content": new_content})
    assert message_costs(history) == fresh(history)
    total = count_message_tokens(history)
    assert total == (sum(fresh(history)) + 3 if history else 0)


def test_a_message_changed_in_place_is_counted_afresh() -> None:
    message = AIMessage("short", tool_calls=[{"name": "f", "args": {"q": "a"}, "id": "c1"}])
    before = message_costs([message])
    message.content = "a much longer answer than before, " * 20
    assert message_costs([message]) == fresh([message])
    message.tool_calls = [{"name": "f", "args": {"q": "b" * 300}, "id": "c1", "type": "tool_call"}]
    after = message_costs([message])
    assert after == fresh([message])
    assert after[0] > before[0]


def test_the_counter_sees_only_messages_it_has_not_seen() -> None:
    counter = CountingCounter()
    history: list[BaseMessage] = [HumanMessage(f"question {i} " * 30) for i in range(200)]
    count_message_tokens(history, counter)
    cold_calls, cold_chars = counter.calls, counter.chars
    assert cold_calls >= 200
    count_message_tokens(history, counter)
    assert counter.calls == cold_calls  # nothing new: nothing counted
    history.append(ToolMessage("a new result " * 50, tool_call_id="c9"))
    count_message_tokens(history, counter)
    assert counter.calls - cold_calls == 3  # the new message's role, content and call id
    assert counter.chars - cold_chars == len("tool") + len("a new result " * 50) + len("c9")


def test_counters_and_image_costs_never_share_counts() -> None:
    history: list[BaseMessage] = [
        HumanMessage(
            [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}]
        )
    ]
    single, double = CountingCounter(1), CountingCounter(2)
    one = count_message_tokens(history, single)
    two = count_message_tokens(history, double)
    assert two > one
    assert count_message_tokens(history, single) == one
    cheap = count_message_tokens(history, single, image_tokens=0)
    dear = count_message_tokens(history, single, image_tokens=500)
    assert dear - cheap == 500


def test_an_unhashable_counter_is_called_every_time() -> None:
    counter = Unhashable()
    history: list[BaseMessage] = [HumanMessage("hello there"), AIMessage("hi")]
    first = count_message_tokens(history, counter)
    calls = counter.calls
    assert count_message_tokens(history, counter) == first
    assert counter.calls == 2 * calls


def test_a_cold_history_is_counted_in_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = tiktoken_counter("cl100k_base")
    batches: list[int] = []
    real = type(counter).count_each

    def spy(self: Any, texts: Any) -> list[int]:
        batches.append(len(texts))
        return real(self, texts)

    monkeypatch.setattr(type(counter), "count_each", spy)
    history: list[BaseMessage] = [
        HumanMessage(f"turn {i}: 你好, how are the shards on node {i}?") for i in range(300)
    ]
    costs = message_costs(history, counter)
    assert len(batches) == 1
    assert batches[0] >= 300
    assert costs == fresh(history, counter)


def test_threads_sharing_the_memo_get_fresh_counts() -> None:
    histories = [
        [HumanMessage(f"thread {t} message {i} " * (1 + i % 7)) for i in range(150)]
        for t in range(8)
    ]
    expected = [fresh(h) for h in histories]
    results: dict[int, list[list[int]]] = {}

    def work(t: int) -> None:
        results[t] = [message_costs(histories[(t + k) % 8]) for k in range(8)]

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for t, got in results.items():
        assert got == [expected[(t + k) % 8] for k in range(8)]


def test_the_cache_is_bounded_and_forgets_the_oldest_first() -> None:
    cache = MessageCache(max_entries=3)
    cache.put_many((("k", i), "cost", i) for i in range(5))
    assert len(cache) == 3
    assert cache.get(("k", 0), "cost") is None
    assert cache.get(("k", 4), "cost") == 4


def test_new_objects_without_ids_are_found_by_their_content() -> None:
    # An HTTP caller converts OpenAI dicts into new messages, without ids, on every call.
    def history() -> list[BaseMessage]:
        call = {"name": "search", "args": {"q": "refunds"}, "id": "call_1"}
        return [
            HumanMessage("How do refunds work? " * 20),
            AIMessage("", tool_calls=[call]),
            ToolMessage("Refunds take five days. " * 30, tool_call_id="call_1"),
        ]

    counter = CountingCounter()
    first = count_message_tokens(history(), counter)
    calls = counter.calls
    assert count_message_tokens(history(), counter) == first
    assert counter.calls == calls


def test_tool_schemas_are_counted_once_and_again_when_a_tool_changes() -> None:
    from langchain_core.tools import tool

    from langchain_contextkit import count_tool_tokens

    @tool
    def lookup(query: str) -> str:
        """Look a word up."""
        return query

    counter = CountingCounter()
    first = count_tool_tokens([lookup], counter)
    calls = counter.calls
    assert count_tool_tokens([lookup], counter) == first
    assert counter.calls == calls  # the same tool again: not converted, not counted
    lookup.description = "Look a word up in the big dictionary of every language. " * 5
    assert count_tool_tokens([lookup], counter) > first
    schema = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {}}}
    before = count_tool_tokens([schema], counter)
    schema["function"]["description"] = "a much longer description " * 10  # type: ignore[index]
    assert count_tool_tokens([schema], counter) > before
