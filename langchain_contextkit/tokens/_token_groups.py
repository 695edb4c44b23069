"""The estimator's named groups, defined once: script groups and class transitions.

`_token_estimate` prices with them, `bench/derive_group_tiers.py` derives each code point's
group from `group_of`, and `bench/fit_token_weights.py` fits one weight per transition
group (`transition_groups`). Keeping the definitions here means a table the bench derives
and the model that reads it cannot disagree on what a group holds.
"""

from __future__ import annotations

import unicodedata

__all__ = ["GROUPS", "SCRIPT_BLOCKS", "group_of", "transition_groups"]

GROUPS = (
    *("arabic", "hebrew", "armenian", "indic", "sinhala", "sea", "letters"),
    *("mark", "symbol"),
)
"""Every character outside the fitted classes, by script group, then by its tier (how
many tokens the dearer of cl100k and o200k spends on it alone, 1-4)."""
SCRIPT_BLOCKS: dict[str, tuple[tuple[int, int], ...]] = {
    "arabic": ((0x600, 0x700), (0x750, 0x780), (0x870, 0x900), (0xFB50, 0xFE00), (0xFE70, 0xFF00)),
    "hebrew": ((0x590, 0x600), (0xFB1D, 0xFB50)),
    "armenian": ((0x530, 0x590), (0xFB13, 0xFB18)),
    "indic": ((0x900, 0xD80), (0xA8E0, 0xA900), (0x1CD0, 0x1D00)),
    # Sinhala alone: both vocabularies hold fewer of its merges than of the other Indic scripts'.
    "sinhala": ((0xD80, 0xE00), (0x111E0, 0x11200)),
    "sea": (
        (0xE00, 0x1000),
        (0x1000, 0x10A0),
        (0x1780, 0x1800),
        (0x19E0, 0x1A00),
        (0x1A20, 0x1AB0),
    ),
}
"""The blocks (first, end) of the script groups; other code points fall to the last three
groups by their Unicode category."""


def group_of(cp: int) -> int:
    """The index in `GROUPS` of code point `cp`.

    A code point of a script block takes its script's group; any other letter "letters",
    a combining mark or format character (ZWJ, variation selectors) "mark", and everything
    else (punctuation, box drawing, emoji, private use, unassigned) "symbol", by the
    Unicode category of this Python's `unicodedata`.
    """
    for name, blocks in SCRIPT_BLOCKS.items():
        if any(first <= cp < last for first, last in blocks):
            return GROUPS.index(name)
    category = unicodedata.category(chr(cp))
    if category.startswith("L"):
        return GROUPS.index("letters")
    if category.startswith("M") or category == "Cf":
        return GROUPS.index("mark")
    return GROUPS.index("symbol")


def transition_groups(  # noqa: PLR0917 - the class numbers live in the model's module
    classes: dict[str, int],
    lowers: range,
    cjk: range,
    scripts: bytes,
    latin: int,
    alphabet: int,
) -> dict[str, tuple[tuple[int, int], ...]]:
    """Each named transition with the (previous, current) class pairs it charges.

    Args:
        classes: the class numbers by name (``space``, ``upper``, ``digit``, ``punct``).
        lowers: the classes of the lower-case letters (one per letter).
        cjk: the CJK classes (a space before any of them is a token of its own).
        scripts: the letter script of every class, the START class last.
        latin: the script number of Latin letters.
        alphabet: the script number of the two-byte alphabets (Cyrillic, Greek).
    """
    space, upper = classes["space"], classes["upper"]
    digit, punct = classes["digit"], classes["punct"]
    n = len(scripts) - 1  # classes; the last entry is START's

    def word(script: int) -> tuple[tuple[int, int], ...]:
        # A word starts: a letter of the script after anything that is not one.
        return tuple(
            (p, c)
            for p in range(n + 1)
            if scripts[p] != script
            for c in range(n)
            if scripts[c] == script
        )

    return {
        "lower->upper": tuple((lower, upper) for lower in lowers),  # camelCase, base64
        "digit->letter": (*((digit, lower) for lower in lowers), (digit, upper)),
        "upper->digit": ((upper, digit),),  # rare outside base64, a costly cut there
        "space->digit": ((space, digit),),  # cl100k never joins a space to a number
        "space->punct": ((space, punct),),
        "punct->space": ((punct, space),),
        "punct->digit": ((punct, digit),),
        "punct->lower": tuple((punct, lower) for lower in lowers),
        "punct->upper": ((punct, upper),),
        "space->cjk": tuple((space, c) for c in cjk),  # the space before CJK is a token
        "latin word": word(latin),
        "alphabet word": word(alphabet),
    }
