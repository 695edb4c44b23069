"""The character-class model behind `count_tokens`.

Byte-pair tokenizers such as cl100k cut text at class boundaries first (a run of letters,
a run of digits, a run of punctuation, a run of whitespace) and then merge bytes inside
each piece. So a good estimate does not need the vocabulary: it classifies every
character, and charges

- a per-character rate for each class, where a class is finer than a script when cl100k
  prices its characters apart: accented Latin letters that many cl100k tokens contain
  (``é``, ``ü``) against the rest (``ő``, ``č``, ``ș``), and CJK characters by how many
  tokens cl100k spends on each alone (``你`` one, ``們`` two, ``㐀`` three), read from a
  table of two bits per character (`_CJK_TIERS`);
- a run-start charge where a new run of a class begins, and transition charges where
  cl100k cuts between classes (``aB`` inside a letter run, a digit followed by a letter,
  a space before a number);
- a charge for each letter by its position in its word (every 2nd, 3rd, 4th, 6th, ...
  letter of a word, `STRIDES`), in one of two regimes. cl100k holds most English (and
  many Russian) words whole, so their letters after the first cost almost nothing, but
  it cuts the words of most other languages every three or four letters. The regime is
  decided chunk by chunk (`CHUNK` characters from the text's start) by the language of
  the `CHUNKS_BACK` chunks before: each letter carries a log-likelihood ratio between
  the two groups of languages (``z``, ``k``, ``j`` and ``і`` point to the costly group,
  ``h``, ``y``, ``w`` and ``ы`` to the cheap one), and chunks whose sum exceeds
  `THRESHOLD` put the next chunk's letters in the costly regime;
- a surcharge for every letter past the `LONG_RUN`-th of one word: no vocabulary holds
  such words, so cl100k cuts a long unbroken run (``xxxx...``, a blob) every few letters.

Everything is summed in milli-tokens and rounded up, plus a start charge of half a token,
since an underestimate is what overflows a window. All weights are integers and every
charge depends only on the character and the text to its left, so the two evaluation
paths below (pure Python for short strings, numpy for long ones) agree exactly, and the
count can never fall when text is appended: appending adds non-negative charges and
changes none of the earlier ones.

The weights, the CJK tiers, the accented letters that count as common and the language
evidence were derived from tiktoken ``cl100k_base`` and text read from this machine
(`bench/fit_token_weights.py` re-derives them; `bench/bench_tokens.py` measures the
result). Only the one table of CJK tiers is shipped as data (a few hundred bytes
compressed), never any part of the vocabulary itself.

The estimator's fitted tables and its counting algorithm are kept in one place.
"""

from __future__ import annotations

import base64
import functools
import re
import zlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["count_text_tokens", "count_texts_tokens"]

# --- Character classes ---------------------------------------------------------------------

SPACE, NEWLINE, OTHER_SPACE, LOWER, UPPER, DIGIT, PUNCT = range(7)
ACCENTED, ACCENTED_RARE, CYRILLIC, GREEK, OTHER = range(7, 12)
HAN1, HAN2, HAN3, KANA1, KANA2, HANGUL1, HANGUL2, HANGUL3, CJK_PUNCT1, CJK_PUNCT2 = range(12, 22)
N_CLASSES = 22
START = N_CLASSES
"""The class "before" a text's first character: pair codes run to (N_CLASSES + 1) * N_CLASSES."""
CLASS_NAMES = (
    *("space", "newline", "other_space", "lower", "upper", "digit", "punct"),
    *("accented", "accented_rare", "cyrillic", "greek", "other"),
    *("han1", "han2", "han3", "kana1", "kana2", "hangul1", "hangul2", "hangul3"),
    *("cjk_punct1", "cjk_punct2"),
)

LATIN, ALPHABET = 1, 2
"""Letter scripts: a word is a run of letters of one script (0 marks a non-letter)."""
SCRIPT_OF_CLASS = bytes(
    LATIN
    if c in {LOWER, UPPER, ACCENTED, ACCENTED_RARE}
    else ALPHABET
    if c in {CYRILLIC, GREEK}
    else 0
    for c in range(N_CLASSES + 1)
)
STRIDES = (1, 2, 3, 4, 6, 8, 12, 16)
"""Every k-th letter of a word pays the rate of stride k: a word of L letters pays
``sum(rate[k] * (L // k))``, which `bytes.count` finds for a whole text at C speed."""
_PERIOD = 48
"""The least common multiple of STRIDES: a letter's charge repeats with this period."""
_PER_ROW = 1 + len(STRIDES)
N_LETTER_RATES = 2 * 2 * _PER_ROW
"""LETTER_RATE holds, for each ``(script - 1) * 2 + regime``, the rate of a word's first
letter, then the rate of each stride."""

# --- Derived data (bench/fit_token_weights.py) ---------------------------------------------

