"""MIBC's summary of the negative class: its mean and a covariance model (seed 002).

Full, diagonal or factor (eq. 11) covariance, made robust as Σ + ρI (eq. 7); the whitening the
one-class SVM of :mod:`jaxrank.mibc` runs on. :mod:`jaxrank.mibc` re-exports
:class:`NegativeMoments`, :func:`negative_moments` and :func:`default_rho`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _linalg
from jaxrank import kernels as _kernels
from jaxrank._fitting import choose_dtype
from jaxrank._precision import HIGHEST as _HI
from jaxrank._validation import check_cast, check_X

__all__ = [
    "COVARIANCES",
    "NegativeMoments",
    "check_count",
    "check_moment_options",
    "check_nonneg",
    "check_rho",
    "default_rho",
    "moments_of",
    "negative_moments",
    "resolve_rho",
]


COVARIANCES = ("full", "diag", "factor")


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

    Example:
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> moments = jaxrank.fit_mibc(X, y, nu=0.5).moments  # the majority class, summarised
      >>> moments.mean.shape, moments.covariance
      ((5,), 'full')
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
            return _linalg.solve_triangular(self.chol, U.T, lower=True).T
        V = U / jnp.sqrt(self.diag)
        if self.covariance == "diag":
            return V
        return V - jnp.matmul(
            jnp.matmul(V, self.basis, precision=_HI) * self.shrink, self.basis.T, precision=_HI
        )

    def _apply_Tt(self, V: jax.Array) -> jax.Array:
        """``Tᵀ`` applied to each row of ``V``."""
        if self.covariance == "full":
            return _linalg.solve_triangular(self.chol, V.T, lower=True, trans="T").T
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


# named by its public path (pickles, jax.export's serialised name, doctest, the API reference)
NegativeMoments.__module__ = "jaxrank.mibc"


def check_nonneg(value, name: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number >= 0, got {value!r}.")
    try:
        v = float(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}.") from err
    if not math.isfinite(v) or v < 0:
        raise ValueError(f"{name} must be finite and >= 0, got {value!r}.")
    return v


def check_count(value, name: str, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    v = int(value)
    if v < lo or (hi is not None and v > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ValueError(f"{name} must be in {rng}, got {v}.")
    return v


def check_moment_options(covariance, n_factors, n_neg: int, d: int, key) -> int | None:
    if covariance not in COVARIANCES:
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
    k = check_count(n_factors, "n_factors", 1, hi)
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
    rho = check_rho(rho)
    k = check_moment_options(covariance, n_factors, X.shape[0], X.shape[1], key)
    power_iters = check_count(power_iters, "power_iters", 0)
    oversample = check_count(oversample, "oversample", 0)
    dt = choose_dtype(X, dtype)
    check_cast(X, dt, name="X_neg")
    rho = resolve_rho(rho, X, dt, name="X_neg")
    return moments_of(X, covariance, k, rho, key, power_iters, oversample, dt, memory_budget)


# The default ridge of eq. (7), relative to the features' mean variance (scikit-learn's
# GaussianMixture adds reg_covar = 1e-6 to the diagonal of data it expects standardised).
_RHO_RELATIVE = 1e-6


def check_rho(rho) -> float | str:
    if isinstance(rho, str):
        if rho != "auto":
            raise ValueError(f"rho must be a number >= 0 or 'auto', got {rho!r}.")
        return rho
    return check_nonneg(rho, "rho")


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

    Example:
      >>> import numpy as np
      >>> from jaxrank.mibc import default_rho
      >>> X_neg = np.random.default_rng(0).normal(size=(100, 3))
      >>> default_rho(X_neg, np.float64) < default_rho(X_neg, np.float32)  # float32: more ridge
      True
    """
    X = check_X(X_neg, name="X_neg")
    return _default_rho(_variances(X), X.shape[0], dtype)


def _default_rho(var: np.ndarray, m: int, dtype) -> float:
    eps = float(np.finfo(np.dtype(dtype)).eps)
    floor = 30 * max(var.size, math.sqrt(m)) * eps * float(var.max())
    return max(_RHO_RELATIVE * float(var.mean()), floor)


def resolve_rho(rho, X, dt, *, name: str = "X") -> float:
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


def moments_of(X, covariance, k, rho, key, power_iters, oversample, dt, memory_budget):
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
    return mean, _linalg.cholesky(cov)


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
    lam, W = _linalg.eigh(jnp.matmul(Q.T, gram(Q), precision=_HI))
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
