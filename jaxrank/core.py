"""The pure core of a RankRC fit: arrays in, a pytree out, under ``jit``, ``vmap`` and
``shard_map``, with implicit derivatives through the solution.

:func:`fit_core` minimises the R-subset objective (seed 000 eq. 11; eq. 13 for the rare-class
basis) over the rows a mask keeps::

    F(β) = 1/(m+ m−) Σ_{i∈+} Σ_{j∈−} ℓ_ε(f_i − f_j) + (λ/2) βᵀ K_RR β,   f = K_{·R} β

where ``m+``, ``m−`` count the kept positives and negatives only, so a masked row is exactly
absent. Every shape is static (rows, basis rows, the rows reserved per class) and every value
dynamic (rows, labels, mask, basis, kernel parameters such as σ², λ, ε, tolerance), so one
compiled program serves a search: ``jax.vmap`` over σ², ε, λ, folds (masks over the same rows) or
whole data sets of one shape, ``shard_map`` over devices. The preconditioner (the spectral model
of the Hessian, :func:`jaxrank._fitting.spectral_precond`) is computed in JAX inside the fit, so
it travels with the batch. :func:`jaxrank.fit` is input validation, basis choice and shape
buckets on the host plus the same compiled engine (:func:`jaxrank._fitting.fit_block`).

Derivatives. The solution ``β*(θ)`` of ``∇_β F(β*, θ) = 0`` (θ: rows, basis, kernel parameters,
λ, ε) is differentiated by the implicit function theorem, never through the solver's loop::

    dβ* = −H⁻¹ (∂_θ ∇_β F) dθ,    H = ∇²_β F(β*)

``H⁻¹`` is applied by preconditioned CG with the objective's own Hessian-vector product (the
sorted windows of :mod:`jaxrank.pairwise` at ``β*``) inside ``jax.lax.custom_linear_solve``, so
both ``jax.jvp`` and ``jax.grad`` work (H is symmetric: the transposed solve is the same solve);
``∂_θ ∇_β F`` comes from JAX's own derivatives of the objective written with windows held fixed
(exact: the loss is C¹ and piecewise quadratic, the windows piecewise constant).
``info.objective`` carries its derivative too (the envelope theorem: ``∂_θ F`` at ``β*``).
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad, batching, mlir

from jaxrank import kernels as _kernels
from jaxrank import losses as _losses
from jaxrank import pairwise
from jaxrank._checks import raise_if
from jaxrank._fitting import Biclass, basis_gram, fit_block, prepare_basis
from jaxrank._precision import HIGHEST as _HI
from jaxrank.solver import SolverInfo

__all__ = [
    "CoreFit",
    "ImplicitSolve",
    "decision_function",
    "fit_core",
    "require_concrete",
    "sigma2_heuristic",
]


class ImplicitSolve(NamedTuple):
    """How :func:`fit_core` solves ``H dβ = −∂_θ∇F`` behind its implicit derivatives, and
    whether a solve that did not converge is an error (``fit_core(..., implicit=...)``; static).

    A derivative rule cannot return anything but the derivative, so the solve's convergence is
    not an output: ask for ``throw=True`` and a solve that stops at its step cap with its
    residual above ``tol`` raises when the program runs (under ``jit``, ``vmap`` and in
    forward and reverse mode alike; a host callback, so such a program cannot be
    ``jax.export``-ed), or for ``nan=True`` and its derivative is NaN (pure, per member).
    The plain tuple ``(tol, max_iter)`` still works.

    Attributes:
      tol: relative residual of the preconditioned CG, ``‖H dβ + ∂_θ∇F‖ ≤ tol·‖∂_θ∇F‖``
        (``None``: ``100·eps`` of the dtype, a near-exact solve).
      max_iter: CG step cap (``None``: ``4·n_b``).
      throw: raise (an error whose message ends with ``ValueError: fit_core: the implicit
        solve ...``; ``jax.errors.JaxRuntimeError`` under JAX's runtime) when any solve of the
        call, any member of a ``vmap`` or a λ grid, stopped at ``max_iter`` unconverged.
      nan: make the derivative of an unconverged solve NaN, member by member (no callback:
        the program stays pure, ``jax.export``-able, and one member of a ``vmap`` does not stop
        the others), so ``jnp.isnan`` of the gradient says which solves failed.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> import jaxrank
      >>> from jaxrank.core import ImplicitSolve, fit_core
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> X, pos = jnp.asarray(X, jnp.float32), jnp.asarray(y == 1)
      >>> B = X[jnp.flatnonzero(pos, size=20)]
      >>> def objective(lam, implicit):
      ...     return fit_core(X, pos, lam, B, sizes=(20, 180), implicit=implicit).coef.sum()
      >>> grad = jax.jit(jax.grad(objective), static_argnums=1)  # the options are static
      >>> g = grad(0.01, ImplicitSolve(1e-4, 100, throw=True))  # converges
      >>> try:  # one CG step cannot reach 1e-6 at a small λ
      ...     grad(1e-5, ImplicitSolve(1e-6, 1, throw=True))
      ... except (ValueError, RuntimeError) as err:
      ...     print(str(err).splitlines()[-1])
      ValueError: fit_core: the implicit solve did not reach tol=1e-06 in max_iter=1 CG steps ...
    """

    tol: float | None = None
    max_iter: int | None = None
    throw: bool = False
    nan: bool = False


class CoreFit(NamedTuple):
    """The result of :func:`fit_core` (a pytree: every field batches under ``jax.vmap``).

    Attributes:
      coef: ``(n_b,)`` coefficients over the basis rows (``(L, n_b)`` for a λ grid); entries
        of padded basis rows (beyond ``n_basis``) are zero.
      kernel: the kernel with its parameters (σ² resolved when the heuristic was used).
      basis: ``(n_b, d)`` the basis rows.
      lam: λ (scalar or ``(L,)``).
      info: a :class:`~jaxrank.solver.SolverInfo` per member (objective in the normalisation
        above, ``‖∇F‖_∞``, Newton and CG steps, status).
    """

    coef: jax.Array
    kernel: Any
    basis: jax.Array
    lam: jax.Array
    info: SolverInfo


def require_concrete(where: str, **values) -> None:
    """Refuse traced values where a validated entry point (e.g. :func:`jaxrank.fit`) needs
    concrete ones, naming the argument and pointing to :func:`fit_core`.

    Example:
      >>> import jax
      >>> try:
      ...     jax.jit(lambda lam: require_concrete("fit", lam=lam))(1.0)
      ... except TypeError as err:
      ...     print(str(err).split(";")[0])
      fit: argument 'lam' is a traced JAX value (inside jax.jit, jax.vmap, jax.grad or similar)
    """
    for name, value in values.items():
        if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(value)):
            raise TypeError(
                f"{where}: argument {name!r} is a traced JAX value (inside jax.jit, jax.vmap, "
                f"jax.grad or similar); {where}() validates its inputs and chooses the basis and "
                "the shapes on the host, so it needs concrete values. Inside JAX "
                "transformations use the pure core jaxrank.core.fit_core (arrays in, a pytree "
                "out: jit-able, vmappable over σ², ε, λ and folds, differentiable)."
            )


def sigma2_heuristic(X, mask=None) -> jax.Array:
    """σ² = (1/m²) Σ_ij ‖x_i − x_j‖² over the kept rows (seed 000, Sec. 6), in JAX:
    ``2·mean‖x − x̄‖²`` (1 when every kept row is equal)."""
    X = jnp.asarray(X)
    w = jnp.ones(X.shape[:1], X.dtype) if mask is None else jnp.asarray(mask).astype(X.dtype)
    n = jnp.maximum(jnp.sum(w), 1)
    mean = jnp.sum(X * w[:, None], axis=0) / n
    c = X - mean
    s2 = 2 * jnp.sum(w * jnp.sum(c * c, axis=1)) / n
    return jnp.where(s2 > 0, s2, 1)


def _loss(name: str, eps, dt):
    if name == "smoothed_hinge":
        return _losses.smoothed_hinge(jnp.asarray(eps, dt))
    if name == "squared_hinge":
        return jax.tree.map(lambda v: jnp.asarray(v, dt), _losses.squared_hinge())
    raise ValueError(f"loss must be 'smoothed_hinge' or 'squared_hinge', got {name!r}.")


def _class_rows(valid, size):
    # the first `size` rows in order [kept rows of the class (in row order); any others]
    return jnp.argsort((~valid).astype(jnp.int32), stable=True)[:size].astype(jnp.int32)


def fit_core(
    X,
    pos,
    lam,
    basis,
    *,
    mask=None,
    n_basis=None,
    kernel=None,
    eps=0.5,
    loss: str = "smoothed_hinge",
    tol=1e-6,
    max_iter: int = 100,
    max_cg: int = 25,
    sizes: tuple[int, int] | None = None,
    precondition: str = "spectral",
    path: str = "batch",
    implicit: ImplicitSolve | tuple[float, int] | None = None,
    throw: bool = False,
) -> CoreFit:
    """Fit RankRC (or any R-subset ranker) from arrays: jit-able, vmappable, differentiable.

    Minimises seed 000 eq. (11) with the smoothed hinge of eq. (13) over the kept rows (module
    notes). Nothing is checked on the host: call it inside ``jax.jit`` / ``jax.vmap`` /
    ``shard_map``; :func:`jaxrank.fit` is the validated entry point for concrete data.

    Args:
      X: ``(m, d)`` rows (float32, or float64 with x64 on).
      pos: ``(m,)`` rare-class mask (bool; numbers: ``> 0`` is positive).
      lam: λ > 0, a scalar or a ``(L,)`` grid (solved batched, one matrix-matrix product per
        CG step for the grid).
      basis: ``(n_b, d)`` basis rows (e.g. the rare rows ``X[pos]`` for RankRC, all rows for
        RankSVM, landmarks); only the first ``n_basis`` are real.
      mask: ``(m,)`` rows to fit on (bool; default all): a masked row enters no pair and no
        count, so CV folds are masks over the same padded arrays.
      n_basis: number of real basis rows (dynamic; default ``n_b``): later rows get zero
        kernel columns and zero coefficients.
      kernel: a kernel pytree (:class:`~jaxrank.kernels.Gaussian` ``(sigma2=s2)`` with a traced
        ``s2`` batches over σ²); default Gaussian with :func:`sigma2_heuristic` over the kept
        rows.
      eps: ε of the smoothed hinge (dynamic).
      loss: ``"smoothed_hinge"`` or ``"squared_hinge"`` (static).
      tol: stop when ``‖∇F‖_∞ ≤ max(tol, floor)`` (dynamic; the floor is the dtype's rounding
        level, :mod:`jaxrank.solver`).
      max_iter, max_cg: Newton and CG step caps (static).
      sizes: ``(P, N)`` rows reserved for the kept positives and negatives (static; default
        ``(m, m)``, which always holds). Give the class counts of the full data to keep the
        kernel block at ``m`` rows for every fold. A member with more kept rows of a class than
        reserved, or with an empty class, returns NaN coefficients and status NONFINITE.
      precondition: ``"spectral"`` (default), ``"cholesky"`` or ``"none"`` (static).
      path: how a λ grid is solved (static): ``"batch"`` (default: every λ at once) or
        ``"warm"`` (one λ after the other in the order given, each started at the previous
        solution: give the grid from large to small, as :func:`jaxrank.fit` sorts it).
      implicit: an :class:`ImplicitSolve` ``(tol, max_iter, throw=False)`` (or the tuple
        ``(tol, max_iter)``) for the CG solve ``H dβ = −∂_θ∇F`` behind the implicit
        derivatives (static; default ``(100·eps, 4·n_b)``, a near-exact solve). A looser
        solve (e.g. ``(1e-3, 50)``) is cheaper where the derivative feeds an optimiser's step
        (:mod:`jaxrank.tune`); the primal fit is unchanged. ``throw=True`` makes a solve that
        stopped unconverged an error when the program runs, ``nan=True`` its derivative NaN.
      throw: static, default ``False``. A traced λ ≤ 0 (or NaN) cannot be refused when the
        program is traced: by default its member returns NaN coefficients and status
        NONFINITE; ``throw=True`` raises instead when the program runs (a host callback:
        under ``jit`` and ``vmap``, not ``jax.export``-able; concrete λ ≤ 0 is always refused).

    Returns:
      A :class:`CoreFit`.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> import jaxrank
      >>> from jaxrank.core import fit_core
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> X, pos = jnp.asarray(X, jnp.float32), jnp.asarray(y == 1)
      >>> B = X[jnp.flatnonzero(pos, size=20)]
      >>> sweep = jax.jit(jax.vmap(lambda s2: fit_core(
      ...     X, pos, 1e-2, B, kernel=jaxrank.kernels.Gaussian(s2), sizes=(20, 180))))
      >>> out = sweep(jnp.asarray([1.0, 4.0, 16.0]))
      >>> out.coef.shape, out.info.status.tolist()
      ((3, 20), [0, 0, 0])
    """
    X = jnp.asarray(X)
    if X.dtype not in (jnp.float32, jnp.float64):
        # integer rows take the default float (float64 under x64), half precision float32
        wide = jnp.issubdtype(X.dtype, jnp.floating) and jnp.finfo(X.dtype).bits < 32
        X = X.astype(jnp.float32 if wide else jax.dtypes.canonicalize_dtype(jnp.float64))
    dt = X.dtype
    _check_static(loss=loss, precondition=precondition, path=path, sizes=sizes,
                  max_iter=max_iter, max_cg=max_cg)  # fmt: skip
    m = X.shape[0] if X.ndim == 2 else -1
    basis = jnp.asarray(basis, dt)
    n_b = basis.shape[0]
    pos = jnp.asarray(pos)
    pos = pos if pos.dtype == jnp.bool_ else pos > 0
    keep = jnp.ones((m,), bool) if mask is None else jnp.asarray(mask).astype(bool)
    _check_shapes(X, pos, keep, basis)
    P, N = (m, m) if sizes is None else (int(sizes[0]), int(sizes[1]))
    if kernel is None:
        kernel = _kernels.Gaussian(sigma2_heuristic(X, keep))
    nb = jnp.asarray(n_b if n_basis is None else n_basis, jnp.int32)
    valid_pos, valid_neg = pos & keep, (~pos) & keep
    n_pos = jnp.sum(valid_pos, dtype=jnp.int32)
    n_neg = jnp.sum(valid_neg, dtype=jnp.int32)
    rows = jnp.concatenate([_class_rows(valid_pos, P), _class_rows(valid_neg, N)])
    block = _kernels.product_block(P + N)
    # the block's rows: both classes, then zero rows up to whole chunks (as kernel_block pads)
    r, n_chunks = _kernels.chunk_rows(P + N, n_b, dt.itemsize, block)
    m_rows = r * n_chunks
    lam = jnp.asarray(lam, dt)
    if lam.ndim > 1:
        raise ValueError(f"lam must be a scalar or a 1-D grid, got shape {lam.shape}.")
    if not isinstance(lam, jax.core.Tracer) and not np.all(np.asarray(lam) > 0):
        raise ValueError(f"lam must be > 0, got {lam}.")
    scalar = lam.ndim == 0
    lams = lam.reshape(-1)
    if throw:
        lams = raise_if(lams, ~(lams > 0), "fit_core: lam must be > 0 (and not NaN), got a "
                        "traced value <= 0 or NaN (throw=True)")  # fmt: skip
    implicit = _implicit(implicit)
    static = _Static(
        loss=loss, sizes=(P, N), block=block, max_iter=int(max_iter), max_cg=int(max_cg),
        precondition=precondition, depth=math.sqrt(block) + math.sqrt(m_rows / block),
        path=path, implicit=implicit,
    )  # fmt: skip
    theta = (X[rows], basis, kernel, lams, jnp.asarray(eps, dt))
    aux = (n_pos, n_neg, nb, jnp.asarray(tol, dt))
    betas, info = _solution(static, theta, aux)
    bad = (n_pos > P) | (n_neg > N) | (n_pos == 0) | (n_neg == 0)
    # a traced λ <= 0 (or NaN) has no minimiser: NaN and NONFINITE, never a number (λ = -0.1
    # ran to an objective of -9.8e59)
    bad = bad | ~(lams > 0)
    betas = jnp.where(bad[:, None], jnp.nan, betas)
    info = info._replace(status=jnp.where(bad, jnp.int32(3), info.status))
    if scalar:
        betas, info = betas[0], jax.tree.map(lambda a: a[0], info)
    return CoreFit(coef=betas, kernel=kernel, basis=basis, lam=lam, info=info)


def _implicit(implicit) -> ImplicitSolve | None:
    # the tuple form (tol, max_iter) and ImplicitSolve alike, as hashable Python numbers
    if implicit is None:
        return None
    if any(isinstance(v, jax.core.Tracer) for v in jax.tree.leaves(tuple(implicit))):
        raise TypeError("implicit is static in fit_core: give Python numbers, not traced values.")
    imp = ImplicitSolve(*implicit)
    return ImplicitSolve(
        None if imp.tol is None else float(imp.tol),
        None if imp.max_iter is None else int(imp.max_iter),
        bool(imp.throw),
        bool(imp.nan),
    )


_LOSSES = ("smoothed_hinge", "squared_hinge")
_PRECONDITION = ("spectral", "cholesky", "jacobi", "none")


def _check_static(*, loss, precondition, path, sizes, max_iter, max_cg):
    # the static options, with the error that says what to give (a traced one is refused here:
    # it fixes shapes or loop lengths, so it cannot change without compiling again)
    for name, value, allowed in (("loss", loss, _LOSSES), ("precondition", precondition,
                                 _PRECONDITION), ("path", path, ("batch", "warm"))):  # fmt: skip
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}.")
    for name, value in (("sizes", sizes), ("max_iter", max_iter), ("max_cg", max_cg)):
        if any(isinstance(v, jax.core.Tracer) for v in jax.tree.leaves(value)):
            raise TypeError(
                f"{name} is static in fit_core (it fixes a shape or a loop length); give a "
                "Python int (tuple), not a traced value: mark it static in jax.jit "
                "(static_argnames) or close over it."
            )
    if sizes is not None and (len(sizes) != 2 or min(int(v) for v in sizes) < 1):
        raise ValueError(f"sizes must be two positive ints (P, N), got {sizes!r}.")


def _check_shapes(X, pos, keep, basis):
    # shape errors said as such, not as broadcasting errors deep inside the solver
    if X.ndim != 2:
        raise ValueError(f"X must be (m, d), got shape {X.shape}.")
    m, d = X.shape
    if basis.ndim != 2 or basis.shape[1] != d:
        raise ValueError(f"basis must be (n_b, {d}) like X's columns, got shape {basis.shape}.")
    for name, v in (("pos", pos), ("mask", keep)):
        if v.shape != (m,):
            raise ValueError(f"{name} must be ({m},), one per row of X, got shape {v.shape}.")


def decision_function(result: CoreFit, X) -> jax.Array:
    """Scores ``k(X, basis) @ coef`` of a :class:`CoreFit` (``(n,)``, or ``(L, n)`` for a grid).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.core import CoreFit, decision_function
      >>> from jaxrank.kernels import Linear
      >>> r = CoreFit(jnp.ones(2), Linear(), jnp.eye(2), jnp.asarray(1.0), None)
      >>> decision_function(r, jnp.asarray([[1.0, 2.0]])).tolist()
      [3.0]
    """
    X = jnp.asarray(X, result.basis.dtype)
    K = result.kernel(X, result.basis)
    return jnp.matmul(result.coef, K.T, precision=_HI)


class _Static(NamedTuple):
    loss: str
    sizes: tuple[int, int]
    block: int
    max_iter: int
    max_cg: int
    precondition: str
    depth: float
    path: str = "batch"
    implicit: ImplicitSolve | None = None


def _problem(static: _Static, theta, aux):
    """The kernel block, layout and loss of one member (λ grid excluded)."""
    Xo, B, kernel, _, eps = theta
    n_pos, n_neg, nb, _ = aux
    dt = Xo.dtype
    P, N = static.sizes
    K = _kernels.kernel_block(kernel, Xo, B, padded=True, multiple=static.block, n_basis=nb)
    inv_pairs = 1 / (n_pos.astype(dt) * n_neg.astype(dt))
    layout = Biclass(n_pos, n_neg, size_pos=P, size_neg=N, inv_pairs=inv_pairs)
    return K, layout, _loss(static.loss, eps, dt)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0,))
def _solution(static: _Static, theta, aux):
    K, layout, loss = _problem(static, theta, aux)
    _, B, kernel, lams, _ = theta
    _, _, nb, tol = aux
    beta0 = jnp.zeros((lams.shape[0], B.shape[0]), K.dtype)
    betas, info, _ = fit_block(
        K, B, kernel, nb, lams, beta0, loss, tol, static.depth, layout=layout,
        block=static.block, max_iter=static.max_iter, max_cg=static.max_cg, path=static.path,
        chains=1, precondition=static.precondition,
    )  # fmt: skip
    return betas, info


def _objective(static: _Static, beta, theta, aux, lam):
    """``F(β; θ)`` for one λ, written so that JAX differentiates it in β and θ exactly: the
    sorted windows are held fixed (piecewise constant in the scores), the loss is C¹."""
    K, layout, loss = _problem(static, theta, aux)
    _, B, kernel, _, _ = theta
    n_pos, n_neg, nb, _ = aux
    P, N = static.sizes
    f = _kernels.matmul(K, beta)
    value = _pair_value(f[:P], f[P : P + N], loss, n_pos, n_neg)
    Krr = basis_gram(kernel, B, nb)
    return value * layout.inv_pairs + 0.5 * lam * jnp.vdot(
        beta, jnp.matmul(Krr, beta, precision=_HI)
    )


def _pair_value(fp, fn, loss, n_pos, n_neg):
    """``Σ_{i∈+} Σ_{j∈−} ℓ(f_i − f_j)`` from the windows of :func:`jaxrank.pairwise.windows`
    at the (gradient-stopped) scores, as a plain JAX expression of the scores (seed 000
    eq. 18 per negative ``j``: ``a (c + u) − Σ_{k<a} s_k + q (n w² − 2 w Σ_Q s_k + Σ_Q s_k²)``,
    ``w = 1 + u``), so that every order of derivative is exact and transposable."""
    sg = jax.lax.stop_gradient
    # the windows are piecewise constant in the scores and in ε alike: none of their inputs
    # may carry a tangent (an ε tangent into the custom_vmap'd windows, under the vmap of a λ
    # grid, came back with a stack of extra axes and corrupted every σ², ε, X derivative)
    w = pairwise.windows(sg(fp), sg(fn), jax.tree.map(sg, loss), n_pos, n_neg)
    dt = fp.dtype
    real_p = jnp.arange(fp.shape[0], dtype=jnp.int32) < n_pos
    shift = sg(jnp.sum(jnp.where(real_p, fp, 0)) / n_pos.astype(dt))
    sp = jnp.where(real_p, fp, 0)[w.order] - shift
    u = fn - shift
    P1 = jnp.concatenate([jnp.zeros((1,), dt), jnp.cumsum(sp)])
    P2 = jnp.concatenate([jnp.zeros((1,), dt), jnp.cumsum(sp * sp)])
    a, b = w.a, w.b
    S1 = P1[b] - P1[a]
    S2 = P2[b] - P2[a]
    n = (b - a).astype(dt)
    one_u = 1 + jnp.where(b > 0, u, 0)  # padded negatives (a = b = 0) add exact zeros
    lin = a.astype(dt) * (loss.c + jnp.where(a > 0, u, 0)) - P1[a]
    quad = loss.q * (n * one_u * one_u - 2 * one_u * S1 + S2)
    return jnp.sum(lin + quad)


_SECOND_ORDER = (
    "fit_core's implicit derivatives are differentiated once more only forward: the tangent "
    "solve runs the objective's fused Hessian product, which JAX can neither transpose (reverse "
    "over reverse: jax.grad of jax.grad, jax.hessian, jax.jacrev of a gradient) nor vmap once "
    "differentiated (jax.hessian, jax.jacfwd of a gradient, a vmap of jax.jvp(jax.grad(f))). "
    "Use forward over reverse, one direction per call: jax.jvp(jax.grad(f), (x,), (v,)) "
    "(a Hessian column per direction v; docs/core.md)."
)


def _guard(tree):
    """``tree`` unchanged; a tangent through it (a second derivative of the solve) may be
    computed forward but neither transposed nor vmapped, with a message that says what to do:
    JAX itself stops there with a bare ``AssertionError`` (issue 41 item 9)."""
    return jax.tree.map(_guard_p.bind, tree)


def _guard_batch(name):
    def rule(args, dims):
        if name == "tangent":
            raise NotImplementedError(_SECOND_ORDER)
        return _guard_p.bind(*args), dims[0]

    return rule


def _guard_transpose(ct, x):
    raise NotImplementedError(_SECOND_ORDER)


_guard_p = jax.extend.core.Primitive("jaxrank_core_guard")
_guard_tangent_p = jax.extend.core.Primitive("jaxrank_core_guard_tangent")
for _p, _kind in ((_guard_p, "primal"), (_guard_tangent_p, "tangent")):
    _p.def_impl(lambda x: x)
    _p.def_abstract_eval(lambda x: x)
    mlir.register_lowering(_p, mlir.lower_fun(lambda x: x, multiple_results=False))
    batching.primitive_batchers[_p] = _guard_batch(_kind)
ad.primitive_jvps[_guard_p] = lambda primals, tangents: (
    _guard_p.bind(*primals),
    _guard_tangent_p.bind(ad.instantiate_zeros(tangents[0])),
)
ad.deflinear(_guard_tangent_p, lambda ct: [_guard_transpose(ct, None)])
del _p, _kind


@_solution.defjvp
def _solution_jvp(static: _Static, primals, tangents):
    theta, aux = primals
    dtheta, _ = tangents
    betas, info = _solution(static, theta, aux)
    K, layout, loss = _problem(static, theta, aux)
    _, B, kernel, lams, _ = theta
    _, _, nb, _ = aux
    Krr, chol, _ = prepare_basis(K, B, kernel, nb, layout, static.precondition, static.depth)
    dt = K.dtype
    dlams = dtheta[3]

    def member(beta, lam, dlam):
        # θ of this member: its λ (and its λ tangent) in place of the grid
        th = (*theta[:3], lam, theta[4])
        dth = (*dtheta[:3], dlam, dtheta[4])
        grad = lambda b, t: jax.grad(lambda b_: _objective(static, b_, t, aux, t[3]))(b)
        rhs = jax.jvp(lambda t: grad(beta, t), (th,), (dth,))[1]
        # the curvature product under guards: its second derivative by reverse over reverse
        # or under vmap would fail inside JAX with a bare AssertionError (see _guard)
        _, hvp_raw = layout.closures(*_guard((K, Krr, lam, loss)), static.block, False)
        hvp = lambda lin, v: _guard(hvp_raw(_guard(lin), v))
        # the windows (and the curvature from them) are piecewise constant: taken at
        # gradient-stopped inputs, so that no transformation differentiates the pairwise sort
        # (second derivatives still stop at the Hessian product's custom_vmap: docs/core.md)
        sg = functools.partial(jax.tree.map, jax.lax.stop_gradient)
        fun0, _ = layout.closures(sg(K), sg(Krr), sg(lam), sg(loss), static.block, False)
        lin = fun0(sg(beta))[2]

        def precond(r):
            if static.precondition == "spectral":
                P, ev = chol
                c = layout.curvature(lin, loss)
                return jnp.matmul(jnp.matmul(P, r, precision=_HI) / (lam + c * ev), P,
                                  precision=_HI)  # fmt: skip
            if static.precondition == "cholesky":
                return jnp.matmul(jnp.matmul(chol, r, precision=_HI), chol, precision=_HI)
            return r

        imp = static.implicit or ImplicitSolve()
        tol = 100 * float(jnp.finfo(dt).eps) if imp.tol is None else imp.tol
        cap = 4 * B.shape[0] if imp.max_iter is None else imp.max_iter

        def cg(matvec, rhs):
            if not (imp.throw or imp.nan):
                return jax.scipy.sparse.linalg.cg(matvec, rhs, tol=tol, maxiter=cap, M=precond)[0]
            x, stopped = _pcg(matvec, rhs, tol, cap, precond)
            if imp.nan:
                x = jnp.where(stopped, jnp.nan, x)
            if not imp.throw:
                return x
            return raise_if(x, stopped, (
                f"fit_core: the implicit solve did not reach tol={tol:.3g} in max_iter={cap} CG "
                "steps (ImplicitSolve(throw=True)): raise max_iter or tol"
            ))  # fmt: skip

        dbeta = -jax.lax.custom_linear_solve(lambda v: hvp(lin, v), rhs, cg, symmetric=True)
        dobj = jax.jvp(lambda b, t: _objective(static, b, t, aux, t[3]), (beta, th), (dbeta, dth))[
            1
        ]
        return dbeta, dobj

    dbetas, dobj = jax.vmap(member)(betas, lams, dlams)
    zero = lambda a: (
        jnp.zeros_like(a)
        if jnp.issubdtype(a.dtype, jnp.floating)
        else np.zeros(a.shape, jax.dtypes.float0)
    )  # fmt: skip
    dinfo = jax.tree.map(zero, info)._replace(objective=dobj)
    return (betas, info), (dbetas, dinfo)


def _pcg(A, b, tol, maxiter, M):
    """Preconditioned CG as ``jax.scipy.sparse.linalg.cg`` runs it (the same steps and
    stopping rule, ``‖r‖ ≤ tol·‖b‖`` or ``maxiter`` steps), returning also whether it stopped
    at the cap with the residual above the tolerance."""
    dot = lambda u, v: jnp.vdot(u, v, precision=_HI)
    atol2 = jnp.square(tol) * dot(b, b)

    def cond(state):
        _, r, _, _, k = state
        return (dot(r, r) > atol2) & (k < maxiter)

    def body(state):
        x, r, gamma, p, k = state
        Ap = A(p)
        alpha = gamma / dot(p, Ap)
        x, r = x + alpha * p, r - alpha * Ap
        z = M(r)
        gamma_ = dot(r, z)
        return x, r, gamma_, z + (gamma_ / gamma) * p, k + 1

    x0 = jnp.zeros_like(b)
    r0 = b - A(x0)
    z0 = M(r0)
    x, r, _, _, _ = jax.lax.while_loop(cond, body, (x0, r0, dot(r0, z0), z0, 0))
    return x, dot(r, r) > atol2
