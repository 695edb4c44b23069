"""Message surgery: check a message list the way providers do, and cut it only where safe.

Every compaction, trim and reduction in this library goes through these functions, so
one set of rules decides what a provider would reject:

- system messages appear only at the start;
- every `ToolMessage` answers a tool call of the nearest preceding `AIMessage`, once;
- every tool call of an `AIMessage` is answered before the next non-tool message, so
  parallel calls and their results stay together; `invalid_tool_calls` (arguments that
  were not valid JSON) are calls too, as the providers' adapters send them, and every
  call has an id;
- optionally (Anthropic, Bedrock), the first non-system message is a human message.

Where a system message after the start is accepted depends on the provider
(`system_placement_for`); a list that breaks a rule is made valid, for the request only,
by `repair_messages`. Both read one scan of the rules (`_message_rules`).

The list is read as *units*: an `AIMessage` with tool calls together with the tool
messages that follow it is one unit; every other message is a unit of its own. Cutting
between units never separates a call from its results.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeGuard

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from langchain_contextkit.errors import ContextWindowExceeded, InvalidMessagesError
from langchain_contextkit.tokens.count import (
    REPLY_PRIMING,
    TokenCounter,
    count_tokens,
    message_token_costs,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.messages import BaseMessage

__all__ = [
    "CleanScan",
    "ListRules",
    "MessageProblem",
    "MessageRepair",
    "ProblemCode",
    "RepairKind",
    "SystemPlacement",
    "check_messages",
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


_logger = logging.getLogger(__name__)


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
            message (Anthropic and Bedrock reject anything else).
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

        from langchain_contextkit.messages.lists import find_message_problems

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
    rules = ListRules(
        system=system_messages,
        human_first=require_human_first,
        pending_calls=allow_pending_tool_calls,
    )
    return scan(messages, rules)[0]


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


def repair_messages(
    messages: Sequence[BaseMessage], *, system_messages: SystemPlacement = "leading"
) -> tuple[list[BaseMessage], list[MessageRepair]]:
    """A list the provider accepts, made from `messages` with as few changes as possible.

    For one request: the list given (and whatever stored it) is not changed. A caller's
    history may break the rules of `find_message_problems`; each problem found is mended
    so that nothing the model wrote or read is lost:

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

        from langchain_contextkit.messages.lists import find_message_problems, repair_messages

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
    problems = find_message_problems(messages, system_messages=system_messages)
    if not problems:
        return list(messages), []
    fixed, repairs = _applied(messages, problems)
    broken = [r for r in repairs if r.kind != "system_note"]
    if broken:
        _logger.warning(
            "repaired the request's messages (the stored history is unchanged): %s",
            "; ".join(map(str, broken)),
        )
    if len(broken) < len(repairs):
        _logger.debug("%d system message(s) sent as notes", len(repairs) - len(broken))
    return fixed, repairs


def _applied(
    messages: Sequence[BaseMessage], problems: list[MessageProblem]
) -> tuple[list[BaseMessage], list[MessageRepair]]:
    """`messages` with each problem of the scan mended (see `repair_messages`).

    A stray result inside a tool block is moved after the block: a human message inside
    it would close the block before the calls still waiting for their results.
    """
    by_index: dict[int, list[MessageProblem]] = {}
    for problem in problems:
        by_index.setdefault(problem.index, []).append(problem)
    out: list[BaseMessage] = []
    repairs: list[MessageRepair] = []
    due: list[BaseMessage] = []  # error results and notes that go after the open block
    in_block = False
    for i, message in enumerate(messages):
        found = by_index.get(i, ())
        if isinstance(message, ToolMessage):
            if not found:
                out.append(message)
                continue
            duplicate = found[0].code == "duplicate_tool_result"
            (due if in_block else out).append(_result_note(message, duplicate=duplicate))
            repairs.append(_stray(i, message, duplicate=duplicate))
            continue
        out += due
        due = []
        in_block = has_tool_calls(message)
        if isinstance(message, SystemMessage) and found:
            out.append(HumanMessage(_prefixed(message.content, SYSTEM_NOTE), id=message.id))
            repairs.append(MessageRepair(i, "system_note", _NOTE_DETAIL))
            continue
        if found and has_tool_calls(message):
            message = _mended_calls(message, i, found, due, repairs)  # noqa: PLW2901 - its copy
        out.append(message)
    out += due
    repairs.sort(key=_REPAIR_INDEX)
    return out, repairs


