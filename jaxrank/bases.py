"""Basis choices for the R-subset ranker of seed 000 eq. (11): ``f(x) = Σ_{r∈R} β_r k(x_r, x)``.

- ``"rare"``: R = the rare (positive) class — RankRC, seed 000 eq. (7), (13).
- ``"all"``: R = every training row — kernel RankSVM, seed 000 eq. (6).
- ``"random"``: R = ``n_basis`` rows drawn uniformly without replacement (default ``m+``) —
  RANK-RND of seed 000 Sec. 6.
- ``"rare_first"``: every rare row first, then majority rows drawn uniformly without
  replacement up to ``n_basis`` (seed 003, Sec. 4, last paragraph; the order that minimises the
  projected-map bound (31) for a given ``|R|``, Cor. 4). With ``n_basis < m+``: ``n_basis`` rare
  rows drawn uniformly.
- ``"kmeans++"``: k-means++ seeding (Arthur & Vassilvitskii 2007) on the rare class when
  ``n_basis < m+`` — seed 003, Sec. 4: "select |R| < m+ points from the positive class using a
  more sophisticated landmark selection strategy than random sampling"; with ``n_basis ≥ m+``
  every rare row, then the seeding continues over the majority rows with the rare rows as the
  centres already chosen. Needs ``X``.
- an integer array: any R-subset (eq. 11), e.g. Nyström landmarks.

Every random strategy is a pure function of ``key``: the same key gives the same basis, and a
larger ``n_basis`` with the same key extends the smaller basis (its prefix), so a basis can be
grown one landmark at a time (as in seed 003, Fig. 3).
"""

from __future__ import annotations

import os
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _buckets, _random
from jaxrank._validation import check_int, check_key, check_X, check_X_y

__all__ = ["AUTO_MAX_BASIS", "AUTO_MIN_BASIS", "auto_basis", "auto_basis_size", "kmeanspp", "resolve_basis"]

_STRATEGIES = ("rare", "all", "random", "rare_first", "kmeans++")


def _basis_size(n_basis, default: int, m: int) -> int:
    if n_basis is None:
        n = default
    else:
        try:
            n = int(n_basis)
        except (TypeError, ValueError):
            n = None
        if isinstance(n_basis, bool) or n is None or n != n_basis:
            raise ValueError(f"n_basis must be an integer, got {n_basis!r}.")
    if not 1 <= n <= m:
        raise ValueError(f"n_basis must be in [1, {m}], got {n}.")
    return n


def _need_key(key, name: str) -> None:
    if key is None:
        raise ValueError(f"basis={name!r} needs key=jax.random.key(...).")
    check_key(key)


@jax.jit
def _kmeanspp(C: jax.Array, key: jax.Array, n_fixed: jax.Array, n_total: jax.Array,
              n_rows: jax.Array) -> jax.Array:  # fmt: skip
    # D² sampling over the rows of C. The first n_fixed rows are forced centres (taken in order);
    # every later centre is drawn with probability ∝ the squared distance to its nearest chosen
    # centre (uniformly when nothing is chosen yet, or when every unchosen row coincides with a
    # chosen one). Step t draws with fold_in(key, t), so a longer run extends a shorter one.
    # The counts are dynamic (one compilation per shape of C); out[n_total:] is unused. Rows
    # from n_rows on are padding: chosen from the start, so never drawn (their logits are
    # -inf; the Gumbel noise of the real rows is the unpadded draw's, JAX's partitionable
    # threefry giving a longer shape the same leading bits).
    n = C.shape[0]
    dt = C.dtype

    def body(t, state):
        d2, chosen, out = state
        free = ~chosen
        w = jnp.where(jnp.isinf(d2), 1, d2)  # no centre yet: equal weights
        logits = jnp.where(free & (w > 0), jnp.log(jnp.where(w > 0, w, 1)), -jnp.inf)
        any_mass = jnp.any(jnp.isfinite(logits))
        logits = jnp.where(any_mass, logits, jnp.where(free, 0.0, -jnp.inf).astype(dt))
        drawn = jax.random.categorical(jax.random.fold_in(key, t), logits).astype(jnp.int32)
        i = jnp.where(t < n_fixed, t, drawn).astype(jnp.int32)
        diff = C - C[i]
        d2 = jnp.minimum(d2, jnp.sum(diff * diff, axis=1))
        return d2, chosen.at[i].set(True), out.at[t].set(i)

    pad = jnp.arange(n, dtype=jnp.int32) >= n_rows
    init = (jnp.full((n,), jnp.inf, dt), pad, jnp.zeros((n,), jnp.int32))
    _, _, out = jax.lax.fori_loop(0, n_total, body, init)
    return out


