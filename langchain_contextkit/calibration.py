"""The ledger kept true in the provider's tokens: a correction learnt from reported usage.

No estimate matches every provider's tokenizer, but every provider reports, after each
call, how many input tokens the request really took (`AIMessage.usage_metadata`). The
ledger measures a request with its own counter before sending it; `Calibration` keeps
the ratio *reported / estimated* of recent calls and gives the factor the next call's
budget applies: the window is divided by it, so the request fits in real tokens.

The factor is a high quantile of the recent ratios (the third largest of the last eight):
one noisy call neither drags it down nor up for long, a change in the mix of text (a turn
of Hungarian after English) raises it within a call or two, and it only falls back when
several calls in a row say so. It is bounded (`MIN_FACTOR`, `MAX_FACTOR`), so a
malformed usage report cannot shrink the window to nothing. Without usage it stays 1.0.

```python
from langchain_contextkit.calibration import Calibration

calibration = Calibration()
for estimated, reported in [(1000, 1210), (1500, 1790), (800, 975)]:
    calibration = calibration.observe(estimated, reported)
assert 1.19 < calibration.factor < 1.23
assert calibration.real(1000) == round(1000 * calibration.factor)
```
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

__all__ = [
    "CALIBRATION_KEY",
    "MAX_FACTOR",
    "MIN_FACTOR",
    "Calibration",
    "Usage",
    "growth_rate",
    "learn_from_history",
    "reported_usage",
]

CALIBRATION_KEY = "contextkit_calibration"
"""The state key that holds a `Calibration.to_dict()` (middleware and nodes alike)."""

MIN_FACTOR = 0.5
"""The factor never goes below this (an estimator twice as high as the truth)..."""

MAX_FACTOR = 4.0
"""... nor above this (a tokenizer four times as fine as the estimate)."""

_WINDOW = 8
"""Recent ratios kept."""

_RANK = 3
"""The factor is the `_RANK`-th largest of the recent ratios (the largest while fewer)."""


_GROWTH_MIN = 32
"""Estimated tokens a call must add to the one before for its growth to be measured."""


def _bounded(ratio: float) -> float:
    return min(MAX_FACTOR, max(MIN_FACTOR, ratio))


@dataclass(frozen=True, slots=True)
class Usage:
    """What the provider reported for one call's input."""

    input_tokens: int
    """Every input token of the request, cached ones included."""

    cache_read: int | None = None
    """Input tokens served from the provider's prompt cache, when it says."""


def reported_usage(message: BaseMessage | None) -> Usage | None:
    """The input usage an AI message reports (LangChain's normalised shape), if any.

    `usage_metadata` is filled by langchain-openai, langchain-anthropic and
    langchain-google-genai alike; cached input is `input_token_details["cache_read"]`.
    """
    if not isinstance(message, AIMessage) or not message.usage_metadata:
        return None
    usage = message.usage_metadata
    tokens = usage.get("input_tokens")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens <= 0:
        return None
    details = usage.get("input_token_details") or {}
    cache_read = details.get("cache_read")
    return Usage(tokens, cache_read if isinstance(cache_read, int) else None)