def _mended_calls(
    message: AIMessage,
    index: int,
    found: Sequence[MessageProblem],
    due: list[BaseMessage],
    repairs: list[MessageRepair],
) -> AIMessage:
    """`message` without its calls that have no id; an error result due for each unanswered."""
    calls = (*message.tool_calls, *message.invalid_tool_calls)
    dropped = sum(not call.get("id") for call in calls)
    if dropped:
        repairs.append(
            MessageRepair(
                index, "call_without_id", f"{dropped} tool call(s) without an id left out"
            )
        )
        message = message.model_copy(
            update={
                "tool_calls": [c for c in message.tool_calls if c.get("id")],
                "invalid_tool_calls": [c for c in message.invalid_tool_calls if c.get("id")],
            }
        )
    names = {call.get("id"): call.get("name") or "" for call in reversed(calls)}
    for problem in found:
        if problem.code != "unanswered_tool_call":
            continue
        name = names.get(problem.call_id, "")
        due.append(
            ToolMessage(NO_RESULT, tool_call_id=problem.call_id, name=name or None, status="error")
        )
        detail = (
            f"tool call {problem.call_id!r} ({name or 'unnamed'}) had no result: "
            "an error result was added"
        )
        repairs.append(MessageRepair(index, "unanswered_call", detail))
    return message


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


_NOTE_DETAIL = "a system message after the conversation began is sent as a human note"
_REPAIR_INDEX = operator.attrgetter("index")


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

        from langchain_contextkit.messages.lists import unit_starts

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

        from langchain_contextkit.messages.lists import find_message_problems, trim_to_budget

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


SystemPlacement = Literal["anywhere", "after_user_turn", "leading"]
"""Where a model's adapter sends a system message that follows the conversation's start.

- ``"anywhere"``: in place, wherever it sits (OpenAI).
- ``"after_user_turn"``: in place right after a human or tool message and before an AI
  message or the end (Anthropic models whose profile allows it).
- ``"leading"``: only at the start; elsewhere it is rejected, hoisted or dropped by the
  adapter, so the request carries it as a human message marked as a system note.
"""

ProblemCode = Literal[
    "misplaced_system",
    "orphan_tool_result",
    "duplicate_tool_result",
    "unanswered_tool_call",
    "tool_call_without_id",
    "first_not_human",
    "call_not_after_user",
]

_USER_TURN = (HumanMessage, ToolMessage)


@dataclass(frozen=True, slots=True)
class ListRules:
    """What one provider accepts in a message list, beyond the rules every provider has.

    Every provider requires each tool call to have an id and be answered once, by a
    result right after its AI message, before the next other message; these fields are
    what differs.
    """

    system: SystemPlacement = "leading"
    """Where a system message after the conversation's start may stay."""
    human_first: bool = False
    """The first non-system message must be a human message (Bedrock Converse, Claude)."""
    call_after: tuple[type[BaseMessage], ...] | None = None
    """The messages an AI message with tool calls may follow, None for any. Gemini's rule
    (a function call follows a user turn or a function response) is
    ``(HumanMessage, ToolMessage)``."""
    pending_calls: bool = False
    """Accept tool calls of the last unit that have no result yet (a graph's state between
    the model and the tool node; never a request)."""


PROVIDER_RULES: Mapping[str, ListRules] = {
    "openai-chat": ListRules(system="anywhere"),
    "azure-openai-chat": ListRules(system="anywhere"),
    "anthropic-chat": ListRules(human_first=True),
    "amazon_bedrock_converse_chat": ListRules(human_first=True),
}
"""Each adapter's rules, by its `_llm_type`. Anthropic's system placement also depends on
the model's profile (`system_placement_for`)."""

_IN_PLACE_WITH_PROFILE: Mapping[str, SystemPlacement] = {"anthropic-chat": "after_user_turn"}
"""Where a system message may stay when the model's profile sets
`mid_conversation_system_messages` (any other adapter that sets it: anywhere)."""


@dataclass(frozen=True, slots=True)
class MessageProblem:
    """One reason a provider would reject a message list.

    Attributes:
        index: Position of the offending message.
        code: A stable machine-readable name for the rule broken.
        detail: A sentence for humans.
        call_id: The tool call concerned ("" when none), which the repair reads.
    """

    index: int
    code: ProblemCode
    detail: str
    call_id: str = ""

    def __str__(self) -> str:
        """Render as ``message 3: detail``."""
        return f"message {self.index}: {self.detail}"


