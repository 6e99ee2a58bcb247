"""The compiled fit of one kernel block (:func:`fit_block`: the block, ``K_RR``, its PSD shift
and the preconditioner in JAX, then the λ-grid solver, one program; :func:`fit_block_low_effort`
for small blocks), the shape knobs of the λ grid and the dual (transposed) block."""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import kernels as _kernels
from jaxrank._fitting._precondition import (
    basis_gram,
    inverse_factor,
    spectral_precond,
)
from jaxrank._precision import HIGHEST as _HI
from jaxrank.objective import moment_gram
from jaxrank.solver import trust_ncg, trust_ncg_grid

_mm = functools.partial(jnp.matmul, precision=_HI)


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
