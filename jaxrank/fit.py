"""Fitting kernel rankers: ``fit``, ``fit_rankrc``, ``fit_ranksvm``.

:func:`fit` is the one entry point for the R-subset objective (seed 000 eq. 11): it resolves the
basis (rare class, all rows, random, auto, greedy, a given subset), the loss and the penalty,
and dispatches — L2 RankRC/RankSVM to :func:`jaxrank._fitting.fit_biclass` (which ends in
:func:`jaxrank._fitting.fit_rows`), the greedy basis to
:func:`jaxrank.greedy.fit_greedy`, the L1 penalty to :func:`jaxrank.l1.fit_l1`, the push loss
to :func:`jaxrank.push.fit_push`. The objective is in :mod:`jaxrank.objective`, the solver
call, preconditioners and row layout in :mod:`jaxrank._fitting` (whose notes give the data
flow), the fitted :class:`~jaxrank.RankModel` in :mod:`jaxrank.model`.
"""

from __future__ import annotations

import math

from jaxrank import distributed as _distributed
from jaxrank import kernels as _kernels
from jaxrank._fitting import (
    DUAL_MIN_COLUMNS,
    PSD_CHECK_MAX_BASIS,
    SHARED_GRID_LAMS,
    SHARED_GRID_MAX_BYTES,
    SPECTRAL_MAX_BASIS,
    STAGED_MIN_BYTES,
    check_max_kernel_bytes,
    check_solver_options,
    fit_biclass,
    fit_rows,
    grid_stages,
    keep_transpose,
    psd_gram,
    resolve_precondition,
)
from jaxrank._validation import check_lam, check_X_y
from jaxrank.bases import auto_basis_rows
from jaxrank.core import require_concrete
from jaxrank.greedy import GREEDY_DEFAULTS, greedy_rows
from jaxrank.l1 import L1_MAX_ITER, L1_PATH, l1_rows
from jaxrank.model import ConvergenceWarning, RankModel
from jaxrank.objective import hessian_diagonal, moment_gram, objective_closures, pair_curvature
from jaxrank.push import push_rows

# Only fit, fit_rankrc and fit_ranksvm are defined here; the other names now live in
# jaxrank._fitting, jaxrank.objective and jaxrank.model and are re-exported, so every public
# name jaxrank.fit had stays importable from it.
__all__ = [
    "DUAL_MIN_COLUMNS",
    "PSD_CHECK_MAX_BASIS",
    "SHARED_GRID_LAMS",
    "SHARED_GRID_MAX_BYTES",
    "SPECTRAL_MAX_BASIS",
    "STAGED_MIN_BYTES",
    "ConvergenceWarning",
    "RankModel",
    "check_max_kernel_bytes",
    "check_solver_options",
    "fit",
    "fit_rankrc",
    "fit_ranksvm",
    "fit_rows",
    "grid_stages",
    "hessian_diagonal",
    "keep_transpose",
    "moment_gram",
    "objective_closures",
    "pair_curvature",
    "psd_gram",
    "resolve_precondition",
]


