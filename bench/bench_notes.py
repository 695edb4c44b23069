"""Latency of `FileNoteStore` create, update, list and search as the store grows.

    python bench/bench_notes.py            # 1,000 and 10,000 notes
    python bench/bench_notes.py --quick    # 200 and 1,000 notes (CI smoke run)

For each size the store is filled with generated notes (mixed English and Chinese,
200 to 1,200 characters, a type and a few tags each), then, in this order:

- create: median and p95 of creating notes, each an fsynced file plus an fsynced journal
  line (journal compactions included, as they fall);
- update: median and p95 of replacing the content of random notes;
- list: median of `list_notes(limit=20)` and of listing every note;
- search: the first search (builds the in-memory BM25 index from every file), then the
  median and p95 of warm searches (random 1 to 3 word queries, English and Chinese),
  then the median of a search right after an update (the index catches up by one note);
- open: opening the store from a second process (reads the index, checks every file).

Targets (issue 6): warm search median under 100 ms at the largest size, and create and
update costs independent of the number of notes: the largest size's median CPU time within
2x the smallest's. CPU time (`time.process_time`), not wall time, is what is compared:
each write waits for three fsyncs, and on a shared disk their latency swings by 10x from
one minute to the next, whatever the store's size. Wall times are printed beside it.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_contextkit.notes import NOTE_TYPES, FileNoteStore

SEARCH_TARGET_MS = 100.0
GROWTH_LIMIT = 2.0

_WORDS = [
    "cache", "index", "schema", "migration", "deploy", "rollback", "latency", "timeout",
    "database", "replica", "queue", "worker", "retry", "token", "budget", "window",
    "summary", "blocker", "refactor", "model", "service", "client", "server", "lock",
    "journal", "backup", "metrics", "alert", "pipeline", "batch", "stream", "parser",
    "config", "release", "branch", "review", "coverage", "fixture", "benchmark", "profile",
]  # fmt: skip
_HAN = "数据模型层重构测试覆盖率依赖冲突版本兼容业务逻辑模块接口性能缓存索引部署回滚延迟队列"


def _word(rng: random.Random) -> str:
    if rng.random() < 0.3:
        start = rng.randrange(len(_HAN) - 4)
        return _HAN[start : start + rng.randint(2, 4)]
    # Synthetic rare words too, so the vocabulary grows with the store as real notes do.
    return (
        rng.choice(_WORDS) if rng.random() < 0.7 else f"{rng.choice(_WORDS)}{rng.randrange(5000)}"
    )


def _note(rng: random.Random, i: int) -> dict[str, object]:
    words = [_word(rng) for _ in range(rng.randint(40, 240))]
    return {
        "title": " ".join(_word(rng) for _ in range(rng.randint(2, 6))) + f" #{i}",
        "content": " ".join(words),
        "note_type": rng.choice(NOTE_TYPES),
        "tags": rng.sample(_WORDS, rng.randint(0, 3)),
    }


def _ms(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered) * 1e3, ordered[int(0.95 * (len(ordered) - 1))] * 1e3


def _timed(fn, repeats: int) -> list[float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def run(size: int, rng: random.Random, workdir: Path) -> dict[str, float]:
    workspace = workdir / f"notes-{size}"
    store = FileNoteStore(workspace, max_notes=None)
    start = time.perf_counter()
    ids = [store.create(**_note(rng, i)).id for i in range(size)]  # type: ignore[arg-type]
    fill = time.perf_counter() - start
    ops = 200
    results: dict[str, float] = {"fill_s": fill}

    samples, cpu = [], []
    for i in range(ops):
        spec = _note(rng, size + i)
        begin, begin_cpu = time.perf_counter(), time.process_time()
        ids.append(store.create(**spec).id)  # type: ignore[arg-type]
        cpu.append(time.process_time() - begin_cpu)
        samples.append(time.perf_counter() - begin)
    results["create_med"], results["create_p95"] = _ms(samples)
    results["create_cpu"], _ = _ms(cpu)

    samples, cpu = [], []
    for _ in range(ops):
        target, spec = rng.choice(ids), _note(rng, 0)
        begin, begin_cpu = time.perf_counter(), time.process_time()
        store.update(target, content=spec["content"])  # type: ignore[arg-type]
        cpu.append(time.process_time() - begin_cpu)
        samples.append(time.perf_counter() - begin)
    results["update_med"], results["update_p95"] = _ms(samples)
    results["update_cpu"], _ = _ms(cpu)

    results["list20_med"], _ = _ms(_timed(lambda: store.list_notes(limit=20), 50))
    results["list_all_med"], _ = _ms(_timed(store.list_notes, 20))

    queries = [" ".join(_word(rng) for _ in range(rng.randint(1, 3))) for _ in range(100)]
    begin = time.perf_counter()
    store.search(queries[0])
    results["search_cold_ms"] = (time.perf_counter() - begin) * 1e3
    samples = []
    for query in queries:
        begin = time.perf_counter()
        store.search(query)
        samples.append(time.perf_counter() - begin)
    results["search_med"], results["search_p95"] = _ms(samples)
    filtered = _timed(lambda: store.search(rng.choice(queries), note_type="blocker"), 50)
    results["search_filtered_med"], _ = _ms(filtered)

    samples = []
    for query in queries[:30]:
        store.update(rng.choice(ids), content=str(_note(rng, 0)["content"]))
        begin = time.perf_counter()
        store.search(query)
        samples.append(time.perf_counter() - begin)
    results["search_after_write_med"], _ = _ms(samples)

    begin = time.perf_counter()
    FileNoteStore(workspace, max_notes=None)
    results["open_ms"] = (time.perf_counter() - begin) * 1e3
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 and 1,000 notes")
    args = parser.parse_args()
    sizes = [200, 1_000] if args.quick else [1_000, 10_000]
    rng = random.Random(6)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench-notes-") as workdir:
        for size in sizes:
            rows[size] = run(size, rng, Path(workdir))
            print(f"filled {size:,} notes in {rows[size]['fill_s']:.1f} s", flush=True)

    print()
    print(f"{'operation (ms)':32}" + "".join(f"{size:>14,}" for size in sizes))
    labels = [
        ("create median (wall)", "create_med"),
        ("create p95 (wall)", "create_p95"),
        ("create median (CPU)", "create_cpu"),
        ("update median (wall)", "update_med"),
        ("update p95 (wall)", "update_p95"),
        ("update median (CPU)", "update_cpu"),
        ("list 20 median", "list20_med"),
        ("list all median", "list_all_med"),
        ("search first (builds index)", "search_cold_ms"),
        ("search median (warm)", "search_med"),
        ("search p95 (warm)", "search_p95"),
        ("search median, type filter", "search_filtered_med"),
        ("search median after an update", "search_after_write_med"),
        ("open from another process", "open_ms"),
    ]
    for label, key in labels:
        print(f"{label:32}" + "".join(f"{rows[size][key]:14.2f}" for size in sizes))

    small, large = rows[sizes[0]], rows[sizes[-1]]
    failures = []
    search = large["search_med"]
    print()
    print(
        f"search median at {sizes[-1]:,} notes: {search:.2f} ms (target < {SEARCH_TARGET_MS:.0f})"
    )
    if search >= SEARCH_TARGET_MS:
        failures.append(f"search median {search:.1f} ms >= {SEARCH_TARGET_MS:.0f} ms")
    for op in ("create", "update"):
        growth = large[f"{op}_cpu"] / small[f"{op}_cpu"]
        print(
            f"{op} median CPU {small[f'{op}_cpu']:.2f} ms -> {large[f'{op}_cpu']:.2f} ms "
            f"({growth:.2f}x for {sizes[-1] // sizes[0]}x the notes; limit {GROWTH_LIMIT}x)"
        )
        if growth > GROWTH_LIMIT:
            failures.append(f"{op} cost grew {growth:.1f}x")
    print()
    if failures:
        print("FAIL: " + "; ".join(failures))
        return 1
    print("PASS: warm search under 100 ms, create and update cost independent of store size")
    return 0


if __name__ == "__main__":
    sys.exit(main())
