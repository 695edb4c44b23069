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
  letter of a word, `STRIDES`), by the regime of its chunk (`_token_regimes`): cl100k
  holds most English (and many Russian) words whole, and cuts the words of most other
  languages every three or four letters; each letter's log-likelihood ratio between the
  two (``z``, ``k``, ``і`` against ``h``, ``y``, ``ы``), the letter pairs of Welsh, ``ў``
  and the punctuation of source code, summed over the chunks before, pick the rates;
- a surcharge for every letter past the `LONG_RUN`-th of one word: no vocabulary holds
  such words, so cl100k cuts a long unbroken run (``xxxx...``, a blob) every few letters;
- every other character (Arabic, Hebrew, Indic and South-East Asian scripts, symbols,
  emoji, combining marks, the astral planes) by its script group and its tier: the tokens
  the dearer of cl100k and o200k spends on it alone (`GROUPS`, `_tier_tables`), never 0;
- a token for every run of two or more spaces, as both pre-tokenizers split them;
- a charge for each pair of adjacent letters (``a``-``z``, accented, Vietnamese) by how
  often the dearer tokenizer cuts a word between them (``yw``, ``rh``, ``sz`` often, ``th``
  never): each lower-case letter is a class of its own, so the pair lookup prices it.

Everything is summed in milli-tokens and rounded up, plus a start charge of half a token,
since an underestimate is what overflows a window. All weights are integers and every
charge depends only on the character and the text to its left, so the count can never
fall when text is appended: appending adds non-negative charges and changes none of the
earlier ones. `_token_count` evaluates the model (a loop for short strings, numpy for long
ones and for batches; the two agree exactly).

The weights, the CJK tiers, the accented letters that count as common and the language
evidence were derived from cl100k and o200k and text read from this machine
(`bench/fit_token_weights.py` re-derives them; `bench/derive_group_tiers.py` the group
tiers; `bench/bench_tokens.py` measures the result). Only tables of tiers are shipped as
data, never any part of the vocabularies themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from langchain_contextkit._tier_tables import CJK_TIERS, EVIDENCE, LETTER_PAIRS, PAIR_EVIDENCE
from langchain_contextkit._token_groups import GROUPS, transition_groups
from langchain_contextkit._token_packing import (
    pack_bytes,
    pack_two_bits,
    unpack_bytes,
    unpack_two_bits,
)
from langchain_contextkit._token_regimes import (
    CODE_CHARS,
    CODE_LETTER_PERCENT,
    DEAR_ALPHABET_RATE,
    DEAR_LETTER_RATE,
    SHORT_U_EVIDENCE,
    with_extra_regimes,
)

__all__ = ["TABLES", "Tables"]

# --- Character classes ---------------------------------------------------------------------

