"""Benchmark `ContextBuilder.build_block_report`: scaling, and cost next to a vector search.

Usage: `python bench/bench_builder.py [--quick] [--profile] [--blas-threads N]`

Five sources (history, rag, memory, tool, notes) each return a prepared list of
candidates at once (`CallableSource` over a list), so what is timed is the builder's own
work: the adapter's conversion, MMR per source, pricing every candidate, the budget
allocation, rendering and measuring the block. The block budget is 100,000 tokens.

Candidates are real text read at run time: overlapping windows of ~50-150 tokens over
the sentences of the Python documentation topics that ship with the standard library
(`pydoc_data.topics`), the way a chunker with overlap cuts a document. Scores fall with
rank; embeddings (d=1536, float32) come from a clustered generator: each candidate mixes a
topic direction with its own, and ~15% are near-duplicates (cosine ~0.99) of a
better-ranked candidate, so MMR drops some.

Reported:

1. build time for 200, 2,000 and 20,000 candidates (5 sources each), best of N, and the
   growth factor per 10x candidates, with the kept candidates and the block's tokens to
   show that the budget binds;
2. the build for 1,000 candidates (5 x 200) next to one
   `InMemoryVectorStore.similarity_search(query, k=10)` over 10,000 documents of the same
   dimension, timed in interleaved rounds in the same process. The store's `Embeddings`
   returns precomputed vectors from a dict (no embedding cost is timed) as `list[float]`,
   the `Embeddings` contract; the same search over float32 numpy rows (cheaper for the
   store to stack) is shown too, not as a target;
3. the stages of one build: the library's stage functions are wrapped at run time (module
   globals, restored afterwards) and their exclusive wall time is booked per stage.

Targets, checked at the end:

1. growth linear or better: at most 10x time per 10x candidates, with 20% allowed for
   timer noise (<= 12x), for every step;
2. the blocks stay within the budget, and fewer candidates are kept than offered when the
   candidates exceed it;
3. the build for 1,000 candidates takes at most 25% of the vector search.

`--quick` runs 200 and 2,000 candidates with fewer repeats, for CI smoke tests;
`--profile` adds a cProfile of the largest build.

BLAS runs on one thread by default (`--blas-threads N` to change, 0 for the library's
default; needs threadpoolctl), for both the builder and the vector store. On a machine
shared with other work, multi-threaded BLAS makes every small matrix product wait for a
busy core, and the figures measure the neighbours rather than the code (10-20x swings on
the small sizes here). The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import math
import os
import pstats
import re
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from pydoc_data.topics import topics
from typing import TYPE_CHECKING

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore

try:
    from threadpoolctl import threadpool_info, threadpool_limits
except ImportError:  # optional: only used to report and pin the BLAS threads
    threadpool_info = threadpool_limits = None

# Run from a source checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import langchain_contextkit.retrieval.builder._assembly as assembly_module
import langchain_contextkit.retrieval.builder.runnable as builder_module
from langchain_contextkit import CallableSource, ContextBuilder, ContextConfig
from langchain_contextkit.retrieval.result import RetrievalResult
from langchain_contextkit.tokens.count import count_tokens

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType

DIM = 1536
BUDGET = 100_000
RATIOS = {"history": 0.30, "rag": 0.30, "memory": 0.15, "tool": 0.15, "notes": 0.10}
QUERY = "How does Python look up a name used inside a nested function?"
MIN_TOKENS, MAX_TOKENS = 50, 150
WINDOW_TARGETS = (55, 70, 85, 100, 115, 130)  # tokens a window aims for; one window each
NEAR_DUP_FRACTION = 0.15
TOPIC_WEIGHT = 0.8  # cosine ~0.64 between two members of one topic
DUP_NOISE = 0.15  # cosine ~0.99 between a near-duplicate and its original
ITEM_PREFIX = "- "  # how the builder renders one candidate's line

GROWTH_TARGET = 10.0  # time per 10x candidates: linear
GROWTH_NOISE = 1.2  # allowance for timer noise on top of the target
SEARCH_RATIO_TARGET = 0.25
SEARCH_CANDIDATES = 1_000
STORE_DOCS = 10_000
SEARCH_K = 10
TIME_BUDGET = 1.0  # seconds per measurement: repeat until spent (at least MIN_REPEATS)
MIN_REPEATS = 3

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_PARAGRAPH = re.compile(r"\n\s*\n")


# --- data ------------------------------------------------------------------------------


def load_passages() -> list[str]:
    """Overlapping sentence windows of 50-150 tokens over the stdlib's documentation topics.

    A window starts at every sentence of a topic and takes sentences until it reaches one
    of `WINDOW_TARGETS` tokens; windows outside 50-150 tokens (measured on the joined text)
    are skipped. Returns the distinct windows in a fixed order.
    """
    passages: dict[str, None] = {}
    for key in sorted(topics):
        sentences = [
            sentence
            for paragraph in _PARAGRAPH.split(topics[key])
            if not paragraph.lstrip().startswith(">>>")  # interactive examples, not prose
            for sentence in _SENTENCE.split(" ".join(paragraph.split()))
            if sentence
        ]
        costs = [count_tokens(s) for s in sentences]
        for target in WINDOW_TARGETS:
            for start in range(len(sentences)):
                end, total = start, 0
                while end < len(sentences) and total < target:
                    total += costs[end]
                    end += 1
                if not MIN_TOKENS <= total <= MAX_TOKENS:
                    continue
                text = " ".join(sentences[start:end])
                if MIN_TOKENS <= count_tokens(text) <= MAX_TOKENS:
                    passages[text] = None
    return list(passages)


def _unit_rows(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def clustered_embeddings(n: int, rng: np.random.Generator, *, near_dups: bool) -> np.ndarray:
    """`(n, DIM)` float32 unit vectors: a topic direction plus the row's own, some copies.

    Each row is `TOPIC_WEIGHT * topic + sqrt(1 - TOPIC_WEIGHT**2) * own` (unit vectors,
    nearly orthogonal in 1536 dimensions), so two rows of one topic have cosine ~0.64. With
    `near_dups`, a `NEAR_DUP_FRACTION` of the rows (never the first) become a noisy copy
    of an earlier row (cosine ~0.99, above the builder's default dedup threshold of 0.95).
    """
    n_topics = max(4, n // 25)
    topic_dirs = _unit_rows(rng.standard_normal((n_topics, DIM)))
    own = _unit_rows(rng.standard_normal((n, DIM)))
    labels = rng.integers(0, n_topics, size=n)
    rows = TOPIC_WEIGHT * topic_dirs[labels] + math.sqrt(1 - TOPIC_WEIGHT**2) * own
    if near_dups and n > 1:
        copies = np.flatnonzero(rng.random(n) < NEAR_DUP_FRACTION)
        for i in copies[copies > 0]:  # in order, so a copy of a copy copies the updated row
            original = rows[int(rng.integers(0, i))]
            noise = _unit_rows(rng.standard_normal((1, DIM)))[0]
            rows[i] = original / np.linalg.norm(original) + DUP_NOISE * noise
    return _unit_rows(rows).astype(np.float32)


def make_candidates(
    name: str, n: int, passages: Sequence[str], rng: np.random.Generator
) -> list[RetrievalResult]:
    """`n` candidates of one source: distinct passages, falling scores, clustered vectors."""
    picks = rng.choice(len(passages), size=n, replace=False)
    vectors = clustered_embeddings(n, rng, near_dups=True)
    scores = np.linspace(0.95, 0.15, n)  # the source's own ranking, best first
    return [
        RetrievalResult(
            content=passages[p], score=float(s), source=name, embedding=v, metadata={"rank": i}
        )
        for i, (p, s, v) in enumerate(zip(picks, scores, vectors, strict=True))
    ]


def instant(candidates: list[RetrievalResult]) -> Callable[[str], list[RetrievalResult]]:
    """A source function that returns the prepared candidates at once."""

    def fetch(_query: str) -> list[RetrievalResult]:
        return candidates

    return fetch


@dataclass
class Workload:
    total: int
    sources: list[CallableSource]
    offered_tokens: int  # what all candidates would take in the block, before MMR


def make_workload(total: int, passages: Sequence[str], seed: int) -> Workload:
    rng = np.random.default_rng(seed)
    per_source = total // len(RATIOS)
    candidates = {name: make_candidates(name, per_source, passages, rng) for name in RATIOS}
    offered = sum(count_tokens(ITEM_PREFIX + r.content) + 1 for c in candidates.values() for r in c)
    sources = [CallableSource(name, instant(c)) for name, c in candidates.items()]
    return Workload(total, sources, offered)


# --- timing ----------------------------------------------------------------------------


def best_time(fn: Callable[[], object], max_repeats: int) -> tuple[float, int]:
    """Best wall time of `fn` and the number of runs.

    Runs at least `MIN_REPEATS` times, then stops once `TIME_BUDGET` seconds are spent or
    after `max_repeats` runs.
    """
    best = math.inf
    spent = 0.0
    runs = 0
    while runs < max(max_repeats, MIN_REPEATS):
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        best = min(best, elapsed)
        spent += elapsed
        runs += 1
        if runs >= MIN_REPEATS and spent > TIME_BUDGET:
            break
    return best, runs


def interleaved_best(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Best wall time of each function, run in turn once per round (they share the noise)."""
    best = dict.fromkeys(fns, math.inf)
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


@dataclass
class BuildRow:
    total: int
    seconds: float
    runs: int
    offered_tokens: int
    dropped_by_mmr: int
    dropped_for_budget: int
    kept: int
    block_tokens: int


def time_build(builder: ContextBuilder, work: Workload, max_repeats: int) -> BuildRow:
    def build() -> object:
        return builder.build_block_report(QUERY, sources=work.sources, budget=BUDGET)

    report = builder.build_block_report(QUERY, sources=work.sources, budget=BUDGET)  # warm-up
    seconds, runs = best_time(build, max_repeats)
    return BuildRow(
        total=work.total,
        seconds=seconds,
        runs=runs,
        offered_tokens=work.offered_tokens,
        dropped_by_mmr=sum(s.dropped_by_mmr + s.merged for s in report.sources),
        dropped_for_budget=sum(s.dropped_for_budget for s in report.sources),
        kept=sum(s.kept for s in report.sources),
        block_tokens=report.block_tokens,
    )


# --- stages ----------------------------------------------------------------------------


class StageClock:
    """Exclusive wall time per stage: a stage's time leaves out the stages it calls."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._stack: list[tuple[str, float]] = []  # (label, running since)

    def enter(self, label: str) -> None:
        now = time.perf_counter()
        if self._stack:
            parent, since = self._stack[-1]
            self._book(parent, now - since)
        self._stack.append((label, now))
        self.calls[label] = self.calls.get(label, 0) + 1

    def leave(self) -> None:
        now = time.perf_counter()
        label, since = self._stack.pop()
        self._book(label, now - since)
        if self._stack:
            self._stack[-1] = (self._stack[-1][0], now)

    def current(self) -> str:
        return self._stack[-1][0] if self._stack else ""

    def _book(self, label: str, seconds: float) -> None:
        self.seconds[label] = self.seconds.get(label, 0.0) + seconds

    def wrap(self, label: str, fn: Callable[..., object]) -> Callable[..., object]:
        def timed(*args: object, **kwargs: object) -> object:
            self.enter(label)
            try:
                return fn(*args, **kwargs)
            finally:
                self.leave()

        return timed

    def counter(self, fn: Callable[[str], int]) -> Callable[[str], int]:
        """A token counter whose time is booked per calling stage."""

        def timed(text: str) -> int:
            caller = self.current()
            self.enter(f"count_tokens <- {COUNT_CALLERS.get(caller, caller)}")
            try:
                return fn(text)
            finally:
                self.leave()

        return timed


OUTER = "build: resolve, fetch, report"
ASSEMBLE = "assemble: own code"
FILL = "_fill_measured_room: own code"
# Library functions timed as stages: (module, global name, label). Module globals are
# replaced for the instrumented builds only and restored afterwards; names the library
# does not have (any more) are skipped.
STAGES: tuple[tuple[ModuleType, str, str], ...] = (
    (builder_module, "assemble", ASSEMBLE),
    (assembly_module, "mmr_select", "MMR: mmr_select"),
    (assembly_module, "allocate", "allocate"),
    (assembly_module, "render_block", "render_block"),
    (assembly_module, "_drop_weakest", "_drop_weakest (over-budget loop)"),
    (assembly_module, "_fill_measured_room", FILL),
)
COUNT_CALLERS = {
    ASSEMBLE: "assemble (price lines, measure block)",
    FILL: "_fill_measured_room",
    OUTER: "report (block measured again)",
}


def time_stages(config: ContextConfig, work: Workload, runs: int) -> tuple[float, StageClock]:
    """Run `runs` instrumented builds; return the fastest one's total and its stages."""
    present = [(m, name, label) for m, name, label in STAGES if hasattr(m, name)]
    originals = [(m, name, getattr(m, name)) for m, name, _ in present]
    best: tuple[float, StageClock] = (math.inf, StageClock())
    for _ in range(runs):
        clock = StageClock()
        builder = ContextBuilder(config, token_counter=clock.counter(count_tokens))
        for module, name, label in present:
            setattr(module, name, clock.wrap(label, getattr(module, name)))
        try:
            start = time.perf_counter()
            clock.enter(OUTER)
            builder.build_block_report(QUERY, sources=work.sources, budget=BUDGET)
            clock.leave()
            total = time.perf_counter() - start
        finally:
            for module, name, original in originals:
                setattr(module, name, original)
        if total < best[0]:
            best = (total, clock)
    return best


# --- the vector store baseline ---------------------------------------------------------


class PrecomputedEmbeddings(Embeddings):
    """Embeddings looked up in a dict: no embedding cost in what is timed."""

    def __init__(self, vectors: dict[str, list[float]], query: list[float]) -> None:
        self.vectors = vectors
        self.query = query

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:  # noqa: ARG002 - one fixed query
        return self.query


def make_store(
    texts: Sequence[str], matrix: np.ndarray, query: np.ndarray, *, as_lists: bool
) -> InMemoryVectorStore:
    """A store holding `texts` with `matrix`'s rows as vectors (lists or numpy rows)."""
    rows = matrix.tolist() if as_lists else list(matrix)
    embeddings = PrecomputedEmbeddings(
        dict(zip(texts, rows, strict=True)), query.tolist() if as_lists else query
    )
    store = InMemoryVectorStore(embeddings)
    store.add_texts(
        list(texts),
        metadatas=[{"source": "docs", "row": i} for i in range(len(texts))],
        ids=[f"doc-{i}" for i in range(len(texts))],
    )
    hits = store.similarity_search(QUERY, k=SEARCH_K)  # warm-up and sanity check
    if len(hits) != SEARCH_K or len(store.store) != len(texts):
        msg = f"store holds {len(store.store)} documents and returned {len(hits)} hits"
        raise RuntimeError(msg)
    return store


# --- sections --------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.2f}"


def blas_line() -> str:
    if threadpool_info is None:
        return "BLAS: threadpoolctl not installed, threads unknown"
    pools = [
        f"{p.get('internal_api')} {p.get('version')} threads={p.get('num_threads')}"
        for p in threadpool_info()
        if p.get("user_api") == "blas"
    ]
    return "BLAS: " + ("; ".join(pools) or "none found")


def load_line() -> str:
    try:
        one, five, _ = os.getloadavg()
    except OSError:
        return "load average: unknown"
    return f"load average: {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def run_scaling(
    builder: ContextBuilder, passages: Sequence[str], sizes: Sequence[int], repeats: int
) -> tuple[list[BuildRow], dict[int, Workload]]:
    print()
    print("1. build_block_report over 5 sources (each returns a prepared list at once)")
    header = (
        f"{'candidates':>10} {'per src':>7} {'offered tok':>11} | {'build ms':>9} {'N':>3}"
        f" {'x per 10x':>9} | {'mmr drop':>8} {'budget drop':>11} {'kept':>5} {'block tok':>9}"
    )
    print(header)
    print("-" * len(header))
    rows: list[BuildRow] = []
    workloads: dict[int, Workload] = {}
    for total in sizes:
        work = make_workload(total, passages, seed=total)
        workloads[total] = work
        row = time_build(builder, work, max_repeats=repeats)
        growth = f"{row.seconds / rows[-1].seconds:8.1f}x" if rows else f"{'':9}"
        rows.append(row)
        print(
            f"{row.total:>10,} {row.total // len(RATIOS):>7,} {row.offered_tokens:>11,} |"
            f" {ms(row.seconds)} {row.runs:>3} {growth} | {row.dropped_by_mmr:>8,}"
            f" {row.dropped_for_budget:>11,} {row.kept:>5,} {row.block_tokens:>9,}",
            flush=True,
        )
    print(
        "  offered tok: what all candidates would take in the block; mmr drop: merged or"
        " near-duplicate; budget drop: left out for the budget"
    )
    return rows, workloads


