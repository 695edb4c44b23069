"""evaluate: 100 cases against the demo's agent offline, concurrent vs sequential.

The demo's reader agent (`cli/demo/evaluation.py`: ContextKitMiddleware over the sample
project's docs, its compactor and budget, a scripted reader as the model) answers the
five planted-fact questions twenty times each, after the session's conversation. The
target is under 10 s with max_concurrency=8, with the same results as a sequential run.

    PYTHONPATH=$PWD python bench/bench_evaluate.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from langchain_contextkit import evaluate
from langchain_contextkit.cli.demo.evaluation import fact_cases, reader_agent, transcript
from langchain_contextkit.cli.demo.project import copy_project

CASES = 100
TARGET_S = 10.0


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder, "project")
        copy_project(project)
        agent = reader_agent(project, window=6000)
        cases = fact_cases(transcript(), repeat=CASES // 5)
        runs = {}
        for concurrency in (8, 1):
            began = time.perf_counter()
            result = evaluate(agent, cases, "exact", max_concurrency=concurrency)
            runs[concurrency] = (time.perf_counter() - began, result)
        (fast, concurrent), (slow, sequential) = runs[8], runs[1]
        same = [(c.case_id, c.answer, c.score, c.tokens) for c in concurrent.cases] == [
            (c.case_id, c.answer, c.score, c.tokens) for c in sequential.cases
        ]
        print(f"{len(cases)} cases, max_concurrency=8: {fast:.2f} s (target < {TARGET_S:.0f} s)")
        print(f"{len(cases)} cases, sequential:        {slow:.2f} s")
        print(f"same results: {same}; mean score {concurrent.mean_score:.3f}")
        print(
            f"per case: mean {concurrent.mean_latency_ms:.1f} ms, "
            f"p95 {concurrent.p95_latency_ms:.1f} ms, mean request {concurrent.mean_tokens:,.0f} "
            "tokens"
        )


if __name__ == "__main__":
    main()
