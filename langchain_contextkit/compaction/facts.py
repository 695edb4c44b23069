"""What counts as a fact in text: numbers, dates, identifiers, decisions and conclusions.

One set of deterministic rules, shared by the extractive summariser (which keeps the
sentences that carry facts) and the plan reducer (which checks that a summary kept every
fact of what it summarised, and re-inserts what it dropped).
"""

from __future__ import annotations

import bisect
import functools
import re
from typing import Literal, get_args

__all__ = [
    "RECAP_SECTIONS",
    "FactIndex",
    "RecapSection",
    "action_details",
    "conclusion_sentences",
    "fact_tokens",
    "has_decision",
    "has_identifier",
    "has_key_number",
    "has_measure",
    "has_number",
    "is_action",
    "is_decided",
    "is_markup_line",
    "is_question",
    "missing_facts",
    "normalised",
    "recap_section",
    "salient_facts",
    "split_sentences",
    "strip_markup",
]

# Sentence ends: Latin punctuation followed by whitespace, CJK punctuation anywhere, and
# line breaks.
_SENTENCE_END = re.compile(r"[.!?。！？；](?:(?<=[.!?])(?=\s)|(?<=[。！？；]))")
"""The punctuation that ends a sentence: Latin before whitespace, CJK anywhere. Found from
the mark itself: a pattern of look-behinds (after which mark?) is tried at every character."""

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


class _CaseBlind:
    """A case-blind search for a pattern written in lower case, fast on ASCII text.

    `re.IGNORECASE` folds every character it compares, which makes these word lists
    the costliest searches of a recap. ASCII letters fold only to each other, so on
    ASCII text (most of it) the lower-cased text is searched case-sensitively instead,
    with the same result at about half the cost; other text gets the folding search.
    """

    __slots__ = ("ascii", "folding")

    def __init__(self, pattern: str) -> None:
        self.folding = re.compile(pattern, re.IGNORECASE)
        self.ascii = re.compile(pattern)

    def found(self, text: str) -> bool:
        """Whether the pattern occurs in `text`, letter case aside."""
        if text.isascii():
            return self.ascii.search(text.lower()) is not None
        return self.folding.search(text) is not None


