"""What each chat-model provider needs said its own way: "no tools", explicit caching.

The library speaks to any `BaseChatModel`, but a few request details are provider law:

- **"No tools".** A recap request binds the agent's tools (so its prefix is the agent's,
  served from the prompt cache) yet must not call them. OpenAI takes
  ``tool_choice="none"`` and Gemini's adapter maps ``"none"`` to its mode ``NONE``;
  langchain-anthropic reads any string but ``"auto"``/``"any"`` as a tool's *name*
  (``{"type": "tool", "name": "none"}``, refused by Anthropic), so Claude gets the dict
  ``{"type": "none"}``. Bedrock's Converse API has no "none" choice: the tools go
  without a `tool_choice` and the instruction alone says what to do.
- **Explicit caching.** Anthropic (direct, on Bedrock and on Vertex) caches only up to
  breakpoints, at most `MAX_CACHE_BREAKPOINTS` per request: a block's ``cache_control``
  for Anthropic's Messages API, a ``{"cachePoint": ...}`` block for Bedrock's Converse
  API (langchain-aws drops a ``cache_control`` on a text block there); OpenAI
  and Gemini cache a request's prefix without being told (Gemini's explicit
  ``cached_content`` is a separate resource the caller creates, out of this library's
  reach), so for them the byte-stable layout is all there is to do.
- **The first message.** Bedrock's Converse API refuses a conversation whose first
  message is not the user's (Anthropic's API has refused it too: "first message must use
  the user role"); after a compaction the kept history may start with an assistant turn,
  so for Claude and Bedrock the recap goes first as a user message (`requires_human_first`).

The provider is read from the model's class hierarchy and ids, never by importing the
provider packages (none of them is a dependency). `apply_cache_marks` places the
breakpoints where a laid-out request's stable prefix ends (the older turns, then the
recap), within the limit together with a provider's own caching middleware.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableBinding
from langchain_core.tools import BaseTool

from langchain_contextkit.agent.plan import RETRIEVAL_ID
from langchain_contextkit.compaction.recap import is_recap

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from langchain.agents.middleware.types import ModelRequest
    from langchain_core.messages import AnyMessage

    from langchain_contextkit.agent.layout import Layout

__all__ = [
    "DEFAULT_CACHE_CONTROL",
    "MAX_CACHE_BREAKPOINTS",
    "Provider",
    "apply_cache_marks",
    "caches_explicitly",
    "count_cache_marks",
    "layout_ends",
    "mark_message",
    "mark_stable_prefix",
    "marks_with_cache_points",
    "no_tools_choice",
    "provider_of",
    "requires_human_first",
    "stable_prefix_ends",
]


Provider = Literal["anthropic", "bedrock", "openai", "google", "other"]
"""The provider families whose rules differ here."""

MAX_CACHE_BREAKPOINTS = 4
"""Anthropic's limit of ``cache_control`` breakpoints in one request (a top-level
``cache_control``, the automatic tail breakpoint, takes one of them)."""

_CLASS_FAMILIES: dict[str, Provider] = {
    "ChatAnthropic": "anthropic",
    "ChatAnthropicVertex": "anthropic",
    "ChatBedrockConverse": "bedrock",
    "ChatBedrock": "bedrock",
    "BaseChatOpenAI": "openai",
    "ChatOpenAI": "openai",
    "AzureChatOpenAI": "openai",
    "ChatGoogleGenerativeAI": "google",
    "ChatVertexAI": "google",
}


def provider_of(model: object) -> Provider:
    """The provider family of `model` (a chat model, or a binding of one), by class name.

    A subclass counts as its base's family (a stand-in built on `ChatAnthropic` is Claude).
    """
    while isinstance(model, RunnableBinding):  # bind_tools / bind: the model it wraps
        model = model.bound
    for cls in type(model).__mro__:
        family = _CLASS_FAMILIES.get(cls.__name__)
        if family is not None:
            return family
    return "other"


def _model_id(model: object) -> str:
    for name in ("model_id", "model", "model_name"):
        value = getattr(model, name, None)
        if isinstance(value, str):
            return value.lower()
    return ""


def caches_explicitly(model: object) -> bool:
    """Whether `model` caches only up to ``cache_control`` breakpoints (Claude's rule).

    Claude on Bedrock counts (its model id names Anthropic or Claude); other Bedrock
    models do not take the marks.
    """
    family = provider_of(model)
    if family == "anthropic":
        return True
    if family == "bedrock":
        name = _model_id(model)
        return "anthropic" in name or "claude" in name
    return False


def no_tools_choice(model: object) -> str | dict[str, Any] | None:
    """The `tool_choice` that binds tools but forbids calling them, as `model` says it.

    None means: bind the tools without a `tool_choice` (the provider has no such choice;
    the request's instruction asks for text).
    """
    family = provider_of(model)
    if family == "anthropic":
        return {"type": "none"}
    if family == "bedrock":
        return None
    return "none"


def _class_names(model: object) -> set[str]:
    while isinstance(model, RunnableBinding):
        model = model.bound
    return {cls.__name__ for cls in type(model).__mro__}


def marks_with_cache_points(model: object) -> bool:
    """Whether `model`'s breakpoints are Converse ``cachePoint`` blocks (ChatBedrockConverse).

    `ChatBedrock` (InvokeModel) sends Claude Anthropic's own body: ``cache_control`` there.
    """
    return "ChatBedrockConverse" in _class_names(model)


def requires_human_first(model: object) -> bool:
    """Whether `model`'s conversation must open with a user message (Bedrock, Claude).

    Bedrock's Converse API refuses any other; Claude is included wherever it runs, since
    Anthropic's API has refused an assistant turn first, and a recap sent as the first user
    message costs nothing in cache reads (the prefix is as stable as a system recap).
    """
    return provider_of(model) in ("anthropic", "bedrock")


DEFAULT_CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
"""The breakpoint placed: Anthropic's default 5-minute cache."""

_CACHE_POINT: dict[str, dict[str, str]] = {"cachePoint": {"type": "default"}}
"""The breakpoint as Bedrock's Converse API takes it: a block of its own."""


def _blocks_marked(content: object) -> int:
    if not isinstance(content, list):
        return 0
    return sum(
        1
        for block in content
        if isinstance(block, dict) and ("cache_control" in block or "cachePoint" in block)
    )


def _tool_marked(tool: object) -> bool:
    if isinstance(tool, BaseTool):
        return "cache_control" in (tool.extras or {})
    return isinstance(tool, dict) and "cache_control" in tool


def count_cache_marks(
    *,
    system_message: SystemMessage | None,
    tools: Sequence[Any],
    messages: Sequence[BaseMessage],
    model_settings: Mapping[str, Any],
) -> int:
    """Breakpoints a request already carries: blocks, tools and a top-level mark.

    Args:
        system_message: The request's system message.
        tools: Its tools (`BaseTool` extras or schema dicts may hold a mark).
        messages: Its messages.
        model_settings: Its model settings (a top-level ``cache_control`` is one mark).

    Returns:
        How many of Anthropic's `MAX_CACHE_BREAKPOINTS` are taken.
    """
    marks = 1 if model_settings.get("cache_control") else 0
    marks += sum(1 for tool in tools if _tool_marked(tool))
    if system_message is not None:
        marks += _blocks_marked(system_message.content)
    return marks + sum(_blocks_marked(m.content) for m in messages)


def stable_prefix_ends(messages: Sequence[BaseMessage]) -> tuple[int | None, int | None]:
    """Where the recap and the older turns end in an assembled request (indexes).

    The current turn starts at the last human message that is neither the recap nor the
    retrieval block; the older turns end before the block, else before that turn.

    Returns:
        ``(recap, older)``: the recap's index and the older turns' last index, each None
        when the request has none.
    """
    recap = next((i for i, m in enumerate(messages) if is_recap(m)), None)
    block = next((i for i, m in enumerate(messages) if m.id == RETRIEVAL_ID), None)
    turn = next(
        (
            i
            for i in range(len(messages) - 1, -1, -1)
            if isinstance(messages[i], HumanMessage) and i != block and not is_recap(messages[i])
        ),
        None,
    )
    dynamic = [i for i in (block, turn) if i is not None]
    end = (min(dynamic) if dynamic else len(messages)) - 1
    first = -1 if recap is None else recap
    return recap, end if end > first else None


def mark_message(
    message: BaseMessage, cache_control: Mapping[str, Any], *, cache_point: bool = False
) -> BaseMessage | None:
    """A copy of `message` with a breakpoint on its last text block (None: none to mark).

    Only non-empty text blocks take the mark: langchain-anthropic rebuilds ``tool_use``
    blocks from the tool calls (a mark there is lost) and Anthropic refuses empty text.
    A tool message's mark is moved onto its ``tool_result`` by the adapter. With
    `cache_point` the mark is a Converse ``cachePoint`` block right after that text block.
    """
    content = message.content
    blocks: list[Any] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else [*content]
    )
    for index in range(len(blocks) - 1, -1, -1):
        block = blocks[index]
        if (
            isinstance(block, dict)
            and block.get("type") == "text"
            and str(block.get("text", "")).strip()
        ):
            if cache_point:
                blocks.insert(index + 1, {"cachePoint": dict(_CACHE_POINT["cachePoint"])})
            else:
                blocks[index] = {**block, "cache_control": dict(cache_control)}
            return message.model_copy(update={"content": blocks})
    return None


def _without_marks(message: SystemMessage) -> SystemMessage:
    content = message.content
    if not isinstance(content, list):
        return message
    blocks = [
        {k: v for k, v in block.items() if k != "cache_control"}
        if isinstance(block, dict)
        else block
        for block in content
    ]
    return message.model_copy(update={"content": blocks})


def _inner_marks(
    system_message: SystemMessage | None, tools: Sequence[Any], *, cache_point: bool
) -> int:
    """What a caching middleware inside ours may still add: system, last tool, tail.

    Converse: langchain-aws adds its points in the adapter within what is left, system
    and tail first; the tools' point is the one it drops (the system point covers them).
    """
    system = 1 if system_message is not None and system_message.text.strip() else 0
    tool = 1 if tools and isinstance(tools[-1], BaseTool) and not cache_point else 0
    return system + tool + 1


def _mark_back(
    messages: list[BaseMessage],
    last: int,
    first: int,
    cache_control: Mapping[str, Any],
    *,
    cache_point: bool,
) -> bool:
    """Mark the latest markable message in ``messages[first..last]`` in place.

    Returns:
        Whether a new mark was placed (False when none fits or one is there already).
    """
    for index in range(last, first - 1, -1):
        message = messages[index]
        if _blocks_marked(message.content):
            return False  # already ends an entry (two ends fell on one message)
        if isinstance(message, AIMessage) and message.tool_calls:
            continue  # its text precedes its tool calls: the entry would split the pair
        marked = mark_message(message, cache_control, cache_point=cache_point)
        if marked is not None:
            messages[index] = marked
            return True
    return False


def mark_stable_prefix(
    messages: Sequence[BaseMessage],
    *,
    system_message: SystemMessage | None,
    tools: Sequence[Any],
    model_settings: Mapping[str, Any],
    cache_control: Mapping[str, Any] = DEFAULT_CACHE_CONTROL,
    room_for_inner: bool = True,
    cache_point: bool = False,
    ends: tuple[int | None, int | None] | None = None,
) -> tuple[SystemMessage | None, list[BaseMessage]]:
    """Breakpoints at the end of the older turns and of the recap, within the limit.

    Args:
        messages: The assembled request's messages (not modified).
        system_message: Its system message.
        tools: Its tools.
        model_settings: Its model settings.
        cache_control: The mark to place.
        room_for_inner: When the request carries no marks yet, leave room for those a
            caching middleware called after this one may add (False for a request sent
            directly, as a recap request is).
        cache_point: Marks as Converse ``cachePoint`` blocks (`marks_with_cache_points`).
            Bedrock's caching middleware marks inside the adapter, after ours, so its room
            is kept whatever the stacking order, and its top-level setting is no mark.
        ends: Where the recap and the older turns end, as `layout_ends` reads them off
            the request's `Layout` (default: found by `stable_prefix_ends`).

    Returns:
        The system message (its mark moved to the recap when there is one) and the
        messages with the marks.
    """
    marked = list(messages)
    existing = count_cache_marks(
        system_message=system_message,
        tools=tools,
        messages=marked,
        model_settings={} if cache_point else model_settings,
    )
    inner = room_for_inner and (cache_point or not existing)
    reserve = _inner_marks(system_message, tools, cache_point=cache_point) if inner else 0
    free = MAX_CACHE_BREAKPOINTS - existing - reserve
    recap, older = stable_prefix_ends(marked) if ends is None else ends
    if (
        recap is not None
        and system_message is not None
        and _blocks_marked(system_message.content)
        and isinstance(marked[recap], SystemMessage)
    ):
        # The recap follows the prompt in Anthropic's `system`: one entry covers both.
        moved = mark_message(marked[recap], cache_control, cache_point=cache_point)
        if moved is not None:
            free += _blocks_marked(system_message.content) - 1
            system_message = _without_marks(system_message)
            marked[recap] = moved
            recap = None
    first = 0 if recap is None else recap + 1
    if (
        older is not None
        and free > 0
        and _mark_back(marked, older, first, cache_control, cache_point=cache_point)
    ):
        free -= 1
    if recap is not None and free > 0:
        recap_marked = mark_message(marked[recap], cache_control, cache_point=cache_point)
        marked[recap] = recap_marked or marked[recap]
    return system_message, marked


def layout_ends(layout: Layout) -> tuple[int | None, int | None]:
    """`stable_prefix_ends` of a laid-out request, read off its spans.

    The stable prefix is everything before the first dynamic part (the retrieval block
    or the current turn), wherever `lay_out` puts the recap within it.
    """
    recap = layout.end("recap")
    stable = min(layout.spans["retrieval"][0], layout.spans["turn"][0]) - 1
    return recap, stable if stable > (-1 if recap is None else recap) else None


def apply_cache_marks(
    request: ModelRequest[Any], layout: Layout | None = None
) -> ModelRequest[Any]:
    """`request` with its stable prefix marked, when its model caches only at marks.

    A model that caches on its own (OpenAI, Gemini) gets the request unchanged. `layout`
    says where the parts of `request.messages` lie (`lay_out`).
    """
    if not caches_explicitly(request.model):
        return request
    system_message, messages = mark_stable_prefix(
        request.messages,
        system_message=request.system_message,
        tools=request.tools,
        model_settings=request.model_settings,
        cache_point=marks_with_cache_points(request.model),
        ends=None if layout is None else layout_ends(layout),
    )
    return request.override(
        system_message=system_message, messages=cast("list[AnyMessage]", messages)
    )
