"""The extractive summariser: keep the sentences that carry facts, under a token cap.

`ExtractiveSummarizer` needs no model and never fails: it scores every sentence of a
transcript (numbers, dates, identifiers, decisions, conclusions; the user's own words
first) and keeps the best under its cap, in the recap format of `recap_format`.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from langchain_contextkit.compaction.facts import (
    RecapSection,
    has_decision,
    is_decided,
    is_markup_line,
    normalised,
    recap_section,
    salient_facts,
    split_sentences,
    strip_markup,
)
from langchain_contextkit.compaction.recap_format import (
    CONTINUED,
    OWN_NOTE,
    RecapLine,
    recap_heading_of,
    recap_item,
    render_recap,
    split_extension,
)
from langchain_contextkit.errors import ConfigError
from langchain_contextkit.prompts import FIDELITIES, Fidelity, PromptRegistry
from langchain_contextkit.tokens.count import TokenCounter, count_tokens

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = ["ExtractiveSummarizer", "check_fidelity", "item_score", "previous_sentences"]

_ROLE_PREFIX = re.compile(r"^(User|Assistant|System|Tool(?: \([^)]*\))?|[A-Z][\w ]{0,20}):\s*")
_SPEAKER = re.compile(r"^(?:- )?(User|Assistant|System|Tool(?: \([^)]*\))?):\s*")
"""The labels `render_transcript` writes, bare or as a summary's ``- Label:`` lines (a
map-reduce merges summaries): only these start a new speaker."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ExtractiveSummarizer:
    r"""A deterministic summariser without an LLM: keep the sentences that carry facts.

    A sentence scores for its salient facts (`facts.salient_facts`: numbers, dates,
    amounts and ids that carry a number weigh most; a lone digit, a name from code, and
    anything inside markup, paths, options or version strings weigh little or nothing)
    and for words of decision or conclusion (English and Chinese). The user's own
    sentences outrank everything else (they are the ground truth and cannot be fetched
    again), a tool's output ranks a little lower, and a tool's line without words or
    names (a bare ``2``) or a roff request line is never kept. Every line keeps its
    speaker: the further lines of a message (indented by `render_transcript`) are the
    speaker's own, and a recap's ``- Role:`` lines keep their role through any number of
    re-compactions. Near-duplicates (same words ignoring case and punctuation) are kept
    once, and the best-scoring sentences of the previous summary (text composed by
    `compose_extension`) and of the new text, competing on their scores alone, are kept
    under `max_tokens`; among equal scores the oldest and the newest stay.

    The recap is structured: the kept lines, as ``- Role: sentence``, go under the
    headings of `prompts` (`PromptRegistry.recap_heading`) in a fixed order: facts,
    decisions, action items (with their owner and deadline when stated), numbers, open
    questions (`facts.recap_section` sorts them); an empty section is left out. An
    earlier recap is read back section by section, so its lines keep their section and
    their origin, and a recap re-summarised with nothing new comes back byte for byte.

    `fidelity` decides which lines may be kept: ``high`` also the speakers' wording
    that states no fact, ``medium`` every line that carries a fact, decision or
    question, ``low`` only decisions and conclusions and the lines with key numbers
    (`facts.has_key_number`). When the lines of the configured tier do not all fit the
    cap, the next lower tier is used before any line is dropped (`recap`).

    It never raises on any text and returns "" only when nothing scores.

    Example:
        ```python
        from langchain_contextkit.compaction.summarizers import ExtractiveSummarizer

        summarize = ExtractiveSummarizer(max_tokens=80)
        transcript = (
            "User: Hi there!\n"
            "Assistant: Hello. How can I help?\n"
            "User: My invoice INV-88213 from 2024-03-05 was charged twice.\n"
            "Assistant: I see. We decided to refund the second charge of $49.\n"
            "User: Will it arrive before Friday?"
        )
        print(summarize(transcript, "Summarise."))
        # Facts:
        # - User: My invoice INV-88213 from 2024-03-05 was charged twice.
        # Decisions:
        # - Assistant: We decided to refund the second charge of $49.
        # Open questions:
        # - User: Will it arrive before Friday?
        ```
    """

    max_tokens: int = 1000
    """Cap of the summary."""

    counter: TokenCounter = count_tokens
    """Counts the tokens of one string."""

    prompts: PromptRegistry = field(default_factory=PromptRegistry)
    """The section headings (language) of the recap."""

    fidelity: Fidelity = "medium"
    """Which lines a recap may keep (``"high"``, ``"medium"`` or ``"low"``)."""

    def __post_init__(self) -> None:
        """Validate the cap and the tier."""
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            msg = f"max_tokens must be an int >= 1, got {self.max_tokens!r}."
            raise ConfigError(msg)
        check_fidelity(self.fidelity)

    def __call__(self, text: str, instruction: str = "") -> str:  # noqa: ARG002 - the callback's shape
        """Summarise `text`; `instruction` is accepted for the callback's shape and ignored."""
        return self.recap(text)[0]

    def recap(self, text: str) -> tuple[str, Fidelity]:
        r"""Summarise `text`; the recap and the fidelity tier it was written at.

        The tier is `fidelity`, or a lower one when the lines of `fidelity` did not all
        fit `max_tokens`.

        Example:
            ```python
            from langchain_contextkit.compaction.summarizers import ExtractiveSummarizer

            text = "User: Hello there, I have a question about my plan.\nUser: Order 4471 is late."
            recap, tier = ExtractiveSummarizer(max_tokens=100).recap(text)
            print(tier, len(recap.splitlines()))
            # medium 3
            recap, tier = ExtractiveSummarizer(max_tokens=20).recap(text)
            print(tier, recap.splitlines())
            # low ['Facts:', '- User: Order 4471 is late.']
            ```
        """
        previous, body = split_extension(text)
        old = previous_sentences(previous, self.prompts)
        return self._fitted([*old, *_sentences(body, self.prompts, start=len(old))])

    def _fitted(self, sentences: list[RecapLine], *, trusted: bool = False) -> tuple[str, Fidelity]:
        """The lines of the highest tier that all fit, from `fidelity` down.

        A lower tier is used before any line of it is dropped; the room it leaves is
        filled with the best of the configured tier's other lines, so stepping down never
        keeps less than the cap holds. `trusted`: the lines were written at `fidelity`
        already (a model's recap), so that tier keeps all of them.

        An earlier recap's lines and new ones compete on their scores alone. A full
        recap still takes in new lines of the same score (ties keep both ends of the
        conversation, `_ranked`), but a new tool line never pushes out a user's fact
        that an earlier recap kept: a fixed share for new lines did exactly that on noisy
        text, one compaction after another.
        """
        sentences = _merged(sentences)

        def pool_of(tier: Fidelity) -> list[RecapLine]:
            if trusted and tier == self.fidelity:
                return sentences
            return [s for s in sentences if _eligible(s, tier)]

        def whole(pool: list[RecapLine]) -> bool:
            # Choosing counts each line on its own, which overstates a joined text; when
            # all of a tier fits as a whole, all of it is kept.
            return self.counter(render_recap(pool, self.prompts)) <= self.max_tokens

        configured = pool_of(self.fidelity)
        if whole(configured):
            return render_recap(configured, self.prompts), self.fidelity
        chosen, complete = self._select(configured)
        tier: Fidelity = self.fidelity
        for lower in FIDELITIES[FIDELITIES.index(self.fidelity) + 1 :]:
            if complete:
                break
            tier = lower
            pool = pool_of(lower)
            if whole(pool):
                chosen, complete = _ranked(pool), True
            else:
                chosen, complete = self._select(pool)
            chosen, _ = self._select(configured, chosen)
        kept, text = self._within_cap(chosen)
        if trusted:
            text = self._topped_up(kept, text, configured)
        return text, tier

    def _within_cap(self, chosen: list[RecapLine]) -> tuple[list[RecapLine], str]:
        """The recap of `chosen`, its weakest lines dropped while it is over the cap.

        Lines were chosen by their counts one by one; an estimate is not additive across
        a line break, so the joined text is checked once and trimmed when it runs over.
        """
        kept = list(chosen)  # best first
        text = render_recap(kept, self.prompts)
        while kept and self.counter(text) > self.max_tokens:
            kept.pop()
            text = render_recap(kept, self.prompts)
        return kept, text

    def _topped_up(self, kept: list[RecapLine], text: str, pool: list[RecapLine]) -> str:
        """`text` with the best lines of `pool` that still fit, measured on the whole.

        Choosing counts every line break as a token; the joined text often costs less,
        and the room left takes a few more lines (a bounded number of tries). Used for a
        model's recap, which would otherwise lose lines a cut to the cap would have kept.
        """
        seen = {id(s) for s in kept}  # merged lines: one object per distinct text
        tries = 0
        for sentence in _ranked(pool):
            room = self.max_tokens - self.counter(text)
            if tries >= _TOP_UP_TRIES or room <= 0:
                break
            if id(sentence) in seen or self.counter(sentence.line(self.prompts)) > room:
                continue
            tries += 1
            trial = render_recap([*kept, sentence], self.prompts)
            if self.counter(trial) <= self.max_tokens:
                kept = [*kept, sentence]
                seen.add(id(sentence))
                text = trial
        return text

    def _select(
        self, sentences: list[RecapLine], chosen: Sequence[RecapLine] = ()
    ) -> tuple[list[RecapLine], bool]:
        """The best-scoring distinct sentences within the cap (best first), and whether all fit.

        `chosen` are kept already (they come first and count against the cap).
        """
        kept = list(chosen)
        seen = {id(s) for s in kept}  # merged lines: one object per distinct text
        opened = {s.section for s in kept}
        used = sum(self._cost(s, opened=False) for s in kept)
        complete = True
        for sentence in _ranked(sentences):
            if id(sentence) in seen:
                continue
            cost = self._cost(sentence, opened=sentence.section in opened)
            if used + cost > self.max_tokens:
                complete = False
                continue
            seen.add(id(sentence))
            opened.add(sentence.section)
            kept.append(sentence)
            used += cost
        return kept, complete

    def _cost(self, sentence: RecapLine, *, opened: bool) -> int:
        """A line's tokens with its newline, and its heading's when it opens a section.

        Counted once per line (a recap's choice tries each line at every tier).
        """
        cost = sentence.costs
        if not cost:
            cost.append(self.counter(sentence.line(self.prompts)) + 1)
            cost.append(self.counter(self.prompts.recap_heading(sentence.section)) + 1)
        return cost[0] + (0 if opened else cost[1])

    async def asummarize(self, text: str, instruction: str = "") -> str:
        """Async `__call__` (no I/O: for symmetry with `LLMSummarizer`)."""
        return self(text, instruction)


