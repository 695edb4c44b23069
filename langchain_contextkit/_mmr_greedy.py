"""The lazy-greedy MMR engine: exact MMR picks with few similarity computations.

`mmr_select`, `mmr_indices` and `MMRRanking` (in `mmr.py`) check their arguments, build
the embedding matrix (`_mmr_matrix.py`) and hand it to `LazyGreedy`, which makes the picks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Iterator

    from langchain_contextkit._mmr_matrix import FloatArray, IndexArray

__all__ = ["LazyGreedy"]

# Tuning. A refresh block larger than this fraction of all candidates is computed
# against the whole embedding matrix: gathering that many rows into a temporary costs
# more memory traffic than multiplying the rows we do not need.
_FULL_MATRIX_FRACTION = 0.3
# Block sizes: picks are made from a block of the candidates with the highest bounds for
# as long as the block's best score beats every bound outside it. A couple of candidates
# per remaining pick usually last for many picks; the floor keeps the block useful near
# the end, the cap keeps each pick's matrix-vector product over the block small.
# (Measured on the benchmark grid; within a few percent of the best settings tried.)
_BLOCK_PER_PICK = 2
_MIN_BLOCK = 64
_MAX_BLOCK = 512
# Refreshes against at most this many picks use matrix-vector products (see `_update`).
_GEMV_MAX_PICKS = 3


class LazyGreedy:
    """State of one lazy-greedy MMR run over `n` candidates.

    Per candidate `i` it keeps `max_sim[i]`, the largest similarity to the first
    `compared[i]` picks. That is a lower bound of the true largest similarity to all
    picks; it starts at -1, the smallest cosine similarity (similarities are clipped to
    [-1, 1], the lower end by this very starting value). So `bound[i] = lam * score[i] -
    (1 - lam) * max_sim[i]` is an upper bound of the candidate's current MMR score, exact
    once `compared[i]` equals the number of picks. Picked and dropped candidates have
    bound -inf.

    Every similarity is computed as `(row . pick) * inv_norm[pick] * inv_norm[row]` in
    that order, whichever code path computes it, so all paths agree bit for bit whenever
    the dot products are exact.
    """

    def __init__(
        self,
        scores: FloatArray,
        matrix: FloatArray,
        inv_norm: FloatArray,
        *,
        limit: int | None,
        lam: float,
        threshold: float,
    ) -> None:
        """Set up the state for picking at most `limit` (`None`: all) of `n >= 1` rows."""
        n = scores.shape[0]
        self.matrix = matrix
        self.inv_norm = inv_norm
        self.limit = n if limit is None else min(limit, n)
        self.threshold = threshold
        self.scores = scores
        self.weighted_score: FloatArray = lam * scores
        self.penalty_weight = 1.0 - lam
        self.max_sim: FloatArray = np.full(n, -1.0)
        self.compared: IndexArray = np.zeros(n, dtype=np.intp)
        # Filled by the comparison with the first pick (`_compare_all_with`).
        self.bound: FloatArray = np.empty(n)
        # Pick indices in an array too, to gather the picks' rows for a refresh; the rows
        # are not copied at pick time, since most picks are made inside a block and many
        # candidates are never refreshed against them.
        self.pick_array: IndexArray = np.empty(self.limit, dtype=np.intp)
        self.picks: list[int] = []
        self.dropped = 0  # near-duplicates dropped so far
        self.expected_picks: int | None = None  # set by open-ended rankings
        self.full_threshold = max(1, int(n * _FULL_MATRIX_FRACTION))

    def run(self) -> list[int]:
        """Make every pick; return the picked row indices in pick order."""
        return list(self.iter_picks())

    def iter_picks(self) -> Iterator[int]:
        """Yield the picks in order, each as soon as it is made.

        A consumer may stop early: picks are computed only as far as they are pulled.
        """
        # The first pick ignores lambda_: with nothing picked yet, relevance alone decides
        # (`weighted_score` would too, except when lambda_ is 0).
        first = int(np.argmax(self.scores))
        self._add_pick(first)
        yield first
        if self.limit == 1:
            return
        # Compare everyone with the first pick at once (one matrix-vector product). Bounds
        # from max_sim = -1 are so loose that the lazy refreshes would reach most
        # candidates anyway, in several smaller, slower batches (measured: up to 2x slower
        # on clustered data).
        self._compare_all_with(first)
        while len(self.picks) < self.limit:
            block = self._top_block()
            if block is None:
                break  # every candidate is picked or dropped
            rows, outside = block
            self.refresh(rows)
            best = float(self.bound[rows].max())
            if best > outside:
                yield from self._pick_in_block(rows, outside)
            else:
                picked = self._pick_one(best)
                if picked is not None:
                    yield picked

    def _compare_all_with(self, first: int) -> None:
        """Fold every candidate's similarity to the first pick into the state.

        The same arithmetic as `_update`, on whole arrays: no row gathering, no index
        arrays, which matters when the matrix is the caller's and this is the one pass
        over all of it.
        """
        sims = self.matrix @ self.matrix[first]
        sims *= self.inv_norm[first]
        sims *= self.inv_norm
        _clip_above(sims)
        np.maximum(self.max_sim, sims, out=self.max_sim)
        self.compared.fill(1)
        np.subtract(self.weighted_score, self.penalty_weight * self.max_sim, out=self.bound)
        self.bound[first] = -np.inf

    def _add_pick(self, index: int) -> None:
        """Record `index` as the next pick."""
        self.pick_array[len(self.picks)] = index
        self.picks.append(index)
        self.bound[index] = -np.inf

    def _top_block(self) -> tuple[IndexArray, float] | None:
        """The live candidates with the highest bounds, and the best bound of the rest.

        Returns:
            Sorted indices of the block and the largest bound outside it (-inf when the
            block holds every live candidate), or `None` when no candidate is live.
        """
        bound = self.bound
        n = bound.shape[0]
        remaining = self.limit - len(self.picks)
        if self.expected_picks is not None:
            # An open-ended ranking: size blocks for the picks likely to be pulled next
            # (as many again as so far), not for every candidate.
            remaining = min(remaining, max(self.expected_picks, len(self.picks)))
        size = min(_MAX_BLOCK, max(_MIN_BLOCK, _BLOCK_PER_PICK * remaining))
        if size >= n:
            rows = np.arange(n)
            outside = -np.inf
        else:
            order = np.argpartition(bound, n - size - 1)
            rows = order[n - size :]
            outside = float(bound[order[n - size - 1]])
        rows = np.sort(rows[bound[rows] > -np.inf])  # sorted: argmax ties go to the earliest
        return (rows, outside) if rows.size else None

    def _pick_in_block(self, rows: IndexArray, outside: float) -> Iterator[int]:
        """Pick from the exact block `rows` while its best score beats `outside`.

        Candidates outside the block have bounds <= `outside`, so a block score above it
        is the global best. Each pick costs one matrix-vector product over the block (not
        over all candidates) and a few block-sized operations; once no block score beats
        `outside`, the caller re-forms the block around the refreshed bounds.
        """
        block = self.matrix[rows]
        inv = self.inv_norm[rows]
        ones = np.ones_like(inv)
        index_of = rows.tolist()
        max_sim = self.max_sim[rows]
        weighted = self.weighted_score[rows]  # a copy: picked members become -inf
        penalty = self.penalty_weight
        picks = self.picks
        threshold = self.threshold
        # This loop runs once per pick on blocks of a few dozen rows, where each numpy
        # call costs about a microsecond whatever it computes: scores are rewritten in
        # place, not reallocated, and every call that can be saved is.
        scores = np.multiply(max_sim, penalty)
        np.subtract(weighted, scores, out=scores)
        best = int(scores.argmax())
        while True:
            if max_sim[best] < threshold:
                index = index_of[best]
                self.pick_array[len(picks)] = index
                picks.append(index)
                yield index
                if len(picks) == self.limit:
                    return  # nothing else will read the state
                # Similarity of every member to the pick, in the order `_update` uses.
                # One column per pick, not a Gram matrix up front: many blocks end after
                # a pick or two (measured: batching the likely picks' columns into one
                # matrix product was 5-20% slower overall).
                column = block.dot(block[best])  # `dot`: less dispatch than `@`
                column *= inv[best]
                column *= inv
                np.minimum(column, ones, out=column)  # `_clip_above`, minus a dispatch
                np.maximum(max_sim, column, out=max_sim)
            else:
                self.dropped += 1
            weighted[best] = -np.inf  # picked, or dropped as a near-duplicate
            np.multiply(max_sim, penalty, out=scores)
            np.subtract(weighted, scores, out=scores)
            best = int(scores.argmax())
            if not scores[best] > outside:
                break
        self.max_sim[rows] = max_sim
        self.compared[rows] = len(picks)
        self.bound[rows] = scores

    def _pick_one(self, best: float) -> int | None:
        """Make one pick (or drop) when candidates outside the block may beat it.

        Every candidate whose bound reaches `best`, the block's best exact score, is
        refreshed; then the top bound is exact, and the argmax also breaks ties towards
        the earliest candidate. This always makes progress, even when many candidates
        share one score.
        """
        self.refresh(np.flatnonzero(self.bound >= best))
        winner = int(self.bound.argmax())
        if self.max_sim[winner] >= self.threshold:
            self.bound[winner] = -np.inf  # a near-duplicate of a pick: dropped for good
            self.dropped += 1
            return None
        self._add_pick(winner)
        return winner

    def refresh(self, rows: IndexArray) -> None:
        """Compare live candidates `rows` with every pick they have not seen yet."""
        t = len(self.picks)
        rows = rows[self.compared[rows] < t]
        if rows.size == 0:
            return
        recent = self.compared[rows] == t - 1
        if recent.all():
            self._update(rows, t - 1)
        elif not recent.any():
            self._update(rows, int(self.compared[rows].min()))
        else:
            # Most rows usually lag one pick behind; comparing them with every pick the
            # stalest row needs would multiply their work by the lag.
            self._update(rows[recent], t - 1)
            older = rows[~recent]
            self._update(older, int(self.compared[older].min()))

    def _update(self, rows: IndexArray, start: int) -> None:
        """Fold similarities of `rows` with picks `start..` into the state."""
        t = len(self.picks)
        picked = self.pick_array[start:t]
        picks = self.matrix[picked]
        picks_inv = self.inv_norm[picked]
        # A large batch multiplies all rows: cheaper than gathering most of them first.
        full = rows.size > self.full_threshold
        source = self.matrix if full else self.matrix[rows]
        if picked.size > _GEMV_MAX_PICKS:
            raw = source @ picks.T
            raw *= picks_inv
            sims = raw.max(axis=1)
        else:
            # BLAS handles a product with 2-3 columns worse than 2-3 matrix-vector products
            # (OpenBLAS: up to 3x slower), and this case is common: most candidates lag
            # only a pick or two behind.
            sims = source @ picks[0]
            sims *= picks_inv[0]
            for j in range(1, picked.size):
                column = source @ picks[j]
                column *= picks_inv[j]
                np.maximum(sims, column, out=sims)
        if full:
            sims = sims[rows]
        # Scaling by the row's own positive inverse norm is monotone, so it can come after
        # the max and still give exactly max(sim) of the per-pair formula.
        sims *= self.inv_norm[rows]
        _clip_above(sims)
        max_sim = np.maximum(self.max_sim[rows], sims)
        self.max_sim[rows] = max_sim
        self.compared[rows] = t
        self.bound[rows] = self.weighted_score[rows] - self.penalty_weight * max_sim


def _clip_above(values: FloatArray) -> None:
    """Clip similarities to at most 1 in place (rounding can overshoot by an ulp).

    This keeps "a threshold above 1 disables dropping" true. The lower end needs no clip:
    every running max starts at -1, so it never holds anything below -1.
    """
    # A bare ufunc: `np.clip` adds microseconds of dispatch, and this runs on every refresh.
    np.minimum(values, 1.0, out=values)
