"""The word-list searches of `facts` find the same with their ASCII fast path as folding."""

from __future__ import annotations

import random
import string

import pytest

from langchain_contextkit.compaction import facts

_SEARCHES = ("_DECISION", "_QUESTION", "_DECIDED", "_ACTION_MARKER", "_ACTION_CUE")


@pytest.mark.parametrize("name", _SEARCHES)
def test_pattern_is_written_in_lower_case(name: str) -> None:
    # An upper-case escape (\S, \W, \B) would change meaning when lower-cased text is searched.
    pattern = getattr(facts, name).ascii.pattern
    assert pattern == pattern.lower()


@pytest.mark.parametrize("name", _SEARCHES)
def test_fast_path_agrees_with_folding_search(name: str) -> None:
    search = getattr(facts, name)
    rng = random.Random(name)  # noqa: S311 - test data, not secrets
    words = ["Decided", "ROOT CAUSE", "Will", "tbd", "To-Do", "Next Steps", "owner", "Let's"]
    words += ["therefore", "HENCE", "agreed", "plan", "review", "决定", "待办", "需要"]
    alphabet = string.ascii_letters + " '-?.,"
    for _ in range(400):
        pieces = [rng.choice(words) if rng.random() < 0.3 else "" for _ in range(3)]
        noise = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        text = f"{pieces[0]}{noise} {pieces[1]} x{pieces[2]}"
        if rng.random() < 0.5:
            text = text.swapcase()
        assert search.found(text) == (search.folding.search(text) is not None), text
    # Dotless i and long s fold to ASCII letters: such text takes the folding search.
    assert facts.is_decided("We DECıDED it") == (
        facts._DECIDED.folding.search("We DECıDED it") is not None
    )
