"""`CallLedger`: where every token of one model call's window went, and how calls are anchored.

`CallLedger` is the per-call record (parts, estimate, report, cache reads) that the
middleware and nodes keep in state and the demo draws as a bar (`LEGEND`);
`Anchor` is the previous call's estimate and report, from which the next is priced;
`CallTimer` measures a call's wall time, split between the model and the middleware.
Every call's ledger is also a JSON line: `LedgerWriter` appends it to a file,
`LedgerCallbackHandler` writes the ``"contextkit_ledger"`` event a run dispatches, and
`read_ledger_log` reads a file back.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    BaseCallbackHandler,
    BaseCallbackManager,
    adispatch_custom_event,
    dispatch_custom_event,
)

from langchain_contextkit.agent.state import run_callbacks
from langchain_contextkit.agent.window_budget import growth_rate
from langchain_contextkit.errors import ConfigError, LedgerLogError

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from uuid import UUID

    from langchain_contextkit.agent.window_budget import Calibration, Usage

__all__ = [
    "LEDGER_EVENT",
    "LEGEND",
    "Anchor",
    "CallLedger",
    "CallTimer",
    "LedgerCallbackHandler",
    "LedgerWriter",
    "adispatch_ledger_line",
    "anchor_from",
    "dispatch_ledger_line",
    "ledger_record",
    "next_call_number",
    "read_ledger_log",
    "with_ledger",
]


_BAR_PARTS = (  # in the request's own order: the cache-first layout
    ("system", "S"),
    ("tools", "T"),
    ("summary", "R"),
    ("history", "H"),
    ("retrieval", "K"),
    ("turn", "Q"),
    ("free", "."),
    ("output_reserve", "O"),
)


@dataclass(frozen=True, slots=True)
class Anchor:
    """The previous call's request: the ledger's estimate and the provider's report."""

    estimated: int
    reported: int
    growth: float | None = None
    """Provider tokens per estimated token of what recent calls *added* to the one
    before (None when unknown): the new part of this request is priced by it."""


