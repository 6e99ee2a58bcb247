"""Shared fitting internals, below every fitter: the biclass row layout, the compiled solver
call, the dtype choice, the preconditioners and row-fitting (:func:`fit_rows`).

:func:`jaxrank.fit` and the other systems' fitters (greedy, L1, push, multi-level, stochastic,
MIBC, DOPMID) build on these; nothing here imports a fitter.
Data flow: ``X, y`` → validation → rows reordered as [positives; negatives] → kernel block
``K_{·R}`` (built once, in row chunks) → for each Newton step: scores ``f = K β`` (one product),
sorted windows (:mod:`jaxrank.pairwise`), gradient ``g_f @ K`` (one product) → truncated CG with
Hessian-vector products ``K v`` and ``h @ K`` reusing the windows → :class:`RankModel`.

A λ grid is solved by ``jax.vmap`` of the single-λ solver with the kernel block unbatched, so
each CG step is one matrix-matrix product for the whole grid (docs/design.md §4), or, with
``path="warm"``, as a ``lax.scan`` from large to small λ, each solve warm-started at the
previous solution (seed 000, footnote 2).

CG is preconditioned (``precondition="spectral"``, the default up to 2048 basis functions) by
a model of the Hessian itself::

    M(λ, c) = λ (K_RR + δI) + c G,   G = mean over pairs (i, j) of (k_i − k_j)(k_i − k_j)ᵀ

where ``k_i`` are rows of ``K_{·R}``: ``G`` is the data Hessian if every pair were on the
quadratic piece of ℓ (= ``C_+ + C_− + (μ_+ − μ_−)(μ_+ − μ_−)ᵀ``, within-class covariances of the
kernel features plus the mean difference), and ``c = ℓ''·(fraction of pairs on the quadratic
piece)`` is read off each Newton step's windows for free. ``G`` is formed once per fit (one
``Kᵀ K`` over at most 16384 rows per class, strided), and one generalized eigendecomposition
``G = (K_RR + δI)^{1/2} Q Λ Qᵀ (K_RR + δI)^{1/2}`` makes ``M(λ, c)⁻¹ = Pᵀ diag(1/(λ + cΛ)) P``
with ``P = Qᵀ L⁻¹`` available for every λ of a grid and every Newton step at the cost of two
small products. The trust region is then ``||s||_M``. Measured (m = 5000, ρ = 2 %, 16-λ grid,
float64): 60 Newton / 127 CG steps against 112 / 1433 with ``M = K_RR + δI``
(``"cholesky"``: the RKHS norm, eigenvalues of ``M⁻¹H`` bounded below by λ but spread by the
data term) — the smallest λ, which dominated, now needs 6 / 24 instead of 24 / 504. The paper's
diagonal preconditioner (seed 000, footnote 2) is ``"jacobi"``; ``"none"`` turns it off.

A float32 fit with the spectral preconditioner stops its float32 solve after
:data:`POLISH_AFTER` Newton steps; the λ still above the tolerance then are finished in float64
and rounded back to float32 in the Hessian model's metric (:func:`polish_float64`: small λ on
low-dimensional data, whose large coefficients make float32 scores too noisy to converge).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import types
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _buckets, _cache, _exported, _linalg
from jaxrank import kernels as _kernels
from jaxrank._hostblas import one_blas_thread as _one_blas_thread
from jaxrank._precision import HIGHEST as _HI
from jaxrank._validation import (
    check_cast,
    check_eps_dtype,
    check_fit_result,
    check_lam_dtype,
    check_positive,
)
from jaxrank.bases import resolve_basis
from jaxrank.losses import get_loss
from jaxrank.model import RankModel, warn_stopped
from jaxrank.objective import moment_gram, objective_closures, pair_curvature
from jaxrank.solver import SolverInfo, Status, trust_ncg, trust_ncg_grid

_mm = functools.partial(jnp.matmul, precision=_HI)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Biclass:
    """Row layout [positives; negatives; padding] of the biclass objective.

    A layout gives the solver ``closures`` and, for the spectral preconditioner, the row
    ``groups``, the group ``pairs`` the loss compares, and the mean ``curvature`` of a step.

    A pytree: the class counts ``n_pos``, ``n_neg`` are its leaves (dynamic: traced inside the
    solver, so one compiled program serves every count), the rows each class occupies,
    ``size_pos`` ≥ ``n_pos`` and ``size_neg`` ≥ ``n_neg``, are static (shape buckets; the
    counts themselves when not given).
    """

    n_pos: Any
    n_neg: Any
    size_pos: int | None = dataclasses.field(default=None, metadata=dict(static=True))
    size_neg: int | None = dataclasses.field(default=None, metadata=dict(static=True))
    #: 1/(m+ m−), formed on the host in float64 (traced, it would be formed in the fit's dtype)
    inv_pairs: Any = None

    def __post_init__(self):
        if self.inv_pairs is None:
            object.__setattr__(self, "inv_pairs", 1.0 / (int(self.n_pos) * int(self.n_neg)))
        if self.size_pos is None:
            object.__setattr__(self, "size_pos", int(self.n_pos))
        if self.size_neg is None:
            object.__setattr__(self, "size_neg", int(self.n_neg))

    @property
    def groups(self) -> tuple[int, ...]:
        return (self.n_pos, self.n_neg)

    @property
    def sizes(self) -> tuple[int, ...]:
        return (self.size_pos, self.size_neg)

    def padded(self, sizes) -> Biclass:
        """This layout (or a subclass's, e.g. the push's) with the classes padded to ``sizes``
        rows."""
        size_pos, size_neg = (int(v) for v in sizes)
        return dataclasses.replace(self, size_pos=size_pos, size_neg=size_neg)

    pairs = ((0, 1),)

    def closures(self, K, Krr, lam, loss, block, jacobi):
        return objective_closures(K, Krr, lam, loss, self.n_pos, self.n_neg, block, jacobi,
                                  sizes=self.sizes, inv_pairs=self.inv_pairs)  # fmt: skip

    def curvature(self, lin, loss):
        return pair_curvature(lin[0], loss, 1 / jnp.asarray(self.inv_pairs, lin[0].sp.dtype))


@functools.partial(
    jax.jit, static_argnames=("block", "path", "chains", "precondition", "stages")
)  # fmt: skip
def solve(K, Krr, chol, lams, beta0, loss, tol, floor, *, layout, block, max_iter, max_cg,
           path, chains, precondition, stages=None):  # fmt: skip
    """The λ-grid solver shared by every R-subset objective; ``layout.closures`` gives
    ``(fun, hvp)`` for one λ (biclass here, multi-level in :mod:`jaxrank.multilevel`).
    ``stages``: batch sizes of the batched path (:func:`~jaxrank.solver.trust_ncg_grid`).

    ``layout`` is a pytree (its counts are traced, its padded sizes static), and λ, ``tol``,
    ``floor``, ``max_iter`` and ``max_cg`` are dynamic: one compiled program per shape bucket
    and option set serves them all."""

    def make(lam):
        fun, hvp = layout.closures(K, Krr, lam, loss, block, precondition == "jacobi")
        if precondition == "cholesky":
            # M⁻¹ r = L⁻ᵀ (L⁻¹ r) with the explicit inverse factor: two small matrix products,
            # which batch over a λ grid (a vmapped triangular solve is ~100x slower on CPU).
            precond = lambda lin, r: _mm(_mm(chol, r), chol)
        elif precondition == "spectral":
            P, ev = chol
            # M(λ, c)⁻¹ r = Pᵀ diag(1/(λ + cΛ)) P r, c from this Newton step's windows
            precond = lambda lin, r: _mm(_mm(P, r) / (lam + layout.curvature(lin, loss) * ev), P)
        elif precondition == "jacobi":
            precond = lambda lin, r: r / lin[1]
        else:
            precond = None
        return fun, hvp, precond

    opts = dict(tol=tol, floor=floor, max_iter=max_iter, max_cg=max_cg)
    if path == "batch":
        return trust_ncg_grid(make, lams, beta0, stages=stages, **opts)

    # Warm path: λ sorted from large to small, cut into steps of `chains` consecutive values;
    # the members of a step are solved batched (similar λ, so similar iteration counts) and
    # each starts from the solution of the member `chains` places before it.
    def single(lam, b0):
        fun, hvp, precond = make(lam)
        return trust_ncg(fun, hvp, b0, precond=precond, **opts)

    def step(b, lam_row):
        if chains == 1:
            beta, info = single(lam_row, b)
        else:
            beta, info = trust_ncg_grid(make, lam_row, b, **opts)
        return beta, (beta, info)

    rows = lams.reshape(-1, chains) if chains > 1 else lams
    start = beta0[:chains] if chains > 1 else beta0[0]
    _, (betas, infos) = jax.lax.scan(step, start, rows)
    flat = lambda a: a.reshape(-1, *a.shape[2:]) if chains > 1 else a
    return flat(betas), jax.tree.map(flat, infos)


#: Smallest kernel block (bytes) for which a batched grid shrinks its batch as λ converge.
STAGED_MIN_BYTES = 2**26

#: Below this kernel block size (bytes) a batched solve pads its λ count to at least
#: :data:`SHARED_GRID_LAMS`, so a single λ and every grid up to 16 values run one compiled
#: solver. Measured (16 copies of one λ against one, m = 1000, |R| = 100, float32, 2 cores):
#: 29 ms against 22 ms per fit, next to 3-5 s for compiling a second solver; at m = 4000
#: (|R| = 400, a 7 MB block) it was 1.2 s against 0.4 s, hence the limit.
SHARED_GRID_MAX_BYTES = 2**21
SHARED_GRID_LAMS = 16


def grid_stages(L: int, block_bytes: int) -> tuple[int, ...] | None:
    """Batch sizes for a batched λ grid of ``L`` values (:func:`~jaxrank.solver.trust_ncg_grid`).

    Shrinking the batch pays where a step's products dominate, i.e. a large kernel block; each
    stage compiles its own copy of the solver loop, so small problems (compile-bound) keep one.
    Sizes fall by 4x down to 2-7 columns: measured at m = 10⁵, |R| = 1000 (16 λ, float32, 2
    CPU cores) the solve took 7.3 s in one stage, 6.2 s in (16, 4), 6.3 s in (16, 4, 1) and
    5.8 s in (16, 8, 4, 2, 1), the last with 9 s more compilation.
    """
    if L < 8 or block_bytes < STAGED_MIN_BYTES:
        return None
    sizes = [L]
    while sizes[-1] >= 8:
        sizes.append(sizes[-1] // 4)
    return tuple(sizes)


def choose_dtype(X: np.ndarray, dtype) -> np.dtype:
    if dtype is not None:
        dtype = np.dtype(dtype)
        if dtype == np.float64 and not jax.config.jax_enable_x64:
            raise ValueError(
                "dtype=float64 needs x64: call jax.config.update('jax_enable_x64', True) first."
            )
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {dtype}.")
        return dtype
    if X.dtype == np.float64 and jax.config.jax_enable_x64:
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def inverse_factor(A: jax.Array, tries: int = 6) -> tuple[jax.Array, jax.Array]:
    """``(L⁻¹, ok)`` with ``L Lᵀ = A + δI``, in JAX (jit-able, vmappable: no host LAPACK).

    The jitter δ is relative to the mean diagonal ``s`` (``1e-8·s`` in float64, ``1e-4·s`` in
    float32) and grown 100-fold until the factor and its inverse are finite (near-duplicate basis
    rows make ``K_RR`` numerically singular, most of all in float32); ``ok`` is False when
    ``tries`` jitters all failed (the factor is then the identity: no preconditioning).
    """
    dt = A.dtype
    n = A.shape[0]
    eye = jnp.eye(n, dtype=dt)
    scale = jnp.mean(jnp.diag(A))
    scale = jnp.where(jnp.isfinite(scale) & (scale > 0), scale, 1)
    jitter0 = (1e-8 if dt == jnp.float64 else 1e-4) * scale

    def attempt(jitter):
        L = _linalg.cholesky(A + jitter * eye)
        Li = _linalg.solve_triangular(L, eye, lower=True)
        return Li, jnp.all(jnp.isfinite(Li))

    def body(st):
        k, _, _ = st
        Li, ok = attempt(jitter0 * jnp.asarray(100.0, dt) ** k.astype(dt))
        return k + 1, Li, ok

    # the initial carry derives from A, so it is as device-varying as A under shard_map
    zero = jnp.zeros_like(A[0, 0])
    st = (zero.astype(jnp.int32), eye + zero, zero.astype(bool))
    _, Li, ok = jax.lax.while_loop(lambda st: (~st[2]) & (st[0] < tries), body, st)
    return jnp.where(ok, Li, eye), ok


def spectral_precond(A: jax.Array, G: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(P, Λ, ok)`` with ``M(λ, c)⁻¹ = Pᵀ diag(1/(λ + cΛ)) P`` for ``M = λ(A + δI) + cG``.

    ``L Lᵀ = A + δI`` (:func:`inverse_factor`) and ``L⁻¹ G L⁻ᵀ = Q Λ Qᵀ`` give
    ``M = L Q (λI + cΛ) Qᵀ Lᵀ`` and ``P = Qᵀ L⁻¹``: one Cholesky and one symmetric eigensolve,
    O(|R|³) once per fit, in JAX and in the fit's dtype, so the preconditioner is part of the
    compiled fit and batches with it under ``jax.vmap`` (over σ², folds, data sets). ``ok`` is
    False when no jitter made ``A`` factorisable or the eigensolve is not finite (then ``P = I``,
    ``Λ = 0``: ``M ∝ I``, no preconditioning).
    """
    Li, ok = inverse_factor(A)
    C = _mm(_mm(Li, G), Li.T)
    ev, Q = _linalg.eigh(0.5 * (C + C.T))
    P = _mm(Q.T, Li)
    ok = ok & jnp.all(jnp.isfinite(P)) & jnp.all(jnp.isfinite(ev)) & jnp.all(jnp.isfinite(G))
    eye = jnp.eye(A.shape[0], dtype=A.dtype)
    return jnp.where(ok, P, eye), jnp.where(ok, jnp.maximum(ev, 0), 0), ok


