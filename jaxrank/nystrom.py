"""Nyström features: the linearisation of an R-subset kernel ranker (seed 000 eq. 14-15).

With the basis Gram matrix ``K_RR = U Λ Uᵀ`` (eigenvalues ``λ_1 ≥ … ≥ λ_|R| ≥ 0``), the features

    z(x) = Λ_r^{-1/2} U_rᵀ k_R(x),      Z = K_{·R} U_r Λ_r^{-1/2}   (m × r)

(``k_R(x) = (k(x_r, x))_{r∈R}``; ``U_r, Λ_r`` the eigenpairs kept, see below) turn the R-subset
problem (seed 000 eq. 11; seed 003 eq. 41)

    min_β  L(K_{·R} β) + (λ/2) βᵀ K_RR β

into the *linear* problem (seed 003 eq. 42, the proof of Prop. 5; seed 000 eq. 15)

    min_w  L(Z w) + (λ/2) ||w||²,       w = Λ_r^{1/2} U_rᵀ β,   β = U_r Λ_r^{-1/2} w,

because ``K_{·R} β = Z w`` and ``βᵀ K_RR β = ||w||²``. So a linear ranker trained on ``Z``
(same loss, same λ, identity regulariser) has exactly the decision values of the kernel ranker
``jaxrank.fit(X, y, lam, basis=R)``. ``Z Zᵀ = K_{·R} K_RR^† K_{R·}`` is the Nyström
approximation ``K′`` of the full kernel matrix (seed 003, Prop. 5).

**Pseudo-inverse cutoff.** Eigenvalues ``λ_k ≤ rcond · λ_1`` are dropped (``Λ^{+1/2}``: the
pseudo-inverse square root). Default ``rcond = |R| · eps`` of the dtype, the rounding level of an
eigendecomposition of ``K_RR`` (as numpy's ``matrix_rank``): below it an eigenvalue is noise and
``λ_k^{-1/2}`` would amplify that noise. A dropped direction ``u_k`` carries almost no function:
``|k_R(x)ᵀ u_k| ≤ √(κ λ_k)`` (Cauchy-Schwarz in feature space), so dropping it changes the
ranker by at most that much; for exactly repeated basis rows it changes nothing.

The features are computed by streaming row chunks of ``X`` (:func:`jaxrank.kernels.stream_matvec`:
peak memory the output plus one ~32 MiB chunk); the output ``(n, r)`` itself is checked against
the memory budget.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _linalg
from jaxrank import kernels as _kernels
from jaxrank._precision import HIGHEST as _HI
from jaxrank._validation import check_X

__all__ = ["NystromMap", "nystrom_features", "nystrom_map", "pinv_sqrt"]


def _dtype(X: np.ndarray, dtype) -> np.dtype:
    # the rule of jaxrank.fit: float64 only when asked for (or X is float64) and x64 is on
    if dtype is not None:
        dt = np.dtype(dtype)
        if dt not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {dt}.")
        if dt == np.float64 and not jax.config.jax_enable_x64:
            raise ValueError(
                "dtype=float64 needs x64: call jax.config.update('jax_enable_x64', True) first."
            )
        return dt
    if X.dtype == np.float64 and jax.config.jax_enable_x64:
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def _needs_sigma2(kernel) -> bool:
    if kernel is None or isinstance(kernel, str):
        return kernel in (None, "gaussian", "rbf")
    return isinstance(kernel, _kernels.Gaussian) and kernel.sigma2 is None


def _check_rcond(rcond) -> float:
    try:
        r = float(rcond)
    except (TypeError, ValueError):
        r = float("nan")
    if isinstance(rcond, bool) or not 0 <= r < 1:
        raise ValueError(f"rcond must lie in [0, 1), got {rcond!r}.")
    return r


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class NystromMap:
    """A fitted Nyström feature map ``z(x) = Λ_r^{-1/2} U_rᵀ k_R(x)`` (seed 003 eq. 42).

    Build it with :func:`nystrom_map`; a registered pytree (all fields are leaves).

    Attributes:
      basis: ``(n_basis, d)`` basis rows ``x_r``.
      proj: ``(n_basis, r)`` the matrix ``U_r Λ_r^{-1/2}``; ``Z = K_{·R} proj``.
      eigvals: ``(r,)`` the kept eigenvalues of ``K_RR``, descending.
      kernel: the resolved kernel.

    Example:
      >>> import jaxrank
      >>> from jaxrank.nystrom import nystrom_map
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> nmap = nystrom_map(X[y == 1], X=X)  # the rare rows as landmarks
      >>> nmap.basis.shape, nmap.transform(X).shape == (200, nmap.n_components)
      ((20, 5), True)
    """

    basis: jax.Array
    proj: jax.Array
    eigvals: jax.Array
    kernel: Any

    @property
    def n_components(self) -> int:
        """``r``: the number of features (the numerical rank of ``K_RR``)."""
        return int(self.proj.shape[1])

    def transform(self, X, *, memory_budget: int | None = None) -> jax.Array:
        """The features ``Z = k(X, basis) U_r Λ_r^{-1/2}``, streamed over row chunks of ``X``.

        Args:
          X: ``(n, d)`` rows.
          memory_budget: bytes the ``(n, r)`` output may take (default as in
            :func:`jaxrank.fit`).

        Returns:
          ``(n, r)`` in the map's dtype.
        """
        X = check_X(X)
        if X.shape[1] != self.basis.shape[1]:
            raise ValueError(
                f"X has {X.shape[1]} features, the Nyström basis has {self.basis.shape[1]}."
            )
        dt = self.basis.dtype
        _kernels.check_memory(
            X.shape[0] * self.n_components * dt.itemsize,
            memory_budget,
            f"the Nyström features ({X.shape[0]} x {self.n_components})",
        )
        Xd = jnp.asarray(X, dt)
        return _kernels.stream_matvec(self.kernel, Xd, self.basis, self.proj.T).T

    def weights(self, coef) -> jax.Array:
        """Linear weights ``w = Λ_r^{1/2} U_rᵀ β`` of kernel coefficients ``β`` (eq. 42).

        ``transform(X) @ weights(β)`` equals ``Σ_r β_r k(x_r, x)`` up to the dropped
        eigen-directions (module notes).

        Args:
          coef: ``(n_basis,)`` or ``(L, n_basis)`` (e.g. ``RankModel.coef`` fitted on this basis).

        Returns:
          ``(r,)`` or ``(L, r)``.
        """
        coef = jnp.asarray(coef, self.proj.dtype)
        # Λ^{1/2} Uᵀ β = Λ (Λ^{-1/2} Uᵀ β) = eigvals ∘ (projᵀ β)
        return self.eigvals * jnp.matmul(coef, self.proj, precision=_HI)

    def coef(self, w) -> jax.Array:
        """Kernel coefficients ``β = U_r Λ_r^{-1/2} w`` of linear weights ``w`` (eq. 42).

        Args:
          w: ``(r,)`` or ``(L, r)``.

        Returns:
          ``(n_basis,)`` or ``(L, n_basis)``: ``Σ_r β_r k(x_r, x) = z(x)ᵀ w`` exactly.
        """
        w = jnp.asarray(w, self.proj.dtype)
        return jnp.matmul(w, self.proj.T, precision=_HI)


@jax.jit
def pinv_sqrt(Krr: jax.Array, rcond) -> tuple[jax.Array, jax.Array]:
    """``U Λ^{+1/2}`` of a PSD matrix ``K_RR = U Λ Uᵀ``, with static shape (jit- and vmappable).

    Args:
      Krr: ``(n, n)`` symmetric positive semi-definite (symmetrised here).
      rcond: relative cutoff: eigenvalues ``≤ rcond · λ_1`` get a zero column.

    Returns:
      ``(proj, eigvals)``: ``(n, n)`` with columns ``u_k / √λ_k`` (zero for a dropped
      ``λ_k``) and the ``(n,)`` eigenvalues, both in descending eigenvalue order. Then
      ``proj projᵀ = K_RR^†`` (the cutoff pseudo-inverse) and ``K_{·R} proj`` are the Nyström
      features (with zero columns where dropped).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.nystrom import pinv_sqrt
      >>> proj, eigvals = pinv_sqrt(jnp.diag(jnp.array([4.0, 1.0, 0.0])), 1e-6)
      >>> eigvals
      Array([4., 1., 0.], dtype=float32)
      >>> jnp.abs(proj).max(axis=0)  # 1/√λ, 0 for the dropped eigenvalue
      Array([0.5, 1. , 0. ], dtype=float32)
    """
    lam, U = _linalg.eigh(0.5 * (Krr + Krr.T))
    lam, U = lam[::-1], U[:, ::-1]
    keep = lam > jnp.asarray(rcond, Krr.dtype) * lam[0]
    inv = jnp.where(keep, 1 / jnp.sqrt(jnp.where(keep, lam, 1)), 0)
    return U * inv, lam


def nystrom_map(
    basis, kernel=None, *, X=None, rcond: float | None = None, dtype=None, memory_budget=None
) -> NystromMap:
    """Fit the Nyström feature map of the basis rows ``basis`` (seed 003, Prop. 5, eq. 42).

    Eigendecomposes ``K_RR = k(basis, basis) = U Λ Uᵀ`` and keeps the eigenpairs with
    ``λ_k > rcond · λ_1`` (module notes).

    Args:
      basis: ``(n_basis, d)`` basis (landmark) rows, e.g. ``X[idx]`` for
        ``idx = jaxrank.bases.resolve_basis(...)``.
      kernel: a kernel object or name; default Gaussian. A Gaussian without σ² takes the
        paper's heuristic on ``X`` (the training rows, as :func:`jaxrank.fit` does), so pass
        ``X`` or a kernel with ``sigma2``.
      X: the training rows, only used for the σ² heuristic.
      rcond: relative eigenvalue cutoff in ``[0, 1)``; default ``n_basis · eps(dtype)``.
      dtype: ``float32`` or ``float64``; default float64 when ``basis`` is float64 and x64 is
        on, else float32.
      memory_budget: bytes the basis Gram matrix ``K_RR`` and its eigendecomposition (three
        ``(n_basis, n_basis)`` arrays: ``K_RR``, ``U`` and the projection) may take, checked
        before ``K_RR`` is built (default as in :func:`jaxrank.fit`).

    Returns:
      A :class:`NystromMap`.

    Raises:
      ValueError: bad basis rows, an unresolvable kernel, a bad ``rcond``, or a numerically
        zero ``K_RR`` (no eigenvalue above the cutoff).

    Example:
      >>> import numpy as np
      >>> from jaxrank import kernels
      >>> B = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
      >>> fmap = nystrom_map(B, kernels.gaussian(1.0))
      >>> Z = fmap.transform(B)          # Z Zᵀ = K_RR on the basis rows
      >>> bool(np.allclose(Z @ Z.T, fmap.kernel(fmap.basis, fmap.basis), atol=1e-5))
      True
    """
    B = check_X(basis, name="basis")
    dt = _dtype(B, dtype)
    if X is None and _needs_sigma2(kernel):
        raise ValueError(
            "the Gaussian σ² heuristic needs the training rows: pass X= or a kernel with "
            "sigma2 (e.g. jaxrank.kernels.gaussian(2.0))."
        )
    kernel = _kernels.resolve_kernel(kernel, check_X(X) if X is not None else B, dtype=dt)
    nb = B.shape[0]
    _kernels.check_memory(  # before the work: a 70,000-row basis is an 18 GiB Gram in float32
        3 * nb * nb * np.dtype(dt).itemsize,
        memory_budget,
        f"the basis Gram matrix K_RR ({nb} x {nb}) and its eigendecomposition",
    )
    eps = float(np.finfo(dt).eps)
    rcond = nb * eps if rcond is None else _check_rcond(rcond)
    Bd = jnp.asarray(B, dt)
    proj, lam = pinv_sqrt(kernel(Bd, Bd), rcond)
    top = float(lam[0])
    if not np.isfinite(top) or top <= 0:
        raise ValueError(
            f"K_RR has no positive eigenvalue (largest {top:.3g}): the basis rows span nothing "
            "in feature space."
        )
    keep = int(np.sum(np.asarray(lam) > rcond * top))
    proj, lam = proj[:, :keep], lam[:keep]
    return NystromMap(basis=Bd, proj=proj, eigvals=lam, kernel=kernel)


def nystrom_features(
    X, basis, kernel=None, *, rcond: float | None = None, dtype=None, memory_budget=None
) -> jax.Array:
    """Nyström features ``Z = K_{·R} U Λ^{+1/2}`` of the rows ``X`` (seed 003 eq. 42, Prop. 5).

    A linear ranker on ``Z`` — the same pairwise loss and λ with the penalty ``(λ/2)||w||²`` —
    has the decision values of the kernel ranker ``jaxrank.fit(X, y, lam, basis=R)`` (module
    notes): ``Z w = K_{·R} β`` and ``||w||² = βᵀ K_RR β`` for ``w = Λ^{1/2} Uᵀ β``.

    Args:
      X: ``(n, d)`` rows to map. When ``basis`` are rows (not a fitted map), these are the
        training rows: a Gaussian without σ² takes the heuristic on them, as :func:`jaxrank.fit`.
        For new rows, reuse the fitted map: ``fmap = nystrom_map(B, kernel, X=X_train)``,
        ``fmap.transform(X_new)`` (or pass ``fmap`` as ``basis``).
      basis: ``(n_basis, d)`` basis rows, or a fitted :class:`NystromMap`.
      kernel: a kernel object or name (default Gaussian); must be ``None`` with a fitted map.
      rcond: relative eigenvalue cutoff (:func:`nystrom_map`); ``None`` with a fitted map.
      dtype: as :func:`nystrom_map` (decided from ``X``).
      memory_budget: bytes the ``(n, r)`` output may take, and the basis Gram matrix
        (:func:`nystrom_map`); both checked before any kernel value is computed, the output at
        its largest, ``(n, n_basis)`` (the rank ``r`` is known only after the
        eigendecomposition).

    Returns:
      ``(n, r)`` features, ``r ≤ n_basis`` the numerical rank of ``K_RR``.

    Example:
      >>> import numpy as np, jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> Z = nystrom_features(X, X[y == 1])      # the RankRC basis
      >>> Z.shape
      (200, 20)
    """
    if isinstance(basis, NystromMap):
        if kernel is not None or rcond is not None or dtype is not None:
            raise ValueError(
                "kernel, rcond and dtype belong to the fitted NystromMap; pass them to "
                "nystrom_map, not with a fitted map."
            )
        return basis.transform(X, memory_budget=memory_budget)
    X = check_X(X)
    dt = _dtype(X, dtype)
    B = check_X(basis, name="basis")
    if B.shape[1] != X.shape[1]:
        raise ValueError(f"X has {X.shape[1]} features, the basis rows have {B.shape[1]}.")
    _kernels.check_memory(  # the output at its largest, before the Gram matrix and its eigh
        X.shape[0] * B.shape[0] * np.dtype(dt).itemsize,
        memory_budget,
        f"the Nyström features ({X.shape[0]} x up to {B.shape[0]})",
    )
    fmap = nystrom_map(B, kernel, X=X, rcond=rcond, dtype=dt, memory_budget=memory_budget)
    return fmap.transform(X, memory_budget=memory_budget)
