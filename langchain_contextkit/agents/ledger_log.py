"""Call ledgers as JSON lines: one line per model call, appended, read back by the report.

A line is a `CallLedger.to_dict()` (window parts, `estimated` and `reported` tokens,
`cache_read`, `compacted`, `reduced`, `retried`, the offload counts, `model_ms` and
`middleware_ms`: the model call's and the middleware's own wall time) plus `prompt` (the
request's tokens), `thread_id` (None when the call ran outside a thread), `timestamp`
(UTC, ISO 8601) and `gate` (a quality gate's result when the ledger holds one, else None).

Two ways to write them, both through `LedgerWriter`:

- `ContextKitMiddleware(..., ledger_path="calls.jsonl")` (or `for_model(model,
  ledger_path=...)`) appends each call's line itself.
- The middleware also dispatches every call's line as a LangChain custom event named
  `LEDGER_EVENT` (``"contextkit_ledger"``); `LedgerCallbackHandler` writes the events it
  receives, so a handler passed in the run's ``callbacks`` logs any agent the middleware
  runs in, without touching its construction. The event shows in ``astream_events`` and
  in traces too.

`read_ledger_log` reads a file back and names the line of anything it cannot use.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    BaseCallbackHandler,
    BaseCallbackManager,
    adispatch_custom_event,
    dispatch_custom_event,
)

from langchain_contextkit.agents.state import run_callbacks
from langchain_contextkit.errors import ConfigError, LedgerLogError

if TYPE_CHECKING:
    from uuid import UUID

    from langchain_contextkit.agents.ledger import CallLedger

__all__ = [
    "LEDGER_EVENT",
    "LedgerCallbackHandler",
    "LedgerWriter",
    "adispatch_ledger_line",
    "dispatch_ledger_line",
    "ledger_record",
    "read_ledger_log",
]

logger = logging.getLogger(__name__)

LEDGER_EVENT = "contextkit_ledger"
"""The custom event's name: its data is the call's line (`ledger_record`)."""

_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


def ledger_record(
    ledger: CallLedger | Mapping[str, Any],
    *,
    thread_id: str | None = None,
    timestamp: datetime | None = None,
) -> dict[str, Any]:
    """One call's line as a dict: the ledger's fields, `prompt`, thread, time and gate.

    Args:
        ledger: A `CallLedger` or its `to_dict()` (as state keeps it).
        thread_id: The call's thread, when it ran in one.
        timestamp: When the call returned; default now (UTC).

    Example:
        ```python
        from datetime import datetime, timezone

        from langchain_contextkit.agents.ledger_log import ledger_record

        line = ledger_record(
            {"call": 1, "window": 1000, "free": 300, "output_reserve": 200, "retrieval": 100},
            thread_id="t1",
            timestamp=datetime(2025, 1, 2, tzinfo=timezone.utc),
        )
        print(line["prompt"], line["thread_id"], line["timestamp"], line["gate"])
        # 500 t1 2025-01-02T00:00:00+00:00 None
        ```
    """
    data = dict(ledger) if isinstance(ledger, Mapping) else ledger.to_dict()
    if "prompt" not in data:
        try:
            data["prompt"] = int(data["window"]) - int(data["free"]) - int(data["output_reserve"])
        except (KeyError, TypeError, ValueError):
            data["prompt"] = None
    moment = timestamp or datetime.now(timezone.utc)
    data["thread_id"] = thread_id if thread_id is not None else data.get("thread_id")
    data["timestamp"] = moment.isoformat()
    data["gate"] = data.get("gate")  # set by a quality gate when one ran, else None
    return data


class LedgerWriter:
    """Append call ledgers to a JSON-lines file, one whole line per call.

    Each line is written with a single unbuffered ``write`` on a file opened with
    ``O_APPEND`` (opened per line, so a rotated or removed file is simply recreated),
    under a lock: threads of one process never interleave, and other processes
    appending to the same file get whole lines too. A write that fails (a full disk, a
    folder that vanished, a value JSON cannot hold) is logged at WARNING and dropped:
    logging never breaks the model call.

    Example:
        ```python
        import tempfile
        from pathlib import Path

        from langchain_contextkit.agents.ledger_log import LedgerWriter, read_ledger_log

        with tempfile.TemporaryDirectory() as folder:
            writer = LedgerWriter(Path(folder, "calls.jsonl"))
            ledger = {"call": 1, "window": 4000, "free": 1500, "output_reserve": 500}
            writer.write(ledger, thread_id="t1")
            writer.write({**ledger, "call": 2, "free": 1200}, thread_id="t1")
            print([line["prompt"] for line in read_ledger_log(writer.path)])
            # [2000, 2300]
        ```
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        """Write to `path` (created on the first line, with its folders).

        Raises:
            ConfigError: When `path` is an existing folder.
        """
        self.path = Path(path)
        if self.path.is_dir():
            msg = f"ledger_path {str(self.path)!r} is a folder: name a file, e.g. calls.jsonl"
            raise ConfigError(msg)
        self._lock = threading.Lock()

    def write(
        self, ledger: CallLedger | Mapping[str, Any], *, thread_id: str | None = None
    ) -> bool:
        """Append one call's line (`ledger_record`); False when it could not be written."""
        return self.write_record(ledger_record(ledger, thread_id=thread_id))

    def write_record(self, record: Mapping[str, Any]) -> bool:
        """Append a line already built by `ledger_record`; False when it failed."""
        try:
            line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
            data = (line + "\n").encode("utf-8")
            with self._lock:
                self._append(data)
        except (OSError, TypeError, ValueError) as error:
            logger.warning("could not write the call's ledger to %s: %s", self.path, error)
            return False
        return True

    def _append(self, data: bytes) -> None:
        try:
            fd = os.open(self.path, _FLAGS, 0o644)
        except FileNotFoundError:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, _FLAGS, 0o644)
        try:
            written = os.write(fd, data)
            while written < len(data):  # a short write (rare on files): finish the line
                written += os.write(fd, data[written:])
        finally:
            os.close(fd)

    def __repr__(self) -> str:
        """The file written to."""
        return f"LedgerWriter({str(self.path)!r})"