#: Largest basis whose Gram matrix :func:`psd_gram` checks (a Cholesky per candidate shift,
#: ≈ 1 s at 4096 on 2 cores); a larger ``K_RR`` is used as computed.
PSD_CHECK_MAX_BASIS = 4096


def psd_gram(Krr: jax.Array) -> jax.Array:
    """``K_RR + δI`` with the smallest ``δ ∈ {0, ε·n·s, 10·ε·n·s, …}`` that makes it positive
    definite (``ε`` the dtype's machine epsilon, ``n = |R|``, ``s`` the mean diagonal).

    The regulariser ``λ/2 βᵀ K_RR β`` of seed 000 eq. (11) is convex only if ``K_RR`` is positive
    semi-definite. A Gram matrix is, in exact arithmetic; computed in float32 its rounding error
    can leave eigenvalues of ``−10⁻⁶`` (seen on KEEL page-blocks0, whose standardised features
    reach 39σ), and then the objective is unbounded below along those eigenvectors: the
    trust-region solver follows the negative curvature and ``β`` diverges. The shift is 0 when
    ``K_RR`` factorises as computed, ``≈ 10⁻¹³`` for a numerically singular float64 ``K_RR`` (far
    below any tolerance) and ``≈ 5·10⁻⁵`` in the float32 case above. Checked (a Cholesky per
    candidate, in ``K_RR``'s dtype: :func:`psd_shift`) up to ``PSD_CHECK_MAX_BASIS`` rows.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.fit import psd_gram
      >>> K = jnp.asarray([[1.0, 1.0], [1.0, 1.0 - 1e-3]])  # rounding made it indefinite
      >>> bool(jnp.all(jnp.linalg.eigvalsh(psd_gram(K)) > 0))
      True
    """
    Krr = jnp.asarray(Krr)
    with _one_blas_thread():
        shift = float(_psd_shift_jit(Krr))
    if shift == 0.0:
        return Krr
    return Krr + jnp.asarray(shift, Krr.dtype) * jnp.eye(Krr.shape[0], dtype=Krr.dtype)


