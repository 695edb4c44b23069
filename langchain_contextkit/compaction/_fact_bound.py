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
import string

from langchain_contextkit.compaction._word_stems import pattern_stems
from langchain_contextkit.compaction.extractive import (
    _DECISION_WEIGHT,
    _MARKUP_START,
    _MAX_FACT_WEIGHT,
    _STATED_WEIGHT,
)
from langchain_contextkit.compaction.facts import (
    _DECIDED,
    _DECISION,
    has_decision,
    is_decided,
    strip_markup,
)

__all__ = ["FactBound", "First", "first_bound", "first_facts", "score_bound", "tight_bound"]


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
        "_marked",
        "_name",
        "_named",
        "_numbers",
        "_spaced",
        "_text",
        "_within",
    )

    def __init__(
        self,
        text: str,
        label: str,
        *,
        spaced: bool = False,
        within: FactBound | None = None,
        first: First | None = None,
    ) -> None:
        """Bound `text`, spoken by `label` (as `extractive._score` reads it).

        `spaced`, `within`: as `first_facts` reads them. `first`: what `first_facts` found
        in `text` already (with the same `spaced` and `within`): not searched again.
        """
        clean, hidden, numbers, name = (
            first_facts(text, spaced=spaced, within=within) if first is None else first
        )
        self._text = clean
        self._spaced = spaced
        self._label = label
        self._marked = hidden
        self._within = within
        self._numbers = numbers
        self._name = name
        self._decision: int | None = None  # unknown yet: 0 or `_DECISION_WEIGHT`
        self._named: int | None = None  # unknown yet: 0 or `_name`
        self._decided: bool | None = None  # unknown yet (an assistant's decision)
        if hidden and spaced:  # the most each word family may add: never searched
            self._decision, self._named, self._decided = _DECISION_WEIGHT, self._name, True

    def holds(self) -> tuple[bool, int, int]:
        """Whether the text has markup, what its numbers and names may add (for a sentence)."""
        return self._marked, self._numbers, self._name

    def absent(self) -> tuple[bool, bool, bool]:
        """Whether a search found no decision of an assistant's, no decision, no name."""
        return self._decided is False, self._decision == 0, self._named == 0

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
            # What the whole text (`within`) was searched for and does not hold, this
            # text does not hold either: the search is not run again.
            within = (False, False, False) if self._within is None else self._within.absent()
            # A word list is searched only where one of its stems occurs (in the text as
            # it is: a stem of several words allows any whitespace between them).
            text = self._text
            if label == "Assistant" and decided is None:
                # Worth the most: searched first.
                self._decided = (
                    not within[0] and _may_hold(_DECIDED_STEMS, text) and is_decided(self._clean)
                )
            elif decision is None:
                found = (
                    not within[1] and _may_hold(_DECISION_STEMS, text) and has_decision(self._clean)
                )
                self._decision = _DECISION_WEIGHT if found else 0
            elif named is None:
                # No whitespace in a name: the text need not be collapsed for it.
                found = not within[2] and _name_hint(text)
                self._named = self._name if found else 0
            else:
                return high  # everything known: the two are one


First = tuple[str, bool, int, int]
"""What the first searches find in a text: the text the word searches read (markup
stripped), whether it has markup, what its numbers and its names may add to a score."""


def first_facts(text: str, *, spaced: bool = False, within: FactBound | None = None) -> First:
    """The first, quick searches of `text` (markup, digits, ASCII): `FactBound` refines them.

    `spaced`: `text` may hold runs of whitespace that its sentences do not (a whole
    message); the searches for words (decisions) then read it collapsed, one space
    between words, as a sentence holds them. A spaced text with markup is not stripped
    (its sentences are, one by one): its digits bound theirs, since markup becomes a
    space and never joins two digits, but words may join, so its decisions and names
    are taken as found, never searched.

    `within`: the bound of a spaced text that `text` is a sentence of. What a search did
    not find in it is not in `text` either (every family's match is a run without
    whitespace, and stripping markup never joins two runs): that search is not run
    again. The bound is the same as without it, only cheaper.
    """
    # What the whole text holds, read from its own slots (the same class).
    marked, numbers, name = (True, _LONG, 2) if within is None else within.holds()
    hidden = marked and _MARKUP_START.search(text) is not None
    clean = strip_markup(text) if hidden and not spaced else text
    digit = bool(numbers) and _DIGIT.search(clean) is not None  # none in the whole text
    long = digit and numbers == _LONG and _long_number(clean)
    numbers = (_LONG if long else 1) if digit else 0
    if name == 1:
        pass  # the whole text is ASCII and holds no name with a digit
    # Whitespace apart (a spaced text's may not be ASCII), the text is ASCII or not.
    elif not (clean.isascii() or (spaced and _NOT_ASCII.search(clean) is None)):
        name = 2  # a name's digit may be any Unicode digit
    else:
        name = 2 if digit and _name_digit_hint(clean) else 1
    return clean, hidden, numbers, name


def first_bound(first: First, label: str) -> int:
    """The bound before any word is searched: `FactBound.at` of a level above all scores."""
    return _bound_of(first[2] + _DECISION_WEIGHT + first[3], label, decided=None)


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
_NOT_ASCII = re.compile(r"[^\x00-\x7f\s]")
"""A character outside ASCII that is not whitespace (`\\s` is what `str.split` splits at)."""
_LONG = 3
"""What numbers of more than two characters may add."""