def fit(
    X,
    y,
    lam,
    *,
    basis="rare",
    loss: str | None = None,
    eps: float = 0.5,
    kernel=None,
    key=None,
    n_basis: int | None = None,
    tol: float = 1e-6,
    max_iter: int = 100,
    max_cg: int = 25,
    path: str = "batch",
    chains: int = 4,
    precondition: str = "auto",
    dtype=None,
    memory_budget: int | None = None,
    init=None,
    max_kernel_bytes: int | None = None,
    penalty: str = "l2",
    p: float | None = None,
) -> RankModel:
    """Fit a kernel ranker maximising a smoothed AUC over the R-subset basis ``basis``.

    Minimises (seed 000 eq. 11 with the smoothed hinge of eq. 13)::

        F(β) = 1/(m+ m−) Σ_{i∈+} Σ_{j∈−} ℓ_ε(f_i − f_j) + (λ/2) βᵀ K_RR β,   f = K_{·R} β

    Args:
      X: ``(m, d)`` training rows, taken as given (no standardisation; put a scaler first).
      y: two-valued labels; the rare class is ``+1``, ``1`` or ``True``.
      lam: λ > 0, or a 1-D grid (one model holding every λ).
      basis: ``"rare"`` (RankRC), ``"all"`` (RankSVM), ``"random"`` (RANK-RND, ``n_basis``
        rows, default m+; needs ``key``) or an int array of row indices.
      basis: also ``"rare_first"`` / ``"kmeans++"`` (Nyström landmarks, ``n_basis`` and ``key``;
        :func:`jaxrank.bases.resolve_basis`) and ``"greedy"``: the sparse basis of seed 001
        grown to ``n_basis`` functions (default ⌈m/10⌉, needs ``key``), squared hinge unless
        ``loss`` is given
        (:func:`jaxrank.greedy.fit_greedy`, which has the greedy options).
      basis: also ``"auto"``: every rare row, grown by majority-class k-means++ landmarks to
        ``|R| = max(min(m+, 512), min(m, n_basis))`` (``n_basis`` default 256; a rare class of
        more than 512 rows thinned to 512 by k-means++; needs ``key``), the basis
        :class:`jaxrank.sklearn.RankRCClassifierCV` uses (:func:`jaxrank.bases.auto_basis`,
        where the rule and its measurements are written down).
      loss: ``"smoothed_hinge"`` (ε = ``eps``) or ``"squared_hinge"``; default smoothed hinge
        (squared hinge for ``basis="greedy"``).
      eps: ε of the smoothed hinge (paper default 0.5).
      kernel: a kernel object or name; default Gaussian with σ² from
        :func:`~jaxrank.kernels.sigma2_heuristic` on ``X``.
      key: ``jax.random.key`` for random bases.
      n_basis: size of a random basis.
      tol: stop when ``||∇F||_∞ ≤ tol`` (paper: 1e-6).
      max_iter: cap on Newton (trust-region) iterations per λ.
      max_cg: cap on CG iterations per Newton iteration (paper: 25).
      path: ``"batch"`` (vmapped grid, one matrix-matrix product per CG step) or ``"warm"``
        (λ from large to small, each solve warm-started at a previous solution).
      chains: for ``path="warm"``, how many consecutive λ are solved batched per step (each
        warm-started from the solution ``chains`` places before it); ``1`` is the plain
        sequential warm path of seed 000 (footnote 2).
      precondition: ``"spectral"`` (``M = λ(K_RR + δI) + cG``, a model of the Hessian, see
        module notes), ``"cholesky"`` (``M = K_RR + δI``), ``"jacobi"`` (the exact Hessian
        diagonal at each Newton step, seed 000 footnote 2), ``"none"``, or ``"auto"``
        (spectral up to ``SPECTRAL_MAX_BASIS`` basis functions, else cholesky).
      dtype: ``float32`` or ``float64``; default float64 when ``X`` is float64 and x64 is on,
        else float32.
      memory_budget: bytes the kernel block may take (default: 60 % of RAM / 80 % of device
        memory); exceeding it raises :class:`~jaxrank.kernels.MemoryBudgetError` before any
        allocation.
      penalty: ``"l2"`` (the RKHS norm above) or ``"l1"``: ``lam·||β||₁`` instead, exact zeros in
        β (seed 000 extension 1; :func:`jaxrank.l1.fit_l1`, FISTA).
      p: the p-norm push (Rudin 2009; seed 000 extension 2): the loss
        ``Σ_j (Σ_i ℓ(f_i − f_j))^p``, top-weighted for ``p > 1`` (:func:`jaxrank.push.fit_push`).
      max_kernel_bytes: the largest kernel block stored (default: the memory budget); a larger
        block is streamed — recomputed in row chunks for every product (same result, memory
        ``O(m·d)``, one kernel evaluation per product).
      init: optional starting coefficients ``(|R|,)`` or ``(L, |R|)``; with ``path="warm"``
        only the first step's λ start there, later ones from the previous solutions.

    ``X`` and ``y`` may be global arrays split by rows over several processes
    (``jax.distributed``; :func:`jaxrank.distributed.global_rows`): the fit is then
    :func:`jaxrank.distributed.fit`, every process returning the same model
    (``docs/multiprocess.md``).

    Returns:
      A :class:`RankModel`; ``model.info`` holds objective (in the normalisation above),
      gradient norm, Newton and CG iterations and status per λ.

    Raises:
      ValueError: on bad input (NaN/inf, one class, labels not two-valued, length mismatch,
        λ ≤ 0, empty or non-2-D ``X``).
      TypeError: a traced argument (inside ``jax.jit``, ``jax.vmap``, ``jax.grad``): use the pure
        core :func:`jaxrank.core.fit_core` there (docs/core.md).

    Warns:
      ConvergenceWarning: when some λ stopped before ``tol`` (status in ``model.info.status``).

    Example:
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
      >>> model = jaxrank.fit(X, y, [1e-2, 1e-4])
      >>> model.decision_function(X).shape
      (2, 300)
    """
    require_concrete(
        "fit", X=X, y=y, lam=lam, eps=eps, tol=tol, kernel=kernel, init=init, n_basis=n_basis,
        basis=basis, key=key, max_iter=max_iter, max_cg=max_cg, chains=chains, p=p,
        memory_budget=memory_budget, max_kernel_bytes=max_kernel_bytes,
    )  # fmt: skip
    if _distributed.is_global(X):  # rows spread over processes (jaxrank.distributed)
        if penalty != "l2" or p is not None:
            raise ValueError("a multi-process fit supports penalty='l2' without the p-norm push.")
        return _distributed.fit_global(
            X, y, lam, basis=basis, loss=loss or "smoothed_hinge", eps=eps, kernel=kernel,
            key=key, n_basis=n_basis, tol=tol, max_iter=max_iter, max_cg=max_cg, path=path,
            chains=chains, precondition=precondition, dtype=dtype, memory_budget=memory_budget,
            init=init, max_kernel_bytes=max_kernel_bytes,
        )  # fmt: skip
    # the options each fitter shares with fit, in groups: every fitter's, the Newton solver's
    # (not fit_l1's: FISTA), and the biclass fitters' (not fit_greedy's: a grown basis)
    common = dict(kernel=kernel, eps=eps, tol=tol, dtype=dtype, memory_budget=memory_budget)
    newton = dict(
        max_iter=max_iter, max_cg=max_cg, path=path, chains=chains, precondition=precondition
    )
    if penalty not in ("l2", "l1"):
        raise ValueError(f"penalty must be 'l2' or 'l1', got {penalty!r}.")
    if penalty == "l1" and p is not None and not (isinstance(basis, str) and basis == "greedy"):
        raise ValueError("penalty='l1' is not available with the p-norm push.")
    greedy = isinstance(basis, str) and basis == "greedy"
    if greedy:
        if penalty != "l2" or p is not None:
            raise ValueError("basis='greedy' supports neither penalty='l1' nor the p-norm push.")
        if init is not None or max_kernel_bytes is not None:
            raise ValueError(
                "basis='greedy' takes neither init= nor max_kernel_bytes= (the basis is grown)."
            )
    mesh = _kernels.row_mesh(X)
    # X and y checked here, once: every fitter below takes them as checked (its *_rows form)
    X, pos = check_X_y(X, y)
    if greedy:
        if n_basis is None:
            n_basis = max(1, math.ceil(X.shape[0] / 10))
        return greedy_rows(
            X, pos, *check_lam(lam), n_basis=n_basis, key=key, loss=loss or "squared_hinge",
            **GREEDY_DEFAULTS, **newton, **common,
        )  # fmt: skip
    if isinstance(basis, str) and basis == "auto":
        basis = auto_basis_rows(
            X, pos, key=key, **({} if n_basis is None else {"min_basis": n_basis})
        )
        n_basis = None
    rows = dict(basis=basis, loss=loss or "smoothed_hinge", key=key, n_basis=n_basis, init=init)
    if penalty == "l1":
        # seed 000 extension 1: μ||β||₁ in place of the RKHS norm, μ = lam
        return l1_rows(X, pos, 0.0, l1=lam, path=L1_PATH, max_iter=L1_MAX_ITER, **rows, **common)
    lams, scalar = check_lam(lam)
    if p is not None:
        return push_rows(
            X, pos, lams, scalar, p=p, max_kernel_bytes=max_kernel_bytes, **rows, **newton,
            **common,
        )  # fmt: skip
    return fit_biclass(
        X,
        pos,
        lams,
        scalar,
        mesh=mesh,
        max_kernel_bytes=max_kernel_bytes,
        **rows,
        **newton,
        **common,
    )


def fit_rankrc(X, y, lam, **kwargs) -> RankModel:
    """RankRC (seed 000 eq. 13): :func:`fit` with ``basis="rare"``.

    Example:
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
      >>> jaxrank.fit_rankrc(X, y, 1e-3).coef.shape == (30,)
      True
    """
    if "basis" in kwargs:
        raise TypeError("fit_rankrc fixes basis='rare'; use fit(basis=...) for other bases.")
    return fit(X, y, lam, basis="rare", **kwargs)


def fit_ranksvm(X, y, lam, **kwargs) -> RankModel:
    """Kernel RankSVM (seed 000 eq. 6, smoothed): :func:`fit` with ``basis="all"``.

    Needs the full m × m kernel matrix: refused beyond the memory budget.

    Example:
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> model = jaxrank.fit_ranksvm(X, y, 2.0**-4)
      >>> model.basis.shape  # every training row is a basis row
      (200, 5)
    """
    if "basis" in kwargs:
        raise TypeError("fit_ranksvm fixes basis='all'; use fit(basis=...) for other bases.")
    return fit(X, y, lam, basis="all", **kwargs)