_TOP_UP_TRIES = 24


def _ranked(sentences: list[RecapLine]) -> list[RecapLine]:
    """Best first: by score, then (equal scores) the lines nearest either end.

    When the cap is full, what goes is the middle: the conversation's opening and where
    it is now both stay.
    """
    last = max((s.position for s in sentences), default=0)
    return sorted(sentences, key=lambda s: (-s.score, min(s.position, last - s.position)))


def _merged(sentences: list[RecapLine]) -> list[RecapLine]:
    """Near-duplicates as one line: the first, in its place, with the best score of all.

    The first keeps its place, so a line an earlier recap kept stays where it was when
    the same words come again.
    """
    first: dict[str, RecapLine] = {}
    for sentence in sentences:
        key = _normalised(sentence.text)
        if not key:
            continue  # punctuation only: states nothing
        kept = first.get(key)
        if kept is None:
            first[key] = sentence
        elif sentence.score > kept.score:
            first[key] = dataclasses.replace(kept, score=sentence.score)
    return list(first.values())


def check_fidelity(fidelity: object) -> None:
    """Refuse anything but a fidelity tier (``"high"``, ``"medium"``, ``"low"``).

    Raises:
        ConfigError: Naming the tiers and the value.
    """
    if not isinstance(fidelity, str) or fidelity not in FIDELITIES:
        msg = f"fidelity must be one of {', '.join(map(repr, FIDELITIES))}, got {fidelity!r}."
        raise ConfigError(msg)


