"""What the provider adapters send of tool calls and system messages, as plain rules.

Two facts every check, cut and repair of a message list needs, read from the adapters
themselves (langchain-openai 1.8, langchain-anthropic 1.7, langchain-google-genai 4.4):

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
"""

from __future__ import annotations

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

_IN_PLACE_ANYWHERE = frozenset({"openai-chat", "azure-openai-chat"})
"""`_llm_type` of the adapters that send a system message where it sits (`ChatOpenAI`,
`AzureChatOpenAI` and `BaseChatOpenAI`): OpenAI's chat API accepts it at any position."""

_ANTHROPIC = "anthropic-chat"


def has_tool_calls(message: BaseMessage) -> TypeGuard[AIMessage]:
    """Whether `message` is an AI message that calls tools (valid or invalid calls)."""
    return isinstance(message, AIMessage) and bool(message.tool_calls or message.invalid_tool_calls)


def call_ids(message: AIMessage) -> list[str]:
    """Ids of every call of `message` (valid, then invalid), "" for a call without one."""
    return [call.get("id") or "" for call in (*message.tool_calls, *message.invalid_tool_calls)]


def call_names(message: AIMessage) -> dict[str, str]:
    """Tool name of each call of `message` that has an id."""
    names: dict[str, str] = {}
    for call in (*message.tool_calls, *message.invalid_tool_calls):
        call_id = call.get("id")
        if call_id:
            names.setdefault(call_id, call.get("name") or "")
    return names


def system_placement_for(model: object) -> SystemPlacement:
    """Where `model`'s adapter sends a system message after the conversation's start.

    The adapter is known by its `_llm_type` (a chat model bound to tools is read through
    its `bound` model); Anthropic's in-place rule also needs the model's profile to set
    `mid_conversation_system_messages`. Another model whose profile sets that flag is
    taken at its word. Anything unknown (None, a test double, an OpenAI-compatible
    server behind its own adapter, whose chat template may refuse it) gets
    ``"leading"``, which every provider accepts.

    Example:
        ```python
        from langchain_contextkit.messages import system_placement_for

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
    if llm_type in _IN_PLACE_ANYWHERE:
        return "anywhere"
    profile = getattr(model, "profile", None)
    allows = isinstance(profile, Mapping) and bool(profile.get("mid_conversation_system_messages"))
    if not allows:
        return "leading"
    return "after_user_turn" if llm_type == _ANTHROPIC else "anywhere"


def _llm_type(model: object) -> str | None:
    try:
        value = getattr(model, "_llm_type", None)
    except Exception:  # noqa: BLE001 - a property of a foreign model; unknown is the answer
        return None
    return value if isinstance(value, str) else None


def system_in_place(
    messages: Sequence[BaseMessage], index: int, placement: SystemPlacement
) -> bool:
    """Whether the system message at `index`, after the start, may be sent where it sits.

    The neighbours that decide are the nearest non-system messages before and after it
    (consecutive system messages travel together, as Anthropic's adapter sends them).
    """
    if placement == "anywhere":
        return True
    if placement == "leading":
        return False
    before = index - 1
    while before >= 0 and isinstance(messages[before], SystemMessage):
        before -= 1
    after = index + 1
    while after < len(messages) and isinstance(messages[after], SystemMessage):
        after += 1
    follows_user = before >= 0 and isinstance(messages[before], (HumanMessage, ToolMessage))
    precedes_ai = after == len(messages) or isinstance(messages[after], AIMessage)
    return follows_user and precedes_ai


@dataclass(frozen=True, slots=True)
class CleanScan:
    """Where a problem-free scan of a message list stands at its end.

    A list that only grows is checked by resuming from the state its known part ended
    in (`resume_scan`), so a call checks what is new, not the whole window.

    Attributes:
        open_calls: Ids of the tool calls of the last unit not answered yet.
        in_block: Inside the tool results of an AI message with tool calls.
        started: A non-system message has been seen (a system message is then misplaced).
    """

    open_calls: frozenset[str] = frozenset()
    in_block: bool = False
    started: bool = False


def resume_scan(scan: CleanScan, messages: Sequence[BaseMessage]) -> CleanScan | None:
    """The state after `messages`, scanned on from `scan`; None at the first problem.

    The rules of `find_message_problems` (pending tool calls aside: the caller reads
    `open_calls` at the end). Every request the middleware sends is checked, so this is
    one loop with no method calls.

    Example:
        ```python
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

        from langchain_contextkit.messages import CleanScan, resume_scan

        call = {"name": "search", "args": {}, "id": "c1"}
        scan = resume_scan(CleanScan(), [HumanMessage("hi"), AIMessage("", tool_calls=[call])])
        assert scan is not None and scan.open_calls == {"c1"}
        scan = resume_scan(scan, [ToolMessage("r", tool_call_id="c1")])
        assert scan is not None and not scan.open_calls
        assert resume_scan(scan, [ToolMessage("again", tool_call_id="c1")]) is None
        ```
    """
    open_calls = set(scan.open_calls)
    in_block, started = scan.in_block, scan.started
    for message in messages:
        if isinstance(message, ToolMessage):
            call_id = message.tool_call_id
            if not in_block or call_id not in open_calls:
                return None  # an orphan, or a second answer to one call
            open_calls.discard(call_id)
        else:
            if open_calls:
                return None  # a call left unanswered before the next message
            in_block = False
            if isinstance(message, SystemMessage):
                if started:
                    return None  # a system message after the conversation began
                continue
            if isinstance(message, AIMessage) and (
                message.tool_calls or message.invalid_tool_calls
            ):
                in_block = True
                ids = call_ids(message)
                if "" in ids:
                    return None  # a call without an id cannot be answered
                open_calls.update(ids)
        started = True
    return CleanScan(frozenset(open_calls), in_block, started)
