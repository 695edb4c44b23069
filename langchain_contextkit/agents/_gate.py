"""The quality-gate hook of the middleware and the node: check, record, act.

The agents layer knows a gate only by what it needs of one (`GateLike`): a `check` that
takes the assembly and the full request and returns a result with `passed`, `to_dict()`
and a readable `str`. `QualityGate` (in `langchain_contextkit.quality`) is one.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from typing import TYPE_CHECKING, Any, Literal, Protocol

from langchain_contextkit.errors import ConfigError, ContextQualityError, ContextQualityWarning

if TYPE_CHECKING:
    from collections.abc import Sequence

    from langchain_core.messages import BaseMessage

    from langchain_contextkit.agents.plan import WindowAssembly

__all__ = ["GateLike", "GateOutcome", "OnGateFail", "check_gate_options", "gated"]

logger = logging.getLogger("langchain_contextkit.quality")

OnGateFail = Literal["log", "raise", "warn"]
"""What a failed gate does: log at WARNING, raise `ContextQualityError`, or warn."""

_MODES = ("log", "raise", "warn")


class GateOutcome(Protocol):
    """What the hook needs of a gate's result."""

    @property
    def passed(self) -> bool:
        """Whether every applicable check passed."""
        ...

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data, stored in the call's ledger."""
        ...


class GateLike(Protocol):
    """What the hook needs of a gate (`QualityGate` is one)."""

    def check(
        self,
        target: object,
        *,
        messages: Sequence[BaseMessage] | None = None,
    ) -> GateOutcome:
        """Evaluate the gate on `target` (here a `WindowAssembly` and its full request)."""
        ...


def check_gate_options(gate: object, on_fail: object) -> None:
    """Fail early on a gate without `check` or an unknown `on_gate_fail`.

    Raises:
        ConfigError: On either.
    """
    if on_fail not in _MODES:
        msg = f"on_gate_fail must be one of {list(_MODES)}, got {on_fail!r}"
        raise ConfigError(msg)
    if gate is not None and not callable(getattr(gate, "check", None)):
        msg = f"quality_gate takes a QualityGate, got {type(gate).__name__}"
        raise ConfigError(msg)


def gated(
    assembly: WindowAssembly,
    gate: GateLike | None,
    on_fail: OnGateFail,
    *,
    system: BaseMessage | None = None,
) -> WindowAssembly:
    """The assembly with the gate's result in its ledger; a failure acted on first.

    Args:
        assembly: The assembled request.
        gate: The gate (None: the assembly is returned as it is).
        on_fail: What a failure does (see `OnGateFail`).
        system: The request's system message, so required facts may be found there too.

    Raises:
        ContextQualityError: When the gate failed and `on_fail` is ``"raise"``.
    """
    if gate is None:
        return assembly
    request = [*([system] if system is not None else []), *assembly.messages]
    result = gate.check(assembly, messages=request)
    if not result.passed:
        msg = f"context quality gate failed on call {assembly.ledger.call}:\n{result}"
        if on_fail == "raise":
            raise ContextQualityError(msg, result=result)
        if on_fail == "warn":
            warnings.warn(msg, ContextQualityWarning, stacklevel=2)
        else:
            logger.warning("%s", msg)
    ledger = dataclasses.replace(assembly.ledger, gate=result.to_dict())
    return dataclasses.replace(assembly, ledger=ledger)
