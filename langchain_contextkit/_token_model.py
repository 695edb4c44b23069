"""The character-class model behind `count_tokens`.

Byte-pair tokenizers such as cl100k cut text at class boundaries first (a run of letters,
a run of digits, a run of punctuation, a run of whitespace) and then merge bytes inside
each piece. So a good estimate does not need the vocabulary: it classifies every
character, and charges

- a per-character rate for each class (long words and random strings cost more),
- a run-start charge where a new run of a class begins (each word is about one token,
  whatever its length),
- transition charges where cl100k cuts between classes (``aB`` inside a letter run, a
  digit followed by a letter, a space before a number),
- a surcharge for letters past the 16th of one run (no vocabulary has such words, so a
  long unbroken run such as a base64 blob is cut every few characters).

CJK characters (Han, kana, Hangul, CJK punctuation and fullwidth forms) count exactly one
token each, as the specification says; everything else is summed in milli-tokens and rounded
up, plus a start charge of half a token, since an underestimate is what overflows a
window. All weights are integers, so the two evaluation paths below (pure Python for short
strings, numpy for long ones) agree exactly and the count can never fall when text is
appended: every charge is non-negative and depends only on the text to its left.

The weights were fitted by non-negative least squares against tiktoken ``cl100k_base``
on text read from this machine (`bench/fit_token_weights.py` re-derives them and
`bench/bench_tokens.py` measures the result); a few classes too rare to fit (accented
Latin, symbols, tabs) have weights set by hand from their UTF-8 length.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["count_text_tokens", "count_texts_tokens"]

# Character classes. CJK classes are contiguous (HAN..CJK_PUNCT) so one range test finds them.
SPACE, NEWLINE, OTHER_SPACE, LOWER, UPPER, DIGIT, PUNCT = range(7)
LATIN_EXT, CYRILLIC, GREEK, OTHER = range(7, 11)
HAN, KANA, HANGUL, CJK_PUNCT = range(11, 15)
N_CLASSES = 15
CLASS_NAMES = (
    *("space", "newline", "other_space", "lower", "upper", "digit", "punct"),
    *("latin_ext", "cyrillic", "greek", "other", "han", "kana", "hangul", "cjk_punct"),
)

_LETTERS = (LOWER, UPPER, LATIN_EXT)
_CJK = (HAN, KANA, HANGUL, CJK_PUNCT)
LONG_RUN = 16
"""Letters of one run past this many pay the long-run surcharge."""

# Milli-tokens. Fitted values unless marked hand-set (see the module docstring).
CHAR_RATE = {
    SPACE: 8,
    NEWLINE: 514,
    OTHER_SPACE: 250,  # hand-set: tabs and exotic spaces are rare in the corpus
    LOWER: 39,
    UPPER: 124,
    DIGIT: 334,
    PUNCT: 38,
    LATIN_EXT: 500,  # hand-set: a two-byte letter inside a Latin word often splits it
    CYRILLIC: 70,
    GREEK: 1034,
    OTHER: 1000,  # hand-set: symbols and emoji are one to three byte-level tokens
}
RUN_START = {
    NEWLINE: 1112,
    OTHER_SPACE: 1000,  # hand-set
    CYRILLIC: 2892,
}
WORD_START = 801
"""Charged where a run of Latin letters begins (one word)."""
TRANSITION = {
    (LOWER, UPPER): 645,  # camelCase and base64 cut at a case change
    (DIGIT, LOWER): 593,
    (DIGIT, UPPER): 593,
    (UPPER, DIGIT): 4642,  # rare outside base64, where it marks a costly cut
    (SPACE, DIGIT): 1814,  # cl100k never joins a space to a number
    (SPACE, PUNCT): 751,
    (PUNCT, SPACE): 594,
    (PUNCT, DIGIT): 1845,
    (PUNCT, LOWER): 536,
    (PUNCT, UPPER): 310,
}
LONG_RUN_RATE = 191
START_CHARGE = 500
MILLI = 1000


_COMBINING_MARKS = range(0x300, 0x370)
_GREEK = range(0x370, 0x400)


def _two_byte_class(cp: int) -> int:
    """Class of a character encoded in two UTF-8 bytes (U+0080..U+07FF)."""
    ch = chr(cp)
    if ch.isspace():
        return OTHER_SPACE
    if not ch.isalpha() and cp not in _COMBINING_MARKS:
        return OTHER
    if cp < _GREEK.start:
        return LATIN_EXT
    if cp in _GREEK:
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


def _build_class_table() -> npt.NDArray[np.uint8]:
    table = np.full(0x110000, OTHER, dtype=np.uint8)
    table[:0x80] = [_ascii_class(chr(cp)) for cp in range(0x80)]
    table[0x80:0x800] = [_two_byte_class(cp) for cp in range(0x80, 0x800)]
    for first, last, cls in (
        (0x2000, 0x200A, OTHER_SPACE),
        (0x3400, 0x4DBF, HAN),
        (0x4E00, 0x9FFF, HAN),
        (0xF900, 0xFAFF, HAN),
        (0x20000, 0x323AF, HAN),
        (0x3040, 0x30FF, KANA),
        (0x31F0, 0x31FF, KANA),
        (0xFF66, 0xFF9F, KANA),
        (0x1100, 0x11FF, HANGUL),
        (0x3130, 0x318F, HANGUL),
        (0xAC00, 0xD7AF, HANGUL),
        (0x3000, 0x303F, CJK_PUNCT),
        (0xFE30, 0xFE4F, CJK_PUNCT),
        (0xFF00, 0xFF65, CJK_PUNCT),
        (0xFFA0, 0xFFEF, CJK_PUNCT),
    ):
        table[first : last + 1] = cls
    return table


def _build_pair_costs() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Cost of a character given its own class and the class before it.

    Returns the cost of a character at the start of a text (indexed by class) and the
    cost of any later one (indexed by ``previous * N_CLASSES + current``).
    """
    first = np.zeros(N_CLASSES, dtype=np.int64)
    pair = np.zeros((N_CLASSES, N_CLASSES), dtype=np.int64)
    for cls, rate in CHAR_RATE.items():
        first[cls] += rate
        pair[:, cls] += rate
    for cls, rate in RUN_START.items():
        first[cls] += rate
        pair[:, cls] += rate
        pair[cls, cls] -= rate  # same class continues the run
    for cls in _LETTERS:
        first[cls] += WORD_START
        for prev in range(N_CLASSES):
            if prev not in _LETTERS:
                pair[prev, cls] += WORD_START
    for (prev, cls), rate in TRANSITION.items():
        pair[prev, cls] += rate
    return first, pair.reshape(-1)


