"""`count_each` keeps the counts of long texts: counted once, the same counts."""

from __future__ import annotations

from langchain_contextkit import count_each, count_tokens
from langchain_contextkit.tokens._message_cache import LONG_TEXT


class _Counting:
    """`count_tokens`, recording every text it is given (hashable, as a counter may be)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, text: str) -> int:
        self.seen.append(text)
        return count_tokens(text)


def test_a_long_text_is_counted_once_and_a_short_one_each_time() -> None:
    counter = _Counting()
    long_text = "a tool result with many words " * (LONG_TEXT // 10)
    texts = [long_text, "short", f"{long_text}!"]
    first = count_each(texts, counter)
    assert first == [count_tokens(t) for t in texts]
    counter.seen.clear()
    assert count_each([*texts, "new"], counter) == [*first, count_tokens("new")]
    assert counter.seen == ["short", "new"]


def test_each_counter_keeps_its_own_counts() -> None:
    long_text = "ünïcode and words " * (LONG_TEXT // 10)
    doubled = count_each([long_text], lambda t: 2 * count_tokens(t))
    assert doubled == [2 * count_tokens(long_text)]
    assert count_each([long_text]) == [count_tokens(long_text)]


def test_a_counter_that_cannot_be_hashed_is_still_used() -> None:
    class Unhashable(_Counting):
        __hash__ = None  # type: ignore[assignment]

    counter = Unhashable()
    long_text = "x " * LONG_TEXT
    assert count_each([long_text, long_text], counter) == [count_tokens(long_text)] * 2
    assert len(counter.seen) == 2
