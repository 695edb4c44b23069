"""What counts as a fact in text: numbers, dates, identifiers, decisions and conclusions.

One set of deterministic rules, shared by the extractive summariser (which keeps the
sentences that carry facts) and the plan reducer (which checks that a summary kept every
fact of what it summarised, and re-inserts what it dropped).
"""

from __future__ import annotations

import bisect
import re

__all__ = [
    "FactIndex",
    "conclusion_sentences",
    "fact_tokens",
    "has_decision",
    "has_identifier",
    "has_number",
    "is_markup_line",
    "missing_facts",
    "normalised",
    "salient_facts",
    "split_sentences",
    "strip_markup",
]

# Sentence ends: Latin punctuation followed by whitespace, CJK punctuation anywhere, and
# line breaks.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])|\n+")

# Numbers with their inner separators, so "2024-03-05", "1,250.50", "12:30" and "85%" stay
# one token each; a leading currency sign is kept.
_NUMBER = re.compile(r"[$€£¥]?\d+(?:[.,:/\-]\d+)*%?")
_IDENTIFIER = re.compile(
    r"[A-Za-z][\w]*[_\-./#:@][\w\-./#:@]*\w"  # snake_case, paths, urls, ids like INV-88213
    r"|[A-Za-z]+\d[\w]*"  # words with digits: W7, v2, sha256
    r"|[a-z]+[A-Z]\w*"  # camelCase
    r"|\b[A-Z]{2,}[\w]*"  # ACRONYMS, CODES
    r"|`[^`]+`"  # code spans
)
_DECISION = re.compile(
    r"\b(decid\w*|decision|agreed?|conclu\w*|therefore|so we|must|will|shall|chose|chosen|"
    r"confirm\w*|resolv\w*|root cause|result\w*|because|fixed|approved|rejected|deadline|"
    r"plan\w*|next step)\b"
    r"|决定|结论|确认|因此|所以|必须|同意|原因|结果|计划|下一步|截止",
    re.IGNORECASE,
)
_CONCLUSION = re.compile(
    r"\b(conclu\w*|therefore|thus|hence|so we|decided|decision|root cause|in summary|"
    r"the answer is|confirmed|turns out|result is)\b"
    r"|结论|因此|所以|决定|确认|结果是|原因是",
    re.IGNORECASE,
)
_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_TRAILING_PUNCTUATION = ".,;:!?)]}'\""


# Typesetting that tools print verbatim (roff escapes of man-page sources, HTML tags and
# entities): the digits inside it ("\\fI2\\fR", "\\s-1") state nothing.
_MARKUP = re.compile(
    r"\\f(?:\(..|\[[^\]]*\]|.)"  # font changes: \fB \fI \fR \f(CW
    r"|\\[*n](?:\(..|\[[^\]]*\]|.)"  # strings and registers
    r"|\\s[+-]?\d+"  # size changes
    r"|\\\(..|\\\[[^\]]*\]"  # special characters
    r"|\\."  # any other escape
    r"|</?[A-Za-z][^<>]{0,80}>|&#?\w+;"  # HTML tags and entities
)
# A roff request or comment line (".TH LS 1 2024", ".\\\" text"): layout, not content.
_MARKUP_LINE = re.compile(r"^\s*(?:\.\s*[A-Za-z\\]{1,4}\b|\.\\\"|'\\\")")
_NOISE_TOKEN = re.compile(
    r"[/\\]"  # paths and URLs: a location, not a statement
    r"|^v?\d+(?:\.\d+){2,}$"  # version strings: 3.11.7
    r"|^[A-Za-z][\w-]*\.[a-z]{1,4}$"  # file names: menu.vim, ls.1
    r"|^[a-z]+\d+$"  # a word glued to its version: vim90, utf8
    r"|^[^\W\d_]+(?:[-.][^\W\d_]+)+\.?$"  # hyphenated or dotted words: block-size, z.B.
    r"|^[A-Z]{6,}$"  # a word in capitals (a man page's section headings): NAME, UNKNOWN
)


def strip_markup(text: str) -> str:
    """`text` without roff escapes, HTML tags and entities (their digits state nothing)."""
    return _MARKUP.sub(" ", text)


def is_markup_line(text: str) -> bool:
    """Whether `text` is a roff request or comment line (layout, not content)."""
    return _MARKUP_LINE.match(text) is not None


