"""Cross-validated search over λ, the Gaussian σ² and the basis policy (``RankRCClassifierCV``).

The engine behind :class:`jaxrank.sklearn.RankRCClassifierCV`. Every fit minimises seed 000's
R-subset objective (eq. 11 with the smoothed hinge of eq. 13; docs/design.md §2). For every
stratified fold (:func:`jaxrank.select.stratified_folds`), basis policy (:data:`POLICIES`; the
``"auto"`` basis ``|R| = max(min(m+, max_basis), min(m, min_basis))`` is
:func:`jaxrank.bases.auto_basis`) and σ² value, the whole λ grid is one call of
:func:`jaxrank.fit` on the warm path (:func:`cv_search`), run on :data:`SEARCH_THREADS` threads
or as batched calls of the pure core (:mod:`jaxrank._cv_core`). Training folds are trimmed to
equal class counts and held-out folds padded to one row count, so every fold reuses the programs
of the first. A rule (:func:`choose`, :data:`RULES`) picks one ``(basis, σ², λ)`` cell of the
``(B, S, L)`` table of mean held-out AUC; the narrow extension (:func:`wants_narrower`,
:func:`search_narrower`, :func:`keep_narrower`) and the edge extension (:func:`search_edges`)
search past the grid where the pick calls for it; :func:`refit` fits the pick on every row.

Design notes and the measurements behind the defaults (the auto basis floor, the σ² grid, the
rule, the threads, the extensions): docs/design.md §10.

Example:
  >>> import numpy as np
  >>> from jaxrank._cv import choose
  >>> mean = np.array([[[0.70, 0.80, 0.80], [0.75, 0.78, 0.60]]])  # (B, S, L) mean AUC
  >>> # the two 0.80 cells tie: the larger λ wins
  >>> choose(mean, np.zeros_like(mean), lams=[0.01, 0.1, 1.0], sigma2s=[1.0, 4.0])
  (0, 0, 2)
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np

from jaxrank import _buckets, _cv_core, _fitting, _random, metrics
from jaxrank import kernels as _kernels
from jaxrank._hostblas import one_blas_thread
from jaxrank._validation import check_binary_labels, check_key, check_lam, check_X, check_X_y
from jaxrank.bases import AUTO_MIN_BASIS, auto_basis, auto_basis_rows, auto_basis_size
from jaxrank.model import ConvergenceWarning
from jaxrank.select import shared_floors, stratified_folds

__all__ = [
    "AUTO_MIN_BASIS",
    "EDGE_DISCARD_FAILED",
    "EDGE_GAIN_SE",
    "EDGE_LAM_STEP",
    "EDGE_MIN_GAIN",
    "EDGE_MIN_SIGMA2_FACTOR",
    "EDGE_SIGMA2_STEP",
    "NARROW_MARGIN_SE",
    "NARROW_MAX_ROWS",
    "NARROW_MIN_BASIS",
    "NARROW_MIN_ROWS",
    "NARROW_RULE",
    "NARROW_STEPS",
    "NARROW_TRIGGER_SE",
    "RULES",
    "SEARCH_THREADS",
    "SEARCH_THREADS_MAX_BLOCK",
    "CVSearch",
    "auto_basis",
    "auto_basis_size",
    "basis_key",
    "check_policies",
    "choose",
    "cv_search",
    "equal_folds",
    "fold_auc",
    "fold_rows",
    "gaussian_kernel",
    "narrow_candidate",
    "narrow_pick",
    "paired_win",
    "pick_of",
    "policy_basis",
    "refit",
    "refit_basis",
    "search_edges",
    "search_floors",
    "search_narrower",
    "wants_narrower",
]

#: The narrow extension (:func:`search_narrower`, docs/design.md §10): sets with at least this many
#: rows ...
NARROW_MIN_ROWS = 512
#: ... and at most this many (the raised floor then holds at least half of the rows) whose pick
#: lands on the narrowest σ² also search narrower ones ...
NARROW_MAX_ROWS = 2048
#: ... or whose narrowest σ² scores within this many standard errors of the pick
#: (:func:`wants_narrower`) ...
NARROW_TRIGGER_SE = 1.0
#: ... at these multiples of the narrowest σ² searched (h/64 below the default h/4) ...
NARROW_STEPS = (1 / 16,)
#: ... with the auto basis floor raised to this (a narrow kernel needs centres near every row).
NARROW_MIN_BASIS = 1024
#: ... and a narrow pick replaces the pick it extends only when it wins on the same folds by more
#: than this many standard errors of the paired fold differences (docs/design.md §10) ...
NARROW_MARGIN_SE = 1.0
#: ... the narrow candidate being the best cell of the new σ² under this rule (the rule the
#: extension was measured with; :func:`narrow_candidate`).
NARROW_RULE = "smooth_grid"

#: The edge extension (:func:`search_edges`): one step multiplies the widest σ² by this ...
EDGE_SIGMA2_STEP = 4.0
#: ... or divides the smallest λ by this ...
EDGE_LAM_STEP = 4.0
#: ... and a further step is taken only while the last one raised the rule's best score by at
#: least this much (AUC; a flat surface stops at once) ...
EDGE_MIN_GAIN = 1e-3
#: ... and by at least this many standard errors of the new pick's fold mean (few rare rows per
#: fold: a noisy rise does not carry the search to the limit).
EDGE_GAIN_SE = 1.0
#: ... and, on a set of more than :data:`NARROW_MAX_ROWS` rows (where the narrow extension does
#: not run; its folds hold enough rare rows that a narrow cell is no lucky one), a pick at the
#: narrowest σ² divides it by the same step, down to this multiple of the σ² heuristic (the
#: narrow extension's reach, h/64) ...
EDGE_MIN_SIGMA2_FACTOR = 1 / 64
#: ... and a step that does not clear that bar is never picked (:attr:`CVSearch.where`): a rise
#: inside the folds' noise is no reason to move there (docs/design.md §10: at m = 3000 such a
#: move to σ² = 64h, λ = 2⁻²⁰ made the search 1.5× slower, its refit 5×), nor may a later choice
#: on the table (the narrow extension's) find its cells; they still score their neighbours, so
#: the pick is made again among the cells before the step with the old edge judged inside.
EDGE_DISCARD_FAILED = True

#: A search runs its fits (one per fold, basis and σ²) on this many threads: one fit's host
#: work (its float64 preconditioner, on one BLAS thread) and Python overlap another's compiled
#: solve (docs/design.md §10) ...
SEARCH_THREADS = 3
#: ... when every fit's kernel block has at most this many bytes; larger fits run one at a
#: time (each solve then uses every core, and memory holds one block at a time).
SEARCH_THREADS_MAX_BLOCK = 2**27

#: How a search fills its table (:func:`cv_search`'s ``engine``): ``"core"``, batched calls of
#: the pure core over folds × σ² (:mod:`jaxrank._cv_core`), or ``"fits"`` (the default), one fit
#: per fold and σ² on :data:`SEARCH_THREADS` threads (also the fallback where the core engine
#: does not apply).
ENGINES = ("fits", "core")
#: Members (fold, σ²) per call of the core engine (``None``: the folds of one σ², which have
#: similar iteration counts: a batched solve lasts as long as its slowest member).
CORE_CHUNK = None

#: Selection rules of :func:`choose`.
RULES = ("max", "one_se", "smooth", "smooth_grid", "smooth_mirror")

#: Basis policies of :func:`cv_search`.
POLICIES = ("rare", "auto", "all")


def gaussian_kernel(sigma2: float, scales=None):
    """The search's Gaussian: isotropic, or with per-column ``scales`` (binary-aware or ARD,
    :class:`jaxrank.kernels.ARDGaussian`)."""
    if scales is None:
        return _kernels.gaussian(float(sigma2))
    return _kernels.ard(float(sigma2), np.asarray(scales, np.float64))


def _policy_basis(policy, X, pos, key, min_basis: int):
    if policy == "rare":
        return np.flatnonzero(pos).astype(np.int64)
    if policy == "all":
        return np.arange(pos.size, dtype=np.int64)
    return auto_basis_rows(X, pos, key=key, min_basis=min_basis)  # X, pos: checked by the search


def basis_key(key):
    """The key a search (and its refit) draws the basis of each fold with."""
    return _random.split(key, 3)[2]


def equal_folds(fold: np.ndarray, pos: np.ndarray, *, key) -> list[np.ndarray]:
    """Training rows of each fold, trimmed so every fold trains on the same class counts.

    A stratified fold holds ``⌊n_c/k⌋`` or ``⌈n_c/k⌉`` rows of class ``c``, so the training
    sets differ by one row per class; a fold with one row more than the smallest drops one,
    drawn with ``key``. Every fold then has the same shapes (one compilation for all folds).

    Returns:
      ``k`` sorted int64 arrays of training-row indices.
    """
    k = int(fold.max()) + 1
    perm = _random.permutation(key, pos.size)
    out = []
    target = {c: min(int(np.sum((fold != f) & (pos == c))) for f in range(k)) for c in (0, 1)}
    for f in range(k):
        keep = []
        for c in (0, 1):
            rows = perm[(fold[perm] != f) & (pos[perm] == c)]
            keep.append(rows[: target[c]])
        out.append(np.sort(np.concatenate(keep)).astype(np.int64))
    return out


def fold_rows(pos: np.ndarray, folds: int, *, key) -> tuple[list, list]:
    """The training rows (:func:`equal_folds`) and held-out rows of each fold of a search with
    ``key``, exactly as :func:`cv_search` draws them.

    Returns:
      ``(train, held)``: two lists of ``folds`` sorted int64 index arrays.
    """
    k_fold, k_trim, _ = _random.split(key, 3)
    fold = stratified_folds(pos, folds, key=k_fold)
    held = [np.flatnonzero(fold == f) for f in range(folds)]
    return equal_folds(fold, pos, key=k_trim), held


def policy_basis(policy: str, min_basis: int = AUTO_MIN_BASIS):
    """``f(X, pos, key) -> indices``: the basis of ``policy`` on given rows (as a search draws
    it for a fold)."""
    check_policies((policy,))
    return lambda X, pos, key: _policy_basis(policy, X, pos, key, min_basis)


def _smooth(mean: np.ndarray) -> np.ndarray:
    """Average of each λ with its neighbours along the last axis (two at the ends)."""
    pad = np.concatenate([mean[..., :1], mean, mean[..., -1:]], axis=-1)
    s = pad[..., :-2] + pad[..., 1:-1] + pad[..., 2:]
    n = np.full(mean.shape[-1], 3.0)
    if n.size > 1:
        # at the ends the pad copies the end value: count it once, not twice
        s[..., 0] -= mean[..., 0]
        s[..., -1] -= mean[..., -1]
        n[0] = n[-1] = 2.0
    else:
        s = s - 2 * mean
        n[:] = 1.0
    return s / n


def _smooth_grid(mean: np.ndarray) -> np.ndarray:
    """Mean of each cell with its neighbours along σ² and λ (a 3×3 box; fewer at the edges)."""
    S, L = mean.shape[-2:]
    pad = np.pad(mean, [(0, 0)] * (mean.ndim - 2) + [(1, 1), (1, 1)])
    ones = np.pad(np.ones((S, L)), 1)
    total = sum(pad[..., i : i + S, j : j + L] for i in range(3) for j in range(3))
    count = sum(ones[i : i + S, j : j + L] for i in range(3) for j in range(3))
    return total / count


def _smooth_mirror(mean: np.ndarray) -> np.ndarray:
    """Mean of each cell's 3×3 box along σ² and λ, the table mirrored at its edges.

    Every cell averages nine values, so an edge or corner cell is not judged on fewer (and so
    noisier, more often maximal) cells than an interior one: :func:`_smooth_grid`'s corner box
    averages four cells, and on real data its maximum lands on the corner of the grid even where
    the CV surface peaks inside it (docs/choosing-a-model.md). The mirror weighs an edge cell's
    inner neighbours twice: along one axis, with ``e`` the edge cell, ``i`` its inner neighbour
    and ``p`` the next, the edge beats ``i`` when ``i > p``, where the surface rises towards
    the edge and also where it peaks at ``i``. At the wide σ² and small λ edges
    :func:`search_edges` then searches past the edge; a step that finds nothing better leaves
    its cells as data, so the old edge is judged as an inner cell (docs/design.md §10)."""
    S, L = mean.shape[-2:]
    mode = [(0, 0)] * (mean.ndim - 2) + [(1, 1) if S > 1 else (0, 0), (1, 1) if L > 1 else (0, 0)]
    pad = np.pad(mean, mode, mode="reflect")
    if S == 1:
        pad = np.concatenate([pad, pad, pad], axis=-2)
    if L == 1:
        pad = np.concatenate([pad, pad, pad], axis=-1)
    return sum(pad[..., i : i + S, j : j + L] for i in range(3) for j in range(3)) / 9.0


def _rule_score(mean: np.ndarray, rule: str) -> np.ndarray:
    """The table a rule maximises: the mean itself, or its smoothed version."""
    smooth = {"smooth": _smooth, "smooth_grid": _smooth_grid, "smooth_mirror": _smooth_mirror}
    return smooth.get(rule, lambda a: a)(mean)


def choose(mean, se, lams, sigma2s, rule: str = "max", where=None) -> tuple[int, int, int]:
    """The chosen ``(basis, σ², λ)`` index into a CV table of shape ``(B, S, L)``.

    Rules (docs/design.md §10): ``"max"`` the largest mean AUC; ``"one_se"`` the largest λ
    whose mean is within one standard error of the largest mean (``mean ≥ max − se[argmax]``);
    ``"smooth"`` the largest mean of the λ-curve averaged with its neighbours; ``"smooth_grid"``
    the largest mean of the (σ², λ) table averaged over each cell's neighbours in both
    directions (a 3×3 box, fewer cells at the edges; per basis policy); ``"smooth_mirror"``
    the same box with the table mirrored at its edges, so every cell averages nine
    (:func:`_smooth_mirror`: no bias towards the corners). Ties go to the
    larger λ, then the larger σ² (the smoother model), then the earlier basis policy.

    Args:
      mean, se: ``(B, S, L)`` mean held-out AUC and its standard error over the folds.
      lams: ``(L,)`` λ grid; ``sigma2s``: ``(S,)`` σ² values.
      rule: one of :data:`RULES`.
      where: ``(B, S, L)`` bool, the cells that may be picked (``None``: all). The others still
        count in their neighbours' smoothed scores (:attr:`CVSearch.where`).

    Returns:
      ``(b, s, l)``.
    """
    mean = np.asarray(mean, np.float64)
    se = np.nan_to_num(np.asarray(se, np.float64))
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}.")
    if mean.ndim != 3 or np.isnan(mean).any():
        raise ValueError(f"the CV table must be a finite (B, S, L) array, got shape {mean.shape}.")
    ok = np.ones(mean.shape, bool) if where is None else np.asarray(where, bool)
    if ok.shape != mean.shape or not ok.any():
        raise ValueError(f"where must be a {mean.shape} bool array with a True cell.")
    score = _rule_score(mean, rule)
    best = score[ok].max()
    if rule == "one_se":
        b, s, j = np.unravel_index(np.argmax(np.where(ok, mean, -np.inf)), mean.shape)
        cand = np.argwhere((mean >= mean[b, s, j] - se[b, s, j]) & ok)
    else:
        # equal up to rounding of the fold means (a flat plateau is flat exactly in AUC)
        cand = np.argwhere((score >= best - 1e-12) & ok)
    lam = np.asarray(lams, np.float64)[cand[:, 2]]
    s2 = np.asarray(sigma2s, np.float64)[cand[:, 1]]
    # lexsort: last key primary — larger λ, then larger σ², then the earlier basis
    i = np.lexsort((-cand[:, 0], s2, lam))[-1]
    return tuple(int(v) for v in cand[i])


class CVSearch(NamedTuple):
    """The table of :func:`cv_search` (B basis policies, S σ² values, k folds, L λ values).

    Attributes:
      policies: the B basis policies searched.
      n_basis: ``(B,)`` basis size of each policy on the full training rows.
      sigma2s: ``(S,)`` absolute σ² values (``factors × heuristic``).
      lams: ``(L,)`` λ grid.
      cv_auc: ``(B, S, k, L)`` held-out AUC (float64).
      mean_auc, se_auc: ``(B, S, L)`` mean over folds and its standard error (std/√k).
      fit_seconds: wall time of the search (all fits and scorings, compilation included).
      min_basis: ``(S,)`` the auto basis floor each σ² was searched with (``None``: the
        ``min_basis`` of the call for every σ²); ``n_basis`` is the basis at the smallest.
      where: ``(B, S, L)`` bool, the cells a rule may pick (``None``: every cell). An edge step
        that did not count (:func:`search_edges`) leaves its cells here as ``False``: their
        AUC still enters the smoothed scores of their neighbours, so the edge it probed is
        judged as an inner cell, but they are never picked (:func:`pick_of`).
    """

    policies: tuple
    n_basis: np.ndarray
    sigma2s: np.ndarray
    lams: np.ndarray
    cv_auc: np.ndarray
    mean_auc: np.ndarray
    se_auc: np.ndarray
    fit_seconds: float
    min_basis: np.ndarray | None = None
    where: np.ndarray | None = None


def pick_of(search: CVSearch, rule: str) -> tuple[int, int, int]:
    """``rule``'s pick (:func:`choose`) on ``search``, among the cells of its ``where``."""
    return choose(search.mean_auc, search.se_auc, search.lams, search.sigma2s, rule,
                  where=search.where)  # fmt: skip