@jax.jit
def _psd_shift_jit(Krr):
    return psd_shift(Krr)


def psd_shift(Krr: jax.Array, n_basis=None) -> jax.Array:
    """The shift δ of :func:`psd_gram`, in JAX (0 when none is needed or found).

    ``n_basis`` (dynamic): only the leading ``n_basis`` rows and columns are the real ``K_RR``
    (shape-bucket padding after them is ignored; ``n`` and ``s`` are the real basis's).
    """
    N = Krr.shape[0]
    dt = Krr.dtype
    if N == 0 or N > PSD_CHECK_MAX_BASIS:
        return jnp.zeros((), dt)
    nb = jnp.asarray(N if n_basis is None else n_basis, jnp.int32)
    real1 = jnp.arange(N, dtype=jnp.int32) < nb
    real = real1[:, None] & real1[None, :]
    d = jnp.where(real1, jnp.diag(Krr), 0)
    scale = jnp.sum(d) / nb.astype(dt)
    # padding: an identity block, so the whole matrix factorises iff the real block does
    A = jnp.where(real, Krr, 0) + jnp.diag(jnp.where(real1, 0, 1).astype(dt))
    step = jnp.finfo(dt).eps * nb.astype(dt) * jnp.where(scale > 0, scale, 1)
    shiftdiag = jnp.diag(real1.astype(dt))

    def factorises(shift):
        return jnp.all(jnp.isfinite(_linalg.cholesky(A + shift * shiftdiag)))

    def shift_at(k):
        return jnp.where(k < 0, 0, step * jnp.asarray(10.0, dt) ** k.astype(dt))

    def body(st):
        k, _ = st
        return k + 1, factorises(shift_at(k))

    # k = -1 (no shift), 0, 1, ... 11: the first that factorises
    zero = jnp.zeros_like(A[0, 0])  # as device-varying as A under shard_map
    init = (zero.astype(jnp.int32) - 1, zero.astype(bool))
    k, ok = jax.lax.while_loop(lambda st: (~st[1]) & (st[0] < 12), body, init)
    found = ok & jnp.all(jnp.isfinite(A))
    return jnp.where(found, shift_at(k - 1), 0).astype(dt)


#: Largest basis for which ``precondition="auto"`` picks the spectral preconditioner: its
#: O(|R|³) float64 eigensolve on the host (≈ 0.5 s at 1000, 4 s at 2048 on 2 cores) must stay
#: small against the fit.
SPECTRAL_MAX_BASIS = 2048


def resolve_precondition(precondition: str, layout, n_basis: int, streamed: bool = False) -> str:
    """``"auto"`` → ``"spectral"`` when the layout supports it and ``|R| ≤ SPECTRAL_MAX_BASIS``
    (twice that for a streamed block, whose products cost a kernel evaluation each), else
    ``"cholesky"``; an explicit ``"spectral"`` on a layout without it is refused."""
    spectral_ok = hasattr(layout, "curvature") and hasattr(layout, "groups")
    if precondition == "auto":
        limit = SPECTRAL_MAX_BASIS * (2 if streamed else 1)
        return "spectral" if spectral_ok and n_basis <= limit else "cholesky"
    if precondition == "spectral" and not spectral_ok:
        raise ValueError("precondition='spectral' is not available for this objective.")
    return precondition


def cholesky_precond(Krr) -> jax.Array | None:
    """``L⁻¹`` with ``L Lᵀ = K_RR + δI`` (:func:`inverse_factor`), or ``None`` if no jitter
    makes it finite."""
    with _one_blas_thread():
        inv, ok = _inverse_factor_jit(jnp.asarray(Krr))
        return inv if bool(ok) else None


@jax.jit
def _inverse_factor_jit(A):
    return inverse_factor(A)


def check_max_kernel_bytes(max_kernel_bytes, memory_budget) -> int:
    """The largest kernel block a fit stores (``None``: the memory budget); beyond it the block
    is streamed (:class:`~jaxrank.kernels.StreamedBlock`)."""
    if max_kernel_bytes is None:
        return _kernels.default_memory_budget() if memory_budget is None else int(memory_budget)
    if isinstance(max_kernel_bytes, bool) or int(max_kernel_bytes) != max_kernel_bytes:
        raise ValueError(f"max_kernel_bytes must be an integer, got {max_kernel_bytes!r}.")
    if max_kernel_bytes < 0:
        raise ValueError(f"max_kernel_bytes must be >= 0, got {max_kernel_bytes!r}.")
    return int(max_kernel_bytes)


def check_solver_options(*, loss, eps, tol, path, chains, precondition, max_iter, max_cg) -> float:
    """Shared checks of the loss and solver options of every fit entry point; returns ``tol``."""
    if loss == "hinge":
        raise ValueError("loss='hinge' is not twice differentiable; use 'smoothed_hinge'.")
    get_loss(loss, check_positive(eps, "eps") if loss == "smoothed_hinge" else eps)
    tol = check_positive(tol, "tol")
    if path not in ("batch", "warm"):
        raise ValueError(f"path must be 'batch' or 'warm', got {path!r}.")
    if isinstance(chains, bool) or int(chains) != chains or chains < 1:
        raise ValueError(f"chains must be a positive integer, got {chains!r}.")
    if precondition not in ("auto", "spectral", "cholesky", "jacobi", "none"):
        raise ValueError(
            "precondition must be 'auto', 'spectral', 'cholesky', 'jacobi' or 'none', "
            f"got {precondition!r}."
        )
    for name, v in (("max_iter", max_iter), ("max_cg", max_cg)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}.")
    return tol


#: The loss and solver options every R-subset fit takes, with :func:`jaxrank.fit`'s defaults:
#: the one definition (issue 42) that the public fitters' keyword signatures follow
#: (``tests/test_fit.py`` checks ``fit``, ``fit_push``, ``fit_l1``, ``fit_greedy`` and
#: ``distributed.fit`` against it) and that a caller inside the package completes its options
#: from (``{**FIT_OPTIONS, **given}``). ``fit``'s ``loss=None`` means this loss, or the
#: squared hinge for ``basis="greedy"``.
FIT_OPTIONS = types.MappingProxyType(
    dict(
        loss="smoothed_hinge", eps=0.5, tol=1e-6, max_iter=100, max_cg=25, path="batch",
        chains=4, precondition="auto", dtype=None, memory_budget=None, max_kernel_bytes=None,
    )
)  # fmt: skip


class FitOptions(NamedTuple):
    """The checked loss and solver options of a :func:`fit_rows` call (:func:`check_fit_options`),
    built once by a fitter and passed on as one bundle (``fit_rows(..., **options._asdict())``)."""

    dtype: np.dtype
    loss: str
    eps: float
    tol: float
    max_iter: int
    max_cg: int
    path: str
    chains: int
    precondition: str
    memory_budget: int | None
    max_kernel_bytes: int | None


def check_fit_options(
    X, *, loss, eps, tol, path, chains, precondition, max_iter, max_cg, dtype, memory_budget,
    max_kernel_bytes, no_jacobi: str | None = None,
) -> FitOptions:  # fmt: skip
    """The checks :func:`jaxrank.fit`, :func:`jaxrank.push.fit_push` and
    :func:`jaxrank.multilevel.fit_multilevel` share, in this order: ``precondition="jacobi"``
    refused with the message ``no_jacobi`` (when given), :func:`check_solver_options`, the dtype
    (:func:`choose_dtype`) and the cast of ``X`` to it (:func:`~jaxrank._validation.check_cast`).
    """
    if no_jacobi is not None and precondition == "jacobi":
        raise ValueError(no_jacobi)
    tol = check_solver_options(
        loss=loss, eps=eps, tol=tol, path=path, chains=chains, precondition=precondition,
        max_iter=max_iter, max_cg=max_cg,
    )  # fmt: skip
    dt = choose_dtype(X, dtype)
    check_cast(X, dt)
    return FitOptions(dt, loss, eps, tol, max_iter, max_cg, path, chains, precondition,
                      memory_budget, max_kernel_bytes)  # fmt: skip


