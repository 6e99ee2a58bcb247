"""Basis choices for the R-subset ranker of seed 000 eq. (11): ``f(x) = Σ_{r∈R} β_r k(x_r, x)``.

- ``"rare"``: R = the rare (positive) class — RankRC, seed 000 eq. (7), (13).
- ``"all"``: R = every training row — kernel RankSVM, seed 000 eq. (6).
- ``"random"``: R = ``n_basis`` rows drawn uniformly without replacement (default ``m+``) —
  RANK-RND of seed 000 Sec. 6.
- an integer array: any R-subset (eq. 11), e.g. Nyström landmarks.
"""

from __future__ import annotations

import jax
import numpy as np

__all__ = ["resolve_basis"]


def resolve_basis(basis, pos: np.ndarray, *, key=None, n_basis: int | None = None) -> np.ndarray:
    """Return the basis as sorted-free int64 row indices into the training rows.

    Args:
      basis: ``"rare"``, ``"all"``, ``"random"`` or a 1-D integer array of row indices.
      pos: ``(m,)`` boolean mask of the rare class.
      key: ``jax.random.key`` for ``"random"`` (required there: randomness is explicit).
      n_basis: size of a random basis (default m+).

    Returns:
      ``(|R|,)`` int64 indices.

    Raises:
      ValueError: unknown basis name, missing key, indices out of range or repeated, or a basis
        size outside ``[1, m]``.
    """
    m = pos.shape[0]
    if isinstance(basis, str):
        if basis == "rare":
            return np.flatnonzero(pos)
        if basis == "all":
            return np.arange(m)
        if basis == "random":
            if key is None:
                raise ValueError("basis='random' needs key=jax.random.key(...).")
            n = int(pos.sum()) if n_basis is None else int(n_basis)
            if not 1 <= n <= m:
                raise ValueError(f"n_basis must be in [1, {m}], got {n}.")
            perm = np.asarray(jax.random.permutation(key, m))
            return np.sort(perm[:n]).astype(np.int64)
        raise ValueError(
            f"unknown basis {basis!r}; use 'rare', 'all', 'random' or an array of row indices."
        )
    idx = np.asarray(basis)
    if idx.ndim != 1 or idx.size == 0:
        raise ValueError(f"a basis index array must be 1-D and non-empty, got shape {idx.shape}.")
    if idx.dtype.kind not in "iu":
        raise ValueError(f"basis indices must be integers, got dtype {idx.dtype}.")
    if idx.min() < 0 or idx.max() >= m:
        raise ValueError(f"basis indices must lie in [0, {m}), got [{idx.min()}, {idx.max()}].")
    if np.unique(idx).size != idx.size:
        raise ValueError("basis indices must not repeat (a repeated row makes K_RR singular).")
    return idx.astype(np.int64)
