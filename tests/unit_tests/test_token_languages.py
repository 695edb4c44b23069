"""count_tokens across scripts and languages: invariants, and no bias low on real man pages."""

import dataclasses
import gzip
import re
from pathlib import Path

import pytest
from _count_paths import assert_every_path_agrees
from hypothesis import given, settings, strategies as st

from langchain_contextkit import count_each, count_tokens, tiktoken_counter
from langchain_contextkit.tokens import _token_count as counting
from langchain_contextkit.tokens._token_estimate import TABLES, Tables

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


# Letter pairs of Welsh (dd, ll, wy, yw, rh, ff) and of English: texts of these trigger the
# dear regime in some chunks and not in others.
_WELSH_PIECES = st.sampled_from(
    ["dd", "ll", "wy", "yw", "rh", "ff", *"aeio", " ", "the ", "and ", "\n", "Y", "ŵ"]
)
_WELSH = (
    "Mae'r ffeil hon wedi cael ei dileu o'r cyfeiriadur. Dewiswch ffolder newydd i gadw'r "
    "ddogfen, neu rhowch enw arall i'r ffeil. Ni ellir agor y ffenestr hon ar hyn o bryd; "
    "ceisiwch eto yn nes ymlaen. Mae'r gosodiadau wedi eu cadw'n llwyddiannus. Dylid "
    "defnyddio'r rhaglen hon i reoli eich cyfrifon ebost a'ch cysylltiadau. "
)


@given(text=st.lists(_WELSH_PIECES, max_size=150).map("".join))
@settings(max_examples=200, deadline=None)
def test_every_path_agrees_across_dear_chunks(text: str) -> None:
    assert_every_path_agrees(text, head=40)


def test_welsh_pays_the_dear_rate_and_english_does_not() -> None:
    english = "The file has been removed from the folder; choose another one and try again. " * 4
    without = counting._Fast(Tables.build(dear_letter_rate=0))
    welsh_text = _WELSH * 2
    assert counting._count_short(welsh_text) > counting._count_short(welsh_text, without)
    assert counting._count_short(english) == counting._count_short(english, without)
    # Only chunks after Welsh ones are dear: the first CHUNKS_BACK chunks carry no charge.
    assert counting._count_short(welsh_text[:32]) == counting._count_short(welsh_text[:32], without)


_BELARUSIAN = (
    "Для адпраўкі паведамлення з прымусовым абнаўленнем патрабуецца аўтэнтыфікацыя. "
    "Каб дазволіць праграмам працаваць па-за межамі сеанса, патрабуецца аўтэнтыфікацыя. "
)


def test_belarusian_pays_the_dear_rate_and_russian_and_ukrainian_do_not() -> None:
    without = counting._Fast(Tables.build(dear_alphabet_rate=0))
    belarusian = _BELARUSIAN * 2
    russian = "Для отправки сообщения с принудительным обновлением требуется аутентификация. " * 3
    ukrainian = "Для надсилання повідомлення з примусовим оновленням потрібна автентифікація. " * 3
    assert counting._count_short(belarusian) > counting._count_short(belarusian, without)
    for text in (russian, ukrainian):
        assert counting._count_short(text) == counting._count_short(text, without)


def test_belarusian_is_not_counted_low_against_cl100k() -> None:
    exact = tiktoken_counter("cl100k_base")
    text = _BELARUSIAN * 3
    assert count_tokens(text) >= 0.95 * exact(text), (count_tokens(text), exact(text))


def test_welsh_is_not_counted_low_against_cl100k() -> None:
    # cl100k cuts Welsh every two or three letters; without the dear regime this text
    # counted 28% low (296 for 413), the bench's worst-document limit is 15% low.
    exact = tiktoken_counter("cl100k_base")
    text = _WELSH * 3
    assert count_tokens(text) >= 0.9 * exact(text), (count_tokens(text), exact(text))


def test_pair_costs_that_cannot_be_packed_are_refused() -> None:
    too_dear = TABLES.pair_cost.copy()
    too_dear[5] = 1 << 15
    with pytest.raises(ValueError, match="packed"):
        counting._Fast(dataclasses.replace(TABLES, pair_cost=too_dear))
