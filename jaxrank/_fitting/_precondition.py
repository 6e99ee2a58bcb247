"""The preconditioners of the fit's CG and ``K_RR`` made positive definite: the spectral model of
the Hessian (``M(λ, c) = λ (K_RR + δI) + c G``, :mod:`jaxrank._fitting`), the Cholesky and
Jacobi choices, the PSD shift and the basis Gram matrices."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxrank import _linalg
from jaxrank._hostblas import one_blas_thread as _one_blas_thread
from jaxrank._precision import HIGHEST as _HI

_mm = functools.partial(jnp.matmul, precision=_HI)


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


@jax.jit
def gram(kernel, B):
    return kernel(B, B)


@jax.jit
def gram_shift(kernel, B, n_basis) -> jax.Array:
    """The positive-definiteness shift :func:`basis_gram` adds to ``K_RR`` of the rows ``B``
    (the leading ``n_basis`` real), computed as it does, in ``B``'s dtype."""
    real1 = jnp.arange(B.shape[0], dtype=jnp.int32) < n_basis
    return psd_shift(jnp.where(real1[:, None] & real1[None, :], kernel(B, B), 0), n_basis)