def _eligible(sentence: RecapLine, tier: Fidelity) -> bool:
    """Whether a line may be kept at `tier` (see `ExtractiveSummarizer.fidelity`)."""
    if tier == "high":
        return sentence.score > 0 or sentence.detail
    if sentence.score <= 0:
        return False
    if tier == "medium":
        return True
    return sentence.section == "decisions" or sentence.has_key_number()


def previous_sentences(lines: list[str], prompts: PromptRegistry) -> list[RecapLine]:
    """Lines of an earlier summary as sentences, scored like new ones.

    A structured recap's lines keep the section they were under; the lines of a flat
    one (or of prose) are split into sentences and sorted into sections as new ones are
    (a paragraph, or a reply written on one line, is not one item too long to keep).
    """
    out: list[RecapLine] = []
    section: RecapSection | None = None
    for line in lines:
        heading = recap_heading_of(line, prompts)
        if heading is not None:
            section = heading
            continue
        items = [recap_item(line)] if section else _inline_items(line, prompts)
        for label, text in items:
            if not text:
                continue
            where = section or recap_section(text, speaker=label)
            out.append(RecapLine(len(out), label, text, item_score(text, label, section), where))
    return out


def _inline_items(line: str, prompts: PromptRegistry) -> list[tuple[str | None, str]]:
    """A flat or prose line's sentences as items, each with the origin it names.

    A reply written on one line (``Facts: - User: ... - User: ...``) keeps each item's
    origin; a heading at the start of a sentence is left out.
    """
    label, text = recap_item(line)
    out: list[tuple[str | None, str]] = []
    for sentence in split_sentences(text):
        head, _, rest = sentence.partition(" ")
        if rest and recap_heading_of(head, prompts) is not None:
            sentence = rest  # noqa: PLW2901 - the sentence without its heading
        own, body = recap_item(sentence)
        out.append((own or label, body))
    return out