def _where(search: CVSearch) -> np.ndarray:
    """``search.where`` as a ``(B, S, L)`` bool array (``None``: every cell)."""
    shape = np.shape(search.mean_auc)
    return np.ones(shape, bool) if search.where is None else np.asarray(search.where, bool)


def check_policies(policies) -> tuple:
    if isinstance(policies, str):
        policies = (policies,)
    policies = tuple(policies)
    if not policies:
        raise ValueError("basis must name at least one policy.")
    for p in policies:
        if not isinstance(p, str) or p not in POLICIES:
            raise ValueError(f"basis policies must be among {POLICIES}, got {p!r}.")
    if len(set(policies)) != len(policies):
        raise ValueError(f"basis policies repeat: {policies!r}.")
    return policies


def cv_search(
    X,
    y,
    *,
    lams,
    sigma2s,
    policies: Sequence[str] = ("auto",),
    folds: int = 5,
    key,
    min_basis: int = AUTO_MIN_BASIS,
    scales=None,
    engine: str = "fits",
    **fit_kwargs: Any,
) -> CVSearch:
    """Held-out AUC of every (basis policy, σ², λ) by stratified k-fold CV, λ batched.

    For each fold, policy and σ², one :func:`jaxrank.fit` call fits the whole λ grid
    (Gaussian kernel ``exp(−||u − v||²/σ²)``) on the fold's training rows and scores its
    held-out rows. Training folds are trimmed to equal class counts (:func:`equal_folds`) and
    held-out folds padded to one size, so all folds share compiled programs. A policy whose
    basis coincides with an earlier one's on every fold (``"auto"`` when ``min_basis ≤ m+ ≤
    max_basis``) is not refitted: its rows of the table are copied.

    Args:
      X: ``(m, d)`` rows; ``y``: two-valued labels, rare class ``+1``/``1``/``True``.
      lams: the λ grid; ``sigma2s``: absolute σ² values.
      policies: basis policies, among ``"rare"``, ``"auto"`` (:func:`auto_basis`), ``"all"``.
      folds: ``k``, ``2 ≤ k ≤ min(m+, m−)``.
      key: ``jax.random.key`` (folds, trimming, k-means++ landmarks).
      min_basis: the auto basis floor.
      scales: ``(d,)`` per-column scales of the Gaussian (:func:`gaussian_kernel`; ``None``:
        isotropic).
      engine: how the table is filled (:data:`ENGINES`): ``"fits"``, one fit per fold and σ²
        on threads, or ``"core"``, batched calls of the pure core (isotropic kernels only; the
        fits otherwise).
      **fit_kwargs: the options of every fit (:func:`fit_cell`: ``dtype``, ``tol``, ``eps``,
        ...).

    Returns:
      A :class:`CVSearch`.
    """
    t0 = time.perf_counter()
    # the warm path by default (docs/design.md §10: 5-9x faster than the batched grid here, and the
    # smallest λ end CONVERGED instead of MAX_ITER)
    fit_kwargs = {"path": "warm", "chains": 1, **fit_kwargs}
    X, pos = check_X_y(X, y)
    grid, _ = check_lam(lams)
    policies = check_policies(policies)
    s2 = np.atleast_1d(np.asarray(sigma2s, np.float64))
    if s2.ndim != 1 or s2.size == 0 or not np.all(np.isfinite(s2) & (s2 > 0)):
        raise ValueError(f"sigma2s must be a non-empty 1-D array of values > 0, got {sigma2s!r}.")
    check_key(key)
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}.")
    k_basis = basis_key(key)
    train, held = fold_rows(pos, folds, key=key)
    # held-out rows padded to a bucket: sets of similar sizes share the scoring programs
    n_held = _buckets.bucket(max(h.size for h in held))
    cv = np.empty((len(policies), s2.size, folds, grid.size), np.float64)
    with search_floors(pos, policies, grid.size, min_basis, fit_kwargs.get("dtype")):
        _search_folds(X, pos, train, held, n_held, policies, s2, grid, k_basis, min_basis, cv,
                      fit_kwargs, scales, engine)  # fmt: skip
    n_basis = np.array(
        [_policy_basis(p, X, pos, k_basis, min_basis).size for p in policies], np.int64
    )
    mean = cv.mean(axis=2)
    se = cv.std(axis=2, ddof=1) / math.sqrt(folds)
    return CVSearch(
        policies=policies, n_basis=n_basis, sigma2s=s2, lams=grid, cv_auc=cv, mean_auc=mean,
        se_auc=se, fit_seconds=time.perf_counter() - t0,
        min_basis=np.full(s2.size, int(min_basis), np.int64),
    )  # fmt: skip