@dataclass(frozen=True, slots=True)
class CleanScan:
    """Where a scan of a message list stands at its end, to go on from there.

    Attributes:
        open_calls: Ids of the tool calls of the last unit not answered yet.
        in_block: Inside the tool results of an AI message with tool calls.
        started: A non-system message has been seen (a system message is then misplaced).
    """

    open_calls: frozenset[str] = frozenset()
    in_block: bool = False
    started: bool = False


_START = CleanScan()


def has_tool_calls(message: BaseMessage) -> TypeGuard[AIMessage]:
    """Whether `message` is an AI message that calls tools (valid or invalid calls)."""
    return isinstance(message, AIMessage) and bool(message.tool_calls or message.invalid_tool_calls)


def scan(
    messages: Sequence[BaseMessage],
    rules: ListRules,
    start: CleanScan | None = None,
    *,
    first_only: bool = False,
) -> tuple[list[MessageProblem], CleanScan]:
    """Check `messages` against `rules` in one pass: every problem, in list order.

    Args:
        messages: The list (or the part of it after `start`).
        rules: The provider's rules.
        start: The state a scan of the messages before these ended in (None: these
            messages are the whole list).
        first_only: Stop at the first problem (a caller that only asks "clean?").

    Returns:
        The problems sorted by index, and the state at the end (meaningful when there
        were none).
    """
    walk = _Walk(rules, start or _START)
    problems = walk.problems
    for i, message in enumerate(messages):
        if first_only and problems:
            return problems, walk.state()
        walk.visit(i, message)
    walk.end()
    if rules.human_first and walk.first is not None and walk.first >= 0:
        first = messages[walk.first]
        if not isinstance(first, HumanMessage):
            problems.append(MessageProblem(walk.first, "first_not_human", _NOT_HUMAN % first.type))
    problems.sort(key=_INDEX)
    return problems, walk.state()


class _Walk:
    """`scan`'s state between two messages."""

    __slots__ = (
        "add",
        "answered",
        "first",
        "in_block",
        "late",
        "open_calls",
        "previous",
        "problems",
        "rules",
        "started",
    )

    def __init__(self, rules: ListRules, start: CleanScan) -> None:
        self.rules = rules
        self.problems: list[MessageProblem] = []
        self.add = self.problems.append
        self.open_calls: dict[str, int] = dict.fromkeys(start.open_calls, -1)  # id -> AI index
        self.answered: set[str] = set()
        self.in_block, self.started = start.in_block, start.started
        self.first: int | None = -1 if start.started else None  # the first non-system message
        self.previous: BaseMessage | None = None  # the latest non-system message
        self.late: list[int] = []  # late system messages waiting for their next neighbour

    def visit(self, i: int, message: BaseMessage) -> None:
        is_result = isinstance(message, ToolMessage)
        if self.in_block and not is_result:
            self.close_block()
        if isinstance(message, SystemMessage):
            if self.started:
                self.late.append(i)
            return
        if self.late:
            self.settle(message)
        if is_result:
            self.result(i, message.tool_call_id)  # type: ignore[attr-defined]
        elif isinstance(message, AIMessage) and (message.tool_calls or message.invalid_tool_calls):
            self.calls(i, message)
        if self.first is None:
            self.first = i
        self.started = True
        self.previous = message

    def result(self, i: int, call_id: str) -> None:
        if call_id in self.open_calls:
            del self.open_calls[call_id]
            self.answered.add(call_id)
        elif call_id in self.answered:
            self.add(MessageProblem(i, "duplicate_tool_result", _TWICE % call_id, call_id))
        else:
            self.add(MessageProblem(i, "orphan_tool_result", _ORPHAN % call_id, call_id))

    def calls(self, i: int, message: AIMessage) -> None:
        after = self.rules.call_after
        if after is not None and not isinstance(self.previous, after):
            self.add(MessageProblem(i, "call_not_after_user", _NOT_AFTER_USER))
        self.in_block = True
        for call in (*message.tool_calls, *message.invalid_tool_calls):
            call_id = call.get("id")
            if call_id:
                self.open_calls[call_id] = i
            else:
                self.add(MessageProblem(i, "tool_call_without_id", "a tool call has no id"))

    def close_block(self) -> None:
        """The tool block ends: its calls must have been answered."""
        for call_id, at in self.open_calls.items():
            self.add(_unanswered(at, call_id))
        self.open_calls.clear()
        self.answered.clear()
        self.in_block = False

    def settle(self, after: BaseMessage | None) -> None:
        """Decide the late system messages before `after` (None: the end of the list).

        Consecutive system messages travel together, as Anthropic's adapter sends them,
        so the nearest non-system messages on either side decide for all of them.
        """
        placement = self.rules.system
        stays = placement == "anywhere" or (
            placement == "after_user_turn"
            and isinstance(self.previous, _USER_TURN)
            and (after is None or isinstance(after, AIMessage))
        )
        if not stays:
            for index in self.late:
                self.add(MessageProblem(index, "misplaced_system", _LATE_SYSTEM))
        self.late.clear()

    def end(self) -> None:
        if self.late:
            self.settle(None)
        if not self.rules.pending_calls and self.open_calls:
            self.close_block()

    def state(self) -> CleanScan:
        return CleanScan(frozenset(self.open_calls), self.in_block, self.started)


