"""Head + tail of a long text within a token budget, and the span left out between them.

Both ways of showing less of a tool result use it: the offloader (`agents/offload.py`,
the whole result stored, a pointer to it) and the turn fitter (`agents/result_cutter.py`, a
result cut so that the current turn fits its room). Whole lines are kept where they fit,
so a log or a man page reads as it was printed; one line longer than the budget is cut
by characters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from langchain_contextkit.agents.offload_stores import HiddenSpan

if TYPE_CHECKING:
    from langchain_contextkit.tokens import TokenCounter

__all__ = ["preview_span", "render_preview"]


def preview_span(text: str, budget: int, counter: TokenCounter) -> HiddenSpan:
    """The part of `text` not shown when `budget` tokens go to its head and tail (half each)."""
    head = _head_end(text, budget // 2, counter)
    tail = max(head, _tail_start(text, budget - budget // 2, counter))
    first = text.count("\n", 0, head) + 1
    last = text.count("\n", 0, max(head, tail - 1)) + 1
    lines = text.count("\n") + (not text.endswith("\n"))
    return HiddenSpan(head, tail, first, last, lines)


def render_preview(text: str, hidden: HiddenSpan, marker: str) -> str:
    """`text` with its hidden span replaced by the marker line."""
    head = text[: hidden.start]
    newline = "" if not head or head.endswith("\n") else "\n"
    return f"{head}{newline}{marker}\n{text[hidden.end :]}"


def _head_end(text: str, budget: int, counter: TokenCounter) -> int:
    """End of the longest run of whole lines from the start within `budget` tokens."""
    end = 0
    used = 0
    while end < len(text):
        stop = text.find("\n", end)
        stop = len(text) if stop < 0 else stop + 1
        cost = counter(text[end:stop])
        if used + cost > budget:
            break
        used += cost
        end = stop
    if end == 0:  # one long first line: cut it by characters
        end = _chars_within(text, budget, counter, from_end=False)
    return end


def _tail_start(text: str, budget: int, counter: TokenCounter) -> int:
    """Start of the longest run of whole lines at the end within `budget` tokens."""
    start = len(text)
    used = 0
    while start > 0:
        prev = text.rfind("\n", 0, start - 1) + 1
        cost = counter(text[prev:start])
        if used + cost > budget:
            break
        used += cost
        start = prev
    if start == len(text):
        start = len(text) - _chars_within(text, budget, counter, from_end=True)
    return start


def _chars_within(text: str, budget: int, counter: TokenCounter, *, from_end: bool) -> int:
    """Characters from one end of `text` that fit `budget` tokens (binary search)."""
    low, high = 0, min(len(text), budget * 8)
    while low < high:
        middle = (low + high + 1) // 2
        piece = text[-middle:] if from_end else text[:middle]
        if counter(piece) <= budget:
            low = middle
        else:
            high = middle - 1
    return low