def biclass_rows(X, pos, basis, *, key, n_basis, layout=Biclass):
    """``(order, idx, layout)`` for :func:`fit_rows` over the biclass rows [positives;
    negatives]: the basis ``basis`` resolved on them (:func:`~jaxrank.bases.resolve_basis`) and
    ``layout(n_pos, n_neg)`` (:class:`Biclass` or a subclass), as :func:`jaxrank.fit` and
    :func:`jaxrank.push.fit_push` fit."""
    idx = resolve_basis(basis, pos, key=key, n_basis=n_basis, X=X)
    n_pos = int(pos.sum())
    order = np.concatenate([np.flatnonzero(pos), np.flatnonzero(~pos)])
    return order, idx, layout(n_pos, int(pos.size - n_pos))


def fit_biclass(
    X,
    pos,
    lams,
    scalar,
    *,
    basis,
    key,
    n_basis,
    kernel,
    init,
    layout=Biclass,
    mesh=None,
    no_jacobi: str | None = None,
    polish: bool = True,
    **options,
) -> RankModel:
    """The R-subset fit over the biclass rows that :func:`jaxrank.fit` (the L2 penalty) and
    :func:`jaxrank.push.fit_push` share, from the validated ``X``, ``pos`` (rare-class mask)
    and λ grid (``lams``, ``scalar``: from ``check_lam``): the fit options checked
    (:func:`check_fit_options` with ``options``, its keyword arguments, and ``no_jacobi``), the
    basis resolved and the rows laid out by ``layout`` (:func:`biclass_rows`), ``kernel``
    resolved on ``X``, then :func:`fit_rows` (with ``init``, ``mesh`` and ``polish``)."""
    options = check_fit_options(X, no_jacobi=no_jacobi, **options)._asdict()
    order, idx, layout = biclass_rows(X, pos, basis, key=key, n_basis=n_basis, layout=layout)
    kernel = _kernels.resolve_kernel(kernel, X)
    return fit_rows(X, order, idx, lams, scalar, layout, kernel=kernel, init=init, mesh=mesh,
                    polish=polish, **options)  # fmt: skip


def _fit_block_args(K, B, kernel, nb, lams, beta0, loss, tol, depth, layout, max_iter, max_cg,
                    low_effort=False, **static):  # fmt: skip
    # fit_block with every traced argument positional (jaxrank._exported flattens them); traced
    # for an export, fit_block: XLA options belong to the outermost jit (the stored program's)
    traced = any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves((K, B)))
    run = fit_block_low_effort if low_effort and not traced else fit_block
    return run(K, B, kernel, nb, lams, beta0, loss, tol, depth, layout=layout,
               max_iter=max_iter, max_cg=max_cg, **static)  # fmt: skip


