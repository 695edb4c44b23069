"""Seeing and testing context quality: a gate on every request, and ablation.

`QualityGate` checks a request (tokens, evidence, required facts, redundancy, the
retrieval share) and `assert_context_quality` turns it into a test assertion;
`ablate` / `aablate` measure what each part of the context is worth to the answers;
`evaluate` / `aevaluate` run a set of cases against a context policy (a builder, an
assembler, the middleware or an agent) and compare the result with a baseline (`Drift`).
"""

from __future__ import annotations

from langchain_contextkit.quality.ablation import (
    AblationCase,
    AblationReport,
    ComponentScore,
    aablate,
    ablate,
)
from langchain_contextkit.quality.drift import CaseDelta, Drift, FigureDelta
from langchain_contextkit.quality.eval_result import CaseResult, EvalResult
from langchain_contextkit.quality.evaluate import EvalCase, JudgeScore, aevaluate, evaluate
from langchain_contextkit.quality.gate import (
    Fact,
    GateCheck,
    GateResult,
    QualityGate,
    assert_context_quality,
)

__all__ = [
    "AblationCase",
    "AblationReport",
    "CaseDelta",
    "CaseResult",
    "ComponentScore",
    "Drift",
    "EvalCase",
    "EvalResult",
    "Fact",
    "FigureDelta",
    "GateCheck",
    "GateResult",
    "JudgeScore",
    "QualityGate",
    "aablate",
    "ablate",
    "aevaluate",
    "assert_context_quality",
    "evaluate",
]