SPACE, NEWLINE, OTHER_SPACE, UPPER, DIGIT, PUNCT = range(6)
ACCENTED, ACCENTED_RARE, CYRILLIC, GREEK, OTHER = range(6, 11)
HAN1, HAN2, HAN3, KANA1, KANA2, HANGUL1, HANGUL2, HANGUL3, CJK_PUNCT1, CJK_PUNCT2 = range(11, 21)
LATIN_EXT = 21
"""Latin letters of three UTF-8 bytes (Vietnamese ``ế``, ``ạ``): letters of Latin words."""
CYRILLIC_RARE = 22
"""Cyrillic letters that hardly any cl100k token contains (Kazakh ``қ``, Belarusian ``ў``,
Serbian ``ј``): a word cuts around them, where Russian letters merge."""
CYRILLIC_UPPER = 23
"""Capitals of CYRILLIC: cl100k holds few tokens that start with one, so an upper-case word
(``ПАРАМЕТР``) or a capitalised one (``Плян``) cuts at its capitals."""
LOWER = 24
"""The first of 26 classes, one per lower-case ASCII letter (``a`` to ``z``): the pair
costs price each pair of letters by how often the tokenizers cut a word between them
(`LETTER_PAIR_WEIGHT`), at no cost to speed, since every character pair is looked up anyway."""
LOWER_LETTERS = range(LOWER, LOWER + 26)
PAIRED_LETTERS = (*LOWER_LETTERS, ACCENTED, ACCENTED_RARE, LATIN_EXT)
"""The classes whose pairs carry a letter-pair cost (`_LETTER_PAIRS`), in its order."""
# Every other character, by script group (`_token_groups.GROUPS`), then by its tier: a
# character costs its group's rate times its tier, since scripts these vocabularies hardly
# merge (Thai, Devanagari, Georgian in cl100k) cost about what their characters cost alone.
LETTER_GROUPS = GROUPS[: GROUPS.index("letters") + 1]
TIERS = 4
GROUP_BASE = LOWER + 26
CODE_PUNCT = GROUP_BASE + len(GROUPS) * TIERS
"""Punctuation of source code (`CODE_CHARS`), priced as PUNCT: its pair evidence pulls the
chunks after it towards the code regime."""
SHORT_U = CODE_PUNCT + 1
"""Belarusian ``ў``, priced as CYRILLIC_RARE: its pair evidence (`SHORT_U_EVIDENCE`) makes
the chunks after it dear (cl100k cuts Belarusian far more than Russian or Ukrainian)."""
BACKSLASH = SHORT_U + 1
"""``\\``, priced as PUNCT plus `BACKSLASH_RATE`: neither tokenizer merges it with the
punctuation after it (roff's ``\\('a`` is ``\\``, ``('``, ``a``)."""
PRICED_AS = {CODE_PUNCT: PUNCT, SHORT_U: CYRILLIC_RARE, BACKSLASH: PUNCT}
"""Classes that take the costs of another (plus their own charge), and that class."""
N_CLASSES = BACKSLASH + 1
START = N_CLASSES
"""The class "before" a text's first character: pair codes run to (N_CLASSES + 1) * N_CLASSES."""
CLASS_NAMES = (
    *("space", "newline", "other_space", "upper", "digit", "punct"),
    *("accented", "accented_rare", "cyrillic", "greek", "other"),
    *("han1", "han2", "han3", "kana1", "kana2", "hangul1", "hangul2", "hangul3"),
    *("cjk_punct1", "cjk_punct2", "latin_ext", "cyrillic_rare", "cyrillic_upper"),
    *(f"lower_{chr(ord('a') + i)}" for i in range(26)),
    *(f"{group}{tier}" for group in GROUPS for tier in range(1, TIERS + 1)),
    "code_punct",
    "cyrillic_short_u",
    "backslash",
)


def group_class(group: int, tier: int) -> int:
    """The class of a character of `GROUPS[group]` that costs `tier` tokens alone."""
    return GROUP_BASE + group * TIERS + tier - 1


def group_of_class(cls: int) -> tuple[int, int] | None:
    """(group, tier) of a group class, None for the others."""
    if cls < GROUP_BASE or cls >= CODE_PUNCT:
        return None
    group, tier = divmod(cls - GROUP_BASE, TIERS)
    return group, tier + 1