def kmeanspp(X, n: int, *, key: jax.Array, fixed: int = 0) -> np.ndarray:
    """k-means++ seeding: ``n`` rows of ``X`` drawn by D² sampling (Arthur & Vassilvitskii 2007).

    The first centre is uniform over the rows; each next one is row ``i`` with probability
    ``D(x_i)² / Σ_j D(x_j)²``, ``D(x)`` the Euclidean distance (in input space) from ``x`` to
    its nearest centre chosen so far. The first ``fixed`` rows of ``X`` are taken as centres
    chosen before any draw (they are returned first, in order). Cost ``O(n · m · d)``.

    Args:
      X: ``(m, d)`` rows.
      n: number of centres, ``fixed ≤ n ≤ m``.
      key: ``jax.random.key``; draw ``t`` uses ``jax.random.fold_in(key, t)``, so a larger
        ``n`` with the same key extends the selection of a smaller one.
      fixed: number of leading rows that are centres from the start.

    Returns:
      ``(n,)`` int64 row indices in selection order (distinct).

    Example:
      >>> import jax, numpy as np
      >>> X = np.array([[0.0], [0.1], [10.0], [10.1]])
      >>> idx = kmeanspp(X, 2, key=jax.random.key(0))
      >>> sorted((X[idx, 0] // 5).astype(int).tolist())  # one centre per cluster
      [0, 2]
    """
    X = check_X(X)
    m = X.shape[0]
    if not 0 <= fixed <= n <= m:
        raise ValueError(f"need 0 <= fixed <= n <= m = {m}, got fixed={fixed}, n={n}.")
    dt = np.float64 if (X.dtype == np.float64 and jax.config.jax_enable_x64) else np.float32
    # host arrays, not jnp.asarray / jnp.int32: those run a conversion program per shape.
    # Rows padded to their rung and features with zero columns: one program per rung of each
    # (without partitionable threefry the draw needs the exact rows). The distances are exact
    # sums with a few zero terms more, which could only move a draw at a tie to the last bit:
    # the draws were the unpadded ones in tests/test_shared_programs.py, and bench/keel_wide.py
    # kept all 505 picks and test AUCs to the last digit
    C = np.asarray(X, dt)
    if jax.config.jax_threefry_partitionable:
        C = _buckets.features(C)
        C = np.concatenate([C, np.zeros((_buckets.rung(m) - m, C.shape[1]), dt)])
    out = _kmeanspp(C, key, np.int32(fixed), np.int32(n), np.int32(m))
    return np.asarray(out)[:n].astype(np.int64)


#: The start of :func:`warn_majority_basis`'s message (a warnings filter can match it).
MAJORITY_BASIS_WARNING = "basis='rare' takes the positive (+1) rows as the basis"


def majority_basis(n_pos: int, m: int) -> bool:
    """Whether ``n_pos`` positives of ``m`` rows are a clear majority (more than twice the
    other class): the case :func:`warn_majority_basis` warns about."""
    return n_pos > 2 * (m - n_pos)


