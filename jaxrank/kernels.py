"""Kernel functions, the σ² heuristic, chunked kernel blocks and the memory budget.

A kernel is a frozen dataclass registered as a pytree: its numeric parameters are leaves (so a
σ² grid can be vmapped), its structural ones (a polynomial degree) are static. Calling it on
``(U, V)`` gives the Gram block ``k(U, V)`` of shape ``(len(U), len(V))``.

The ranking objectives only ever need the rectangular block ``K_{·R} = k(X, X_R)`` (seed 000
eq. 11, 13). :func:`kernel_block` builds it in row chunks with ``lax.map`` so that the peak
memory is the block itself plus one chunk, and :func:`stream_matvec` multiplies by it without
storing it at all (prediction on arbitrarily many rows).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._precision import HIGHEST as _HI
from jaxrank._validation import check_in_dtype, spread_floor

__all__ = [
    "ARDGaussian",
    "DualBlock",
    "Gaussian",
    "Linear",
    "MemoryBudgetError",
    "Polynomial",
    "StreamedBlock",
    "ard",
    "binary_scales",
    "check_kernel",
    "check_memory",
    "default_memory_budget",
    "dual_block",
    "gaussian",
    "kernel_block",
    "linear",
    "matmul",
    "polynomial",
    "product_block",
    "resolve_kernel",
    "rmatmul",
    "rmatvec",
    "row_mesh",
    "sharded_block",
    "sigma2_heuristic",
    "stream_matvec",
    "streamed_block",
    "take_rows",
]


# Rows per chunk are chosen so that one chunk of the block is about this many bytes.
_CHUNK_BYTES = 32 * 2**20


class MemoryBudgetError(ValueError):
    """A requested array would exceed the memory budget.

    Example:
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(1000, 0.1, 0.75, seed=0)
      >>> try:
      ...     jaxrank.fit_ranksvm(X, y, 1.0, memory_budget=10_000)  # a 4 MB block, 10 kB allowed
      ... except jaxrank.MemoryBudgetError as err:
      ...     print(type(err).__name__, issubclass(type(err), ValueError))
      MemoryBudgetError True
    """


def _sq_dist(U: jax.Array, V: jax.Array) -> jax.Array:
    # ||u||² + ||v||² − 2 u·v: one matrix product instead of a (n, p, d) difference tensor.
    # Both sides are first centred on the mean of V (distances are translation invariant):
    # far from the origin the expansion cancels catastrophically in float32 and K_RR would come
    # out indefinite. HIGHEST precision: on GPUs the default float32 matmul uses TF32 (10-bit
    # mantissa), which would make the Gaussian block wrong in the third digit.
    c = jnp.mean(V, axis=0)
    U = U - c
    V = V - c
    uu = jnp.sum(U * U, axis=-1)
    vv = jnp.sum(V * V, axis=-1)
    uv = jnp.matmul(U, V.T, precision=_HI)
    return jnp.maximum(uu[:, None] + vv[None, :] - 2 * uv, 0)


def _concrete(value) -> np.ndarray | None:
    """``value`` as a float64 array when it is a number given by the user (Python or numpy),
    else ``None``: JAX arrays and tracers (a vmapped σ² grid, a cotangent), ``None`` and the
    placeholders JAX's tree utilities build kernels from are not judged here; the fit checks the
    resolved values in its dtype (:func:`check_kernel`)."""
    if isinstance(value, bool | np.bool_):
        return np.array(np.nan)  # True is not a bandwidth
    # Integers and strings are not judged either: JAX's tree utilities rebuild kernels with
    # them as leaves (``in_axes=Gaussian(sigma2=0)`` for vmap, parameter names in orbax's
    # checkpointing). An integer bandwidth still meets the fit's check (check_kernel).
    if isinstance(value, float | np.floating):
        return np.asarray(value, np.float64)
    if isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.floating):
        return value.astype(np.float64)
    return None


def _check_field(cls: str, name: str, value, *, positive: bool) -> None:
    v = _concrete(value)
    if v is None:
        return
    ok = np.all(np.isfinite(v)) and (np.all(v > 0) if positive else True)
    if not ok or v.size == 0:
        need = "finite and > 0" if positive else "finite"
        raise ValueError(f"{cls} {name} must be {need}, got {value!r}.")


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Gaussian:
    """Gaussian kernel ``k(u, v) = exp(-||u - v||² / σ²)`` (seed 000, Sec. 6).

    Note the paper's parametrisation: σ² divides the squared distance directly (no factor 2).

    Attributes:
      sigma2: the bandwidth σ². ``None`` means "use :func:`sigma2_heuristic` on the training
        rows"; the fit resolves it, so a fitted model always holds a number.

    Raises:
      ValueError: on construction, for a σ² given as a number (or numpy array) that is not
        finite and > 0 (``Gaussian(sigma2=-1.0)``); a fit also refuses a σ² outside its dtype's
        range (:func:`check_kernel`). JAX arrays (a traced σ² grid) are checked by the fit.

    Example:
      >>> import jax.numpy as jnp
      >>> k = Gaussian(sigma2=2.0)
      >>> k(jnp.zeros((1, 2)), jnp.ones((1, 2)))  # exp(-2/2)
      Array([[0.36787945]], dtype=float32)
    """

    sigma2: Any = None

    def __post_init__(self):
        # the class, not only the factory: Gaussian(sigma2=-1.0) is refused where it is made
        _check_field("Gaussian", "sigma2", self.sigma2, positive=True)

    def __call__(self, U: jax.Array, V: jax.Array) -> jax.Array:
        return jnp.exp(-_sq_dist(U, V) / jnp.asarray(self.sigma2, U.dtype))

    def diag(self, U: jax.Array) -> jax.Array:
        """``k(u, u)`` for each row of ``U``."""
        return jnp.ones(U.shape[:1], U.dtype)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class ARDGaussian(Gaussian):
    """Gaussian kernel with one scale per column (automatic relevance determination)::

        k(u, v) = exp(−Σ_j s_j² (u_j − v_j)² / σ²) = exp(−‖(u − v) ⊙ s‖² / σ²)

    the Gaussian of :class:`Gaussian` on the rescaled rows ``x ⊙ s``: column ``j`` has the
    length scale ``σ / s_j``, ``s_j = 0`` removes it, ``s = 1`` is the isotropic kernel. A
    subclass of :class:`Gaussian`, so it goes wherever the Gaussian goes (:func:`jaxrank.fit`,
    the core under ``jit`` / ``vmap`` / ``grad`` — both σ² and ``scales`` are pytree leaves —,
    the estimators, model files, the command line, the multi-process fit).

    Attributes:
      sigma2: the bandwidth σ² (``None``: :func:`sigma2_heuristic` on the rescaled training
        rows, filled in by the fit).
      scales: ``(d,)`` per-column scales ``s_j ≥ 0``, not all 0 (:func:`ard` expands one scale
        per group of columns; :func:`binary_scales` gives the binary-aware default).

    Example:
      >>> import jax.numpy as jnp
      >>> k = ARDGaussian(sigma2=1.0, scales=jnp.array([1.0, 0.0]))  # the 2nd column ignored
      >>> k(jnp.zeros((1, 2)), jnp.array([[1.0, 5.0]]))  # exp(−1)
      Array([[0.36787945]], dtype=float32)
    """

    scales: Any = None

    def __post_init__(self):
        super().__post_init__()
        v = _concrete(self.scales)
        if self.scales is None or (isinstance(self.scales, list | tuple) and v is None):
            v = None if self.scales is None else np.asarray(self.scales, np.float64)
        if v is not None and (
            v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v) & (v >= 0)) or not v.any()
        ):
            raise ValueError(
                "ARDGaussian scales must be a non-empty 1-D array of finite values >= 0, not all "
                f"0, got {self.scales!r}."
            )

    def __call__(self, U: jax.Array, V: jax.Array) -> jax.Array:
        s = jnp.asarray(self.scales, U.dtype)
        return jnp.exp(-_sq_dist(U * s, V * s) / jnp.asarray(self.sigma2, U.dtype))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Linear:
    """Linear kernel ``k(u, v) = u·v``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.kernels import Linear
      >>> Linear()(jnp.ones((1, 3)), jnp.arange(6.0).reshape(2, 3))  # u·v
      Array([[ 3., 12.]], dtype=float32)
    """

    def __call__(self, U: jax.Array, V: jax.Array) -> jax.Array:
        return jnp.matmul(U, V.T, precision=_HI)

    def diag(self, U: jax.Array) -> jax.Array:
        return jnp.sum(U * U, axis=-1)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Polynomial:
    """Polynomial kernel ``k(u, v) = (γ u·v + c₀)^p``.

    Attributes:
      degree: the integer power ``p ≥ 1`` (static: changing it recompiles). ``p = 0`` would be
        the constant kernel 1, which ranks nothing: refused.
      gamma: scale ``γ > 0`` of the inner product.
      coef0: offset ``c₀`` (finite).

    Raises:
      ValueError: on construction, for a degree that is not a positive integer, a ``γ`` that is
        not finite and > 0, or a ``c₀`` that is not finite.

    Example:
      >>> Polynomial(degree=0)
      Traceback (most recent call last):
      ...
      ValueError: polynomial degree must be a positive integer, got 0.
    """

    degree: int = dataclasses.field(default=2, metadata=dict(static=True))
    gamma: Any = 1.0
    coef0: Any = 1.0

    def __post_init__(self):
        p = self.degree
        if (
            isinstance(p, bool | np.bool_)
            or not isinstance(p, int | float | np.number)
            or not math.isfinite(float(p))
            or int(p) != p
            or p < 1
        ):
            raise ValueError(f"polynomial degree must be a positive integer, got {p!r}.")
        _check_field("polynomial", "gamma", self.gamma, positive=True)
        _check_field("polynomial", "coef0", self.coef0, positive=False)

    def __call__(self, U: jax.Array, V: jax.Array) -> jax.Array:
        dt = U.dtype
        base = jnp.asarray(self.gamma, dt) * jnp.matmul(U, V.T, precision=_HI)
        return (base + jnp.asarray(self.coef0, dt)) ** self.degree

    def diag(self, U: jax.Array) -> jax.Array:
        dt = U.dtype
        base = jnp.asarray(self.gamma, dt) * jnp.sum(U * U, axis=-1)
        return (base + jnp.asarray(self.coef0, dt)) ** self.degree


Kernel = Gaussian | ARDGaussian | Linear | Polynomial


def gaussian(sigma2: float | None = None) -> Gaussian:
    """A Gaussian kernel; ``sigma2=None`` takes the paper's heuristic at fit time.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.kernels import gaussian, resolve_kernel
      >>> gaussian(2.0)(jnp.zeros((1, 2)), jnp.ones((1, 2)))  # exp(−2/2)
      Array([[0.36787945]], dtype=float32)
      >>> resolve_kernel(gaussian(), jnp.array([[0.0], [2.0]])).sigma2  # the heuristic: 2
      2.0
    """
    if isinstance(sigma2, jax.core.Tracer):
        # σ² under jit / vmap / grad (a sweep, a derivative): kept traced, as the class keeps it
        return Gaussian(sigma2=sigma2)
    if sigma2 is not None:
        sigma2 = float(sigma2)
        if not math.isfinite(sigma2) or sigma2 <= 0:
            raise ValueError(f"sigma2 must be finite and > 0, got {sigma2!r}.")
    return Gaussian(sigma2=sigma2)


def ard(sigma2: float | None = None, scales=None, *, groups=None) -> ARDGaussian:
    """An ARD Gaussian kernel (:class:`ARDGaussian`), scales per column or per group.

    Args:
      sigma2: σ² (``None``: the heuristic on the rescaled training rows at fit time).
      scales: per-column scales ``(d,)``, or with ``groups`` one scale per group ``(G,)``;
        ``None``: the binary-aware scales of the training rows at fit time
        (:func:`binary_scales`).
      groups: ``(d,)`` integer group of each column in ``0 … G−1`` (e.g. the one-hot columns
        of one source variable share a group): column ``j`` gets ``scales[groups[j]]``.

    Example:
      >>> ard(2.0, [1.0, 0.5], groups=[0, 1, 1]).scales.tolist()
      [1.0, 0.5, 0.5]
    """
    if scales is not None and not isinstance(scales, jax.core.Tracer):
        scales = np.asarray(scales, np.float64)
    if groups is not None:
        if scales is None:
            raise ValueError("groups= needs scales= (one scale per group).")
        g = np.asarray(groups)
        if g.ndim != 1 or g.dtype.kind not in "iu" or (g.size and (g.min() < 0)):
            raise ValueError(f"groups must be a 1-D array of integers >= 0, got {groups!r}.")
        if g.size and g.max() >= np.shape(scales)[0]:
            raise ValueError(
                f"groups names group {int(g.max())} but scales has {np.shape(scales)[0]} entries."
            )
        scales = scales[g] if isinstance(scales, np.ndarray) else jnp.asarray(scales)[g]
    if sigma2 is not None and not isinstance(sigma2, jax.core.Tracer):
        sigma2 = float(sigma2)
    return ARDGaussian(sigma2=sigma2, scales=scales)


def binary_scales(X) -> np.ndarray | None:
    """The binary-aware column scales: ``1/(hi − lo)`` for a column with exactly two distinct
    values ``lo < hi`` (a 0/1 dummy, before or after a scaler), 1 for every other column.

    The binary-aware Gaussian (``kernel="binary"``; ``RankRCClassifierCV`` searches it beside
    the plain one) measures distances on ``x ⊙ s`` with these scales, so a dummy column
    contributes 0 or 1 to a squared distance whatever a scaler made of it. A standardised
    dummy with 2 % ones takes the values −0.14 and 7.0: one such difference (51) outweighs 15
    standardised continuous columns together (expected squared difference 2 each), and the σ²
    heuristic then blurs every other column away (docs/choosing-a-model.md).

    Args:
      X: ``(m, d)`` training rows (host array).

    Returns:
      ``(d,)`` float64 scales, or ``None`` when every scale is 1 (no two-valued column, or its
      two values already 1 apart): the isotropic kernel.

    Example:
      >>> binary_scales([[0.0, -0.5, 1.0], [1.0, 2.0, 2.0], [0.0, 2.0, 3.0]]).tolist()
      [1.0, 0.4, 1.0]
    """
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] < 2:
        return None
    lo, hi = X.min(axis=0), X.max(axis=0)
    two = (hi > lo) & np.all((X == lo) | (X == hi), axis=0)
    scales = np.ones(X.shape[1], np.float64)
    spread = hi[two].astype(np.float64) - lo[two].astype(np.float64)
    with np.errstate(over="ignore"):
        scales[two] = np.where(np.isfinite(spread), 1.0 / spread, 1.0)
    return None if np.all(scales == 1.0) else scales


def linear() -> Linear:
    """The linear kernel.

    Example:
      >>> import jaxrank
      >>> from jaxrank.kernels import linear
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> jaxrank.fit_rankrc(X, y, 0.5, kernel=linear()).kernel
      Linear()
    """
    return Linear()


def polynomial(degree: int = 2, gamma: float = 1.0, coef0: float = 1.0) -> Polynomial:
    """A polynomial kernel ``(γ u·v + c₀)^degree`` (checked by :class:`Polynomial`), its
    parameters as plain ``int`` and ``float`` (what a model file stores).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.kernels import polynomial
      >>> polynomial(3, gamma=0.5, coef0=0.0)(jnp.ones((1, 2)), jnp.ones((1, 2)))  # (0.5·2)³
      Array([[1.]], dtype=float32)
    """
    Polynomial(degree=degree, gamma=gamma, coef0=coef0)  # the checks, with the user's values
    # γ and c₀ under jit / vmap / grad stay traced (the degree is static: an int)
    keep = lambda v: v if isinstance(v, jax.core.Tracer) else float(v)
    return Polynomial(degree=int(degree), gamma=keep(gamma), coef0=keep(coef0))


def sigma2_heuristic(X) -> float:
    """σ² = (1/m²) Σ_ij ||x_i − x_j||² over the rows of ``X`` (seed 000, Sec. 6).

    Computed in O(m d) as ``2·mean_i ||x_i||² − 2·||mean_i x_i||²``, in float64 on the host
    (the two terms nearly cancel for data far from the origin).

    Args:
      X: array of shape ``(m, d)``.

    Returns:
      σ² as a Python float (> 0 unless all rows are equal, in which case 1.0).

    Example:
      >>> sigma2_heuristic([[0.0], [2.0]])  # pairs: 0, 4, 4, 0 -> mean 2
      2.0
    """
    X = np.asarray(X, dtype=np.float64)
    mean = X.mean(axis=0)
    centred = X - mean  # same value as the formula above, without the cancellation
    s2 = 2.0 * float(np.mean(np.sum(centred * centred, axis=1)))
    return s2 if s2 > 0 else 1.0


def resolve_kernel(kernel: Kernel | str | None, X, *, dtype=None) -> Kernel:
    """Return a kernel with every data-dependent parameter filled in from training rows ``X``;
    with ``dtype``, also checked for a fit in that dtype (:func:`check_kernel`).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.kernels import resolve_kernel
      >>> X = jnp.array([[0.0, 0.0], [1.0, 1.0]])
      >>> resolve_kernel(None, X)  # the default: Gaussian, σ² = mean squared pairwise distance
      Gaussian(sigma2=1.0)
      >>> resolve_kernel("linear", X)
      Linear()
    """
    kernel = _resolve(kernel, X)
    if dtype is not None:
        check_kernel(kernel, X, dtype)
    return kernel


def check_kernel(kernel: Kernel, X, dtype) -> None:
    """Refuse a resolved kernel whose values in ``dtype`` on the rows ``X`` are inf, NaN or 0.

    - Gaussian: σ² a normal number of ``dtype`` (``gaussian(1e-300)`` is 0 in float32: the
      diagonal would be ``exp(-0/0)``, NaN).
    - Polynomial: ``γ`` a normal number, ``c₀`` finite in ``dtype``, and the largest kernel value
      ``(γ max‖x‖² + |c₀|)^p`` neither overflowing ``dtype`` nor below its resolution of
      squares (:func:`~jaxrank._validation.spread_floor`: every value 0, a kernel that ranks
      nothing).

    The class checks what it can where the kernel is made (``Gaussian(sigma2=-1.0)`` raises);
    this is the dtype's side, which only the fit knows. O(m d) on the host.

    Args:
      kernel: a resolved :class:`Gaussian`, :class:`Linear` or :class:`Polynomial`.
      X: ``(m, d)`` training rows (already through ``check_cast``).
      dtype: the fit's floating dtype.

    Raises:
      ValueError: naming the parameter and the range.

    Example:
      >>> check_kernel(gaussian(1e-300), np.eye(2), np.float32)  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      ValueError: sigma2 = 1e-300 is outside float32's range of normal numbers, ...
    """
    dt = np.dtype(dtype)
    hint = "pass dtype=np.float64" if dt.itemsize < 8 else ""
    if isinstance(kernel, Gaussian):
        if isinstance(kernel.sigma2, str | bytes | bool | np.bool_):
            raise ValueError(f"sigma2 must be a number, got {kernel.sigma2!r}.")
        for v in np.atleast_1d(np.asarray(kernel.sigma2, np.float64)):
            check_in_dtype(v, "sigma2", dt, hint=hint or "rescale X and σ²")
    elif isinstance(kernel, Polynomial):
        gammas = np.atleast_1d(np.asarray(kernel.gamma, np.float64))
        offsets = np.atleast_1d(np.asarray(kernel.coef0, np.float64))
        for g in gammas:
            check_in_dtype(g, "gamma", dt, hint=hint)
        for c in offsets:
            check_in_dtype(c, "coef0", dt, zero=True, hint=hint)
        Xa = np.asarray(X)
        sq = max(  # in row blocks: no float64 copy of a large X
            float(np.max(np.sum(np.square(Xa[i : i + 65536].astype(np.float64)), axis=1)))
            for i in range(0, Xa.shape[0], 65536)
        )
        base = float(np.max(gammas)) * sq + float(np.max(np.abs(offsets)))
        p = kernel.degree
        with np.errstate(divide="ignore"):
            log_top = p * math.log(base) if base > 0 else -math.inf
        if log_top > math.log(float(np.finfo(dt).max)) - math.log(4.0):
            raise ValueError(
                f"the polynomial kernel reaches ~({base:.3g})^{p}, beyond {dt.name}'s largest "
                f"value {float(np.finfo(dt).max):.3g}: the kernel would be inf. Rescale X, "
                "lower gamma or the degree" + (f", or {hint}" if hint else "") + "."
            )
        if log_top < math.log(spread_floor(dt)):
            raise ValueError(
                f"the polynomial kernel is at most ~({base:.3g})^{p}, below what {dt.name} "
                f"resolves ({spread_floor(dt):.3g}): every kernel value would round to 0. "
                "Rescale X, raise gamma or coef0" + (f", or {hint}" if hint else "") + "."
            )


def _resolve(kernel: Kernel | str | None, X) -> Kernel:
    if kernel is None or kernel == "gaussian" or kernel == "rbf":
        kernel = Gaussian()
    elif kernel == "binary":
        # the binary-aware Gaussian (binary_scales); the plain one when X has no two-valued
        # column off the unit spread
        scales = binary_scales(X)
        kernel = Gaussian() if scales is None else ARDGaussian(scales=scales)
    elif kernel == "ard":
        kernel = ARDGaussian()
    elif kernel == "linear":
        kernel = Linear()
    elif kernel == "polynomial" or kernel == "poly":
        kernel = Polynomial()
    elif isinstance(kernel, str):
        raise ValueError(
            f"unknown kernel {kernel!r}; use 'gaussian', 'binary', 'ard', 'linear', 'polynomial' "
            "or a kernel object."
        )
    if not isinstance(kernel, Gaussian | Linear | Polynomial):
        raise ValueError(f"kernel must be a jaxrank kernel or a name, got {type(kernel)!r}.")
    if isinstance(kernel, ARDGaussian) and kernel.scales is None:
        scales = binary_scales(X)
        kernel = ARDGaussian(kernel.sigma2, np.ones(np.shape(X)[1]) if scales is None else scales)
    if isinstance(kernel, ARDGaussian) and kernel.sigma2 is None:
        Xs = np.asarray(X, np.float64) * np.asarray(kernel.scales, np.float64)
        kernel = ARDGaussian(sigma2=sigma2_heuristic(Xs), scales=kernel.scales)
    elif isinstance(kernel, Gaussian) and kernel.sigma2 is None:
        kernel = Gaussian(sigma2=sigma2_heuristic(X))
    return kernel


def default_memory_budget(device: jax.Device | None = None) -> int:
    """Bytes a single kernel block may take on ``device`` (default: the first device).

    GPU/TPU: 80 % of the device's allocator limit. CPU: 60 % of the machine's physical memory
    (the solver needs a few vectors of length m besides the block).

    Example:
      >>> from jaxrank.kernels import default_memory_budget
      >>> default_memory_budget() > 0  # 60 % of RAM on CPU, 80 % of an accelerator's memory
      True
    """
    device = device or jax.devices()[0]
    if device.platform != "cpu":
        try:
            stats = device.memory_stats() or {}
            if "bytes_limit" in stats:
                return int(0.8 * stats["bytes_limit"])
        except Exception:  # memory_stats is not implemented on every backend
            pass
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 16 * 2**30
    return int(0.6 * total)


def _fmt_bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} bytes"


def check_memory(nbytes: int, budget: int | None, what: str) -> None:
    """Raise :class:`MemoryBudgetError` if ``nbytes`` exceeds ``budget`` (``None``: default).

    Example:
      >>> from jaxrank.kernels import MemoryBudgetError, check_memory
      >>> check_memory(1_000, 10_000, "a kernel block")  # fits: nothing happens
      >>> try:
      ...     check_memory(10**12, 10**9, "a kernel block")
      ... except MemoryBudgetError as err:
      ...     print("a kernel block" in str(err))
      True
    """
    budget = default_memory_budget() if budget is None else int(budget)
    if nbytes > budget:
        raise MemoryBudgetError(
            f"{what} needs {_fmt_bytes(nbytes)}, more than the memory budget of "
            f"{_fmt_bytes(budget)}. Use a smaller basis (basis='rare' or n_basis=...), fewer "
            "rows, or raise the budget (memory_budget=...)."
        )


def chunk_rows(n: int, width: int, itemsize: int, multiple: int = 1) -> tuple[int, int]:
    """Return ``(rows_per_chunk, n_chunks)`` so a ``(rows, width)`` chunk is about 32 MiB.

    ``rows_per_chunk`` is a multiple of ``multiple``; the padding
    ``rows_per_chunk * n_chunks - n`` is smaller than ``n_chunks * multiple``.
    """
    n_chunks = max(1, math.ceil(n * max(width, 1) * itemsize / _CHUNK_BYTES))
    n_chunks = min(n_chunks, max(1, n // multiple))
    rows = math.ceil(n / n_chunks / multiple) * multiple
    return rows, n_chunks


def product_block(n: int) -> int:
    """Rows per block of the two-level transpose product :func:`rmatvec`: ≈ √n, a power of 2.

    Example:
      >>> from jaxrank.kernels import product_block
      >>> product_block(1_000_000), product_block(100)
      (1024, 64)
    """
    return int(min(4096, max(64, 2 ** round(math.log2(max(n, 1)) / 2))))


def rmatvec(g: jax.Array, K: jax.Array, block: int) -> jax.Array:
    """``g @ K`` summed in two levels: per block of ``block`` rows, then over blocks.

    The gradient ``K_{·R}ᵀ g_f`` is a difference of two large sums (positives pull, negatives
    push) that cancel near the optimum. A float32 sum over m rows in one pass carries an error of
    order ``eps·√m``; summing ``√m`` blocks of ``√m`` rows cuts it to order ``eps·m^{1/4}``
    (about 10x at m = 10⁵), at the same speed: the blocks form one batched product.

    Args:
      g: ``(m,)`` weights (``m`` a multiple of ``block``).
      K: ``(m, p)``.
      block: rows per block.

    Returns:
      ``(p,)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.kernels import rmatvec
      >>> K = jnp.arange(12.0).reshape(4, 3)
      >>> rmatvec(jnp.ones(4), K, block=2)  # two blocks of two rows
      Array([18., 22., 26.], dtype=float32)
    """
    if isinstance(K, DualBlock):
        return _dual_rmatvec(g, K.K, K.Kt, block)
    if isinstance(K, StreamedBlock):
        # per chunk, the same blocks of `block` rows (chunk rows are a multiple of block)
        C, rows = K.X.shape[:2]

        def chunk(a):
            Kc = K.chunk(a[0])
            return rmatvec(a[1], Kc, block)

        return jnp.sum(jax.lax.map(chunk, (K.X, g.reshape(C, rows))), axis=0)
    return _two_level(g, K, block)


def _two_level(g: jax.Array, K: jax.Array, block: int) -> jax.Array:
    C = K.shape[0] // block
    part = jnp.einsum(
        "cr,crk->ck", g.reshape(C, block), K.reshape(C, block, K.shape[1]), precision=_HI
    )
    return jnp.sum(part, axis=0)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class DualBlock:
    """A stored kernel block kept in both layouts: ``K`` ``(m, |R|)`` and ``Kt = Kᵀ``.

    A λ grid solved batched multiplies the block by ``L`` columns twice per step: ``K @ V`` and
    ``G @ K``. On CPU the first runs near the speed of one pass over ``K`` (a row-major matrix
    against a skinny one), the second does not: the contraction runs over the m rows, and the
    matrix-multiply kernels, tiled for a large output, get an ``L × |R|`` one (measured at
    m = 131 072, |R| = 1000, L = 16: 52 ms against 30 ms for ``K @ V``, 17 ms per pass over
    ``K``). With ``Kᵀ`` stored, ``G @ K = (Kᵀ Gᵀ)ᵀ`` is again a row-major matrix against a
    skinny one (29.6 ms). The price is a second copy of the block, so :func:`jaxrank.fit.fit`
    keeps one only for batched grids on CPU and only within the memory budget.

    :func:`matmul`, :func:`rmatvec`, :func:`rmatmul` and :func:`take_rows` accept it wherever
    they accept a stored block. :func:`rmatvec` of one vector keeps the two-level sum over ``K``
    (a matrix-vector product is already at one pass, and the two-level sum is the more
    accurate); under ``jax.vmap`` (a λ grid) it becomes one product with ``Kᵀ``, whose blocked
    accumulation keeps the float32 error at the two-level sum's order.

    Attributes:
      K: ``(m, |R|)`` block.
      Kt: ``(|R|, m)`` its transpose.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.kernels import DualBlock, matmul, rmatmul
      >>> K = jnp.arange(12.0).reshape(4, 3)
      >>> D = DualBlock(K, K.T)
      >>> bool((matmul(D, jnp.ones(3)) == K @ jnp.ones(3)).all())
      True
      >>> rmatmul(jnp.ones((2, 4)), D).shape  # (Kᵀ Gᵀ)ᵀ
      (2, 3)
    """

    K: jax.Array
    Kt: jax.Array

    @property
    def shape(self) -> tuple[int, int]:
        return self.K.shape

    @property
    def dtype(self):
        return self.K.dtype


def dual_block(K: jax.Array) -> DualBlock:
    """``DualBlock(K, Kᵀ)``: the block in both layouts (twice its memory).

    Example:
      >>> import jax.numpy as jnp
      >>> K = jnp.arange(6.0).reshape(3, 2)
      >>> D = dual_block(K)
      >>> D.shape, bool((rmatmul(jnp.ones((1, 3)), D) == jnp.ones((1, 3)) @ K).all())
      ((3, 2), True)
    """
    return DualBlock(K, _transpose(K))


@jax.jit
def _transpose(K: jax.Array) -> jax.Array:
    return K.T


@functools.cache
def _dual_rmatvec_for(block: int):
    # custom_vmap takes array arguments only: one wrapper per (static) block size.
    @jax.custom_batching.custom_vmap
    def rmv(g, K, Kt):
        return _two_level(g, K, block)

    @rmv.def_vmap
    def rule(axis_size, in_batched, g, K, Kt):
        bcast = lambda x, b: x if b else jnp.broadcast_to(x, (axis_size, *x.shape))
        if in_batched[1] or in_batched[2]:  # a batch of blocks: per member, as without Kᵀ
            out = jax.vmap(lambda *a: _two_level(*a, block))(bcast(g, in_batched[0]),
                                                             bcast(K, in_batched[1]))  # fmt: skip
            return out, True
        if not in_batched[0]:
            return bcast(_two_level(g, K, block), False), True
        return _kt_product(Kt, g), True

    return rmv


def _kt_product(Kt: jax.Array, G: jax.Array) -> jax.Array:
    # (Kᵀ Gᵀ)ᵀ. The barrier keeps XLA from folding the outer transpose into the product,
    # which would turn it back into G @ K with the contraction over the rows (5x slower on CPU).
    return jax.lax.optimization_barrier(jnp.matmul(Kt, G.T, precision=_HI)).T


def _dual_rmatvec(g, K, Kt, block):
    return _dual_rmatvec_for(int(block))(g, K, Kt)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class StreamedBlock:
    """The kernel block ``K_{·R} = k(X, B)`` as an operator that is never stored.

    Every product recomputes the block one row chunk at a time (``lax.map``), so memory is
    ``O(m·d + chunk)`` instead of ``O(m·|R|)``, at the price of one kernel evaluation of the
    block per product (issue "Scale", item 2). :func:`matmul`, :func:`rmatvec`,
    :func:`rmatmul` and :func:`take_rows` accept it wherever they accept a stored block.

    Attributes:
      X: ``(C, rows, d)`` the rows (padded with zero rows) in ``C`` chunks.
      B: ``(|R|, d)`` basis rows.
      kernel: a resolved kernel.
      n_basis: ``None``, or the number of real basis rows (dynamic): the columns of the later
        rows of ``B`` (shape-bucket padding) are zero.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.kernels import gaussian, kernel_block, matmul, streamed_block
      >>> X, B = jnp.ones((10, 2)), jnp.zeros((3, 2))
      >>> S = streamed_block(gaussian(1.0), X, B)  # never stored
      >>> v = jnp.ones(3)
      >>> bool(jnp.allclose(matmul(S, v)[:10], kernel_block(gaussian(1.0), X, B) @ v))
      True
    """

    X: jax.Array
    B: jax.Array
    kernel: Any
    n_basis: Any = None

    @property
    def shape(self) -> tuple[int, int]:
        return (self.X.shape[0] * self.X.shape[1], self.B.shape[0])

    @property
    def dtype(self):
        return self.X.dtype

    def chunk(self, c: jax.Array) -> jax.Array:
        """The block rows of one chunk of rows ``c`` (``(rows, d)``)."""
        return _mask_columns(self.kernel(c, self.B), self.n_basis)


def streamed_block(kernel: Kernel, X, B, *, multiple: int = 1, n_basis=None) -> StreamedBlock:
    """A :class:`StreamedBlock` over ``X``, padded like ``kernel_block(..., padded=True)``
    (``n_basis`` as there).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.kernels import linear, matmul, streamed_block
      >>> S = streamed_block(linear(), jnp.ones((5, 2)), jnp.eye(2))
      >>> matmul(S, jnp.array([1.0, 2.0]))[:5]
      Array([3., 3., 3., 3., 3.], dtype=float32)
    """
    X, B = _on_device(X, B)
    rows, n_chunks = chunk_rows(X.shape[0], B.shape[0], X.dtype.itemsize, multiple)
    Xp = _pad_rows(X, rows, n_chunks).reshape(n_chunks, rows, X.shape[1])
    return StreamedBlock(Xp, B, kernel, None if n_basis is None else jnp.int32(n_basis))


def _on_device(X, B):
    # X and B (in X's dtype) as device arrays; host arrays by device_put, which, unlike
    # jnp.asarray, compiles no copy program per shape
    if isinstance(X, jax.Array):
        return X, jnp.asarray(B, X.dtype)
    X = jax.device_put(np.asarray(X))
    return X, jax.device_put(np.asarray(B, X.dtype))


def _mask_columns(K: jax.Array, n_basis) -> jax.Array:
    # Zero the columns of padded basis rows (shape buckets): they then add nothing to a score
    # and their gradient is λ·(K_RR β) alone, which keeps their coefficient at zero.
    if n_basis is None:
        return K
    return jnp.where(jnp.arange(K.shape[-1], dtype=jnp.int32) < n_basis, K, 0)


def matmul(K, V: jax.Array) -> jax.Array:
    """``K @ V`` for a stored block, a :class:`DualBlock` or a :class:`StreamedBlock`; ``V``
    is ``(|R|,)`` or ``(|R|, k)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.kernels import matmul
      >>> K = jnp.ones((4, 3))
      >>> matmul(K, jnp.ones(3)).shape, matmul(K, jnp.ones((3, 2))).shape
      ((4,), (4, 2))
    """
    if isinstance(K, DualBlock):
        K = K.K
    if isinstance(K, StreamedBlock):
        out = jax.lax.map(lambda c: jnp.matmul(K.chunk(c), V, precision=_HI), K.X)
        return out.reshape(-1, *V.shape[1:])
    return jnp.matmul(K, V, precision=_HI)


def rmatmul(G: jax.Array, K) -> jax.Array:
    """``G @ K`` for ``G`` of shape ``(k, m)``, a stored block, a :class:`DualBlock` (as
    ``(Kᵀ Gᵀ)ᵀ``) or a :class:`StreamedBlock` (summed per chunk, then over chunks).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.kernels import rmatmul
      >>> K = jnp.arange(12.0).reshape(4, 3)
      >>> rmatmul(jnp.ones((2, 4)), K)  # G @ K
      Array([[18., 22., 26.],
             [18., 22., 26.]], dtype=float32)
    """
    if isinstance(K, DualBlock):
        return _kt_product(K.Kt, G)
    if isinstance(K, StreamedBlock):
        C, rows = K.X.shape[:2]
        Gc = jnp.moveaxis(G.reshape(G.shape[0], C, rows), 1, 0)
        parts = jax.lax.map(lambda a: jnp.matmul(a[1], K.chunk(a[0]), precision=_HI), (K.X, Gc))
        return jnp.sum(parts, axis=0)
    return jnp.matmul(G, K, precision=_HI)


def take_rows(K, idx: jax.Array) -> jax.Array:
    """Rows ``idx`` of a stored block, a :class:`DualBlock` or a :class:`StreamedBlock`:
    ``(len(idx), |R|)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.kernels import take_rows
      >>> take_rows(jnp.arange(12.0).reshape(4, 3), jnp.array([0, 3]))
      Array([[ 0.,  1.,  2.],
             [ 9., 10., 11.]], dtype=float32)
    """
    if isinstance(K, DualBlock):
        return K.K[idx]
    if isinstance(K, StreamedBlock):
        return K.kernel(K.X.reshape(-1, K.X.shape[2])[idx], K.B)
    return K[idx]


def row_mesh(X) -> tuple[jax.sharding.Mesh, str] | None:
    """``(mesh, axis)`` when ``X`` is a ``jax.Array`` split by rows over several devices.

    A ``NamedSharding`` whose spec shards dimension 0 gives its own mesh and axis; any other
    multi-device sharding gives a 1-D mesh ``"rows"`` over its devices. ``None`` otherwise
    (numpy input, one device, or rows replicated).

    Example:
      >>> import numpy as np
      >>> from jaxrank.kernels import row_mesh
      >>> row_mesh(np.ones((8, 2))) is None  # numpy input (or one device): no mesh
      True
    """
    sharding = getattr(X, "sharding", None)
    if sharding is None or len(sharding.device_set) < 2:
        return None
    if isinstance(sharding, jax.sharding.NamedSharding):
        spec = (*tuple(sharding.spec), None)
        axis = spec[0]
        if axis is None:
            return None
        axis = axis if isinstance(axis, str) else axis[0]
        # the same devices with automatic axes: the fit's gathers and sorts are left to the
        # compiler's sharding propagation (an explicit-axes mesh would demand annotations)
        mesh = sharding.mesh
        return jax.sharding.Mesh(np.asarray(mesh.devices), mesh.axis_names), axis
    devices = sorted(sharding.device_set, key=lambda d: d.id)
    return jax.sharding.Mesh(np.array(devices), ("rows",)), "rows"


def _shard_map(f, mesh, in_specs, out_specs):
    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)
    from jax.experimental.shard_map import shard_map  # jax < 0.6

    return shard_map(f, mesh, in_specs=in_specs, out_specs=out_specs)


def sharded_block(
    kernel: Kernel, X, B, mesh, axis: str, *, multiple: int = 1, n_basis=None
) -> jax.Array:
    """The kernel block ``k(X, B)`` split by rows over ``mesh[axis]``, each device building its
    own rows in chunks (``lax.map``), never the whole block on one device.

    The rows are padded (zero rows, as in :func:`kernel_block`) to ``n_dev · rows · n_chunks``
    with ``rows`` a multiple of ``multiple``, so every device holds whole product blocks. Every
    product of the fit with this block then runs data-parallel under ``jit``: ``K @ v`` stays
    split by rows, the scores are gathered for the sort, and ``g @ K`` is summed over devices.

    ``n_basis``: as in :func:`kernel_block`.

    Returns:
      ``(n_padded, |R|)`` array with sharding ``NamedSharding(mesh, P(axis, None))``.

    Example:
      >>> import jax
      >>> import jax.numpy as jnp
      >>> from jaxrank.kernels import gaussian, sharded_block
      >>> mesh = jax.make_mesh((jax.device_count(),), ("rows",))
      >>> K = sharded_block(gaussian(1.0), jnp.ones((10, 2)), jnp.zeros((3, 2)), mesh, "rows")
      >>> K.shape[0] >= 10, K.shape[1]  # rows padded to whole chunks on every device
      (True, 3)
    """
    P = jax.sharding.PartitionSpec
    n_dev = mesh.shape[axis]
    X, B = _on_device(X, B)
    rows, n_chunks = chunk_rows(math.ceil(X.shape[0] / n_dev), B.shape[0], X.dtype.itemsize,
                                multiple)  # fmt: skip
    Xp = _pad_rows(X, rows * n_chunks * n_dev, 1)
    Xp = jax.device_put(Xp, jax.sharding.NamedSharding(mesh, P(axis, None)))
    B = jax.device_put(B, jax.sharding.NamedSharding(mesh, P()))
    nv = jnp.int32(B.shape[0] if n_basis is None else n_basis)
    return _sharded_build(kernel, Xp, B, nv, rows, mesh, axis)


@functools.partial(jax.jit, static_argnums=(4, 5, 6))
def _sharded_build(kernel, Xp, B, nv, rows, mesh, axis):
    P = jax.sharding.PartitionSpec
    build = _shard_map(
        lambda Xl, Bl, n: block_chunks(kernel, Xl, Bl, rows, n),
        mesh,
        (P(axis, None), P(), P()),
        P(axis, None),
    )
    return build(Xp, B, nv)


def _pad_rows(X: jax.Array, rows: int, n_chunks: int) -> jax.Array:
    pad = rows * n_chunks - X.shape[0]
    return jnp.pad(X, ((0, pad), (0, 0))) if pad else X


def kernel_block(
    kernel: Kernel, X, B, *, padded: bool = False, multiple: int = 1, n_basis=None
) -> jax.Array:
    """The kernel block ``K_{·R} = k(X, B)`` built in row chunks.

    Each chunk of rows is computed by one ``lax.map`` step and written into the output, so the
    peak memory is the block plus one ~32 MiB chunk.

    Args:
      kernel: a resolved kernel (no ``None`` parameters).
      X: rows, shape ``(n, d)``.
      B: basis rows, shape ``(p, d)``.
      padded: return the block with ``n`` rounded up to a whole number of chunks (padding rows
        are the kernel at the zero vector). The fit uses this to avoid a copy of the block.
      multiple: make the rows per chunk (so the padded row count) a multiple of this.
      n_basis: ``None``, or the number of real rows of ``B`` (dynamic: no recompilation): the
        columns of the rows after them (shape-bucket padding) are zero.

    Returns:
      Array of shape ``(n, p)`` (or ``(n_padded, p)``) in ``X``'s dtype.

    Example:
      >>> import jax.numpy as jnp
      >>> kernel_block(Linear(), jnp.eye(3), jnp.ones((2, 3))).shape
      (3, 2)
    """
    X, B = _on_device(X, B)
    rows, n_chunks = chunk_rows(X.shape[0], B.shape[0], X.dtype.itemsize, multiple)
    nv = B.shape[0] if n_basis is None else n_basis
    # a host count as a numpy scalar: jnp.int32 of it runs a conversion program per process
    nv = nv.astype(jnp.int32) if isinstance(nv, jax.Array) else np.int32(nv)
    K = _block(kernel, _pad_rows(X, rows, n_chunks), B, nv, rows)
    return K if padded else K[: X.shape[0]]


def block_chunks(kernel: Kernel, Xp, B, rows: int, n_basis) -> jax.Array:
    """``k(Xp, B)`` computed in chunks of ``rows`` rows (``Xp.shape[0]`` a multiple of it), the
    columns of basis rows from ``n_basis`` on zero: :func:`kernel_block`'s traced body, also
    built inside the fit's program (:func:`jaxrank._fitting.fit_block`)."""
    chunks = Xp.reshape(-1, rows, Xp.shape[1])
    K = jax.lax.map(lambda c: _mask_columns(kernel(c, B), n_basis), chunks)
    return K.reshape(Xp.shape[0], B.shape[0])


