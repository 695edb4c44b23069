"""`reduce_reflection`: reduce draft/critique rounds to the latest draft and every critique point.

Superseded drafts go; the critique points of every round survive, deduplicated (by
embedding similarity when `embeddings` are given). `reduce_reflection_sync` is the same
call for sync code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from langchain_contextkit.compaction.facts import normalised
from langchain_contextkit.reducers.base import (
    SummarizerLike,
    _check_budget,
    _exceeded,
    arun_steps,
    run_steps,
)
from langchain_contextkit.reducers.trajectories import ReflectionTrajectory
from langchain_contextkit.tokens.count import (
    TokenCounter,
    count_tokens,
)

if TYPE_CHECKING:
    from collections.abc import Generator, Sequence

    from langchain_core.embeddings import Embeddings

__all__ = ["reduce_reflection", "reduce_reflection_sync"]


@dataclass(frozen=True, slots=True)
class Embed:
    """The critique points embedded, a step of `_reduce_reflection` (see `run_steps`)."""

    embeddings: Embeddings
    texts: list[str]

    def run(self) -> list[list[float]]:
        """Embed with the sync API."""
        return self.embeddings.embed_documents(self.texts)

    async def arun(self) -> list[list[float]]:
        """Embed with the async API."""
        return await self.embeddings.aembed_documents(self.texts)


async def reduce_reflection(
    rounds: ReflectionTrajectory,
    budget: int,
    summarize: SummarizerLike | None = None,
    *,
    counter: TokenCounter = count_tokens,
    embeddings: Embeddings | None = None,
    similarity_threshold: float = 0.9,
) -> ReflectionTrajectory:
    """Fit a reflection loop into `budget` tokens: latest draft plus every lesson learnt.

    Superseded drafts go; every critique point ever raised stays, near-duplicates merged
    (same words in the same order, ignoring case and punctuation; or, with `embeddings`, cosine
    similarity >= `similarity_threshold`), first wording kept. Nothing is summarised, so
    `summarize` is accepted only for the common reducer signature.

    Args:
        rounds: The trajectory (`ReflectionTrajectory`).
        budget: Tokens its rendering may take (measured with `counter`).
        summarize: Unused (the shared signature).
        counter: Counts the tokens of one string.
        embeddings: Merges paraphrased critique points when given.
        similarity_threshold: Cosine similarity at which two points count as one.

    Returns:
        The reduced trajectory (`rounds` itself when it already fits).

    Raises:
        ContextWindowExceeded: When the task, the latest draft and the distinct critique
            points alone exceed `budget`.

    Example:
        ```python
        import asyncio

        from langchain_contextkit.reducers.reflection import reduce_reflection
        from langchain_contextkit.reducers.trajectories import ReflectionRound, ReflectionTrajectory

        loop = ReflectionTrajectory(
            task="Summarise the Q3 report",
            rounds=[
                ReflectionRound(
                    draft="Draft one. " * 40, critique=["Mention revenue.", "Too long."]
                ),
                ReflectionRound(draft="Draft two. " * 40, critique=["too long!", "Cite page 4."]),
                ReflectionRound(draft="Final draft: revenue up 12%, see page 4."),
            ],
        )
        reduced = asyncio.run(reduce_reflection(loop, budget=60))
        print(reduced.render())
        # Task: Summarise the Q3 report
        # Critique points so far:
        # - Mention revenue.
        # - Too long.
        # - Cite page 4.
        # Latest draft (round 3):
        # Final draft: revenue up 12%, see page 4.
        ```
    """
    return await arun_steps(
        _reduce_reflection(
            rounds,
            budget,
            summarize,
            counter=counter,
            embeddings=embeddings,
            similarity_threshold=similarity_threshold,
        )
    )


def _reduce_reflection(
    rounds: ReflectionTrajectory,
    budget: int,
    summarize: SummarizerLike | None = None,  # noqa: ARG001 - the reducers share one signature
    *,
    counter: TokenCounter = count_tokens,
    embeddings: Embeddings | None = None,
    similarity_threshold: float = 0.9,
) -> Generator[Embed, Any, ReflectionTrajectory]:
    """`reduce_reflection` as a generator of the summaries it needs (`run_steps` drives it)."""
    _check_budget(budget)
    if counter(rounds.render()) <= budget or len(rounds.rounds) <= 1:
        if counter(rounds.render()) > budget:
            raise _exceeded(
                what="the task, latest draft and critique points",
                required=counter(rounds.render()),
                budget=budget,
            )
        return rounds
    folded_points = [*rounds.critique_points]
    for round_ in rounds.rounds[:-1]:
        folded_points.extend(round_.critique)
    latest = rounds.rounds[-1]
    kept_points = yield from _distinct_points(
        folded_points, latest.critique, embeddings, similarity_threshold
    )
    reduced = ReflectionTrajectory(
        task=rounds.task,
        rounds=(latest.model_copy(update={"critique": tuple(kept_points[1])}),),
        critique_points=tuple(kept_points[0]),
        folded_rounds=rounds.folded_rounds + len(rounds.rounds) - 1,
    )
    required = counter(reduced.render())
    if required > budget:
        raise _exceeded(
            what="the task, latest draft and critique points", required=required, budget=budget
        )
    return reduced


def _distinct_points(
    folded: Sequence[str],
    latest: Sequence[str],
    embeddings: Embeddings | None,
    threshold: float,
) -> Generator[Embed, Any, tuple[list[str], list[str]]]:
    """Drop repeated points: from the folded ones, and latest ones already raised before."""
    points = [*folded, *latest]
    keep = [True] * len(points)
    # Same words in the same order, ignoring case and punctuation: "Use 2 spaces, not 4"
    # and "Use 4 spaces, not 2" are different instructions and both stay.
    keys = [normalised(p) for p in points]
    first_of: dict[str, int] = {}
    for i, key in enumerate(keys):
        if key in first_of:
            keep[i] = False
        else:
            first_of[key] = i
    if embeddings is not None and len(points) > 1:
        embedded = yield Embed(embeddings, list(points))
        vectors = np.asarray(embedded, dtype=np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        similar = unit @ unit.T >= threshold
        for i in range(len(points)):
            if keep[i] and bool(similar[i, :i][np.asarray(keep[:i], dtype=bool)].any()):
                keep[i] = False
    split = len(folded)
    return (
        [p for p, k in zip(points[:split], keep[:split], strict=True) if k],
        [p for p, k in zip(points[split:], keep[split:], strict=True) if k],
    )


def reduce_reflection_sync(
    rounds: ReflectionTrajectory,
    budget: int,
    summarize: SummarizerLike | None = None,
    *,
    counter: TokenCounter = count_tokens,
    embeddings: Embeddings | None = None,
    similarity_threshold: float = 0.9,
) -> ReflectionTrajectory:
    """`reduce_reflection` for sync callers (same arguments, same result)."""
    return run_steps(
        _reduce_reflection(
            rounds,
            budget,
            summarize,
            counter=counter,
            embeddings=embeddings,
            similarity_threshold=similarity_threshold,
        )
    )
