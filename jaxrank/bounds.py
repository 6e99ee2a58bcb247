"""How far an R-subset ranker (RankRC) can be from RankSVM: the bounds of seed 003, Sec. 3-4.

Seed 003 (Tayal, Coleman & Li) compares the RankSVM solution ``f*`` (every training row a basis
function, eq. 28) with the R-subset solution ``f̄*`` (eq. 29; RankRC for ``R`` = the rare class)
of the same regularised pairwise problem

    min_w  1/(m+ m−) Σ_{i∈+} Σ_{j∈−} ℓ(wᵀφ(x_i) − wᵀφ(x_j)) + (λ/2) ||w||²,

which is ``F(β)`` of :func:`jaxrank.fit` in feature space (``w = Σ_{r∈R} β_r φ(x_r)``,
``||w||² = βᵀ K_RR β``). With ``κ ≥ k(x, x)`` for every ``x``:

- **projected-map bound**, Thm 3 eq. (31) = Cor. 4 eq. (39) (:func:`projected_map_bound`)::

      |f̄*(x) − f*(x)| ≤ (2κ/λ) · ( Σ_{i∈+} 𝕀[i∉R]/m+ + Σ_{j∈−} 𝕀[j∉R]/m− )^{1/2}

  It comes from eq. (37) (the proof of Thm 3), ``||Δw||² ≤ (||w*|| + ||w_R*||)/λ ·
  (Σ_{i∈+} ||φ⊥(x_i)||/m+ + Σ_{j∈−} ||φ⊥(x_j)||/m−)``, with ``||w*||, ||w_R*|| ≤ 2√κ/λ``,
  ``|Δf(x)| ≤ ||Δw|| √κ`` and the worst case (38) ``||φ⊥(x_i)|| ≤ √κ 𝕀[i∉R]`` of the residual
  ``φ⊥ = φ − Proj_{S_R} φ``. Keeping the actual residuals in (37) gives the tighter
  :func:`projected_residual_bound` (residuals from :func:`projection_residuals`).
- **kernel-perturbation bound**, Thm 7 eq. (46) (:func:`kernel_perturbation_bound`,
  :func:`perturbation_bound`), for RankSVM with kernel matrices ``K`` and ``K′``::

      |f*_{K′}(x) − f*_K(x)| ≤ (2√2 κ^{3/4}/λ) · ||K′ − K||₂^{1/2} · [1 + (||K′ − K||₂/(4κ))^{1/4}]

  which bounds ``|f̄* − f*|`` too with the Nyström matrix ``K′ = K_{·R} K_RR^† K_{R·}``
  (Prop. 5: the R-subset problem is RankSVM with ``K′``; :func:`nystrom_kernel`,
  :func:`nystrom_perturbation_norm`).

The proofs use only that ℓ is convex and 1-Lipschitz with ``|ℓ'| ≤ 1`` (the bounds on ``||w||``
follow from the optimality condition ``λw = −1/(m+m−) ΣΣ ℓ'(·)(φ(x_i) − φ(x_j))``). The paper
states them for the hinge; they hold unchanged for jaxrank's smoothed hinge ``ℓ_ε`` for every
``ε > 0`` (slopes in ``[−1, 0]``), so ε does not enter. They do **not** hold for the squared
hinge (not Lipschitz). Seed 003 Fig. 3 compares the two (``bench/fig3_bounds.py``): with a
Gaussian kernel ``κ = 1``.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _linalg
from jaxrank import kernels as _kernels
from jaxrank._precision import HIGHEST as _HI
from jaxrank._validation import check_binary_labels, check_lam, check_positive, check_X
from jaxrank.bases import resolve_basis
from jaxrank.nystrom import NystromMap, nystrom_features, pinv_sqrt

__all__ = [
    "kernel_perturbation_bound",
    "nystrom_kernel",
    "nystrom_perturbation_norm",
    "perturbation_bound",
    "projected_map_bound",
    "projected_residual_bound",
    "projection_residuals",
]


def _lams(lam):
    lams, scalar = check_lam(lam)
    return (lams[0] if scalar else lams), scalar


def _out(value, scalar: bool):
    return float(value) if scalar else np.asarray(value, np.float64)


def _kappa(kappa) -> float:
    return check_positive(kappa, "kappa")


def _class_means(values: np.ndarray, pos: np.ndarray) -> float:
    return float(values[pos].mean() + values[~pos].mean())


def projected_map_bound(y, basis, lam, *, kappa: float = 1.0):
    """The projected-map bound of seed 003, Thm 3 eq. (31) / Cor. 4 eq. (39).

    ::

        |f̄*(x) − f*(x)| ≤ (2κ/λ) · ( Σ_{i∈+} 𝕀[i∉R]/m+ + Σ_{j∈−} 𝕀[j∉R]/m− )^{1/2}   ∀x

    between the RankSVM ranker ``f*`` (``jaxrank.fit(..., basis="all")``) and the R-subset
    ranker ``f̄*`` (``basis=R``; RankRC: ``R`` = rare class, bound ``2κ/λ``). Under the square
    root: the fraction of rare rows outside ``R`` plus the fraction of majority rows outside
    ``R``, so for a fixed ``|R|`` the bound is smallest with the rare rows first
    (``basis="rare_first"``).

    Args:
      y: ``(m,)`` two-valued labels of the training rows (rare class ``+1``, ``1`` or ``True``).
      basis: ``"rare"``, ``"all"`` or ``(|R|,)`` row indices (as :func:`jaxrank.fit`).
      lam: λ > 0 or a 1-D grid.
      kappa: ``κ ≥ sup_x k(x, x)`` (1 for the Gaussian kernel).

    Returns:
      A float for a scalar λ, else an ``(L,)`` array.

    Example:
      >>> import numpy as np
      >>> y = np.array([1, 1, -1, -1, -1, -1])
      >>> projected_map_bound(y, "rare", 1.0)             # 2·sqrt(0 + 1)
      2.0
      >>> round(projected_map_bound(y, [0, 1, 2, 3], 2.0), 6)   # 1·sqrt(0 + 2/4)
      0.707107
    """
    pos = check_binary_labels(y)
    lam, scalar = _lams(lam)
    kappa = _kappa(kappa)
    idx = resolve_basis(basis, pos)
    out = np.ones(pos.size)
    out[idx] = 0.0
    return _out(2 * kappa / lam * np.sqrt(_class_means(out, pos)), scalar)


def projected_residual_bound(residuals, y, lam, *, kappa: float = 1.0):
    """Seed 003 eq. (37) with the actual residuals: the data-dependent form of Thm 3.

    ::

        |f̄*(x) − f*(x)| ≤ (2 κ^{3/4}/λ) · ( Σ_{i∈+} ρ_i/m+ + Σ_{j∈−} ρ_j/m− )^{1/2}   ∀x

    with ``ρ_i = ||φ(x_i) − Proj_{S_R} φ(x_i)||`` (:func:`projection_residuals`). It is (37)
    with ``||w*||, ||w_R*|| ≤ 2√κ/λ`` and ``|Δf(x)| ≤ ||Δw|| √κ``; with the worst case (38)
    ``ρ_i = √κ 𝕀[i∉R]`` it is :func:`projected_map_bound` (31), so it is never larger.

    Args:
      residuals: ``(m,)`` residual norms ``ρ_i ∈ [0, √κ]`` of the training rows.
      y: ``(m,)`` two-valued labels.
      lam: λ > 0 or a 1-D grid.
      kappa: ``κ ≥ sup_x k(x, x)``.

    Returns:
      A float for a scalar λ, else an ``(L,)`` array.

    Example:
      >>> import numpy as np
      >>> from jaxrank.bounds import projected_map_bound, projected_residual_bound
      >>> y = np.array([1, 1, -1, -1, -1, -1])
      >>> rho = np.array([0.0, 0.0, 0.5, 0.2, 1.0, 0.0])  # residuals of the rows, basis rows 0
      >>> projected_residual_bound(rho, y, 1.0) <= projected_map_bound(y, np.array([0, 1]), 1.0)
      True
    """
    pos = check_binary_labels(y)
    lam, scalar = _lams(lam)
    kappa = _kappa(kappa)
    r = np.asarray(residuals, np.float64)
    if r.shape != pos.shape:
        raise ValueError(f"residuals must have shape {pos.shape} (one per row), got {r.shape}.")
    if not np.all(np.isfinite(r)) or np.any(r < 0):
        raise ValueError("residuals must be finite and >= 0.")
    if np.any(r > np.sqrt(kappa) * (1 + 1e-9)):
        raise ValueError(
            f"a residual ({r.max():.6g}) exceeds √κ = {np.sqrt(kappa):.6g}: kappa must bound "
            "k(x, x) (residuals are at most ||φ(x)|| = √k(x, x))."
        )
    return _out(2 * kappa**0.75 / lam * np.sqrt(_class_means(r, pos)), scalar)


def projection_residuals(X, basis, kernel=None, *, rcond=None) -> np.ndarray:
    """``ρ(x) = ||φ(x) − Proj_{S_R} φ(x)||`` for each row: the residual of the projected map.

    Seed 003 eq. (16), (18), (38): ``ρ(x)² = k(x, x) − k_R(x)ᵀ K_RR^† k_R(x) = k(x, x) −
    ||z(x)||²`` with the Nyström features ``z`` (:func:`jaxrank.nystrom.nystrom_features`),
    ``0`` for a basis row and at most ``√k(x, x)``. Float rounding of the difference is clipped
    at 0 (a basis row's residual is ``O(√eps)``, not exactly 0).

    Args:
      X: ``(n, d)`` rows (the training rows when ``basis`` are rows: the Gaussian σ²
        heuristic is taken on them, as :func:`jaxrank.fit` does).
      basis: ``(n_basis, d)`` basis rows or a fitted :class:`~jaxrank.nystrom.NystromMap`.
      kernel, rcond: as :func:`~jaxrank.nystrom.nystrom_features`.

    Returns:
      ``(n,)`` float64 numpy array.

    Example:
      >>> import jaxrank
      >>> from jaxrank.bounds import projection_residuals
      >>> X, y = jaxrank.datasets.make_rare_class(100, 0.1, 0.75, seed=0)
      >>> rho = projection_residuals(X, X[y == 1])  # basis: the rare rows
      >>> rho.shape, bool(rho[y == 1].max() < 1e-2), bool(rho.max() <= 1.0)
      ((100,), True, True)
    """
    X = check_X(X)
    if not isinstance(basis, NystromMap):
        kernel = _kernels.resolve_kernel(kernel, X)  # σ² heuristic on X, as nystrom_features
    Z = nystrom_features(X, basis, kernel, rcond=rcond)
    k = basis.kernel if isinstance(basis, NystromMap) else kernel
    diag = k.diag(jnp.asarray(X, Z.dtype))
    sq = jnp.sum(Z * Z, axis=1)
    return np.sqrt(np.maximum(np.asarray(diag - sq, np.float64), 0.0))


def perturbation_bound(delta, lam, *, kappa: float = 1.0):
    """The kernel-perturbation bound of seed 003, Thm 7 eq. (46), from ``δ = ||K′ − K||₂``.

    ::

        |f*_{K′}(x) − f*_K(x)| ≤ (2√2 κ^{3/4}/λ) · δ^{1/2} · [1 + (δ/(4κ))^{1/4}]   ∀x

    (Cortes et al. 2010's SVM bound, doubled by the ranking loss's double sum.)

    Args:
      delta: ``δ ≥ 0``, a number or an array (e.g. one per random basis).
      lam: λ > 0 or a 1-D grid; broadcast against ``delta`` by numpy's rules.
      kappa: ``κ ≥ sup_x k(x, x)`` for both kernels.

    Returns:
      A float when both are scalars, else an array.

    Example:
      >>> perturbation_bound(4.0, 1.0)     # 2√2 · 2 · (1 + 1) = 8√2
      11.313708498984761
    """
    lam, scalar = _lams(lam)
    kappa = _kappa(kappa)
    d = np.asarray(delta, np.float64)
    if not np.all(np.isfinite(d)) or np.any(d < 0):
        raise ValueError("delta (a spectral norm) must be finite and >= 0.")
    out = 2 * np.sqrt(2) * kappa**0.75 / lam * np.sqrt(d) * (1 + (d / (4 * kappa)) ** 0.25)
    return _out(out, scalar and d.ndim == 0)


def _check_gram(K, name: str) -> jax.Array:
    arr = check_X(K, name=name)
    if arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be a square kernel matrix, got shape {arr.shape}.")
    return jnp.asarray(arr)


def kernel_perturbation_bound(K, K_prime, lam, *, kappa: float = 1.0):
    """Thm 7 eq. (46) of seed 003 for two kernel matrices: :func:`perturbation_bound` at
    ``δ = ||K′ − K||₂`` (exact: the largest singular value).

    With ``K′ = nystrom_kernel(K, R)`` it bounds ``|f̄*(x) − f*(x)|`` between the R-subset
    ranker and RankSVM (seed 003, Prop. 5 and the text after eq. 46).

    Args:
      K, K_prime: ``(m, m)`` kernel matrices on the training rows.
      lam: λ > 0 or a 1-D grid.
      kappa: ``κ ≥ sup_x k(x, x)``; checked against the diagonals.

    Returns:
      A float for a scalar λ, else an ``(L,)`` array.

    Example:
      >>> import numpy as np
      >>> from jaxrank.bounds import kernel_perturbation_bound, nystrom_kernel
      >>> from jaxrank.kernels import gaussian
      >>> X = np.random.default_rng(0).normal(size=(40, 2))
      >>> K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 2.0)  # Gaussian, σ² = 2: κ = 1
      >>> K_prime = np.asarray(nystrom_kernel(K, np.arange(10)), np.float64)  # 10 basis rows
      >>> bound = kernel_perturbation_bound(K, K_prime, 1.0, kappa=1.01)  # κ over float32 rounding
      >>> bool(bound > 0)
      True
    """
    K = _check_gram(K, "K")
    Kp = _check_gram(K_prime, "K_prime")
    if K.shape != Kp.shape:
        raise ValueError(f"K and K_prime differ in shape: {K.shape} vs {Kp.shape}.")
    kappa = _kappa(kappa)
    top = float(max(jnp.max(jnp.diag(K)), jnp.max(jnp.diag(Kp))))
    if top > kappa * (1 + 1e-9):
        raise ValueError(f"kappa={kappa:g} must bound k(x, x), but a diagonal entry is {top:.6g}.")
    delta = float(jnp.linalg.norm(Kp - K, ord=2))
    return perturbation_bound(delta, lam, kappa=kappa)


def _indices(basis, m: int) -> np.ndarray:
    arr = np.asarray(basis)
    rows = arr[None] if arr.ndim == 1 else arr
    if rows.ndim != 2:
        raise ValueError(f"basis must be (n_basis,) or (S, n_basis) indices, got {arr.shape}.")
    dummy = np.zeros(m, bool)
    return np.stack([resolve_basis(r, dummy) for r in rows])


def _rcond(rcond, n: int, dtype) -> float:
    if rcond is None:
        return n * float(np.finfo(dtype).eps)
    r = float(rcond)
    if not 0 <= r < 1:
        raise ValueError(f"rcond must lie in [0, 1), got {rcond!r}.")
    return r


def nystrom_kernel(K, basis, *, rcond: float | None = None) -> jax.Array:
    """The Nyström matrix ``K′ = K_{·R} K_RR^† K_{R·}`` of seed 003, Prop. 5.

    RankSVM with ``K′`` is the R-subset ranker with ``K`` (Prop. 5). The pseudo-inverse drops
    eigenvalues ``≤ rcond · λ_max(K_RR)`` (default ``|R| · eps``, as
    :func:`jaxrank.nystrom.nystrom_map`).

    Args:
      K: ``(m, m)`` kernel matrix.
      basis: ``(|R|,)`` row indices.
      rcond: relative eigenvalue cutoff.

    Returns:
      ``(m, m)`` in ``K``'s dtype.

    Example:
      >>> import numpy as np
      >>> from jaxrank.bounds import nystrom_kernel
      >>> from jaxrank.kernels import gaussian
      >>> X = np.random.default_rng(0).normal(size=(20, 2)).astype(np.float32)
      >>> K = gaussian(2.0)(X, X)
      >>> Kp = nystrom_kernel(K, np.arange(5))
      >>> Kp.shape, bool(np.allclose(Kp[:5, :5], K[:5, :5], atol=1e-4))  # exact on the basis
      ((20, 20), True)
    """
    K = _check_gram(K, "K")
    if np.asarray(basis).ndim != 1:
        raise ValueError(f"basis must be 1-D row indices, got shape {np.asarray(basis).shape}.")
    idx = jnp.asarray(_indices(basis, K.shape[0])[0])
    C = K[:, idx]
    W, _ = pinv_sqrt(C[idx], _rcond(rcond, idx.size, K.dtype))
    Z = jnp.matmul(C, W, precision=_HI)
    return jnp.matmul(Z, Z.T, precision=_HI)


@functools.partial(jax.jit, static_argnames=("iters",))
def _lanczos_norms(K, idx, rcond, keys, *, iters: int):
    # ||K − K′||₂ = λ_max(K − K′) (a Schur complement: PSD) by Lanczos with full
    # reorthogonalisation; the Ritz value is the Rayleigh-Ritz maximum of Qᵀ(K − K′)Q over the
    # stored Krylov basis, so it never exceeds the true norm (up to rounding). K′v is formed as
    # K·scatter_R(K_RR^† (Kv)_R): only K is stored, and a batch of bases shares each product.
    m = K.shape[0]
    dt = K.dtype

    def one(ix, key):
        W, _ = pinv_sqrt(K[ix][:, ix], rcond)

        def apply(v):
            y = jnp.matmul(K, v, precision=_HI)
            t = jnp.matmul(W, jnp.matmul(y[ix], W, precision=_HI), precision=_HI)
            return y - jnp.matmul(K, jnp.zeros((m,), dt).at[ix].set(t), precision=_HI)

        v0 = jax.random.normal(key, (m,), dt)
        Q = jnp.zeros((iters + 1, m), dt).at[0].set(v0 / jnp.linalg.norm(v0))
        AQ = jnp.zeros((iters, m), dt)

        def step(j, state):
            Q, AQ = state
            w = apply(Q[j])
            AQ = AQ.at[j].set(w)
            # three-term recurrence made exact by two passes of Gram-Schmidt over all of Q
            w = w - jnp.matmul(jnp.matmul(Q, w, precision=_HI), Q, precision=_HI)
            w = w - jnp.matmul(jnp.matmul(Q, w, precision=_HI), Q, precision=_HI)
            nrm = jnp.linalg.norm(w)
            q = jnp.where(nrm > 0, w / jnp.where(nrm > 0, nrm, 1), 0)
            return Q.at[j + 1].set(q), AQ

        Q, AQ = jax.lax.fori_loop(0, iters, step, (Q, AQ))
        T = jnp.matmul(Q[:iters], AQ.T, precision=_HI)
        return jnp.max(jnp.abs(_linalg.eigvalsh(0.5 * (T + T.T))))

    return jax.vmap(one)(idx, keys)


@jax.jit
def _exact_norms(K, idx, rcond):
    def one(ix):
        C = K[:, ix]
        W, _ = pinv_sqrt(C[ix], rcond)
        Z = jnp.matmul(C, W, precision=_HI)
        D = K - jnp.matmul(Z, Z.T, precision=_HI)
        return jnp.max(jnp.abs(_linalg.eigvalsh(0.5 * (D + D.T))))

    return jax.lax.map(one, idx)


def nystrom_perturbation_norm(
    K,
    basis,
    *,
    rcond: float | None = None,
    iters: int | None = None,
    key: jax.Array | None = None,
    memory_budget: int | None = None,
):
    """``δ = ||K − K′||₂`` for the Nyström matrix ``K′`` of each basis (seed 003, Thm 7, Prop. 5).

    Exact (``iters=None``: an eigendecomposition of ``K − K′``, ``O(m³)`` per basis) or by
    ``iters`` Lanczos steps (``O(iters · m²)`` per basis, a batch of bases sharing every
    product with ``K``): the Ritz value converges to ``δ`` from below.

    Args:
      K: ``(m, m)`` kernel matrix.
      basis: ``(|R|,)`` row indices, or ``(S, |R|)`` for ``S`` bases of the same size.
      rcond: relative eigenvalue cutoff of ``K_RR^†`` (as :func:`nystrom_kernel`).
      iters: Lanczos steps (``None``: exact).
      key: ``jax.random.key`` for the Lanczos start vectors (required with ``iters``).
      memory_budget: bytes the work arrays may take (default as in :func:`jaxrank.fit`).

    Returns:
      A float for one basis, an ``(S,)`` float64 array for ``S``.

    Example:
      >>> import numpy as np, jax
      >>> X = np.linspace(0, 1, 6)[:, None]
      >>> K = np.exp(-(X - X.T) ** 2)
      >>> exact = nystrom_perturbation_norm(K, [0, 5])
      >>> approx = nystrom_perturbation_norm(K, [0, 5], iters=6, key=jax.random.key(0))
      >>> bool(abs(exact - approx) < 1e-5 * exact)  # float32: equal up to rounding
      True
    """
    K = _check_gram(K, "K")
    one = np.asarray(basis).ndim == 1
    idx = _indices(basis, K.shape[0])
    S, n = idx.shape
    m = K.shape[0]
    rc = _rcond(rcond, n, K.dtype)
    item = K.dtype.itemsize
    if iters is None:
        need = (3 * m * m + n * n) * item
        _kernels.check_memory(need, memory_budget, f"the exact norm of K − K′ ({m} x {m})")
        out = _exact_norms(K, jnp.asarray(idx), rc)
    else:
        if isinstance(iters, bool) or int(iters) != iters or iters < 1:
            raise ValueError(f"iters must be a positive integer, got {iters!r}.")
        if key is None:
            raise ValueError("the Lanczos estimate needs key=jax.random.key(...) (start vectors).")
        iters = int(min(iters, m))
        need = m * m * item + S * (n * n + (2 * iters + 5) * m) * item
        _kernels.check_memory(need, memory_budget, f"Lanczos on {S} bases ({m} rows, |R| = {n})")
        keys = jax.random.split(key, S)
        out = _lanczos_norms(K, jnp.asarray(idx), rc, keys, iters=iters)
    out = np.asarray(out, np.float64)
    return float(out[0]) if one else out
