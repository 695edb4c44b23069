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
provider packages (none of them is a dependency).
"""

from __future__ import annotations

from typing import Any, Literal

from langchain_core.runnables import RunnableBinding

__all__ = [
    "MAX_CACHE_BREAKPOINTS",
    "Provider",
    "caches_explicitly",
    "marks_with_cache_points",
    "no_tools_choice",
    "provider_of",
    "requires_human_first",
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
