"""The walk behind `repair_messages`: a broken message list made valid, for one request.

Kept apart from `messages.py` (the rules) so each module stays one job; the public
function, its fast path and its documentation live there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_contextkit._message_rules import SystemPlacement, call_names, has_tool_calls

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.messages import BaseMessage

RepairKind = Literal[
    "unanswered_call",
    "orphan_result",
    "duplicate_result",
    "call_without_id",
    "system_note",
]

NO_RESULT = "No result was recorded for this call."
"""The synthetic error result that answers a call the history never answered."""

SYSTEM_NOTE = "[System note]"
"""What marks a system message sent as a human message (a provider that only takes one
at the start)."""


@dataclass(frozen=True, slots=True)
class MessageRepair:
    """One change `repair_messages` made to a list so that a provider accepts it.

    Attributes:
        index: Position, in the list given, of the message the repair is about.
        kind: What was done: ``"unanswered_call"`` (a synthetic error result added),
            ``"orphan_result"`` / ``"duplicate_result"`` (a result that answers no call
            of the preceding AI message, or one already answered, kept as a human note),
            ``"call_without_id"`` (a call nothing could answer, left out) or
            ``"system_note"`` (a system message the provider would move or refuse there,
            sent as a human note in its place).
        detail: A sentence for the log.
    """

    index: int
    kind: RepairKind
    detail: str

    def __str__(self) -> str:
        """Render as ``message 3: detail``."""
        return f"message {self.index}: {self.detail}"


def repair_walk(
    messages: Sequence[BaseMessage], placement: SystemPlacement
) -> tuple[list[BaseMessage], list[MessageRepair]]:
    """Pair every call with one result, then place the late system messages."""
    paired, origin, repairs = _paired(messages)
    placed = _placed(paired, origin, placement, repairs)
    repairs.sort(key=lambda r: r.index)
    return placed, repairs


def _paired(
    messages: Sequence[BaseMessage],
) -> tuple[list[BaseMessage], list[int], list[MessageRepair]]:
    """Each tool block closed: calls answered once, stray results turned into notes.

    Also returns, for each message out, the index in `messages` it stands for, so the
    system pass reports positions in the caller's list.
    """
    out: list[BaseMessage] = []
    origin: list[int] = []
    repairs: list[MessageRepair] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        if isinstance(message, ToolMessage):  # no block is open: the result answers nothing
            out.append(_result_note(message, duplicate=False))
            origin.append(i)
            repairs.append(_stray(i, message, duplicate=False))
            i += 1
            continue
        if not has_tool_calls(message):
            out.append(message)
            origin.append(i)
            i += 1
            continue
        start = i
        call = _with_ids_only(message, start, repairs)
        names = call_names(call)
        block: list[BaseMessage] = [call]
        notes: list[tuple[int, BaseMessage]] = []
        answered: set[str] = set()
        i += 1
        while i < len(messages):
            result = messages[i]
            if not isinstance(result, ToolMessage):
                break
            call_id = result.tool_call_id
            if call_id in names and call_id not in answered:
                answered.add(call_id)
                block.append(result)
            else:
                # Moved after the block: a human message inside it would close the block
                # before the calls still waiting for their results.
                duplicate = call_id in answered
                notes.append((i, _result_note(result, duplicate=duplicate)))
                repairs.append(_stray(i, result, duplicate=duplicate))
            i += 1
        for call_id, name in names.items():
            if call_id not in answered:
                block.append(
                    ToolMessage(NO_RESULT, tool_call_id=call_id, name=name or None, status="error")
                )
                repairs.append(
                    MessageRepair(
                        start,
                        "unanswered_call",
                        f"tool call {call_id!r} ({name or 'unnamed'}) had no result: "
                        "an error result was added",
                    )
                )
        out.extend(block)
        origin.extend([start] * len(block))  # only system messages' origins are read
        out.extend(note for _, note in notes)
        origin.extend(index for index, _ in notes)
    return out, origin, repairs


def _with_ids_only(message: AIMessage, index: int, repairs: list[MessageRepair]) -> AIMessage:
    """`message` without the calls that have no id (no result could ever name them)."""
    calls = [c for c in message.tool_calls if c.get("id")]
    invalid = [c for c in message.invalid_tool_calls if c.get("id")]
    dropped = len(message.tool_calls) - len(calls) + len(message.invalid_tool_calls) - len(invalid)
    if not dropped:
        return message
    repairs.append(
        MessageRepair(index, "call_without_id", f"{dropped} tool call(s) without an id left out")
    )
    return message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": invalid})


def _stray(index: int, result: ToolMessage, *, duplicate: bool) -> MessageRepair:
    if duplicate:
        return MessageRepair(
            index,
            "duplicate_result",
            f"a second result for tool call {result.tool_call_id!r} was kept as a note",
        )
    return MessageRepair(
        index,
        "orphan_result",
        f"the result for tool call {result.tool_call_id!r} answers no call of the preceding "
        "AI message: kept as a note",
    )


def _result_note(result: ToolMessage, *, duplicate: bool) -> HumanMessage:
    """A stray tool result as a human message that says what it is."""
    tool = f" from {result.name}" if result.name else ""
    what = "Another result" if duplicate else "A tool result"
    why = "" if duplicate else ", whose call is not in this conversation"
    head = f"[{what}{tool} for call {result.tool_call_id!r}{why}]"
    return HumanMessage(_prefixed(result.content, head), id=result.id)


def _prefixed(
    content: str | list[str | dict[str, object]], head: str
) -> str | list[str | dict[str, object]]:
    if isinstance(content, str):
        return f"{head}\n{content}" if content else head
    return [{"type": "text", "text": head}, *content]


def _placed(
    messages: list[BaseMessage],
    origin: list[int],
    placement: SystemPlacement,
    repairs: list[MessageRepair],
) -> list[BaseMessage]:
    """System messages after the start kept where the provider takes them, else notes.

    Decided in list order, so a note written for one system message is the human turn
    that the next one may follow (as the provider's adapter would see it).
    """
    if placement == "anywhere":
        return messages
    out: list[BaseMessage] = []
    started = False
    previous: BaseMessage | None = None  # the latest non-system message in `out`
    for index, message in enumerate(messages):
        if not isinstance(message, SystemMessage):
            out.append(message)
            previous, started = message, True
            continue
        if not started or _stays(messages, index, previous, placement):
            out.append(message)
            continue
        note = HumanMessage(_prefixed(message.content, SYSTEM_NOTE), id=message.id)
        out.append(note)
        previous = note
        repairs.append(
            MessageRepair(
                origin[index],
                "system_note",
                "a system message after the conversation began is sent as a human note",
            )
        )
    return out


def _stays(
    messages: list[BaseMessage],
    index: int,
    previous: BaseMessage | None,
    placement: SystemPlacement,
) -> bool:
    if placement != "after_user_turn":
        return False
    after = index + 1
    while after < len(messages) and isinstance(messages[after], SystemMessage):
        after += 1
    precedes_ai = after == len(messages) or isinstance(messages[after], AIMessage)
    return isinstance(previous, (HumanMessage, ToolMessage)) and precedes_ai