@dataclass(frozen=True, slots=True)
class CallLedger:
    """Where every token of one model call's window went.

    `system + tools + summary + retrieval + history + turn + free + output_reserve ==
    window` (priming and message overheads are counted in the part they belong to). The
    parts are in the provider's tokens as far as the ledger knows them: the counter's
    estimate times the calibration `factor` learnt from earlier calls' reported usage.
    `estimated` is the request by the counter alone, and `reported` what the provider
    said it took once the call returned (`cache_read` of it from the prompt cache).
    """

    call: int
    window: int
    output_reserve: int
    system: int
    tools: int
    summary: int
    retrieval: int
    history: int
    turn: int
    free: int
    compacted: bool
    reduced: bool
    estimated: int = 0
    """The request as the ledger's counter measured it (before calibration)."""
    factor: float = 1.0
    """The calibration in force: provider tokens per estimated token."""
    reported: int | None = None
    """Input tokens the provider reported for this call (None until it returned)."""
    cache_read: int | None = None
    """Of `reported`, the tokens served from the provider's prompt cache."""
    cache_write: int | None = None
    """Of `reported`, the tokens written to the prompt cache (Anthropic: 1.25x the price
    of plain input)."""
    retried: bool = False
    """The provider refused the first request as too long; this is the retry's ledger."""
    offloaded: int = 0
    """Tool results shown as head + tail + pointer (stored whole; their previews are
    counted in `history` / `turn`)."""
    offloaded_tokens: int = 0
    """Tokens the offloaded results' previews saved (estimated, before calibration)."""
    offload_failed: int = 0
    """Results kept whole because the offload store refused them."""
    cut: int = 0
    """Tool results of the current turn shown as head + tail so that the turn fits its
    room (stored whole first when a store was at hand); their previews are in `turn`."""
    cut_tokens: int = 0
    """Tokens those previews left out (estimated, before calibration)."""
    repairs: int = 0
    """Changes made to this request's messages so that the provider accepts them: a
    caller's broken history mended (a call with no result, a result with no call) or a
    late system message sent as a note (`repair_messages`). The stored history is
    untouched."""
    fidelity: str | None = None
    """The fidelity tier of the recap this call's compaction wrote (``"high"``,
    ``"medium"`` or ``"low"``: lower than configured when room was short); None when it
    wrote none."""
    summarizer_calls: int = 0
    """Calls this call's compaction made to a model (or callback) summariser: at most
    `HistoryCompactor.cold_start_calls` on a history with no recap in force, else one per
    epoch of the window's grid (usually one, rarely)."""
    summarizer_chars: int = 0
    """Characters those summariser calls sent (text and instruction)."""
    shared_recap: bool = False
    """The recap in force came from the shared store (`RecapStore`): another worker made it."""
    gate: dict[str, Any] | None = None
    """The quality gate's result for this request (`GateResult.to_dict()`), when a gate
    is set (`quality_gate=` on the middleware or node)."""
    model_ms: float | None = None
    """Wall time of the model call in milliseconds (both attempts when it was retried);
    None where nothing timed it (a graph node's ledger is written before its call)."""
    middleware_ms: float | None = None
    """The middleware's own wall time for this call in milliseconds: assembling, counting,
    compacting and gating, everything but the model call."""

    @property
    def prompt(self) -> int:
        """Tokens of the request (everything but free space and the output reserve)."""
        return self.window - self.free - self.output_reserve

    def with_usage(self, usage: Usage | None) -> CallLedger:
        """This ledger with what the provider reported for the call (unchanged without)."""
        if usage is None:
            return self
        return replace(
            self,
            reported=usage.input_tokens,
            cache_read=usage.cache_read,
            cache_write=usage.cache_write,
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data for graph state and JSON (the gate's result copied, not shared)."""
        # Every field but `gate` is a scalar: a flat copy is `asdict` without its recursion.
        data = {name: getattr(self, name) for name in _FIELDS}
        if self.gate is not None:
            data["gate"] = copy.deepcopy(self.gate)
        return data

    def bar(self, width: int = 60) -> str:
        """The window drawn as one line of letters, one per part, in layout order (`LEGEND`).

        Example:
            ```python
            from langchain_contextkit.agent.ledger import CallLedger

            ledger = CallLedger(
                call=1,
                window=1000,
                output_reserve=200,
                system=100,
                tools=100,
                summary=0,
                retrieval=200,
                history=100,
                turn=100,
                free=200,
                compacted=False,
                reduced=False,
            )
            print(ledger.bar(20))
            # SSTTHHKKKKQQ....OOOO
            ```
        """
        cells = []
        for name, glyph in _BAR_PARTS:
            cells.append((getattr(self, name), glyph))
        out = []
        used = 0
        total = 0
        for value, glyph in cells:
            total += value
            # Cumulative rounding keeps the bar exactly `width` wide.
            end = round(total * width / self.window) if self.window else 0
            out.append(glyph * max(0, end - used))
            used = max(used, end)
        return "".join(out)


@dataclass(slots=True)
class CallTimer:
    """Times one model call: the model's part (`model`) and everything else around it.

    Started when made; `stamp` writes both figures into the call's ledger.

    Example:
        ```python
        import time

        from langchain_contextkit.agent.ledger import CallTimer

        timer = CallTimer()
        with timer.model():
            time.sleep(0.01)
        model_ms, own_ms = timer.split()
        print(model_ms >= 10, own_ms >= 0)
        # True True
        ```
    """

    started: float = field(default_factory=time.perf_counter)
    model_seconds: float = 0.0
    """Seconds spent inside `model` blocks so far."""

    @contextmanager
    def model(self) -> Iterator[None]:
        """Count the block's wall time as the model's (also when it raises)."""
        began = time.perf_counter()
        try:
            yield
        finally:
            self.model_seconds += time.perf_counter() - began

    def split(self) -> tuple[float, float]:
        """Milliseconds so far: (the model's, the rest since the timer started)."""
        total = time.perf_counter() - self.started
        return self.model_seconds * 1000, max(0.0, total - self.model_seconds) * 1000

    def stamp(self, ledger: CallLedger) -> CallLedger:
        """`ledger` with `model_ms` and `middleware_ms` as measured now (to the microsecond)."""
        model_ms, own_ms = self.split()
        return replace(ledger, model_ms=round(model_ms, 3), middleware_ms=round(own_ms, 3))


_FIELDS = tuple(f.name for f in fields(CallLedger))


def next_call_number(ledgers: Sequence[Any]) -> int:
    """The number of the call after the last stored ledger (1 when none is stored)."""
    last = ledgers[-1] if ledgers else None
    if isinstance(last, Mapping) and isinstance(last.get("call"), int):
        return int(last["call"]) + 1
    return 1


def with_ledger(ledgers: Sequence[Any], ledger: CallLedger, size: int) -> list[Any]:
    """The stored ledgers with `ledger` appended, the last `size` kept."""
    return [*ledgers, ledger.to_dict()][-size:]


LEGEND = (
    "S system  T tools  R summary  H history  K retrieval  Q current turn  . free  O output reserve"
)


def anchor_from(ledgers: Sequence[Any], calibration: Calibration) -> Anchor | None:
    """The previous call's estimate and report, when state has both, and recent growth.

    The growth is the measured rate of recent additions, else the calibration's ratio
    (what a new estimated token costs on the fitted line, the overhead left out).
    """
    last = ledgers[-1] if ledgers else None
    if not isinstance(last, dict):
        return None
    estimated, reported = last.get("estimated"), last.get("reported")
    if isinstance(estimated, int) and isinstance(reported, int) and estimated > 0:
        growth = growth_rate(ledgers)
        return Anchor(estimated, reported, calibration.ratio if growth is None else growth)
    return None


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

        from langchain_contextkit.agent.ledger import ledger_record

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

        from langchain_contextkit.agent.ledger import LedgerWriter, read_ledger_log

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
        from langchain_contextkit.agent.ledger import read_ledger_log
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