class LedgerCallbackHandler(BaseCallbackHandler):
    """A callback handler that writes every call ledger it is sent to a JSON-lines file.

    `ContextKitMiddleware` dispatches each model call's line as the custom event
    `LEDGER_EVENT`; pass this handler in the run's ``callbacks`` (or a
    `RunnableConfig`) and every such call is appended through a `LedgerWriter`. Other
    events are ignored; a thread id missing from the event is taken from the run's
    metadata, where LangGraph puts the ``thread_id`` of the config. Point it and a
    middleware's ``ledger_path`` at different files: both write every call.

    Example:
        ```python
        import tempfile
        from pathlib import Path

        from langchain.agents import create_agent
        from langchain_core.messages import HumanMessage

        from langchain_contextkit import ContextKitMiddleware, LedgerCallbackHandler
        from langchain_contextkit.agents.ledger_log import read_ledger_log
        from langchain_contextkit.testing import ScriptedChatModel

        model = ScriptedChatModel(["Hi.", "Bye."], context_window=4000)
        agent = create_agent(model, middleware=[ContextKitMiddleware.for_model(model)])
        with tempfile.TemporaryDirectory() as folder:
            handler = LedgerCallbackHandler(Path(folder, "calls.jsonl"))
            for text in ("hello", "goodbye"):
                agent.invoke({"messages": [HumanMessage(text)]}, {"callbacks": [handler]})
            print(len(read_ledger_log(handler.writer.path)))
            # 2
        ```
    """

    run_inline = True  # lines in call order, also under an async callback manager

    def __init__(self, path: str | os.PathLike[str] | LedgerWriter) -> None:
        """Write to `path` (or through an existing `LedgerWriter`).

        Raises:
            ConfigError: When `path` is an existing folder.
        """
        super().__init__()
        self.writer = path if isinstance(path, LedgerWriter) else LedgerWriter(path)

    def on_custom_event(
        self,
        name: str,
        data: Any,  # noqa: ANN401 - the interface's type
        *,
        run_id: UUID,  # noqa: ARG002 - part of the interface
        tags: list[str] | None = None,  # noqa: ARG002 - part of the interface
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,  # noqa: ANN401, ARG002 - part of the interface
    ) -> None:
        """Write the `LEDGER_EVENT` events' lines; ignore any other event."""
        if name != LEDGER_EVENT or not isinstance(data, Mapping):
            return
        record = dict(data)
        if record.get("thread_id") is None and metadata and metadata.get("thread_id"):
            record["thread_id"] = str(metadata["thread_id"])
        self.writer.write_record(record)


def read_ledger_log(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The lines of a ledger log, in order (blank lines skipped).

    Args:
        path: A file `LedgerWriter` wrote.

    Raises:
        LedgerLogError: When the file cannot be read, or a line is not a JSON object
            with the ledger's numbers (the message names the line).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        msg = f"{path}: cannot read the ledger log: {error.strerror or error}"
        raise LedgerLogError(msg) from error
    except UnicodeDecodeError as error:
        msg = f"{path}: not a ledger log (not UTF-8 text)"
        raise LedgerLogError(msg) from error
    records: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            msg = f"{path}:{number}: not a JSON line ({error.msg}, column {error.colno})"
            raise LedgerLogError(msg) from error
        problem = _problem(record)
        if problem:
            msg = f"{path}:{number}: not a call ledger: {problem}"
            raise LedgerLogError(msg)
        records.append(record)
    return records


_REQUIRED = ("call", "window", "free", "output_reserve")


def _problem(record: object) -> str | None:
    """What makes a parsed line unusable as a ledger, or None."""
    if not isinstance(record, dict):
        return f"a JSON {type(record).__name__}, not an object"
    for key in _REQUIRED:
        value = record.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{key!r} must be an integer, got {value!r}"
    return None


def _listened() -> bool:
    """Whether the run has any callback handler to tell.

    Building the run's callback manager costs more than the rest of the ledger line; a
    run with no handler (none configured, no tracing) would drop the event anyway.
    """
    callbacks = run_callbacks()
    if isinstance(callbacks, BaseCallbackManager):
        return bool(callbacks.handlers)
    return bool(callbacks)


def dispatch_ledger_line(line: dict[str, Any]) -> None:
    """Send the call's line to the run's callbacks (`LedgerCallbackHandler` writes it).

    Outside a run (the middleware called directly) there is no one to tell; a handler
    that fails is logged and the call goes on.
    """
    if not _listened():
        return
    try:
        dispatch_custom_event(LEDGER_EVENT, line)
    except RuntimeError:
        logger.debug("no run to dispatch the call's ledger to")
    except Exception:  # a failing handler must not fail the model call
        logger.warning("a callback failed on the call's ledger event", exc_info=True)


async def adispatch_ledger_line(line: dict[str, Any]) -> None:
    """Async `dispatch_ledger_line`."""
    if not _listened():
        return
    try:
        await adispatch_custom_event(LEDGER_EVENT, line)
    except RuntimeError:
        logger.debug("no run to dispatch the call's ledger to")
    except Exception:  # a failing handler must not fail the model call
        logger.warning("a callback failed on the call's ledger event", exc_info=True)
