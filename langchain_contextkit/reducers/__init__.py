"""Trajectory reducers: trim an agent's own working trajectory, per paradigm.

A generic summary breaks a paradigm: it strips a reflection loop's past critiques or a
plan's exact step numbers. Each reducer knows what its paradigm cannot lose, keeps it
verbatim, summarises only the rest, and raises `ContextWindowExceeded` when what must be
kept already exceeds the budget:

- [`reduce_agent`][langchain_contextkit.reducers.agent.reduce_agent]: a tool-call loop.
- [`reduce_plan`][langchain_contextkit.reducers.plan.reduce_plan]: a plan-and-execute
  trajectory (`PlanTrajectory`).
- [`reduce_reflection`][langchain_contextkit.reducers.reflection.reduce_reflection]:
  draft/critique rounds (`ReflectionTrajectory`).

Each is async and has a `*_sync` twin with the same arguments for sync code.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from langchain_contextkit.reducers.agent import reduce_agent, reduce_agent_sync
from langchain_contextkit.reducers.base import ReducerConfig, tokens_of
from langchain_contextkit.reducers.plan import reduce_plan, reduce_plan_sync
from langchain_contextkit.reducers.reflection import reduce_reflection, reduce_reflection_sync
from langchain_contextkit.reducers.trajectories import (
    PlanStep,
    PlanTrajectory,
    ReflectionRound,
    ReflectionTrajectory,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

__all__ = [
    "REDUCERS",
    "PlanStep",
    "PlanTrajectory",
    "ReducerConfig",
    "ReflectionRound",
    "ReflectionTrajectory",
    "reduce_agent",
    "reduce_agent_sync",
    "reduce_plan",
    "reduce_plan_sync",
    "reduce_reflection",
    "reduce_reflection_sync",
    "tokens_of",
]

REDUCERS: Mapping[str, Callable[..., Awaitable[Any]]] = MappingProxyType(
    {"agent": reduce_agent, "plan": reduce_plan, "reflection": reduce_reflection}
)
"""The reducer of each paradigm, by name."""