ACCENTED_COMMON = "àáãäåçèéêíñóöøúüęıłż"
"""Accented Latin letters that cl100k's tokens often contain; the others are ACCENTED_RARE."""
_CJK_RANGES = (
    (0x3000, 0x3100),
    (0x3130, 0x3190),
    (0x4E00, 0xA000),
    (0xAC00, 0xD7A4),
    (0xFF00, 0xFFF0),
)
"""Where `_CJK_TIERS` gives each character's tier; other CJK characters are tier 3."""
_CJK_TIERS = (
    "eNrFWUtu3DAMnQDx3gaGl8gpYmC4NwHqEJ2j9AjZtUAG1pyysizL+lGyk6IVWiS2JZF85KNI5V11l0kpVm7g7bUf"
    "Lv3Qv14687Ib+dJ35n33+jpchwv03UX1Fxz74WUCBfw0QyVjecfwMgIiK0ZCtezQL59A4SYIbopBqSvw8mAkoDLT"
    "gYwuHRDZSbdAMUXmLbtnsP/Mf4pFL+s2CeEnTn5aHe3Q+vP5fDzXPWMbwgHbUqPCsJgzqkml0v3oVi2sGYOBINPH"
    "DYBpVymeQes23vhll8Ebv1kJ2z4GY6IFP4OlhVTxO604X7c9VvOtPDImzaF9FOpRGhjjU/D5/VkZH/43L1aH350d"
    "6LQYlTfVhJARzpm8t2eyHkNlo6CIFkNsVWHY6VcDOeLiw2S93YF+7qL1Kh9UKX4eMiS69ipap7XFhy1VNgnD8oAW"
    "KKTEElogg01v8l7fn6nA2X3cjSZa0lnvv34k/jNSx1WVLkd0x++2ktdGJpaD7ebIHa4EZ6bVfSEO7D5cvoUu8KZC"
    "5nOI+T+v/M/ZCeFCM/PTQZOPgpOtihhGMYRaIGeOiBUgIIGGO2KYBDfn/tSJf0qD3PxHGH8RDkhduLtNwuCXGg3I"
    "48rkfYoQYIgCAZVAQFaT8+iNg+SzHQywzikkLSpIAc6mpv7iKh9y/D6qPN7H7y/yPzHHw9dNBQADTOIY2vHEGBVK"
    "l+4PpXMgOWdBmqfKZ5kwl9Xx0Ua6PtLwi8//3xuFNyY/IjPwa/yPIWQVZl/hcCxEgi5+C4IAih7DHD8db6ZzK7L4"
    "s5mLhtDh6PbLjL4fw99vK4UMLgmGVrNAjoe7SLjlyy9ZPorxFWCTZF1sRa3RnUY/w6a9UYk5D4scW3bhYK6LPS4Q"
    "aj0/oHyWt/IXFGCNZ7/5+TcRf10OXPv+RzPbhaWyy11gssy1BlOSC7Fm71AqaI8nHCoYVuX/4ULZKY5HU2ctHwbM"
    "OzL/DP+FtFNLem/H+W/10a3T8Fk9OwX+P9Yvn7l8rgYB1fmT2kqJl+nmWj4falzLFaX6q1n/F/fiJRcg2jLQtCqm"
    "IRhMTy3GIKlzA15saksK8epGUMRP9G8xbO5i/KC6btKHhHST6nHz8GSn+Oa3VnhiIUmU+P+rzn/sKYufg0H9cYgv"
    "MpT3YzWmzvsBEFKR68OpcliBsJjHIFYgvK/gfeN8jM3yIDqIa/x/ezbyIa3xTGu3og7UAxniaeRIEx+yP+d89izy"
    "/5vl78lxvv8/e/6nwZvmplY0t/zF7ENOKgM4eKaY/YpT+9Plwv1HlP1rZUeDvPejHeP3+qEdCan/OcSPx4kWN5TP"
    "KkXeO2BO9mjWP1w63ZiP1j9+geC4A/XPwftPXQbnnG/nSi3DlQN/qvQH3O4feMeV5bv10v1nNjO5gajXP3MTolah"
    "n83nSjNgUGrlv3R5mv8y+XM9//0f/u8kIXeXV4olKruY2+fl3JYfxYKatk1b9x/frX/O9j9JSHHlQCkmf5mp5EOR"
    "KxJWxvH+NDky03Yexf2P6wf8zpFX9NH8Ivr3rsRMG8v7W3//OBv+Z+5DFpTO1j/i3xOF+id16r/mf16/ZH//lMOU"
    "z99/Hjr/Awn/uv85zf+Ehq3zv1xxslz/f/X+g9R0MaNT6eVYq9M33/8A3kk7wA=="
)
"""zlib + base64 of two bits per character of `_CJK_RANGES`: cl100k's tokens for it alone, 1-3."""
_EVIDENCE = (
    "eNpjYKAQsP79w8L4k/E7Ix//fxamf//ZGf79ZmL//eOHHHHyFAIHBzsHKABxgCIyDppA2o7BgcHBhMGCgDzYBIgk"
    "VBpuLlwDmoUYDkBRZG8PoXV1IfoNDZEV29jAmcbGaDoHFxjUjqOBdxlGKjjgAMoJ8Dzw//9fRsZfP/7/fcvw+c/f"
    "33///PjJ+uUn0zfWnwwH3h94+42QPLp5o2AUjILBCwCjLWJN"
)
"""zlib + base64 of one signed byte per code point below U+0800 (case-folded letters)."""