def item_score(text: str, label: str | None, section: RecapSection | None) -> int:
    """The score of a recap's item, a model's reply or an earlier recap read back.

    Already chosen once: any such line is kept over nothing (at least 1). An item naming
    no origin under a section heading is the user's (what a small cap's instruction asks
    for); a line of a flat or prose recap is a note.
    """
    return max(1, _score(text, label or ("User" if section else "Note")))


def _sentences(text: str, prompts: PromptRegistry, *, start: int = 0) -> list[RecapLine]:
    """Split a transcript into scored sentences, each labelled with its speaker.

    Merged summaries (a map-reduce's partial recaps) are read like an earlier recap:
    a ``- Role:`` line under a section heading keeps that section. Positions count
    from `start` (the lines of an earlier recap come first).
    """
    parsed = enumerate(_parsed(text, prompts), start)
    return [_scored(at, label, section, sentence) for at, (label, section, sentence) in parsed]


def _parsed(text: str, prompts: PromptRegistry) -> Iterator[tuple[str, RecapSection | None, str]]:
    """A transcript's sentences with their speaker and the recap section they are under.

    Nothing is scored here: reading is cheap, scoring is not (`_scored`).
    """
    label = "Note"
    section: RecapSection | None = None
    for line in text.splitlines():
        heading = None if line.startswith(CONTINUED) else recap_heading_of(line, prompts)
        if heading is not None:
            section, label = heading, "Note"
            continue
        match = _SPEAKER.match(line)
        if match:
            label, body = match.group(1), line[match.end() :]
            if not line.startswith("- "):
                section = None  # a transcript's message, not a recap's item
        elif line.startswith(CONTINUED) or label != "Note":
            body = line  # a further line of the same message: the same speaker
        else:  # plain text, not a transcript
            match = _ROLE_PREFIX.match(line)
            label = match.group(1) if match else "Note"
            body = line[match.end() :] if match else line
        if is_markup_line(body):
            continue  # a roff request or comment: layout, never a fact
        if section is not None:
            body = OWN_NOTE.sub("", body)
        for sentence in split_sentences(body):
            yield label, section, sentence


