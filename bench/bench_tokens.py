"""Accuracy and speed of `count_tokens` against cl100k_base and o200k_base, side by side.

    python bench/bench_tokens.py            # the judged half of the whole corpus
    python bench/bench_tokens.py --quick    # a few documents per category (CI smoke run)

The corpus (`corpus.py`) is read from this machine at run time; the documents judged here
are the half the weights were not fitted on (`corpus.judged_sample`). Per category and per
tokenizer (cl100k through tiktoken, o200k through bpe-openai, whose cl100k counts are first
checked against tiktoken's): mean absolute relative error (MAE), mean signed error (bias;
negative = underestimate, which is what overflows a window) and the lowest document.
Speed: characters per second of `count_tokens` and of tiktoken's `encode_ordinary` on the
same documents, best of several runs.

Targets (issue 29): in every category with at least `MIN_DOCS` judged documents, bias >=
-5% and worst document >= -15% against each tokenizer, and MAE <= 12% against the dearer
of the two per document (the count `count_tokens` aims at: one estimate that is never low
for either); at least 5x tiktoken's throughput. MAE against each tokenizer alone is
printed too; against o200k it cannot be judged for one estimate: o200k spends a half to a
quarter of cl100k's tokens on most non-Latin scripts, so an estimate within 12% of one is
far from the other. Each breach prints a FAIL line and the exit status is 1; a category
with fewer documents is printed, marked "(few)".
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from typing import TYPE_CHECKING

from corpus import judged_sample, load_corpus
from exact_tokenizers import COUNTERS, check_agreement

from langchain_contextkit import count_tokens, tiktoken_counter

if TYPE_CHECKING:
    from collections.abc import Callable

MIN_DOCS = 5
MAX_MAE = 12.0
MIN_BIAS = -5.0
MIN_WORST = -15.0
MIN_SPEEDUP = 5.0
TOKENIZERS = ("cl100k", "o200k")
DEARER = "max"
"""Per document, the larger of the two counts: what the MAE target is judged against."""


def errors(
    counter: Callable[[str], int], docs: list[str], truth: list[int]
) -> tuple[float, float, float]:
    """MAE, bias and the lowest document's error, in percent."""
    rel = [(counter(d) - t) / t for d, t in zip(docs, truth, strict=True) if t]
    if not rel:
        return 0.0, 0.0, 0.0
    return 100 * sum(map(abs, rel)) / len(rel), 100 * sum(rel) / len(rel), 100 * min(rel)


def breaches(name: str, tokenizer: str, mae: float, bias: float, worst: float) -> list[str]:
    """What one category of `count_tokens` misses of the targets against one tokenizer."""
    found = []
    if tokenizer == DEARER and mae > MAX_MAE:
        found.append(f"{name}/{tokenizer}: MAE {mae:.1f}% > {MAX_MAE:.0f}%")
    if tokenizer != DEARER and bias < MIN_BIAS:
        found.append(f"{name}/{tokenizer}: biased low {bias:.1f}% < {MIN_BIAS:.0f}%")
    if tokenizer != DEARER and worst < MIN_WORST:
        found.append(f"{name}/{tokenizer}: worst document {worst:.1f}% < {MIN_WORST:.0f}%")
    return found


def best_time(fn: Callable[[str], object], docs: list[str], repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        for doc in docs:
            fn(doc)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few documents per category")
    args = parser.parse_args()

    corpus = {name: judged_sample(docs) for name, docs in load_corpus().items()}
    if args.quick:
        corpus = {name: docs[:5] for name, docs in corpus.items()}
    every = [d for ds in corpus.values() for d in ds]
    disagree = check_agreement(every[::4])
    print(f"bpe-openai cl100k vs tiktoken: {disagree} of {len(every[::4])} documents differ")
    counters = {name: COUNTERS[name]() for name in TOKENIZERS}
    columns = (*TOKENIZERS, DEARER)
    header = f"{'category':20} {'docs':>4} {'chars':>8} {'cl100k':>7} {'o200k':>7} " + " ".join(
        f"{name + ' mae/bias/low %':>24}" for name in columns
    )
    print(header)
    print("-" * len(header))
    failures: list[str] = [f"bpe-openai disagrees with tiktoken on {disagree}"] if disagree else []
    for name, docs in corpus.items():
        if not docs:
            print(f"{name:20} no files on this machine")
            continue
        truths = {t: [counters[t](d) for d in docs] for t in TOKENIZERS}
        truths[DEARER] = [max(counts) for counts in zip(*truths.values(), strict=True)]
        cells = []
        judged = len(docs) >= MIN_DOCS
        for tokenizer in columns:
            mae, bias, worst = errors(count_tokens, docs, truths[tokenizer])
            cells.append(f"{mae:8.1f} {bias:+7.1f} {worst:+7.1f}")
            if judged:
                failures += breaches(name, tokenizer, mae, bias, worst)
        chars = sum(map(len, docs))
        sums = " ".join(f"{sum(truths[t]):7,}" for t in TOKENIZERS)
        print(
            f"{name:20} {len(docs):4} {chars:8,} {sums} "
            + " ".join(cells)
            + ("" if judged else "  (few)")
        )

    chars = sum(map(len, every))
    repeats = 3 if args.quick else 7
    exact = tiktoken_counter("cl100k_base")
    ours = best_time(count_tokens, every, repeats)
    theirs = best_time(exact._encode, every, repeats)  # noqa: SLF001 - encode_ordinary itself
    ratio = theirs / ours
    print()
    print(f"speed on {len(every)} documents, {chars:,} characters (best of {repeats}):")
    print(f"  count_tokens             {ours * 1e3:8.1f} ms  {chars / ours / 1e6:7.1f} M chars/s")
    print(
        f"  tiktoken encode_ordinary {theirs * 1e3:8.1f} ms  {chars / theirs / 1e6:7.1f} M chars/s"
    )
    print(f"  ratio                    {ratio:8.1f}x (target >= {MIN_SPEEDUP:.0f}x)")
    if ratio < MIN_SPEEDUP:
        failures.append(f"speed: {ratio:.1f}x < {MIN_SPEEDUP:.0f}x tiktoken")

    print()
    for failure in failures:
        print(f"FAIL {failure}")
    if failures:
        print(f"FAIL: {len(failures)} targets missed")
        return 1
    print(
        f"PASS: every category of >= {MIN_DOCS} documents: bias >= {MIN_BIAS:.0f}% and lowest "
        f"document >= {MIN_WORST:.0f}% against cl100k and o200k, MAE <= {MAX_MAE:.0f}% against "
        f"the dearer of the two; speed >= {MIN_SPEEDUP:.0f}x tiktoken"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