def wants_narrower(
    search: CVSearch, pick: tuple, rule: str = "smooth_grid",
    trigger_se: float | None = NARROW_TRIGGER_SE,
) -> bool:  # fmt: skip
    """Whether ``pick`` calls for the narrow extension (:func:`search_narrower`).

    It does when its σ² is the narrowest searched, or (``trigger_se`` not ``None``) when the
    narrowest σ²'s best score under ``rule`` (what :func:`choose` maximises, e.g. the 3×3
    average of ``"smooth_grid"``) is within ``trigger_se`` standard errors of the pick's,
    ``score(pick) − max score(narrowest σ²) ≤ trigger_se · se(pick)``: the folds cannot tell
    the narrowest kernel from the pick, so a narrower one may be the better model (module
    notes).

    Args:
      search: a :func:`cv_search` table; ``pick``: ``(b, s, j)`` into it; ``rule``: the rule
        that picked it.
      trigger_se: the margin in standard errors; ``None``: only a pick at the narrowest σ².
    """
    b, s, j = pick
    s2 = np.asarray(search.sigma2s, np.float64)
    if s2[s] <= s2.min():
        return True
    if trigger_se is None:
        return False
    score = np.where(_where(search), _rule_score(np.asarray(search.mean_auc, np.float64), rule),
                     -np.inf)  # fmt: skip
    gap = score[b, s, j] - score[:, int(np.argmin(s2)), :].max()
    return bool(gap <= trigger_se * float(np.nan_to_num(search.se_auc[b, s, j])))