def _scored(position: int, label: str, section: RecapSection | None, sentence: str) -> RecapLine:
    """A sentence read by `_parsed` as a scored line of a recap."""
    score = _score(sentence, label)
    detail = score == 0 and not label.startswith("Tool") and _has_words(sentence)
    # A line no tier keeps needs no section (sorting one costs a few regexes).
    kept = score > 0 or detail
    where = section or (recap_section(sentence, speaker=label) if kept else "facts")
    return RecapLine(position, label, sentence, score, where, detail)


_MAX_FACT_WEIGHT = 5
_DECISION_WEIGHT = 2


def _score(sentence: str, label: str) -> int:
    # Markup starts with one of three characters: most sentences need no substitution.
    clean = strip_markup(sentence) if _MARKUP_START.search(sentence) else sentence
    score, has_name = _fact_weight(sentence)
    if has_decision(clean):
        score += _DECISION_WEIGHT
    if label == "User":
        # What the user states is the conversation's ground truth and cannot be fetched
        # again: it outranks everything a tool printed, which usually can be.
        if score:
            return score + _STATED_WEIGHT
        return 1 if _has_words(clean) else 0
    if label == "Assistant" and is_decided(clean):
        # A decision or conclusion the conversation reached ranks with the user's facts:
        # in a full recap, one does not shut out the other (equal scores keep both ends).
        return score + _STATED_WEIGHT
    if not has_name and not _has_words(clean):
        return 0  # a bare number from a tool's output ("2", "\\fI3\\fR"): not a statement
    if label.startswith("Tool"):
        return max(0, score - 1)
    return score


def _fact_weight(sentence: str) -> tuple[int, bool]:
    """What the sentence's salient facts weigh, and whether one of them is a name."""
    numbers: list[str] = []
    names: list[str] = []
    for token in salient_facts(sentence):
        (numbers if token[0].isdigit() or token[0] in "$€£¥" else names).append(token)
    weight = 0
    if any(len(n) > _MINOR_NUMBER for n in numbers):
        weight += 3  # a code, amount, date or measure
    elif numbers:
        weight += 1  # a lone digit ("0", "2"): options and counts in prose, rarely a fact
    if any(any(ch.isdigit() for ch in name) for name in names):
        weight += 2  # an id that carries a number: INV-88213, item-7, db-7
    elif names:
        weight += 1  # a name in code (APT::Cache, snake_case): often just quoted source
    return weight, bool(names)


_MINOR_NUMBER = 2
"""Numbers of at most this many characters weigh little: "0", "2", "10"."""

_STATED_WEIGHT = 5
"""What a user's statement, or a decision the conversation reached, weighs on top."""


_MARKUP_START = re.compile(r"[\\<&]")
"""Every piece of markup `facts.strip_markup` removes starts with one of these."""

_ENOUGH_WORDS = 4


def _has_words(sentence: str) -> bool:
    """More than a greeting or filler: four different words, or four CJK characters."""
    if len(set(sentence.casefold().split())) >= _ENOUGH_WORDS:
        return True
    if sentence.isascii():
        return False  # no wide character: the words decided it
    cjk: set[str] = set()
    for ch in sentence:  # stops at the fourth: a Chinese sentence is decided at once
        if unicodedata.east_asian_width(ch) in "WF":
            cjk.add(ch)
            if len(cjk) >= _ENOUGH_WORDS:
                return True
    return False


def _normalised(text: str) -> str:
    """Case- and punctuation-blind key for near-duplicate detection."""
    body = text.split(": ", 1)[1] if text.startswith("- ") and ": " in text else text
    return normalised(body)