def run_search(
    builder: ContextBuilder, work: Workload, passages: Sequence[str], rounds: int
) -> tuple[float, float, float]:
    print()
    print(
        f"2. build for {work.total:,} candidates vs one InMemoryVectorStore.similarity_search"
        f"(k={SEARCH_K}) over {STORE_DOCS:,} documents, d={DIM}"
    )
    rng = np.random.default_rng(7)
    matrix = clustered_embeddings(STORE_DOCS, rng, near_dups=False)
    query = clustered_embeddings(1, rng, near_dups=False)[0]
    texts = passages[:STORE_DOCS]
    lists = make_store(texts, matrix, query, as_lists=True)
    arrays = make_store(texts, matrix, query, as_lists=False)
    report = builder.build_block_report(QUERY, sources=work.sources, budget=BUDGET)
    best = interleaved_best(
        {
            "build": lambda: builder.build_block_report(QUERY, sources=work.sources, budget=BUDGET),
            "lists": lambda: lists.similarity_search(QUERY, k=SEARCH_K),
            "arrays": lambda: arrays.similarity_search(QUERY, k=SEARCH_K),
        },
        rounds=rounds,
    )
    build, search, search_arrays = best["build"], best["lists"], best["arrays"]
    kept = sum(s.kept for s in report.sources)
    print(f"  {rounds} interleaved rounds (build, search, search), best of each, in ms")
    print(
        f"  build, {work.total:,} candidates                {ms(build)}"
        f"  (kept {kept:,}, block {report.block_tokens:,} tokens)"
    )
    print(
        f"  search, vectors stored as list[float]    {ms(search)}  build/search"
        f" {build / search:6.1%}"
    )
    print(
        f"  search, vectors stored as float32 rows   {ms(search_arrays)}  build/search"
        f" {build / search_arrays:6.1%} (not a target)"
    )
    print(
        "  list[float] is what Embeddings.embed_documents returns by contract, and what a"
        " real embeddings client hands the store; numpy rows only make its stacking cheaper"
    )
    return build, search, search_arrays


