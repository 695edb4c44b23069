"""Message surgery: check a message list the way providers do, and cut it only where safe.

Every compaction, trim and reduction in this library goes through these functions, so
one set of rules decides what a provider would reject:

- system messages appear only at the start;
- every `ToolMessage` answers a tool call of the nearest preceding `AIMessage`, once;
- every tool call of an `AIMessage` is answered before the next non-tool message, so
  parallel calls and their results stay together; `invalid_tool_calls` (arguments that
  were not valid JSON) are calls too, as the providers' adapters send them, and every
  call has an id;
- optionally (Anthropic, Gemini), the first non-system message is a human message.

Where a system message after the start is accepted depends on the provider
(`system_placement_for`); a list that breaks a rule is made valid, for the request only,
by `repair_messages`.

The list is read as *units*: an `AIMessage` with tool calls together with the tool
messages that follow it is one unit; every other message is a unit of its own. Cutting
between units never separates a call from its results.
"""

from __future__ import annotations

import logging
import operator
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_contextkit._message_repair import MessageRepair, RepairKind, repair_walk
from langchain_contextkit._message_rules import (
    CleanScan,
    SystemPlacement,
    call_ids,
    has_tool_calls,
    resume_scan,
    system_in_place,
    system_placement_for,
)
from langchain_contextkit._same_messages import starts_with
from langchain_contextkit.errors import ContextWindowExceeded, InvalidMessagesError
from langchain_contextkit.tokens import (
    REPLY_PRIMING,
    TokenCounter,
    count_tokens,
    message_token_costs,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "CleanScan",
    "MessageProblem",
    "MessageRepair",
    "ProblemCode",
    "RepairKind",
    "SystemPlacement",
    "check_messages",
    "equal_copies",
    "find_message_problems",
    "has_tool_calls",
    "message_costs",
    "next_human_start",
    "repair_messages",
    "resume_scan",
    "safe_cut",
    "split_system",
    "system_placement_for",
    "tail_start",
    "trim_to_budget",
    "unit_starts",
]

ProblemCode = Literal[
    "misplaced_system",
    "orphan_tool_result",
    "duplicate_tool_result",
    "unanswered_tool_call",
    "tool_call_without_id",
    "first_not_human",
]

_logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MessageProblem:
    """One reason a provider would reject a message list.

    Attributes:
        index: Position of the offending message.
        code: A stable machine-readable name for the rule broken.
        detail: A sentence for humans.
    """

    index: int
    code: ProblemCode
    detail: str

    def __str__(self) -> str:
        """Render as ``message 3: detail``."""
        return f"message {self.index}: {self.detail}"


def find_message_problems(
    messages: Sequence[BaseMessage],
    *,
    require_human_first: bool = False,
    allow_pending_tool_calls: bool = False,
    system_messages: SystemPlacement = "leading",
) -> list[MessageProblem]:
    """List every reason a chat provider would reject `messages`.

    Args:
        messages: The list as it would be sent.
        require_human_first: Also require the first non-system message to be a human
            message (Anthropic and Gemini reject anything else).
        allow_pending_tool_calls: Accept tool calls of the *last* unit that have no result
            yet (a graph's state between the model and the tool node); a request sent to
            a provider never allows this.
        system_messages: Where the provider accepts a system message after the start
            (`system_placement_for(model)`); by default nowhere, which every provider
            accepts.

    Returns:
        The problems in list order; empty when the list is valid.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        from langchain_contextkit.messages import find_message_problems

        call = {"name": "search", "args": {}, "id": "c1"}
        ok = [
            HumanMessage("hi"),
            AIMessage("", tool_calls=[call]),
            ToolMessage("r", tool_call_id="c1"),
        ]
        assert find_message_problems(ok) == []
        orphan = [HumanMessage("hi"), ToolMessage("r", tool_call_id="c1")]
        print(find_message_problems(orphan)[0].code)
        # orphan_tool_result
        ```
    """
    if _clean(messages, allow_pending=allow_pending_tool_calls) and not (
        require_human_first and _first_not_human(messages)
    ):
        return []  # the common case, checked by a tight loop; a problem gets the full scan
    scan = _Scan(len(messages), allow_pending_tool_calls=allow_pending_tool_calls)
    for i, message in enumerate(messages):
        scan.visit(i, message)
    scan.close_block(len(messages))
    problems = scan.problems
    if system_messages != "leading":  # some late system messages may stay where they are
        problems = [
            p
            for p in problems
            if p.code != "misplaced_system"
            or not system_in_place(messages, p.index, system_messages)
        ]
    first = scan.first_other
    if require_human_first and first is not None and not isinstance(messages[first], HumanMessage):
        problems.append(
            MessageProblem(
                first,
                "first_not_human",
                f"the first non-system message is {messages[first].type!r}, not 'human'",
            )
        )
    problems.sort(key=lambda p: p.index)
    return problems


