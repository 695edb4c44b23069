"""`contextkit report`: figures recomputed by hand from a small log, JSON, the chart, errors."""

from __future__ import annotations

import json
import struct
import sys
from typing import TYPE_CHECKING, Any

import pytest

from langchain_contextkit.cli import main
from langchain_contextkit.dashboard import plot_ledger, summarize_ledgers
from langchain_contextkit.errors import PlotUnavailableError

if TYPE_CHECKING:
    from pathlib import Path


def _line(thread: str, call: int, prompt: int, retrieval: int, **fields: Any) -> dict[str, Any]:
    """A ledger line as the writer writes it, in a 1,000-token window (100 reserved)."""
    rest = prompt - retrieval
    return {
        "call": call,
        "window": 1000,
        "output_reserve": 100,
        "system": rest // 2,
        "tools": 0,
        "summary": 0,
        "retrieval": retrieval,
        "history": rest - rest // 2 - 10,
        "turn": 10,
        "free": 900 - prompt,
        "compacted": False,
        "reduced": False,
        "estimated": prompt,
        "factor": 1.0,
        "reported": None,
        "cache_read": None,
        "retried": False,
        "offloaded": 0,
        "offloaded_tokens": 0,
        "offload_failed": 0,
        "thread_id": thread,
        "timestamp": f"2025-01-01T00:00:0{call}+00:00",
        "gate": None,
        **fields,
    }


# Written by hand; the expected figures below are worked out from these numbers alone.
LINES = [
    _line("a", 1, 400, 100, estimated=380, reported=410, cache_read=0, model_ms=120.0),
    _line("a", 2, 600, 150, reported=640, cache_read=400, compacted=True, model_ms=80.0),
    _line(
        "a",
        3,
        700,
        350,
        estimated=690,
        retried=True,
        gate={"passed": False, "checks": []},
        model_ms=300.0,
        middleware_ms=6.0,
    ),
    _line("b", 1, 200, 0, reported=220, gate={"passed": True, "checks": []}, model_ms=50),
    _line("b", 2, 800, 200, reported=900, cache_read=800, compacted=True, reduced=True),
]
# model_ms: 120, 80, 300 and 50 (an int, as a hand-written log may hold); b's second call
# carries none (a line written before the ledger timed calls). middleware_ms below.
for _line_, _own in zip(LINES, (2.0, 4.0, 6.0, 1.0, None), strict=True):
    _line_["middleware_ms"] = _own
# Input tokens: reported where present, else estimated: 410, 640, 690 (est.), 220, 900.
OVERALL = {
    "calls": 5,
    "input_mean": (410 + 640 + 690 + 220 + 900) / 5,  # 572
    "input_p95": 900,  # nearest rank: ceil(0.95 * 5) = 5th of 220, 410, 640, 690, 900
    "input_reported": 4,
    "cache_hit_rate": (0 + 400 + 0 + 800) / (410 + 640 + 220 + 900),  # calls that report
    "cache_calls": 4,
    "evidence_share": (100 / 400 + 150 / 600 + 350 / 700 + 0 / 200 + 200 / 800) / 5,  # 0.25
    "compactions": 2,
    "compactions_per_100": 40.0,
    "reductions": 1,
    "overflow_retries": 1,
    "gate_checked": 2,
    "gate_failures": 1,
    "latency_mean_ms": (120 + 80 + 300 + 50) / 4,  # the four timed calls
    "latency_p95_ms": 300,  # ceil(0.95 * 4) = 4th of 50, 80, 120, 300
    "middleware_mean_ms": (2 + 4 + 6 + 1) / 4,
    "timed_calls": 4,
}
THREAD_A = {
    "calls": 3,
    "input_mean": (410 + 640 + 690) / 3,  # 580
    "input_p95": 690,  # ceil(2.85) = 3rd
    "cache_hit_rate": 400 / (410 + 640),
    "evidence_share": (0.25 + 0.25 + 0.5) / 3,
    "compactions_per_100": 100 / 3,
    "overflow_retries": 1,
    "gate_failures": 1,
    "latency_mean_ms": (120 + 80 + 300) / 3,
    "latency_p95_ms": 300,  # ceil(2.85) = 3rd
    "middleware_mean_ms": 4.0,
}
THREAD_B = {
    "calls": 2,
    "input_mean": 560.0,
    "input_p95": 900,
    "cache_hit_rate": 800 / (220 + 900),
    "evidence_share": (0.0 + 0.25) / 2,
    "compactions_per_100": 50.0,
    "overflow_retries": 0,
    "gate_failures": 0,
    "latency_mean_ms": 50.0,
    "latency_p95_ms": 50,
    "middleware_mean_ms": 1.0,
    "timed_calls": 1,
}


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "calls.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in LINES), encoding="utf-8")
    return path


