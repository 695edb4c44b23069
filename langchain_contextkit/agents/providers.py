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
  ``cache_control`` breakpoints, at most `MAX_CACHE_BREAKPOINTS` per request; OpenAI
  and Gemini cache a request's prefix without being told (Gemini's explicit
  ``cached_content`` is a separate resource the caller creates, out of this library's
  reach), so for them the byte-stable layout is all there is to do.

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
    "no_tools_choice",
    "provider_of",
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