def _clean(messages: Sequence[BaseMessage], *, allow_pending: bool) -> bool:
    """Whether `_Scan` would find no problem (the same rules, without reporting any)."""
    scan = resume_scan(CleanScan(), messages)
    return scan is not None and (allow_pending or not scan.open_calls)


def _first_not_human(messages: Sequence[BaseMessage]) -> bool:
    first = next((m for m in messages if not isinstance(m, SystemMessage)), None)
    return first is not None and not isinstance(first, HumanMessage)


class _Scan:
    """One pass over a message list, collecting problems (see `find_message_problems`)."""

    def __init__(self, length: int, *, allow_pending_tool_calls: bool) -> None:
        self.length = length
        self.allow_pending = allow_pending_tool_calls
        self.problems: list[MessageProblem] = []
        self.first_other: int | None = None  # index of the first non-system message
        self.open_calls: dict[str, int] = {}  # call id -> index of the AI message waiting
        self.answered: set[str] = set()
        self.in_block = False  # inside the tool results of an AI message with tool calls

    def visit(self, i: int, message: BaseMessage) -> None:
        if isinstance(message, ToolMessage):
            self._tool_result(i, message.tool_call_id)
        else:
            self.close_block(i)
            if isinstance(message, SystemMessage):
                if self.first_other is not None:
                    self._add(i, "misplaced_system", "system message after the conversation began")
                return
            if has_tool_calls(message):
                self.in_block = True
                for call_id in call_ids(message):
                    if call_id:
                        self.open_calls[call_id] = i
                    else:
                        self._add(i, "tool_call_without_id", "a tool call has no id")
        if self.first_other is None:
            self.first_other = i

    def _tool_result(self, i: int, call_id: str) -> None:
        if self.in_block and call_id in self.open_calls:
            del self.open_calls[call_id]
            self.answered.add(call_id)
        elif self.in_block and call_id in self.answered:
            self._add(i, "duplicate_tool_result", f"tool call {call_id!r} is answered twice")
        else:
            self._add(
                i,
                "orphan_tool_result",
                f"tool result for call {call_id!r} does not answer a tool call "
                "of the preceding AI message",
            )

    def close_block(self, at: int) -> None:
        """The tool block (if any) ends before message `at`: its calls must be answered."""
        pending_ok = self.allow_pending and at == self.length
        for call_id, index in self.open_calls.items():
            if not pending_ok:
                self._add(
                    index,
                    "unanswered_tool_call",
                    f"tool call {call_id!r} has no tool result before the next non-tool message",
                )
        self.open_calls.clear()
        self.answered.clear()
        self.in_block = False

    def _add(self, index: int, code: ProblemCode, detail: str) -> None:
        self.problems.append(MessageProblem(index, code, detail))


def check_messages(
    messages: Sequence[BaseMessage],
    *,
    require_human_first: bool = False,
    allow_pending_tool_calls: bool = False,
    system_messages: SystemPlacement = "leading",
) -> None:
    """Raise if a provider would reject `messages` (the rules of `find_message_problems`).

    Raises:
        InvalidMessagesError: Listing every problem `find_message_problems` found.
    """
    problems = find_message_problems(
        messages,
        require_human_first=require_human_first,
        allow_pending_tool_calls=allow_pending_tool_calls,
        system_messages=system_messages,
    )
    if problems:
        raise InvalidMessagesError(problems)