def run_stages(
    config: ContextConfig, workloads: dict[int, Workload], sizes: Sequence[int], runs: int
) -> None:
    print()
    print(f"3. stages of one instrumented build (the fastest of {runs}): exclusive time")
    clocks = {total: time_stages(config, workloads[total], runs) for total in sizes}
    largest = clocks[max(sizes)][1]
    labels = sorted(
        {label for _, clock in clocks.values() for label in clock.seconds},
        key=lambda label: -largest.seconds.get(label, 0.0),
    )
    width = max(len(label) for label in labels)
    print(f"{'stage':{width}}" + "".join(f" | {f'{t:,} candidates':>29}" for t in sizes))
    print(f"{'':{width}}" + "".join(f" | {'ms':>9} {'share':>6} {'calls':>12}" for _ in sizes))
    print("-" * (width + 32 * len(sizes)))
    for label in labels:
        cells = ""
        for total in sizes:
            whole, clock = clocks[total]
            seconds = clock.seconds.get(label, 0.0)
            cells += f" | {ms(seconds)} {seconds / whole:6.1%} {clock.calls.get(label, 0):>12,}"
        print(f"{label:{width}}{cells}")
    print(
        f"{'instrumented build':{width}}" + "".join(f" | {ms(clocks[t][0])} {'':19}" for t in sizes)
    )
    print(
        "  exclusive: a stage's time leaves out the stages it calls; count_tokens is booked"
        " under its caller; each wrapped call costs ~1 us more"
    )


