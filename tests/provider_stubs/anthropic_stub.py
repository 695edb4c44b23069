"""A local Anthropic Messages API stand-in, with Anthropic's prompt-caching rules.

`AnthropicStub` serves `POST /v1/messages` (non-streaming) on 127.0.0.1, so an agent on
`langchain_anthropic.ChatAnthropic` runs end to end offline; replies come from a
`Responder`, as for `OpenAIStub`. The stub plays the service's part:

- it refuses, with HTTP 400 and Anthropic's error shape (``{"type": "error", "error":
  {"type": "invalid_request_error", "message": ...}}``), a ``system`` role inside
  ``messages``, a ``tool_result`` that does not answer a ``tool_use`` of the assistant
  message just before, a ``tool_use`` left unanswered by the next message, an empty text
  block, a `tool_choice` that is not ``auto``/``any``/``none`` or a ``tool`` it was given
  (``{"type": "tool", "name": "none"}`` included), more than `MAX_CACHE_BREAKPOINTS`
  breakpoints, and a prompt over the window ("prompt is too long: N tokens > W maximum");
  consecutive messages of one role are merged first, as the API does; with
  `require_user_first`, a conversation that does not open with the user (Bedrock's rule,
  and Anthropic's "first message must use the user role");
- it caches as documented: the request is a sequence of blocks (tools, system, then each
  message's content blocks); an entry is written only at a breakpoint (a block's
  ``cache_control``, or the last block for a top-level ``cache_control``) whose prefix
  holds at least `min_cache_tokens`; a breakpoint reads the longest entry found at it or
  up to `lookback` blocks before it. It reports ``cache_read_input_tokens`` (up to the
  hit), ``cache_creation_input_tokens`` (from there to the last breakpoint written) and
  ``input_tokens`` (the rest). Marks are not content: moving one keeps the prefix.

Tokens are cl100k_base tokens of each block's text (tool calls: name and JSON input;
tools: their JSON schema), an approximation of Claude's tokenizer that is stable, which
is what the cache arithmetic needs.

Example:
    ```python
    from provider_stubs.anthropic_stub import AnthropicStub, Reply

    stub = AnthropicStub(lambda kind, messages: Reply(text="Hi!"), window=10_000)
    long = {"type": "text", "text": "word " * 1_200, "cache_control": {"type": "ephemeral"}}
    body = {"model": "m", "max_tokens": 100, "system": [long]}
    first = stub.handle({**body, "messages": [{"role": "user", "content": "Hello"}]})[1]
    again = stub.handle({**body, "messages": [{"role": "user", "content": "Again"}]})[1]
    print(first["usage"]["cache_creation_input_tokens"], again["usage"]["cache_read_input_tokens"])
    none = {"type": "tool", "name": "none"}
    status, refused = stub.handle({**body, "messages": [], "tool_choice": none})
    print(status, refused["error"]["type"])
    # 1201 1201
    # 400 invalid_request_error
    ```
"""

from __future__ import annotations

import hashlib
import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from typing_extensions import Self

from langchain_contextkit.agent.providers import MAX_CACHE_BREAKPOINTS
from provider_stubs._encodings import load_encoding
from provider_stubs._http_stub import JsonRoute
from provider_stubs._script import (
    SUMMARY_REQUEST,
    Kind,
    Reply,
    ToolCall,
    content_text,
)

if TYPE_CHECKING:
    from types import TracebackType

    import tiktoken
    from langchain_anthropic import ChatAnthropic

__all__ = ["AnthropicRecord", "AnthropicResponder", "AnthropicStub", "Reply", "ToolCall"]

AnthropicResponder = Callable[[Kind, list[dict[str, Any]]], Reply]
"""The scripted model: the request's kind and its messages (Anthropic dicts) in, a reply out."""

_DEFAULT_LOOKBACK = 20
_DEFAULT_MIN_CACHE_TOKENS = 1024


