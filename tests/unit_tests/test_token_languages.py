"""count_tokens across scripts and languages: invariants, and no bias low on real man pages."""

import gzip
import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from langchain_contextkit import (
    _token_count as counting,
    count_each,
    count_tokens,
    tiktoken_counter,
)

# Letters of every class the model splits: cheap and rare accents, Cyrillic with its
# Ukrainian and Serbian letters, Greek, CJK of each tier, and the evidence-heavy z, k, j.
_ALPHABET = st.sampled_from(
    list("abczkjhyw XYZ 019\n.,-")
    + list("éüçőčșțăłĄÉ")
    + list("привітјњыΚαλη")
    + list("你好世界們國㐀ひカ한국뷁，ＡＢ")
)
texts = st.text(alphabet=_ALPHABET, max_size=400)


@given(head=texts, tail=texts)
@settings(max_examples=300, deadline=None)
def test_appending_never_lowers_the_count(head: str, tail: str) -> None:
    assert count_tokens(head + tail) >= count_tokens(head)


@given(text=texts)
@settings(max_examples=300, deadline=None)
def test_every_path_agrees(text: str) -> None:
    expected = counting._count_short(text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(counting, "_SHORT_TEXT", 0)
        assert counting.count_text_tokens(text) == expected
        patch.setattr(counting, "_BLOCK", 7)  # one chunk per block: words and windows cut
        assert counting.count_text_tokens(text) == expected
    assert count_each([text, text[:150], text]) == [
        expected,
        counting._count_short(text[:150]),
        expected,
    ]


_MAN = Path("/usr/share/man")
_LANGUAGES = ("hu", "tr", "pl", "zh_TW")
_ESCAPE = re.compile(r"\\(?:f(?:\[[^\]]*\]|\(..|.)|\(..|[-e&|^ ])")


def _man_text(path: Path) -> str:
    lines = gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace").splitlines()
    text = "\n".join(line for line in lines if not line.startswith((".", "'")))
    return _ESCAPE.sub(lambda m: "-" if m.group() == "\\-" else "", text)


def _pages() -> list[str]:
    found = []
    for lang in _LANGUAGES:
        pages = sorted(p for p in (_MAN / lang).glob("man*/*.gz") if not p.is_symlink())
        found += [_man_text(p)[:6000] for p in pages[:3]]
    return [t for t in found if t.strip()]


@pytest.mark.skipif(
    not all((_MAN / lang).is_dir() for lang in _LANGUAGES),
    reason=f"needs the {', '.join(_LANGUAGES)} man pages under /usr/share/man",
)
def test_no_bias_low_on_man_pages() -> None:
    pages = _pages()
    assert pages
    exact = tiktoken_counter("cl100k_base")
    estimate, truth = sum(map(count_tokens, pages)), sum(map(exact, pages))
    assert estimate >= 0.95 * truth, (estimate, truth)