@functools.partial(jax.jit, static_argnums=4)
def _block(kernel: Kernel, Xp: jax.Array, B: jax.Array, n_basis, rows: int) -> jax.Array:
    return block_chunks(kernel, Xp, B, rows, n_basis)


def stream_matvec(kernel: Kernel, X, B, coef) -> jax.Array:
    """``k(X, B) @ coef.T`` without storing ``k(X, B)``: chunked over the rows of ``X``.

    The row count, the basis size and the number of coefficient rows are padded to shape
    buckets (:mod:`jaxrank._buckets`: zero rows of ``X`` whose scores are dropped, zero basis
    rows with zero coefficients), so scoring a new number of rows or a new basis size of the
    same bucket does not compile again.

    Args:
      kernel: a resolved kernel.
      X: rows, shape ``(n, d)``.
      B: basis rows, shape ``(p, d)``.
      coef: coefficients, shape ``(p,)`` or ``(L, p)``.

    Returns:
      Scores of shape ``(n,)`` or ``(L, n)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.kernels import linear, stream_matvec
      >>> stream_matvec(linear(), jnp.ones((5, 2)), jnp.eye(2), jnp.array([1.0, 2.0]))
      Array([3., 3., 3., 3., 3.], dtype=float32)
    """
    from jaxrank import _buckets

    if isinstance(X, jax.Array) or any(
        isinstance(v, jax.core.Tracer) for v in jax.tree.leaves((kernel, B, coef))
    ):
        return _stream_jax(kernel, X, B, coef)
    dt = np.dtype(getattr(X, "dtype", np.float64))
    n, d = np.shape(X)
    coef2 = np.atleast_2d(np.asarray(coef, dt))
    L, p = coef2.shape
    # one coefficient row (a scalar-λ model) stays one row; more go up the ladder too
    nb, Lb = _buckets.bucket(p), (1 if L == 1 else _buckets.bucket(L))
    rows, n_chunks = chunk_rows(_buckets.bucket(max(n, 1)), nb + Lb, dt.itemsize)
    # padding rows are copies of a real row, not zeros: the Gaussian kernel centres on the mean
    # basis row, which zero rows would pull away from data far from the origin
    Xh, Bh = np.asarray(X, dt), np.asarray(B, dt)
    Xp = np.empty((rows * n_chunks, d), dt)
    Xp[:] = Xh[0] if n else 0
    Xp[:n] = Xh
    Bp = np.empty((nb, d), dt)
    Bp[:] = Bh[0]
    Bp[:p] = Bh
    Cp = np.zeros((Lb, nb), dt)
    Cp[:L, :p] = coef2
    out = np.asarray(_stream(kernel, Xp, Bp, Cp, rows))[:L, :n]
    return _buckets.put(out if np.ndim(coef) == 2 else out[0])