_EVIDENCE_END = 0x800
"""Code points from here on carry no language evidence."""
CHUNK = 32
"""Texts are read in chunks of this many characters (from the text's start) for the regime."""
CHUNKS_BACK = 4
"""A chunk's regime is decided by the evidence of this many chunks before it."""
THRESHOLD = 16
"""Evidence (1/16 nat units) above which those chunks read as a costly language."""

# Milli-tokens: the fitted weights.
CHAR_RATE: dict[int, int] = {
    UPPER: 111,
    DIGIT: 437,
    PUNCT: 69,
    ACCENTED: 481,
    ACCENTED_RARE: 1643,
    GREEK: 552,
    HAN1: 753,
    HAN2: 2356,
    HAN3: 2626,
    KANA1: 822,
    KANA2: 2058,
    HANGUL1: 450,
    HANGUL2: 1827,
    HANGUL3: 2368,
    CJK_PUNCT1: 470,
    CJK_PUNCT2: 2100,
}
RUN_START: dict[int, int] = {NEWLINE: 1441, OTHER_SPACE: 781, DIGIT: 106}
TRANSITION: dict[tuple[int, int], int] = {
    (LOWER, UPPER): 833,
    (DIGIT, LOWER): 706,
    (DIGIT, UPPER): 706,
    (UPPER, DIGIT): 1126,
    (SPACE, DIGIT): 1000,
    (SPACE, PUNCT): 145,
    (PUNCT, SPACE): 1986,
    (PUNCT, DIGIT): 984,
    (PUNCT, LOWER): 1342,
    (PUNCT, UPPER): 919,
    (SPACE, HAN1): 829,
    (SPACE, HAN2): 829,
    (SPACE, HAN3): 829,
    (SPACE, KANA1): 829,
    (SPACE, KANA2): 829,
    (SPACE, HANGUL1): 829,
    (SPACE, HANGUL2): 829,
    (SPACE, HANGUL3): 829,
    (SPACE, CJK_PUNCT1): 829,
    (SPACE, CJK_PUNCT2): 829,
    (SPACE, LOWER): 558,
    (SPACE, UPPER): 558,
    (SPACE, ACCENTED): 558,
    (SPACE, ACCENTED_RARE): 558,
    (NEWLINE, LOWER): 558,
    (NEWLINE, UPPER): 558,
    (NEWLINE, ACCENTED): 558,
    (NEWLINE, ACCENTED_RARE): 558,
    (OTHER_SPACE, LOWER): 558,
    (OTHER_SPACE, UPPER): 558,
    (OTHER_SPACE, ACCENTED): 558,
    (OTHER_SPACE, ACCENTED_RARE): 558,
    (DIGIT, ACCENTED): 558,
    (DIGIT, ACCENTED_RARE): 558,
    (PUNCT, ACCENTED): 558,
    (PUNCT, ACCENTED_RARE): 558,
    (CYRILLIC, LOWER): 558,
    (CYRILLIC, UPPER): 558,
    (CYRILLIC, ACCENTED): 558,
    (CYRILLIC, ACCENTED_RARE): 558,
    (GREEK, LOWER): 558,
    (GREEK, UPPER): 558,
    (GREEK, ACCENTED): 558,
    (GREEK, ACCENTED_RARE): 558,
    (OTHER, LOWER): 558,
    (OTHER, UPPER): 558,
    (OTHER, ACCENTED): 558,
    (OTHER, ACCENTED_RARE): 558,
    (HAN1, LOWER): 558,
    (HAN1, UPPER): 558,
    (HAN1, ACCENTED): 558,
    (HAN1, ACCENTED_RARE): 558,
    (HAN2, LOWER): 558,
    (HAN2, UPPER): 558,
    (HAN2, ACCENTED): 558,
    (HAN2, ACCENTED_RARE): 558,
    (HAN3, LOWER): 558,
    (HAN3, UPPER): 558,
    (HAN3, ACCENTED): 558,
    (HAN3, ACCENTED_RARE): 558,
    (KANA1, LOWER): 558,
    (KANA1, UPPER): 558,
    (KANA1, ACCENTED): 558,
    (KANA1, ACCENTED_RARE): 558,
    (KANA2, LOWER): 558,
    (KANA2, UPPER): 558,
    (KANA2, ACCENTED): 558,
    (KANA2, ACCENTED_RARE): 558,
    (HANGUL1, LOWER): 558,
    (HANGUL1, UPPER): 558,
    (HANGUL1, ACCENTED): 558,
    (HANGUL1, ACCENTED_RARE): 558,
    (HANGUL2, LOWER): 558,
    (HANGUL2, UPPER): 558,
    (HANGUL2, ACCENTED): 558,
    (HANGUL2, ACCENTED_RARE): 558,
    (HANGUL3, LOWER): 558,
    (HANGUL3, UPPER): 558,
    (HANGUL3, ACCENTED): 558,
    (HANGUL3, ACCENTED_RARE): 558,
    (CJK_PUNCT1, LOWER): 558,
    (CJK_PUNCT1, UPPER): 558,
    (CJK_PUNCT1, ACCENTED): 558,
    (CJK_PUNCT1, ACCENTED_RARE): 558,
    (CJK_PUNCT2, LOWER): 558,
    (CJK_PUNCT2, UPPER): 558,
    (CJK_PUNCT2, ACCENTED): 558,
    (CJK_PUNCT2, ACCENTED_RARE): 558,
    (START, LOWER): 558,
    (START, UPPER): 558,
    (START, ACCENTED): 558,
    (START, ACCENTED_RARE): 558,
    (SPACE, CYRILLIC): 2445,
    (SPACE, GREEK): 2445,
    (NEWLINE, CYRILLIC): 2445,
    (NEWLINE, GREEK): 2445,
    (OTHER_SPACE, CYRILLIC): 2445,
    (OTHER_SPACE, GREEK): 2445,
    (LOWER, CYRILLIC): 2445,
    (LOWER, GREEK): 2445,
    (UPPER, CYRILLIC): 2445,
    (UPPER, GREEK): 2445,
    (DIGIT, CYRILLIC): 2445,
    (DIGIT, GREEK): 2445,
    (PUNCT, CYRILLIC): 2445,
    (PUNCT, GREEK): 2445,
    (ACCENTED, CYRILLIC): 2445,
    (ACCENTED, GREEK): 2445,
    (ACCENTED_RARE, CYRILLIC): 2445,
    (ACCENTED_RARE, GREEK): 2445,
    (OTHER, CYRILLIC): 2445,
    (OTHER, GREEK): 2445,
    (HAN1, CYRILLIC): 2445,
    (HAN1, GREEK): 2445,
    (HAN2, CYRILLIC): 2445,
    (HAN2, GREEK): 2445,
    (HAN3, CYRILLIC): 2445,
    (HAN3, GREEK): 2445,
    (KANA1, CYRILLIC): 2445,
    (KANA1, GREEK): 2445,
    (KANA2, CYRILLIC): 2445,
    (KANA2, GREEK): 2445,
    (HANGUL1, CYRILLIC): 2445,
    (HANGUL1, GREEK): 2445,
    (HANGUL2, CYRILLIC): 2445,
    (HANGUL2, GREEK): 2445,
    (HANGUL3, CYRILLIC): 2445,
    (HANGUL3, GREEK): 2445,
    (CJK_PUNCT1, CYRILLIC): 2445,
    (CJK_PUNCT1, GREEK): 2445,
    (CJK_PUNCT2, CYRILLIC): 2445,
    (CJK_PUNCT2, GREEK): 2445,
    (START, CYRILLIC): 2445,
    (START, GREEK): 2445,
}
LETTER_RATE: tuple[int, ...] = (
    0,
    60,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    0,
    993,
    2418,
    0,
    2949,
    0,
    0,
    0,
    0,
    431,
    0,
    0,
    0,
    0,
    0,
    27,
    0,
    1301,
    0,
    0,
    0,
    0,
    1404,
)
"""By script, regime and stride (see N_LETTER_RATES)."""
LONG_RUN = 16
"""Letters of one word past this many pay `LONG_RUN_RATE` each."""
LONG_RUN_RATE = 80
"""Fixed, not fitted (the corpus has few such runs): with the cheap Latin stride rate it
prices ``"x" * 4000`` at cl100k's eight letters a token."""
START_CHARGE = 500
MILLI = 1000