def search_narrower(
    X,
    y,
    search: CVSearch,
    pick: tuple,
    *,
    folds: int,
    key,
    rule: str = "smooth_grid",
    trigger_se: float | None = NARROW_TRIGGER_SE,
    min_rows: int = NARROW_MIN_ROWS,
    max_rows: int = NARROW_MAX_ROWS,
    steps: Sequence[float] = NARROW_STEPS,
    narrow_basis: int = NARROW_MIN_BASIS,
    **fit_kwargs: Any,
) -> CVSearch:
    """``search`` with narrower σ² added when its pick calls for them (docs/design.md §10).

    On a set of ``min_rows`` to ``max_rows`` rows searched with two or more σ², whose ``pick``
    calls for the extension (:func:`wants_narrower` with ``rule`` and ``trigger_se``),
    σ² = ``steps`` × the narrowest σ² are searched too, with the same folds (same ``key``) and
    the auto basis floor raised to ``narrow_basis``, and their rows are put before the others
    (:attr:`CVSearch.min_basis` says which floor each σ² used). Otherwise ``search`` is
    returned unchanged. The choice is then made again on the merged table
    (:func:`keep_narrower`).

    Args:
      X, y: the rows and labels searched; ``search``: the :func:`cv_search` result on them.
      pick: ``(b, s, j)``, the choice of ``rule`` in ``search``.
      folds, key, **fit_kwargs: as passed to that :func:`cv_search` (``min_basis`` included).
      rule, trigger_se, min_rows, max_rows, steps, narrow_basis: the extension's rule
        (defaults: the module constants).

    Returns:
      A :class:`CVSearch` (``fit_seconds`` adds both searches).
    """
    X, pos = check_X_y(X, y)
    s2 = np.asarray(search.sigma2s, np.float64)
    if not min_rows <= pos.size <= max_rows or s2.size < 2:
        return search
    if not wants_narrower(search, pick, rule, trigger_se):
        return search
    steps = np.asarray(steps, np.float64)
    if steps.ndim != 1 or steps.size == 0 or not np.all((steps > 0) & (steps < 1)):
        raise ValueError(f"steps must be a non-empty 1-D list of values in (0, 1), got {steps!r}.")
    floor = max(int(fit_kwargs.pop("min_basis", AUTO_MIN_BASIS)), int(narrow_basis))
    ext = cv_search(X, pos, lams=search.lams, sigma2s=s2.min() * np.sort(steps),
                    policies=search.policies, folds=folds, key=key, min_basis=floor,
                    **fit_kwargs)  # fmt: skip
    # prepended: all below the narrowest searched, ascending, so a σ² grid given in ascending
    # order stays ascending (the neighbourhoods of "smooth_grid" follow the table's order)
    return search._replace(
        **{f: np.concatenate([getattr(ext, f), getattr(search, f)], axis=1)
           for f in ("cv_auc", "mean_auc", "se_auc")},
        where=None if search.where is None else np.concatenate([_where(ext), search.where], 1),
        sigma2s=np.concatenate([ext.sigma2s, s2]),
        min_basis=np.concatenate([ext.min_basis, search.min_basis]),
        fit_seconds=search.fit_seconds + ext.fit_seconds,
    )  # fmt: skip