def salient_facts(text: str) -> list[str]:
    r"""The fact tokens of `text` that state something, markup and its digits left out.

    Numbers inside paths, markup, option syntax and version strings do not make a line a
    fact: a man page's ``\fI2\fR`` or ``vim90/menu.vim`` is not what a user asked to keep.

    Example:
        ```python
        from langchain_contextkit.compaction.facts import salient_facts

        print(salient_facts("Use \\fB--width\\fR=80 with vim90/menu.vim (v3.11.7)."))
        # ['80']
        print(salient_facts("The code for item-7 is 493021."))
        # ['item-7', '493021']
        ```
    """
    if is_markup_line(text):
        return []
    return [t for t in fact_tokens(strip_markup(text)) if not _NOISE_TOKEN.search(t)]


def split_sentences(text: str) -> list[str]:
    """Split text into sentences, whitespace collapsed; empty pieces are dropped."""
    pieces = (" ".join(piece.split()) for piece in _SENTENCE_END.split(text))
    return [piece for piece in pieces if piece]


def has_number(text: str) -> bool:
    """Whether `text` holds a digit (a number, date, amount, time, version)."""
    return _NUMBER.search(text) is not None


def has_identifier(text: str) -> bool:
    """Whether `text` holds an identifier (a code, path, URL, snake_case or camelCase)."""
    return _IDENTIFIER.search(text) is not None


def has_decision(text: str) -> bool:
    """Whether `text` states a decision, plan, cause or conclusion (English or Chinese)."""
    return _DECISION.search(text) is not None


def fact_tokens(text: str) -> list[str]:
    """The numbers, dates and identifiers in `text`, in order, each once.

    Example:
        ```python
        from langchain_contextkit.compaction.facts import fact_tokens

        print(fact_tokens("Invoice INV-88213 of $1,250.50 is due 2024-03-05 (see `pay_now`)."))
        # ['INV-88213', '$1,250.50', '2024-03-05', '`pay_now`']
        ```
    """
    found: dict[str, int] = {}
    starts: list[int] = []
    ends: list[int] = []
    for match in _IDENTIFIER.finditer(text):  # matches come in order, never overlapping
        starts.append(match.start())
        ends.append(match.end())
        _add(found, match)
    for match in _NUMBER.finditer(text):
        # The identifier starting last at or before this number is the only one that can
        # contain it: "88213" in "INV-88213" is not a fact of its own.
        at = bisect.bisect_right(starts, match.start()) - 1
        if at >= 0 and match.end() <= ends[at]:
            continue
        _add(found, match)
    return sorted(found, key=found.__getitem__)


def _add(found: dict[str, int], match: re.Match[str]) -> None:
    token = match.group().rstrip(_TRAILING_PUNCTUATION) or match.group()
    found.setdefault(token, match.start())


def conclusion_sentences(text: str) -> list[str]:
    """The sentences of `text` that state a conclusion or decision."""
    return [s for s in split_sentences(text) if _CONCLUSION.search(s)]


def normalised(text: str) -> str:
    """Case- and punctuation-blind form, for containment and near-duplicate checks."""
    return _NON_WORD.sub(" ", text.casefold()).strip()


def missing_facts(source: str, output: str) -> list[str]:
    """What `output` lost of `source`: fact tokens absent from it, then conclusions.

    A fact token is present when it occurs as a whole token of `output`; a conclusion when
    its normalised text does (see `FactIndex`). Used to re-insert what a summariser
    dropped.

    Example:
        ```python
        from langchain_contextkit.compaction.facts import missing_facts

        source = "Disk usage hit 92% on db-7 at 03:10. We concluded the cron job leaks."
        print(missing_facts(source, "The database host ran out of disk at 03:10."))
        # ['92%', 'db-7', 'We concluded the cron job leaks.']
        ```
    """
    return FactIndex(output).missing(source)


class FactIndex:
    """What a text states, indexed once, to check many sources against it cheaply.

    A fact token counts as present only as a whole token of the text ("12" is not kept by
    "TKT-4812", nor "0" by "2050"); a conclusion when its normalised text occurs in the
    normalised text. Building the index is linear in the text; each check is linear in
    the source, so checking n sources against one summary stays linear overall.

    Example:
        ```python
        from langchain_contextkit.compaction.facts import FactIndex

        index = FactIndex("Filed as TKT-4812 on 2025-01-02.")
        print(index.missing("Latency was 12 ms; filed as TKT-4812."))
        # ['12']
        ```
    """

    def __init__(self, text: str) -> None:
        """Index `text`."""
        self.tokens = set(fact_tokens(text))
        self.flat = normalised(text)

    def missing(self, source: str) -> list[str]:
        """The fact tokens and conclusions of `source` that the indexed text lost."""
        conclusions = [s for s in conclusion_sentences(source) if normalised(s) not in self.flat]
        # A token inside a conclusion that comes back anyway need not come back twice.
        inside = {token for sentence in conclusions for token in fact_tokens(sentence)}
        lost = [t for t in fact_tokens(source) if t not in self.tokens and t not in inside]
        return [*lost, *conclusions]