# --- Tables ----------------------------------------------------------------------------------


_COMBINING = range(0x300, 0x370)
_GREEK_FROM = 0x370
_CYRILLIC_FROM = 0x400
_KANA = range(0x3040, 0x3100)
_HANGUL_JAMO = range(0x3130, 0x3190)
_HANGUL = range(0xAC00, 0xD7A4)
_HAN = range(0x4E00, 0xA000)


def _two_byte_class(cp: int, common: frozenset[str]) -> int:
    """Class of a character encoded in two UTF-8 bytes (U+0080..U+07FF)."""
    ch = chr(cp)
    if ch.isspace():
        return OTHER_SPACE
    if not ch.isalpha() and cp not in _COMBINING:  # combining marks join a word
        return OTHER
    if cp < _GREEK_FROM:
        return ACCENTED if ch in common else ACCENTED_RARE
    if cp < _CYRILLIC_FROM:
        return GREEK
    return CYRILLIC  # also Armenian, Hebrew, Arabic: priced alike in BPE vocabularies


def _ascii_class(ch: str) -> int:
    if ch.isalpha():
        return LOWER if ch.islower() else UPPER
    if ch.isdigit():
        return DIGIT
    if ch.isspace():
        return {" ": SPACE, "\n": NEWLINE, "\r": NEWLINE}.get(ch, OTHER_SPACE)
    return PUNCT


def _cjk_class(cp: int, tier: int) -> int:
    if cp in _KANA:
        return KANA1 if tier == 1 else KANA2
    if cp in _HANGUL_JAMO or cp in _HANGUL:
        return (HANGUL1, HANGUL2, HANGUL3)[tier - 1]
    if cp in _HAN:
        return (HAN1, HAN2, HAN3)[tier - 1]
    return CJK_PUNCT1 if tier == 1 else CJK_PUNCT2  # CJK punctuation, fullwidth forms