def narrow_candidate(search: CVSearch, n_new: int, rule: str = NARROW_RULE) -> tuple[int, int, int]:
    """The best cell among the first ``n_new`` σ² of a :func:`search_narrower` table under
    ``rule`` (scored on the whole merged table, so its neighbours count): what
    :func:`keep_narrower` weighs against the pick before the extension.

    Whatever rule chose that pick, the candidate is judged under :data:`NARROW_RULE`: under
    ``"smooth_mirror"`` a narrow row at the table's edge is averaged with its wider neighbour
    counted twice and almost never wins, even where the narrow kernel is clearly better
    (winequality-white-3_vs_7: 88.7 against 92.7 test AUC, docs/design.md §10).
    """
    score = _rule_score(np.asarray(search.mean_auc, np.float64), rule)[:, :n_new]
    b, s, j = np.unravel_index(int(np.argmax(score)), score.shape)
    return int(b), int(s), int(j)


def keep_narrower(
    search: CVSearch, base: tuple, pick: tuple, n_new: int, margin_se: float = NARROW_MARGIN_SE
) -> tuple[int, int, int]:
    """The pick on a :func:`search_narrower` table: the narrow one only if it clearly wins.

    ``pick`` is the rule's choice on the merged table, ``base`` the choice ``(b, s, j)`` on the
    table before the ``n_new`` narrower σ² were put in front. A pick among the new σ² is kept
    only when its held-out AUC beats the base pick's on the same folds by more than
    ``margin_se`` standard errors of the paired differences, ``mean(d) > margin_se ·
    std(d)/√k`` with ``d_f = AUC_f(pick) − AUC_f(base)``; otherwise the base pick stands
    (docs/design.md §10: a narrow kernel is the riskier model, and with 3-4 rare rows per held-out
    fold one lucky fold can carry it).

    Returns:
      ``(b, s, j)`` into the merged table.
    """
    b0, s0, j0 = base
    s0 += n_new
    if pick[1] >= n_new:
        return pick
    base = (b0, s0, j0)
    return pick if paired_win(fold_auc(search, pick), fold_auc(search, base), margin_se) else base


def fold_auc(search: CVSearch, pick: tuple) -> np.ndarray:
    """``(k,)`` held-out AUC of cell ``pick = (b, s, j)`` on each fold of ``search``."""
    return search.cv_auc[pick[0], pick[1], :, pick[2]]


def paired_win(auc_a, auc_b, margin_se: float) -> bool:
    """Whether ``a`` beats ``b`` on the same folds by more than ``margin_se`` standard errors of
    the paired differences: ``mean(d) > max(0, margin_se · std(d)/√k)``, ``d = auc_a − auc_b``
    (``(k,)`` held-out AUC per fold). A choice between two searches maximised on the same
    folds favours the noisier one; the margin asks for a win the folds agree on."""
    d = np.asarray(auc_a, np.float64) - np.asarray(auc_b, np.float64)
    se = d.std(ddof=1) / math.sqrt(d.size) if d.size > 1 else 0.0
    return bool(d.mean() > margin_se * se and d.mean() > 0)


def narrow_pick(
    search: CVSearch, base: tuple, n_new: int, rule: str, margin_se: float = NARROW_MARGIN_SE
) -> tuple[int, int, int]:
    """The pick on a :func:`search_narrower` table with ``n_new`` new σ² in front.

    The reference is ``rule``'s pick on the merged table where it lies among the old σ² (the
    new row changes the neighbourhoods of the old narrowest one), else ``base``, the pick
    before the extension; the best new cell (:func:`narrow_candidate`) replaces it only when
    it wins on the same folds by more than ``margin_se`` standard errors (:func:`keep_narrower`).
    Under ``"smooth_grid"`` this is the rule's pick on the merged table, kept as
    :func:`keep_narrower` says.

    Returns:
      ``(b, s, j)`` into the merged table.
    """
    merged = pick_of(search, rule)
    ref = (merged[0], merged[1] - n_new, merged[2]) if merged[1] >= n_new else tuple(base)
    return keep_narrower(search, ref, narrow_candidate(search, n_new), n_new, margin_se)


