"""Seeing and testing context quality: a gate on every request, and ablation.

`QualityGate` checks a request (tokens, evidence, required facts, redundancy, the
retrieval share) and `assert_context_quality` turns it into a test assertion;
`ablate` / `aablate` measure what each part of the context is worth to the answers.
"""

from __future__ import annotations

from langchain_contextkit.quality.ablation import (
    AblationCase,
    AblationReport,
    ComponentScore,
    aablate,
    ablate,
)
from langchain_contextkit.quality.gate import Fact, QualityGate, assert_context_quality
from langchain_contextkit.quality.result import GateCheck, GateResult

__all__ = [
    "AblationCase",
    "AblationReport",
    "ComponentScore",
    "Fact",
    "GateCheck",
    "GateResult",
    "QualityGate",
    "aablate",
    "ablate",
    "assert_context_quality",
]