def unpack_tiers(packed: str) -> npt.NDArray[np.uint8]:
    """The tier (1-3) of every character of `_CJK_RANGES`, in order."""
    size = sum(last - first for first, last in _CJK_RANGES)
    if not packed:
        return np.ones(size, dtype=np.uint8)
    raw = np.frombuffer(zlib.decompress(base64.b64decode(packed)), dtype=np.uint8)
    tiers = np.stack([(raw >> shift) & 3 for shift in (0, 2, 4, 6)], axis=1).reshape(-1)
    return tiers[:size] + 1


def pack_tiers(tiers: npt.NDArray[np.uint8]) -> str:
    """Inverse of `unpack_tiers` (used by the fit script)."""
    values = np.zeros(-(-len(tiers) // 4) * 4, dtype=np.uint8)
    values[: len(tiers)] = np.asarray(tiers, dtype=np.uint8) - 1
    quads = values.reshape(-1, 4)
    raw = quads[:, 0] | quads[:, 1] << 2 | quads[:, 2] << 4 | quads[:, 3] << 6
    return base64.b64encode(zlib.compress(raw.astype(np.uint8).tobytes(), 9)).decode()


def unpack_evidence(packed: str) -> npt.NDArray[np.int8]:
    """Language evidence of each code point below U+0800, in 1/16 nat (+: costly)."""
    evidence = np.zeros(_EVIDENCE_END, dtype=np.int8)
    if packed:
        raw = np.frombuffer(zlib.decompress(base64.b64decode(packed)), dtype=np.int8)
        evidence[: len(raw)] = raw
    evidence[-1] = 0  # every code point past the table reads this entry (take, mode="clip")
    return evidence


def pack_evidence(evidence: npt.NDArray[np.int8]) -> str:
    """Inverse of `unpack_evidence` (used by the fit script)."""
    return base64.b64encode(zlib.compress(np.asarray(evidence, np.int8).tobytes(), 9)).decode()


def build_class_table(accented_common: str, cjk_tiers: str) -> npt.NDArray[np.uint8]:
    """Class of every code point."""
    common = frozenset(accented_common)
    table = np.full(0x110000, OTHER, dtype=np.uint8)
    table[:0x80] = [_ascii_class(chr(cp)) for cp in range(0x80)]
    table[0x80:0x800] = [_two_byte_class(cp, common) for cp in range(0x80, 0x800)]
    for first, last, cls in (
        (0x2000, 0x200A, OTHER_SPACE),
        (0x1100, 0x11FF, HANGUL3),
        (0x31F0, 0x31FF, KANA2),
        (0x3400, 0x4DBF, HAN3),
        (0xF900, 0xFAFF, HAN3),
        (0xFE30, 0xFE4F, CJK_PUNCT2),
        (0x20000, 0x323AF, HAN3),
    ):
        table[first : last + 1] = cls
    tiers = unpack_tiers(cjk_tiers).tolist()
    position = 0
    for first, last in _CJK_RANGES:
        for cp in range(first, last):
            table[cp] = _cjk_class(cp, tiers[position])
            position += 1
    return table


def build_pair_costs(
    char_rate: dict[int, int], run_start: dict[int, int], transition: dict[tuple[int, int], int]
) -> npt.NDArray[np.int64]:
    """Cost of a character given its own class and the class before it.

    Indexed by ``previous * N_CLASSES + current``, where `previous` is START for the first
    character of a text.
    """
    pair = np.zeros((N_CLASSES + 1, N_CLASSES), dtype=np.int64)
    for cls, rate in char_rate.items():
        pair[:, cls] += rate
    for cls, rate in run_start.items():
        pair[:, cls] += rate
        pair[cls, cls] -= rate  # same class continues the run
    for (prev, cls), rate in transition.items():
        pair[prev, cls] += rate
    pair[START] = np.maximum(pair[START], 1)  # any non-empty text costs at least one token
    return pair.reshape(-1)


@dataclass(frozen=True)
class Tables:
    """Everything the counting paths look up; `TABLES` holds the shipped ones."""

    classes: npt.NDArray[np.uint8]
    evidence: npt.NDArray[np.int8]
    pair_cost: npt.NDArray[np.int64]
    letter_rate: npt.NDArray[np.int64]

    @classmethod
    def build(
        cls,
        *,
        accented_common: str = ACCENTED_COMMON,
        cjk_tiers: str = _CJK_TIERS,
        evidence: str = _EVIDENCE,
        char_rate: dict[int, int] | None = None,
        run_start: dict[int, int] | None = None,
        transition: dict[tuple[int, int], int] | None = None,
        letter_rate: tuple[int, ...] = LETTER_RATE,
    ) -> Tables:
        """Build the tables from the shipped parameters or from the fit script's."""
        return cls(
            classes=build_class_table(accented_common, cjk_tiers),
            evidence=unpack_evidence(evidence),
            pair_cost=build_pair_costs(
                CHAR_RATE if char_rate is None else char_rate,
                RUN_START if run_start is None else run_start,
                TRANSITION if transition is None else transition,
            ),
            letter_rate=np.array(letter_rate, dtype=np.int64),
        )


# --- Counting ---------------------------------------------------------------------------------


class _Fast:
    """Tables in the forms each counting path reads fastest (bytes, lists)."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables
        self.class_bytes = tables.classes.tobytes()  # bytes indexing: fastest in pure Python
        self.ascii_classes = tables.classes[:256].tobytes()  # for bytes.translate
        self.ascii_evidence = tables.evidence[:256].view(np.uint8).tobytes()
        self.evidence_list = tables.evidence.tolist()
        self.pair_list = tables.pair_cost.tolist()
        # Pair costs per character, summed in int64: the narrowest type that holds them
        # keeps a batch's per-character arrays small (the largest is this one).
        narrow = np.int16 if int(tables.pair_cost.max()) < 1 << 15 else np.int32
        self.pair_cost = tables.pair_cost.astype(narrow)
        # The Basic Multilingual Plane's class and evidence in one little-endian uint16.
        bmp_evidence = np.zeros(0x10000, dtype=np.uint16)
        bmp_evidence[: len(tables.evidence)] = tables.evidence.view(np.uint8)
        self.bmp_class_evidence = (
            tables.classes[:0x10000].astype(np.uint16) | bmp_evidence << 8
        ).astype("<u2")
        table = tables.letter_rate.reshape(2, 2, _PER_ROW)
        rates = table[:, :, 1:].tolist()
        # (script, regime) -> rate of a word's first letter, and the byte pairs that start one
        self.first = {
            (script, regime): int(table[script - 1, regime, 0])
            for script in (LATIN, ALPHABET)
            for regime in (0, 1)
        }
        self.first_list = [0, 0] + [self.first[s, r] for s in (LATIN, ALPHABET) for r in (0, 1)]
        # (script, regime) -> [(pattern, rate)] for bytes.count, zero rates left out
        self.patterns = {
            (script, regime): [
                (bytes([script]) * stride, rate)
                for stride, rate in zip(STRIDES, rates[script - 1][regime], strict=True)
                if rate
            ]
            for script in (LATIN, ALPHABET)
            for regime in (0, 1)
        }
        # Indexed by script and regime, then by a letter's position in its word.
        by_position = [0] * (3 * 2 * _PERIOD)
        for script in (LATIN, ALPHABET):
            for regime in (0, 1):
                for position in range(1, _PERIOD + 1):
                    by_position[(script * 2 + regime) * _PERIOD + position - 1] = sum(
                        rate
                        for stride, rate in zip(STRIDES, rates[script - 1][regime], strict=True)
                        if position % stride == 0
                    )
        self.by_position = by_position


_SHORT_TEXT = 96
"""Below this many characters a plain loop beats numpy's per-call overhead."""
_BLOCK = 1 << 20
"""Long texts are counted in blocks of about this many characters to bound memory."""
_SCRIPT_TRANSLATION = SCRIPT_OF_CLASS + bytes(256 - len(SCRIPT_OF_CLASS))
_SCRIPT_BYTES = {LATIN: bytes([LATIN]), ALPHABET: bytes([ALPHABET])}
_STARTS = {LATIN: (b"\x00\x01", b"\x02\x01"), ALPHABET: (b"\x00\x02", b"\x01\x02")}
"""The byte pairs where a word of each script starts after something else."""


def _finish(milli: int) -> int:
    return -(-(milli + START_CHARGE) // MILLI) if milli > 0 else 0


def _count_short(text: str, fast: _Fast | None = None) -> int:
    fast = fast or _FAST
    classes = fast.class_bytes
    evidence = fast.evidence_list
    pair_cost = fast.pair_list
    by_position = fast.by_position
    first = fast.first_list
    scripts = SCRIPT_OF_CLASS
    milli = run = regime = script = chunk = 0
    sums: list[int] = []
    prev = START
    for i, ch in enumerate(text):
        if i and not i % CHUNK:  # a chunk ends: the next one's regime is its language
            sums.append(chunk)
            chunk = 0
            now = int(sum(sums[-CHUNKS_BACK:]) > THRESHOLD)
            if now != regime:
                regime, script = now, 0  # a regime change starts a new word
        cp = ord(ch)
        cls = classes[cp]
        milli += pair_cost[prev * N_CLASSES + cls]
        if cp < _EVIDENCE_END:
            chunk += evidence[cp]
        own = scripts[cls]
        if own:
            if own == script:
                run += 1
            else:
                script, run = own, 1
                milli += first[own * 2 + regime]
            milli += by_position[(own * 2 + regime) * _PERIOD + (run - 1) % _PERIOD]
            if run > LONG_RUN:
                milli += LONG_RUN_RATE
        else:
            script = 0
        prev = cls
    return _finish(milli)


def _class_and_evidence(text: str, fast: _Fast) -> tuple[bytes, npt.NDArray[np.int8]]:
    """One class byte and one evidence value per character of `text`."""
    if text.isascii():  # O(1) in CPython; bytes.translate is a tight C loop
        raw = text.encode("ascii")
        evidence = np.frombuffer(raw.translate(fast.ascii_evidence), dtype=np.int8)
        return raw.translate(fast.ascii_classes), evidence
    units = text.encode("utf-16-le", "surrogatepass")  # a lone surrogate is one unit
    if len(units) == 2 * len(text):  # no surrogate pairs: every character is one unit
        # One lookup gives both: class in the low byte, evidence in the high one.
        both = np.take(fast.bmp_class_evidence, np.frombuffer(units, dtype=np.uint16))
        return both.view(np.uint8)[0::2].tobytes(), both.view(np.int8)[1::2]
    codepoints = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    classes = np.take(fast.tables.classes, codepoints).tobytes()  # take: faster than indexing
    # mode="clip" reads every later code point as U+07FF, whose evidence is 0.
    return classes, np.take(fast.tables.evidence, codepoints, mode="clip")


@dataclass
class _Carry:
    """What one block of a long text hands to the next (the defaults start a text)."""

    prev: int = START
    script: int = 0
    run: int = 0
    regime: int = 0
    sums: tuple[int, ...] = ()  # evidence of the last CHUNKS_BACK chunks


_ONES = np.ones(CHUNKS_BACK, dtype=np.int64)
_ZEROS = np.zeros(CHUNKS_BACK, dtype=np.int64)


def _segments(
    sums: npt.NDArray[np.int64], before: tuple[int, ...], length: int
) -> list[tuple[int, int, int]]:
    """(start, end, regime) of each stretch of chunks in one regime.

    A chunk's regime comes from the evidence of the CHUNKS_BACK chunks before it (`before`
    holds those that precede `sums`); the first chunk of a text is always regime 0.
    """
    padded = (
        np.concatenate((_ZEROS[len(before) :], before, sums))
        if before
        else np.concatenate((_ZEROS, sums))
    )
    # window[j] = padded[j] + ... + padded[j + CHUNKS_BACK - 1]: the chunks before chunk j
    window = np.convolve(padded, _ONES)[CHUNKS_BACK - 1 : CHUNKS_BACK - 1 + len(sums)]
    regimes = window > THRESHOLD
    changes = np.flatnonzero(regimes[1:] != regimes[:-1]).tolist()
    bounds = [0, *((j + 1) * CHUNK for j in changes), length]
    first = int(regimes[0])
    # Regimes are two, so each change flips it.
    return [(bounds[i], bounds[i + 1], first ^ (i & 1)) for i in range(len(bounds) - 1)]


def _letters(
    scripts: bytes, segments: list[tuple[int, int, int]], carry: _Carry, fast: _Fast
) -> int:
    """Charges of the letters of one block; updates the word and regime in `carry`."""
    milli = 0
    run_before, script_before, regime_before = carry.run, carry.script, carry.regime
    continued = 0
    # The segments of each regime are priced together, joined by a non-letter byte (a
    # regime change starts a new word anyway): a few bytes.count calls per block, not per
    # segment. The leading separator makes a word at the very start count as started.
    pieces: tuple[list[bytes], list[bytes]] = ([b""], [b""])
    for start, end, regime in segments:
        segment = scripts[start:end]
        if start == 0 and script_before and regime == regime_before:
            own = _SCRIPT_BYTES[script_before]
            continued = len(segment) - len(segment.lstrip(own))  # letters continuing a word
            if continued:
                milli += _continued_word(fast, script_before, regime, run_before, continued)
                segment = segment[continued:]
        pieces[regime].append(segment)
    for regime, parts in enumerate(pieces):
        if len(parts) > 1:
            milli += _words(b"\x00".join(parts), regime, fast)
    start, end, regime = segments[-1]
    last = scripts[-1] if scripts else 0
    carry.script, carry.regime, carry.run = last, regime, 0
    if last:
        tail = (end - start) - len(scripts[start:end].rstrip(_SCRIPT_BYTES[last]))
        whole_block = start == 0 and continued == end  # one word from the block before on
        carry.run = run_before + continued if whole_block else tail
    return milli


def _words(scripts: bytes, regime: int, fast: _Fast) -> int:
    """Charges of the letters of whole words, all in one regime, in a run of script bytes."""
    milli = 0
    for script in (LATIN, ALPHABET):
        own = _SCRIPT_BYTES[script]
        if own in scripts:
            if fast.first[script, regime]:
                words = sum(map(scripts.count, _STARTS[script]))
                milli += fast.first[script, regime] * words
            for pattern, rate in fast.patterns[script, regime]:
                milli += rate * scripts.count(pattern)
            if _LONG_PATTERN[script] in scripts:
                milli += LONG_RUN_RATE * _long_run_letters(scripts, script)
    return milli


def _continued_word(fast: _Fast, script: int, regime: int, before: int, letters: int) -> int:
    """Charges of `letters` letters that continue a word of `before` letters."""
    after = before + letters
    long_letters = max(after - LONG_RUN, 0) - max(before - LONG_RUN, 0)
    strides = sum(
        rate * (after // len(pattern) - before // len(pattern))
        for pattern, rate in fast.patterns[script, regime]
    )
    return LONG_RUN_RATE * long_letters + int(strides)


_LONG_PATTERN = {script: bytes([script]) * (LONG_RUN + 1) for script in (LATIN, ALPHABET)}
_WORD = {script: re.compile(re.escape(bytes([script])) + b"+") for script in (LATIN, ALPHABET)}
"""A word of each script longer than LONG_RUN letters: `in` finds one at C speed."""


def _long_run_letters(segment: bytes, script: int) -> int:
    """Letters of `script` past the LONG_RUN-th of their word, in a segment of script bytes."""
    # Such words are rare: bytes.find jumps from one to the next at C speed (the first
    # match of LONG_RUN + 1 letters in a word is its start) and a regex anchored there
    # finds its end. A regex scan of the whole segment costs about ten times more.
    pattern, word = _LONG_PATTERN[script], _WORD[script]
    letters = 0
    start = segment.find(pattern)
    while start >= 0:
        end = word.match(segment, start).end()  # type: ignore[union-attr]  # matches here
        letters += end - start - LONG_RUN
        start = segment.find(pattern, end)
    return letters


def _count_block(block: str, carry: _Carry, fast: _Fast) -> int:
    """Milli-tokens of one block of a text; updates `carry` for the next block."""
    class_bytes, evidence = _class_and_evidence(block, fast)
    cls = np.frombuffer(class_bytes, dtype=np.uint8)
    pair_cost = fast.pair_cost
    # Pair codes fit in uint16 ((N + 1) * N).
    codes = cls[:-1] * np.uint16(N_CLASSES) + cls[1:]
    first = int(pair_cost[carry.prev * N_CLASSES + class_bytes[0]])
    milli = first + int(np.take(pair_cost, codes).sum(dtype=np.int64))
    sums = np.add.reduceat(evidence, np.arange(0, len(block), CHUNK), dtype=np.int64)
    segments = _segments(sums, carry.sums, len(block))
    milli += _letters(class_bytes.translate(_SCRIPT_TRANSLATION), segments, carry, fast)
    carry.prev = class_bytes[-1]
    carry.sums = (*carry.sums, *sums[-CHUNKS_BACK:].tolist())[-CHUNKS_BACK:]
    return milli


@functools.lru_cache(maxsize=1 << 14)
def _short_tokens(text: str) -> int:
    """`_count_short` with the default tables, remembered.

    Short texts repeat: every message's role, every tool call's name; a history of
    10,000 messages holds about 24,000 of them, a quarter distinct.
    """
    return _count_short(text)


def count_text_tokens(text: str) -> int:
    """Estimate the tokens of `text` (see the module docstring for the model)."""
    if len(text) < _SHORT_TEXT:
        return _short_tokens(text)
    carry = _Carry()
    milli = 0
    step = max(_BLOCK // CHUNK, 1) * CHUNK  # blocks end on chunk boundaries
    for start in range(0, len(text), step):
        milli += _count_block(text[start : start + step], carry, _FAST)
    return _finish(milli)


_BATCH_CHARS = 1 << 14
"""Texts are counted together in batches of about this many characters: enough to amortise
numpy's per-call cost, few enough that the per-character arrays stay in cache (a batch of
1 << 18 was twice as slow and took 12 times the memory)."""


def count_texts_tokens(texts: list[str]) -> list[int]:
    """Estimate the tokens of each text; equal to `count_text_tokens` on each, faster.

    Many small texts (candidate lines, messages) are joined and classified in one numpy
    pass, which also prices their character pairs and sums their chunks' evidence; each
    text's words are then counted in its own span.
    """
    counts = [0] * len(texts)
    batch: list[int] = []
    size = 0
    for i, text in enumerate(texts):
        if len(text) >= _BLOCK:
            counts[i] = count_text_tokens(text)
        elif len(text) < _SHORT_TEXT:
            counts[i] = _short_tokens(text)
        else:
            batch.append(i)
            size += len(text)
            if size >= _BATCH_CHARS:
                _count_batch(texts, batch, counts, _FAST)
                batch, size = [], 0
    if batch:
        _count_batch(texts, batch, counts, _FAST)
    return counts


def _count_batch(texts: list[str], batch: list[int], counts: list[int], fast: _Fast) -> None:
    joined = "".join(texts[i] for i in batch)
    class_bytes, evidence = _class_and_evidence(joined, fast)
    cls = np.frombuffer(class_bytes, dtype=np.uint8)
    lengths = [len(texts[i]) for i in batch]
    text_starts = np.concatenate(([0], np.cumsum(lengths[:-1]))).astype(np.int64)

    cost = np.empty(len(cls), dtype=fast.pair_cost.dtype)
    np.take(fast.pair_cost, cls[:-1] * np.uint16(N_CLASSES) + cls[1:], out=cost[1:])
    cost[text_starts] = fast.pair_cost[START * N_CLASSES + cls[text_starts].astype(np.int64)]
    milli = np.add.reduceat(cost, text_starts, dtype=np.int64).tolist()

    # Chunks start afresh at every text's start.
    chunks = [-(-n // CHUNK) for n in lengths]
    offsets = np.repeat(text_starts, chunks)
    firsts = np.repeat(np.cumsum([0, *chunks[:-1]]), chunks)
    chunk_starts = offsets + (np.arange(len(offsets)) - firsts) * CHUNK
    sums = np.add.reduceat(evidence, chunk_starts, dtype=np.int64)
    scripts = class_bytes.translate(_SCRIPT_TRANSLATION)
    chunk = 0
    for k, (i, n, start) in enumerate(zip(batch, lengths, text_starts.tolist(), strict=True)):
        own = sums[chunk : chunk + chunks[k]]
        chunk += chunks[k]
        letters = _letters(scripts[start : start + n], _segments(own, (), n), _Carry(), fast)
        counts[i] = _finish(milli[k] + letters)


TABLES = Tables.build()
_FAST = _Fast(TABLES)
