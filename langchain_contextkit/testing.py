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

from langchain_contextkit.errors import ContextKitError, InvalidMessagesError
from langchain_contextkit.messages import find_message_problems

if TYPE_CHECKING:
    from langchain_core.callbacks import CallbackManagerForLLMRun
    from langchain_core.runnables import Runnable

__all__ = ["ScriptExhaustedError", "ScriptedChatModel"]

Reply = str | AIMessage
"""One scripted answer: plain text or a message (tool calls allowed)."""


class ScriptExhaustedError(ContextKitError):
    """A `ScriptedChatModel` was called more often than its script has answers."""


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script and records what it was asked.

    Answers come from `responses` in order, or from `respond(messages)` when given (it
    sees each request's messages and may return tool calls). Every request is appended to
    `requests` (the messages) and `request_tools` (the tool schemas bound for it).

    Example:
        ```python
        from langchain_core.messages import HumanMessage

        from langchain_contextkit.testing import ScriptedChatModel

        llm = ScriptedChatModel(responses=["Hello!", "Goodbye!"])
        assert llm.invoke([HumanMessage("hi")]).content == "Hello!"
        assert llm.invoke("bye").content == "Goodbye!"
        print(len(llm.requests), llm.requests[0][0].content)
        # 2 hi
        ```
    """

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
