# Copyright (c) 2026 langchain-contextkit developers
"""Benchmark `ContextBuilder.build_block_report`: scaling, and cost next to a vector search.

Usage: `python bench/bench_builder.py [--quick] [--profile]`

Five sources (history, rag, memory, tool, notes) each return a prepared list of
candidates at once (`CallableSource` over a list), so what is timed is the builder's own
work: the adapter's conversion, MMR per source, pricing every candidate, the budget
allocation, rendering and the final measurement. The block budget is 100,000 tokens.

Candidates are real text read at run time: overlapping windows of ~50-150 tokens over
the sentences of the Python documentation topics that ship with the standard library
(`pydoc_data.topics`), the way a chunker with overlap cuts a document. Scores fall with
rank; embeddings (d=1536, float32) come from a clustered generator: each candidate mixes a
topic direction with its own, and ~15% are near-duplicates (cosine ~0.99) of a
better-ranked candidate, so MMR drops some.

Reported:

1. build time for 200, 2,000 and 20,000 candidates (5 sources each), best of N, and the
   growth factor per 10x candidates; with kept candidates and block tokens, to show the
   budget bites;
2. the build for 1,000 candidates (5 x 200) next to one `InMemoryVectorStore.similarity_search`
   (k=10) over 10,000 documents of the same dimension, in the same process. The store's
   `Embeddings` returns precomputed vectors from a dict (no embedding cost is timed), as
   `list[float]`, the `Embeddings` contract and what a real embeddings client hands the
   store; the same search over float32 numpy rows (cheaper to stack) is shown as well;
3. a per-stage breakdown of the same builds, timed by running each stage alone on the same
   data.

Targets, checked at the end:

1. growth linear or better: the time ratio per 10x candidates at most 10x, with 20% allowed
   for noise (<= 12x) for every step;
2. the build for 1,000 candidates takes at most 25% of the vector search.

`--quick` runs 200 and 2,000 candidates and fewer repeats, for CI smoke tests;
`--profile` adds a cProfile of the largest build.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import pstats
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore
from pydoc_data.topics import topics

# Run from a source checkout without installing the package.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_contextkit import CallableSource, ContextBuilder, ContextConfig  # noqa: E402
from langchain_contextkit._assembly import (  # noqa: E402
    _drop_weakest,
    assemble,
    render_block,
    render_section,
)
from langchain_contextkit.budget import SourceDemand, allocate  # noqa: E402
from langchain_contextkit.mmr import RetrievalResult, mmr_select  # noqa: E402
from langchain_contextkit.tokens import count_tokens  # noqa: E402

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

DIM = 1536
BUDGET = 100_000
RATIOS = {"history": 0.30, "rag": 0.30, "memory": 0.15, "tool": 0.15, "notes": 0.10}
QUERY = "How does Python look up a name used inside a nested function?"
MIN_TOKENS, MAX_TOKENS = 50, 150
WINDOW_TARGETS = (55, 70, 85, 100, 115, 130)  # tokens a window aims for; several per start
NEAR_DUP_FRACTION = 0.15
TOPIC_WEIGHT = 0.8  # cosine ~0.64 between members of one topic
DUP_NOISE = 0.15  # cosine ~0.99 between a near-duplicate and its original
ITEM_PREFIX = "- "  # how the builder renders one candidate (see _assembly)

GROWTH_TARGET = 10.0  # per 10x candidates: linear
GROWTH_NOISE = 1.2  # allowance for timer noise on top of the target
SEARCH_RATIO_TARGET = 0.25
STORE_DOCS = 10_000
SEARCH_K = 10
SEARCH_CANDIDATES = 1_000
TIME_BUDGET = 1.0  # seconds per measurement: repeat until spent (or max_repeats)

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_PARAGRAPH = re.compile(r"\n\s*\n")


# --- data ------------------------------------------------------------------------------


def load_passages() -> list[str]:
    """Overlapping sentence windows of 50-150 tokens over the stdlib's documentation topics.

    A window starts at every sentence of a topic and takes sentences until it reaches one of
    `WINDOW_TARGETS` tokens; windows outside 50-150 tokens (measured on the joined text) are
    skipped. Returns the distinct windows in a fixed order.
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
    """`(n, DIM)` float32 unit vectors: topic + own direction, some near-duplicates.

    Each row is `TOPIC_WEIGHT * topic + sqrt(1 - TOPIC_WEIGHT**2) * own` (unit vectors,
    nearly orthogonal in 1536 dimensions), so two rows of one topic have cosine ~0.64. With
    `near_dups`, a `NEAR_DUP_FRACTION` of the rows (never the first) is replaced by a
    noisy copy of an earlier row (cosine ~0.99, above the builder's 0.95 dedup threshold).
    """
    n_topics = max(4, n // 25)
    topic_dirs = _unit_rows(rng.standard_normal((n_topics, DIM)))
    own = _unit_rows(rng.standard_normal((n, DIM)))
    labels = rng.integers(0, n_topics, size=n)
    rows = TOPIC_WEIGHT * topic_dirs[labels] + math.sqrt(1 - TOPIC_WEIGHT**2) * own
    if near_dups and n > 1:
        dups = np.flatnonzero(rng.random(n) < NEAR_DUP_FRACTION)
        dups = dups[dups > 0]
        for i in dups:  # in order, so a copy of a copy copies the updated row
            original = int(rng.integers(0, i))
            noise = _unit_rows(rng.standard_normal((1, DIM)))[0]
            rows[i] = rows[original] / np.linalg.norm(rows[original]) + DUP_NOISE * noise
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
    candidates: dict[str, list[RetrievalResult]]
    sources: list[CallableSource]
    offered_tokens: int  # what all candidates would take in the block, before MMR


def make_workload(total: int, passages: Sequence[str], seed: int) -> Workload:
    rng = np.random.default_rng(seed)
    per_source = total // len(RATIOS)
    candidates = {name: make_candidates(name, per_source, passages, rng) for name in RATIOS}
    sources = [CallableSource(name, instant(c)) for name, c in candidates.items()]
    offered = sum(
        count_tokens(ITEM_PREFIX + r.content) + 1 for c in candidates.values() for r in c
    )
    return Workload(total, candidates, sources, offered)


# --- timing ----------------------------------------------------------------------------


def best_time(
    fn: Callable[[], object], max_repeats: int, budget: float = TIME_BUDGET
) -> tuple[float, int]:
    """Best wall time of `fn` and the runs made (up to `max_repeats`, stops past `budget`)."""
    best = math.inf
    spent = 0.0
    runs = 0
    for _ in range(max_repeats):
        start = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - start
        best = min(best, elapsed)
        spent += elapsed
        runs += 1
        if spent > budget:
            break
    return best, runs


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


@dataclass
class Stages:
    fetch: float
    mmr: float
    price: float
    allocate: float
    render_measure: float
    drops: int  # candidates dropped by the final measure-and-drop loop
    report: float
    assemble: float

    @property
    def total(self) -> float:
        return self.fetch + self.mmr + self.price + self.allocate + self.render_measure + self.report


def time_stages(builder: ContextBuilder, work: Workload, max_repeats: int) -> Stages:
    """Time each stage of one build alone, on the same data, as `assemble` runs them."""
    config, prompts, counter = builder.config, builder.prompts, builder.token_counter
    fenced = builder._fenced(flat=False)  # noqa: SLF001 - the block's fenced sections

    def fetch() -> dict[str, list[RetrievalResult]]:
        return {s.name: s.fetch(QUERY) for s in work.sources}

    fetched = fetch()

    def mmr() -> dict[str, list[RetrievalResult]]:
        return {
            name: mmr_select(c, lambda_=config.mmr_lambda, dedup_threshold=config.dedup_threshold)
            for name, c in fetched.items()
        }

    selected = mmr()

    def price() -> list[SourceDemand]:
        return [
            SourceDemand(
                name,
                [counter(ITEM_PREFIX + c.content) + 1 for c in candidates],
                overhead=counter(render_section(name, [], prompts, fenced=name in fenced)) + 1,
            )
            for name, candidates in selected.items()
        ]

    demands = price()

    def allot() -> object:
        return allocate(BUDGET, config.source_ratios, demands, allow_borrow=config.allow_borrow)

    allocation = allocate(BUDGET, config.source_ratios, demands, allow_borrow=config.allow_borrow)
    allotted = {name: [c[i] for i in allocation[name].kept] for name, c in selected.items()}

    def render_measure() -> tuple[str, int]:
        kept = {name: list(items) for name, items in allotted.items()}
        block = render_block(kept, config, prompts, fenced)
        drops = 0
        while block and counter(block) > BUDGET:
            _drop_weakest(kept)
            drops += 1
            block = render_block(kept, config, prompts, fenced)
        return block, drops

    block, drops = render_measure()

    def assemble_all() -> object:
        return assemble(
            fetched, budget=BUDGET, config=config, prompts=prompts, counter=counter, fenced=fenced
        )

    timed = {
        stage: best_time(fn, max_repeats)[0]
        for stage, fn in {
            "fetch": fetch,
            "mmr": mmr,
            "price": price,
            "allocate": allot,
            "render_measure": render_measure,
            "report": lambda: counter(block),  # `_report` measures the block once more
            "assemble": assemble_all,
        }.items()
    }
    return Stages(drops=drops, **timed)


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


def time_search(
    texts: Sequence[str], matrix: np.ndarray, query: np.ndarray, *, as_lists: bool, max_repeats: int
) -> float:
    """Best time of one `similarity_search(QUERY, k)` over a store holding `texts`."""
    rows = matrix.tolist() if as_lists else list(matrix)
    vectors = dict(zip(texts, rows, strict=True))
    embeddings = PrecomputedEmbeddings(vectors, query.tolist() if as_lists else query)
    store = InMemoryVectorStore(embeddings)
    store.add_texts(
        list(texts),
        metadatas=[{"source": "docs", "row": i} for i in range(len(texts))],
        ids=[f"doc-{i}" for i in range(len(texts))],
    )
    hits = store.similarity_search(QUERY, k=SEARCH_K)  # warm-up and sanity check
    if len(hits) != SEARCH_K:
        msg = f"similarity_search returned {len(hits)} documents, expected {SEARCH_K}"
        raise RuntimeError(msg)
    return best_time(lambda: store.similarity_search(QUERY, k=SEARCH_K), max_repeats)[0]


# --- output ----------------------------------------------------------------------------


def print_profile(builder: ContextBuilder, work: Workload) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    builder.build_block_report(QUERY, sources=work.sources, budget=BUDGET)
    profiler.disable()
    for order in ("cumulative", "tottime"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(18)
        print(f"cProfile of one build, {work.total:,} candidates, by {order}:")
        lines = out.getvalue().splitlines()
        start = next(i for i, line in enumerate(lines) if "ncalls" in line)
        print("\n".join(line.rstrip() for line in lines[start:] if line.strip()))
        print()


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:9.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 and 2,000 candidates only")
    parser.add_argument("--profile", action="store_true", help="cProfile the largest build")
    args = parser.parse_args()

    sizes = (200, 2_000) if args.quick else (200, 2_000, 20_000)
    repeats = 3 if args.quick else 15

    start = time.perf_counter()
    passages = load_passages()
    tokens = [count_tokens(p) for p in passages]
    print(f"numpy {np.__version__}, Python {sys.version.split()[0]}")
    print(
        f"text: {len(passages):,} distinct windows of the stdlib's pydoc topics, "
        f"{min(tokens)}-{max(tokens)} tokens (mean {sum(tokens) / len(tokens):.0f}), "
        f"read in {time.perf_counter() - start:.2f} s"
    )
    if len(passages) < max(max(sizes) // len(RATIOS), STORE_DOCS):
        print(f"FAIL: only {len(passages)} distinct passages on this machine")
        return 1

    config = ContextConfig(source_ratios=RATIOS)
    builder = ContextBuilder(config)
    print(
        f"sources: {', '.join(f'{n} {r:.0%}' for n, r in RATIOS.items())}; budget {BUDGET:,} "
        f"tokens; d={DIM} float32; mmr_lambda={config.mmr_lambda}, "
        f"dedup_threshold={config.dedup_threshold}; times are best of N, in ms"
    )

    # 1. Scaling.
    print()
    print("1. build_block_report over 5 sources")
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

    # 2. Next to a vector search.
    print()
    print(
        f"2. build for {SEARCH_CANDIDATES:,} candidates vs one InMemoryVectorStore."
        f"similarity_search(k={SEARCH_K}) over {STORE_DOCS:,} documents, d={DIM}"
    )
    work = make_workload(SEARCH_CANDIDATES, passages, seed=SEARCH_CANDIDATES)
    workloads[SEARCH_CANDIDATES] = work
    build_row = time_build(builder, work, max_repeats=repeats)
    rng = np.random.default_rng(7)
    store_texts = passages[:STORE_DOCS]
    store_matrix = clustered_embeddings(STORE_DOCS, rng, near_dups=False)
    store_query = clustered_embeddings(1, rng, near_dups=False)[0]
    search_lists = time_search(
        store_texts, store_matrix, store_query, as_lists=True, max_repeats=repeats
    )
    search_arrays = time_search(
        store_texts, store_matrix, store_query, as_lists=False, max_repeats=repeats
    )
    ratio = build_row.seconds / search_lists
    ratio_arrays = build_row.seconds / search_arrays
    print(
        f"  build, {SEARCH_CANDIDATES:,} candidates          {ms(build_row.seconds)} ms"
        f"  (kept {build_row.kept:,}, block {build_row.block_tokens:,} tokens)"
    )
    print(f"  search, vectors as list[float]     {ms(search_lists)} ms  build/search {ratio:6.1%}")
    print(
        f"  search, vectors as float32 arrays  {ms(search_arrays)} ms  build/search"
        f" {ratio_arrays:6.1%} (not a target)"
    )

    # 3. Stages.
    print()
    print("3. stages of one build, each timed alone on the same data (ms)")
    stage_sizes = sorted({SEARCH_CANDIDATES, max(sizes)})
    stages = {total: time_stages(builder, workloads[total], repeats) for total in stage_sizes}
    builds = {r.total: r.seconds for r in [*rows, build_row]}
    print(f"{'stage':44}" + "".join(f" {f'{t:,} cand.':>16}" for t in stage_sizes))
    labels = {
        "fetch": "fetch (CallableSource -> results, 5 sources)",
        "mmr": "MMR (mmr_select per source)",
        "price": "price candidates (count_tokens per line)",
        "allocate": "allocate (two rounds, borrowing)",
        "render_measure": "render + measure block (+ drop loop)",
        "report": "report (block measured again)",
    }
    for key, label in labels.items():
        cells = ""
        for total in stage_sizes:
            value = getattr(stages[total], key)
            cells += f" {ms(value)} {value / builds[total]:5.0%}"
        print(f"{label:44}{cells}")
    print(
        f"{'sum of stages':44}"
        + "".join(f" {ms(stages[t].total)} {stages[t].total / builds[t]:5.0%}" for t in stage_sizes)
    )
    print(f"{'whole build (section 1 / 2)':44}" + "".join(f" {ms(builds[t])}      " for t in stage_sizes))
    print(f"{'  of which assemble()':44}" + "".join(f" {ms(stages[t].assemble)}      " for t in stage_sizes))
    print(f"{'drop-loop iterations':44}" + "".join(f" {stages[t].drops:>9}      " for t in stage_sizes))

    if args.profile:
        print()
        print_profile(builder, workloads[max(sizes)])

    # Verdicts.
    print()
    failures = 0
    limit = GROWTH_TARGET * GROWTH_NOISE
    steps = list(zip(rows, rows[1:], strict=False))
    for low, high in steps:
        factor = high.seconds / low.seconds
        per_decade = factor ** (1 / math.log10(high.total / low.total))
        exponent = math.log(factor) / math.log(high.total / low.total)
        verdict = "PASS" if per_decade <= limit else "FAIL"
        failures += verdict == "FAIL"
        print(
            f"{verdict}: growth {low.total:,} -> {high.total:,} candidates: {per_decade:.1f}x per"
            f" 10x (time ~ n^{exponent:.2f}); rule: <= {GROWTH_TARGET:.0f}x (linear) plus"
            f" {GROWTH_NOISE - 1:.0%} noise = {limit:.0f}x"
        )
    over = [r for r in rows if r.offered_tokens > BUDGET]
    budget_ok = all(r.kept < r.total and r.block_tokens <= BUDGET for r in over) and all(
        r.block_tokens <= BUDGET for r in rows
    )
    failures += not budget_ok
    print(
        f"{'PASS' if budget_ok else 'FAIL'}: the budget binds: every block <= {BUDGET:,} tokens,"
        f" and kept < offered in the {len(over)} run(s) whose candidates exceed the budget"
    )
    verdict = "PASS" if ratio <= SEARCH_RATIO_TARGET else "FAIL"
    failures += verdict == "FAIL"
    print(
        f"{verdict}: build for {SEARCH_CANDIDATES:,} candidates is {ratio:.1%} of one"
        f" similarity_search over {STORE_DOCS:,} documents (target <= {SEARCH_RATIO_TARGET:.0%};"
        f" {build_row.seconds * 1e3:.2f} ms vs {search_lists * 1e3:.2f} ms)"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