_DECISION = _CaseBlind(
    r"\b(decid\w*|decision|agreed?|conclu\w*|therefore|so we|must|will|shall|chose|chosen|"
    r"confirm\w*|resolv\w*|root cause|result\w*|because|fixed|approved|rejected|deadline|"
    r"plan\w*|next step)\b"
    r"|决定|结论|确认|因此|所以|必须|同意|原因|结果|计划|下一步|截止",
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
    r"|^v?\d+(?:\.\d+)+[-+~]\w[\w.+~]*$"  # a package's version and revision: 1.15-1
    r"|^[\w.+-]+:(?:amd64|arm64|armhf|armel|i386|ppc64el|s390x|riscv64|all)$"  # pkg:arch
    r"|^deb\d+u\d+$"  # a Debian point-release tag: deb12u6
    r"|\.so(?:\.\d+)*$"  # a shared library's file name: libdummy.so.1
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
    return list(_salient(text))


@functools.lru_cache(maxsize=4096)
def _salient(text: str) -> tuple[str, ...]:
    """`salient_facts`, remembered: a recap scores, sorts and tiers each line more than once."""
    if is_markup_line(text):
        return ()
    return tuple(t for t in fact_tokens(strip_markup(text)) if not _NOISE_TOKEN.search(t))


def split_sentences(text: str) -> list[str]:
    """Split text into sentences, whitespace collapsed; empty pieces are dropped.

    A sentence ends after Latin punctuation followed by whitespace, after CJK
    punctuation, and at a line break: a line break is put after each such mark and the
    text split at line breaks.
    """
    pieces = (" ".join(piece.split()) for piece in _SENTENCE_END.sub("\\g<0>\n", text).split("\n"))
    return [piece for piece in pieces if piece]


def has_number(text: str) -> bool:
    """Whether `text` holds a digit (a number, date, amount, time, version)."""
    return _NUMBER.search(text) is not None


def has_identifier(text: str) -> bool:
    """Whether `text` holds an identifier (a code, path, URL, snake_case or camelCase)."""
    return _IDENTIFIER.search(text) is not None


def has_decision(text: str) -> bool:
    """Whether `text` states a decision, plan, cause or conclusion (English or Chinese)."""
    return _DECISION.found(text)


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


# -- recap sections -------------------------------------------------------------------------

RecapSection = Literal["facts", "decisions", "actions", "numbers", "questions"]
"""The sections of a structured recap, by key."""

RECAP_SECTIONS: tuple[RecapSection, ...] = get_args(RecapSection)
"""Every recap section, in the fixed order a recap prints them."""

# A question: it ends with a question mark (Latin or full-width), or says it is open.
_QUESTION = _CaseBlind(
    r"[?？]\s*[)\]\"'”」』]*\s*$"
    r"|\b(?:open question|unresolved|unclear whether|not yet decided|tbd)\b"
    r"|待定|未决|尚不清楚|还不确定|是否.{0,20}[吗呢][。.]?$",
)
# What was decided or concluded: narrower than `has_decision`, which also counts plans,
# causes and "will" (those describe work to do or explanations, not a settled point).
_DECIDED = _CaseBlind(
    r"\b(?:decid(?:e|ed|es|ing)|decision|agreed|agree on|conclu\w+|chose|chosen|opted|"
    r"approved|rejected|resolved|settled on|go(?:ing)? with|root cause|in summary|"
    r"the answer is|turns out|therefore|thus|hence|confirmed)\b"
    r"|决定|结论|确认|同意|采用|选定|批准|否决|因此|所以|原因是|结果是|定为|最终",
)
# Work someone is to do: a cue, and then an owner or a deadline for it to count.
_ACTION_MARKER = _CaseBlind(
    r"\b(?:todo|to-do|action items?|follow[- ]up|next steps?|assigned to|assignee|owner)\b"
    r"|待办|行动项|跟进|负责人|下一步",
)
_ACTION_CUE = _CaseBlind(
    r"\b(?:will|shall|'ll|is going to|are going to|needs? to|has to|have to|must|should|"
    r"please|let's|to send|to review|to fix|to deploy|to update|to check|to call|to write)\b"
    r"|负责|需要|将会|将|会|要|请|完成|提交|安排",
)
_NOT_OWNERS = frozenset(
    re.findall(
        r"\S+",
        "it this that there these those he she they you what which who when where why how "
        "if then also one nothing everything something nobody everyone someone each all "
        "none need remember want try going note fact",
    )
)
_OWNER = re.compile(
    r"\b(?:owner|assignee|assigned to)\s*[:：]?\s*(@?[A-Za-z][\w.-]*)"
    r"|(?:负责人|由)\s*[:：]?\s*([\u4e00-\u9fff]{1,4}?|[A-Za-z][\w.-]*)\s*(?:负责|跟进|处理|完成|[，,。；;]|$)"
    r"|([\u4e00-\u9fff]{2,3}|[A-Za-z][\w.-]*)\s*负责"
    r"|@([A-Za-z][\w.-]*)"
    r"|(?:^|[:：]\s*)(I|[Ww]e|[A-Z][a-z]+)\s*(?:will|'ll|shall|is going to|are going to|"
    r"needs? to|has to|have to|must|to (?=[a-z]))",
)
_WEEKDAY = r"(?:mon|tues|wednes|thurs|fri|satur|sun)day"
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
_WHEN = (
    r"(?:(?:next|this|end of(?: the)?|the end of(?: the)?)\s+)?"
    rf"(?:{_WEEKDAY}|tomorrow|tonight|today|noon|midnight|eod|eow|"
    r"week|month|quarter|year|sprint|q[1-4]\b|"
    r"\d{4}-\d{2}-\d{2}(?:[ T]\d{1,2}:\d{2})?|\d{1,2}[:.]\d{2}(?:\s?[ap]m)?|\d{1,2}\s?[ap]m|"
    rf"\d{{1,2}}(?:st|nd|rd|th)?(?: of)? {_MONTH}(?: \d{{4}})?|{_MONTH} \d{{1,2}}(?:st|nd|rd|th)?"
    r"(?:,? \d{4})?|\d{1,2}/\d{1,2}(?:/\d{2,4})?)"
)
_DEADLINE = re.compile(
    rf"\b(?:by|before|due(?: on| by)?|until|no later than|deadline\s*[:：]?)\s+({_WHEN}"
    rf"(?:\s+{_WHEN})?)"
    r"|(?:截止(?:日期|时间)?\s*[:：]?\s*|在)"
    r"((?:\d{4}年)?\d{1,2}月\d{1,2}[日号]|周[一二三四五六日天]|星期[一二三四五六日天]|"
    r"明天|后天|今天|下周[一二三四五六日天]?|本周[一二三四五六日天]?|月底|年底|\d{4}-\d{2}-\d{2})"
    r"|((?:\d{4}年)?\d{1,2}月\d{1,2}[日号]|周[一二三四五六日天]|星期[一二三四五六日天]|"
    r"明天|后天|今天|下周[一二三四五六日天]?|本周[一二三四五六日天]?|月底|年底|\d{4}-\d{2}-\d{2})"
    r"\s*(?:之前|以前|前)",
    re.IGNORECASE,
)
# A number that measures something: a share, an amount, a number with its unit.
_MEASURE = re.compile(
    r"\d\s?%|[$€£¥]\s?\d|\d\s?(?:usd|eur|gbp|cny|rmb|元|美元|万|亿)"
    r"|\d(?:[.,]\d+)?\s?(?:ms|sec|secs|seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|"
    r"months?|years?|[kmgt]i?b|bytes?|kbps|mbps|gbps|rps|qps|tokens?|users?|requests?|"
    r"errors?|items?|times|x|km|kg|mb/s|°c|个|人|次|天|小时|分钟|秒|年|台|条|倍)(?![a-z])"
    r"|\d+(?:\.\d+)? (?:of|out of) \d+",
    re.IGNORECASE,
)


def is_question(text: str) -> bool:
    """Whether `text` asks something or says a point is still open (English or Chinese)."""
    return _QUESTION.found(text)


def action_details(text: str, *, speaker: str | None = None) -> tuple[str | None, str | None]:
    """The owner and the deadline an action item states, each None when it states none.

    "I" as the owner is the speaker (`speaker`, such as ``"User"``) when it is known.

    Example:
        ```python
        from langchain_contextkit.compaction.facts import action_details

        print(action_details("Alice will send the report by Friday."))
        # ('Alice', 'Friday')
        print(action_details("由王伟负责，周五前完成。"))
        # ('王伟', '周五')
        print(action_details("I will deploy db-7 before 2025-04-01.", speaker="User"))
        # ('User', '2025-04-01')
        ```
    """
    owner: str | None = None
    for match in _OWNER.finditer(text):
        name = next(group for group in match.groups() if group)
        if name.casefold() in _NOT_OWNERS:
            continue
        owner = speaker if name == "I" and speaker else name.removeprefix("@")
        break
    deadline = None
    found = _DEADLINE.search(text)
    if found is not None:
        deadline = next(group for group in found.groups() if group).rstrip(_TRAILING_PUNCTUATION)
    return owner, deadline


def is_action(text: str, *, speaker: str | None = None) -> bool:
    """Whether `text` gives someone work to do: a cue, with an owner or a deadline."""
    if _ACTION_MARKER.found(text):
        return True
    if not _ACTION_CUE.found(text):
        return False
    owner, deadline = action_details(text, speaker=speaker)
    return owner is not None or deadline is not None


def is_decided(text: str) -> bool:
    """Whether `text` states a decision or a conclusion (English or Chinese)."""
    return _DECIDED.found(text)


def has_measure(text: str) -> bool:
    """Whether `text` holds a number that measures something (share, amount, unit)."""
    return _MEASURE.search(strip_markup(text)) is not None


def has_key_number(text: str) -> bool:
    """Whether `text` states a number worth keeping at any fidelity.

    A code, amount, date or measure of more than two characters, or an identifier that
    carries a number (``item-7``); markup, paths, options and versions never count.

    Example:
        ```python
        from langchain_contextkit.compaction.facts import has_key_number

        assert has_key_number("The code for item-7 is 493021.")
        assert not has_key_number("Use option 2 of vim90/menu.vim.")
        ```
    """
    for token in _salient(text):
        digits = any(ch.isdigit() for ch in token)
        if digits and (len(token) > _MINOR_NUMBER or not token[0].isdigit()):
            return True
        if digits and token.endswith("%"):
            return True
    return False


_MINOR_NUMBER = 2
"""Numbers of at most this many characters are minor: "0", "2", "10"."""


def recap_section(text: str, *, speaker: str | None = None) -> RecapSection:
    """The section of a structured recap that a line belongs to.

    In this order: an open question, an action item (work with an owner or a deadline),
    a decision or conclusion, a number that measures something, else a fact.

    Example:
        ```python
        from langchain_contextkit.compaction.facts import recap_section

        print(recap_section("Should we migrate the billing db?"))
        # questions
        print(recap_section("Bob will review the PR by Monday."))
        # actions
        print(recap_section("We decided to refund the second charge."))
        # decisions
        print(recap_section("Disk usage hit 92% on db-7."))
        # numbers
        print(recap_section("The code for item-7 is 493021."))
        # facts
        ```
    """
    clean = strip_markup(text)
    if is_question(clean):
        return "questions"
    if is_action(clean, speaker=speaker):
        return "actions"
    if is_decided(clean):
        return "decisions"
    if has_measure(clean):
        return "numbers"
    return "facts"