def fit_rows(
    X, order, idx, lams, scalar, layout, *, kernel, dtype, loss, eps, tol, max_iter, max_cg,
    path, chains, precondition, memory_budget, init=None, max_kernel_bytes=None, mesh=None,
    process_rows=None, polish: bool = True,
) -> RankModel:  # fmt: skip
    """The engine behind every fit: kernel block over the reordered rows, solve, model.

    Every size that enters the compiled solver is padded to a shape bucket
    (:mod:`jaxrank._buckets`), so a new data set of a similar size reuses the compiled program:
    each row group of the layout (the classes, or the levels) to its bucket, the basis to its
    bucket (padded basis rows get zero kernel columns, an identity block in ``K_RR`` with no
    coupling, and keep a zero coefficient), and, for small problems, the λ count to a power of
    two (extra members repeat a real λ and are dropped). The host-side preparation (row order,
    ``K_RR``'s positive-definiteness shift, preconditioners) runs in numpy on the real sizes,
    so no small program compiles per size either.

    Args:
      X: ``(m, d)`` validated rows; ``order``: the row order the ``layout`` expects (the real
        rows of each group, consecutively);
      idx: basis row indices into ``X``; ``lams``/``scalar``: from ``check_lam``;
      layout: a pytree whose ``closures(K, Krr, lam, loss, block, jacobi)`` gives ``(fun, hvp)``
        for one λ, with host-side ``groups`` (real rows per group), ``sizes`` (rows per group
        in the block) and ``padded(sizes)`` (the layout with groups padded to ``sizes`` rows;
        the real counts become traced leaves); the other arguments as in :func:`fit`, already
        validated. Floors from :func:`jaxrank._buckets.at_least` apply.
      mesh: ``(mesh, axis)`` from :func:`~jaxrank.kernels.row_mesh`: build the block split by
        rows over the devices of ``mesh[axis]`` (data-parallel fit); ``None``: one device.
      process_rows: rows held by several processes (:mod:`jaxrank.distributed`): ``X`` is then
        only read for its shape and ``process_rows(kernel, dtype, order, slots, idx, m_rows,
        nb_pad, block, streamed)`` gives the block (rows ``order`` at ``slots``; stored or
        streamed, split over ``mesh``) and the basis rows.
      polish: finish a float32 fit's λ still above the tolerance after :data:`POLISH_AFTER`
        Newton steps in float64 (:func:`polish_float64`; the default). ``False``: such a fit
        stops after its float32 stage, statuses as that stage left them (MAX_ITER or PRECISION
        for a stalled λ, never a claim the float64 gradient did not check): the cells of a
        cross-validated search (:mod:`jaxrank._cv`), judged by their held-out AUC, not by their
        statuses, where a stalled λ is at float32's noise floor and the polish would be one more
        compiled program per data set (``bench/keel_wide.py``: ~1 s each, on the first split of
        most sets). The refit, whose status the estimator reports, is polished.
    """
    # a long session compiles a program per new bucket: keep the process's mappings bounded
    _cache.bound_compiled_programs()
    dt = np.dtype(dtype)
    check_lam_dtype(lams, dt)  # before any allocation: λ this dtype cannot solve
    if loss == "smoothed_hinge":
        check_eps_dtype(eps, dt)
    _kernels.check_kernel(kernel, X, dt)
    lossfn = get_loss(loss, eps)
    nb = idx.size
    m, d = X.shape
    counts = [int(c) for c in layout.groups]
    floors = _buckets.floors()
    sizes = [_buckets.bucket(c) for c in counts]
    if floors.get("groups") is not None and len(floors["groups"]) == len(sizes):
        sizes = [max(a, int(b)) for a, b in zip(sizes, floors["groups"], strict=True)]
    layout = layout.padded(sizes)
    sizes = [int(v) for v in layout.sizes]  # a layout may keep its exact sizes
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    m_rows = int(sum(sizes))
    nb_pad = max(_buckets.bucket(nb), int(floors.get("basis") or 0))
    block = _kernels.product_block(m_rows)
    rows, n_chunks = _kernels.chunk_rows(m_rows, nb_pad, dt.itemsize, block)
    small = 2 * nb_pad * nb_pad * dt.itemsize  # K_RR and the preconditioner
    block_bytes = rows * n_chunks * nb_pad * dt.itemsize
    limit = check_max_kernel_bytes(max_kernel_bytes, memory_budget)
    n_dev = 1 if mesh is None else mesh[0].shape[mesh[1]]
    streamed = block_bytes / n_dev > limit
    if streamed and mesh is not None and process_rows is None:
        raise ValueError(
            "a kernel block split over devices must fit their memory: the block per device "
            f"({block_bytes / n_dev / 2**30:.2f} GiB) exceeds max_kernel_bytes."
        )
    if streamed:
        if precondition == "jacobi":
            raise ValueError(
                "precondition='jacobi' needs the stored kernel block; the block "
                f"({block_bytes / 2**30:.2f} GiB) exceeds max_kernel_bytes: use 'auto'."
            )
        # rows, a few chunks of kernel temporaries and (spectral) the strided moment rows
        need = rows * n_chunks * d * dt.itemsize + small + 4 * rows * nb_pad * dt.itemsize
        _kernels.check_memory(need, memory_budget, f"the streamed kernel block ({m} x {nb})")
    else:
        _kernels.check_memory(
            block_bytes // n_dev + small, memory_budget, f"the kernel block ({m} x {nb})"
        )

    # Rows [group 0 (real, then padding up to its size); group 1; ...; padding], and the basis
    # [real rows; padding], built on the host (no per-size device programs). Padding rows are
    # copies of a real row, not zeros: the Gaussian kernel centres on the mean basis row, which
    # zero rows would pull away from data far from the origin (cancellation at X + 1e8).
    order = np.asarray(order)
    slots = np.concatenate(
        [s0 + np.arange(c, dtype=np.int64) for s0, c in zip(starts, counts, strict=True)]
    )
    if process_rows is not None:  # rows spread over processes: the block split over them
        K, Bn = process_rows(kernel, dt, order, slots, idx, m_rows, nb_pad, block, streamed)
        Bp = np.empty((nb_pad, d), dt)
        Bp[:] = Bn[0]
        Bp[:nb] = Bn
    else:
        Xn = np.asarray(X, dt)
        Xo = np.empty((m_rows if mesh is not None else rows * n_chunks, d), dt)
        Xo[:] = Xn[order[0]]
        Xo[slots] = Xn[order]
        Bn = Xn[idx]
        Bp = np.empty((nb_pad, d), dt)
        Bp[:] = Bn[0]
        Bp[:nb] = Bn
        if streamed:
            K = _kernels.streamed_block(kernel, Xo, Bp, multiple=block, n_basis=nb)
        elif mesh is not None:
            K = _kernels.sharded_block(kernel, Xo, Bp, *mesh, multiple=block, n_basis=nb)
        else:
            # the block is built inside the fit's program (fit_block with `rows`): one
            # program per fit, and no eager op before it
            K = None
    L = lams.size
    chains = 1 if path == "batch" else min(int(chains), L)
    # λ count bucket: only where compilation dominates (a large block runs its exact grid; its
    # staged solver would spend real work on the repeated members)
    L_pad = L
    if block_bytes < STAGED_MIN_BYTES:
        L_pad = max(_buckets.bucket_lams(L), int(floors.get("lams") or 0))
        if path == "batch" and block_bytes < SHARED_GRID_MAX_BYTES and _buckets.enabled():
            L_pad = max(L_pad, SHARED_GRID_LAMS)  # one program for a single λ and grids
    L_pad = -(-L_pad // chains) * chains
    dual = (
        not streamed
        and mesh is None
        and keep_transpose(
            jax.devices()[0] if K is None else K,
            L_pad if path == "batch" else chains,
            block_bytes,
            limit,
            memory_budget,
        )
    )
    if dual and K is not None:
        K = _kernels.dual_block(K)
    precondition = resolve_precondition(precondition, layout, nb, streamed=streamed)
    # the gradient's rounding floor (fit_block) depends on the two-level product's shape
    depth = math.sqrt(block) + math.sqrt(rows * n_chunks / block)

    if path == "warm":
        sort = np.argsort(-lams, kind="stable")
        # pad with the smallest λ to whole steps of `chains` (and the bucket); each copy starts
        # at that λ's solution, so it costs one evaluation; the copies are dropped below
        sort = np.concatenate([sort, np.full(L_pad - L, sort[-1])])
    else:
        # pad with the largest λ (the first to converge); dropped below
        sort = np.concatenate([np.arange(L), np.full(L_pad - L, int(np.argmax(lams)))])
    beta0 = np.zeros((sort.size, nb_pad), dt)
    if init is not None:
        init = np.asarray(init)
        if init.shape not in ((nb,), (L, nb)):
            raise ValueError(f"init must have shape ({nb},) or ({L}, {nb}), got {init.shape}.")
        if init.dtype.kind not in "biuf":
            raise ValueError(f"init must be numeric, got dtype {init.dtype}.")
        with np.errstate(over="ignore"):
            init = init.astype(dt)
        if not np.all(np.isfinite(init)):  # NaN given, or beyond the dtype (1e39 in float32)
            raise ValueError(
                f"init holds {int(np.sum(~np.isfinite(init)))} NaN or infinite value(s) in "
                f"{dt.name}; a start must be finite (omit init to start from 0)."
            )
        beta0[:, :nb] = init[sort] if init.ndim == 2 else init
    put = _buckets.put
    # float32 solves still above the tolerance after POLISH_AFTER Newton steps go on in float64
    # (polish_float64, which needs the spectral model and room for a float64 block): the
    # float32 stage is then capped where, on ill-conditioned problems, it stops making progress
    budget = _kernels.default_memory_budget() if memory_budget is None else int(memory_budget)
    can_polish = (
        dt == np.float32 and precondition == "spectral" and not streamed and mesh is None
        and process_rows is None and int(max_iter) > POLISH_AFTER
        and 2 * block_bytes <= min(limit, budget)
    )  # fmt: skip
    # XLA:CPU runs the fit's small factorisations through the host LAPACK (OpenBLAS): pinned to
    # one thread, as its worker threads would otherwise compete with them (jaxrank._hostblas;
    # measured: eigh of 104 x 104 inside the fit 2 ms pinned, up to 180 ms not)
    static = dict(block=block, path=path, chains=chains, precondition=precondition,
                  stages=grid_stages(L_pad, block_bytes) if path == "batch" else None)  # fmt: skip
    if K is None:  # fit_block builds the block from the padded rows
        K = put(Xo)
        static.update(rows=rows, dual=dual)
        del Xo
    args = (
        K, put(Bp), kernel, np.int32(nb), put(lams[sort], dt), put(beta0),
        jax.tree.map(lambda v: put(v, dt), lossfn), put(tol, dt), put(depth, dt), layout,
        POLISH_AFTER if can_polish else int(max_iter), int(max_cg),
    )  # fmt: skip
    # a small block on CPU: a fit that compiles for seconds and runs for milliseconds
    low = block_bytes <= LOW_EFFORT_MAX_BYTES and jax.default_backend() == "cpu"
    options = low_effort_options() if low else {}
    with _one_blas_thread():
        # through a stored jax.export program: a later process skips tracing and lowering
        out = _exported.call(
            "fit_block", functools.partial(_fit_block_args, low_effort=low, **static), args,
            tuple(sorted(static.items())), compiler_options=options,
        )  # fmt: skip
        betas, info, floor = out[0], SolverInfo(*out[1:6]), float(out[6])
    # back on the host: the real λ in their order, the real basis columns
    unsort = np.argsort(sort[:L])
    betas = np.asarray(betas)[unsort, :nb]
    info = jax.tree.map(lambda a: np.asarray(a)[unsort], info)
    if can_polish and polish and np.any(info.status != Status.CONVERGED):
        del K, args  # the float64 block takes their place
        betas, info = polish_float64(
            betas, info, X, order, slots, idx, lams, layout, kernel=kernel, lossfn=lossfn,
            tol=tol, floor=floor, block=block, m_rows=m_rows, nb_pad=nb_pad,
            max_iter=int(max_iter), max_cg=int(max_cg), block_bytes=block_bytes, limit=limit,
            memory_budget=memory_budget,
        )  # fmt: skip
    check_fit_result(
        betas,
        info.status,
        "λ",
        lams,
        who="the fit",
        dtype=dt,
        causes=lambda: fit_causes(X, kernel, eps),
    )
    # Every status but CONVERGED warns: reaching the dtype's gradient floor is CONVERGED
    # (jaxrank.solver, "Stopping and rounding"), so PRECISION is a stall above it.
    warn_stopped(
        info.status, info.iterations, "λ", lams, "||grad||_∞=", info.grad_norm,
        head=f"solver stopped before ||grad||_∞ ≤ {max(tol, floor):.2e} (max of tol and the "
        "dtype's gradient floor)",
        remedies={Status.NONFINITE: "check the data's scale and λ"},
        stacklevel=3,  # the caller of fit_rows
    )  # fmt: skip

    if scalar:
        betas = betas[0]
        info = jax.tree.map(lambda a: a[0], info)
    return RankModel(
        basis=put(Bn),
        coef=put(betas),
        lam=put(lams[0] if scalar else lams, dt),
        kernel=kernel,
        info=jax.tree.map(put, info),
        basis_index=put(idx, np.int32),
        loss=loss,
        eps=float(eps),
    )


def basis_gram(kernel, B, n_basis, shift=None) -> jax.Array:
    """``K_RR`` of the real basis (the leading ``n_basis`` of the rows ``B``; dynamic) made
    positive definite (:func:`psd_shift`), padded with an identity block scaled to its mean
    diagonal and no coupling, in JAX. The shift is piecewise constant in the data: its
    derivative is held at zero (``stop_gradient``), so derivatives of ``K_RR`` are exact.
    ``shift``: use this one instead (the float64 polish solves the float32 problem, whose
    shift it is: :func:`gram_shift`)."""
    dt = B.dtype
    real1 = jnp.arange(B.shape[0], dtype=jnp.int32) < n_basis
    Kn = jnp.where(real1[:, None] & real1[None, :], kernel(B, B), 0)
    if shift is None:
        shift = psd_shift(Kn, n_basis)
    shift = jax.lax.stop_gradient(jnp.asarray(shift, dt))
    d = jnp.where(real1, jnp.diag(Kn) + shift, 0)
    scale = jnp.sum(d) / jnp.asarray(n_basis, dt)
    scale = jnp.where(jnp.isfinite(scale) & (scale > 0), scale, 1)
    return Kn + jnp.diag(jnp.where(real1, shift, scale))


def prepare_basis(K, B, kernel, n_basis, layout, precondition: str, depth):
    """The fit's small matrices, in JAX: ``(Krr, chol, floor)``.

    ``Krr``: :func:`basis_gram` (``B``: ``(|R|_pad, d)`` rows, the leading ``n_basis`` real).
    ``chol``: the preconditioner's arrays for :func:`solve`
    (``"spectral"``: ``(P, Λ)`` from :func:`spectral_precond` with the moment Gram matrix of the
    layout's groups, :func:`~jaxrank.objective.moment_gram`; ``"cholesky"``: the inverse factor
    of ``Krr``, :func:`inverse_factor`; otherwise ``Krr``, unused). ``floor``: the gradient's
    rounding floor ``eps·depth·max(k_max, 1)`` (``depth = √block + √(m_pad/block)``): the
    gradient is a difference of two sums over m rows (positives pull, negatives push) that cancel
    at the optimum; with the two-level product their rounding error is about that
    (≈ 2e-6 in float32 at m = 10⁵; a one-pass sum would give eps·√m ≈ 2e-5, docs/design.md §5).

    Everything is traced (no host LAPACK), so a fit batches under ``jax.vmap`` over σ², folds or
    data sets with its preconditioner.
    """
    dt = K.dtype
    Krr = basis_gram(kernel, B, n_basis)
    real1 = jnp.arange(B.shape[0], dtype=jnp.int32) < n_basis
    kmax = jnp.max(jnp.where(real1, jnp.abs(jnp.diag(Krr)), 0))
    floor = jnp.finfo(dt).eps * jnp.asarray(depth, dt) * jnp.maximum(kmax, 1)
    if precondition == "spectral":
        G = moment_gram(K, layout.groups, layout.pairs, sizes=layout.sizes)
        P, ev, _ = spectral_precond(Krr, jnp.where(real1[:, None] & real1[None, :], G, 0))
        return Krr, (P, ev), floor
    if precondition == "cholesky":
        return Krr, inverse_factor(Krr)[0], floor
    return Krr, Krr, floor


def _fit_block(K, B, kernel, n_basis, lams, beta0, loss, tol, depth, *, layout, block, max_iter,
              max_cg, path, chains, precondition, stages=None, rows=None, dual=False):  # fmt: skip
    """The compiled fit over a kernel block: :func:`prepare_basis`, then :func:`solve`.
    Returns ``(betas, info, floor)``.

    ``K`` is the built block, or, with ``rows`` (a static chunk height), the ``(m_pad, d)``
    rows whose block ``k(K, B)`` is built here in chunks of ``rows``
    (:func:`~jaxrank.kernels.kernel_block`'s layout) and, with ``dual``, kept with its
    transpose (:class:`~jaxrank.kernels.DualBlock`). :func:`fit_rows` builds it here: a fit is
    then one program, the one a later process loads (a separate block program cost it a
    second lowering and cache load, ~10-30 ms, issue 29).

    :func:`fit_block_low_effort` is the same program compiled with
    :func:`low_effort_options` (:func:`fit_rows` uses it for blocks up to
    :data:`LOW_EFFORT_MAX_BYTES` on CPU)."""
    if rows is not None:
        K = _kernels.block_chunks(kernel, K, B, rows, n_basis)
        # the barrier materialises the block and its transpose, as separate programs did:
        # without it XLA may fold the transpose back into the products (the strided G @ K
        # that DualBlock avoids); measured at m = 1000 (float32, 16 λ) one λ then ended
        # PRECISION where the separate programs converged
        if dual:
            K = _kernels.DualBlock(*jax.lax.optimization_barrier((K, K.T)))
        else:
            K = jax.lax.optimization_barrier(K)
    Krr, chol, floor = prepare_basis(K, B, kernel, n_basis, layout, precondition, depth)
    betas, info = solve(
        K, Krr, chol, lams, beta0, loss, tol, floor, layout=layout, block=block,
        max_iter=max_iter, max_cg=max_cg, path=path, chains=chains,
        precondition=precondition, stages=stages,
    )  # fmt: skip
    return betas, info, floor


#: Newton steps a float32 solve takes before the λ still above the tolerance are finished in
#: float64 (:func:`polish_float64`); only fits allowed more steps than this are polished.
POLISH_AFTER = 12

#: Rows per class of the float64 polish's moment Gram matrix (:func:`moment_gram`'s ``cap``):
#: it only shapes the preconditioner and the rounding metric, and at |R| = 1000 the full 16384
#: rows cost seconds in float64.
POLISH_GRAM_ROWS = 4096


def round_float32(beta: jax.Array, M: jax.Array) -> jax.Array:
    """Float32 coefficients near ``beta`` (float64) whose rounding error is small in the metric
    ``M``: Babai's nearest-plane rounding with ``M = RᵀR`` (``R`` upper triangular).

    Rounding each coordinate on its own leaves ``δ = fl(β) − β`` of one half-ulp per entry, and
    the gradient moves by ``H δ``: at λ = 2⁻²⁰ on d = 5 data the coefficients reach 10³ and that
    is 5e-6 (m = 2·10⁴), above the float32 certificate. Taken from the last coordinate to the
    first, each entry is instead rounded to the float32 nearest to
    ``β_i − (Σ_{k>i} R_ik δ_k) / R_ii``, which zeroes ``(R δ)_i`` up to its own half-ulp, so the
    earlier errors are absorbed along the directions ``M`` weighs. With ``M = λ K_RR + c G``
    (the spectral preconditioner's model of the Hessian) it gave ``||H δ||_∞`` = 1.4e-7 against
    5.0e-6 for plain rounding (m = 2·10⁴, λ = 2⁻²⁰; 4e-7 with the exact Hessian). ``O(|R|²)``
    after the Cholesky factor; plain rounding if ``M`` does not factorise.

    Args:
      beta: ``(n,)`` float64 coefficients. M: ``(n, n)`` symmetric positive definite.

    Returns:
      ``(n,)`` float32.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np
      >>> with jax.enable_x64(True):
      ...     b = jnp.asarray([1.0 + 1e-8, -3.0 + 2e-7]); M = jnp.asarray([[1.0, 0.9], [0.9, 1.0]])
      ...     r = round_float32(b, M)
      >>> r.dtype, bool(np.all(np.abs(np.asarray(r, np.float64) - np.asarray(b)) < 1e-6))
      (dtype('float32'), True)
    """
    n = beta.shape[0]
    R = _linalg.cholesky(M).T
    ok = jnp.all(jnp.isfinite(R)) & jnp.all(jnp.diag(R) > 0)
    R = jnp.where(ok, R, jnp.eye(n, dtype=R.dtype))

    def body(k, st):
        delta, out = st
        i = n - 1 - k
        # R is upper triangular and δ_i is still 0: the row's product is Σ_{k>i} R_ik δ_k
        # rounded to float32 in beta's dtype: a float64 -> float32 -> float64 round trip may
        # be folded away by XLA (excess precision, seen on GPU: δ = 0, i.e. plain rounding,
        # ||∇F|| 7.9e-6 against 2.2e-7 on CPU); reduce_precision is kept
        v = jax.lax.reduce_precision(beta[i] - jnp.vdot(R[i], delta) / R[i, i], 8, 23)
        return delta.at[i].set(v - beta[i]), out.at[i].set(v.astype(jnp.float32))

    init = (jnp.zeros_like(beta), jnp.zeros(n, jnp.float32))
    return jax.lax.fori_loop(0, n, body, init)[1]


@functools.partial(jax.jit, static_argnames=("block",))
def polish_block(K, B, kernel, n_basis, shift, lams, beta0, loss, tol, *, layout, block,
                 max_iter, max_cg):  # fmt: skip
    """The float64 stage of :func:`polish_float64` over a float64 block ``K`` (spectral
    preconditioner): the solve from ``beta0``, its rounding to float32 (:func:`round_float32`
    in the metric ``λ K_RR + c G``) and the objective and ``||∇F||_∞`` at the rounded
    coefficients. ``shift``: the float32 ``K_RR``'s positive-definiteness shift (the problem
    is the float32 fit's). Returns ``(b32, info, value, grad_norm)``."""
    dt = K.dtype
    Krr = basis_gram(kernel, B, n_basis, shift=shift)
    real1 = jnp.arange(B.shape[0], dtype=jnp.int32) < n_basis
    real = real1[:, None] & real1[None, :]
    G = moment_gram(K, layout.groups, layout.pairs, sizes=layout.sizes, cap=POLISH_GRAM_ROWS)
    G = jnp.where(real, G, 0)
    P, ev, _ = spectral_precond(Krr, G)
    floor = jnp.finfo(dt).eps * jnp.asarray(math.sqrt(block), dt)  # negligible: tol decides
    betas, info = solve(
        K, Krr, (P, ev), lams, beta0, loss, tol, floor, layout=layout, block=block,
        max_iter=max_iter, max_cg=max_cg, path="batch", chains=1, precondition="spectral",
    )  # fmt: skip

    def finish(lam, beta):
        fun, _ = layout.closures(K, Krr, lam, loss, block, False)
        c = layout.curvature(fun(beta)[2], loss)
        b32 = round_float32(beta, lam * Krr + c * G)
        value, grad, _ = fun(b32.astype(dt))
        return b32, value, jnp.max(jnp.abs(grad))

    b32, value, gnorm = jax.vmap(finish)(lams, betas)
    return b32, info, value, gnorm


def _polish_block_args(K, B, kernel, n_basis, shift, lams, beta0, loss, tol, layout, max_iter,
                       max_cg, *, block):  # fmt: skip
    """:func:`polish_block` with every array argument positional (for :func:`_exported.call`)."""
    return polish_block(
        K, B, kernel, n_basis, shift, lams, beta0, loss, tol, layout=layout, block=block,
        max_iter=max_iter, max_cg=max_cg,
    )  # fmt: skip


def polish_float64(betas, info, X, order, slots, idx, lams, layout, *, kernel, lossfn, tol,
                   floor, block, m_rows, nb_pad, max_iter, max_cg, block_bytes, limit,
                   memory_budget):  # fmt: skip
    """Finish in float64 the λ of a float32 fit that ended above the tolerance.

    Why float32 stalls (``make_rare_class(10⁵, 0.01, 0.75)``, d = 5, λ ≤ 2⁻¹⁶): at small λ on
    low-dimensional data the coefficients are large against the scores they make
    (``max|β| ≈ 10³`` for scores within ±30; ``K_RR``'s eigenvalues reach 4e-7 of the largest
    at m = 2·10⁴, and the float64 optimum uses those directions: dropping the components below
    1e-6 of the largest eigenvalue moves scores by ~1, so no truncated or minimum-norm
    parametrisation solves the same problem). ``f = K β`` then cancels terms of size 10³: in
    float32 the scores carry rounding of ~1e-3, the objective is noisy at ~1.5e-5 and the
    gradient at ~1e-5, above the floor 4.3e-6 the solver stops at (m = 10⁵), and the solve
    wanders 50-100 Newton steps. No float32 arithmetic resolves a gradient below its own noise,
    so these λ go on in float64, where the same Newton method converges in 2-3 steps.

    The float32 problem itself is kept — the rows as given, the basis as the model stores it,
    the kernel, and the float32 ``K_RR``'s positive-definiteness shift (:func:`gram_shift`) —
    with ``K_{·R}`` built in float64 under a scoped ``jax.enable_x64`` (no global change), a
    float64 spectral preconditioner (the float32 one carries float32's jitter), from the
    float32 solution, to a tenth of the float32 target ``max(tol, floor)``. The result is
    rounded to float32 in the metric of the Hessian model (:func:`round_float32`: plain
    rounding alone moves the gradient by ~5e-6 there), and the status is decided by the
    gradient recomputed in float64 at the rounded coefficients: CONVERGED iff
    ``||∇F(β)||_∞ ≤ max(tol, floor)`` there, with ``floor`` the float32 fit's. The float32
    certificate ``||∇F(β)||_∞ ≤ max(tol, floor) + floor`` (:mod:`jaxrank.solver`, "Stopping and
    rounding") then holds with the whole ``+ floor`` to spare: this gradient's own rounding is
    float64's. Otherwise the float64 solver's status (PRECISION if it converged but the
    rounded coefficients do not meet the target).

    Args:
      betas: ``(L, |R|)`` float32 solutions; ``info``: their :class:`SolverInfo` (host arrays);
        the finite members ending MAX_ITER or PRECISION are polished.
      X, order, slots, idx, lams, layout: as :func:`fit_rows` laid them out (``layout``
        padded).
      the rest: :func:`fit_rows`'s options and block geometry (``floor``: the float32 fit's;
        ``block_bytes``: the float32 block's size, ``limit``: its ``max_kernel_bytes``).

    Returns:
      ``(betas, info)`` with the polished members replaced: iterations and CG steps summed over
      both stages, objective and gradient norm (float64) at the returned float32 β.
    """
    status = np.asarray(info.status)
    finite = np.all(np.isfinite(betas), axis=1)
    sel = np.flatnonzero(np.isin(status, (Status.MAX_ITER, Status.PRECISION)) & finite)
    if sel.size == 0:
        return betas, info
    n = sel.size
    n_pad = _buckets.bucket_lams(n)
    if block_bytes < SHARED_GRID_MAX_BYTES and _buckets.enabled():
        # one polish program per block bucket whatever the count (as the fit's shared grid):
        # on a small block its copies cost little, and each new count compiled for ~2 s
        n_pad = max(n_pad, SHARED_GRID_LAMS)
    take = np.concatenate([sel, np.full(n_pad - n, sel[-1])])
    nb = idx.size
    f64 = np.float64
    its = np.asarray(info.iterations)
    target = max(float(tol), float(floor))
    # the float32 problem's K_RR shift, as the float32 fit computed it
    B32 = np.asarray(X, np.float32)[idx]
    Bp32 = np.empty((nb_pad, B32.shape[1]), np.float32)
    Bp32[:] = B32[0]
    Bp32[:nb] = B32
    with _one_blas_thread():
        shift = float(gram_shift(kernel, _buckets.put(Bp32), np.int32(nb)))
    with jax.enable_x64(True), _one_blas_thread():
        put = lambda a: _buckets.put(a, f64)
        Xn = np.asarray(X, f64)
        rows, n_chunks = _kernels.chunk_rows(m_rows, nb_pad, 8, block)
        Xo = np.empty((rows * n_chunks, Xn.shape[1]), f64)
        Xo[:] = Xn[order[0]]
        Xo[slots] = Xn[order]
        Bp = Bp32.astype(f64)  # the basis as the float32 model stores it
        K = _kernels.kernel_block(kernel, Xo, Bp, padded=True, multiple=block, n_basis=nb)
        del Xo
        if keep_transpose(K, take.size, 2 * block_bytes, limit, memory_budget):
            # as in the float32 fit: a batched g @ K on CPU is several times faster from Kᵀ
            # (measured here: 4 members polished in 14-19 s without it, 1 member in 3 s)
            K = _kernels.dual_block(K)
        beta0 = np.zeros((take.size, nb_pad), f64)
        beta0[:, :nb] = betas[take]
        args = (
            K, put(Bp), kernel, np.int32(nb), put(shift), put(lams[take]), put(beta0),
            jax.tree.map(put, lossfn), put(0.1 * target), layout,
            np.int32(max_iter - np.max(its[sel])), np.int32(max_cg),
        )  # fmt: skip
        # as the fit's program: stored as a jax.export program (a later process skips its
        # ~1 s of tracing), with less XLA effort for a small block on CPU
        low = block_bytes <= LOW_EFFORT_MAX_BYTES and jax.default_backend() == "cpu"
        options = low_effort_options(POLISH_LOW_EFFORT) if low else {}
        out = _exported.call(
            "polish_block", functools.partial(_polish_block_args, block=block), args,
            (("block", block),), compiler_options=options,
        )  # fmt: skip
        b32, inf64, value, gnorm = out[0], SolverInfo(*out[1:6]), out[6], out[7]
        del K
        b32, value, gnorm = (np.asarray(a)[:n] for a in (b32, value, gnorm))
        inf64 = jax.tree.map(lambda a: np.asarray(a)[:n], inf64)
    betas = betas.copy()
    betas[sel] = b32[:, :nb]
    ok = gnorm <= target
    new = dict(
        objective=value, grad_norm=gnorm,
        iterations=its[sel] + inf64.iterations,
        cg_iterations=np.asarray(info.cg_iterations)[sel] + inf64.cg_iterations,
        status=np.where(ok, Status.CONVERGED, np.where(
            inf64.status == Status.CONVERGED, Status.PRECISION, inf64.status)),
    )  # fmt: skip
    out = {}
    for k, v in info._asdict().items():
        v = np.array(v)
        v[sel] = np.asarray(new[k]).astype(v.dtype)
        out[k] = v
    return betas, SolverInfo(**out)


_FIT_BLOCK_STATIC = ("block", "path", "chains", "precondition", "stages", "rows", "dual")

#: XLA:CPU options of :func:`fit_block_low_effort`: the loop emitters instead of the MLIR fusion
#: emitters, and LLVM at ``-O1`` instead of ``-O3``. Measured on the 16-λ fit at m = 1000
#: (float32, 2 cores, jax 0.10.2; its compile is ~4 s of LLVM code generation for ~240 kernels,
#: 0.2-0.3 s of HLO passes): compile 4.2-4.9 s → 2.7-2.8 s (the fusion emitters alone
#: 3.3 s, ``-O1`` alone 4.0-4.3 s, ``-O0`` 1.0 s but a 3x slower fit), warm fit 24-25 ms → 22-23
#: ms. At m = 3000 (a 3.9 MB block) the fit ran 1.8-2.1 s against 1.3-2.7 s, at m = 10⁴
#: 10.1 s against 8.4 s: hence only small blocks (:data:`LOW_EFFORT_MAX_BYTES`).
LOW_EFFORT_OPTIONS = {"xla_cpu_use_fusion_emitters": False, "xla_backend_optimization_level": 1}

#: Largest kernel block (bytes) :func:`fit_rows` compiles with :func:`low_effort_options`:
#: there a fit runs in tens of milliseconds and compiling it takes seconds (m = 1000: a
#: 0.6 MB block; measured slower fits from a 3.9 MB block on, :data:`LOW_EFFORT_OPTIONS`).
LOW_EFFORT_MAX_BYTES = 2**20


#: XLA:CPU options of the float64 polish of a small block (:func:`polish_float64`): as
#: :data:`LOW_EFFORT_OPTIONS` with LLVM at ``-O0``. There it runs once per fit, for
#: milliseconds, and compiles once per block bucket: measured on glass-0-1-6_vs_2 (a
#: RankRCClassifierCV search, empty cache) its compile took 0.90 s against 1.65 s at ``-O1``.
POLISH_LOW_EFFORT = {**LOW_EFFORT_OPTIONS, "xla_backend_optimization_level": 0}


def low_effort_options(options: dict = LOW_EFFORT_OPTIONS) -> dict:
    """``options`` (:data:`LOW_EFFORT_OPTIONS`) less any option the user set in
    ``$XLA_FLAGS`` (read when jaxrank is imported: XLA reads them once, when its backend
    starts), which is kept."""
    flags = os.environ.get("XLA_FLAGS", "")
    return {k: v for k, v in options.items() if f"--{k}" not in flags}


fit_block = jax.jit(_fit_block, static_argnames=_FIT_BLOCK_STATIC)
fit_block_low_effort = jax.jit(
    _fit_block, static_argnames=_FIT_BLOCK_STATIC, compiler_options=low_effort_options() or None
)


@jax.jit
def gram(kernel, B):
    return kernel(B, B)


@jax.jit
def gram_shift(kernel, B, n_basis) -> jax.Array:
    """The positive-definiteness shift :func:`basis_gram` adds to ``K_RR`` of the rows ``B``
    (the leading ``n_basis`` real), computed as it does, in ``B``'s dtype."""
    real1 = jnp.arange(B.shape[0], dtype=jnp.int32) < n_basis
    return psd_shift(jnp.where(real1[:, None] & real1[None, :], kernel(B, B), 0), n_basis)


def pad_square(A: np.ndarray, n: int, diag: float) -> np.ndarray:
    """``[[A, 0], [0, diag·I]]`` of size ``n`` (the basis padded to its bucket)."""
    k = A.shape[0]
    if k == n:
        return A
    out = np.zeros((n, n), A.dtype)
    out[:k, :k] = A
    out[np.arange(k, n), np.arange(k, n)] = diag
    return out


#: Fewest λ columns per batched product for which a fit keeps ``Kᵀ`` too (:func:`keep_transpose`).
DUAL_MIN_COLUMNS = 4


def keep_transpose(K, columns: int, block_bytes: int, limit: int, memory_budget) -> bool:
    """Whether a fit keeps the block ``K`` (or one to be built on the device ``K``) in both
    layouts (:class:`~jaxrank.kernels.DualBlock`).

    Only where it pays and fits: a batched solve with at least :data:`DUAL_MIN_COLUMNS` λ
    columns per product, on CPU (GPU matrix-multiply libraries run ``G @ K`` at the speed of
    ``K @ V``), and with both copies within ``max_kernel_bytes`` and the memory budget.
    """
    if columns < DUAL_MIN_COLUMNS:
        return False
    devices = [K] if isinstance(K, jax.Device) else K.devices()
    if any(d.platform != "cpu" for d in devices):
        return False
    budget = _kernels.default_memory_budget() if memory_budget is None else int(memory_budget)
    return 2 * block_bytes <= min(limit, budget)


def fit_causes(X, kernel, eps) -> list[str]:
    """The likely causes of a NaN or zero R-subset fit, in the fit's terms, for
    :func:`~jaxrank._validation.check_fit_result`."""
    causes = []
    if eps is not None and float(eps) > 1:
        causes.append(f"eps = {float(eps):.3g}: the smoothed hinge's slope is at most 1/(2ε)")
    Xa = np.asarray(X, np.float64)
    centre = float(np.max(np.abs(Xa.mean(axis=0))))
    spread = float(np.max(Xa.std(axis=0)))
    if spread == 0:
        causes.append("every row of X is equal: there is nothing to rank")
    elif centre > 1e4 * spread:
        causes.append(
            f"X is far from the origin relative to its spread (column means up to {centre:.3g}, "
            f"standard deviations up to {spread:.3g}): centre X (e.g. StandardScaler)"
        )
    if isinstance(kernel, _kernels.Gaussian):
        causes.append(f"σ² = {float(np.max(kernel.sigma2)):.3g} against X's scale")
    causes.append("λ, the data's scale or the dtype (try dtype=np.float64)")
    return causes
