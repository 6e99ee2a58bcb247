"""The float64 polish: a float32 fit's λ still above the tolerance after :data:`POLISH_AFTER`
Newton steps are finished in float64 and rounded back to float32 in the Hessian model's metric
(:func:`polish_float64`, :func:`round_float32`)."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _buckets, _exported, _linalg
from jaxrank import kernels as _kernels
from jaxrank._fitting import _block
from jaxrank._fitting._block import (
    LOW_EFFORT_OPTIONS,
    keep_transpose,
    low_effort_options,
    solve,
)
from jaxrank._fitting._precondition import basis_gram, gram_shift, spectral_precond
from jaxrank._hostblas import one_blas_thread as _one_blas_thread
from jaxrank.objective import moment_gram
from jaxrank.solver import SolverInfo, Status

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
    if block_bytes < _block.SHARED_GRID_MAX_BYTES and _buckets.enabled():
        # one polish program per block bucket whatever the count (as the fit's shared grid):
        # on a small block its copies cost little, and each new count compiled for ~2 s
        n_pad = max(n_pad, _block.SHARED_GRID_LAMS)
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
        low = block_bytes <= _block.LOW_EFFORT_MAX_BYTES and jax.default_backend() == "cpu"
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


#: XLA:CPU options of the float64 polish of a small block (:func:`polish_float64`): as
#: :data:`LOW_EFFORT_OPTIONS` with LLVM at ``-O0``. There it runs once per fit, for
#: milliseconds, and compiles once per block bucket: measured on glass-0-1-6_vs_2 (a
#: RankRCClassifierCV search, empty cache) its compile took 0.90 s against 1.65 s at ``-O1``.
POLISH_LOW_EFFORT = {**LOW_EFFORT_OPTIONS, "xla_backend_optimization_level": 0}
