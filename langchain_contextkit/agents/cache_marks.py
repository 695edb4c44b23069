"""Prompt-cache breakpoints where the assembled request's stable prefix ends.

The assembler lays a request out cache-first, ``[system][recap][older turns][retrieval
block][current turn]``: everything before the block is byte-stable between compactions.
Providers that cache only at explicit ``cache_control`` breakpoints (Claude, see
`caches_explicitly`) must be told where that prefix ends, or a request whose retrieval
block changes every turn re-writes its whole prompt at the first call of every turn.

`mark_stable_prefix` places at most two marks, in this order of value:

1. the end of the older turns (the last message before the retrieval block, or before
   the current turn when there is no block): the next turn's request reads everything up
   to there, and any call of this turn reads it too;
2. the end of the recap: read when the older turns grew past Anthropic's 20-block lookback.

Together with langchain-anthropic's ``AnthropicPromptCachingMiddleware`` (system prompt,
last tool, and the request's tail through a top-level ``cache_control``) a request stays
within `MAX_CACHE_BREAKPOINTS`, in either stacking order:

- caching middleware first (outer, recommended): its marks are on the request when ours
  are placed; its system-prompt mark moves to the recap (which follows the prompt in
  Anthropic's ``system``, so the entry covers both), and ours take the slots left;
- ours first (outer): the request carries no marks yet, so ours leave room for what the
  caching middleware may still add (system, last tool, tail).

The marks are content-block fields (``{"type": "text", ..., "cache_control": ...}``) on
copies of the messages; the agent's stored history is never touched. For Bedrock's
Converse API (`marks_with_cache_points`) a mark is a ``{"cachePoint": {"type": "default"}}``
block after the text instead, the form langchain-aws passes on (it drops a text block's
``cache_control``); its ``BedrockPromptCachingMiddleware`` places its own points inside the
adapter, after ours and within the limit, so ours leave room for its system and tail points.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool

from langchain_contextkit.agents.providers import (
    MAX_CACHE_BREAKPOINTS,
    caches_explicitly,
    marks_with_cache_points,
)
from langchain_contextkit.agents.retrieval_block import RETRIEVAL_ID
from langchain_contextkit.compaction.recap import is_recap

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from langchain.agents.middleware.types import ModelRequest
    from langchain_core.messages import AnyMessage

    from langchain_contextkit.agents.layout import Layout

__all__ = [
    "DEFAULT_CACHE_CONTROL",
    "apply_cache_marks",
    "count_cache_marks",
    "layout_ends",
    "mark_message",
    "mark_stable_prefix",
    "stable_prefix_ends",
]

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
    """`stable_prefix_ends` of a laid-out request, read off its spans."""
    recap = layout.end("recap")
    older = layout.spans["older"][1] - 1
    return recap, older if older > (-1 if recap is None else recap) else None


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