LATIN, ALPHABET, SPACES = 1, 2, 3
"""Letter scripts: a word is a run of letters of one script (0 marks a non-letter). Runs
of spaces are tracked the same way (`SPACES`), since the pre-tokenizer prices them by run."""
SCRIPT_OF_CLASS = bytes(
    LATIN
    if c in {*LOWER_LETTERS, UPPER, ACCENTED, ACCENTED_RARE, LATIN_EXT}
    else ALPHABET
    if c in {CYRILLIC, CYRILLIC_RARE, CYRILLIC_UPPER, GREEK, SHORT_U}
    else SPACES
    if c == SPACE
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
CYRILLIC_COMMON = "абвгдежзийклмнопрстуфхцчшщыьэюя"
"""Cyrillic letters (lower case) that some cl100k tokens contain; the others are
CYRILLIC_RARE."""
_CJK_RANGES = (
    (0x3000, 0x3100),
    (0x3130, 0x3190),
    (0x4E00, 0xA000),
    (0xAC00, 0xD7A4),
    (0xFF00, 0xFFF0),
)
"""Where `_CJK_TIERS` gives each character's tier; other CJK characters are tier 3."""
_CJK_TIERS = CJK_TIERS
"""zlib + base64 of two bits per character of `_CJK_RANGES`: cl100k's tokens for it alone, 1-3
(`_tier_tables`)."""
_EVIDENCE = EVIDENCE
"""zlib + base64 of one signed byte per code point below U+0800 (case-folded letters)."""

_LETTER_PAIRS = LETTER_PAIRS
"""zlib + base64 of one byte per pair of `PAIRED_LETTERS` (previous, then current): how
often cl100k or o200k (the dearer) cuts a word between the two, in 1/255, every category
of text weighted alike."""
_PAIR_EVIDENCE = PAIR_EVIDENCE
"""zlib + base64 of one signed byte per pair of `PAIRED_LETTERS`, as `_LETTER_PAIRS`: the
log-likelihood ratio (1/4 nat) of the pair between Welsh and all other text with letters."""
LETTER_PAIR_FLOOR = 30
"""Cut shares (1/255) up to this are free: the stride rates price a word's usual cuts."""

_EVIDENCE_END = 0x800
"""Code points from here on carry no language evidence."""
# Milli-tokens: the fitted weights (bench/fit_token_weights.py).
CHAR_RATE: dict[int, int] = {
    NEWLINE: 170,
    OTHER_SPACE: 122,
    DIGIT: 248,
    PUNCT: 131,
    ACCENTED: 442,
    ACCENTED_RARE: 775,
    GREEK: 567,
    HAN1: 766,
    HAN2: 2538,
    HAN3: 2988,
    KANA1: 920,
    KANA2: 709,
    HANGUL1: 575,
    HANGUL2: 1821,
    HANGUL3: 2400,  # held (bench/fit_token_weights.py _FIXED)
    CJK_PUNCT1: 450,
    CJK_PUNCT2: 2100,
    LATIN_EXT: 94,
    CYRILLIC_RARE: 3167,
    CYRILLIC_UPPER: 389,
}
RUN_START: dict[int, int] = {NEWLINE: 969, DIGIT: 625, CJK_PUNCT1: 36}
TRANSITION_WEIGHT: dict[str, int] = {
    "lower->upper": 1286,
    "digit->letter": 51,
    "upper->digit": 2072,
    "space->digit": 1000,
    "space->punct": 498,
    "punct->space": 245,
    "punct->digit": 932,
    "punct->lower": 142,
    "punct->upper": 655,
    "space->cjk": 792,
    "latin word": 874,
    "alphabet word": 1810,
}
"""Milli-tokens of each named transition (`_token_groups.transition_groups`)."""
TRANSITION_GROUPS = transition_groups(
    {"space": SPACE, "upper": UPPER, "digit": DIGIT, "punct": PUNCT},
    LOWER_LETTERS,
    range(HAN1, CJK_PUNCT2 + 1),
    SCRIPT_OF_CLASS,
    LATIN,
    ALPHABET,
)
"""The class pairs of each named transition; a pair in two groups pays both weights."""


def sum_transitions(weights: dict[str, int]) -> dict[tuple[int, int], int]:
    """Milli-tokens per (previous, current) class pair, from the weights by group name."""
    summed: dict[tuple[int, int], int] = {}
    for name, weight in weights.items():
        for pair in TRANSITION_GROUPS[name] if weight else ():
            summed[pair] = summed.get(pair, 0) + weight
    return summed


TRANSITION = sum_transitions(TRANSITION_WEIGHT)
# fmt: off
LETTER_RATE: tuple[int, ...] = (
    0, 43, 0, 0, 0, 34, 0, 0, 0,  # latin cheap: first letter, strides
    0, 0, 0, 137, 50, 138, 596, 0, 0,  # latin costly: first letter, strides
    0, 94, 0, 0, 0, 243, 1389, 0, 2146,  # alphabet cheap: first letter, strides
    0, 0, 329, 0, 0, 79, 456, 0, 0,  # alphabet costly: first letter, strides
)
# fmt: on
"""By script, regime and stride (see N_LETTER_RATES)."""
GROUP_RATE: dict[str, int] = {
    "arabic": 916,
    "hebrew": 965,
    "armenian": 947,
    "indic": 988,
    "sinhala": 1044,
    "sea": 1003,
    "letters": 1043,
    "mark": 320,
    "symbol": 1017,
}
"""Milli-tokens per token a group's character costs alone."""
GROUP_WORD: dict[str, int] = {"hebrew": 218, "armenian": 1617, "sinhala": 460}
"""Milli-tokens where a word of a letter group starts."""
LETTER_PAIR_WEIGHT = 2253
"""Milli-tokens of a certain cut between two letters (a pair's share of cuts above
`LETTER_PAIR_FLOOR`, times this)."""
LONG_RUN = 16
"""Letters of one word past this many pay `LONG_RUN_RATE` each."""
LONG_RUN_RATE = 80
"""Fixed, not fitted (the corpus has few such runs): with the cheap Latin stride rate it
prices ``"x" * 4000`` at cl100k's eight letters a token."""
SPACE_RUN = 1000
"""Fixed: the pre-tokenizer makes every run of two or more spaces but its last one token
(cl100k and o200k both: ``"a  b"`` is three tokens), and one more per `SPACE_TOKEN`."""
SPACE_TOKEN = 81
"""o200k's longest run of spaces is 80 (cl100k's 128): a longer run costs another token."""
BACKSLASH_RATE = 850
"""Picked on the fit half from 0 to 1200: the least mean absolute error on roff sources
that keeps the lowest documents of roff and of shell/Perl above -15%."""
START_CHARGE = 500
MILLI = 1000
MIN_GROUP_RATE = 50
"""Floor of a group's rate per token a character costs alone, so that no character is
free: one token of cl100k or o200k spans at most 20 characters of one group (Thai in
o200k; `bench/derive_group_tiers.py` measures it), so none costs less than 1/20 of a token."""


# --- Tables ----------------------------------------------------------------------------------


_COMBINING = range(0x300, 0x370)
_GREEK_FROM = 0x370
_CYRILLIC_FROM = 0x400
_KANA = range(0x3040, 0x3100)
_HANGUL_JAMO = range(0x3130, 0x3190)
_HANGUL = range(0xAC00, 0xD7A4)
_HAN = range(0x4E00, 0xA000)


def _two_byte_class(cp: int, common: frozenset[str], cyrillic: frozenset[str]) -> int:
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
    if cp >= _OWN_GROUP_FROM:
        return CYRILLIC  # Armenian, Hebrew, Arabic, ...: `build_class_table` groups them
    return _cyrillic_class(ch, cyrillic)


def _cyrillic_class(ch: str, cyrillic: frozenset[str]) -> int:
    if ch.lower() not in cyrillic:
        return CYRILLIC_RARE  # both cases: hardly any token holds the letter
    return CYRILLIC_UPPER if ch.isupper() else CYRILLIC


def _ascii_class(ch: str) -> int:
    if ch.isalpha():
        return LOWER + ord(ch) - ord("a") if ch.islower() else UPPER
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
    return unpack_two_bits(packed, size) + 1 if packed else np.ones(size, dtype=np.uint8)


def pack_tiers(tiers: npt.NDArray[np.uint8]) -> str:
    """Inverse of `unpack_tiers` (used by the fit script)."""
    return pack_two_bits(np.asarray(tiers, dtype=np.uint8) - 1)


def unpack_evidence(packed: str) -> npt.NDArray[np.int8]:
    """Language evidence of each code point below U+0800, in 1/16 nat (+: costly)."""
    evidence = np.zeros(_EVIDENCE_END, dtype=np.int8)
    if packed:
        raw = unpack_bytes(packed).view(np.int8)
        evidence[: len(raw)] = raw
    evidence[-1] = 0  # every code point past the table reads this entry (take, mode="clip")
    return evidence


def pack_evidence(evidence: npt.NDArray[np.int8]) -> str:
    """Inverse of `unpack_evidence` (used by the fit script)."""
    return pack_bytes(np.asarray(evidence, np.int8))


def build_class_table(
    accented_common: str,
    cjk_tiers: str,
    group_tiers: npt.NDArray[np.uint8] | None = None,
    cyrillic_common: str = CYRILLIC_COMMON,
) -> npt.NDArray[np.uint8]:
    """Class of every code point.

    `group_tiers` holds, per code point, ``group * TIERS + tier - 1`` (`_tier_tables`); the
    characters no finer class claims take their group class from it.
    """
    common, cyrillic = frozenset(accented_common), frozenset(cyrillic_common)
    table = np.full(0x110000, OTHER, dtype=np.uint8)
    table[:0x80] = [_ascii_class(chr(cp)) for cp in range(0x80)]
    table[[ord(ch) for ch in CODE_CHARS]] = CODE_PUNCT
    table[0x80:0x800] = [_two_byte_class(cp, common, cyrillic) for cp in range(0x80, 0x800)]
    table[[ord("ў"), ord("Ў")]] = SHORT_U
    table[ord("\\")] = BACKSLASH
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
    groups = unpack_group_tiers() if group_tiers is None else group_tiers
    # Letters of the two-byte alphabets after Cyrillic (Armenian, Hebrew, Arabic, ...) are
    # priced by their own group, not as Cyrillic: cl100k merges them far less.
    table[_OWN_GROUP_FROM:0x800] = np.where(
        table[_OWN_GROUP_FROM:0x800] == CYRILLIC, OTHER, table[_OWN_GROUP_FROM:0x800]
    )
    latin_ext = np.zeros(0x110000, dtype=bool)
    latin_ext[0x1E00:0x1F00] = True
    is_letter = groups // TIERS == GROUPS.index("letters")
    table[(table == OTHER) & latin_ext & is_letter] = LATIN_EXT
    other = table == OTHER
    table[other] = GROUP_BASE + groups[other]
    return table


_OWN_GROUP_FROM = 0x530
"""From Armenian on, two-byte letters belong to a group."""


def unpack_group_tiers(packed: str | None = None) -> npt.NDArray[np.uint8]:
    """``group * TIERS + tier - 1`` of every code point (`_tier_tables.GROUP_TIERS`)."""
    from langchain_contextkit._tier_tables import GROUP_TIERS  # noqa: PLC0415 - data only

    return unpack_bytes(GROUP_TIERS if packed is None else packed)


def pack_group_tiers(values: npt.NDArray[np.uint8]) -> str:
    """Inverse of `unpack_group_tiers` (used by the fit script)."""
    return pack_bytes(np.asarray(values, np.uint8))


def unpack_letter_pairs(packed: str) -> npt.NDArray[np.uint8]:
    """The cut share (1/255) of every pair of `PAIRED_LETTERS`, [previous, current]."""
    size = len(PAIRED_LETTERS)
    if not packed:
        return np.zeros((size, size), dtype=np.uint8)
    return unpack_bytes(packed).reshape(size, size)


def pack_letter_pairs(shares: npt.NDArray[np.uint8]) -> str:
    """Inverse of `unpack_letter_pairs` (used by the fit script)."""
    return pack_bytes(np.asarray(shares, np.uint8))


def letter_pair_excess(shares: npt.NDArray[np.uint8]) -> npt.NDArray[np.float64]:
    """Each pair's cut share above `LETTER_PAIR_FLOOR`, as a fraction of a cut."""
    return np.maximum(shares.astype(np.float64) - LETTER_PAIR_FLOOR, 0) / 255


def letter_pair_costs(shares: npt.NDArray[np.uint8], weight: int) -> dict[tuple[int, int], int]:
    """Milli-tokens per (previous, current) class pair of two letters of `PAIRED_LETTERS`."""
    excess = np.round(letter_pair_excess(shares) * weight).astype(np.int64)
    return {
        (prev, cls): int(excess[i, j])
        for i, prev in enumerate(PAIRED_LETTERS)
        for j, cls in enumerate(PAIRED_LETTERS)
        if excess[i, j]
    }


def build_pair_costs(
    char_rate: dict[int, int],
    run_start: dict[int, int],
    transition: dict[tuple[int, int], int],
    backslash_rate: int = 0,
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
    for clone, priced in PRICED_AS.items():  # priced as their class, before and after
        pair[:, clone] = pair[:, priced]
        pair[clone] = pair[priced]
    pair[:, BACKSLASH] += backslash_rate
    pair[START] = np.maximum(pair[START], 1)  # any non-empty text costs at least one token
    return pair.reshape(-1)


def with_groups(
    char_rate: dict[int, int],
    transition: dict[tuple[int, int], int],
    group_rate: dict[str, int],
    group_word: dict[str, int],
) -> tuple[dict[int, int], dict[tuple[int, int], int]]:
    """Character rates and transitions with the groups' added.

    A group character pays its group's rate per token it costs alone, never less than
    `MIN_GROUP_RATE` (an unknown character is never free); a character of a letter group
    after any other class starts a word, and pays the group's word start.
    """
    chars = dict(char_rate)
    moves = dict(transition)
    for g, group in enumerate(GROUPS):
        rate = max(group_rate.get(group, MIN_GROUP_RATE), MIN_GROUP_RATE)
        for tier in range(1, TIERS + 1):
            chars[group_class(g, tier)] = chars.get(group_class(g, tier), 0) + rate * tier
        word = group_word.get(group, 0)
        if not word:
            continue
        own = {group_class(g, tier) for tier in range(1, TIERS + 1)}
        for prev in range(N_CLASSES + 1):
            if prev not in own:
                for cls in own:
                    moves[prev, cls] = moves.get((prev, cls), 0) + word
    return chars, moves


@dataclass(frozen=True)
class Tables:
    """Everything the counting paths look up; `TABLES` holds the shipped ones."""

    classes: npt.NDArray[np.uint8]
    evidence: npt.NDArray[np.int8]
    pair_cost: npt.NDArray[np.int64]
    letter_rate: npt.NDArray[np.int64]
    pair_evidence: npt.NDArray[np.int64]
    """Dear-language evidence of each class pair, indexed as `pair_cost`."""

    @classmethod
    def build(
        cls,
        *,
        accented_common: str = ACCENTED_COMMON,
        cyrillic_common: str = CYRILLIC_COMMON,
        cjk_tiers: str = _CJK_TIERS,
        evidence: str = _EVIDENCE,
        char_rate: dict[int, int] | None = None,
        run_start: dict[int, int] | None = None,
        transition: dict[tuple[int, int], int] | None = None,
        letter_rate: tuple[int, ...] = LETTER_RATE,
        group_rate: dict[str, int] | None = None,
        group_word: dict[str, int] | None = None,
        group_tiers: npt.NDArray[np.uint8] | None = None,
        letter_pairs: str = _LETTER_PAIRS,
        letter_pair_weight: int = LETTER_PAIR_WEIGHT,
        pair_evidence: str = _PAIR_EVIDENCE,
        dear_letter_rate: int = DEAR_LETTER_RATE,
        code_letter_percent: int = CODE_LETTER_PERCENT,
        dear_alphabet_rate: int = DEAR_ALPHABET_RATE,
        backslash_rate: int = BACKSLASH_RATE,
    ) -> Tables:
        """Build the tables from the shipped parameters or from the fit script's."""
        chars, transitions = with_groups(
            CHAR_RATE if char_rate is None else char_rate,
            TRANSITION if transition is None else transition,
            GROUP_RATE if group_rate is None else group_rate,
            GROUP_WORD if group_word is None else group_word,
        )
        pairs = letter_pair_costs(unpack_letter_pairs(letter_pairs), letter_pair_weight)
        for pair, cost in pairs.items():
            transitions[pair] = transitions.get(pair, 0) + cost
        starts = RUN_START if run_start is None else run_start
        return cls(
            classes=build_class_table(accented_common, cjk_tiers, group_tiers, cyrillic_common),
            evidence=unpack_evidence(evidence),
            pair_cost=build_pair_costs(chars, starts, transitions, backslash_rate),
            letter_rate=with_extra_regimes(
                letter_rate, (dear_letter_rate, dear_alphabet_rate), code_letter_percent
            ),
            pair_evidence=build_pair_evidence(unpack_letter_pairs(pair_evidence).view(np.int8)),
        )


def build_pair_evidence(evidence: npt.NDArray[np.int8]) -> npt.NDArray[np.int64]:
    """`Tables.pair_evidence` from the evidence of each pair of `PAIRED_LETTERS`."""
    table = np.zeros((N_CLASSES + 1, N_CLASSES), dtype=np.int64)
    paired = np.array(PAIRED_LETTERS)
    table[np.ix_(paired, paired)] = evidence
    table[:, SHORT_U] = SHORT_U_EVIDENCE
    return table.reshape(-1)


TABLES = Tables.build()
