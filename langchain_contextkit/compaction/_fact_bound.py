"""Bounds on a sentence's extractive score, refined only as far as a reader needs.

The cold fold (`_cold_fold`) reads a long span in order of the best score each message
and sentence could reach. What each family of facts may add to a score is bounded on its
own, from searches far cheaper than scoring; a text's bound is refined one family at a
time, and only while that decides whether it can reach the level being read.
`FactBound` remembers what it has searched, so a text that waits for a lower level is
never searched again for the same family.
"""

from __future__ import annotations

import re

from langchain_contextkit.compaction.extractive import (
    _DECISION_WEIGHT,
    _MARKUP_START,
    _MAX_FACT_WEIGHT,
    _STATED_WEIGHT,
)
from langchain_contextkit.compaction.facts import has_decision, is_decided, strip_markup

__all__ = ["FactBound", "score_bound", "tight_bound"]


def score_bound(sentence: str, label: str) -> int:
    """At least `extractive._score(sentence, label)`, from one to three quick searches.

    Facts weigh at most 5, and at most 1 without a digit (a name); a decision adds 2;
    markup is assumed to hide both (stripping it can make a word of a decision).
    """
    found = _MARKUP_OR_DIGIT.search(sentence)  # None: neither markup nor a digit
    if found is not None:
        facts = _MAX_FACT_WEIGHT + _DECISION_WEIGHT  # the decision search is not worth it
    else:
        facts = 1 + (_DECISION_WEIGHT if has_decision(sentence) else 0)
    if label == "User":
        return facts + _STATED_WEIGHT
    if label == "Assistant":
        markup = found is not None and _MARKUP_START.search(sentence) is not None
        if markup or is_decided(sentence):
            return facts + _STATED_WEIGHT
    return facts - 1 if label.startswith("Tool") else facts


_MARKUP_OR_DIGIT = re.compile(r"[\\<&]|\d")
"""One search for the two things that lift a sentence's bound most (`_MARKUP_START`)."""


class FactBound:
    """What is known so far of one text's families of facts, and the bound it gives.

    What each family may add is bounded on the text without its markup (what the score
    reads): a number of more than two characters 3, else a digit 1; a decision 2; a name
    2 when one may carry a digit, else 1. The digit searches run at once (they are
    cheap); an assistant's decision, decisions and names only when `at` needs them, each
    at most once.
    """

    __slots__ = (
        "_decided",
        "_decision",
        "_label",
        "_name",
        "_named",
        "_numbers",
        "_spaced",
        "_text",
    )

    def __init__(self, text: str, label: str, *, spaced: bool = False) -> None:
        """Bound `text`, spoken by `label` (as `extractive._score` reads it).

        `spaced`: `text` may hold runs of whitespace that its sentences do not (a whole
        message); the searches for words (decisions) then read it collapsed, one space
        between words, as a sentence holds them. A spaced text with markup is not
        stripped (its sentences are, one by one): its digits bound theirs, since markup
        becomes a space and never joins two digits, but words may join, so its
        decisions and names are taken as found, never searched.
        """
        hidden = _MARKUP_START.search(text) is not None
        clean = strip_markup(text) if hidden and not spaced else text
        digit = _DIGIT.search(clean) is not None
        self._text = clean
        self._spaced = spaced
        self._label = label
        self._numbers = (3 if _LONG_NUMBER.search(clean) else 1) if digit else 0
        # Whitespace apart (a spaced text's may not be ASCII), the text is ASCII or not.
        ascii_only = clean.isascii() or (spaced and "".join(clean.split()).isascii())
        if not ascii_only:
            self._name = 2  # a name's digit may be any Unicode digit
        elif digit and _NAME_DIGIT_HINT.search(clean) is not None:
            self._name = 2
        else:
            self._name = 1
        self._decision: int | None = None  # unknown yet: 0 or `_DECISION_WEIGHT`
        self._named: int | None = None  # unknown yet: 0 or `_name`
        self._decided: bool | None = None  # unknown yet (an assistant's decision)
        if hidden and spaced:  # the most each word family may add: never searched
            self._decision, self._named, self._decided = _DECISION_WEIGHT, self._name, True

    @property
    def _clean(self) -> str:
        """The text the word searches read (collapsed once, when first needed)."""
        if self._spaced:
            self._text, self._spaced = " ".join(self._text.split()), False
        return self._text

    def at(self, level: int) -> int:
        """At least the score, as far as `level`.

        Returns:
            The bound when it falls below `level`, else some value >= `level`; only the
            searches that decide between the two are run.
        """
        label, numbers = self._label, self._numbers
        while True:
            decision, named, decided = self._decision, self._named, self._decided
            facts = numbers + (_DECISION_WEIGHT if decision is None else decision)
            high = _bound_of(
                facts + (self._name if named is None else named), label, decided=decided
            )
            if high < level:
                return high
            low = _bound_of(numbers + (decision or 0) + (named or 0), label, decided=bool(decided))
            if low >= level:
                return low
            if label == "Assistant" and decided is None:
                self._decided = is_decided(self._clean)  # worth the most: searched first
            elif decision is None:
                self._decision = _DECISION_WEIGHT if has_decision(self._clean) else 0
            elif named is None:
                self._named = self._name if _NAME_HINT.search(self._clean) else 0
            else:
                return high  # everything known: the two are one


def tight_bound(sentence: str, label: str, level: int) -> int:
    """`FactBound(sentence, label).at(level)`: nearer to the score than `score_bound`."""
    return FactBound(sentence, label).at(level)


def _bound_of(facts: int, label: str, *, decided: bool | None) -> int:
    """`_score`'s shape for facts that weigh at most `facts` (`decided` None: may be)."""
    if label == "User":
        return facts + _STATED_WEIGHT if facts else 1
    if label == "Assistant" and decided is not False:
        return facts + _STATED_WEIGHT
    return max(0, facts - 1) if label.startswith("Tool") else facts


_DIGIT = re.compile(r"\d")
_NAME_HINT = re.compile(r"\w[_\-./#:@]+\w|[A-Za-z]\d|[a-z][A-Z]|[A-Z][A-Z]|`")
"""Found in every text where `facts.has_identifier` finds a name, at a third of its cost
(no backtracking): a word character, separators and a word character (a path, snake_case,
an id); a letter and a digit; camelCase; two capitals; a code span's backtick."""
_NAME_DIGIT_HINT = re.compile(r"(?<![A-Za-z])[A-Za-z][A-Za-z_\-./#:@]*+\d|`")
"""In ASCII text, found wherever `facts.fact_tokens` finds a name that carries a digit:
such a name runs from a letter through letters and separators to its first digit (the
run starts where the letters before it do, and never gives back what it took), or is a
code span."""
_LONG_NUMBER = re.compile(r"[$€£¥]\d|\d[\d.,:/\-]\d|\d\d%")
"""Where `facts.fact_tokens` may find a number of more than two characters: every such
number holds one of these."""
