"""`contextkit build`: chunk a folder, rank it with BM25, assemble a prompt under a budget.

Bad input raises `BuildInputError` or a library error, printed as one line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_contextkit.errors import (
    BuildInputError,
    ConfigError,
    ContextKitError,
    ContextWindowExceeded,
)
from langchain_contextkit.messages.lists import trim_to_budget
from langchain_contextkit.prompts import PromptRegistry
from langchain_contextkit.retrieval.budget import DEFAULT_SOURCE_RATIOS, ContextConfig
from langchain_contextkit.retrieval.builder.runnable import ContextBuilder
from langchain_contextkit.retrieval.result import RetrievalResult
from langchain_contextkit.retrieval.sources.callable import CallableSource
from langchain_contextkit.retrieval.sources.chunking import DEFAULT_CHUNK_TOKENS
from langchain_contextkit.retrieval.sources.docs import DocsIndex, DocsSource
from langchain_contextkit.retrieval.sources.folder import (
    DEFAULT_SUFFIXES,
    LoadedFolder,
    load_folder,
)
from langchain_contextkit.tokens.count import count_tokens

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_contextkit.retrieval.builder.report import ContextReport
    from langchain_contextkit.retrieval.sources.base import ContextSource

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "DEFAULT_TOP",
    "DEFAULT_WINDOW",
    "HISTORY_HELP",
    "BuildRequest",
    "run_build",
]

DEFAULT_WINDOW = 8192
"""The model window assumed when `--window` is not given (a note says so on stderr)."""

DEFAULT_TOP = 10
"""BM25 candidates handed to the builder."""

DEFAULT_SYSTEM_PROMPT = (
    "Answer the current question from the knowledge below and name the file each fact "
    "comes from. If the knowledge does not answer it, say so."
)

HISTORY_HELP = (
    'a JSON list of {"role": "user" | "assistant", "content": "..."} objects, oldest first; '
    "the most recent messages that fit the history quota join the prompt"
)

_ROLES = frozenset({"user", "assistant"})

_SOURCE_RATIOS = {name: DEFAULT_SOURCE_RATIOS[name] for name in ("rag", "history")}
"""The two sources the command fills, at their seed shares (so their quotas are the seed's).

The seed's ``memory`` and ``tool`` shares are left out: the command has neither, and
`ContextConfig` requires every quota it names to hold one candidate, so theirs would set
the smallest window that works. Their tokens are lent to these two as they were before.
"""


@dataclass(frozen=True, kw_only=True, slots=True)
class BuildRequest:
    """The arguments of one `contextkit build`."""

    query: str
    docs: str
    history: str | None = None
    window: int | None = None
    top: int = DEFAULT_TOP
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    as_json: bool = False


@dataclass(frozen=True, slots=True)
class _Built:
    request: BuildRequest
    window: int
    config: ContextConfig
    folder: LoadedFolder
    history_messages: int
    history_offered: int
    report: ContextReport


def run_build(request: BuildRequest, *, out: TextIO, err: TextIO) -> int:
    """Run the command; return the exit status (1 for bad input, with one line on `err`)."""
    try:
        built = _build(request, err=err)
    except (ContextKitError, OSError) as exc:
        print(f"contextkit: {_one_line(exc)}", file=err)
        return 1
    if request.as_json:
        print(json.dumps(_as_json(built), ensure_ascii=False, indent=2), file=out)
    else:
        print(built.report.text, file=out)
        print(file=out)
        print(_ledger(built), file=out)
    return 0


def _build(request: BuildRequest, *, err: TextIO) -> _Built:
    _check_options(request)
    docs = Path(request.docs)
    if not docs.is_dir():
        reason = "is not a folder" if docs.exists() else "no such folder"
        msg = f"--docs {request.docs}: {reason}"
        raise BuildInputError(msg)
    history = _read_history(request.history) if request.history is not None else None

    window = DEFAULT_WINDOW if request.window is None else request.window
    config = _config(window)
    block_budget = _check_fixed_parts(config, window, request)

    folder = load_folder(docs, chunk_tokens=request.chunk_tokens, token_counter=count_tokens)
    if not folder.files:
        endings = ", ".join(DEFAULT_SUFFIXES)
        unread = f"; {len(folder.skipped)} skipped as unreadable" if folder.skipped else ""
        msg = f"no documents under {request.docs} (looked for {endings}{unread})"
        raise BuildInputError(msg)
    if not folder.chunks:
        msg = f"the documents under {request.docs} hold no text"
        raise BuildInputError(msg)

    # Notes, not errors: said once the input is known to be good, so bad input gets one line.
    for skipped in folder.skipped:
        print(f"contextkit: skipped {skipped.path}: {skipped.reason}", file=err)
    if request.window is None:
        print(
            f"contextkit: no --window given; assuming a {DEFAULT_WINDOW}-token window",
            file=err,
        )
    sources: list[ContextSource] = [DocsSource("rag", DocsIndex(folder.chunks), k=request.top)]
    offered = 0
    if history:
        quota = config.quotas(block_budget)["history"]
        kept = _recent_history(history, quota)
        offered = len(kept)
        if offered < len(history):
            print(
                f"contextkit: history: the {len(history) - offered} oldest of {len(history)} "
                f"messages do not fit the {quota}-token history quota and were left out",
                file=err,
            )
        results = [RetrievalResult(_history_line(m), 1.0, "history") for m in kept]
        # Equal scores keep the messages in conversation order; none is dropped by rank.
        sources.append(CallableSource("history", lambda _query: results))

    builder = ContextBuilder(config, system_prompt=request.system_prompt, strict=True)
    report = builder.build_report(request.query, sources=sources)
    return _Built(request, window, config, folder, len(history or ()), offered, report)


def _check_options(request: BuildRequest) -> None:
    for flag, value in (
        ("--window", request.window),
        ("--top", request.top),
        ("--chunk-tokens", request.chunk_tokens),
    ):
        if value is not None and value < 1:
            msg = f"{flag} must be a positive number, got {value}"
            raise BuildInputError(msg)
    if not request.query.strip():
        msg = "the query is empty"
        raise BuildInputError(msg)


def _config(window: int) -> ContextConfig:
    try:
        return _config_for(window)
    except ConfigError as exc:
        smallest = _smallest_window(window)
        msg = f"--window {window} is too small (the smallest that works is {smallest}): {exc}"
        raise ConfigError(msg) from exc


def _config_for(window: int) -> ContextConfig:
    return ContextConfig.for_window(window, source_ratios=_SOURCE_RATIOS)


def _smallest_window(window: int) -> int:
    """The smallest window above `window` that the command's config accepts."""

    def works(candidate: int) -> bool:
        try:
            _config_for(candidate)
        except ConfigError:
            return False
        return True

    low, high = window, max(2 * window, 2)  # low fails; find a high that works
    while not works(high):
        low, high = high, 2 * high
    while high - low > 1:  # larger windows give larger quotas: the test is monotonic
        middle = (low + high) // 2
        low, high = (low, middle) if works(middle) else (middle, high)
    return high


def _check_fixed_parts(config: ContextConfig, window: int, request: BuildRequest) -> int:
    """Check that the system prompt and question fit; return the dynamic block's budget."""
    system = count_tokens(request.system_prompt)
    question = count_tokens(f"{PromptRegistry().heading('question')}\n{request.query}")
    if question > config.output_reserve:
        msg = (
            f"--window {window} is too small: the question takes {question} tokens, more "
            f"than the {config.output_reserve}-token reserve for the question and the answer"
        )
        raise ContextWindowExceeded(msg, required=question, budget=config.output_reserve)
    if system >= config.dynamic_tokens:
        msg = (
            f"--window {window} is too small: the system prompt takes {system} tokens, "
            f"leaving nothing of the {config.dynamic_tokens} tokens for documents"
        )
        raise ContextWindowExceeded(msg, required=system, budget=config.dynamic_tokens)
    return config.dynamic_tokens - system


def _read_history(path: str) -> list[BaseMessage]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        msg = f"cannot read history file {path}: {exc.strerror or exc}"
        raise BuildInputError(msg) from exc
    except UnicodeDecodeError as exc:
        msg = f"history file {path} is not UTF-8 text (byte {exc.start})"
        raise BuildInputError(msg) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"history file {path} is not valid JSON: {exc.msg} (line {exc.lineno})"
        raise BuildInputError(msg) from exc
    if not isinstance(data, list):
        msg = f"history file {path} must hold a JSON list of messages, got {_kind(data)}"
        raise BuildInputError(msg)
    return [_message(path, number, item) for number, item in enumerate(data, start=1)]


def _message(path: str, number: int, item: object) -> BaseMessage:
    where = f"history file {path}, message {number}"
    if not isinstance(item, dict):
        msg = f'{where}: expected {{"role": ..., "content": ...}}, got {_kind(item)}'
        raise BuildInputError(msg)
    role, content = item.get("role"), item.get("content")
    if role not in _ROLES:
        msg = f"{where}: role must be 'user' or 'assistant', got {role!r}"
        raise BuildInputError(msg)
    if not isinstance(content, str):
        msg = f"{where}: content must be a string, got {_kind(content)}"
        raise BuildInputError(msg)
    return HumanMessage(content) if role == "user" else AIMessage(content)


def _kind(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _recent_history(messages: Sequence[BaseMessage], quota: int) -> list[BaseMessage]:
    """The longest recent tail that fits the history quota (less its heading)."""
    heading = count_tokens(PromptRegistry().heading("history")) + 1
    return trim_to_budget(messages, max(0, quota - heading), counter=count_tokens)


def _history_line(message: BaseMessage) -> str:
    role = "user" if isinstance(message, HumanMessage) else "assistant"
    return f"{role}: {message.text}"


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _sources(report: ContextReport) -> list[dict[str, Any]]:
    rows = []
    for line in report.sources:
        row = line.as_dict()
        row["dropped"] = line.merged + line.dropped_by_mmr + line.dropped_for_budget
        del row["seconds"]
        rows.append(row)
    return rows


def _as_json(built: _Built) -> dict[str, Any]:
    report, config = built.report, built.config
    return {
        "query": built.request.query,
        "prompt": report.text,
        "window": built.window,
        "max_tokens": config.max_tokens,
        "output_reserve": config.output_reserve,
        "budget": report.budget,
        "block_tokens": report.block_tokens,
        "prompt_tokens": count_tokens(report.text),
        "documents": {
            "files": len(built.folder.files),
            "chunks": len(built.folder.chunks),
            "skipped": [{"path": s.path, "reason": s.reason} for s in built.folder.skipped],
        },
        "history": {"messages": built.history_messages, "offered": built.history_offered},
        "sources": _sources(report),
    }


def _ledger(built: _Built) -> str:
    report, config = built.report, built.config
    folder = built.folder
    title = (
        f"=== ledger: {built.window}-token window, context {config.max_tokens} tokens "
        f"(output reserve {config.output_reserve}); {len(folder.chunks)} chunks from "
        f"{len(folder.files)} files ==="
    )
    prompt = (
        f"prompt: {count_tokens(report.text)} tokens "
        f"(system prompt + block + question, of {config.max_tokens})"
    )
    return f"{title}\n{report}\n{prompt}"
