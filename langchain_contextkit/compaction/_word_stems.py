"""The stems of a word list: a part of every match, found by a substring test.

The cold fold (`_fact_bound`) skips a word list's regular expression where none of the
list's stems occurs in a text: a few substring tests cost far less than the expression.
The stems are read off the word lists' own patterns (`facts`), so a word added there is
covered here without a second list to keep in step: each alternative of a pattern gives
its longest run of characters that every match of it holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["pattern_stems"]

_QUANTIFIERS = "?*{"
"""What makes the character before it optional (`+` keeps it: at least once)."""
_SPECIAL = "\\()[]|.^$+?*{}"


def pattern_stems(pattern: str) -> tuple[str, ...] | None:
    r"""A stem of each alternative of `pattern` (lower case), or None when one has none.

    Understands what the word lists are written with: alternatives, groups (optional or
    not), escapes such as ``\b`` and ``\w``, character classes and quantifiers. An
    alternative that is one group is read through it; otherwise its longest run of plain
    characters outside any group, escape, class or optional character is its stem.

    Example:
        ```python
        from langchain_contextkit.compaction._word_stems import pattern_stems

        assert pattern_stems(r"\b(?:agreed?|go(?:ing)? with|conclu\w+)\b|决定") == (
            "agree",
            " with",
            "conclu",
            "决定",
        )
        assert pattern_stems(r"\w+|x") is None  # no plain character in the first
        ```
    """
    stems: list[str] = []
    for alternative in _alternatives(pattern):
        inner = _only_group(_unanchored(alternative))
        found = pattern_stems(inner) if inner is not None else _longest_run(alternative)
        if not found:
            return None
        stems += found if isinstance(found, tuple) else [found]
    return tuple(stems)


def _alternatives(pattern: str) -> list[str]:
    """`pattern` split at its top-level bars."""
    out, start = [], 0
    for i, char, depth in _outside_classes(pattern):
        if char == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
    out.append(pattern[start:])
    return out


def _outside_classes(pattern: str, i: int = 0) -> Iterator[tuple[int, str, int]]:
    """Each character from `i` that is neither escaped nor in a class.

    Yields its index, itself, and how deep in groups the pattern is after it.
    """
    depth = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i = _class_end(pattern, i)
            continue
        depth += (char == "(") - (char == ")")
        yield i, char, depth
        i += 1


def _unanchored(alternative: str) -> str:
    """`alternative` without the word boundaries at its ends."""
    while alternative.startswith("\\b"):
        alternative = alternative[2:]
    while alternative.endswith("\\b") and not alternative.endswith("\\\\b"):
        alternative = alternative[:-2]
    return alternative


def _only_group(alternative: str) -> str | None:
    """The inside of `alternative` when it is one group and nothing else, else None."""
    if not alternative.startswith("(") or _group_end(alternative, 0) != len(alternative):
        return None
    inside = alternative[1:-1]
    return inside[2:] if inside.startswith("?:") else None if inside.startswith("?") else inside


def _longest_run(alternative: str) -> str:
    """The longest run of plain characters every match of `alternative` holds in a row."""
    runs, run, i = [], "", 0
    while i < len(alternative):
        char = alternative[i]
        if char in _SPECIAL:
            runs.append(run)
            run = ""
            if char == "\\":
                i += 2
            elif char == "(":
                i = _group_end(alternative, i)
            elif char == "[":
                i = _class_end(alternative, i)
            else:
                i += 1
            i = _after_quantifier(alternative, i)
            continue
        i += 1
        if i < len(alternative) and alternative[i] in _QUANTIFIERS:
            runs.append(run)  # an optional character ends the run before it
            run = ""
            i = _after_quantifier(alternative, i)
        else:
            run += char
    runs.append(run)
    return max(runs, key=len).lower()


def _after_quantifier(pattern: str, i: int) -> int:
    """Past a quantifier at `i` (and its lazy or possessive mark), if there is one."""
    if i < len(pattern) and pattern[i] == "{":
        i = pattern.index("}", i) + 1
    elif i < len(pattern) and pattern[i] in "?*+":
        i += 1
    if i < len(pattern) and pattern[i] in "?+":
        i += 1
    return i


def _group_end(pattern: str, i: int) -> int:
    """Past the group that opens at `i`."""
    return next((j + 1 for j, _, depth in _outside_classes(pattern, i) if depth == 0), len(pattern))


def _class_end(pattern: str, i: int) -> int:
    """Past the character class that opens at `i`."""
    i += 2 if pattern[i + 1 : i + 2] == "]" else 1  # a "]" first is a character
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1
