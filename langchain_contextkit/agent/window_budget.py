"""The window ledger: a model's whole window split into output reserve, fixed parts and the rest.

`WindowBudgetConfig` holds the fractions and floors; `WindowBudget` is one call's split of
the window (output reserve, measured system prompt and tool schemas, retrieval block,
trajectory). `model_limits` reads a chat model's window and output cap from its profile.

```python
from langchain_contextkit.agent.window_budget import WindowBudget, WindowBudgetConfig

budget = WindowBudget.from_window(
    200_000, cfg=WindowBudgetConfig(), system_tokens=800, tool_tokens=1200
)
assert budget.output_reserve == 4096
assert budget.rag_budget + budget.trajectory_budget(rag_in_scope=False) <= budget.spendable
```
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple, TypeGuard

from langchain_core.messages import AIMessage, BaseMessage

from langchain_contextkit.errors import check_count, check_fraction
from langchain_contextkit.tokens.count import model_limits

__all__ = [
    "CALIBRATION_KEY",
    "Calibration",
    "Observation",
    "Usage",
    "WindowBudget",
    "WindowBudgetConfig",
    "growth_rate",
    "learn_from_history",
    "model_key",
    "reported_usage",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class WindowBudgetConfig:
    """The serialisable knobs of the window ledger.

    Example:
        ```python
        from langchain_contextkit.agent.window_budget import WindowBudgetConfig

        cfg = WindowBudgetConfig(desired_output_tokens=2048)
        assert cfg.rag_ratio == 0.35
        ```
    """

    desired_output_tokens: int = 4096
    """The most you want the model to generate in this run (the output reserve's main knob)."""

    max_output_fraction: float = 0.5
    """Small-window guard: the output reserve takes at most this share of the window."""

    rag_ratio: float = 0.35
    """The retrieval block's share of what is spendable; the trajectory gets the rest."""

    def __post_init__(self) -> None:
        """Validate the knobs."""
        check_count("desired_output_tokens", self.desired_output_tokens, minimum=0)
        check_fraction("max_output_fraction", self.max_output_fraction, high_open=True)
        check_fraction("rag_ratio", self.rag_ratio)


@dataclass(frozen=True, kw_only=True, slots=True)
class WindowBudget:
    """One run's window ledger: output reserve + fixed + retrieval block + trajectory.

    Computed once per run from the real window and the measured fixed overhead. Tool
    schemas travel in the request's `tools=` payload, not in the messages, so trimming the
    trajectory cannot see them: the ledger deducts them separately and a growing trajectory
    can never push them out of the window.

    Example:
        ```python
        from langchain_core.language_models import GenericFakeChatModel

        from langchain_contextkit.agent.window_budget import WindowBudget, WindowBudgetConfig

        llm = GenericFakeChatModel(messages=iter([]), profile={"max_input_tokens": 200_000})
        budget = WindowBudget.for_run(
            llm=llm, cfg=WindowBudgetConfig(), system_tokens=800, tool_tokens=1200
        )
        assert budget is not None
        print(budget.rag_budget, budget.trajectory_budget(rag_in_scope=True))
        ```
    """

    window: int
    """The model's whole window in tokens."""

    output_reserve: int
    """Tokens kept free for the model's answer."""

    system_tokens: int = 0
    """Measured tokens of the system prompt."""

    tool_tokens: int = 0
    """Measured tokens of the tool schemas."""

    rag_ratio: float = 0.35
    """The retrieval block's share of `spendable`."""

    def __post_init__(self) -> None:
        """Validate the ledger's inputs."""
        check_count("window", self.window, minimum=1)
        for name in ("output_reserve", "system_tokens", "tool_tokens"):
            check_count(name, getattr(self, name), minimum=0)
        check_fraction("rag_ratio", self.rag_ratio)

    @classmethod
    def from_window(
        cls,
        window: int,
        *,
        cfg: WindowBudgetConfig,
        max_output_tokens: int | None = None,
        system_tokens: int = 0,
        tool_tokens: int = 0,
        rag_ratio: float | None = None,
    ) -> WindowBudget:
        """Build the ledger for a known window.

        The output reserve is the smallest of `cfg.desired_output_tokens`,
        `window * cfg.max_output_fraction` and, when known, the model's per-call output
        limit: it never exceeds what you asked for, never leaves a dead zone the model can
        never fill on a large window, and never swallows the input on a small one.

        Args:
            window: The model's window in tokens.
            cfg: The ledger's knobs.
            max_output_tokens: The model's per-call output limit, when known.
            system_tokens: Measured tokens of the system prompt.
            tool_tokens: Measured tokens of the tool schemas.
            rag_ratio: Overrides `cfg.rag_ratio` for this run.
        """
        reserve = min(cfg.desired_output_tokens, int(window * cfg.max_output_fraction))
        if max_output_tokens is not None:
            reserve = min(reserve, max_output_tokens)
        return cls(
            window=window,
            output_reserve=reserve,
            system_tokens=system_tokens,
            tool_tokens=tool_tokens,
            rag_ratio=cfg.rag_ratio if rag_ratio is None else rag_ratio,
        )

    @classmethod
    def for_run(
        cls,
        *,
        llm: object,
        cfg: WindowBudgetConfig,
        system_tokens: int = 0,
        tool_tokens: int = 0,
        rag_ratio: float | None = None,
        window: int | None = None,
        fallback_window: int | None = None,
    ) -> WindowBudget | None:
        """Build the ledger from a chat model's profile; None when its window is unknown.

        Args:
            llm: The chat model; its `profile` gives `max_input_tokens` (the window) and
                `max_output_tokens` (the per-call output limit).
            cfg: The ledger's knobs.
            system_tokens: Measured tokens of the system prompt.
            tool_tokens: Measured tokens of the tool schemas.
            rag_ratio: Overrides `cfg.rag_ratio` for this run.
            window: The window when the caller knows it; it wins over the profile's (the
                profile's output limit still applies).
            fallback_window: The window when neither `window` nor the profile states one.

        Returns:
            The ledger, or None when neither `window`, the model nor `fallback_window`
            states the window (the caller then falls back to no cap).
        """
        stated, max_output = model_limits(llm)
        window = (stated or fallback_window) if window is None else window
        if window is None:
            return None
        return cls.from_window(
            window,
            cfg=cfg,
            max_output_tokens=max_output,
            system_tokens=system_tokens,
            tool_tokens=tool_tokens,
            rag_ratio=rag_ratio,
        )

    @property
    def fixed(self) -> int:
        """Fixed overhead: system prompt plus tool schemas."""
        return self.system_tokens + self.tool_tokens

    @property
    def ceiling(self) -> int:
        """What the request may take: the window minus the output reserve."""
        return self.window - self.output_reserve

    @property
    def spendable(self) -> int:
        """What is left for the retrieval block and the trajectory (never negative)."""
        return max(0, self.ceiling - self.fixed)

    def calibrated(self, calibration: Calibration | None = None, shrink: int = 0) -> WindowBudget:
        """This ledger in the counter's own tokens: the window a calibrated request may fill.

        The provider's ceiling (minus `shrink`; the window the provider stated in a
        refusal when smaller) in the counter's tokens, by the calibration's fitted
        overhead and ratio (`Calibration.estimated`), is what the counter's estimate of
        the request may reach. Unchanged when nothing was learnt, shrunk or stated.

        Example:
            ```python
            from langchain_contextkit.agent.window_budget import Calibration
            from langchain_contextkit.agent.window_budget import WindowBudget

            budget = WindowBudget(window=8000, output_reserve=1000)
            assert budget.calibrated(Calibration()) == budget
            assert budget.calibrated(shrink=500).ceiling == 6500
            ```
        """
        stated = None if calibration is None else calibration.window
        learnt = calibration is not None and bool(calibration.observations)
        if not learnt and shrink == 0 and stated is None:
            return self
        window = self.window if stated is None else min(self.window, stated)
        ceiling = max(0, window - self.output_reserve - shrink)
        estimated = ceiling if calibration is None else calibration.estimated(ceiling)
        return replace(self, window=max(1, self.output_reserve + estimated))

    @property
    def rag_budget(self) -> int:
        """The retrieval block's cap: pass it as `build_block(..., budget=...)`."""
        return int(self.spendable * self.rag_ratio)

    def trajectory_budget(self, *, rag_in_scope: bool) -> int:
        """The budget for trimming an agent's trajectory.

        Args:
            rag_in_scope: True when the messages being trimmed already contain the
                retrieval block (it is then trimmed with them and gets no separate share);
                False when the block is added beside them and keeps `rag_budget`.
        """
        return self.spendable if rag_in_scope else self.spendable - self.rag_budget


CALIBRATION_KEY = "contextkit_calibration"
"""The state key that holds a `Calibration.to_dict()` (middleware and nodes alike)."""

_WINDOW = 12
"""Recent calls kept."""

_DECAY = 0.8
"""Weight of a call relative to the one after it: the conversation's text changes."""

_PRIOR_TOKENS = 1_000
"""Estimated tokens of evidence that the ratio is 1.0 before any call (see the module)."""

_K2 = float(_PRIOR_TOKENS) ** 2

_SPREAD = 0.1
"""Calls spanning less than this share of their mean size lean on the prior slope."""

_REFUSAL_WEIGHT = 4.0
"""How much more a refused request weighs than a served one once it is not the latest."""

_ANY_MODEL = "*"
"""The key of a stated window whose model is unknown."""

_GROWTH_MIN = 32
"""Estimated tokens a call must add to the one before for its growth to be measured."""


def model_key(model: object) -> str:
    """The name a stated window is kept under: the model's name, else its class's."""
    for attribute in ("model_name", "model"):
        name = getattr(model, attribute, None)
        if isinstance(name, str) and name:
            return name
    return type(model).__name__


@dataclass(frozen=True, slots=True)
class Usage:
    """What the provider reported for one call's input."""

    input_tokens: int
    """Every input token of the request, cached ones included."""

    cache_read: int | None = None
    """Input tokens served from the provider's prompt cache, when it says."""

    cache_write: int | None = None
    """Input tokens written to the prompt cache (Anthropic's cache creation, billed above
    plain input), when the provider says."""


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
    cache_write = details.get("cache_creation")
    # `input_tokens` is the whole input (plain + read + written: langchain-anthropic adds
    # the cache's parts back), so calibration sees the request's real size either way.
    return Usage(
        tokens,
        cache_read if isinstance(cache_read, int) else None,
        cache_write if isinstance(cache_write, int) else None,
    )


class Observation(NamedTuple):
    """One call: the ledger's estimate of its request and the provider's count.

    A named tuple: the fitted line is memoised by a call's observations, and a tuple
    hashes and compares in C (a dataclass's generated hash ran once per observation).
    """

    estimated: int
    reported: int
    refused: bool = False
    """The provider refused the request as too long (its count is from the refusal)."""


@dataclass(frozen=True, slots=True)
class _Fit:
    """The line `reported = overhead + ratio x estimated`, and the spread around it."""

    overhead: float = 0.0
    ratio: float = 1.0
    spread: float = 0.0
    """Weighted RMS of the calls' distance from the line, as a share of their mean size."""
    largest: float = 0.0
    """The largest relative excess of a call over the line (0 when none is above)."""

    def at(self, estimated: float) -> float:
        return self.overhead + self.ratio * estimated


@functools.lru_cache(maxsize=256)
def _fit(observations: tuple[Observation, ...]) -> _Fit:
    """Fit the line (see the module docstring); the identity without observations.

    Memoised by the observations (a call asks for the line several times, and threads
    with the same recent calls share it).
    """
    if not observations:
        return _Fit()
    last = len(observations) - 1
    decays = [
        _DECAY ** (last - i) * (_REFUSAL_WEIGHT if o.refused else 1.0)
        for i, o in enumerate(observations)
    ]
    weights = [d * o.estimated for d, o in zip(decays, observations, strict=True)]
    total = sum(weights)
    sizes = [float(o.estimated) for o in observations]
    reports = [float(o.reported) for o in observations]
    # The prior slope: the calls' ratio shrunk towards 1.0, each call's evidence growing
    # with the square of its size: a call of `_PRIOR_TOKENS` counts as much as the prior,
    # one of a tenth of that a hundredth as much (its excess is read as overhead).
    prior = (sum(d * e * r for d, e, r in zip(decays, sizes, reports, strict=True)) + _K2) / (
        sum(d * e * e for d, e in zip(decays, sizes, strict=True)) + _K2
    )
    pinned = observations[-1].refused  # the line goes through a refusal exactly
    if pinned:
        centre, level = sizes[-1], reports[-1]
    else:
        centre = sum(w * e for w, e in zip(weights, sizes, strict=True)) / total
        level = sum(w * r for w, r in zip(weights, reports, strict=True)) / total
    sxx = sum(w * (e - centre) ** 2 for w, e in zip(weights, sizes, strict=True))
    sxy = sum(
        w * (e - centre) * (r - level) for w, e, r in zip(weights, sizes, reports, strict=True)
    )
    shrink = total * (_SPREAD * centre) ** 2  # ridge: as much as a spread of _SPREAD
    ratio = (sxy + shrink * prior) / (sxx + shrink)
    if ratio <= 0:
        ratio = prior
    line = _Fit(overhead=level - ratio * centre, ratio=ratio)
    if pinned:
        return line  # the refusal is used exactly: no margin on top
    residuals = [r - line.at(e) for e, r in zip(sizes, reports, strict=True)]
    # The scatter in tokens, as a share of the calls' mean size: a tiny call far off the
    # line in relative terms is a few tokens off, and does not widen the margin.
    scatter = math.sqrt(sum(w * x * x for w, x in zip(weights, residuals, strict=True)) / total)
    spread = scatter / max(level, 1.0)
    # Tiny calls (under a quarter of the mean size) do not set the cautious margin.
    excess = [
        x / max(line.at(e), 1.0) for e, x in zip(sizes, residuals, strict=True) if e >= centre / 4
    ]
    return replace(line, spread=spread, largest=max(0.0, *excess))


@dataclass(frozen=True, slots=True)
class Calibration:
    """The correction of one thread's token estimate, learnt from reported usage.

    Attributes:
        observations: Recent calls, oldest first (at most twelve).
        calls: Calls observed in all.
        windows: The windows providers stated when they refused a request as too long,
            by model (`model_key`): later calls to that model keep within it.
        model: The model the next call goes to (`for_model`), whose stated window
            applies; not stored.
        cautious_margin: Size with the largest recent excess over the line rather than
            the usual spread (`cautious`); not stored.
    """

    observations: tuple[Observation, ...] = ()
    calls: int = 0
    windows: tuple[tuple[str, int], ...] = ()
    model: str | None = None
    cautious_margin: bool = False
    _fitted: _Fit | None = field(default=None, init=False, repr=False, compare=False)
    """The line, once asked for: a call asks several times (hashing the observations
    for `_fit`'s memo each time cost more than the rest of the calibration)."""

    @property
    def _line(self) -> _Fit:
        line = self._fitted
        if line is None:
            line = _fit(self.observations)
            object.__setattr__(self, "_fitted", line)  # a cache, not a change of value
        return line

    @property
    def overhead(self) -> float:
        """Provider tokens added to every request, whatever its size (the line's intercept)."""
        return self._line.overhead

    @property
    def ratio(self) -> float:
        """Provider tokens per estimated token (the line's slope; 1.0 before any usage)."""
        return self._line.ratio

    @property
    def factor(self) -> float:
        """Real tokens per estimated token at the conversation's current size.

        The line's value at the latest call's estimate, divided by it: what the ledger
        scales a request of about that size by (1.0 before any usage).
        """
        if not self.observations:
            return 1.0
        return self.factor_at(self.observations[-1].estimated)

    def factor_at(self, estimated: int) -> float:
        """Real tokens per estimated token for a request of `estimated` tokens."""
        if not self.observations or estimated <= 0:
            return 1.0
        return max(self._line.at(estimated), 1.0) / estimated

    @property
    def margin(self) -> float:
        """The share `estimated` keeps free for the calls' scatter around the line."""
        line = self._line
        return max(line.largest, line.spread) if self.cautious_margin else line.spread

    @property
    def window(self) -> int | None:
        """The window the provider stated for `model` when it refused a request."""
        stated = dict(self.windows)
        return stated.get(self.model or _ANY_MODEL, stated.get(_ANY_MODEL))

    def for_model(self, model: object) -> Calibration:
        """This calibration applied to calls to `model` (its stated window, if any)."""
        return self._line_to(replace(self, model=model_key(model)))

    def cautious(self) -> Calibration:
        """This calibration sized by the largest excess of a recent call over its line.

        For a request whose refusal is not retried smaller (a summary written in place
        falls back to another request): it keeps free the worst error recent calls
        showed, not their usual scatter.
        """
        return self._line_to(replace(self, cautious_margin=True))

    def _line_to(self, changed: Calibration) -> Calibration:
        """`changed` (this calibration with the same observations) given the fitted line."""
        object.__setattr__(changed, "_fitted", self._fitted)  # a cache: not fitted again
        return changed

    def real(self, estimated: int) -> int:
        """`estimated` tokens in the provider's tokens: the fitted line's value."""
        if not self.observations:
            return estimated
        return max(0, round(self._line.at(estimated)))

    def estimated(self, real: int) -> int:
        """How many estimated tokens fit in `real` provider tokens (rounded down).

        The inverse of `real` after a margin for the recent calls' scatter (`margin`).
        """
        if not self.observations:
            return real
        line = self._line
        room = real / (1.0 + self.margin) - line.overhead
        return max(0, math.floor(room / line.ratio))

    def observe(self, estimated: int, reported: int) -> Calibration:
        """A calibration that has also seen one call: our estimate and the provider's count.

        Calls with no estimate or no report (0 or less) change nothing.
        """
        return self._with(Observation(estimated, reported))

    def _with(self, observation: Observation) -> Calibration:
        if observation.estimated <= 0 or observation.reported <= 0:
            return self
        kept = (*self.observations, observation)[-_WINDOW:]
        return replace(self, observations=kept, calls=self.calls + 1)

    def observe_refusal(
        self,
        estimated: int,
        reported: int | None,
        *,
        window: int | None = None,
        model: object = None,
    ) -> Calibration:
        """A calibration that has seen a request refused as too long.

        A refusal is certain evidence, not noise: when the provider said how many tokens
        the request took, the line goes exactly through it until the next call is
        observed (the retry is priced by it), and it weighs more than a served call
        until it ages out. The window the provider stated (when it said) is kept for
        `model` (default: the model this calibration applies to) from then on.

        Args:
            estimated: The refused request by the ledger's counter.
            reported: Its input tokens by the provider's count, when the refusal says.
            window: The window the provider stated, when the refusal says.
            model: The model that refused it.
        """
        calibration = self
        if reported is not None:
            calibration = calibration._with(Observation(estimated, reported, refused=True))
        if window is not None and window > 0:
            key = self.model or _ANY_MODEL if model is None else model_key(model)
            stated = dict(calibration.windows)
            stated[key] = min(window, stated.get(key, window))
            calibration = replace(calibration, windows=tuple(sorted(stated.items())))
        return calibration

    def to_dict(self) -> dict[str, Any]:
        """Plain data for graph state and checkpointers."""
        data: dict[str, Any] = {
            "observations": [
                [o.estimated, o.reported, *([1] if o.refused else [])] for o in self.observations
            ],
            "calls": self.calls,
        }
        if self.windows:
            data["windows"] = dict(self.windows)
        return data

    @classmethod
    def from_state(cls, stored: object) -> Calibration:
        """Rebuild from `to_dict` output; anything else is fresh."""
        if not isinstance(stored, Mapping):
            return cls()
        observations = _observations(stored.get("observations"))
        if observations is None:
            return cls()
        calls = stored.get("calls")
        return cls(
            observations[-_WINDOW:],
            calls if _is_count(calls) else len(observations),
            _windows(stored),
        )


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _observations(raw: object) -> tuple[Observation, ...] | None:
    """Stored observations, the malformed ones skipped; None when there is no list."""
    if not isinstance(raw, list):
        return None
    return tuple(
        Observation(item[0], item[1], refused=item[2:] == [1])
        for item in raw
        if isinstance(item, list) and len(item) in (2, 3) and all(map(_is_count, item[:2]))
    )


def _windows(stored: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    windows = stored.get("windows")
    out: dict[str, int] = {}
    if isinstance(windows, Mapping):
        out.update({k: v for k, v in windows.items() if isinstance(k, str) and _is_count(v)})
    return tuple(sorted(out.items()))


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
    last twelve such additions (one odd addition does not move it); None with fewer
    than two.
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
            rates.append(real / added)
    return statistics.median(rates) if len(rates) >= 2 else None  # noqa: PLR2004
