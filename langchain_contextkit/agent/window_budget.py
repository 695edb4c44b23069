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

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from langchain_contextkit.errors import check_count, check_fraction
from langchain_contextkit.tokens.limits import model_limits

if TYPE_CHECKING:
    from langchain_contextkit.agent.calibration import Calibration

__all__ = [
    "WindowBudget",
    "WindowBudgetConfig",
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
            from langchain_contextkit.agent.calibration import Calibration
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