def _may_hold(stems: _Stems, text: str) -> bool:
    """Whether one of `stems` occurs in `text`, letter case and whitespace aside.

    Every match of a word list (`facts.is_decided`, `facts.has_decision`) holds one of
    its stems (its words, one space apart in the collapsed text the list reads), and a
    few substring tests are far cheaper than the list's pattern: where they find none,
    it cannot match. In ASCII text, a stem of several words is taken as found where each
    of its words is. Elsewhere one pattern finds the stems (it skips to their first
    letters, rare there); letter case aside, the word lists also take four letters
    outside ASCII for ASCII ones: they are mapped to them first.
    """
    lowered = text.lower()
    if text.isascii():
        words, phrases, _ = stems
        holds = lowered.__contains__
        return any(map(holds, words)) or any(all(map(holds, p)) for p in phrases)
    # "İ" lowers to "i" and a combining dot; the dotless "ı" and the long "ſ" stay.
    lowered = lowered.replace("\u0307", "").replace("\u0131", "i").replace("\u017f", "s")
    return stems[2].search(lowered) is not None


_Stems = tuple[tuple[str, ...], tuple[tuple[str, ...], ...], re.Pattern[str]]
"""A word list's English stems of one word, those of several (as their words), and a
pattern finding any of its stems."""


def _stems(stems: tuple[str, ...] | None) -> _Stems:
    """The `_Stems` of a word list's stems (`pattern_stems`); None: every text may match."""
    if stems is None:  # an alternative without a stem: the list is always searched
        return ("",), (), re.compile("")
    stems = tuple(" ".join(stem.split()) for stem in stems)
    english = [stem for stem in stems if stem.isascii()]
    words = tuple(stem for stem in english if " " not in stem)
    phrases = tuple(tuple(stem.split()) for stem in english if " " in stem)
    either = (r"\s+".join(map(re.escape, stem.split(" "))) for stem in stems)
    return words, phrases, re.compile("|".join(either))


# Read off the word lists' own patterns: a word added there is covered here.
_DECIDED_STEMS = _stems(pattern_stems(_DECIDED.ascii.pattern))
"""A part of every match of `facts.is_decided`."""
_DECISION_STEMS = _stems(pattern_stems(_DECISION.ascii.pattern))
"""A part of every match of `facts.has_decision`."""


_LONG_NUMBER = re.compile(r"\d(?:[\d.,:/\-]\d|\d%)")
_CURRENCY_NUMBER = re.compile(r"[$€£¥]\d")
"""Where `facts.fact_tokens` may find a number of more than two characters: every such
number holds one of these (two searches: each starts at one kind of character, which
the regex engine finds far faster than a search whose branches start differently)."""


def _long_number(text: str) -> bool:
    """Whether `text` may hold a number of more than two characters (`_LONG_NUMBER`)."""
    return _LONG_NUMBER.search(text) is not None or _CURRENCY_NUMBER.search(text) is not None


def _name_digit_hint(text: str) -> bool:
    """In ASCII text, True wherever `facts.fact_tokens` finds a name that carries a digit.

    Such a name runs from a letter through letters and separators to its first digit, so
    its last letter is followed by separators only and a digit; or it is a code span.
    Letters, digits and separators are mapped to one character each and the separators
    dropped: a letter directly before a digit is then a plain substring search, several
    times cheaper than the pattern that says the same (`test_fact_bound.py` compares them).
    (Whitespace that is not ASCII passes through unmapped: it is none of the three.)
    """
    return "`" in text or "ad" in text.translate(_CLASSES).replace("s", "")


_CLASSES = str.maketrans(
    {
        **dict.fromkeys(range(128), " "),
        **dict.fromkeys(map(ord, string.ascii_letters), "a"),
        **dict.fromkeys(map(ord, string.digits), "d"),
        **dict.fromkeys(map(ord, "_-./#:@"), "s"),
    }
)
"""Every ASCII character as its class: a letter "a", a digit "d", a separator "s"."""


def _name_hint(text: str) -> bool:
    """True in every text where `facts.has_identifier` finds a name, at a fraction of its cost.

    Found: a word character, separators and a word character (a path, snake_case, an
    id); a letter and a digit or a capital (an id, camelCase, two capitals); a code
    span's backtick. Each is searched from the character it cannot do without: the
    separator (rare), the backtick; in ASCII text, letters and digits are mapped to one
    character per class and their pairs found as substrings.
    """
    if "`" in text or _SEPARATED.search(text) is not None:
        return True
    if text.isascii():
        classes = text.translate(_CASES)
        return "ld" in classes or "lu" in classes or "ud" in classes or "uu" in classes
    return _LETTER_PAIR.search(text) is not None


_SEPARATED = re.compile(r"[_\-./#:@](?<=\w[_\-./#:@])[_\-./#:@]*\w")
"""A word character, separators, a word character: found from its first separator."""
_LETTER_PAIR = re.compile(r"[A-Za-z][\dA-Z]")
_CASES = str.maketrans(
    {
        **dict.fromkeys(range(128), " "),
        **dict.fromkeys(map(ord, string.ascii_lowercase), "l"),
        **dict.fromkeys(map(ord, string.ascii_uppercase), "u"),
        **dict.fromkeys(map(ord, string.digits), "d"),
    }
)
"""Every ASCII character as its class: a lower-case letter "l", a capital "u", a digit "d"."""