def _stream_jax(kernel: Kernel, X, B, coef) -> jax.Array:
    # stream_matvec for JAX input (device arrays, tracers): the same padding and program, in
    # JAX, so it runs under jit / vmap / grad and where X is placed
    from jaxrank import _buckets

    B = jnp.asarray(B)
    dt = B.dtype
    X, coef = jnp.asarray(X, dt), jnp.asarray(coef, dt)
    n, d = X.shape
    coef2 = jnp.atleast_2d(coef)
    L, p = coef2.shape
    nb, Lb = _buckets.bucket(p), (1 if L == 1 else _buckets.bucket(L))
    rows, n_chunks = chunk_rows(_buckets.bucket(max(n, 1)), nb + Lb, dt.itemsize)
    fill = X[:1] if n else jnp.zeros((1, d), dt)
    Xp = jnp.concatenate([X, jnp.broadcast_to(fill, (rows * n_chunks - n, d))])
    Bp = jnp.concatenate([B, jnp.broadcast_to(B[:1], (nb - p, d))])
    Cp = jnp.zeros((Lb, nb), dt).at[:L, :p].set(coef2)
    out = _stream(kernel, Xp, Bp, Cp, rows)[:L, :n]
    return out if coef.ndim == 2 else out[0]


@functools.partial(jax.jit, static_argnums=4)
def _stream(kernel: Kernel, Xp: jax.Array, B: jax.Array, coef: jax.Array, rows: int):
    chunks = Xp.reshape(-1, rows, Xp.shape[1])
    scores = jax.lax.map(lambda c: jnp.matmul(coef, kernel(c, B).T, precision=_HI), chunks)
    # (n_chunks, L, rows) -> (L, n_chunks * rows)
    return jnp.moveaxis(scores, 1, 0).reshape(coef.shape[0], -1)