def _merge(search: CVSearch, ext: CVSearch, axis: str) -> CVSearch:
    """``search`` with ``ext``'s σ² rows (``axis="sigma2"``) or λ columns (``"lam"``) added,
    the merged axis sorted ascending (the neighbourhoods of the smoothing rules follow it)."""
    masked = search.where is not None or ext.where is not None
    if axis == "sigma2":
        s2 = np.concatenate([search.sigma2s, ext.sigma2s])
        o = np.argsort(s2, kind="stable")
        cat = lambda f: np.concatenate([getattr(search, f), getattr(ext, f)], axis=1)[:, o]
        where = np.concatenate([_where(search), _where(ext)], axis=1)[:, o] if masked else None
        return search._replace(
            cv_auc=cat("cv_auc"), mean_auc=cat("mean_auc"), se_auc=cat("se_auc"), sigma2s=s2[o],
            where=where,
            min_basis=np.concatenate([search.min_basis, ext.min_basis])[o],
            fit_seconds=search.fit_seconds + ext.fit_seconds,
        )  # fmt: skip
    lams = np.concatenate([search.lams, ext.lams])
    o = np.argsort(lams, kind="stable")
    cat = lambda f: np.concatenate([getattr(search, f), getattr(ext, f)], axis=-1)[..., o]
    where = np.concatenate([_where(search), _where(ext)], axis=-1)[..., o] if masked else None
    return search._replace(
        cv_auc=cat("cv_auc"), mean_auc=cat("mean_auc"), se_auc=cat("se_auc"), lams=lams[o],
        where=where, fit_seconds=search.fit_seconds + ext.fit_seconds,
    )  # fmt: skip


def search_edges(
    X,
    y,
    search: CVSearch,
    pick: tuple,
    *,
    folds: int,
    key,
    rule: str = "smooth_mirror",
    max_sigma2: float,
    min_lam: float,
    min_sigma2: float | None = None,
    sigma2_step: float = EDGE_SIGMA2_STEP,
    lam_step: float = EDGE_LAM_STEP,
    min_gain: float = EDGE_MIN_GAIN,
    gain_se: float = EDGE_GAIN_SE,
    discard_failed: bool = EDGE_DISCARD_FAILED,
    scales=None,
    **fit_kwargs: Any,
) -> tuple[CVSearch, tuple[int, int, int]]:
    """Extend the table past the edge its pick lies on until the pick is inside or a limit.

    While the rule's pick (:func:`choose`) is at the widest σ² searched and ``σ² · sigma2_step
    ≤ max_sigma2``, σ² = widest × ``sigma2_step`` is searched (same folds, ``key`` and basis
    floor); while it is at the narrowest σ² and ``σ² / sigma2_step ≥ min_sigma2`` (``None``:
    never), σ² = narrowest / ``sigma2_step`` likewise; while it is at the smallest λ and ``λ /
    lam_step ≥ min_lam``, λ = smallest / ``lam_step`` is searched for every σ² (each σ² with the
    floor it was searched with). The
    choice is made again on each merged table; a step counts only when it raised the rule's best
    score by at least ``max(min_gain, gain_se · se)``: then a further step may follow; otherwise
    the search stops there and (``discard_failed``) that step's cells are never picked
    (:attr:`CVSearch.where`): they stay in the table as data, so the edge they lie past is now
    judged by its true neighbours (under ``"smooth_mirror"`` an edge cell's box counts its inner
    neighbour twice, which favours the edge wherever the surface peaks one step inside it), and
    the pick is the rule's best among the cells before the step (on a flat surface one step
    shows that the edge holds nothing better). The rule's pick on the returned table
    (:func:`pick_of`) is the returned pick. The
    large-λ end needs no extension: the CV curve is exactly flat there (docs/design.md §10).
    On sets of :data:`NARROW_MIN_ROWS` to :data:`NARROW_MAX_ROWS` rows the narrow end has its
    own rule (:func:`search_narrower`: a larger basis, a margin).

    Args:
      X, y: the rows and labels searched; ``search``: the :func:`cv_search` table on them and
        ``pick`` its choice under ``rule``.
      folds, key, scales, **fit_kwargs: as passed to that :func:`cv_search` (``min_basis``
        included).
      max_sigma2, min_lam, min_sigma2: the limits (absolute values; ``min_sigma2=None``: no
        step below the narrowest σ²).
      sigma2_step, lam_step: the factors of one extension step (> 1).
      min_gain, gain_se: a step counts only when it raised the rule's best score by at least
        ``max(min_gain, gain_se · se)``, ``se`` the new pick's standard error.
      discard_failed: a step that does not count is never picked; the pick is the rule's best
        among the cells before it, scored on the merged table (``False``: the pick moves to the
        merged table's best cell all the same).

    Returns:
      ``(search, pick)``: the merged table and the pick on it.
    """
    X, pos = check_X_y(X, y)
    floor = int(fit_kwargs.pop("min_basis", AUTO_MIN_BASIS))
    opts = dict(policies=search.policies, folds=folds, key=key, scales=scales, **fit_kwargs)
    best = _rule_score(np.asarray(search.mean_auc, np.float64), rule).max()
    while True:
        _, s, j = pick
        prior = search
        s2, lams = np.asarray(search.sigma2s), np.asarray(search.lams)
        wider = s2.max() * sigma2_step
        narrower = s2.min() / sigma2_step
        if s2[s] >= s2.max() and wider <= max_sigma2 * (1 + 1e-9):
            step = wider
        elif (min_sigma2 is not None and s2[s] <= s2.min()
              and narrower >= min_sigma2 * (1 - 1e-9)):  # fmt: skip
            step = narrower
        else:
            step = None
        if step is not None:
            ext = cv_search(X, pos, lams=lams, sigma2s=[step], min_basis=floor, **opts)
            search = _merge(search, ext, "sigma2")
        elif lams[j] <= lams.min() and lams.min() / lam_step >= min_lam * (1 - 1e-9):
            new = [lams.min() / lam_step]
            parts = []
            for f in np.unique(search.min_basis):
                rows = np.flatnonzero(search.min_basis == f)
                # the grid's size, filled with copies of the new λ: the search's compiled
                # program (a copy after the first costs one evaluation on the warm path)
                part = cv_search(X, pos, lams=np.full(lams.size, new[0]), sigma2s=s2[rows],
                                 min_basis=int(f), **opts)  # fmt: skip
                parts.append((rows, part._replace(cv_auc=part.cv_auc[..., :1],
                                                  mean_auc=part.mean_auc[..., :1],
                                                  se_auc=part.se_auc[..., :1])))  # fmt: skip
            shape = (*search.cv_auc.shape[:3], 1)
            ext = search._replace(lams=np.asarray(new), cv_auc=np.empty(shape), where=None,
                                  mean_auc=np.empty((*shape[:2], 1)),
                                  se_auc=np.empty((*shape[:2], 1)), fit_seconds=0.0)  # fmt: skip
            for rows, part in parts:
                ext.cv_auc[:, rows] = part.cv_auc
                ext.mean_auc[:, rows] = part.mean_auc
                ext.se_auc[:, rows] = part.se_auc
            ext = ext._replace(fit_seconds=sum(p.fit_seconds for _, p in parts))
            search = _merge(search, ext, "lam")
        else:
            return search, pick
        pick = pick_of(search, rule)
        new_best = _rule_score(np.asarray(search.mean_auc, np.float64), rule).max()
        se = float(np.nan_to_num(search.se_auc[pick]))
        if new_best < best + max(min_gain, gain_se * se):
            if not discard_failed:
                return search, pick
            # a rise inside the noise is no reason to pick the new cells (nor may a later
            # choice on the table, the narrow extension's, find them); but they are data: the
            # edge they lie past is now judged as an inner cell, by its true neighbours rather
            # than the rule's guess beyond the edge (the mirror's twice-counted inner cell)
            ok = _where(search).copy()
            if search.sigma2s.size > prior.sigma2s.size:
                ok[:, np.isin(search.sigma2s, prior.sigma2s, invert=True)] = False
            else:
                ok[..., np.isin(search.lams, prior.lams, invert=True)] = False
            search = search._replace(where=ok)
            return search, pick_of(search, rule)
        best = new_best


