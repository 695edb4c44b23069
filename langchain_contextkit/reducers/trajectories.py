"""Typed trajectories of the plan-and-execute and reflection paradigms.

Their reducers must keep structure a message list does not show (step numbers and
statuses; every critique point). Both render to text and validate on construction.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "PlanStep",
    "PlanTrajectory",
    "ReflectionRound",
    "ReflectionTrajectory",
    "StepStatus",
]

StepStatus = Literal["pending", "in_progress", "done", "failed", "skipped"]


class PlanStep(BaseModel):
    """One step of a plan: its number, what it does, its status and its result.

    Example:
        ```python
        from langchain_contextkit.reducers.trajectories import PlanStep

        step = PlanStep(number=2, description="Check the logs", status="done", result="No errors.")
        print(step.render())
        # 2. [done] Check the logs
        #    Result: No errors.
        ```
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    number: int = Field(ge=1)
    """The step's number in the plan; reducers never renumber."""

    description: str
    """What the step does."""

    status: StepStatus = "pending"
    """Where the step stands."""

    result: str | None = None
    """What the step produced, verbatim; None when there is none yet or it was summarised."""

    summarized: bool = False
    """True once a reducer folded the result into the trajectory's summary."""

    def render(self) -> str:
        """The step as the model reads it."""
        head = f"{self.number}. [{self.status}] {self.description}"
        if self.result is not None:
            body = self.result.replace("\n", "\n   ")
            return f"{head}\n   Result: {body}"
        if self.summarized:
            return f"{head} (result summarised below)"
        return head


class PlanTrajectory(BaseModel):
    """A plan-and-execute trajectory: the goal, numbered steps, and any summary so far.

    Example:
        ```python
        from langchain_contextkit.reducers.trajectories import PlanStep, PlanTrajectory

        plan = PlanTrajectory(
            goal="Fix the login bug",
            steps=[
                PlanStep(
                    number=1, description="Reproduce", status="done", result="Fails on Safari 17."
                ),
                PlanStep(number=2, description="Patch the cookie flags"),
            ],
        )
        print(plan.render())
        # Goal: Fix the login bug
        # Plan:
        # 1. [done] Reproduce
        #    Result: Fails on Safari 17.
        # 2. [pending] Patch the cookie flags
        ```
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    goal: str
    """What the plan is for."""

    steps: tuple[PlanStep, ...] = ()
    """The steps, in plan order, numbers unique."""

    summary: str | None = None
    """Summary of the results folded by earlier reductions."""

    key_facts: tuple[str, ...] = ()
    """Facts of folded results that the summary did not keep verbatim (re-inserted)."""

    @field_validator("steps")
    @classmethod
    def _unique_numbers(cls, steps: tuple[PlanStep, ...]) -> tuple[PlanStep, ...]:
        numbers = [step.number for step in steps]
        if len(set(numbers)) != len(numbers):
            msg = f"step numbers must be unique, got {numbers}"
            raise ValueError(msg)
        return steps

    def render(self) -> str:
        """The trajectory as the model reads it: goal, plan, then earlier results."""
        lines = [f"Goal: {self.goal}", "Plan:"]
        lines.extend(step.render() for step in self.steps)
        if self.summary:
            lines.append(f"Summary of earlier results: {self.summary}")
        if self.key_facts:
            lines.append("Key facts: " + "; ".join(self.key_facts))
        return "\n".join(lines)


class ReflectionRound(BaseModel):
    """One draft and the critique points raised about it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    draft: str
    """The answer as drafted in this round."""

    critique: tuple[str, ...] = ()
    """The critique points raised about this draft."""


class ReflectionTrajectory(BaseModel):
    """A reflection loop: the task, its rounds, and the critique points of folded rounds.

    After a reduction, `rounds` holds only the latest round and `critique_points` every
    distinct point raised so far (with how often), so no lesson is lost when old drafts go.

    Example:
        ```python
        from langchain_contextkit.reducers.trajectories import ReflectionRound, ReflectionTrajectory

        loop = ReflectionTrajectory(
            task="Write a haiku about rain",
            rounds=[ReflectionRound(draft="Rain falls.", critique=["Too short: 5-7-5 syllables."])],
        )
        print(loop.render())
        # Task: Write a haiku about rain
        # Critique points so far:
        # - Too short: 5-7-5 syllables.
        # Latest draft (round 1):
        # Rain falls.
        ```
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    """What the loop is working on."""

    rounds: tuple[ReflectionRound, ...] = ()
    """The rounds still held verbatim, oldest first."""

    critique_points: tuple[str, ...] = ()
    """Distinct critique points of folded rounds."""

    folded_rounds: int = Field(default=0, ge=0)
    """How many earlier rounds were folded into `critique_points`."""

    @model_validator(mode="after")
    def _has_a_round_or_points(self) -> ReflectionTrajectory:
        if self.folded_rounds and not self.rounds:
            msg = "a reduced reflection trajectory must keep its latest round"
            raise ValueError(msg)
        return self

    @property
    def round_count(self) -> int:
        """The number of rounds so far, folded ones included."""
        return self.folded_rounds + len(self.rounds)

    def all_points(self) -> list[str]:
        """Every critique point in order: folded ones, then those of the kept rounds."""
        points = list(self.critique_points)
        for round_ in self.rounds:
            points.extend(round_.critique)
        return points

    def render(self) -> str:
        """The loop as the model reads it: task, critique so far, earlier and latest drafts."""
        lines = [f"Task: {self.task}"]
        points = self.all_points()
        if points:
            lines.append("Critique points so far:")
            lines.extend(f"- {point}" for point in points)
        first = self.folded_rounds + 1
        for offset, round_ in enumerate(self.rounds[:-1]):
            lines.append(f"Draft (round {first + offset}):")
            lines.append(round_.draft)
        if self.rounds:
            lines.append(f"Latest draft (round {self.round_count}):")
            lines.append(self.rounds[-1].draft)
        return "\n".join(lines)