def _check(figures: dict[str, Any], expected: dict[str, Any]) -> None:
    for key, value in expected.items():
        assert figures[key] == pytest.approx(value), key


def test_the_figures_match_the_hand_computed_ones() -> None:
    dashboard = summarize_ledgers(LINES)
    _check(dashboard.overall.to_dict(), OVERALL)
    assert dashboard.overall.input_source == "mixed"
    a, b = dashboard.threads
    assert (a.thread_id, b.thread_id) == ("a", "b")
    _check(a.to_dict(), THREAD_A)
    _check(b.to_dict(), THREAD_B)


@pytest.mark.parametrize(("count", "p95"), [(1, 1), (19, 19), (20, 19), (21, 20), (100, 95)])
def test_p95_is_the_nearest_rank(count: int, p95: int) -> None:
    lines = [_line("t", n, 500, 0, reported=n) for n in range(count, 0, -1)]  # unsorted
    figures = summarize_ledgers(lines).overall
    assert figures.input_p95 == p95
    assert figures.input_source == "reported"


def test_without_reported_usage_the_estimates_are_used_and_said() -> None:
    lines = [_line("t", 1, 300, 30), _line("t", 2, 500, 50)]
    figures = summarize_ledgers(lines).overall
    assert figures.input_mean == 400
    assert figures.input_source == "estimated"
    assert figures.cache_hit_rate is None
    assert figures.gate_checked == 0
    text = summarize_ledgers(lines).text()
    assert "mean 400, p95 500 (the ledger's estimates: no call reports usage)" in text
    assert "cache-hit rate     n/a: no call reports usage" in text
    assert "latency            n/a: no call carries model_ms" in text
    assert "n/a: no call carries a quality gate result" in text
    assert "thread  " not in text  # one thread: no table


