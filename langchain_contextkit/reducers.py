"""Trajectory reducers: trim an agent's own working trajectory, per paradigm.

(The reducers themselves land with the rest of issue 5; `ReducerConfig` comes first so
the aggregate `ContextKitConfig` can be built beside them.)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_contextkit.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ReducerConfig"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReducerConfig:
    """How much recent text the reducers keep verbatim (seed 002's table).

    The trajectory's token budget is not here: it comes from the window ledger
    (`WindowBudget.trajectory_budget`), so the parts can never add up past the window.

    Example:
        ```python
        from langchain_contextkit.reducers import ReducerConfig

        cfg = ReducerConfig()
        assert (cfg.agent_keep_recent_steps, cfg.plan_keep_recent) == (3, 3)
        assert ReducerConfig.from_dict(cfg.to_dict()) == cfg
        ```
    """

    agent_keep_recent_steps: int = 3
    """Tool-loop units (an AI message with its tool results) kept verbatim at the end."""

    plan_keep_recent: int = 3
    """Plan step results kept verbatim at the end."""

    def __post_init__(self) -> None:
        """Validate the knobs."""
        for name in ("agent_keep_recent_steps", "plan_keep_recent"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                msg = f"{name} must be an int >= 0, got {value!r}."
                raise ConfigError(msg)

    def to_dict(self) -> dict[str, Any]:
        """The knobs as a plain dict."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReducerConfig:
        """Build from a dict; an unknown key is an error that names it.

        Raises:
            ConfigError: On an unknown key or an invalid value.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            msg = f"unknown ReducerConfig keys: {unknown}; known: {sorted(known)}."
            raise ConfigError(msg)
        return cls(**data)
