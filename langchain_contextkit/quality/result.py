"""`GateResult` and `GateCheck`: a quality gate's verdict, each check with its figure.

Plain data: `to_dict()` is what a call's ledger stores under ``gate``, and
`GateResult.from_dict` reads it back (for reports over ledger files).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Figure", "GateCheck", "GateResult"]

Figure = int | float
"""A check's measured figure or threshold."""


@dataclass(frozen=True, slots=True)
class GateCheck:
    """One check of a gate: its figure against its threshold."""

    name: str
    """The threshold's name (`max_request_tokens`, `min_evidence`, ...)."""
    passed: bool | None
    """True or False; None when the target lacks the data (not applicable)."""
    figure: Figure | None
    """What was measured (None when not applicable)."""
    threshold: Figure
    """The gate's threshold (for `required_facts`: how many facts are required)."""
    detail: str
    """How the figure was measured, what is missing, or why the check does not apply."""

    @property
    def applicable(self) -> bool:
        """Whether the target carried the data this check needs."""
        return self.passed is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data."""
        return {
            "name": self.name,
            "passed": self.passed,
            "figure": self.figure,
            "threshold": self.threshold,
            "detail": self.detail,
        }

    def __str__(self) -> str:
        """One line: status, name, figure against threshold, detail."""
        status = {True: "pass", False: "FAIL", None: "n/a "}[self.passed]
        figure = "-" if self.figure is None else _shown(self.figure)
        return (
            f"{status}  {self.name:20} {figure:>8} {_RELATION.get(self.name, 'vs')} "
            f"{_shown(self.threshold):<8} {self.detail}"
        ).rstrip()


@dataclass(frozen=True, slots=True)
class GateResult:
    """A gate's verdict: passed when no applicable check failed.

    `str(result)` is a readable table; `to_dict()` plain JSON data (what a call's ledger
    stores under ``gate``); `GateResult.from_dict` reads it back.

    Example:
        ```python
        from langchain_core.messages import HumanMessage

        from langchain_contextkit.quality import GateResult, QualityGate

        gate = QualityGate(max_request_tokens=5, min_evidence=1)
        result = gate.check([HumanMessage("a question far too long for five tokens")])
        print(result)
        # quality gate FAILED (1 failed): 2 checks, 1 not applicable
        #   FAIL  max_request_tokens         18 <= 5        the messages, counted
        #   n/a   min_evidence                - >= 1        a message list has no kept items
        stored = result.to_dict()  # what a call's ledger keeps under "gate"
        assert GateResult.from_dict(stored) == result
        print([check.name for check in result.failed])
        # ['max_request_tokens']
        ```
    """

    passed: bool
    checks: tuple[GateCheck, ...]

    @property
    def failed(self) -> tuple[GateCheck, ...]:
        """The checks that failed."""
        return tuple(c for c in self.checks if c.passed is False)

    @property
    def not_applicable(self) -> tuple[GateCheck, ...]:
        """The checks the target lacked the data for."""
        return tuple(c for c in self.checks if c.passed is None)

    def __getitem__(self, name: str) -> GateCheck:
        """The check named `name`.

        Raises:
            KeyError: When the gate has no such check.
        """
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data: ``{"passed": ..., "checks": [{name, passed, figure, ...}]}``."""
        return {"passed": self.passed, "checks": [c.to_dict() for c in self.checks]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GateResult:
        """Read back what `to_dict` wrote (for example from a call's ledger)."""
        checks = tuple(
            GateCheck(
                name=c["name"],
                passed=c["passed"],
                figure=c["figure"],
                threshold=c["threshold"],
                detail=c["detail"],
            )
            for c in data.get("checks", [])
        )
        return cls(passed=bool(data["passed"]), checks=checks)

    def failure_lines(self) -> list[str]:
        """One line per failed check: its name, figure, threshold and detail."""
        return [_failure_line(check) for check in self.failed]

    def __str__(self) -> str:
        """A header with the verdict, then one line per check."""
        verdict = "passed" if self.passed else f"FAILED ({len(self.failed)} failed)"
        extra = f", {len(self.not_applicable)} not applicable" if self.not_applicable else ""
        lines = [f"quality gate {verdict}: {len(self.checks)} checks{extra}"]
        lines += [f"  {check}" for check in self.checks]
        return "\n".join(lines)


_RELATION = {
    "max_request_tokens": "<=",
    "min_evidence": ">=",
    "required_facts": "of",
    "max_redundancy": "<=",
    "max_retrieval_share": "<=",
}


def _shown(value: Figure) -> str:
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.3f}"
    return str(int(value)) if isinstance(value, float) else str(value)


def _failure_line(check: GateCheck) -> str:
    figure = "-" if check.figure is None else _shown(check.figure)
    if check.name == "required_facts":
        return f"- {check.name}: {figure} of {_shown(check.threshold)} present; {check.detail}"
    relation = _RELATION.get(check.name, "vs")
    return (
        f"- {check.name}: {figure} (must be {relation} {_shown(check.threshold)}); {check.detail}"
    )
