"""The providers' message-list rules, as data, and the one scan that reads them.

What the adapters send, read from the adapters themselves (langchain-openai 1.8,
langchain-anthropic 1.7, langchain-google-genai 4.4, langchain-aws):

- **Tool calls.** An `AIMessage`'s `invalid_tool_calls` (arguments that were not valid
  JSON) are sent as calls: `ChatOpenAI` appends them to `tool_calls` with their raw
  argument string, `ChatAnthropic` sends each with an id and a name as a `tool_use`
  block, and LangChain's agent answers each with an error `ToolMessage` carrying its id.
  So they need an answer like any call. A call without an id cannot be answered (OpenAI
  would be sent ``"id": null``).
- **System messages after the conversation began.** `ChatOpenAI` sends them in place and
  OpenAI accepts them anywhere. `ChatAnthropic` sends one in place only when the model's
  profile sets `mid_conversation_system_messages` and it follows a user turn (a human or
  tool message) and precedes an assistant turn or ends the list; otherwise it hoists it
  into the top-level system prompt, and raises when one is already there. Gemini's
  adapter appends it to the system instruction, or drops it when there is none. Every
  other model is assumed to want system messages at the start only.
- **The first turn.** Bedrock's Converse API refuses a conversation that does not open
  with the user; Anthropic's API has refused an assistant turn first.
- **The turn before a call.** Gemini refuses a function-call turn that follows neither a
  user turn nor a function-response turn (`ListRules.call_after`).

`scan` checks a list against a `ListRules` in one pass; `find_message_problems` reports
what it finds and `repair_messages` applies it.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeGuard

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.messages import BaseMessage

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
