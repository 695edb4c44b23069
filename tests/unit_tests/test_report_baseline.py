"""`contextkit report --baseline`: deltas recomputed by hand, exit statuses, JSON, charts."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from langchain_contextkit import CallableSource, RetrievalResult, compare_ledgers, evaluate
from langchain_contextkit.agent.plan import WindowAssembler
from langchain_contextkit.agent.window_budget import WindowBudgetConfig
from langchain_contextkit.cli import main
from langchain_contextkit.testing import ScriptedChatModel

if TYPE_CHECKING:
    from pathlib import Path


def _line(
    call: int, reported: int, cache_read: int, model_ms: float, **extra: Any
) -> dict[str, Any]:
    return {
        "call": call,
        "window": 1000,
        "output_reserve": 100,
        "free": 900 - reported,
        "retrieval": reported // 4,
        "estimated": reported,
        "reported": reported,
        "cache_read": cache_read,
        "model_ms": model_ms,
        "middleware_ms": 1.0,
        "thread_id": "t",
        **extra,
    }


BASELINE = [_line(1, 400, 0, 100.0), _line(2, 600, 400, 100.0)]
# Larger requests, fewer cache hits, a retry, slower calls.
WORSE = [_line(1, 500, 0, 150.0), _line(2, 700, 200, 250.0, retried=True)]


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_the_deltas_match_the_hand_computed_ones() -> None:
    drift = compare_ledgers(WORSE, BASELINE)
    assert drift["input_mean"].baseline == 500  # (400 + 600) / 2
    assert drift["input_mean"].current == 600  # (500 + 700) / 2
    assert drift["input_mean"].delta == 100
    assert drift["cache_hit_rate"].delta == pytest.approx(200 / 1200 - 400 / 1000)
    assert drift["overflow_retries"].delta == 1
    assert drift["latency_mean_ms"].delta == pytest.approx(200 - 100)
    assert drift["latency_p95_ms"].current == 250
    gated = {f.spec.key for f in drift.regressions}
    # Tokens, their p95 and cost, the hit rate and the retries got worse; latency is not gated.
    assert gated == {"input_mean", "input_p95", "input_cost", "cache_hit_rate", "overflow_retries"}
    assert not drift["evidence_share"].worse  # shown, never gated
    assert compare_ledgers(BASELINE, BASELINE).passed
    # 20% more tokens pass a 25% tolerance; the hit rate fell 23 points, within 0.25.
    loose = compare_ledgers(WORSE, BASELINE, tolerance=0.25)
    # Cost rose 59% (plain + 0.1 x read: 640 -> 1,020); retries rose from 0: any rise.
    assert {f.spec.key for f in loose.regressions} == {"input_cost", "overflow_retries"}
    slow = compare_ledgers(WORSE, BASELINE, tolerance=10, latency_tolerance=0.5)
    assert {f.spec.key for f in slow.regressions} == {
        "latency_mean_ms",  # +100%
        "latency_p95_ms",  # +150%
        "overflow_retries",  # from 0, whatever the tolerance
    }


def test_the_cli_exits_1_on_a_worse_log_and_0_against_itself(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _write(tmp_path / "old.jsonl", BASELINE)
    new = _write(tmp_path / "new.jsonl", WORSE)
    assert main(["report", str(new), "--baseline", str(old)]) == 1
    out = capsys.readouterr().out
    assert f"drift against {old}: WORSE (5 figure(s)); tolerance 0, latency not gated" in out
    assert _row(out, "mean input tokens") == ["500", "600", "+100", "(+20%)", "WORSE"]
    assert _row(out, "mean latency") == ["100.0", "ms", "200.0", "ms", "+100", "ms", "(+100%)"]
    assert main(["report", str(old), "--baseline", str(old)]) == 0
    assert ": passed;" in capsys.readouterr().out
    assert main(["report", str(new), "--baseline", str(old), "--tolerance", "0.25"]) == 1
    capsys.readouterr()
    assert main(["report", str(new), "--baseline", str(old), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["drift"]["passed"] is False
    assert data["baseline"] == str(old)
    by_key = {f["figure"]: f for f in data["drift"]["figures"]}
    assert by_key["input_mean"]["delta"] == 100


def _row(out: str, label: str) -> list[str]:
    """The cells after `label` on the drift table's row for it."""
    line = next(line for line in out.splitlines() if line.strip().startswith(label + "  "))
    return line.strip()[len(label) :].split()


