"""MIBC's model and fit: :class:`MIBCModel` and :func:`fit_mibc` (import them from
:mod:`jaxrank.mibc`, whose docstring gives the method: seed 002's eq. 3-11 and the dual (D))."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _flax
from jaxrank import io as _io
from jaxrank import kernels as _kernels
from jaxrank._fitting import choose_dtype
from jaxrank._precision import HIGHEST as _HI
from jaxrank._validation import (
    check_cast,
    check_fit_result,
    check_in_dtype,
    check_positive,
    check_X_y,
)
from jaxrank.mibc._moments import (
    COVARIANCES,
    NegativeMoments,
    check_count,
    check_moment_options,
    check_nonneg,
    check_rho,
    moments_of,
    resolve_rho,
)
from jaxrank.mibc._qp import MIBCInfo, default_tol, solve_dual_batch
from jaxrank.model import score_input, warn_stopped
from jaxrank.solver import Status

__all__ = ["MIBCModel", "fit_mibc"]  # the rest of the family's face: its __init__


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

    Example:
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> model = jaxrank.fit_mibc(X, y, nu=0.5)
      >>> model.decision_function(X).shape
      (200,)
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

    def __post_init__(self):
        _flax.register(self)  # flax.serialization support when flax is imported (no-op else)

    @property
    def covariance(self) -> str:
        return self.moments.covariance

    def _check(self, X) -> jax.Array:
        return jnp.asarray(score_input(X, self.basis.shape[1], self.basis.dtype, self))

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
        r = check_nonneg(mean_radius, "mean_radius")
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


# named by its public path, as before the move into this module: pickles and jax.export's
# serialised name stay jaxrank.mibc.MIBCModel; doctest and the API reference find it there
MIBCModel.__module__ = "jaxrank.mibc"


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


def _resolve_mibc_kernel(kernel, Xh, dt):
    if kernel is None or kernel == "linear":
        return _kernels.Linear()
    if kernel == "sigmoid" or type(kernel).__name__.lower().startswith("sigmoid"):
        raise ValueError(
            "the sigmoid kernel of seed 002 Fig. 2 is not positive semidefinite, so the dual "
            "(D) would not be convex; use 'gaussian' or 'polynomial'."
        )
    # the Gaussian default σ²: mean squared distance between the whitened positives
    return _kernels.resolve_kernel(kernel, np.asarray(Xh), dtype=dt)


@functools.partial(jax.jit, static_argnames=("gram",))
def _fit_core(moments, kernel, P, *, gram=True):
    """Whitened positives ``X̂`` and (``gram``) their Gram matrix ``Q = k(X̂, X̂)``.

    Kept apart from the QP (:func:`solve_dual_batch`, compiled once per ``m+``), so that a
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
    rho = check_rho(rho)
    n_pos = int(pos.sum())
    n_neg = int(pos.size - n_pos)
    k = check_moment_options(covariance, n_factors, n_neg, X.shape[1], key)
    power_iters = check_count(power_iters, "power_iters", 0)
    oversample = check_count(oversample, "oversample", 0)
    max_iter = check_count(max_iter, "max_iter", 1)
    if qp not in ("auto", "dense", "low_rank"):
        raise ValueError(f"qp must be 'auto', 'dense' or 'low_rank', got {qp!r}.")
    dt = choose_dtype(X, dtype)
    tol = default_tol(dt) if tol is None else check_positive(tol, "tol")
    if kernel is not None and not isinstance(
        kernel, str | _kernels.Gaussian | _kernels.Linear | _kernels.Polynomial
    ):
        raise ValueError(f"kernel must be a jaxrank kernel or a name, got {type(kernel)!r}.")
    check_cast(X, dt)  # squares that overflow the dtype: a clear error, not a "singular" Σ
    rho = resolve_rho(rho, X[~pos], dt)

    moments = moments_of(
        X[~pos], covariance, k, rho, key, power_iters, oversample, dt, memory_budget
    )
    P = jnp.asarray(X[pos], dt)
    if kernel is None or isinstance(kernel, _kernels.Linear) or kernel == "linear":
        kern = _kernels.Linear()
    else:
        kern = _resolve_mibc_kernel(kernel, _whiten(moments, P), dt)
    for c in 1.0 / (nus * n_pos):  # nu=1e-300: C = 1/(ν m+) is inf in the QP's dtype
        check_in_dtype(c, "C = 1/(nu·m+)", dt, hint="raise nu (ν m+ < 1 already means C > 1)")
    C = jnp.asarray(1.0 / (nus * n_pos), dt)
    linear = isinstance(kern, _kernels.Linear)
    if qp == "low_rank" and not linear:
        raise ValueError("qp='low_rank' needs the linear kernel (Q = X̂X̂ᵀ); use qp='dense'.")
    low_rank = qp == "low_rank" or (qp == "auto" and linear and X.shape[1] < n_pos)
    Xh, Q = _fit_core(moments, kern, P, gram=not low_rank)
    beta, info = solve_dual_batch(
        Xh if low_rank else Q, C, jnp.asarray(tol, dt), max_iter=max_iter, low_rank=low_rank
    )
    check_fit_result(
        beta, info.status, "nu", nus, who="fit_mibc", dtype=dt,
        causes=["nu (C = 1/(ν m+) large: a hard margin in the whitened space)",
                "X's scale or the kernel's parameters for this dtype (try dtype=np.float64)"],
    )  # fmt: skip
    coef, v, bound, gauss = _finish(moments, Xh, Q, beta, linear=linear)
    check_fit_result(  # v = ‖w‖² = 0: every score -ρ, a model that ranks nothing (any kernel)
        np.asarray(v).reshape(-1, 1), info.status, "nu", nus, who="fit_mibc", dtype=dt,
        causes=["X far from the origin relative to its spread for this dtype (centre X, e.g. "
                "StandardScaler)", "every positive row equal after whitening"],
    )  # fmt: skip
    if not np.all(np.asarray(info.status) == Status.CONVERGED):  # the gaps, for a warning
        rel = np.asarray(info.gap) / np.maximum(np.asarray(info.objective), np.finfo(float).tiny)
        warn_stopped(
            info.status, info.iterations, "nu", nus, "relative gap ", rel,
            head=f"MIBC dual QP stopped above the duality-gap tolerance {tol:.1e}",
            stacklevel=3,  # the caller of fit_mibc
        )  # fmt: skip
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
    if covariance not in COVARIANCES:
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
    ``check_rho``) and as its solve leaves them: one float dtype (the basis's), ν in (0, 1],
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
# its info and its moments by name: the annotations do not resolve while jaxrank.mibc, the
# module the class names, is still importing
_io.register_export(MIBCInfo)
_io.register_export(NegativeMoments)
