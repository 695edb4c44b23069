"""What a compaction hands on: the recap carried between turns and one call's result.

`RunningSummary` is what a graph keeps in state between turns, `CompactionResult` what one
`HistoryCompactor` call returns; recap messages carry an id starting with
`RECAP_ID_PREFIX`, so a compacted list fed back in is recognised (`is_recap`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage

from langchain_contextkit.errors import ConfigError
from langchain_contextkit.messages.lists import split_system

# Fidelity at run time: `from_known_fields` and `dataclasses.fields` resolve the hints.
from langchain_contextkit.prompts import Fidelity  # noqa: TC001

__all__ = [
    "RECAP_ID_PREFIX",
    "AViewSummarize",
    "CompactionResult",
    "RunningSummary",
    "SummarizerKind",
    "ViewParts",
    "ViewSummarize",
    "is_recap",
]

RECAP_ID_PREFIX = "contextkit-recap-"
"""Recap messages carry an id starting with this, so a compacted list fed back in is
recognised and its recap extended, not summarised as if it were a turn."""
SummarizerKind = Literal["prefix", "callback", "llm", "extractive"]

ViewSummarize = Callable[[list[BaseMessage], str], "str | None"]
"""`summarize_view(view, instruction) -> summary`: summarise a view in place (see
`HistoryCompactor.compact_view`); None declines (the request would not fit the model)."""

AViewSummarize = Callable[[list[BaseMessage], str], Awaitable["str | None"]]
"""Async `ViewSummarize`."""


@dataclass(frozen=True, slots=True)
class RunningSummary:
    """A recap and how much of the conversation it covers.

    Kept in graph state between turns, so the next compaction summarises only the newly
    aged-out messages together with this text.

    Attributes:
        text: The recap, without its heading.
        covered: How many messages after the leading system messages it replaces.
        last_id: Id of the last covered message, when it had one: a history that no
            longer matches (edited, or a different thread) is detected and the summary
            ignored rather than misapplied.
        digest: A digest of the covered messages' content, when known (a window-sized
            compaction records it): checked instead of `last_id`, so a caller that
            re-sends the history with new ids still matches.
        floor: The extractive recap of the same messages, when the recap is a model's:
            what the next model recap may not keep fewer facts than. It is extended from
            itself, never from the model's recap (which may carry a verbose reply's
            copied lines); None when the recap is extractive (it is its own floor).
    """

    text: str
    covered: int
    last_id: str | None = None
    digest: str | None = None
    floor: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A plain dict for graph state and checkpointers."""
        data: dict[str, Any] = {"text": self.text, "covered": self.covered, "last_id": self.last_id}
        if self.digest is not None:
            data["digest"] = self.digest
        if self.floor is not None:
            data["floor"] = self.floor
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunningSummary:
        """Rebuild from `to_dict` output.

        Raises:
            ConfigError: If a field is missing or has the wrong type.
        """
        text, covered, last_id = data.get("text"), data.get("covered"), data.get("last_id")
        if not isinstance(text, str) or not isinstance(covered, int) or covered < 0:
            msg = f"not a RunningSummary dict: {dict(data)!r}"
            raise ConfigError(msg)
        if last_id is not None and not isinstance(last_id, str):
            msg = f"RunningSummary last_id must be a str or None, got {last_id!r}"
            raise ConfigError(msg)
        digest = data.get("digest")
        if digest is not None and not isinstance(digest, str):
            msg = f"RunningSummary digest must be a str or None, got {digest!r}"
            raise ConfigError(msg)
        floor = data.get("floor")
        if floor is not None and not isinstance(floor, str):
            msg = f"RunningSummary floor must be a str or None, got {floor!r}"
            raise ConfigError(msg)
        return cls(text, covered, last_id, digest, floor)

    @classmethod
    def from_state(cls, stored: object) -> RunningSummary | None:
        """Rebuild what a graph keeps in state: None when nothing is stored there yet."""
        return cls.from_dict(stored) if isinstance(stored, Mapping) and stored else None


@dataclass(frozen=True, slots=True)
class ViewParts:
    """A view's parts in layout order: the plan lays the request out from them.

    Attributes:
        system: The leading system messages (the recap excluded).
        recap: The recap message, when there is one (a system message, or a human one
            when the provider wants a user turn first).
        kept: The recent turns kept verbatim, in order.
        kept_tokens: Tokens of `kept` (no reply priming) by the compactor's counter, when
            the plan priced them (None: count them).
    """

    system: tuple[BaseMessage, ...]
    recap: BaseMessage | None
    kept: tuple[BaseMessage, ...]
    kept_tokens: int | None = None

    @property
    def messages(self) -> list[BaseMessage]:
        """The view as one list: system, recap, kept tail."""
        recap = () if self.recap is None else (self.recap,)
        return [*self.system, *recap, *self.kept]

    @classmethod
    def of(cls, messages: Sequence[BaseMessage]) -> ViewParts:
        """Split a view someone else built (a recap found by its id); nothing known of it."""
        system, rest = split_system(messages)
        recaps = [m for m in system if is_recap(m)]
        stable = tuple(m for m in system if not is_recap(m))
        if rest and is_recap(rest[0]):  # a recap in a human message (require_human_first)
            recaps, rest = [rest[0]], rest[1:]
        return cls(stable, recaps[-1] if recaps else None, tuple(rest))


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one compaction call did.

    Attributes:
        messages: The view the model should see: system prefix, recap, recent tail.
        summary: The running summary after this call (None when there is none yet).
        compacted: True when this call made a new summary.
        summarizer: Which summariser produced it (None when none ran or all failed).
        tokens_before: The view's tokens (plus overhead) before this call.
        tokens_after: The returned view's tokens (plus overhead).
        aged_out: Messages newly folded into the summary.
        error: Why a summariser failed, when one did (the fallback then took over).
        fidelity: The tier the new recap was written at (`CompactionConfig.fidelity`, or
            a lower one when the recap had to step down to fit); None when no new recap
            was made or its summariser's format is its own (a callback's prose).
        parts: `messages` as its parts, with the kept tail's cost when known (None in a
            result built elsewhere: `view_parts` then splits `messages`).
        summarizer_calls: Calls made to a model or callback summariser in this call
            (the extractive one is not counted: it is local).
        summarizer_chars: Characters those calls sent (text and instruction).
        shared: True when the recap in force came from the shared store (`RecapStore`).
    """

    messages: list[BaseMessage]
    summary: RunningSummary | None
    compacted: bool
    summarizer: SummarizerKind | None
    tokens_before: int
    tokens_after: int
    aged_out: int = 0
    error: str | None = None
    fidelity: Fidelity | None = None
    parts: ViewParts | None = None
    summarizer_calls: int = 0
    summarizer_chars: int = 0
    shared: bool = False

    @property
    def view_parts(self) -> ViewParts:
        """`parts`, or `messages` split into them when the result does not carry them."""
        return self.parts if self.parts is not None else ViewParts.of(self.messages)


def is_recap(message: BaseMessage) -> bool:
    """Whether `message` is a recap a compactor wrote (its id starts with `RECAP_ID_PREFIX`)."""
    return isinstance(message.id, str) and message.id.startswith(RECAP_ID_PREFIX)