def fit_options(X, fit_kwargs: dict) -> _fitting.FitOptions:
    """The options of a search's fits, checked once per search on all its rows
    (:func:`jaxrank._fitting.check_fit_options`): ``fit_kwargs``, the others at
    :data:`jaxrank._fitting.FIT_OPTIONS` (:func:`jaxrank.fit`'s defaults)."""
    return _fitting.check_fit_options(X, **{**_fitting.FIT_OPTIONS, **fit_kwargs})


def fit_cell(X, pos, lams, scalar, *, basis, kernel, options, polish: bool = True):
    """One fit of a search (a cell, or the refit): :func:`jaxrank.fit`'s R-subset fit
    (:func:`jaxrank._fitting.fit_rows` over the biclass rows) on rows, labels and λ the search
    has checked, with its checked ``options`` (:func:`fit_options`): nothing is checked again.
    ``polish`` as in :func:`~jaxrank._fitting.fit_rows` (``False`` for the cells: judged by
    their held-out AUC, they stop after their float32 stage)."""
    order, idx, layout = _fitting.biclass_rows(X, pos, basis, key=None, n_basis=None)
    return _fitting.fit_rows(X, order, idx, lams, scalar, layout, polish=polish,
                             kernel=_kernels.resolve_kernel(kernel, X),
                             **options._asdict())  # fmt: skip


def _search_folds(X, pos, train, held, n_held, policies, s2, grid, k_basis, min_basis, cv,
                  fit_kwargs, scales=None, engine="fits"):  # fmt: skip
    state = _buckets.snapshot()  # the search's floors, carried into the worker threads

    def score(tr, idx, sigma2, Xte, yte, mask):
        # a cell is judged by its held-out AUC: stalled float32 λ are not polished (the refit is)
        with _buckets.carried(state):
            model = fit_cell(X[tr], pos[tr], grid, False, basis=idx, polish=False,
                             kernel=gaussian_kernel(sigma2, scales), options=options)  # fmt: skip
            # model.decision_function without its check of X: the held-out rows are the search's
            Xs = np.asarray(Xte, model.basis.dtype)
            scores = _kernels.stream_matvec(model.kernel, Xs, model.basis, model.coef)
            return np.asarray(metrics.auc(yte, scores, where=mask), np.float64)

    jobs, copies = [], []
    for f in range(len(train)):
        tr, te = train[f], held[f]
        # held-out rows zero-padded to one size (one scoring program); padding masked out
        Xte = np.zeros((n_held, X.shape[1]), X.dtype)
        Xte[: te.size] = X[te]
        yte = np.zeros(n_held, bool)
        yte[: te.size] = pos[te]
        mask = np.arange(n_held) < te.size
        seen = []
        for b, policy in enumerate(policies):
            idx = _policy_basis(policy, X[tr], pos[tr], _random.fold_in(k_basis, f), min_basis)
            same = next((j for j, prev in seen if np.array_equal(prev, idx)), None)
            seen.append((b, idx))
            if same is not None:
                copies.append((b, same, f))
                continue
            jobs += [((b, s, f), (tr, idx, sigma2, Xte, yte, mask)) for s, sigma2 in enumerate(s2)]
    itemsize = np.dtype(fit_kwargs.get("dtype") or np.float32).itemsize
    core = engine == "core" and scales is None  # the core engine: isotropic only
    if core and _core_folds(X, pos, jobs, policies, grid, cv, fit_kwargs):
        for b, same, f in copies:
            cv[b, :, f] = cv[same, :, f]
        return
    options = fit_options(X, fit_kwargs)  # once for every cell
    block = max(a[0].size * max(a[1].size, min_basis) for _, a in jobs) * itemsize
    threads = SEARCH_THREADS if block <= SEARCH_THREADS_MAX_BLOCK else 1
    # the host BLAS pin and the warning filter are process-wide: set here, on the calling
    # thread, they cover the workers while it waits for them (jaxrank._hostblas)
    with one_blas_thread(), warnings.catch_warnings(), ThreadPoolExecutor(threads) as pool:
        # the smallest λ of a wide grid often end PRECISION in float32: expected in a search,
        # and judged by their held-out AUC like every other λ
        warnings.simplefilter("ignore", ConvergenceWarning)
        futures = [pool.submit(score, *a) for _, a in jobs]
        try:
            for ((b, s, f), _), fut in zip(jobs, futures, strict=True):
                cv[b, s, f] = fut.result()
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    for b, same, f in copies:
        cv[b, :, f] = cv[same, :, f]