def warn_majority_basis(pos: np.ndarray) -> None:
    """Warn (:data:`MAJORITY_BASIS_WARNING`) when ``basis='rare'`` would take a clear majority
    (more than twice the other class's rows) as the basis."""
    # RankRC's basis is the rare class: labels that make the majority +1 give a basis of most
    # rows (memory and time grow with it) and scores that rank the majority first, silently.
    # Only a clear majority (twice the other class): near-balanced data is not flipped labels
    n_pos, m = int(pos.sum()), pos.shape[0]
    if majority_basis(n_pos, m):
        warnings.warn(
            f"{MAJORITY_BASIS_WARNING}, but they are the majority here: {n_pos} of {m} rows "
            f"({n_pos / m:.1%}), where the other class would give {m - n_pos}. If the rare class "
            "is labelled -1/0/False, label it +1 instead (the scores rank the +1 class first).",
            UserWarning,
            stacklevel=_caller_level(),
        )


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside jaxrank, seen from the function that
    calls ``warnings.warn`` (several entry points reach :func:`resolve_basis`)."""
    here = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(here):
        frame, level = frame.f_back, level + 1
    return level


def resolve_basis(
    basis, pos: np.ndarray, *, key=None, n_basis: int | None = None, X=None
) -> np.ndarray:
    """Return the basis as int64 row indices into the training rows.

    Args:
      basis: ``"rare"``, ``"all"``, ``"random"``, ``"rare_first"``, ``"kmeans++"`` (see the
        module notes) or a 1-D integer array of row indices.
      pos: ``(m,)`` boolean mask of the rare class.
      key: ``jax.random.key``, required by the random strategies ``"random"``,
        ``"rare_first"`` and ``"kmeans++"`` (randomness is explicit).
      n_basis: basis size for the random strategies (default m+).
      X: ``(m, d)`` training rows; required by ``"kmeans++"`` (distances), ignored otherwise.

    Returns:
      ``(|R|,)`` int64 indices. ``"random"``: ascending. ``"rare_first"``: the rare rows
      (ascending; with ``n_basis < m+`` in draw order), then the majority rows in draw order.
      ``"kmeans++"``: in selection order (with ``n_basis ≥ m+`` the rare rows, ascending,
      first). An index array is returned as given.

    Raises:
      ValueError: unknown basis name, missing key (or ``X`` for ``"kmeans++"``), indices out of
        range or repeated, or a basis size outside ``[1, m]``.

    Example:
      >>> import jax, numpy as np
      >>> pos = np.array([False, True, False, False, True, False])
      >>> idx = resolve_basis("rare_first", pos, n_basis=4, key=jax.random.key(0))
      >>> idx[:2].tolist(), bool(np.all(~pos[idx[2:]]))
      ([1, 4], True)
    """
    m = pos.shape[0]
    if isinstance(basis, str):
        if basis == "rare":
            warn_majority_basis(pos)
            return np.flatnonzero(pos)
        if basis == "all":
            return np.arange(m)
        n_pos = int(pos.sum())
        if basis == "random":
            _need_key(key, basis)
            n = _basis_size(n_basis, n_pos, m)
            perm = _random.permutation(key, m)
            return np.sort(perm[:n]).astype(np.int64)
        if basis == "rare_first":
            _need_key(key, basis)
            n = _basis_size(n_basis, n_pos, m)
            rare, rest = np.flatnonzero(pos), np.flatnonzero(~pos)
            if n <= n_pos:
                # fewer landmarks than rare rows: a uniform draw of them (n = m+: all of them)
                take = _random.permutation(key, n_pos)[:n] if n < n_pos else None
                return (rare if take is None else rare[take]).astype(np.int64)
            draw = _random.permutation(key, rest.size)[: n - n_pos]
            return np.concatenate([rare, rest[draw]]).astype(np.int64)
        if basis == "kmeans++":
            _need_key(key, basis)
            if X is None:
                raise ValueError(
                    "basis='kmeans++' needs the training rows: resolve_basis(..., X=X)."
                )
            X = check_X(X)
            if X.shape[0] != m:
                raise ValueError(f"X has {X.shape[0]} rows, the labels have {m}.")
            n = _basis_size(n_basis, n_pos, m)
            rare, rest = np.flatnonzero(pos), np.flatnonzero(~pos)
            if n <= n_pos:
                return rare[kmeanspp(X[rare], n, key=key)]
            rows = np.concatenate([rare, rest])
            return rows[kmeanspp(X[rows], n, key=key, fixed=n_pos)]
        raise ValueError(
            f"unknown basis {basis!r}; use one of {', '.join(map(repr, _STRATEGIES))} or an "
            "array of row indices."
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


#: Smallest basis of ``basis="auto"`` (docs/design.md §10; measured in
#: ``bench/keel_wide_tune.py``).
AUTO_MIN_BASIS = 256

#: Most rare rows ``basis="auto"`` keeps: a larger rare class is thinned to this many by
#: k-means++, so that the search costs ``O(m)`` per product, not ``O(m·m+)`` (docs/design.md §10;
#: measured in ``bench/real_tabular.py``).
AUTO_MAX_BASIS = 512


def auto_basis_size(
    m: int, n_pos: int, min_basis: int = AUTO_MIN_BASIS, max_basis: int | None = AUTO_MAX_BASIS
) -> int:
    """``|R| = max(min(m+, max_basis), min(m, min_basis))``: the size of the auto basis.

    See :func:`auto_basis`. ``max_basis=None`` keeps every rare row (``|R| = max(m+, min(m,
    min_basis))``); the floor wins over the cap.

    Example:
      >>> from jaxrank.bases import auto_basis_size
      >>> auto_basis_size(10_000, 20), auto_basis_size(10_000, 500), auto_basis_size(100, 10)
      (256, 500, 100)
      >>> auto_basis_size(10_000, 3000), auto_basis_size(10_000, 3000, max_basis=None)
      (512, 3000)
    """
    if isinstance(min_basis, bool) or int(min_basis) != min_basis or min_basis < 1:
        raise ValueError(f"min_basis must be a positive integer, got {min_basis!r}.")
    if max_basis is not None:
        max_basis = check_int(max_basis, "max_basis", 1)
    rare = int(n_pos) if max_basis is None else min(int(n_pos), int(max_basis))
    return max(rare, min(int(m), int(min_basis)))


def auto_basis(
    X, y, *, key, min_basis: int = AUTO_MIN_BASIS, max_basis: int | None = AUTO_MAX_BASIS
) -> np.ndarray:
    """The basis that is never starved and never grows with m: rare rows, then landmarks.

    ``|R| = max(min(m+, max_basis), min(m, min_basis))`` (:func:`auto_basis_size`). When ``|R|
    ≥ m+``: every rare row (ascending) first, then majority rows by D² sampling with the rare
    rows as the centres already chosen (:func:`jaxrank.bases.resolve_basis` with
    ``"kmeans++"``); ``min_basis ≤ m+ ≤ max_basis`` gives RankRC's basis (the rare class) and
    ``m ≤ min_basis`` every row (RankSVM's), rare rows first. When ``|R| < m+`` (a rare class
    larger than the cap): ``|R|`` rare rows by k-means++ over the rare rows (ascending), a
    landmark subset of RankRC's basis (seed 003 Sec. 4: the rare rows are the basis that
    minimises the projected-map bound for its size; ``basis="rare"`` keeps them all).

    Args:
      X: ``(m, d)`` training rows.
      y: two-valued labels; the rare class is ``+1``, ``1`` or ``True``.
      key: ``jax.random.key`` for the k-means++ draws (required, as for every random basis).
      min_basis: the floor on ``|R|`` (default :data:`AUTO_MIN_BASIS`).
      max_basis: the cap on the rare rows kept (default :data:`AUTO_MAX_BASIS`; ``None``:
        every rare row).

    Returns:
      ``(|R|,)`` int64 row indices, accepted by :func:`jaxrank.fit` as ``basis=``.

    Example:
      >>> import jax, jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(400, 0.05, 0.75, seed=0)
      >>> idx = auto_basis(X, y, key=jax.random.key(0), min_basis=64)
      >>> idx.size, bool((y[idx[:20]] == 1).all()), bool((y[idx[20:]] != 1).all())
      (64, True, True)
      >>> X, y = jaxrank.datasets.make_rare_class(4000, 0.25, 0.75, seed=0)
      >>> idx = auto_basis(X, y, key=jax.random.key(0))
      >>> idx.size, int((y == 1).sum()), bool((y[idx] == 1).all())
      (512, 1000, True)
    """
    X, pos = check_X_y(X, y)
    return auto_basis_rows(X, pos, key=key, min_basis=min_basis, max_basis=max_basis)


def auto_basis_rows(
    X, pos, *, key, min_basis: int = AUTO_MIN_BASIS, max_basis: int | None = AUTO_MAX_BASIS
) -> np.ndarray:
    """:func:`auto_basis` on rows and a rare-class mask already checked (``check_X_y``): what
    :func:`jaxrank.fit` and the CV search's folds call, so that ``X`` is checked once."""
    check_key(key)
    m, n_pos = pos.size, int(pos.sum())
    n = auto_basis_size(m, n_pos, min_basis, max_basis)
    if n < n_pos:
        rare = np.flatnonzero(pos)
        return np.sort(rare[kmeanspp(X[rare], n, key=key)]).astype(np.int64)
    if n == n_pos:
        return np.flatnonzero(pos).astype(np.int64)
    if n == m:
        return np.concatenate([np.flatnonzero(pos), np.flatnonzero(~pos)]).astype(np.int64)
    return resolve_basis("kmeans++", pos, key=key, n_basis=n, X=X)