def repair_messages(
    messages: Sequence[BaseMessage], *, system_messages: SystemPlacement = "leading"
) -> tuple[list[BaseMessage], list[MessageRepair]]:
    """A list the provider accepts, made from `messages` with as few changes as possible.

    For one request: the list given (and whatever stored it) is not changed. A caller's
    history may break the rules of `find_message_problems`; each break is mended so that
    nothing the model wrote or read is lost:

    - a tool call with no result gets an error result (`status="error"`, "No result was
      recorded for this call."), as LangChain's agent answers a call it could not run;
    - a result that answers no call of the preceding AI message (its call was trimmed
      away) or answers one a second time is kept as a human message that says so, after
      the block: dropping it would lose what the tool returned, and the model reads it as
      what it is;
    - a call without an id (nothing can answer it) is left out of its message's copy;
    - a system message after the start that the provider does not take there
      (`system_messages`, see `system_placement_for`) becomes a human message marked
      ``[System note]``, in its place.

    The result has no problem `find_message_problems(..., system_messages=...)` reports
    (`require_human_first` aside), keeps the text of every human and AI message, and is
    its own repair (a second call changes nothing). Messages that needed nothing are the
    very objects given. Repairs of a broken history are logged as a warning.

    Args:
        messages: The list as it would be sent.
        system_messages: Where the provider accepts a system message after the start.

    Returns:
        The list to send and what was changed, in list order (empty when nothing was).

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        from langchain_contextkit.messages import find_message_problems, repair_messages

        calls = [{"name": "search", "args": {}, "id": "c1"}]
        broken = [
            HumanMessage("Find it."),
            AIMessage("", tool_calls=calls),  # never answered
            HumanMessage("Any news?"),
            ToolMessage("late result", tool_call_id="c9"),  # answers nothing
        ]
        fixed, repairs = repair_messages(broken)
        assert find_message_problems(fixed) == []
        print([r.kind for r in repairs])
        # ['unanswered_call', 'orphan_result']
        print([m.type for m in fixed])
        # ['human', 'ai', 'tool', 'human', 'human']
        ```
    """
    if _CLEAN_MEMO.known_clean(messages):
        return list(messages), []
    # The strict rules pass for nearly every list: one scan both decides and is remembered.
    if _CLEAN_MEMO.remember(messages) or not find_message_problems(
        messages, system_messages=system_messages
    ):
        return list(messages), []
    fixed, repairs = repair_walk(messages, system_messages)
    broken = [r for r in repairs if r.kind != "system_note"]
    if broken:
        _logger.warning(
            "repaired the request's messages (the stored history is unchanged): %s",
            "; ".join(map(str, broken)),
        )
    if len(broken) < len(repairs):
        _logger.debug("%d system message(s) sent as notes", len(repairs) - len(broken))
    return fixed, repairs


class _CleanMemo:
    """Each thread's last list found clean, and the rules' state at its end.

    An agent's history only grows: a list that starts with those very objects is
    checked from there on (a pointer comparison, then the new messages only).
    """

    def __init__(self) -> None:
        self._last = threading.local()

    def known_clean(self, messages: Sequence[BaseMessage]) -> bool:
        last: tuple[list[BaseMessage], CleanScan] | None = getattr(self._last, "seen", None)
        if last is None or len(last[0]) > len(messages):
            return False
        known, scan = last
        if not starts_with(messages, known):
            return False
        end = resume_scan(scan, messages[len(known) :])
        if end is None or end.open_calls:
            return False
        self._last.seen = (list(messages), end)
        return True

    def remember(self, messages: Sequence[BaseMessage]) -> bool:
        """Remember `messages` when the strict rules find them clean; say whether they did.

        Clean by the strict rules is clean by every placement `repair_messages` takes.
        """
        scan = resume_scan(CleanScan(), messages)
        if scan is None or scan.open_calls:  # only lists clean by the strict rules
            return False
        self._last.seen = (list(messages), scan)
        return True


_CLEAN_MEMO = _CleanMemo()


def equal_copies(messages: Sequence[BaseMessage], known: Sequence[BaseMessage]) -> bool:
    """Whether `messages` are equal copies of `known`, one for one (as a checkpointer gives).

    Every field compared, in C: each message's type, its field dict (content, ids, tool
    calls, metadata) and its extra fields. Two lists of different lengths are not.
    """
    if len(messages) != len(known):
        return False
    return (
        list(map(type, messages)) == list(map(type, known))
        and list(map(vars, messages)) == list(map(vars, known))
        and list(map(_EXTRA, messages)) == list(map(_EXTRA, known))
    )


_EXTRA = operator.attrgetter("__pydantic_extra__")