@dataclass(slots=True)
class AnthropicRecord:
    """One request as the stub saw it."""

    kind: Kind
    """Who the stub thinks called: ``summary`` for a text-only recap request."""
    status: int
    """200, 400 (refused) or 500 (the responder raised)."""
    input_tokens: int = 0
    """Prompt tokens neither read from nor written to the cache."""
    cache_read: int = 0
    """Prompt tokens read from the cache."""
    cache_write: int = 0
    """Prompt tokens written to the cache (billed at 1.25x)."""
    output_tokens: int = 0
    """Tokens of the reply."""
    error: str = ""
    """Why the request was refused."""
    text: str = field(default="", repr=False)
    """Every message's text, joined."""
    prefix: list[tuple[bytes, int]] = field(default_factory=list, repr=False)
    """Each block's prefix digest (marks left out) and the prompt tokens up to its end:
    two requests share a byte-identical prefix as far as their digests agree."""

    @property
    def prompt_tokens(self) -> int:
        """The whole prompt: plain + read + written."""
        return self.input_tokens + self.cache_read + self.cache_write


class _Refused(Exception):  # noqa: N818 - a refusal, not a bug
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _error_body(message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}


def _blocks_of(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _merged(messages: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Consecutive messages of one role as one, as the API merges them."""
    merged: list[tuple[str, list[dict[str, Any]]]] = []
    for index, message in enumerate(messages):
        role = str(message.get("role"))
        if role not in ("user", "assistant"):
            msg = f'messages.{index}.role: Input should be "user" or "assistant"'
            raise _Refused(msg)
        blocks = _blocks_of(message.get("content"))
        if merged and merged[-1][0] == role:
            merged[-1][1].extend(blocks)
        else:
            merged.append((role, blocks))
    return merged


def _check_first(merged: list[tuple[str, list[dict[str, Any]]]], *, required: bool) -> None:
    if required and merged and merged[0][0] != "user":
        msg = 'messages: first message must use the "user" role'
        raise _Refused(msg)


def _check_blocks(merged: list[tuple[str, list[dict[str, Any]]]]) -> None:
    asked: set[str] = set()  # tool_use ids of the assistant message just before
    for index, (role, blocks) in enumerate(merged):
        for block in blocks:
            if block.get("type") == "text" and not str(block.get("text", "")).strip():
                msg = f"messages.{index}: text content blocks must be non-empty"
                raise _Refused(msg)
        if role == "user":
            answered = {str(b.get("tool_use_id")) for b in blocks if b.get("type") == "tool_result"}
            if answered - asked:
                msg = (
                    f"messages.{index}: unexpected `tool_use_id` found in `tool_result` "
                    "blocks. Each `tool_result` block must have a corresponding `tool_use` "
                    "block in the previous message."
                )
                raise _Refused(msg)
            if asked - answered:
                msg = (
                    f"messages.{index}: `tool_use` ids were found without `tool_result` "
                    f"blocks immediately after: {', '.join(sorted(asked - answered))}"
                )
                raise _Refused(msg)
            asked = set()
        else:
            if asked:
                msg = f"messages.{index}: `tool_use` blocks need `tool_result` blocks after them"
                raise _Refused(msg)
            asked = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}


def _check_tool_choice(choice: object, tools: list[dict[str, Any]]) -> None:
    if choice is None:
        return
    names = {str(tool.get("name")) for tool in tools}
    fields: dict[str, Any] = choice if isinstance(choice, dict) else {}
    kind = fields.get("type")
    if kind not in ("auto", "any", "none", "tool"):
        msg = f"tool_choice: Input tag {kind!r} does not match 'auto', 'any', 'tool', 'none'"
        raise _Refused(msg)
    if kind == "tool" and str(fields.get("name")) not in names:
        msg = f"tool_choice: tool {fields.get('name')!r} not found in tools"
        raise _Refused(msg)
    if kind in ("any", "tool") and not tools:
        msg = "tool_choice may only be specified while providing tools"
        raise _Refused(msg)


def _block_text(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind == "tool_use":
        return f"{block.get('name')} {json.dumps(block.get('input'), sort_keys=True)}"
    if kind == "tool_result":
        return content_text(block.get("content"))
    return json.dumps({k: v for k, v in block.items() if k != "cache_control"}, sort_keys=True)


@dataclass(frozen=True, slots=True)
class _Block:
    key: bytes
    """The prefix's digest up to and including this block."""
    tokens: int
    """Tokens of the prefix up to and including this block."""
    marked: bool


class AnthropicStub:
    """A Messages API server on 127.0.0.1 with Anthropic's checks and prompt cache.

    See the module. Every instance has its own cache (no expiry: a run is minutes).
    """

    def __init__(
        self,
        respond: AnthropicResponder,
        *,
        window: int,
        min_cache_tokens: int = _DEFAULT_MIN_CACHE_TOKENS,
        lookback: int = _DEFAULT_LOOKBACK,
        encoding: str | tiktoken.Encoding = "cl100k_base",
        require_user_first: bool = False,
    ) -> None:
        """Configure the stub; nothing listens until `start` (or `with`).

        Args:
            respond: The scripted model: kind and messages in, reply out.
            window: The context window in tokens.
            min_cache_tokens: The shortest prefix an entry is written for.
            lookback: How many blocks before a breakpoint an entry is looked for.
            encoding: The tokenizer, or its name.
            require_user_first: Refuse a conversation whose first message is not the user's.

        Raises:
            ValueError: When `window` is not positive.
        """
        if window < 1:
            msg = f"window must be >= 1, got {window}."
            raise ValueError(msg)
        self.respond = respond
        self.window = window
        self.min_cache_tokens = min_cache_tokens
        self.lookback = lookback
        self.require_user_first = require_user_first
        self.records: list[AnthropicRecord] = []
        self._encoding = load_encoding(encoding) if isinstance(encoding, str) else encoding
        self._entries: set[bytes] = set()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()  # the cache depends on the arrival order
        self._route: JsonRoute | None = None

    @property
    def base_url(self) -> str:
        """What `ChatAnthropic(base_url=...)` takes.

        Raises:
            RuntimeError: When the stub is not started.
        """
        if self._route is None:
            msg = "The stub is not started."
            raise RuntimeError(msg)
        return self._route.origin

    def chat_model(self, *, max_tokens: int, model: str = "claude-sonnet-4-5") -> ChatAnthropic:
        """A `ChatAnthropic` on this stub: no retries, the stub's window in its profile.

        Raises:
            RuntimeError: When the stub is not started.
        """
        from langchain_anthropic import ChatAnthropic

        return ChatAnthropic(
            model=model,
            base_url=self.base_url,
            api_key="x",
            max_tokens=max_tokens,
            max_retries=0,
            profile={"max_input_tokens": self.window, "max_output_tokens": max_tokens},
        )

    def start(self) -> Self:
        """Listen on a free port of 127.0.0.1."""
        self._route = JsonRoute(
            "/v1/messages", self.handle, bad_json=_error_body, name="anthropic-stub"
        )
        return self

    def close(self) -> None:
        """Stop serving."""
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

    def handle(
        self, body: dict[str, Any], *, kind: Kind | None = None
    ) -> tuple[int, dict[str, Any]]:
        """Answer one decoded request body, as the server does.

        Args:
            body: The Messages API request body.
            kind: Who called, when the caller knows better than the body says (a
                Converse recap request binds tools without a "none" choice).

        Returns:
            The HTTP status and the response body.
        """
        with self._lock:
            return self._handle(body, kind)

    def _handle(self, body: dict[str, Any], kind: Kind | None) -> tuple[int, dict[str, Any]]:
        messages: list[dict[str, Any]] = body.get("messages") or []
        tools: list[dict[str, Any]] = body.get("tools") or []
        text = "\n".join(content_text(m.get("content")) for m in messages)
        kind = kind or _kind(body, tools, messages, text)
        record = AnthropicRecord(kind=kind, status=400, text=text)
        self.records.append(record)
        try:
            merged = _merged(messages)
            _check_first(merged, required=self.require_user_first)
            _check_blocks(merged)
            _check_tool_choice(body.get("tool_choice"), tools)
            blocks = self._blocks(body, tools, merged)
            self._check_size(body, blocks)
        except _Refused as refused:
            record.error = refused.message
            return 400, _error_body(refused.message)
        record.prefix = [(block.key, block.tokens) for block in blocks]
        self._bill(blocks, record)
        try:
            reply = self.respond(kind, messages)
        except Exception as exc:  # noqa: BLE001 - a broken script fails the call, not the server
            record.status, record.error = 500, f"{type(exc).__name__}: {exc}"
            return 500, {"type": "error", "error": {"type": "api_error", "message": record.error}}
        record.status = 200
        return 200, self._message(body, reply, record)

    def _blocks(
        self,
        body: dict[str, Any],
        tools: list[dict[str, Any]],
        merged: list[tuple[str, list[dict[str, Any]]]],
    ) -> list[_Block]:
        system = body.get("system")
        parts: list[tuple[str, dict[str, Any]]] = [("tools", tool) for tool in tools]
        parts += [("system", block) for block in _blocks_of(system or [])]
        parts += [(role, block) for role, blocks in merged for block in blocks]
        marks = sum(1 for _, block in parts if "cache_control" in block)
        top = bool(body.get("cache_control"))
        if marks + top > MAX_CACHE_BREAKPOINTS:
            msg = (
                f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be "
                f"provided. Found {marks + top}."
            )
            raise _Refused(msg)
        digest = hashlib.sha256()
        tokens = 0
        result: list[_Block] = []
        for index, (role, block) in enumerate(parts):
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            digest.update(json.dumps([role, plain], sort_keys=True).encode())
            tokens += len(self._encoding.encode_ordinary(_block_text(plain)))
            marked = "cache_control" in block or (top and index == len(parts) - 1)
            result.append(_Block(digest.copy().digest(), tokens, marked))
        return result

    def _check_size(self, body: dict[str, Any], blocks: list[_Block]) -> None:
        prompt = blocks[-1].tokens if blocks else 0
        if prompt > self.window:
            msg = f"prompt is too long: {prompt} tokens > {self.window} maximum"
            raise _Refused(msg)
        asked = body.get("max_tokens")
        if isinstance(asked, int) and prompt + asked > self.window:
            msg = (
                f"input length and `max_tokens` exceed context limit: {prompt} + {asked} > "
                f"{self.window}, decrease input length or `max_tokens` and try again"
            )
            raise _Refused(msg)

    def _bill(self, blocks: list[_Block], record: AnthropicRecord) -> None:
        """Read the longest entry a breakpoint finds, write entries at the breakpoints."""
        marks = [i for i, block in enumerate(blocks) if block.marked]
        read = 0
        for mark in marks:
            for index in range(mark, max(-1, mark - self.lookback), -1):
                if blocks[index].key in self._entries:
                    read = max(read, blocks[index].tokens)
                    break
        written = read
        for mark in marks:
            block = blocks[mark]
            if block.tokens >= self.min_cache_tokens and block.tokens > read:
                self._entries.add(block.key)
                written = max(written, block.tokens)
            elif block.tokens >= self.min_cache_tokens:
                self._entries.add(block.key)  # a read refreshes the entry
        total = blocks[-1].tokens if blocks else 0
        record.cache_read, record.cache_write = read, written - read
        record.input_tokens = total - written

    def _message(
        self, body: dict[str, Any], reply: Reply, record: AnthropicRecord
    ) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        content += [
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.args}
            for call in reply.tool_calls
        ]
        record.output_tokens = sum(
            len(self._encoding.encode_ordinary(_block_text(b))) for b in content
        )
        return {
            "id": f"msg_stub_{next(self._ids)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "stub"),
            "content": content,
            "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": record.input_tokens,
                "output_tokens": record.output_tokens,
                "cache_creation_input_tokens": record.cache_write,
                "cache_read_input_tokens": record.cache_read,
            },
        }


def _kind(
    body: dict[str, Any], tools: list[dict[str, Any]], messages: list[dict[str, Any]], text: str
) -> Kind:
    choice = body.get("tool_choice")
    if tools and not (isinstance(choice, dict) and choice.get("type") == "none"):
        return "agent"
    asked = content_text(messages[-1].get("content")) if tools and messages else text
    return "summary" if SUMMARY_REQUEST.search(asked) else "other"
