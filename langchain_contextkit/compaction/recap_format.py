"""The recap's text format: transcripts, headings, ``- Role: sentence`` lines.

A transcript (`render_transcript`) is what a summariser reads; a recap is what it
writes: sections (facts, decisions, action items, numbers, open questions) of
``- Role: sentence`` lines (`RecapLine`, `render_recap`). The extractive summariser
writes it and `summarizers.structured_recap` reads a model's reply into it, so the
format has one definition, here.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, get_args

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_contextkit.compaction._recap_reduce import BULLET, ITEM_LABEL
from langchain_contextkit.compaction.facts import (
    RECAP_SECTIONS,
    RecapSection,
    action_details,
    has_key_number,
)
from langchain_contextkit.prompts import Language, PromptRegistry

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "CONTINUED",
    "NEW_MESSAGES_LABEL",
    "OWN_NOTE",
    "PREVIOUS_SUMMARY_LABEL",
    "STATED_NOTE",
    "RecapLine",
    "compose_extension",
    "recap_heading_of",
    "recap_item",
    "render_recap",
    "render_transcript",
    "split_extension",
]

_ROLE_LABELS = {"human": "User", "ai": "Assistant", "system": "System", "tool": "Tool"}

PREVIOUS_SUMMARY_LABEL = "PREVIOUS SUMMARY"
NEW_MESSAGES_LABEL = "NEW MESSAGES"


def render_transcript(messages: Sequence[BaseMessage]) -> str:
    """Render messages as plain text for a summariser: one ``Role: text`` block each.

    Tool calls are written with their names and JSON arguments, and tool results name the
    tool, so a summary can keep which tool was asked what and what it answered.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        from langchain_contextkit.compaction.summarizers import render_transcript

        call = {"name": "get_order", "args": {"id": 42}, "id": "c1"}
        print(
            render_transcript(
                [
                    HumanMessage("Where is order 42?"),
                    AIMessage("", tool_calls=[call]),
                    ToolMessage("Shipped.", tool_call_id="c1", name="get_order"),
                ]
            )
        )
        # User: Where is order 42?
        # Assistant: [calls get_order({"id": 42})]
        # Tool (get_order): Shipped.
        ```
    """
    blocks: list[str] = []
    for message in messages:
        label = _ROLE_LABELS.get(message.type, message.type.capitalize())
        if isinstance(message, ToolMessage) and message.name:
            label = f"{label} ({message.name})"
        parts: list[str] = [str(message.text)] if message.text else []
        if isinstance(message, AIMessage):
            parts.extend(
                f"[calls {call['name']}({json.dumps(call['args'], ensure_ascii=False)})]"
                for call in message.tool_calls
            )
            # A call whose arguments were not valid JSON was sent, and answered, all the same.
            parts.extend(
                f"[calls {call['name'] or 'a tool'}({call['args'] or ''}): invalid JSON arguments]"
                for call in message.invalid_tool_calls
            )
        # Every line after a block's first is indented: a line of a tool's output that
        # begins "User:" or "Note:" stays the tool's, through any number of recaps.
        body = " ".join(parts).replace("\n", "\n" + CONTINUED)
        blocks.append(f"{label}: {body}")
    return "\n".join(blocks)


CONTINUED = "  "
"""How `render_transcript` marks the further lines of one message."""


def compose_extension(previous: str, new_text: str) -> str:
    """The text an "extend this summary" call summarises: old summary, then new messages."""
    return f"{PREVIOUS_SUMMARY_LABEL}:\n{previous}\n\n{NEW_MESSAGES_LABEL}:\n{new_text}"


_HEADING_DECORATION = " \t#*_[]【】:："
OWN_NOTE = re.compile(r"\s*[(（](?:owner|due|负责人|截止)[:：][^()（）]*[)）]$")
"""The owner/deadline note a recap writes after an action item (read back, not kept)."""
STATED_NOTE = re.compile(r"\b(?:owner|due|deadline)\s*[:：]|负责人[:：]|截止[:：]", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class RecapLine:
    """One line of a recap: where it came from, its text, score and section."""

    position: int
    label: str | None  # where it came from; None: an item of a model's recap naming none
    text: str
    score: int
    section: RecapSection
    detail: bool = False  # words without a fact: kept at high fidelity only
    # The line's tokens and its heading's, once counted (one summariser call's lines).
    costs: list[int] = field(default_factory=list, compare=False, repr=False)
    key_number: list[bool] = field(default_factory=list, compare=False, repr=False)

    def has_key_number(self) -> bool:
        """`facts.has_key_number` of the text, worked out once."""
        if not self.key_number:
            self.key_number.append(has_key_number(self.text))
        return self.key_number[0]

    def line(self, prompts: PromptRegistry) -> str:
        """The line as a recap writes it: ``- Role: text``, an action's note after it."""
        head = f"- {self.label}: " if self.label else "- "
        note = ""
        if self.section == "actions" and not STATED_NOTE.search(self.text):
            note = prompts.action_note(*action_details(self.text, speaker=self.label))
        return f"{head}{self.text}{note}"


def render_recap(lines: Sequence[RecapLine], prompts: PromptRegistry) -> str:
    """Lines as a structured recap: the sections in their fixed order, lines in theirs."""
    out: list[str] = []
    for section in RECAP_SECTIONS:
        items = sorted((s for s in lines if s.section == section), key=lambda s: s.position)
        if items:
            out.append(prompts.recap_heading(section))
            out.extend(s.line(prompts) for s in items)
    return "\n".join(out)


def split_extension(text: str) -> tuple[list[str], str]:
    """Split text from `compose_extension` into previous-summary lines and the new part."""
    head = f"{PREVIOUS_SUMMARY_LABEL}:\n"
    marker = f"\n\n{NEW_MESSAGES_LABEL}:\n"
    if not text.startswith(head) or marker not in text:
        return [], text
    previous, _, body = text[len(head) :].partition(marker)
    return [line.strip() for line in previous.splitlines() if line.strip()], body


@functools.cache
def _heading_keys(language: Language, overrides: tuple[str, ...]) -> dict[str, RecapSection]:
    """Every spelling of a section heading that reads back as that section.

    The registry's own headings (`overrides`, one per section), and the default ones of
    every language (a recap written in one language still reads back in another).
    """
    keys = {
        _heading_key(text): section for text, section in zip(overrides, RECAP_SECTIONS, strict=True)
    }
    for lang in (language, *get_args(Language)):
        registry = PromptRegistry(language=lang)
        for section in RECAP_SECTIONS:
            keys.setdefault(_heading_key(registry.recap_heading(section)), section)
    return keys


def _heading_key(line: str) -> str:
    return line.strip().strip(_HEADING_DECORATION).strip().casefold()


def recap_heading_of(line: str, prompts: PromptRegistry) -> RecapSection | None:
    """The section whose heading `line` is (markdown ``#``/``**`` and colons aside)."""
    if len(line) > _MAX_HEADING:
        return None
    overrides = tuple(prompts.recap_heading(section) for section in RECAP_SECTIONS)
    return _heading_keys(prompts.language, overrides).get(_heading_key(line))


_MAX_HEADING = 40


def recap_item(line: str) -> tuple[str | None, str]:
    """An item line's origin (None when it names none) and its text, note removed."""
    body = BULLET.sub("", line.strip(), count=1)
    match = ITEM_LABEL.match(body)
    label, text = (match.group(1), body[match.end() :]) if match else (None, body)
    return label, OWN_NOTE.sub("", text).strip()
