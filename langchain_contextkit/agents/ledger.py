"""`CallLedger`: where every token of one model call's window went, and how calls are anchored.

`CallLedger` is the per-call record (parts, estimate, report, cache reads) that the
middleware and nodes keep in state and the demo draws as a bar (`LEGEND`);
`Anchor` is the previous call's estimate and report, from which the next is priced;
`CallTimer` measures a call's wall time, split between the model and the middleware.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from langchain_contextkit.calibration import growth_rate

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from langchain_contextkit.calibration import Calibration, Usage

__all__ = [
    "LEGEND",
    "Anchor",
    "CallLedger",
    "CallTimer",
    "anchor_from",
    "next_call_number",
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
            from langchain_contextkit.agents.ledger import CallLedger

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

        from langchain_contextkit.agents.ledger import CallTimer

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