def test_usage_errors_are_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = _write(tmp_path / "old.jsonl", BASELINE)
    assert main(["report", str(old), "--baseline", str(old), "--tolerance", "-1"]) == 2
    assert "--tolerance must be a number >= 0" in capsys.readouterr().err
    result = _saved(tmp_path / "r.json", 0.5)
    assert main(["report", str(old), "--baseline", str(result)]) == 2
    assert main(["report", str(result), "--baseline", str(old)]) == 2
    assert main(["report", str(old), "--baseline", str(tmp_path / "missing.jsonl")]) == 1


# -- saved evaluate results --------------------------------------------------------------

FACTS = {f"What is fact {n}?": f"value-{n}" for n in range(4)}


def _facts(_query: str) -> list[RetrievalResult]:
    return [
        RetrievalResult(f"Fact {n} is {value}. " * 4, 0.9 - n / 10, "rag")
        for n, value in enumerate(FACTS.values())
    ]


def _reader(messages: list[BaseMessage]) -> AIMessage:
    value = FACTS.get(messages[-1].text, "?")
    return AIMessage(value if any(value in m.text for m in messages[:-1]) else "?")


def _saved(path: Path, rag_ratio: float) -> Path:
    assembler = WindowAssembler(
        window=2000,
        sources=[CallableSource("rag", _facts)],
        budget_config=WindowBudgetConfig(desired_output_tokens=400, rag_ratio=rag_ratio),
    )
    model = ScriptedChatModel(respond=_reader)
    evaluate(assembler, list(FACTS.items()), "exact", model=model).to_json(path)
    return path


def test_saved_results_print_their_table_and_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _saved(tmp_path / "good.json", 0.5)
    worse = _saved(tmp_path / "worse.json", 0.05)
    good_data, worse_data = (json.loads(p.read_text()) for p in (good, worse))
    assert good_data["figures"]["mean_score"] == 1.0
    assert worse_data["figures"]["mean_score"] < 1.0
    assert main(["report", str(good)]) == 0
    assert "evaluate WindowAssembler over 4 case(s), judge exact" in capsys.readouterr().out
    assert main(["report", str(worse), "--baseline", str(good)]) == 1
    out = capsys.readouterr().out
    expected = worse_data["figures"]["mean_score"] - 1.0
    assert _row(out, "mean score") == ["1.000", f"{1 + expected:.3f}", f"{expected:+.3f}", "WORSE"]
    assert main(["report", str(good), "--baseline", str(good)]) == 0
    capsys.readouterr()
    assert main(["report", str(worse), "--baseline", str(good), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    worse_cases = [c["case"] for c in data["drift"]["cases"] if c["worse"]]
    dropped = [str(i) for i, c in enumerate(worse_data["cases"], start=1) if c["score"] == 0]
    assert worse_cases == dropped


def test_plot_draws_both_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    old = _write(tmp_path / "old.jsonl", BASELINE)
    new = _write(tmp_path / "new.jsonl", WORSE)
    chart = tmp_path / "drift.png"
    assert main(["report", str(new), "--baseline", str(old), "--plot", str(chart)]) == 1
    assert chart.read_bytes()[1:4] == b"PNG"
    good = _saved(tmp_path / "good.json", 0.5)
    scores = tmp_path / "scores.png"
    assert main(["report", str(good), "--baseline", str(good), "--plot", str(scores)]) == 0
    assert scores.read_bytes()[1:4] == b"PNG"
    assert str(scores) in capsys.readouterr().out
