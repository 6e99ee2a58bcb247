"""MIBC: the moment-based imbalanced binary classifier (seed 002).

Leclère, Grave & El Ghaoui, *Probabilistic Approach to One-Class Support Vector Machine* (2016).
The large negative class is reduced to its mean ``x̄`` and covariance ``Σ``; the few positives are
kept as examples. The classifier ``wᵀx − b`` that classifies every positive correctly while
maximising the worst-case probability (over all distributions with those two moments) of
classifying a negative correctly is (eq. 1-3, via the Marshall-Olkin / Lanckriet lemma)::

    min_w  wᵀΣw   s.t.  b − x̄ᵀw ≥ 1,   x_iᵀw − b ≥ 0   (i ∈ I+)                    (3)

and, eliminating ``b = x̄ᵀw + 1`` (eq. 4; the paper prints "max", a typo for min)::

    min_w  wᵀΣw   s.t.  (x_i − x̄)ᵀw ≥ 1                                             (4)

The soft-margin version this module solves, MIBC proper (eq. 10; printed "max_{κ,w}", a typo for
``min_{w,ξ}``, with the implicit ``ξ ≥ 0``)::

    min_{w,ξ}  wᵀΣw + 1/(ν m+) Σ_i ξ_i   s.t.  (x_i − x̄)ᵀw ≥ 1 − ξ_i,  ξ_i ≥ 0      (10)

is a linear one-class SVM with margin fixed at 1 on the whitened positives
``x̂_i = W(x_i − x̄)``, ``WᵀW = Σ⁻¹`` (Sec. 2.2; the paper writes ``W = Σ^{-1/2}``; any ``W`` with
``WᵀW = Σ⁻¹`` gives the same inner products and distances, hence the same classifier). Its
Lagrange dual, derived here (``∂/∂w``: ``2Σw = Σ_i β_i z_i``; ``∂/∂ξ``: ``β_i ≤ C``), is a box
QP over the m+ positives only::

    max_β  1ᵀβ − ¼ βᵀQβ   s.t.  0 ≤ β ≤ C = 1/(ν m+),   Q_ij = k(x̂_i, x̂_j)          (D)
    w = ½ Σ⁻¹ Σ_i β_i (x_i − x̄),      f(x) = Σ_i (β_i/2) k(x̂_i, x̂) − 1

with ``k`` the linear kernel for eq. (10) and the kernels of the paper's Fig. 2 table for the
kernelised variants (Sec. 3.3). There is no equality constraint: eq. (10) has no free offset
(the margin is fixed at 1, the offset ``b = x̄ᵀw + 1`` comes from eq. 3). The decision function
``f(x) = wᵀ(x − x̄) − 1`` is ``wᵀx − b``: ``f ≥ 0`` classifies positive, and that threshold is the
one Remark 2's bound on the negative error refers to.

Covariance models of the negatives (``covariance=``):

- ``"full"``: ``Σ̂ = (1/m−) Σ_j (x_j − x̄)(x_j − x̄)ᵀ`` (Sec. 2.3, the biased estimate, so that
  Remark 1 applies), whitened by its Cholesky factor. Forms a ``d × d`` matrix.
- ``"diag"``: ``diag(Σ̂)``, for high-dimensional / sparse data (Sec. 4.2).
- ``"factor"``: ``D + FFᵀ`` of eq. (11) from the top ``k + 1`` singular triplets of the centred
  (and, footnote 1, standardised) negatives, computed by randomized subspace iteration with
  products by the data only; whitened by the Woodbury identity. Never forms a ``d × d`` matrix.

All three take the robust form ``Σ + ρI`` of eq. (7) (spectral-norm uncertainty ρ on Σ).
No ``m− × m−`` (or ``m × m``) matrix is ever formed. The QP is over the m+ positives: with a
dense ``m+ × m+`` Gram matrix for the kernels, and for the linear kernel with ``d < m+`` through
the ``m+ × d`` whitened positives only (Woodbury; :func:`solve_dual`).

Bounds on the negative error (attributes and methods of :class:`MIBCModel`), with
``v = wᵀΣ_m w``: Remark 2, ``P(f(x) ≥ 0) ≤ v/(1 + v)`` for any negative distribution with the
model's moments (``neg_error_bound``); Remark 3, ``1 − Φ(1/√v)`` if it is Gaussian
(``neg_error_bound_gaussian``); eq. (8), the bound under an uncertain mean
(:meth:`MIBCModel.robust_bound`); Remark 1, the same bound at the empirical moments of given
negatives bounds the fraction of them misclassified (:meth:`MIBCModel.chebyshev_bound`).

The sigmoid kernel of Fig. 2 is not offered: it is not positive semidefinite, so (D) would not
be a convex QP.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import io as _io
from jaxrank import kernels as _kernels
from jaxrank._validation import check_cast, check_positive, check_X, check_X_y
from jaxrank.fit import ConvergenceWarning, _choose_dtype
from jaxrank.solver import Status

__all__ = [
    "MIBCInfo",
    "MIBCModel",
    "NegativeMoments",
    "default_rho",
    "fit_mibc",
    "negative_moments",
    "solve_dual",
]

_HI = jax.lax.Precision.HIGHEST
_COVARIANCES = ("full", "diag", "factor")


# --------------------------------------------------------------------------------------------
# Moments of the negative class and their whitening
# --------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class NegativeMoments:
    """The negative class reduced to its mean and a (robust) covariance model ``Σ_m``.

    ``Σ_m`` is ``Σ̂ + ρI`` (``"full"``), ``diag(Σ̂) + ρI`` (``"diag"``) or ``D + FFᵀ + ρI``
    (``"factor"``, seed 002 eq. 11), ``Σ̂`` the biased empirical covariance of the negatives
    (Sec. 2.3) and ρ the robustness of eq. (7). A whitening map ``T`` with ``TᵀT = Σ_m⁻¹`` is
    applied without forming ``Σ_m⁻¹``:

    - full: ``T = L⁻¹`` with ``LLᵀ = Σ_m`` (a triangular solve, O(d²) per row);
    - diag: ``T = diag(Σ_m)^{-1/2}`` (O(d));
    - factor: with ``D' = D + ρI`` and the thin SVD ``D'^{-1/2}F = U S Vᵀ``,
      ``T = (I − U diag(1 − (1 + s²)^{-1/2}) Uᵀ) D'^{-1/2}`` (O(dk)); then
      ``TᵀT = D'^{-1/2}(I + D'^{-1/2}FFᵀD'^{-1/2})^{-1}D'^{-1/2} = (D' + FFᵀ)^{-1}``, which is
      the Woodbury identity ``(D'+FFᵀ)⁻¹ = D'⁻¹ − D'⁻¹F(I + FᵀD'⁻¹F)⁻¹FᵀD'⁻¹`` in square-root
      form.

    Attributes:
      mean: ``(d,)`` mean ``x̄`` of the negatives.
      rho: ``()`` the ρ of eq. (7) included in the model.
      chol: ``(d, d)`` lower Cholesky factor of ``Σ_m`` (full), else ``None``.
      diag: ``(d,)`` diagonal part of ``Σ_m``: ``var + ρ`` (diag) or ``D + ρ`` (factor).
      factors: ``(d, k)`` the ``F`` of eq. (11) (factor), else ``None``.
      basis: ``(d, k)`` left singular vectors ``U`` of ``D'^{-1/2}F`` (factor), else ``None``.
      shrink: ``(k,)`` ``1 − (1 + s²)^{-1/2}`` (factor), else ``None``.
      covariance: ``"full"``, ``"diag"`` or ``"factor"`` (static).
    """

    mean: jax.Array
    rho: jax.Array
    chol: Any = None
    diag: Any = None
    factors: Any = None
    basis: Any = None
    shrink: Any = None
    covariance: str = dataclasses.field(default="full", metadata=dict(static=True))

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    def whiten(self, X: jax.Array) -> jax.Array:
        """``x̂ = T(x − x̄)`` for each row of ``X`` (``(n, d)`` → ``(n, d)``), seed 002 Sec. 2.2."""
        return self._apply_T(jnp.asarray(X) - self.mean)

    def _apply_T(self, U: jax.Array) -> jax.Array:
        if self.covariance == "full":
            return jax.scipy.linalg.solve_triangular(self.chol, U.T, lower=True).T
        V = U / jnp.sqrt(self.diag)
        if self.covariance == "diag":
            return V
        return V - jnp.matmul(
            jnp.matmul(V, self.basis, precision=_HI) * self.shrink, self.basis.T, precision=_HI
        )

    def _apply_Tt(self, V: jax.Array) -> jax.Array:
        """``Tᵀ`` applied to each row of ``V``."""
        if self.covariance == "full":
            return jax.scipy.linalg.solve_triangular(self.chol, V.T, lower=True, trans="T").T
        if self.covariance == "factor":
            V = V - jnp.matmul(
                jnp.matmul(V, self.basis, precision=_HI) * self.shrink, self.basis.T, precision=_HI
            )
        return V / jnp.sqrt(self.diag)

    def solve(self, V: jax.Array) -> jax.Array:
        """``Σ_m⁻¹ v`` for each row ``v`` of ``V`` (or for a vector), as ``TᵀT v``."""
        V = jnp.asarray(V)
        out = self._apply_Tt(self._apply_T(jnp.atleast_2d(V)))
        return out if V.ndim == 2 else out[0]

    def quad(self, w: jax.Array) -> jax.Array:
        """``wᵀ Σ_m w`` for each row ``w`` of ``w`` (or a vector), never forming ``Σ_m``."""
        W = jnp.atleast_2d(jnp.asarray(w))
        if self.covariance == "full":
            out = jnp.sum(jnp.matmul(W, self.chol, precision=_HI) ** 2, axis=-1)
        else:
            out = jnp.sum(W * W * self.diag, axis=-1)
            if self.covariance == "factor":
                out = out + jnp.sum(jnp.matmul(W, self.factors, precision=_HI) ** 2, axis=-1)
        return out if jnp.ndim(w) == 2 else out[0]

    def dense(self) -> jax.Array:
        """The ``d × d`` matrix ``Σ_m`` (for inspection on small ``d``; the fit never needs it)."""
        if self.covariance == "full":
            return jnp.matmul(self.chol, self.chol.T, precision=_HI)
        out = jnp.diag(self.diag)
        if self.covariance == "factor":
            out = out + jnp.matmul(self.factors, self.factors.T, precision=_HI)
        return out


def _check_nonneg(value, name: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}.")
    try:
        v = float(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}.") from err
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}.")
    return v


def _check_int(value, name: str, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    v = int(value)
    if v < lo or (hi is not None and v > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ValueError(f"{name} must be in {rng}, got {v}.")
    return v


def _check_moment_options(covariance, n_factors, n_neg: int, d: int, key) -> int | None:
    if covariance not in _COVARIANCES:
        raise ValueError(f"covariance must be 'full', 'diag' or 'factor', got {covariance!r}.")
    if n_neg < 2:
        raise ValueError(
            f"the negative class has {n_neg} row(s); its mean and covariance need at least 2."
        )
    if covariance != "factor":
        if n_factors is not None:
            raise ValueError(
                f"n_factors is only used with covariance='factor' (got covariance={covariance!r})."
            )
        return None
    hi = min(d, n_neg) - 1
    if n_factors is None:
        raise ValueError(f"covariance='factor' needs n_factors, an integer in [1, {hi}].")
    if hi < 1:
        raise ValueError(
            f"covariance='factor' needs d >= 2 and at least 2 negatives (d = {d}, m- = {n_neg})."
        )
    # eq. (11) needs the (k+1)-th singular value: k + 1 <= min(d, m-).
    k = _check_int(n_factors, "n_factors", 1, hi)
    if key is None:
        raise ValueError(
            "covariance='factor' draws the random start of its subspace iteration: pass "
            "key=jax.random.key(...)."
        )
    return k


def negative_moments(
    X_neg,
    *,
    covariance: str = "full",
    n_factors: int | None = None,
    rho: float | str = "auto",
    key: jax.Array | None = None,
    power_iters: int = 4,
    oversample: int = 10,
    dtype=None,
    memory_budget: int | None = None,
) -> NegativeMoments:
    """Reduce the negatives to their mean and a robust covariance model (seed 002 Sec. 2-3).

    - ``"full"``: ``Σ̂ = (1/m−) X̃ᵀX̃`` (Sec. 2.3), ``X̃`` the centred negatives; ``Σ̂ + ρI`` (eq. 7).
    - ``"diag"``: ``diag(Σ̂) + ρI`` (Sec. 4.2: "replace the full covariance by its diagonal").
    - ``"factor"``: eq. (11) with footnote 1. The negatives are centred and each feature
      divided by its standard deviation ``σ_j``; with ``s_1 ≥ s_2 ≥ …`` the singular values and
      ``V_k`` the top-k right singular vectors of that ``m− × d`` matrix,
      ``D = diag(σ²) s_{k+1}² / m−`` and ``F = diag(σ) V_k S_k / √m−`` (the paper prints
      ``F = U_k S_k / |I−|``; ``FFᵀ = U_k S_k² U_kᵀ / |I−|`` needs ``1/√|I−|``). Then
      ``FFᵀ ⪯ Σ̂ ⪯ D + FFᵀ`` and the model is ``D + FFᵀ + ρI``. The singular triplets come
      from randomized subspace iteration (Halko, Martinsson & Tropp 2011, Alg. 4.4) with
      ``k + 1 + oversample`` columns and ``power_iters`` passes, touching the data only through
      products ``X̃V`` and ``X̃ᵀU`` (Remark 5) — O(m− d (k + p)) per pass, no ``d × d`` matrix.

    Args:
      X_neg: ``(m−, d)`` negative rows.
      covariance: ``"full"``, ``"diag"`` or ``"factor"``.
      n_factors: ``k`` of eq. (11), in ``[1, min(d, m−) − 1]`` (``"factor"`` only).
      rho: ρ ≥ 0 of eq. (7), or ``"auto"`` (default): the small ridge of :func:`default_rho`
        (``1e-6`` times the mean variance of the features, raised to the rounding level of
        float32 fits), so that one-hot or collinear columns work; ``0`` is the paper's Σ̂.
      key: ``jax.random.key`` for the random start of the subspace iteration (``"factor"``).
      power_iters: subspace-iteration passes (``"factor"``; each sharpens the top-k subspace
        by a factor ``s_{k+p+2}/s_k`` squared).
      oversample: extra columns ``p`` of the randomized range finder (capped at ``d − k − 1``).
      dtype: ``float32`` or ``float64`` (default as in :func:`jaxrank.fit`).
      memory_budget: bytes the ``d × d`` covariance may take (``"full"``; default as in
        :func:`jaxrank.kernels.check_memory`).

    Returns:
      :class:`NegativeMoments`.

    Raises:
      ValueError: bad options, values whose squares overflow (or whose variances underflow)
        the dtype, or ``Σ_m`` is singular (a feature constant over the negatives, fewer
        negatives than features, ``s_{k+1} = 0``) with ``rho`` too small.

    Example:
      >>> import numpy as np
      >>> Xn = np.random.default_rng(0).normal(size=(200, 3))
      >>> mom = negative_moments(Xn, covariance="diag", rho=0.1)
      >>> mom.whiten(Xn).shape
      (200, 3)
    """
    X = check_X(X_neg, name="X_neg")
    rho = _check_rho(rho)
    k = _check_moment_options(covariance, n_factors, X.shape[0], X.shape[1], key)
    power_iters = _check_int(power_iters, "power_iters", 0)
    oversample = _check_int(oversample, "oversample", 0)
    dt = _choose_dtype(X, dtype)
    check_cast(X, dt, name="X_neg")
    rho = _resolve_rho(rho, X, dt, name="X_neg")
    return _negative_moments(X, covariance, k, rho, key, power_iters, oversample, dt, memory_budget)


# The default ridge of eq. (7), relative to the features' mean variance (scikit-learn's
# GaussianMixture adds reg_covar = 1e-6 to the diagonal of data it expects standardised).
_RHO_RELATIVE = 1e-6


def _check_rho(rho) -> float | str:
    if isinstance(rho, str):
        if rho != "auto":
            raise ValueError(f"rho must be a number >= 0 or 'auto', got {rho!r}.")
        return rho
    return _check_nonneg(rho, "rho")


def _variances(X, block_rows: int = 65536) -> np.ndarray:
    """Biased per-feature variances of ``X`` in float64, one pass in row blocks."""
    m = X.shape[0]
    shift = X[0].astype(np.float64)  # sums about one row: no cancellation far from 0
    s1 = np.zeros(X.shape[1])
    s2 = np.zeros(X.shape[1])
    for start in range(0, m, block_rows):
        b = X[start : start + block_rows].astype(np.float64) - shift
        s1 += b.sum(0)
        s2 += (b * b).sum(0)
    return np.maximum(s2 / m - (s1 / m) ** 2, 0)


def default_rho(X_neg, dtype) -> float:
    """The ``rho="auto"`` ridge of eq. (7) for the negatives ``X_neg`` fitted in ``dtype``.

    ``ρ = max(1e-6 · tr(Σ̂)/d, 1000 · max(d, √m−) · ε · max_j Σ̂_jj)``, ``ε`` the dtype's
    machine epsilon. The first term is scikit-learn's ``reg_covar`` convention (1e-6) made
    relative to the covariance's scale, so that it does not depend on the units of ``X``. The
    second is 100 times the rounding level below which a Cholesky pivot of ``Σ̂`` counts as
    zero (the singularity check): it binds in float32 (about ``1e-4``–``5e-3`` of the largest
    variance), where a relative 1e-6 is below the rounding of ``Σ̂`` itself and still refused
    one-hot data (issue 17, abalone19); in float64 it is about ``1e-11`` and the first term
    binds. A direction of exactly zero variance that every row shares (one-hot indicators
    summing to 1) does not change the classifier, whatever ρ; measured on KEEL abalone19,
    car-good, flare-F and kr-vs-k, relative ridges from 1e-9 to 1e-3 change the test AUC by
    less than 0.002.

    Args:
      X_neg: ``(m−, d)`` negative rows (checked).
      dtype: the fit's floating dtype.

    Returns:
      ρ ≥ 0 (0 only when every feature is constant over the negatives).
    """
    X = check_X(X_neg, name="X_neg")
    return _default_rho(_variances(X), X.shape[0], dtype)


def _default_rho(var: np.ndarray, m: int, dtype) -> float:
    eps = float(np.finfo(np.dtype(dtype)).eps)
    floor = 30 * max(var.size, math.sqrt(m)) * eps * float(var.max())
    return max(_RHO_RELATIVE * float(var.mean()), floor)


def _resolve_rho(rho, X, dt, *, name: str = "X") -> float:
    """``rho`` as a number (``"auto"``: :func:`default_rho`), after refusing data whose
    covariance underflows ``dt`` (its entries would be rounding noise, or flushed to 0)."""
    var = _variances(X)
    var_max = float(var.max())
    fi = np.finfo(np.dtype(dt))
    if 0 < var_max < float(fi.tiny) / float(fi.eps):
        raise ValueError(
            f"{name} has variances of at most {var_max:.3g}: below {np.dtype(dt)}'s range for "
            f"a covariance (its smallest normal number is {float(fi.tiny):.3g}), the moments "
            f"would be rounding noise. Rescale {name} (e.g. StandardScaler)"
            + (" or pass dtype=np.float64." if fi.bits < 64 else ".")
        )
    return _default_rho(var, X.shape[0], dt) if rho == "auto" else rho


def _negative_moments(X, covariance, k, rho, key, power_iters, oversample, dt, memory_budget):
    """:func:`negative_moments` after validation (``X`` a checked numpy array)."""
    n, d = X.shape
    if covariance == "full":
        _kernels.check_memory(
            3 * d * d * np.dtype(dt).itemsize,
            memory_budget,
            f"the full covariance ({d} x {d}); use covariance='diag' or 'factor'",
        )
    Xd = jnp.asarray(X, dt)
    rho_a = jnp.asarray(rho, dt)
    # exactly constant features: their computed variance is rounding noise, not a scale
    const = jnp.asarray(np.ptp(X, axis=0) == 0)
    if covariance == "full":
        mean, chol = _full_moments(Xd, rho_a)
        chol_np = np.asarray(chol)
        piv = np.diag(chol_np) ** 2 if np.all(np.isfinite(chol_np)) else np.zeros(1)
        cov_scale = float(np.max(np.sum(chol_np**2, axis=1))) if piv.size > 1 else 0.0
        # Σ̂'s entries carry a rounding error of about eps·√m− relative to its scale, so an
        # exactly singular Σ̂ (collinear features) shows pivots of that size, not zero.
        floor = 10 * max(d, math.sqrt(n)) * np.finfo(dt).eps * cov_scale
        if not np.all(piv > max(floor, np.finfo(dt).tiny)):
            raise ValueError(_singular_message(X, "the covariance of the negatives", rho))
        return NegativeMoments(mean=mean, rho=rho_a, chol=chol, covariance="full")
    if covariance == "diag":
        mean, var = _diag_moments(Xd, const)
        diag = var + rho_a
        _check_diag(diag, X, rho, "the diagonal covariance of the negatives")
        return NegativeMoments(mean=mean, rho=rho_a, diag=diag, covariance="diag")
    r = min(k + 1 + oversample, d, n)
    mean, diag, F, U, shrink = _factor_moments(Xd, const, rho_a, key, k, r, power_iters)
    _check_diag(diag, X, rho, "the diagonal D + rho of the factor model (eq. 11)")
    return NegativeMoments(
        mean=mean, rho=rho_a, diag=diag, factors=F, basis=U, shrink=shrink, covariance="factor"
    )


def _singular_message(X, what: str, rho: float) -> str:
    const = np.flatnonzero(np.ptp(X, axis=0) == 0)
    n, d = X.shape
    if const.size:
        why = f"feature(s) {const[:8].tolist()} are constant over the negatives"
    elif n <= d:
        why = f"{n} negatives in {d} dimensions: the covariance has rank < {d}"
    else:
        why = "collinear features, e.g. one-hot indicators that sum to 1"

    fix = (
        "pass a larger rho"
        if rho > 0
        else "pass rho='auto' (the default) or rho > 0 (the robust Σ + ρI of seed 002 eq. 7)"
    )
    return f"{what} is singular ({why}); {fix}, or drop those features."


def _check_diag(diag, X, rho, what):
    diag = np.asarray(diag)
    if not np.all(np.isfinite(diag)) or not np.all(diag > np.finfo(diag.dtype).tiny):
        raise ValueError(_singular_message(X, what, rho))


@jax.jit
def _full_moments(X, rho):
    n, d = X.shape
    mean = jnp.mean(X, axis=0)
    Xc = X - mean
    cov = jnp.matmul(Xc.T, Xc, precision=_HI) / jnp.asarray(n, X.dtype)
    cov = 0.5 * (cov + cov.T) + rho * jnp.eye(d, dtype=X.dtype)
    return mean, jnp.linalg.cholesky(cov)


@jax.jit
def _diag_moments(X, const):
    mean = jnp.mean(X, axis=0)
    return mean, jnp.where(const, 0, jnp.mean((X - mean) ** 2, axis=0))


@functools.partial(jax.jit, static_argnums=(4, 5, 6))
def _factor_moments(X, const, rho, key, k, r, power_iters):
    n, d = X.shape
    dt = X.dtype
    mean = jnp.mean(X, axis=0)
    sd = jnp.where(const, 0, jnp.sqrt(jnp.mean((X - mean) ** 2, axis=0)))
    # Footnote 1: the factor model is built on unit-variance features, then scaled back.
    # Remark 5 writes X̃V = XV − 1(x̄ᵀV) so as to keep sparse X sparse; jaxrank's X is dense,
    # and centring first avoids the cancellation of that difference far from the origin.
    Xs = (X - mean) / jnp.where(sd > 0, sd, 1)
    gram = lambda V: jnp.matmul(Xs.T, jnp.matmul(Xs, V, precision=_HI), precision=_HI)
    Q, _ = jnp.linalg.qr(gram(jax.random.normal(key, (d, r), dt)))
    Q = jax.lax.fori_loop(0, power_iters, lambda _, Q: jnp.linalg.qr(gram(Q))[0], Q)
    # Rayleigh-Ritz on span(Q): the eigenpairs of the r × r matrix QᵀX̃ᵀX̃Q (the squared
    # singular values and right singular vectors of X̃Q, without an SVD of the m− × r matrix).
    lam, W = jnp.linalg.eigh(jnp.matmul(Q.T, gram(Q), precision=_HI))
    lam, W = lam[::-1], W[:, ::-1]
    s = jnp.sqrt(jnp.maximum(lam, 0))
    V = jnp.matmul(Q, W, precision=_HI)
    root_n = jnp.sqrt(jnp.asarray(n, dt))
    F = sd[:, None] * V[:, :k] * (s[:k] / root_n)
    s_next = s[k] if k < r else jnp.zeros((), dt)
    diag = sd**2 * (s_next / root_n) ** 2 + rho
    # Woodbury square root (NegativeMoments docstring): thin SVD of G = D'^{-1/2} F.
    G = F / jnp.sqrt(jnp.where(diag > 0, diag, 1))[:, None]
    U, sg, _ = jnp.linalg.svd(G, full_matrices=False)
    shrink = 1 - 1 / jnp.sqrt(1 + sg**2)
    return mean, diag, F, U, shrink


# --------------------------------------------------------------------------------------------
# The dual box QP (D): a primal-dual interior-point method with an active-set polish
# --------------------------------------------------------------------------------------------


class MIBCInfo(NamedTuple):
    """What happened in the dual solve (each field a scalar, or one per ν of a grid).

    Attributes:
      objective: the primal objective of eq. (10a), ``wᵀΣ_m w + C Σ_i ξ_i``, at the returned
        ``w = ½Σ_m⁻¹Zᵀβ`` with the smallest feasible slacks ``ξ_i = max(0, 1 − (x_i − x̄)ᵀw)``.
      dual_objective: ``1ᵀβ − ¼βᵀQβ`` at the returned (feasible) ``β``.
      gap: ``objective − dual_objective ≥ 0``, a certificate: the returned classifier's
        objective is within ``gap`` of the optimum of eq. (10).
      iterations: interior-point iterations.
      status: a :class:`jaxrank.Status` code (``CONVERGED``: ``gap ≤ tol·objective``).
    """

    objective: jax.Array
    dual_objective: jax.Array
    gap: jax.Array
    iterations: jax.Array
    status: jax.Array


class _IPM(NamedTuple):
    g: jax.Array  # γ = β/C ∈ [0, 1]
    t: jax.Array  # slack 1 − γ
    z: jax.Array  # multiplier of γ ≥ 0
    s: jax.Array  # multiplier of γ ≤ 1
    best: jax.Array  # best certified γ so far
    best_gap: jax.Array
    stall: jax.Array  # iterations since the certified gap last improved
    it: jax.Array
    status: jax.Array


class _DenseGram(NamedTuple):
    """``H = cQ`` held as the ``m × m`` matrix (any kernel)."""

    Q: jax.Array
    c: jax.Array

    def hv(self, g):
        return self.c * jnp.matmul(self.Q, g, precision=_HI)

    def factor(self, d):
        # A jitter relative to H keeps the factorisation finite when H is rank-deficient and
        # the barrier terms of free variables have shrunk below rounding; it only perturbs the
        # Newton direction, the iterate stays interior and the certificate is exact.
        jitter = jnp.finfo(d.dtype).eps * self.c * jnp.max(jnp.abs(jnp.diag(self.Q)))
        return jnp.linalg.cholesky(self.c * self.Q + jnp.diag(d + jitter))

    def solve(self, L, r):
        return jax.scipy.linalg.cho_solve((L, True), r)

    def polish(self, gamma, free, at1):
        """``H_FF γ_F = 1 − H_{F,A1} 1`` by Cholesky (jitter at rounding level) and two steps of
        iterative refinement against the unjittered matrix: when ``H_FF`` is singular (more
        free positives than the rank of ``Q``) that is a solution of the consistent system near
        the least-norm one; all solutions have the same margins."""
        dt = gamma.dtype
        H = self.c * self.Q
        fixed = jnp.where(at1, 1, 0).astype(dt)
        keep = free[:, None] & free[None, :]
        jitter = jnp.finfo(dt).eps * jnp.max(jnp.abs(jnp.diag(H)))
        Hff = jnp.where(keep, H, 0) + jnp.diag(jnp.where(free, 0, 1).astype(dt))
        L = jnp.linalg.cholesky(Hff + jnp.diag(jnp.where(free, jitter, 0).astype(dt)))
        rhs = jnp.where(free, 1 - jnp.matmul(H, fixed, precision=_HI), fixed)
        sol = jax.scipy.linalg.cho_solve((L, True), rhs)
        for _ in range(2):
            res = rhs - jnp.matmul(Hff, sol, precision=_HI)
            sol = sol + jax.scipy.linalg.cho_solve((L, True), res)
        return jnp.where(free, sol, fixed)


class _LowRankGram(NamedTuple):
    """``H = cZZᵀ`` held as its ``m × k`` factor (linear kernel, ``k = d < m``): every product
    and Newton solve costs O(m k²) instead of O(m³)."""

    Z: jax.Array
    c: jax.Array

    def hv(self, g):
        return self.c * jnp.matmul(self.Z, jnp.matmul(g, self.Z, precision=_HI), precision=_HI)

    def factor(self, d):
        # Woodbury: (D + cZZᵀ)⁻¹ = D⁻¹ − D⁻¹Z(I/c + ZᵀD⁻¹Z)⁻¹ZᵀD⁻¹, a k × k Cholesky (the
        # "normal equations" of LP interior-point methods).
        k = self.Z.shape[1]
        dinv = 1 / d
        M = jnp.eye(k, dtype=d.dtype) / self.c + jnp.matmul(
            self.Z.T, dinv[:, None] * self.Z, precision=_HI
        )
        return d, dinv, jnp.linalg.cholesky(M)

    def solve(self, fac, r):
        d, dinv, L = fac

        def base(r):
            y = jax.scipy.linalg.cho_solve((L, True), jnp.matmul(dinv * r, self.Z, precision=_HI))
            return dinv * (r - jnp.matmul(self.Z, y, precision=_HI))

        # one step of iterative refinement: the Woodbury difference cancels for free
        # variables (large D⁻¹) near the end
        x = base(r)
        return x + base(r - self.hv(x) - d * x)

    def polish(self, gamma, free, at1):
        """In the whitened primal: ``ŵ = ½Ẑᵀβ = cZᵀγ`` must give margins ``Z_F ŵ = 1`` on the
        free set, with ``ŵ − ŵ₀ = cZ_Fᵀγ_F`` in the row space of ``Z_F`` (``ŵ₀`` from the
        upper-bound positives). Both least-norm solutions go through the pseudo-inverse of the
        ``k × k`` matrix ``G = Z_FᵀZ_F`` (an eigendecomposition; ``Z_F`` may be rank-deficient):
        ``ŵ − ŵ₀ = G⁺Z_Fᵀb`` and ``γ_F = Z_F G⁺ (ŵ − ŵ₀)/c``."""
        dt = gamma.dtype
        fixed = jnp.where(at1, 1, 0).astype(dt)
        Zf = jnp.where(free[:, None], self.Z, 0)
        lam, V = jnp.linalg.eigh(jnp.matmul(Zf.T, Zf, precision=_HI))
        keep = lam > jnp.finfo(dt).eps * Zf.shape[1] * jnp.max(lam)
        inv = jnp.where(keep, 1 / jnp.where(keep, lam, 1), 0)
        pinv = lambda v: jnp.matmul(V, inv * jnp.matmul(v, V, precision=_HI), precision=_HI)
        w0 = self.c * jnp.matmul(fixed, self.Z, precision=_HI)
        rhs = jnp.where(free, 1 - jnp.matmul(self.Z, w0, precision=_HI), 0)
        dw = pinv(jnp.matmul(rhs, Zf, precision=_HI))
        gf = jnp.matmul(Zf, pinv(dw), precision=_HI) / self.c
        return jnp.where(free, gf, fixed)


def _certificate(op, gamma):
    """``(P/C, D/C, gap/C)`` at ``β = Cγ``, γ clipped into the box (so β is dual feasible).

    With ``f = Hγ = ½Qβ`` the margins, ``‖ŵ‖² = ½βᵀf`` and the gap is a sum of non-negative
    terms ``β_i(f_i − 1) + C·max(0, 1 − f_i)`` (no cancellation between P and D).
    """
    gamma = jnp.clip(gamma, 0, 1)
    f = op.hv(gamma)
    slack = jnp.maximum(1 - f, 0)
    half_norm = 0.5 * jnp.vdot(gamma, f)
    primal = half_norm + jnp.sum(slack)
    gap = jnp.sum(gamma * (f - 1) + slack)
    return primal, primal - gap, gap


def _max_step(xs, dxs):
    """Largest α with every ``x + α dx ≥ 0`` (inf when no component decreases)."""

    def one(x, dx):
        return jnp.min(jnp.where(dx < 0, -x / jnp.where(dx < 0, dx, -1), jnp.inf))

    return jnp.min(jnp.stack([one(x, dx) for x, dx in zip(xs, dxs, strict=True)]))


def _ipm_solve(op, m: int, tol, max_iter: int):
    """min_γ ½γᵀHγ − 1ᵀγ over 0 ≤ γ ≤ 1: Mehrotra predictor-corrector (Nocedal & Wright §16.6).

    Variables ``γ, t = 1 − γ`` and multipliers ``z, s ≥ 0``; KKT ``Hγ − 1 − z + s = 0``,
    ``γ + t = 1``, ``γz = ts = μ → 0``. Each step solves one system
    ``(H + diag(z/γ + s/t)) Δγ = r`` (``op.factor`` / ``op.solve``: dense Cholesky, or
    Woodbury for a low-rank ``H``). Stops when the certified relative duality gap
    (:func:`_certificate`) is at most ``tol``, or when it has not improved for 10 iterations.
    """
    dt = op.c.dtype
    one = jnp.ones((m,), dt)
    tiny = jnp.asarray(jnp.finfo(dt).tiny, dt)

    def rel_gap(gamma):
        P, _, gap = _certificate(op, gamma)
        return gap / jnp.maximum(P, tiny)

    def direction(fac, st, r_d, r_p, r_l, r_u):
        g, t, z, s = st.g, st.t, st.z, st.s
        rhs = -r_d + r_l / g - (r_u + s * r_p) / t
        dg = op.solve(fac, rhs)
        dz = (r_l - z * dg) / g
        dtt = -r_p - dg
        ds = (r_u - s * dtt) / t
        return dg, dtt, dz, ds

    def body(st: _IPM) -> _IPM:
        g, t, z, s = st.g, st.t, st.z, st.s
        r_d = op.hv(g) - one - z + s
        r_p = g + t - one
        mu = (jnp.vdot(g, z) + jnp.vdot(t, s)) / (2 * m)
        fac = op.factor(z / g + s / t)
        # predictor (affine scaling)
        a = direction(fac, st, r_d, r_p, -g * z, -t * s)
        alpha = jnp.minimum(1.0, _max_step((g, t, z, s), a))
        moved = [x + alpha * dx for x, dx in zip((g, t, z, s), a, strict=True)]
        mu_aff = (jnp.vdot(moved[0], moved[2]) + jnp.vdot(moved[1], moved[3])) / (2 * m)
        sigma = (mu_aff / mu) ** 3
        # corrector with centring
        c = direction(
            fac, st, r_d, r_p, sigma * mu - g * z - a[0] * a[2], sigma * mu - t * s - a[1] * a[3]
        )
        step = _max_step((g, t, z, s), c)
        alpha = jnp.minimum(1.0, 0.995 * step).astype(dt)
        g, t, z, s = g + alpha * c[0], t + alpha * c[1], z + alpha * c[2], s + alpha * c[3]
        gap = rel_gap(g)
        better = gap < st.best_gap
        best = jnp.where(better, g, st.best)
        best_gap = jnp.where(better, gap, st.best_gap)
        # the certified gap stopped shrinking: the rounding floor of this dtype (on degenerate,
        # rank-deficient problems it can plateau for a few iterations before dropping again)
        stall = jnp.where(better, 0, st.stall + 1)
        it = st.it + 1
        finite = jnp.all(jnp.isfinite(g)) & jnp.all(jnp.isfinite(z)) & jnp.all(jnp.isfinite(s))
        status = jnp.select(
            [best_gap <= tol, ~finite, (alpha < 1e-10) | (stall >= 10), it >= max_iter],
            [Status.CONVERGED, Status.NONFINITE, Status.PRECISION, Status.MAX_ITER],
            Status.RUNNING,
        ).astype(jnp.int32)
        return _IPM(g, t, z, s, best, best_gap, stall, it, status)

    g0 = jnp.full((m,), 0.5, dt)
    zero = jnp.zeros((), jnp.int32)
    st = _IPM(g0, g0, one, one, g0, rel_gap(g0), zero, zero, jnp.asarray(Status.RUNNING, jnp.int32))
    st = jax.lax.while_loop(lambda st: st.status == Status.RUNNING, body, st)
    return st


def _polish(op, gamma):
    """Active-set refinement: fix the bounds the IPM found, solve the free block exactly.

    With ``A0 = {γ ≈ 0}``, ``A1 = {γ ≈ 1}`` and ``F`` the rest, the KKT conditions on ``F``
    are ``(Hγ)_F = 1``; ``op.polish`` solves them. The caller keeps the result only if it is
    feasible and its certified gap is smaller.
    """
    dt = gamma.dtype
    thresh = jnp.asarray(1e3, dt) * jnp.finfo(dt).eps ** 0.5
    at1 = gamma >= 1 - thresh
    free = ~((gamma <= thresh) | at1)
    return op.polish(gamma, free, at1)


@functools.partial(jax.jit, static_argnames=("max_iter", "low_rank"))
def _solve_dual_batch(A, C, tol, *, max_iter, low_rank=False):
    """Solve (D) for every ``C`` of a 1-D batch (vmapped). ``A`` is the Gram matrix ``Q``, or
    with ``low_rank`` a factor ``Z`` with ``Q = ZZᵀ``. Returns ``(β, info)``."""
    m = A.shape[0]

    def single(c):
        # γ = β/C: ½γᵀHγ − 1ᵀγ = −D(Cγ)/C with H = (C/2)Q
        op = (_LowRankGram if low_rank else _DenseGram)(A, 0.5 * c)
        st = _ipm_solve(op, m, tol, max_iter)
        gamma = st.best
        polished = _polish(op, gamma)
        gap_p = _certificate(op, polished)
        ok = jnp.all(jnp.isfinite(polished)) & (jnp.min(polished) >= 0) & (jnp.max(polished) <= 1)
        ok = ok & (gap_p[2] / jnp.maximum(gap_p[0], jnp.finfo(A.dtype).tiny) < st.best_gap)
        gamma = jnp.where(ok, polished, gamma)
        P, D, gap = _certificate(op, gamma)
        status = jnp.where(gap <= tol * P, Status.CONVERGED, st.status).astype(jnp.int32)
        info = MIBCInfo(
            objective=c * P, dual_objective=c * D, gap=c * gap, iterations=st.it, status=status
        )
        return c * jnp.clip(gamma, 0, 1), info

    if C.shape[0] == 1:
        # a batch of one without vmap: batched linear algebra inside a while loop costs ~10x
        # on CPU
        return jax.tree.map(lambda a: a[None], single(C[0]))
    return jax.vmap(single)(C)


def solve_dual(Q, C, *, tol: float | None = None, max_iter: int = 100, low_rank: bool = False):
    """Solve MIBC's dual box QP (D): ``max 1ᵀβ − ¼βᵀQβ`` s.t. ``0 ≤ β ≤ C``.

    The dual of seed 002 eq. (10) (derived in the module notes). Solved in JAX by a primal-dual
    interior-point method (Mehrotra predictor-corrector, iterations jit-compiled in a
    ``lax.while_loop``), followed by an active-set polish that fixes the bounds the interior
    point identified and solves the free block exactly; the polished point is kept when it is
    feasible and has a smaller duality gap. Convergence is certified by the duality gap between
    the primal objective (eq. 10a) at ``w = ½Σ⁻¹Zᵀβ`` and the dual objective at ``β``.

    Each iteration solves one Newton system: with a dense ``Q`` by an ``m × m`` Cholesky
    (O(m³)); with ``low_rank=True`` (``Q = ZZᵀ`` given by its ``m × k`` factor ``Z``: the
    linear kernel, ``Z`` the whitened positives) by the Woodbury identity and a ``k × k``
    Cholesky (O(m k²)), the ``m × m`` matrix never formed.

    Args:
      Q: ``(m, m)`` positive semidefinite Gram matrix of the whitened positives, or with
        ``low_rank=True`` a factor ``(m, k)`` of it.
      C: ``C = 1/(ν m)``, a scalar or a 1-D batch (solved vmapped).
      tol: relative duality gap to stop at (default 1e-12 in float64, 1e-5 in float32).
      max_iter: cap on interior-point iterations (static).
      low_rank: ``Q`` is the factor ``Z`` of ``ZZᵀ``.

    Returns:
      ``(β, info)``: ``β`` of shape ``(m,)`` (or ``(L, m)`` for a batch of ``C``) and a
      :class:`MIBCInfo`.

    Example:
      >>> import jax.numpy as jnp
      >>> beta, info = solve_dual(jnp.eye(2) * 4.0, 1.0)
      >>> beta.tolist(), int(info.status)   # unconstrained optimum β = 2 Q⁻¹ 1, clipped
      ([0.5, 0.5], 0)
    """
    Q = jnp.asarray(Q)
    if Q.ndim != 2 or (not low_rank and Q.shape[0] != Q.shape[1]):
        raise ValueError(
            f"Q must be a square Gram matrix (or a factor with low_rank=True), got shape {Q.shape}."
        )
    dt = Q.dtype
    scalar = jnp.ndim(C) == 0
    Cb = jnp.atleast_1d(jnp.asarray(C, dt))
    tol = _default_tol(dt) if tol is None else check_positive(tol, "tol")
    beta, info = _solve_dual_batch(
        Q, Cb, jnp.asarray(tol, dt), max_iter=int(max_iter), low_rank=bool(low_rank)
    )
    if scalar:
        return beta[0], jax.tree.map(lambda a: a[0], info)
    return beta, info


def _default_tol(dt) -> float:
    return 1e-12 if np.dtype(dt) == np.float64 else 1e-5


# --------------------------------------------------------------------------------------------
# The model and the fit
# --------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class MIBCModel:
    """A fitted MIBC classifier (seed 002 eq. 10, or its Fig. 2 kernelisation), one per ν.

    Decision function (``f ≥ 0``: positive; the threshold ``b = x̄ᵀw + 1`` of eq. 3)::

        f(x) = Σ_i (β_i/2) k(x̂_i, x̂) − 1,   x̂ = T(x − x̄),  TᵀT = Σ_m⁻¹
             = wᵀ(x − x̄) − 1,   w = ½ Σ_m⁻¹ Σ_i β_i (x_i − x̄)      (linear kernel)

    Attributes:
      moments: the :class:`NegativeMoments` (mean, covariance model, whitening).
      kernel: the kernel applied to whitened rows (:class:`~jaxrank.kernels.Linear` for
        eq. 10; Gaussian / polynomial for the Fig. 2 variants), resolved (σ² filled in).
      basis: ``(m+, d)`` the whitened positives ``x̂_i``.
      dual_coef: ``(m+,)`` or ``(L, m+)`` the dual variables ``β`` of (D), in ``[0, C]``.
      coef: ``(d,)`` or ``(L, d)`` the classifier ``w`` in the original coordinates (linear
        kernel); ``None`` for a nonlinear kernel.
      nu: ``()`` or ``(L,)`` the ν of eq. (10); ``C = 1/(ν m+)``.
      C: ``()`` or ``(L,)``.
      margin_norm2: ``v = ‖ŵ‖² = ¼βᵀQβ``, which is ``wᵀΣ_m w`` for the linear kernel: the
        ``v♯`` of Remark 2 when the margin is hard (ν small enough that every ``ξ_i = 0``).
      neg_error_bound: Remark 2, ``v/(1 + v)``: if the negatives have exactly the mean and
        covariance of the model (``Σ_m``, with its ρ of eq. 7 — any covariance within spectral
        distance ρ of ``Σ̂`` for the robust version), the probability that a negative gets
        ``f(x) ≥ 0`` is at most this, whatever their distribution (Marshall-Olkin). For
        ``covariance="full"`` (any ρ ≥ 0) and ``"factor"`` (``Σ̂ ⪯ D + FFᵀ``, up to the
        accuracy of the estimated ``s_{k+1}``) it also bounds the fraction of *training*
        negatives misclassified (Remark 1); for ``"diag"`` it does not (``diag Σ̂ ⋡ Σ̂``) — use
        :meth:`chebyshev_bound` on the negatives for a bound that always holds. For a
        nonlinear kernel it is the bound under the paper's Sec. 3.3 model (the whitened
        negatives having mean 0 and identity covariance in feature space), not a guarantee.
      neg_error_bound_gaussian: Remark 3, ``1 − Φ(1/√v)``: the same probability if the
        negatives are Gaussian with the model's moments.
      info: :class:`MIBCInfo` of the dual solve.
    """

    moments: NegativeMoments
    kernel: Any
    basis: jax.Array
    dual_coef: jax.Array
    coef: Any
    nu: jax.Array
    C: jax.Array
    margin_norm2: jax.Array
    neg_error_bound: jax.Array
    neg_error_bound_gaussian: jax.Array
    info: MIBCInfo

    @property
    def covariance(self) -> str:
        return self.moments.covariance

    def _check(self, X) -> jax.Array:
        X = check_X(X)
        if X.shape[1] != self.basis.shape[1]:
            raise ValueError(
                f"X has {X.shape[1]} features, the model was fitted on {self.basis.shape[1]}."
            )
        check_cast(X, self.basis.dtype)
        return jnp.asarray(X, self.basis.dtype)

    def decision_function(self, X) -> jax.Array:
        """``f(x)`` above: ``(n,)`` for a scalar ν, ``(L, n)`` for a ν grid.

        Linear kernel: one product ``(X − x̄) wᵀ`` (no whitening). Kernels: rows are whitened
        then scored against the whitened positives in row chunks
        (:func:`~jaxrank.kernels.stream_matvec`).
        """
        X = self._check(X)
        if self.coef is not None:
            return _linear_scores(X, self.moments.mean, self.coef)
        Xh = _whiten(self.moments, X)
        return _kernels.stream_matvec(self.kernel, Xh, self.basis, 0.5 * self.dual_coef) - 1

    def predict(self, X) -> jax.Array:
        """``+1`` where ``f(x) ≥ 0`` (the Remark 2 threshold), else ``−1`` (int32)."""
        return jnp.where(self.decision_function(X) >= 0, 1, -1).astype(jnp.int32)

    def robust_bound(self, mean_radius) -> jax.Array:
        """Eq. (8): the negative-error bound when the mean is also uncertain.

        For every negative distribution whose mean ``x̄₀`` satisfies
        ``(x̄ − x̄₀)ᵀΣ⁻¹(x̄ − x̄₀) ≤ r²`` (Sec. 2.3; the paper calls the radius ν, not the ν of
        eq. 10) and whose covariance is the model's, ``P(f(x) ≥ 0) ≤ 1/(1 + (1/√v − r)²)`` when
        ``1/√v > r``, else 1. The paper prints it as ``κ⁻¹(1/√v − r)``, which is the
        probability of a *correct* negative (``κ⁻¹(k) = k²/(1 + k²)``); the error is one minus
        that. ``r = 0`` gives Remark 2. By Remark 4 the mean's uncertainty changes the bound,
        not the classifier.

        Returns:
          ``()`` or ``(L,)``.
        """
        r = _check_nonneg(mean_radius, "mean_radius")
        k = 1 / jnp.sqrt(self.margin_norm2) - r
        return jnp.where(k > 0, 1 / (1 + k**2), 1.0).astype(self.margin_norm2.dtype)

    def chebyshev_bound(self, X_neg) -> jax.Array:
        """Remark 2 at the empirical moments of the scores of ``X_neg`` (Remark 1).

        With ``s = f(x) + 1 = ŵᵀφ(x̂)`` over the rows of ``X_neg``, mean ``μ`` and (biased)
        variance ``σ²``, the one-sided Chebyshev (Cantelli / Marshall-Olkin) bound gives
        ``P(f ≥ 0) = P(s ≥ 1) ≤ σ²/(σ² + (1 − μ)²)`` for ``μ < 1`` (else 1) under the uniform
        distribution on those rows, i.e. an upper bound on the fraction of ``X_neg`` with
        ``f ≥ 0``. For the linear kernel and the training negatives, ``μ = 0`` and
        ``σ² = wᵀΣ̂w``: Remark 2 with the exact empirical covariance, for every covariance model.

        Returns:
          ``()`` or ``(L,)``.
        """
        s = self.decision_function(X_neg) + 1
        mu = jnp.mean(s, axis=-1)
        var = jnp.mean((s - mu[..., None]) ** 2, axis=-1)
        gap = jnp.maximum(1 - mu, 0)
        return jnp.where(mu < 1, var / (var + gap**2), 1.0).astype(s.dtype)

    def save(self, path) -> None:
        """Write the model to ``path`` as a checksummed ``.npz`` (:func:`jaxrank.io.save`)."""
        _io.save(self, path)

    def select(self, i: int) -> MIBCModel:
        """The model of the ``i``-th ν of a grid, as a scalar-ν model."""
        if self.dual_coef.ndim == 1:
            raise ValueError("select() needs a model fitted on a nu grid.")
        return dataclasses.replace(self, **_take(_per_nu(self), i))


_PER_NU = (
    "dual_coef",
    "coef",
    "nu",
    "C",
    "margin_norm2",
    "neg_error_bound",
    "neg_error_bound_gaussian",
    "info",
)


def _per_nu(model: MIBCModel) -> dict:
    return {name: getattr(model, name) for name in _PER_NU}


@jax.jit
def _take(fields: dict, i) -> dict:
    # one dispatch for every per-ν field (eager indexing costs one dispatch per array)
    return jax.tree.map(lambda a: a[i], fields)


@jax.jit
def _linear_scores(X, mean, coef):
    return jnp.matmul(coef, (X - mean).T, precision=_HI) - 1


@jax.jit
def _whiten(moments, X):
    return moments.whiten(X)


def _check_nu(nu) -> tuple[np.ndarray, bool]:
    """``(nus, is_scalar)``; every ν in (0, 1] (seed 002 eq. 10)."""
    if isinstance(nu, bool):
        raise ValueError(f"nu must be a number in (0, 1], got {nu!r}.")
    try:
        arr = np.asarray(nu, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"nu must be a number in (0, 1] or a 1-D grid, got {nu!r}.") from err
    scalar = arr.ndim == 0
    arr = arr.reshape(-1) if scalar else arr
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"nu must be a number in (0, 1] or a non-empty 1-D grid, got {nu!r}.")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0) or np.any(arr > 1):
        raise ValueError(f"nu must be in (0, 1] (seed 002 eq. 10), got {arr.tolist()}.")
    return arr, scalar


def _resolve_mibc_kernel(kernel, Xh):
    if kernel is None or kernel == "linear":
        return _kernels.Linear()
    if kernel == "sigmoid" or type(kernel).__name__.lower().startswith("sigmoid"):
        raise ValueError(
            "the sigmoid kernel of seed 002 Fig. 2 is not positive semidefinite, so the dual "
            "(D) would not be convex; use 'gaussian' or 'polynomial'."
        )
    # the Gaussian default σ²: mean squared distance between the whitened positives
    return _kernels.resolve_kernel(kernel, np.asarray(Xh))


@functools.partial(jax.jit, static_argnames=("gram",))
def _fit_core(moments, kernel, P, *, gram=True):
    """Whitened positives ``X̂`` and (``gram``) their Gram matrix ``Q = k(X̂, X̂)``.

    Kept apart from the QP (:func:`_solve_dual_batch`, compiled once per ``m+``), so that a
    new covariance model or kernel recompiles only this small function.
    """
    Xh = moments.whiten(P)
    if not gram:
        return Xh, None
    Q = kernel(Xh, Xh)
    return Xh, 0.5 * (Q + Q.T)


@functools.partial(jax.jit, static_argnames=("linear",))
def _finish(moments, Xh, Q, beta, *, linear):
    """``w`` (linear kernel), ``v = ¼βᵀQβ`` and the Remark 2 / Remark 3 bounds, per ν."""
    if linear:
        # ŵ = ½X̂ᵀβ, v = ‖ŵ‖² (no m+ × m+ matrix); w = ½Σ_m⁻¹Zᵀβ = Tᵀ(TZᵀβ)/2 = Tᵀŵ
        w_hat = 0.5 * jnp.matmul(beta, Xh, precision=_HI)
        v = jnp.sum(w_hat * w_hat, axis=-1)
        coef = moments._apply_Tt(w_hat)
    else:
        v = 0.25 * jnp.einsum("li,ij,lj->l", beta, Q, beta, precision=_HI)
        coef = None
    bound = v / (1 + v)
    gauss = jax.scipy.special.ndtr(-1 / jnp.sqrt(v))  # 1 − Φ(1/√v)
    return coef, v, bound, gauss


def fit_mibc(
    X,
    y,
    *,
    nu,
    covariance: str = "full",
    n_factors: int | None = None,
    rho: float | str = "auto",
    kernel=None,
    key: jax.Array | None = None,
    power_iters: int = 4,
    oversample: int = 10,
    qp: str = "auto",
    tol: float | None = None,
    max_iter: int = 100,
    dtype=None,
    memory_budget: int | None = None,
) -> MIBCModel:
    """Fit the moment-based imbalanced binary classifier MIBC (seed 002, eq. 10).

    The negatives are reduced to their mean and covariance model ``Σ_m`` (:func:`
    negative_moments`: full / diagonal / factor model of eq. 11, each ``+ ρI`` as in eq. 7);
    then the soft-margin one-class SVM of eq. (10) is solved on the whitened positives
    ``x̂_i = T(x_i − x̄)``, ``TᵀT = Σ_m⁻¹``::

        min_{w,ξ}  wᵀΣ_m w + 1/(ν m+) Σ_i ξ_i   s.t.  (x_i − x̄)ᵀw ≥ 1 − ξ_i,  ξ ≥ 0

    through its dual box QP (D) in ``m+`` variables (:func:`solve_dual`). With ``kernel`` a
    Gaussian or polynomial kernel, the kernelised variants of the paper's Fig. 2 table: the
    one-class SVM with kernel ``k(x̂_i, x̂_j)`` on the whitened rows, i.e. the Mahalanobis
    Gaussian ``exp(−(x_i − x_j)ᵀΣ_m⁻¹(x_i − x_j)/σ²)`` (Fig. 2 with ``γ = 1/σ²``) or the
    polynomial ``(γ x̂_iᵀx̂_j + c)^p`` (Fig. 2: ``γ = 1``, ``x̂_iᵀx̂_j = x_iᵀΣ_m⁻¹x_j −
    (Σ_m⁻¹x̄)ᵀ(x_i + x_j) + x̄ᵀΣ_m⁻¹x̄``).

    Cost: the moments O(m− d²) (full), O(m− d) (diag), O(m− d (k + p)) per subspace pass
    (factor); the QP O(m+ d²) per interior-point iteration for the linear kernel when
    ``d < m+``, else O(m+³) (``qp``). No ``m− × m−`` matrix is formed.

    Args:
      X: ``(m, d)`` training rows, taken as given (standardise first if you wish).
      y: two-valued labels; the rare (positive) class is ``+1``, ``1`` or ``True``.
      nu: ν ∈ (0, 1] of eq. (10) (``C = 1/(ν m+)``), or a 1-D grid (one model holding every
        ν; the QPs are solved vmapped, the moments computed once). Small ν → hard margin.
        Not the ν-property of Schölkopf's one-class SVM: eq. (10) fixes the margin at 1; the
        Schölkopf solution with parameter ν' and offset ρ' is eq. (10)'s with
        ``ν = ν'ρ'/2`` on the whitened data (with scikit-learn's scaling, ``ν = offset_/(2 m+)``).
      covariance: ``"full"``, ``"diag"`` or ``"factor"`` (see :func:`negative_moments`).
      n_factors: ``k`` of the factor model (``covariance="factor"`` only).
      rho: ρ ≥ 0 of the robust covariance ``Σ + ρI`` (eq. 7), or ``"auto"`` (default): the
        small ridge of :func:`default_rho`, ``max(1e-6 · tr(Σ̂)/d, 1000 · max(d, √m−) · ε ·
        max_j Σ̂_jj)`` (ε the dtype's epsilon; the second term binds in float32 only), so that
        one-hot or collinear features (KEEL abalone19) work out of the box. ``rho=0`` is the
        paper's exact Σ̂ and refuses a singular one. The ρ used is ``model.moments.rho``.
      kernel: ``None`` / ``"linear"`` (eq. 10), ``"gaussian"``, ``"polynomial"`` or a kernel
        object from :mod:`jaxrank.kernels`; a Gaussian with ``sigma2=None`` takes the mean
        squared distance between the whitened positives.
      key: ``jax.random.key`` (needed by ``covariance="factor"``).
      power_iters, oversample: subspace iteration of the factor model.
      qp: how the interior point solves its Newton systems (:func:`solve_dual`): ``"dense"``
        (``m+ × m+`` Cholesky, O(m+³) per iteration, any kernel), ``"low_rank"`` (linear kernel
        only: Woodbury on ``Q = X̂X̂ᵀ``, O(m+ d²), no ``m+ × m+`` matrix) or ``"auto"``
        (``"low_rank"`` for the linear kernel when ``d < m+``, else ``"dense"``).
      tol: relative duality gap of the QP (default 1e-12 in float64, 1e-5 in float32).
      max_iter: cap on interior-point iterations.
      dtype: ``float32`` or ``float64`` (default as in :func:`jaxrank.fit`).
      memory_budget: bytes the full ``d × d`` covariance may take.

    Returns:
      :class:`MIBCModel`, with the Remark 2 bound ``neg_error_bound`` on the negative error.

    Raises:
      ValueError: NaN/inf in ``X``, labels not two-valued or without a positive class, length
        mismatch, ν ∉ (0, 1], ρ < 0, a bad ``covariance`` / ``n_factors`` / ``kernel``, fewer
        than 2 negatives, values whose squares overflow the dtype (or whose variances
        underflow it), or a singular covariance model (with ``rho=0`` or a ρ too small).

    Warns:
      ConvergenceWarning: the QP stopped above ``tol`` (status in ``model.info.status``).

    Example:
      >>> import numpy as np
      >>> from jaxrank import datasets, metrics
      >>> X, y = datasets.make_rare_class(600, 0.05, 0.75, seed=0)
      >>> model = fit_mibc(X, y, nu=0.5)
      >>> model.decision_function(X).shape
      (600,)
      >>> bool(0 < float(model.neg_error_bound) < 1)
      True
    """
    X, pos = check_X_y(X, y)
    nus, scalar = _check_nu(nu)
    rho = _check_rho(rho)
    n_pos = int(pos.sum())
    n_neg = int(pos.size - n_pos)
    k = _check_moment_options(covariance, n_factors, n_neg, X.shape[1], key)
    power_iters = _check_int(power_iters, "power_iters", 0)
    oversample = _check_int(oversample, "oversample", 0)
    max_iter = _check_int(max_iter, "max_iter", 1)
    if qp not in ("auto", "dense", "low_rank"):
        raise ValueError(f"qp must be 'auto', 'dense' or 'low_rank', got {qp!r}.")
    dt = _choose_dtype(X, dtype)
    tol = _default_tol(dt) if tol is None else check_positive(tol, "tol")
    if kernel is not None and not isinstance(
        kernel, str | _kernels.Gaussian | _kernels.Linear | _kernels.Polynomial
    ):
        raise ValueError(f"kernel must be a jaxrank kernel or a name, got {type(kernel)!r}.")
    check_cast(X, dt)  # squares that overflow the dtype: a clear error, not a "singular" Σ
    rho = _resolve_rho(rho, X[~pos], dt)

    moments = _negative_moments(
        X[~pos], covariance, k, rho, key, power_iters, oversample, dt, memory_budget
    )
    P = jnp.asarray(X[pos], dt)
    if kernel is None or isinstance(kernel, _kernels.Linear) or kernel == "linear":
        kern = _kernels.Linear()
    else:
        kern = _resolve_mibc_kernel(kernel, _whiten(moments, P))
    C = jnp.asarray(1.0 / (nus * n_pos), dt)
    linear = isinstance(kern, _kernels.Linear)
    if qp == "low_rank" and not linear:
        raise ValueError("qp='low_rank' needs the linear kernel (Q = X̂X̂ᵀ); use qp='dense'.")
    low_rank = qp == "low_rank" or (qp == "auto" and linear and X.shape[1] < n_pos)
    Xh, Q = _fit_core(moments, kern, P, gram=not low_rank)
    beta, info = _solve_dual_batch(
        Xh if low_rank else Q, C, jnp.asarray(tol, dt), max_iter=max_iter, low_rank=low_rank
    )
    coef, v, bound, gauss = _finish(moments, Xh, Q, beta, linear=linear)
    _warn_status(info, nus, tol)
    model = MIBCModel(
        moments=moments,
        kernel=kern,
        basis=Xh,
        dual_coef=beta,
        coef=coef,
        nu=jnp.asarray(nus, dt),
        C=C,
        margin_norm2=v,
        neg_error_bound=bound,
        neg_error_bound_gaussian=gauss,
        info=info,
    )
    if scalar:
        model = model.select(0)
    return model


def _warn_status(info: MIBCInfo, nus: np.ndarray, tol: float) -> None:
    status = np.asarray(info.status)
    bad = np.flatnonzero(status != Status.CONVERGED)
    if bad.size == 0:
        return
    rel = np.asarray(info.gap) / np.maximum(np.asarray(info.objective), np.finfo(float).tiny)
    parts = [
        f"nu={nus[i]:.3g}: {Status(int(status[i])).name} after "
        f"{int(np.asarray(info.iterations)[i])} iterations, relative gap {rel[i]:.2e}"
        for i in bad[:6]
    ]
    more = f" (and {bad.size - 6} more)" if bad.size > 6 else ""
    warnings.warn(
        f"MIBC dual QP stopped above the duality-gap tolerance {tol:.1e} for {bad.size} of "
        f"{status.size} nu value(s): " + "; ".join(parts) + more + ". MAX_ITER: raise max_iter; "
        "PRECISION: the gap cannot shrink further in this dtype (use float64 or a larger tol); "
        "NONFINITE: check the data.",
        ConvergenceWarning,
        stacklevel=3,
    )


# --------------------------------------------------------------------------------------------
# Saving and loading (jaxrank.io): MIBC models join its registry
# --------------------------------------------------------------------------------------------

_MOMENT_FIELDS = ("mean", "rho", "chol", "diag", "factors", "basis", "shrink")


def _to_arrays(model: MIBCModel) -> dict[str, Any]:
    fields = {f"moments.{f}": getattr(model.moments, f) for f in _MOMENT_FIELDS}
    fields["moments.covariance"] = model.moments.covariance
    fields["kernel"] = model.kernel
    fields["basis"] = model.basis
    for name in _PER_NU:
        if name != "info":
            fields[name] = getattr(model, name)
    for f in MIBCInfo._fields:
        fields[f"info.{f}"] = getattr(model.info, f)
    return fields


def _from_arrays(fields: dict[str, Any]) -> MIBCModel:
    covariance = fields["moments.covariance"]
    if covariance not in _COVARIANCES:
        raise ValueError(f"unknown covariance model {covariance!r}.")
    moments = NegativeMoments(
        **{f: fields[f"moments.{f}"] for f in _MOMENT_FIELDS}, covariance=covariance
    )
    model = MIBCModel(
        moments=moments,
        kernel=fields["kernel"],
        basis=fields["basis"],
        info=MIBCInfo(**{f: fields[f"info.{f}"] for f in MIBCInfo._fields}),
        **{name: fields[name] for name in _PER_NU if name != "info"},
    )
    _check_loaded(model)
    return model


def _check_loaded(model: MIBCModel) -> None:
    """Shapes that must agree for ``decision_function`` and ``select`` to work."""
    mom = model.moments
    b = np.shape(model.basis)
    nu = np.shape(model.nu)
    problems = []
    need = {"full": ("chol",), "diag": ("diag",), "factor": ("diag", "factors", "basis", "shrink")}
    for f in need[mom.covariance]:
        if getattr(mom, f) is None:
            problems.append(f"covariance {mom.covariance!r} needs moments.{f}")
    if len(b) != 2 or np.shape(mom.mean) != (b[1],):
        problems.append(f"basis {b} and moments.mean {np.shape(mom.mean)} disagree")
    elif len(nu) > 1 or np.shape(model.dual_coef) != (*nu, b[0]):
        problems.append(f"dual_coef {np.shape(model.dual_coef)}, nu {nu}, basis {b} disagree")
    elif model.coef is not None and np.shape(model.coef) != (*nu, b[1]):
        problems.append(f"coef {np.shape(model.coef)}, nu {nu}, basis {b} disagree")
    if not isinstance(model.kernel, _kernels.Gaussian | _kernels.Linear | _kernels.Polynomial):
        problems.append(f"kernel {type(model.kernel).__name__} is not a jaxrank kernel")
    for f in MIBCInfo._fields:
        if np.shape(getattr(model.info, f)) != nu:
            problems.append(f"info.{f} has shape {np.shape(getattr(model.info, f))}, nu {nu}")
    if problems:
        raise ValueError("inconsistent MIBCModel: " + "; ".join(problems) + ".")
    _check_loaded_values(model)


def _check_loaded_values(model: MIBCModel) -> None:
    """Every field as strictly as :func:`fit_mibc` checks its arguments (``_check_nu``,
    ``_check_rho``) and as its solve leaves them: one float dtype (the basis's), ν in (0, 1],
    C finite > 0, ρ finite >= 0, a positive covariance diagonal, ``β`` in ``[0, C]``, bounds in
    ``[0, 1]``, status codes of a finished solve and iteration counts >= 0. A solve that ended
    ``NONFINITE`` may hold NaN in its own row, as :func:`jaxrank.io.check_fitted_fields`
    allows for the kernel rankers."""
    mom = model.moments
    dt = np.asarray(model.basis).dtype
    fp = _io.float_problems
    problems = fp(model.basis, "basis", dtype=dt)
    if problems:  # the dtype every other field must share
        raise ValueError("invalid MIBCModel: " + "; ".join(problems) + ".")
    problems += fp(mom.mean, "moments.mean", dtype=dt)
    problems += fp(mom.rho, "moments.rho", dtype=dt, lo=0.0)
    if mom.chol is not None:
        problems += fp(mom.chol, "moments.chol", dtype=dt)
    if mom.diag is not None:
        problems += fp(mom.diag, "moments.diag", dtype=dt, lo=0.0, open_lo=True)
    for f in ("factors", "basis"):
        if getattr(mom, f) is not None:
            problems += fp(getattr(mom, f), f"moments.{f}", dtype=dt)
    if mom.shrink is not None:
        problems += fp(mom.shrink, "moments.shrink", dtype=dt, lo=0.0, hi=1.0)
    problems += fp(model.nu, "nu", dtype=dt, lo=0.0, hi=1.0, open_lo=True)
    problems += fp(model.C, "C", dtype=dt, lo=0.0, open_lo=True)
    status_bad = _io.status_problems(model.info.status)
    problems += status_bad + _io.count_problems(model.info.iterations, "info.iterations")
    ok = ~np.isin(np.asarray(model.info.status), [Status.NONFINITE])  # rows promising numbers
    C = np.asarray(model.C, dtype=float) if not problems else None
    per_row = [
        ("dual_coef", model.dual_coef, 0.0, None),
        ("coef", model.coef, None, None),
        ("margin_norm2", model.margin_norm2, 0.0, None),
        ("neg_error_bound", model.neg_error_bound, 0.0, 1.0),
        ("neg_error_bound_gaussian", model.neg_error_bound_gaussian, 0.0, 1.0),
        ("info.objective", model.info.objective, None, None),
        ("info.dual_objective", model.info.dual_objective, None, None),
        ("info.gap", model.info.gap, None, None),
    ]
    for f, v, lo, hi in per_row:
        if v is None:
            continue
        if status_bad or np.asarray(v).dtype != dt:
            problems += fp(v, f, dtype=dt)  # dtype (and finiteness, with no status to trust)
        else:
            problems += fp(
                np.asarray(v)[ok] if np.ndim(v) else np.asarray(v)[None][ok], f, lo=lo, hi=hi
            )
    if C is not None and not any(p.startswith("dual_coef") for p in problems):
        beta = np.asarray(model.dual_coef, dtype=float)
        # β = γC with γ in [0, 1]: a few ulps of rounding in the product, no more
        over = (beta > (C * (1 + 8 * np.finfo(dt).eps))[..., None]) & ok[..., None]
        if np.any(over):
            problems.append(f"dual_coef exceeds C (max {beta.max()!r}, C {C.tolist()!r})")
    if problems:
        raise ValueError("invalid MIBCModel: " + "; ".join(problems) + ".")


_io.register_model("MIBCModel", MIBCModel, _to_arrays, _from_arrays)