def print_profile(builder: ContextBuilder, work: Workload) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    builder.build_block_report(QUERY, sources=work.sources, budget=BUDGET)
    profiler.disable()
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(15)
        lines = out.getvalue().splitlines()
        start = next(i for i, line in enumerate(lines) if "ncalls" in line)
        print()
        print(f"cProfile of one build of {work.total:,} candidates, by {order}:")
        print("\n".join(line.rstrip() for line in lines[start:] if line.strip()))


def verdicts(rows: Sequence[BuildRow], build: float, search: float) -> int:
    """Print PASS/FAIL lines; return the number of failures."""
    print()
    failures = 0
    limit = GROWTH_TARGET * GROWTH_NOISE
    for low, high in itertools.pairwise(rows):
        factor = high.seconds / low.seconds
        decades = math.log10(high.total / low.total)
        per_decade = factor ** (1 / decades)
        exponent = math.log10(factor) / decades
        verdict = "PASS" if per_decade <= limit else "FAIL"
        failures += verdict == "FAIL"
        print(
            f"{verdict}: growth {low.total:,} -> {high.total:,} candidates: {per_decade:.1f}x"
            f" per 10x (time ~ n^{exponent:.2f}); rule: <= {GROWTH_TARGET:.0f}x (linear)"
            f" + {GROWTH_NOISE - 1:.0%} for noise = {limit:.0f}x"
        )
    over = [r for r in rows if r.offered_tokens > BUDGET]
    binds = all(r.kept < r.total for r in over) and all(r.block_tokens <= BUDGET for r in rows)
    failures += not binds
    print(
        f"{'PASS' if binds else 'FAIL'}: every block <= {BUDGET:,} tokens, and kept < offered"
        f" in the {len(over)} run(s) whose candidates exceed the budget"
    )
    ratio = build / search
    verdict = "PASS" if ratio <= SEARCH_RATIO_TARGET else "FAIL"
    failures += verdict == "FAIL"
    print(
        f"{verdict}: build for {SEARCH_CANDIDATES:,} candidates = {ratio:.1%} of one"
        f" similarity_search over {STORE_DOCS:,} documents (target <= {SEARCH_RATIO_TARGET:.0%};"
        f" {build * 1e3:.2f} ms vs {search * 1e3:.2f} ms)"
    )
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 and 2,000 candidates only")
    parser.add_argument("--profile", action="store_true", help="cProfile the largest build")
    parser.add_argument(
        "--blas-threads", type=int, default=1, help="BLAS threads; 0: the library default"
    )
    args = parser.parse_args()
    if args.blas_threads < 0:
        parser.error("--blas-threads must be >= 0")

    sizes = (200, 2_000) if args.quick else (200, 2_000, 20_000)
    repeats = 3 if args.quick else 15

    start = time.perf_counter()
    passages = load_passages()
    tokens = [count_tokens(p) for p in passages]
    print(f"numpy {np.__version__}, Python {sys.version.split()[0]}")
    print(
        f"text: {len(passages):,} distinct windows of the stdlib's pydoc topics,"
        f" {min(tokens)}-{max(tokens)} tokens (mean {sum(tokens) / len(tokens):.0f}),"
        f" read in {time.perf_counter() - start:.2f} s"
    )
    needed = max(max(sizes) // len(RATIOS), STORE_DOCS)
    if len(passages) < needed:
        print(f"FAIL: {len(passages):,} distinct passages on this machine, {needed:,} needed")
        return 1

    pinned = args.blas_threads > 0 and threadpool_limits is not None
    pin = threadpool_limits(args.blas_threads, "blas") if pinned else nullcontext()
    with pin:
        print(blas_line() + (" (pinned: --blas-threads)" if pinned else " (library default)"))
        print(load_line())
        config = ContextConfig(source_ratios=RATIOS)
        builder = ContextBuilder(config)
        print(
            f"sources: {', '.join(f'{n} {r:.0%}' for n, r in RATIOS.items())}; budget"
            f" {BUDGET:,} tokens; d={DIM} float32; mmr_lambda={config.mmr_lambda},"
            f" dedup_threshold={config.dedup_threshold}; times: best of N, in ms"
        )
        rows, workloads = run_scaling(builder, passages, sizes, repeats)
        work = make_workload(SEARCH_CANDIDATES, passages, seed=SEARCH_CANDIDATES)
        workloads[SEARCH_CANDIDATES] = work
        build, search, _ = run_search(builder, work, passages, rounds=max(repeats, 5))
        run_stages(config, workloads, sorted({SEARCH_CANDIDATES, max(sizes)}), runs=3)
        if args.profile:
            print_profile(builder, workloads[max(sizes)])
        print()
        print(load_line())
    return 1 if verdicts(rows, build, search) else 0


if __name__ == "__main__":
    raise SystemExit(main())
