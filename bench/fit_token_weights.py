"""Re-derive the weights of `count_tokens` from tiktoken cl100k_base on this machine's text.

    python bench/fit_token_weights.py

Reads the same corpus as `bench_tokens.py`, counts the model's features in every document
(characters per class, run starts, a few transitions, letters past the 16th of a run),
and fits non-negative weights by least squares on each document's relative error, every
category weighted equally. CJK characters are held at one token each and the hand-set
weights of `_token_model` are held fixed. Prints the fitted weights in milli-tokens beside
the shipped ones, so a drift (a new corpus, a new encoding) is visible at a glance.
Non-negative weights are what keep the estimate monotone under appending text.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpus import load_corpus

from langchain_contextkit import _token_model as model
from langchain_contextkit import tiktoken_counter

Matrix = npt.NDArray[np.float64]
_HAND_SET = {
    "char other_space": model.CHAR_RATE[model.OTHER_SPACE],
    "char latin_ext": model.CHAR_RATE[model.LATIN_EXT],
    "char other": model.CHAR_RATE[model.OTHER],
    "start other_space": model.RUN_START[model.OTHER_SPACE],
}
_NAMES = model.CLASS_NAMES


def _transition_name(prev: int, cls: int) -> str:
    # The model charges one weight for a digit followed by a letter of either case.
    if prev == model.DIGIT and cls in (model.LOWER, model.UPPER):
        return "digit->letter"
    return f"{_NAMES[prev]}->{_NAMES[cls]}"


def features(text: str) -> tuple[dict[str, float], int]:
    """The model's features of one text (the same ones `_token_model` prices), and its CJK count."""
    cls = model.CLASS_TABLE[np.frombuffer(text.encode("utf-32-le"), np.uint32)]
    n = model.N_CLASSES
    counts = np.bincount(cls, minlength=n)
    trans = np.zeros((n, n))
    changed = cls[1:] != cls[:-1]
    np.add.at(trans, (cls[:-1][changed], cls[1:][changed]), 1)
    starts = trans.sum(axis=0)
    starts[cls[0]] += 1
    letters = [model.LOWER, model.UPPER, model.LATIN_EXT]
    f: dict[str, float] = {f"char {_NAMES[c]}": counts[c] for c in model.CHAR_RATE}
    f |= {f"start {_NAMES[c]}": starts[c] for c in model.RUN_START}
    f["word start"] = sum(starts[c] for c in letters) - sum(
        trans[a, b] for a in letters for b in letters
    )
    for a, b in model.TRANSITION:
        key = _transition_name(a, b)
        f[key] = f.get(key, 0) + trans[a, b]
    f["long run letter"] = model._count_long_run_letters(np.isin(cls, letters), 0)  # noqa: SLF001
    return f, int(np.count_nonzero(cls >= model.HAN))


def nnls(a: Matrix, b: npt.NDArray[np.float64], iterations: int = 500) -> npt.NDArray[np.float64]:
    """Lawson-Hanson non-negative least squares: argmin |a x - b| subject to x >= 0."""
    x = np.zeros(a.shape[1])
    passive = np.zeros(a.shape[1], dtype=bool)
    for _ in range(iterations):
        gradient = a.T @ (b - a @ x)
        if passive.all() or gradient[~passive].max() <= 1e-10:
            break
        passive[np.argmax(np.where(passive, -np.inf, gradient))] = True
        while True:
            z = np.zeros_like(x)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            shrinking = passive & (z <= 0)
            step = np.min(x[shrinking] / (x[shrinking] - z[shrinking]))
            x = x + step * (z - x)
            passive &= x > 1e-12
    return x


def main() -> None:
    exact = tiktoken_counter("cl100k_base")
    rows, targets, weights, names = [], [], [], list(features("a")[0])
    for docs in load_corpus().values():
        for doc in docs:
            f, cjk = features(doc)
            truth = exact(doc)
            rows.append([f[k] for k in names])
            # CJK characters are fixed at one token; the start charge is fixed at half a token.
            targets.append(truth - cjk - model.START_CHARGE / model.MILLI)
            weights.append(1.0 / (truth * len(docs)))  # relative error, categories equal
    x, y, w = np.array(rows), np.array(targets), np.sqrt(np.array(weights))
    fixed = [names.index(k) for k in _HAND_SET]
    free = [i for i in range(len(names)) if i not in fixed]
    y = y - x[:, fixed] @ (np.array(list(_HAND_SET.values())) / model.MILLI)
    fitted = nnls(x[:, free] * w[:, None], y * w)
    shipped = {
        **{f"char {_NAMES[c]}": r for c, r in model.CHAR_RATE.items()},
        **{f"start {_NAMES[c]}": r for c, r in model.RUN_START.items()},
        "word start": model.WORD_START,
        **{_transition_name(a, b): r for (a, b), r in model.TRANSITION.items()},
        "long run letter": model.LONG_RUN_RATE,
    }
    print(f"{'feature':20} {'fitted':>7} {'shipped':>8}  (milli-tokens)")
    for i, value in zip(free, fitted, strict=True):
        print(f"{names[i]:20} {round(value * model.MILLI):7d} {shipped.get(names[i], 0):8d}")
    for name, value in _HAND_SET.items():
        print(f"{name:20} {'hand':>7} {value:8d}")


if __name__ == "__main__":
    main()