def test_the_report_prints_the_figures_and_a_table_per_thread(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"ledger report of {log}: 5 model calls, 2 threads" in out
    assert "mean 572, p95 900 (reported for 4 calls, estimated for 1)" in out
    assert f"{1200 / 2170:.1%} of reported input tokens read from the cache (4 calls)" in out
    assert "25.0% of the input is retrieved context" in out
    assert "compactions        2 (40.0 per 100 calls)" in out
    assert "overflow retries   1\n" in out
    assert "gate failures      1 of 2 gated calls" in out
    assert (
        "latency            model mean 137.5 ms, p95 300.0 ms; middleware 3.2 ms a call (4 timed)"
    ) in out
    rows = {
        line.split()[0]: line.split() for line in out.splitlines() if line[:3] in ("  a", "  b")
    }
    assert rows["a"] == [
        *("a", "3", "580", "690", "38.1%", "33.3%", "166.7", "300.0", "33.3", "1", "1")
    ]
    assert rows["b"] == [
        *("b", "2", "560", "900", "71.4%", "12.5%", "50.0", "50.0", "50.0", "0", "0")
    ]


def test_json_parses_and_holds_the_same_figures(
    log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(log), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["path"] == str(log)
    assert data["chart"] is None
    _check(data["overall"], OVERALL)
    assert [t["thread_id"] for t in data["threads"]] == ["a", "b"]
    _check(data["threads"][0], THREAD_A)
    _check(data["threads"][1], THREAD_B)


def test_thread_picks_one_thread(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(log), "--json", "--thread", "b"]) == 0
    data = json.loads(capsys.readouterr().out)
    _check(data["overall"], THREAD_B)
    assert main(["report", str(log), "--thread", "zzz"]) == 2
    assert "(its threads: a, b)" in capsys.readouterr().err


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_plot_saves_a_real_png(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chart = tmp_path / "chart.png"
    assert main(["report", str(log), "--plot", str(chart)]) == 0
    assert f"chart              {chart}" in capsys.readouterr().out
    data = chart.read_bytes()
    width, height = _png_size(data)
    assert 800 <= width <= 3000
    assert 400 <= height <= 1000
    assert len(data) > 15_000  # bars, labels and legend, not an empty canvas


def test_a_long_conversation_chart_scales_its_width(tmp_path: Path) -> None:
    lines = [
        _line("t", n, 300 + 7 * n, 100, compacted=n % 20 == 0, reported=310 + 7 * n)
        for n in range(1, 121)
    ]
    short = _png_size(plot_ledger(lines[:10], tmp_path / "short.png").read_bytes())
    long = _png_size(plot_ledger(lines, tmp_path / "long.png").read_bytes())
    assert long[0] > short[0]
    assert long[1] == short[1]
    with pytest.raises(ValueError, match="no call ledgers"):
        plot_ledger([], tmp_path / "none.png")


def _hide_matplotlib(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes `import matplotlib...` raise ImportError.
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)


def test_missing_matplotlib_is_a_clear_message_and_status_2(
    log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _hide_matplotlib(monkeypatch)
    chart = tmp_path / "chart.png"
    assert main(["report", str(log), "--plot", str(chart)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("contextkit report: --plot: the chart needs matplotlib")
    assert 'pip install "langchain-contextkit[plot]"' in captured.err
    assert not chart.exists()
    with pytest.raises(PlotUnavailableError, match="needs matplotlib"):
        plot_ledger(LINES, chart)
    assert main(["report", str(log)]) == 0  # the figures need no matplotlib


def test_bad_input_names_the_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "missing.jsonl")]) == 1
    assert "missing.jsonl: cannot read the ledger log" in capsys.readouterr().err
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(LINES[0]) + "\n" + json.dumps(LINES[1]) + "\n{oops\n")
    assert main(["report", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"contextkit report: {path}:3: not a JSON line")
    assert err.count("\n") == 1  # one line, no traceback
    path.write_text("\n")
    assert main(["report", str(path)]) == 1
    assert "no call ledgers in it" in capsys.readouterr().err


def test_the_demo_writes_its_log_prints_its_report_and_saves_the_chart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    ledger, chart = tmp_path / "out" / "demo.jsonl", tmp_path / "demo.png"
    ledger.parent.mkdir()
    ledger.write_text("left over from an earlier run\n")  # replaced, not appended to
    args = ["demo", "--turns", "4", "--workspace", str(tmp_path / "ws")]
    assert main([*args, "--ledger", str(ledger), "--plot", str(chart), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert (
        len(lines) == data["calls"] == data["report"]["overall"]["calls"] == data["report"]["lines"]
    )
    for line, entry in zip(lines, data["ledgers"], strict=True):
        assert line["call"] == entry["call"]
        assert line["prompt"] == entry["prompt"]
        assert line["thread_id"] == "contextkit-demo"
    assert data["report"]["overall"]["compactions"] == len(data["compactions"])
    assert data["report"]["chart"] == str(chart.resolve())
    _png_size(chart.read_bytes())

    assert main([*args[:-1], str(tmp_path / "ws2")]) == 0  # text, default log in the workspace
    out = capsys.readouterr().out
    report = out.split("report (contextkit report on the ledger log):")[1]
    assert f"{data['calls']} model calls, 1 thread" in report  # the same four turns
    assert "evidence share" in report
    assert f"ledger log         {tmp_path / 'ws2' / 'ledger.jsonl'}" in report  # kept there


def test_the_demo_refuses_plot_without_matplotlib_before_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _hide_matplotlib(monkeypatch)
    workspace = tmp_path / "ws"
    assert main(["demo", "--workspace", str(workspace), "--plot", str(tmp_path / "c.png")]) == 2
    captured = capsys.readouterr()
    assert "contextkit demo: --plot: the chart needs matplotlib" in captured.err
    assert captured.out == ""
    assert not workspace.exists()
