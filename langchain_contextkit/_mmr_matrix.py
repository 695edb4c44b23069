"""Embedding matrices for MMR: building one from candidates, checking one, inverse norms.

MMR compares candidates by cosine similarity. The selection works on one `(n, d)`
matrix with a row per candidate and the rows' inverse norms, computed once; the rows
themselves are never normalised (that would be one more pass over, and a copy of, the
largest array in play: scaling the few similarities actually computed is much cheaper).
A zero row (a candidate without an embedding) has inverse norm 0, which makes all its
similarities 0 with no special case anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from langchain_contextkit.errors import ConfigError

__all__ = [
    "FloatArray",
    "IndexArray",
    "checked_embedding_matrix",
    "stacked_embeddings",
]

FloatArray: TypeAlias = npt.NDArray[np.floating[Any]]
IndexArray: TypeAlias = npt.NDArray[np.intp]
Embedding: TypeAlias = Sequence[float] | FloatArray | None

_MATRIX_NDIM = 2


def stacked_embeddings(
    embeddings: Sequence[Embedding], positions: Sequence[int] | None = None
) -> tuple[FloatArray, FloatArray]:
    """Stack per-candidate embeddings into a new matrix; compute inverse row norms.

    Args:
        embeddings: One vector (or `None`) per candidate.
        positions: The candidates' indices in the caller's list (`None`: the same as
            here), used in error messages.

    Returns:
        The `(n, d)` matrix (rows of `None` embeddings are zero) and the `(n,)` inverse
        norms (0 for zero rows), both float32 or float64.

    Raises:
        ConfigError: If an embedding is not a one-dimensional numeric vector, if sizes
            differ, or if a value is NaN or infinite.
    """
    matrix: npt.NDArray[Any] | None
    try:
        # One C-level conversion in the common case (every candidate has a vector of the
        # same size); anything unusual falls through to the slow, diagnosing path.
        stacked = np.asarray(embeddings)
    except (ValueError, TypeError):
        matrix = None
    else:
        matrix = stacked if stacked.ndim == _MATRIX_NDIM and stacked.dtype.kind in "biuf" else None
    if matrix is None:
        matrix = _stacked_one_by_one(embeddings, positions)
    # np.asarray of a list always allocates: the matrix is ours to rescale in place.
    return _with_inverse_norms(_as_float_matrix(matrix), positions, owned=True)


def checked_embedding_matrix(embeddings: npt.ArrayLike, n: int) -> tuple[FloatArray, FloatArray]:
    """Check a caller's `(n, d)` embedding matrix; compute inverse row norms.

    A float32 or float64 array is used as it is, without a copy, and never modified;
    other numeric input is converted once.

    Args:
        embeddings: Row `i` is the embedding of candidate `i`; all-zero rows have no
            direction and count as similarity 0 to everything.
        n: The number of candidates.

    Returns:
        The matrix and the `(n,)` inverse norms (0 for zero rows).

    Raises:
        ConfigError: If the input is not a numeric `(n, d)` matrix or holds NaN or
            infinite values.
    """
    try:
        raw = np.asarray(embeddings)
    except (ValueError, TypeError) as error:  # ragged nested lists
        msg = f"embeddings must be a numeric matrix with one row per score: {error}"
        raise ConfigError(msg) from None
    if n == 0 and raw.ndim == 1 and raw.size == 0:
        raw = raw.reshape(0, 0)  # `[]`: the embeddings of an empty search result
    if raw.ndim != _MATRIX_NDIM or raw.shape[0] != n:
        msg = f"embeddings must have shape ({n}, d), one row per score; got shape {raw.shape}"
        raise ConfigError(msg)
    if raw.dtype.kind not in "biuf":
        msg = f"embeddings must be numeric, got dtype {raw.dtype}"
        raise ConfigError(msg)
    matrix = _as_float_matrix(raw)
    if not (matrix.flags.c_contiguous or matrix.flags.f_contiguous):
        # A strided view (e.g. every other row) would be copied by BLAS on every product.
        matrix = np.ascontiguousarray(matrix)
    # Only a conversion made here is ours to modify; `raw` may be the caller's memory
    # even when it is a new object (a view, or what an `__array__` method handed out).
    return _with_inverse_norms(matrix, None, owned=matrix is not raw)


def _stacked_one_by_one(
    embeddings: Sequence[Embedding], positions: Sequence[int] | None
) -> npt.NDArray[Any]:
    """Build the embedding matrix one candidate at a time, with precise error messages."""
    present: list[int] = []
    vectors: list[npt.NDArray[Any]] = []
    first_of_size: dict[int, int] = {}
    for i, embedding in enumerate(embeddings):
        if embedding is None:
            continue
        where = i if positions is None else positions[i]
        vector = np.asarray(embedding)
        if vector.ndim != 1:
            msg = (
                f"candidate {where} has an embedding of shape {vector.shape}; "
                "expected a one-dimensional vector"
            )
            raise ConfigError(msg)
        if vector.dtype.kind not in "biuf":
            msg = f"candidate {where} has an embedding of non-numeric dtype {vector.dtype}"
            raise ConfigError(msg)
        first_of_size.setdefault(vector.shape[0], where)
        present.append(i)
        vectors.append(vector)
    if len(first_of_size) > 1:
        sizes = ", ".join(
            f"{size} (first at candidate {where})" for size, where in first_of_size.items()
        )
        msg = f"embeddings must all have the same size; found sizes {sizes}"
        raise ConfigError(msg)
    if not vectors:
        # No candidate has an embedding: zero columns make every similarity 0.
        return np.zeros((len(embeddings), 0), dtype=np.float64)
    stacked = np.asarray(vectors)
    matrix = np.zeros((len(embeddings), stacked.shape[1]), dtype=stacked.dtype)
    matrix[present] = stacked
    return matrix


def _as_float_matrix(matrix: npt.NDArray[Any]) -> FloatArray:
    """Keep float32/float64 as they are; everything else becomes a float BLAS can use."""
    if matrix.dtype in (np.float32, np.float64):
        return matrix
    if matrix.dtype == np.float16:
        return matrix.astype(np.float32)
    # A long double beyond the float64 range becomes inf, which the row checks report.
    with np.errstate(over="ignore"):
        return matrix.astype(np.float64)


def _with_inverse_norms(
    matrix: FloatArray, positions: Sequence[int] | None, *, owned: bool
) -> tuple[FloatArray, FloatArray]:
    """Validate the rows of `matrix` and compute their inverse norms.

    Args:
        matrix: The float matrix.
        positions: Candidate indices for error messages (`None`: row numbers).
        owned: Whether `matrix` may be modified; when not, the rare rows that need
            rescaling are rescaled in a copy.

    Returns:
        The matrix (possibly a rescaled copy) and the inverse norms.
    """
    sq_norm = _row_dots(matrix)
    finfo = np.finfo(matrix.dtype)
    # NaN fails both comparisons, so this one mask also catches NaN/inf values (their
    # squared norm is not finite), all-zero rows and rows whose squared norm overflows or
    # underflows; all are rare and handled below without slowing down the common case.
    suspicious = np.flatnonzero(~((sq_norm >= finfo.tiny) & (sq_norm <= finfo.max / 4)))
    if suspicious.size and matrix.shape[1]:
        rows, scaled = _rescaled_rows(matrix, suspicious, positions)
        if rows.size:
            if not owned:
                matrix = matrix.copy()
            matrix[rows] = scaled
            sq_norm[rows] = _row_dots(scaled)
    with np.errstate(divide="ignore"):
        inv_norm: FloatArray = 1.0 / np.sqrt(sq_norm)
    inv_norm[sq_norm == 0] = 0.0
    return matrix, inv_norm


def _row_dots(matrix: FloatArray) -> FloatArray:
    """Squared norm of every row, without an `(n, d)` temporary."""
    vecdot = getattr(np, "vecdot", None)  # numpy >= 2.0; faster than einsum
    # Overflow to inf is expected for huge rows and handled by the caller: no warning.
    with np.errstate(over="ignore", invalid="ignore"):
        if vecdot is not None:
            result: FloatArray = vecdot(matrix, matrix)
        else:  # pragma: no cover - numpy 1.x
            result = np.einsum("ij,ij->i", matrix, matrix)
    return result


def _rescaled_rows(
    matrix: FloatArray, rows: IndexArray, positions: Sequence[int] | None
) -> tuple[IndexArray, FloatArray]:
    """Reject non-finite rows; rescale rows whose squared norm over- or underflows.

    Cosine similarity ignores a row's scale, so such rows are multiplied by a power of
    two (exact in binary floating point) that brings their largest entry near 1. All-zero
    rows need nothing: they keep squared norm 0 and get an inverse norm of 0.

    Returns:
        The rows to replace (possibly none) and their rescaled values.
    """
    sub = matrix[rows]
    finite = np.isfinite(sub).all(axis=1)
    if not finite.all():
        bad = int(rows[int(np.argmin(finite))])
        where = bad if positions is None else positions[bad]
        msg = f"candidate {where} has an embedding with NaN or infinite values"
        raise ConfigError(msg)
    largest = np.abs(sub).max(axis=1)
    nonzero = largest > 0
    exponent = np.frexp(largest[nonzero])[1]
    scaled = np.ldexp(sub[nonzero], -exponent[:, np.newaxis]).astype(matrix.dtype)
    return rows[nonzero], scaled
