"""How `count_tokens` picks the letter rates of each chunk of a text: its regime.

A text is read in chunks of `CHUNK` characters; the evidence of the `CHUNKS_BACK` chunks
before a chunk picks its regime: dear (letter pairs of a language cl100k cuts every two or
three letters), code (the punctuation of source code), costly (letters of the languages
cl100k cuts every three or four letters) or cheap (English, Russian: words held whole).
`_token_estimate` builds the tables; `_token_count` reads them.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "CHUNK",
    "CHUNKS_BACK",
    "CODE_CHARS",
    "CODE_LETTER_PERCENT",
    "CODE_REGIME",
    "CODE_THRESHOLD",
    "DEAR_ALPHABET_RATE",
    "DEAR_LETTER_RATE",
    "DEAR_THRESHOLD",
    "REGIMES",
    "SHORT_U_EVIDENCE",
    "THRESHOLD",
    "with_extra_regimes",
]

CHUNK = 32
"""Texts are read in chunks of this many characters (from the text's start) for the regime."""
CHUNKS_BACK = 4
"""A chunk's regime is decided by the evidence of this many chunks before it."""
THRESHOLD = 16
"""Evidence (1/16 nat units) above which those chunks read as a costly language."""
REGIMES = 4
"""Cheap, costly, dear and code. A dear chunk follows chunks whose letter pairs read as a
language cl100k cuts every two or three letters: Welsh (``dd``, ``ll``, ``wy``, ``yw``),
which the letters alone read as English (``w``, ``y``, ``h``), or Belarusian (``ў``),
which they read as Russian (``ы``, ``э``). It pays the costly rates plus
`DEAR_LETTER_RATE` for every Latin letter and `DEAR_ALPHABET_RATE` for every other one."""
CODE_REGIME = 3
"""A code chunk follows chunks dense in the punctuation of source code (`CODE_CHARS`): its
Latin letters are mostly identifiers, which cl100k and o200k hold in fewer pieces than
prose words of their length, so their stride rates are the cheap ones times
`CODE_LETTER_PERCENT` / 100."""
CODE_CHARS = ";{}=*>_"
"""Characters of class CODE_PUNCT: frequent in C, JavaScript and Python, rare in prose and
in roff."""
CODE_THRESHOLD = 10
"""CODE_PUNCT characters in the CHUNKS_BACK chunks before, from which on a chunk is code."""
CODE_LETTER_PERCENT = 50
"""Picked on the fit half from 0, 25, 40, 50 with CODE_THRESHOLD from 6 to 16: the least
mean absolute error on C source that leaves shell/Perl's lowest document above -15%."""
DEAR_THRESHOLD = 40
"""Pair evidence (`_PAIR_EVIDENCE`, 1/4 nat) of the CHUNKS_BACK chunks before, above which a
chunk is dear."""
DEAR_LETTER_RATE = 100
"""Milli-tokens every letter of a dear chunk pays on top of the costly rates (picked on the
fit half from 60, 80, 100, 120: the least mean absolute error on Welsh)."""
SHORT_U_EVIDENCE = 40
"""Pair evidence of every pair that ends in Belarusian ``ў``: one in the CHUNKS_BACK chunks
before makes a chunk dear."""
DEAR_ALPHABET_RATE = 140
"""Milli-tokens every letter of another alphabet (Cyrillic) pays in a dear chunk (picked on
the fit half from 40 to 160: the least mean absolute error on Belarusian, 120 and 140 tied;
the dearer is the safer)."""


def with_extra_regimes(
    letter_rate: tuple[int, ...], dear: tuple[int, int], code_percent: int
) -> npt.NDArray[np.int64]:
    """The letter rates by script, regime (of `REGIMES`) and stride.

    The dear regime's are the costly ones plus `dear` (Latin, other alphabets) at stride 1
    (every letter); the code regime's are the cheap ones for Latin letters, their strides
    times `code_percent` / 100, and the costly ones for the others.
    """
    fitted = np.array(letter_rate, dtype=np.int64).reshape(2, 2, -1)
    dear_rates = fitted[:, 1].copy()
    dear_rates[:, 1] += dear
    # Code: Latin letters at the cheap rates, strides damped; other letters (in strings and
    # comments) at the costly ones, as most alphabets but Russian's are.
    damped = fitted[0, 0] * np.array([100, *[code_percent] * (fitted.shape[2] - 1)]) // 100
    code_rates = np.stack([damped, fitted[1, 1]])
    regimes = [fitted, dear_rates[:, None], code_rates[:, None]]
    return np.concatenate(regimes, axis=1).reshape(-1)