def split_system(messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """Split off the leading system messages: `(system prefix, the rest)`."""
    start = 0
    while start < len(messages) and isinstance(messages[start], SystemMessage):
        start += 1
    return list(messages[:start]), list(messages[start:])


def unit_starts(messages: Sequence[BaseMessage]) -> list[int]:
    """Indices where a unit begins: the only places a list may be cut.

    A tool message never starts a unit, so a cut never orphans a result or separates
    parallel results from their call. A stray tool message (an input that was already
    invalid) stays glued to whatever precedes it: cutting cannot make it worse.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        from langchain_contextkit.messages import unit_starts

        calls = [{"name": "a", "args": {}, "id": "1"}, {"name": "b", "args": {}, "id": "2"}]
        messages = [
            HumanMessage("q"),
            AIMessage("", tool_calls=calls),
            ToolMessage("ra", tool_call_id="1"),
            ToolMessage("rb", tool_call_id="2"),
            AIMessage("done"),
        ]
        assert unit_starts(messages) == [0, 1, 4]
        ```
    """
    return [
        i for i, message in enumerate(messages) if not isinstance(message, ToolMessage) or i == 0
    ]


def safe_cut(messages: Sequence[BaseMessage], index: int) -> int:
    """Move a cut at `index` back to the nearest unit start at or before it (0 at worst)."""
    index = max(0, min(index, len(messages)))
    while 0 < index < len(messages) and isinstance(messages[index], ToolMessage):
        index -= 1
    return index


def message_costs(
    messages: Sequence[BaseMessage], counter: TokenCounter = count_tokens
) -> list[int]:
    """Tokens of each message as `count_message_tokens` charges it, without reply priming.

    The costs add up: `sum(costs) + 3 == count_message_tokens(messages, counter)` for a
    non-empty list. Counts are memoised per message content, and what is not yet known is
    counted in one batch.
    """
    return message_token_costs(messages, counter)


def trim_to_budget(
    messages: Sequence[BaseMessage],
    max_tokens: int,
    *,
    counter: TokenCounter = count_tokens,
    require_human_first: bool = False,
) -> list[BaseMessage]:
    """Keep the leading system messages and the longest recent tail that fits.

    Unlike a message-by-message trim, the tail is made of whole units, so it never starts
    with a tool result whose call was cut away and never keeps only
    some of a parallel call's results. With `require_human_first`, the tail also starts at
    a human message.

    Args:
        messages: The conversation.
        max_tokens: Budget for the whole result, as `count_message_tokens` counts it.
        counter: Counts the tokens of one string.
        require_human_first: Start the kept tail at a human message.

    Returns:
        A new list: the system prefix plus the tail; only the system prefix (possibly
        nothing else) when not even the last unit fits.

    Raises:
        ContextWindowExceeded: When the system prefix alone exceeds `max_tokens`.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

        from langchain_contextkit.messages import find_message_problems, trim_to_budget

        call = {"name": "lookup", "args": {"id": 7}, "id": "c7"}
        history = [
            SystemMessage("You are terse."),
            HumanMessage("Look up order 7. " * 20),
            AIMessage("", tool_calls=[call]),
            ToolMessage("Order 7 shipped on 2024-05-02.", tool_call_id="c7"),
            AIMessage("It shipped on 2 May."),
        ]
        trimmed = trim_to_budget(history, 80)
        assert find_message_problems(trimmed) == []
        print([m.type for m in trimmed])
        # ['system', 'ai', 'tool', 'ai']
        ```
    """
    system, rest = split_system(messages)
    # Reply priming is charged once per non-empty list, and an empty list costs nothing.
    system_cost = sum(message_costs(system, counter)) + REPLY_PRIMING if system else 0
    if system_cost > max_tokens:
        msg = (
            f"the system messages alone take {system_cost} tokens, more than the budget "
            f"of {max_tokens}"
        )
        raise ContextWindowExceeded(msg, required=system_cost, budget=max_tokens)
    room = max_tokens - system_cost - (0 if system else REPLY_PRIMING)
    start = tail_start(rest, room, counter=counter) if room >= 0 else len(rest)
    if require_human_first:
        start = next_human_start(rest, start)
    return system + rest[start:]


def tail_start(
    messages: Sequence[BaseMessage],
    budget: int,
    *,
    counter: TokenCounter = count_tokens,
    costs: Sequence[int] | None = None,
    min_units: int = 0,
) -> int:
    """Where the longest tail of whole units within `budget` tokens begins.

    Args:
        messages: Non-system messages.
        budget: Tokens the tail may take (costs without reply priming).
        counter: Counts the tokens of one string (unused when `costs` is given).
        costs: Precomputed `message_costs(messages, counter)`.
        min_units: Keep at least this many units, even over budget.

    Returns:
        An index into `messages` that is a unit start (or `len(messages)` for an empty
        tail).
    """
    if costs is None:
        costs = message_costs(messages, counter)
    starts = unit_starts(messages)
    used = 0
    start = len(messages)
    for units, begin in enumerate(reversed(starts), start=1):
        used += sum(costs[begin:start])
        if used > budget and units > min_units:
            break
        start = begin
    return start


def next_human_start(messages: Sequence[BaseMessage], start: int) -> int:
    """The first index at or after `start` holding a human message (`len` when none)."""
    for i in range(start, len(messages)):
        if isinstance(messages[i], HumanMessage):
            return i
    return len(messages)
