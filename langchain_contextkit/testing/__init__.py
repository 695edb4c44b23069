"""Fakes for testing graphs and agents offline.

`ScriptedChatModel` is a chat model that answers from a script, supports `bind_tools`
(so `create_agent` accepts it), records every request it receives, and, like a real
provider, rejects a message list with an orphaned tool result or an unanswered tool
call. LangChain's `GenericFakeChatModel` covers plain replies; this one is for agent
loops whose requests you want to inspect.
"""

from __future__ import annotations

# Pydantic resolves the fields' annotations at runtime: these imports must stay real.
from collections.abc import Callable, Sequence  # noqa: TC003
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, PrivateAttr

from langchain_contextkit.errors import (
    ConfigError,
    InvalidMessagesError,
    ScriptExhaustedError,
)
from langchain_contextkit.messages.lists import find_message_problems

if TYPE_CHECKING:
    from langchain_core.callbacks import CallbackManagerForLLMRun
    from langchain_core.runnables import Runnable

__all__ = ["ScriptedChatModel", "ScriptedLLM"]

Reply = str | AIMessage
"""One scripted answer: plain text or a message (tool calls allowed)."""


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script and records what it was asked.

    Answers come from `responses` in order (also the first positional argument, as the
    seed's `ScriptedLLM(["..."])`), or from `respond(messages)` when given (it sees each
    request's messages and may return tool calls). Every request is appended to
    `requests` (the messages) and `request_tools` (the tool schemas bound for it).
    `context_window=` and `max_output_tokens=` set the model's `profile`, which is where
    the window ledger reads them.

    Example:
        ```python
        from langchain_core.messages import HumanMessage

        from langchain_contextkit.testing import ScriptedChatModel, ScriptedLLM

        llm = ScriptedChatModel(["Hello!", "Goodbye!"], context_window=200_000)
        assert llm.invoke([HumanMessage("hi")]).content == "Hello!"
        assert llm.invoke("bye").content == "Goodbye!"
        print(len(llm.requests), llm.requests[0][0].content, llm.profile["max_input_tokens"])
        # 2 hi 200000
        assert ScriptedLLM is ScriptedChatModel
        ```
    """

    def __init__(self, responses: Sequence[Reply] | None = None, /, **data: Any) -> None:  # noqa: ANN401
        """Build from a script: answers in order, or `respond=`, and the model's limits.

        Raises:
            ConfigError: When `context_window` or `max_output_tokens` is not a positive
                int, or they contradict an explicit `profile`.
        """
        if responses is not None:
            if "responses" in data:
                msg = "pass the responses once: positionally or as responses=..."
                raise ConfigError(msg)
            data["responses"] = list(responses)
        limits: dict[str, int] = {}
        for name, key in (
            ("context_window", "max_input_tokens"),
            ("max_output_tokens", "max_output_tokens"),
        ):
            value = data.pop(name, None)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                msg = f"ScriptedChatModel {name} must be a positive int, got {value!r}"
                raise ConfigError(msg)
            limits[key] = value
        if limits:
            profile = dict(data.get("profile") or {})
            clash = {k: v for k, v in limits.items() if profile.get(k, v) != v}
            if clash:
                msg = f"profile= and the limits disagree on {sorted(clash)}"
                raise ConfigError(msg)
            data["profile"] = {**profile, **limits}
        super().__init__(**data)

    responses: list[Reply] = Field(default_factory=list)
    """Answers, in order."""

    respond: Callable[[list[BaseMessage]], Reply] | None = None
    """Computes the answer from the request instead of `responses`."""

    strict: bool = True
    """Reject provider-invalid message lists with `InvalidMessagesError`, as an API would."""

    requests: list[list[BaseMessage]] = Field(default_factory=list)
    """Every request's messages, in call order."""

    request_tools: list[list[dict[str, Any]]] = Field(default_factory=list)
    """The tool schemas bound for each request."""

    _position: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | Any],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,  # noqa: ANN401 - forwarded to bind() as the base class does
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools: their OpenAI schemas reach `_generate` and `request_tools`."""
        schemas = [convert_to_openai_tool(tool) for tool in tools]
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=schemas, **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,  # noqa: ARG002 - part of the interface
        run_manager: CallbackManagerForLLMRun | None = None,  # noqa: ARG002 - the interface
        **kwargs: Any,  # noqa: ANN401 - whatever was bound, as the base class passes it
    ) -> ChatResult:
        if self.strict:
            problems = find_message_problems(messages)
            if problems:
                raise InvalidMessagesError(problems)
        self.requests.append(list(messages))
        self.request_tools.append(list(kwargs.get("tools") or []))
        if self.respond is not None:
            reply = self.respond(list(messages))
        elif self._position < len(self.responses):
            reply = self.responses[self._position]
            self._position += 1
        else:
            msg = f"the script has {len(self.responses)} answers; call {self._position + 1} asked"
            raise ScriptExhaustedError(msg)
        message = AIMessage(reply) if isinstance(reply, str) else reply
        return ChatResult(generations=[ChatGeneration(message=message)])


ScriptedLLM = ScriptedChatModel
"""The seed's name for `ScriptedChatModel`."""