def _unanswered(index: int, call_id: str) -> MessageProblem:
    detail = f"tool call {call_id!r} has no tool result before the next non-tool message"
    return MessageProblem(index, "unanswered_tool_call", detail, call_id)


_INDEX = operator.attrgetter("index")
_TWICE = "tool call %r is answered twice"
_ORPHAN = "tool result for call %r does not answer a tool call of the preceding AI message"
_NOT_AFTER_USER = "a tool-calling AI message follows neither a user turn nor a tool result"
_NOT_HUMAN = "the first non-system message is %r, not 'human'"
_LATE_SYSTEM = "system message after the conversation began"


def resume_scan(state: CleanScan, messages: Sequence[BaseMessage]) -> CleanScan | None:
    """The state after `messages`, scanned on from `state`; None at the first problem.

    The strict rules (every provider's), with the last unit's calls allowed to wait: the
    caller reads `open_calls` at the end.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        from langchain_contextkit.messages.lists import CleanScan, resume_scan

        call = {"name": "search", "args": {}, "id": "c1"}
        scan = resume_scan(CleanScan(), [HumanMessage("hi"), AIMessage("", tool_calls=[call])])
        assert scan is not None and scan.open_calls == {"c1"}
        scan = resume_scan(scan, [ToolMessage("r", tool_call_id="c1")])
        assert scan is not None and not scan.open_calls
        assert resume_scan(scan, [ToolMessage("again", tool_call_id="c1")]) is None
        ```
    """
    problems, end = scan(messages, _RESUMABLE, state, first_only=True)
    return None if problems else end


_RESUMABLE = ListRules(pending_calls=True)


def system_placement_for(model: object) -> SystemPlacement:
    """Where `model`'s adapter sends a system message after the conversation's start.

    The adapter is known by its `_llm_type` (a chat model bound to tools is read through
    its `bound` model) and looked up in `PROVIDER_RULES`; Anthropic's in-place rule also
    needs the model's profile to set `mid_conversation_system_messages`. Another model
    whose profile sets that flag is taken at its word. Anything unknown (None, a test
    double, an OpenAI-compatible server behind its own adapter, whose chat template may
    refuse it) gets ``"leading"``, which every provider accepts.

    Example:
        ```python
        from langchain_contextkit.messages.lists import system_placement_for

        print(system_placement_for(None))
        # leading
        ```
    """
    for _ in range(4):  # RunnableBinding around the model, possibly nested
        bound = getattr(model, "bound", None)
        if bound is None:
            break
        model = bound
    llm_type = _llm_type(model)
    placement = PROVIDER_RULES.get(llm_type or "", ListRules()).system
    if placement != "leading":
        return placement
    profile = getattr(model, "profile", None)
    if isinstance(profile, Mapping) and profile.get("mid_conversation_system_messages"):
        return _IN_PLACE_WITH_PROFILE.get(llm_type or "", "anywhere")
    return "leading"


def _llm_type(model: object) -> str | None:
    try:
        value = getattr(model, "_llm_type", None)
    except Exception:  # noqa: BLE001 - a property of a foreign model; unknown is the answer
        return None
    return value if isinstance(value, str) else None