def _core_folds(X, pos, jobs, policies, grid, cv, fit_kwargs) -> bool:
    """The table of ``jobs`` as batched calls of the core (:mod:`jaxrank._cv_core`): per basis
    policy, every (fold, σ²) a member over the same padded arrays. Returns False (nothing
    done) where that engine does not apply; the loop of fits then runs."""
    floors = _buckets.floors()
    tr0 = jobs[0][1][0]
    n_tr = (int(pos[tr0].sum()), int((~pos[tr0]).sum()))  # equal in every fold (equal_folds)
    groups = floors.get("groups") or (_buckets.bucket(n_tr[0]), _buckets.bucket(n_tr[1]))
    sizes = (max(int(groups[0]), n_tr[0]), max(int(groups[1]), n_tr[1]))
    m, d = X.shape
    m_pad = max(m, sum(sizes))
    for b in range(len(policies)):
        mine = [(key, a) for key, a in jobs if key[0] == b]
        if not mine:
            continue
        nb_max = max(a[1].size for _, a in mine)
        nb_pad = max(int(floors.get("basis") or 0), _buckets.bucket(nb_max))
        if not _cv_core.usable(fit_kwargs, sum(sizes), nb_pad):
            return False
    Xp = np.zeros((m_pad, d), X.dtype)
    Xp[:m] = X
    posp = np.zeros(m_pad, bool)
    posp[:m] = pos
    k = len({key[2] for key, _ in jobs})
    for b in range(len(policies)):
        # members of one σ² side by side: similar iteration counts share a chunk
        mine = sorted(((key, a) for key, a in jobs if key[0] == b), key=lambda ka: ka[0][1:])
        if not mine:
            continue
        nb_pad = max(
            int(floors.get("basis") or 0), _buckets.bucket(max(a[1].size for _, a in mine))
        )
        folds = {key[2]: a for key, a in mine}
        keeps = np.zeros((k, m_pad), bool)
        bases = np.empty((k, nb_pad, d), X.dtype)
        n_basis = np.zeros(k, np.int32)
        Xh, yh, mh = (np.stack([folds[f][i] for f in range(k)]) for i in (3, 4, 5))
        for f in range(k):
            tr, idx = folds[f][0], folds[f][1]
            keeps[f, tr] = True
            rows = X[tr[idx]]
            bases[f] = rows[0]  # padding rows: copies of a real row (as jaxrank.fit pads)
            bases[f, : idx.size] = rows
            n_basis[f] = idx.size
        members = [(key[2], float(a[2])) for key, a in mine]
        auc, status = _cv_core.fold_table(
            Xp, posp, keeps, bases, n_basis, (Xh, yh, mh), members, grid, sizes=sizes,
            fit_kwargs=fit_kwargs, chunk=CORE_CHUNK or k,
        )  # fmt: skip
        for i, (key, _) in enumerate(mine):
            cv[key] = auc[i]
        bad = [
            i for i in range(len(mine)) if np.any(status[i] == 3) or not np.all(np.isfinite(auc[i]))
        ]
        if bad:  # the fit's own error for a NaN member (or its table row, if it has one)
            return False
    return True


def search_floors(pos, policies, n_lams: int, min_basis: int = AUTO_MIN_BASIS, dtype=None):
    """Bucket floors at the whole set's sizes for a search and its refit
    (:func:`jaxrank.select.shared_floors`): every fold, σ² and the refit run one compiled
    solver. The basis floor is the largest basis of ``policies`` on the whole set. Small
    blocks take the power-of-two ladder (``coarse``), so that searches on data sets of many
    sizes share their programs: measured on ``bench/keel_wide.py`` (docs/design.md §10)."""
    m, n_pos = pos.size, int(np.sum(pos))
    sizes = {"rare": n_pos, "all": m, "auto": auto_basis_size(m, n_pos, min_basis)}
    nb = max(sizes[p] for p in check_policies(policies))
    itemsize = np.dtype(dtype if dtype is not None else np.float32).itemsize
    return shared_floors(m, n_pos, nb, n_lams, itemsize, coarse=True)


def refit(X, y, lam, *, policy, sigma2, key, lams, policies=None,
          min_basis: int = AUTO_MIN_BASIS, scales=None, **fit_kwargs):  # fmt: skip
    """The chosen model on all rows, in the search's compiled program.

    The basis is :func:`refit_basis`; the fit runs on the warm path inside the search's floors
    (:func:`search_floors`; ``lams`` and ``policies`` as searched), so a single λ is the
    search's program with every λ slot holding ``lam`` (the copies after the first cost one
    evaluation each) and compiles nothing new. The optimum is the single-λ fit's (same
    objective, same tolerance).

    Returns:
      ``(model, basis_index)``: a :class:`jaxrank.RankModel` for the scalar ``lam``.
    """
    X, pos = check_X_y(X, y)
    check_policies((policy,))
    idx = _policy_basis(policy, X, pos, basis_key(key), min_basis)  # refit_basis, X checked
    opts = {"path": "warm", "chains": 1, **fit_kwargs}
    searched = (policy,) if policies is None else policies
    with search_floors(pos, searched, int(np.size(lams)), min_basis, opts.get("dtype")):
        lam, scalar = check_lam(float(lam))
        model = fit_cell(X, pos, lam, scalar, basis=idx, kernel=gaussian_kernel(sigma2, scales),
                         options=fit_options(X, opts))  # fmt: skip
    return model, idx


def refit_basis(policy: str, X, y, *, key, min_basis: int = AUTO_MIN_BASIS) -> np.ndarray:
    """The basis of ``policy`` on all rows ``(X, y)``, drawn as :func:`cv_search` called with
    the same ``key`` draws it (its ``n_basis`` column): the basis of the refitted model."""
    check_policies((policy,))
    X = check_X(X)
    pos = check_binary_labels(y)
    return _policy_basis(policy, X, pos, basis_key(key), min_basis)