CLASS_TABLE = _build_class_table()
_CLASS_BYTES = CLASS_TABLE.tobytes()  # bytes indexing is the fastest lookup in pure Python
_ASCII_CLASS_TRANSLATION = CLASS_TABLE[:256].tobytes()  # only the ASCII half is ever used
_LETTER_TRANSLATION = bytes(int(cls in _LETTERS) for cls in range(256))
_LONG_RUN_PATTERN = b"\x01" * (LONG_RUN + 1)
FIRST_COST, PAIR_COST = _build_pair_costs()
_FIRST_LIST = FIRST_COST.tolist()
_PAIR_LIST = PAIR_COST.tolist()
_IS_LETTER_LIST = [cls in _LETTERS for cls in range(N_CLASSES)]
_IS_CJK_LIST = [cls in _CJK for cls in range(N_CLASSES)]

_SHORT_TEXT = 96
"""Below this many characters a plain loop beats numpy's per-call overhead."""
_BLOCK = 1 << 20
"""Long texts are counted in blocks of this many characters to bound memory."""


def _finish(cjk: int, milli: int) -> int:
    if milli <= 0:
        return cjk
    return cjk + -(-(milli + START_CHARGE) // MILLI)


def _count_short(text: str) -> int:
    classes = _CLASS_BYTES
    pair_cost = _PAIR_LIST
    is_letter = _IS_LETTER_LIST
    is_cjk = _IS_CJK_LIST
    milli = cjk = run = 0
    prev = -1
    for ch in text:
        cls = classes[ord(ch)]
        milli += _FIRST_LIST[cls] if prev < 0 else pair_cost[prev * N_CLASSES + cls]
        if is_letter[cls]:
            run += 1
            if run > LONG_RUN:
                milli += LONG_RUN_RATE
        else:
            run = 0
            if is_cjk[cls]:
                cjk += 1
        prev = cls
    return _finish(cjk, milli)


def _classify(block: str) -> bytes:
    """One class byte per character of `block`."""
    if block.isascii():  # O(1) in CPython; bytes.translate is a tight C loop
        return block.encode("ascii").translate(_ASCII_CLASS_TRANSLATION)
    codepoints = np.frombuffer(block.encode("utf-32-le"), dtype=np.uint32)
    return np.take(CLASS_TABLE, codepoints).tobytes()  # take: faster than fancy indexing


def _count_block(block: str, prev: int, run: int) -> tuple[int, int, int, int]:
    """Count one block; `prev` and `run` carry the class and letter run across blocks."""
    class_bytes = _classify(block)
    cls = np.frombuffer(class_bytes, dtype=np.uint8)
    first = class_bytes[0]
    milli = int(FIRST_COST[first] if prev < 0 else PAIR_COST[prev * N_CLASSES + first])
    # Pair codes fit in uint8 (14 * 15 + 14 = 224); a histogram of them prices the block.
    pairs = np.bincount(cls[:-1] * np.uint8(N_CLASSES) + cls[1:], minlength=N_CLASSES**2)
    milli += int(pairs @ PAIR_COST)
    cjk = int(first >= HAN) + int(pairs.reshape(N_CLASSES, N_CLASSES)[:, HAN:].sum())

    letter_bytes = class_bytes.translate(_LETTER_TRANSLATION)  # 1 for a letter, else 0
    leading_letters = letter_bytes.find(0)
    if leading_letters < 0:
        leading_letters = len(block)
    # Cheap byte searches first: most text has no run of 17 letters at all.
    if run + leading_letters > LONG_RUN or _LONG_RUN_PATTERN in letter_bytes:
        letters = np.frombuffer(letter_bytes, dtype=np.bool_)
        milli += LONG_RUN_RATE * _count_long_run_letters(letters, run)
    # Length of the letter run at the end of the block, carried into the next one.
    last_non_letter = letter_bytes.rfind(0)
    run = run + len(block) if last_non_letter < 0 else len(block) - 1 - last_non_letter
    return milli, cjk, class_bytes[-1], run


def _count_long_run_letters(letters: npt.NDArray[np.bool_], run: int) -> int:
    """Count letters preceded by at least LONG_RUN letters (`run` carried from before)."""
    if run:
        carried = np.ones(min(run, LONG_RUN), dtype=bool)
        letters = np.concatenate((carried, letters))
    # After the loop, window[i] holds when letters[i : i + 16] are all letters: each step
    # doubles the width of the all-letters window with one vectorised AND.
    window = letters
    for width in (1, 2, 4, 8):
        window = window[width:] & window[:-width]
    return int(np.count_nonzero(window[1:] & window[:-1]))


def count_text_tokens(text: str) -> int:
    """Estimate the tokens of `text` (see the module docstring for the model)."""
    if len(text) < _SHORT_TEXT:
        return _count_short(text)
    milli = cjk = run = 0
    prev = -1
    for start in range(0, len(text), _BLOCK):
        block_milli, block_cjk, prev, run = _count_block(text[start : start + _BLOCK], prev, run)
        milli += block_milli
        cjk += block_cjk
    return _finish(cjk, milli)


_BATCH_CHARS = 1 << 22
"""Texts are counted together in batches of about this many characters."""


def count_texts_tokens(texts: list[str]) -> list[int]:
    """Estimate the tokens of each text; equal to `count_text_tokens` on each, faster.

    Many small texts (candidate lines, messages) are joined and classified in one numpy
    pass; each text's charges are then summed over its own span, with its first character
    priced as a text start and letter runs cut at its boundaries.
    """
    counts = [0] * len(texts)
    batch: list[int] = []
    size = 0
    for i, text in enumerate(texts):
        if len(text) >= _BLOCK:
            counts[i] = count_text_tokens(text)
        elif text:
            batch.append(i)
            size += len(text)
            if size >= _BATCH_CHARS:
                _count_batch(texts, batch, counts)
                batch, size = [], 0
    if batch:
        _count_batch(texts, batch, counts)
    return counts


def _count_batch(texts: list[str], batch: list[int], counts: list[int]) -> None:
    joined = "".join(texts[i] for i in batch)
    cls = np.frombuffer(_classify(joined), dtype=np.uint8)
    lengths = np.fromiter((len(texts[i]) for i in batch), dtype=np.intp, count=len(batch))
    starts = np.concatenate(([0], np.cumsum(lengths[:-1])))

    cost = np.empty(len(cls), dtype=np.int64)
    np.take(PAIR_COST, cls[:-1] * np.uint8(N_CLASSES) + cls[1:], out=cost[1:])  # take: 2x indexing
    cost[starts] = FIRST_COST[cls[starts]]  # each text starts afresh

    letters = np.frombuffer(cls.tobytes().translate(_LETTER_TRANSLATION), dtype=np.bool_)
    if letters.size > LONG_RUN:
        window = letters
        for width in (1, 2, 4, 8):
            window = window[width:] & window[:-width]
        long_positions = np.flatnonzero(window[1:] & window[:-1]) + LONG_RUN
        if long_positions.size:
            # A run counts only within its own text: its 17 letters must follow the start.
            own_start = starts[np.searchsorted(starts, long_positions, side="right") - 1]
            cost[long_positions[long_positions - own_start >= LONG_RUN]] += LONG_RUN_RATE

    milli = np.add.reduceat(cost, starts)
    if joined.isascii():
        cjk = np.zeros(len(batch), dtype=np.int64)
    else:
        cjk = np.add.reduceat((cls >= HAN).astype(np.int64), starts)
    for i, m, c in zip(batch, milli.tolist(), cjk.tolist(), strict=True):
        counts[i] = _finish(c, m)