@dataclass(frozen=True, slots=True)
class Calibration:
    """The correction of one model's token estimate, learnt from reported usage.

    Attributes:
        ratios: Recent *reported / estimated* ratios, oldest first (at most eight).
        calls: Calls observed in all.
        window: The window the provider stated when it refused a request as too long,
            when that is smaller than the one the ledger was given (a profile that
            overstates it): later calls keep within it.
    """

    ratios: tuple[float, ...] = ()
    calls: int = 0
    window: int | None = None

    @property
    def factor(self) -> float:
        """Real tokens per estimated token, for the next call (1.0 before any usage)."""
        if not self.ratios:
            return 1.0
        ranked = sorted(self.ratios, reverse=True)
        chosen = ranked[_RANK - 1] if len(ranked) >= _RANK else ranked[0]
        return _bounded(chosen)

    def cautious(self) -> Calibration:
        """This calibration with the largest of the recent ratios as its factor.

        For a request whose refusal is not retried smaller (a summary written in place
        falls back to another request): it is sized by the largest error the recent
        calls showed, not by the `_RANK`-th largest the agent's own requests use.
        """
        if len(self.ratios) < _RANK:
            return self  # the factor is the largest already
        return Calibration((max(self.ratios),), self.calls, self.window)

    def real(self, estimated: int) -> int:
        """`estimated` tokens in the provider's tokens, by the current factor."""
        return round(estimated * self.factor)

    def estimated(self, real: int) -> int:
        """How many estimated tokens fit in `real` provider tokens (rounded down)."""
        return math.floor(real / self.factor)

    def observe(self, estimated: int, reported: int) -> Calibration:
        """A calibration that has also seen one call: our estimate and the provider's count.

        Calls with no estimate or no report (0 or less) change nothing.
        """
        if estimated <= 0 or reported <= 0:
            return self
        ratio = _bounded(reported / estimated)
        return Calibration((*self.ratios, ratio)[-_WINDOW:], self.calls + 1, self.window)

    def observe_refusal(
        self, estimated: int, reported: int | None, *, window: int | None = None
    ) -> Calibration:
        """A calibration that has seen a request refused as too long.

        A refusal is certain evidence, not noise: the refused request's ratio (when the
        provider said how many tokens it took) is counted as often as it takes to become
        the factor at once, and then ages out like any other; the window the provider
        stated (when it said) is kept from then on.

        Args:
            estimated: The refused request by the ledger's counter.
            reported: Its input tokens by the provider's count, when the refusal says.
            window: The window the provider stated, when the refusal says.
        """
        calibration = self
        if reported is not None:
            for _ in range(_RANK):
                calibration = calibration.observe(estimated, reported)
        if window is not None and window > 0:
            known = calibration.window
            window = window if known is None else min(known, window)
            calibration = Calibration(calibration.ratios, calibration.calls, window)
        return calibration

    def to_dict(self) -> dict[str, Any]:
        """Plain data for graph state and checkpointers."""
        data: dict[str, Any] = {"ratios": list(self.ratios), "calls": self.calls}
        if self.window is not None:
            data["window"] = self.window
        return data

    @classmethod
    def from_state(cls, stored: object) -> Calibration:
        """Rebuild from `to_dict` output; anything else (or nothing) is a fresh one."""
        if not isinstance(stored, Mapping):
            return cls()
        raw = stored.get("ratios")
        calls = stored.get("calls")
        if not isinstance(raw, list) or not all(isinstance(r, (int, float)) for r in raw):
            return cls()
        ratios = tuple(_bounded(float(r)) for r in raw if r > 0)
        window = stored.get("window")
        return cls(
            ratios[-_WINDOW:],
            calls if isinstance(calls, int) else len(ratios),
            window if isinstance(window, int) and window > 0 else None,
        )


def learn_from_history(
    calibration: Calibration, ledgers: Sequence[Any], messages: Sequence[BaseMessage]
) -> tuple[Calibration, list[Any]]:
    """Fold the latest model call's reported usage in, for graphs that see it afterwards.

    A node that runs before the model (`context_node`) learns what the previous call
    cost from the state: the latest AI message's usage belongs to the latest ledger, as
    long as that ledger has no report yet (so a call is never counted twice).

    Returns:
        The calibration, and the ledgers with the latest one's `reported` filled in.
    """
    out = list(ledgers)
    last_ai = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    usage = reported_usage(last_ai)
    if usage is None or not out or not isinstance(out[-1], Mapping):
        return calibration, out
    last = out[-1]
    estimated = last.get("estimated")
    if last.get("reported") is not None or not isinstance(estimated, int) or estimated <= 0:
        return calibration, out
    out[-1] = {**last, "reported": usage.input_tokens, "cache_read": usage.cache_read}
    return calibration.observe(estimated, usage.input_tokens), out


def growth_rate(ledgers: Sequence[Any]) -> float | None:
    """Reported per estimated tokens of what recent calls added to the call before them.

    A call that extended the previous one (no compaction, no retry) added a known amount
    of estimated tokens and the provider says how many real ones: the new text of the
    next call is most like that, more than like the whole request. The median of the
    last eight such additions, bounded like the factor; None with fewer than two.
    """
    rates: list[float] = []
    for before, after in itertools.pairwise(ledgers[-(_WINDOW + 1) :]):
        if not (isinstance(before, Mapping) and isinstance(after, Mapping)):
            continue
        if after.get("compacted") or after.get("retried") or before.get("retried"):
            continue
        try:
            added = after["estimated"] - before["estimated"]
            real = after["reported"] - before["reported"]
        except (KeyError, TypeError):
            continue
        if added >= _GROWTH_MIN and real > 0:
            rates.append(_bounded(real / added))
    return statistics.median(rates) if len(rates) >= 2 else None  # noqa: PLR2004
