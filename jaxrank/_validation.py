"""Input checks shared by every public entry point.

One module, not copies: each public function calls these before any numerics, so that bad input
gets a ``ValueError`` naming the problem instead of a silent NaN or a wrong model.
"""

from __future__ import annotations

import math
import operator
import re
import warnings
from collections.abc import Callable, Sequence

import numpy as np

__all__ = [
    "PrecisionWarning",
    "check_X",
    "check_X_y",
    "check_binary_labels",
    "check_cast",
    "check_eps_dtype",
    "check_fit_result",
    "check_in_dtype",
    "check_int",
    "check_key",
    "check_lam",
    "check_lam_dtype",
    "check_positive",
    "check_real",
    "label_vector",
    "lam_range",
    "spread_floor",
]

# ml_dtypes' low-precision types (bfloat16, float8_*, ...; what np.asarray gives for such JAX
# arrays) have numpy kind "V": recognised by name and widened exactly to float32.
_LOW_PRECISION = re.compile(r"(bfloat16|float[468]_\w+|u?int[24])\Z")


def check_X(X, *, name: str = "X", allow_jax: bool = True) -> np.ndarray:
    """Return ``X`` as a 2-D floating array after checking shape and finiteness.

    Args:
      X: array-like of shape ``(n, d)``.
      name: the argument name used in error messages.
      allow_jax: accept ``jax.Array`` inputs (converted to numpy for the checks).

    Accepted and converted: ``bool`` to float32; ``object`` arrays of real numbers to float64
    (``None`` becomes NaN and is then refused as such); bfloat16 / float8 / int4 (ml_dtypes,
    e.g. a JAX bfloat16 array) to float32, exactly. float16 and integer arrays are returned as
    they are (the fit casts to its float32/float64 dtype; see :func:`check_cast`). Refused:
    scipy sparse matrices (the kernels need dense rows: densify knowingly with
    ``X.toarray()``), strings (also inside object arrays), complex numbers.

    Raises:
      ValueError: ``X`` is sparse, empty, not 2-D, not numeric, or holds NaN or inf.
    """
    if hasattr(X, "toarray") and hasattr(X, "nnz"):
        raise ValueError(
            f"{name} is a scipy sparse matrix; jaxrank's kernels need a dense array: "
            f"pass {name}.toarray()."
        )
    arr = np.asarray(X)
    if arr.dtype == object:
        # float("2.5") would succeed: a string in X is a parsing mistake, not a number
        text = np.frompyfunc(lambda v: isinstance(v, str | bytes), 1, 1)(arr)
        if np.any(text.astype(bool)):
            raise ValueError(f"{name} holds strings (dtype object); convert it to numbers first.")
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} holds non-numeric values (dtype object).") from err
    if arr.dtype.kind == "V" and arr.dtype.fields is None and _LOW_PRECISION.match(arr.dtype.name):
        arr = arr.astype(np.float32)
    if arr.dtype.kind == "b":
        arr = arr.astype(np.float32)
    if arr.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}.")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {arr.shape}.")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {arr.shape}.")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.isfinite(arr)))
        raise ValueError(f"{name} contains {bad} NaN or infinite value(s).")
    return arr


def label_vector(y, name: str) -> np.ndarray:
    """``y`` as a non-empty 1-D array (an ``(n, 1)`` column is flattened)."""
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}.")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty.")
    return arr


def check_binary_labels(y, *, name: str = "y") -> np.ndarray:
    """Return a boolean mask of the rare (positive) class from two-valued labels.

    The positive class is the one labelled ``+1``, ``1`` or ``True``. Labels must take exactly
    two distinct values, one of which is positive.

    Raises:
      ValueError: ``y`` is not 1-D, has NaN, is not two-valued, or has no positive label.
    """
    arr = label_vector(y, name)
    if arr.dtype.kind == "O":  # e.g. pandas' object columns of ints: judge them as numbers
        as_list = np.asarray(arr.tolist())
        arr = as_list if as_list.dtype.kind in "biuf" and as_list.shape == arr.shape else arr
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    values = np.unique(arr)
    if values.size == 1:
        raise ValueError(
            f"{name} has one class only ({values.tolist()[0]!r}); a ranker needs both a rare "
            "(positive) and a majority class."
        )
    if values.size != 2:
        shown = ", ".join(map(repr, values[:5].tolist())) + (" ..." if values.size > 5 else "")
        raise ValueError(
            f"{name} must be two-valued for a biclass ranker, got {values.size} distinct values "
            f"({shown}); use fit_multilevel for ordinal levels."
        )
    if arr.dtype.kind == "b":
        return arr.astype(bool)
    if arr.dtype.kind in "iuf":
        if 1 not in values:
            raise ValueError(
                f"{name} has values {values.tolist()}; the rare (positive) class must be labelled "
                "+1, 1 or True."
            )
        return arr == 1
    if arr.dtype.kind in "US":
        low = {str(v).strip().lower() for v in values}
        for tag in ("1", "+1", "true", "positive", "pos"):
            if tag in low:
                return np.array([str(v).strip().lower() == tag for v in arr])
    raise ValueError(
        f"{name} has values {values.tolist()!r}; the rare (positive) class must be labelled "
        "+1, 1 or True."
    )


def check_X_y(X, y) -> tuple[np.ndarray, np.ndarray]:
    """Check ``X`` and binary ``y`` together; returns ``(X, positive_mask)``."""
    X = check_X(X)
    pos = check_binary_labels(y)
    if X.shape[0] != pos.shape[0]:
        raise ValueError(
            f"X and y have different lengths: X has {X.shape[0]} rows, y has {pos.shape[0]}."
        )
    return X, pos


def _as_float(value, name: str, noun: str) -> float:
    """``float(value)``; a bool or a non-number is a ``ValueError`` "{name} must be {noun}"."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be {noun}, got {value!r}.")
    try:
        return float(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be {noun}, got {value!r}.") from err


def check_positive(value, name: str) -> float:
    """Return ``value`` as a float after checking it is finite and > 0 (a bool is refused)."""
    v = _as_float(value, name, "a positive number")
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value!r}.")
    return v


def check_lam(lam: float | Sequence[float] | np.ndarray) -> tuple[np.ndarray, bool]:
    """Return ``(lams, is_scalar)`` with ``lams`` a 1-D float64 array of positive values.

    Raises:
      ValueError: a value is <= 0, NaN or inf, the grid is empty or not 1-D, or ``lam`` is not
        numbers (strings and booleans are refused: ``True`` is no penalty).
    """
    try:
        kind = np.asarray(lam).dtype.kind
        arr = np.asarray(lam, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"lam must be a positive float or a 1-D array, got {lam!r}.") from err
    if kind not in "fiu":
        raise ValueError(f"lam must be a positive float or a 1-D array, got {lam!r}.")
    scalar = arr.ndim == 0
    arr = arr.reshape(-1) if scalar else arr
    if arr.ndim != 1:
        raise ValueError(f"lam must be a scalar or a 1-D grid, got shape {arr.shape}.")
    if arr.size == 0:
        raise ValueError("lam is an empty grid.")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"lam must be finite and > 0, got {arr.tolist()}.")
    return arr, scalar


def lam_range(dtype) -> tuple[float, float]:
    """``(lo, hi)``: the λ a fit in ``dtype`` can solve, ``lo = tiny``, ``hi = 1/√tiny``.

    ``tiny`` is the dtype's smallest normal number (1.18e-38 in float32, 2.2e-308 in float64).
    Below it λ is subnormal or rounds to 0 (1e-300 in float32 would fit with no penalty at all).
    Above ``1/√tiny`` (9.2e18 in float32, 6.7e153 in float64) the optimum ``β ≈ −K_RR⁻¹∇L(0)/λ``
    has entries ``~1/λ`` whose squares in ``½ λ βᵀ K_RR β`` underflow: the objective loses its
    regulariser and the solve its footing (float32, λ = 1e39 is even ``inf``: NONFINITE).
    """
    info = np.finfo(np.dtype(dtype))
    tiny = float(info.tiny)
    return tiny, 1.0 / math.sqrt(tiny)


def check_lam_dtype(lams: np.ndarray, dtype) -> None:
    """Refuse λ outside :func:`lam_range` of the fit's ``dtype`` (``lams`` from :func:`check_lam`).

    Example:
      >>> check_lam_dtype(np.array([1e39]), np.float32)  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      ValueError: lam = 1e+39 is outside the range a float32 fit can solve, 1.18e-38 to 9.22e+18 ...
    """
    dt = np.dtype(dtype)
    lo, hi = lam_range(dt)
    bad = lams[(lams < lo) | (lams > hi)]
    if bad.size:
        hint = (
            f"pass dtype=np.float64 for λ up to {lam_range(np.float64)[1]:.2g}, or rescale λ"
            if dt.itemsize < 8
            else "rescale λ"
        )
        raise ValueError(
            f"lam = {bad[0]:.4g} is outside the range a {dt.name} fit can solve, {lo:.3g} to "
            f"{hi:.3g} (below: λ is not a normal {dt.name}; above: β ~ 1/λ and the squares in "
            f"½λβᵀK_RRβ underflow); {hint}."
        )


class PrecisionWarning(UserWarning):
    """Casting the data to the fit's floating dtype destroys much of its spread.

    Example:
      >>> import warnings
      >>> import numpy as np
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> X = np.asarray(X, np.float64) + 1e7  # a large offset: float32 steps are 1 there
      >>> with warnings.catch_warnings(record=True) as caught:
      ...     warnings.simplefilter("always")
      ...     _ = jaxrank.fit_rankrc(X, y, 1.0)
      >>> any(issubclass(w.category, jaxrank.PrecisionWarning) for w in caught)
      True
    """


def check_cast(
    X, dtype, *, name: str = "X", block_rows: int = 65536, underflow: bool = True
) -> None:
    """Check that ``X`` survives the cast to the computation dtype ``dtype``.

    Kernel blocks hold squared distances and inner products of rows, so a row whose squared
    norm nears the dtype's largest value makes the kernel infinite and the fit NaN; that is
    refused. Values large relative to their spread (``1e8 + N(0, 1)``: float32 steps are 8
    there) round to a few levels: the fit would run on different data. That warns
    (:class:`PrecisionWarning`) when the variance of a column carrying at least 1 % of the total
    variance changes by more than 1 % in the cast; the fix is to centre ``X`` or fit in float64.
    Columns of negligible variance are not reported (they barely move a Gaussian kernel).

    One pass over ``X`` in row blocks (``O(block_rows · d)`` extra memory) for the range check,
    and a second one only when the cast can round (e.g. float64 or int64 to float32).

    Args:
      X: ``(m, d)`` rows, already through :func:`check_X`.
      dtype: the floating dtype the kernels will be computed in.
      name: the argument name used in messages.
      block_rows: rows per block.

    The underflow side is refused too: rows whose largest squared distance is below
    :func:`spread_floor` (``X·1e-30`` in float32: squares of 1e-60 are 0) would give a constant
    or NaN kernel.

    Raises:
      ValueError: a row's squared norm may exceed a quarter of the dtype's largest value, or the
        rows' squared spread underflows the dtype.

    Warns:
      PrecisionWarning: the cast changes the variance of an important column by over 1 %.

    Example:
      >>> import warnings
      >>> X = np.random.default_rng(0).normal(size=(100, 2)) + 1e8
      >>> with warnings.catch_warnings(record=True) as w:
      ...     warnings.simplefilter("always")
      ...     check_cast(X, np.float32)
      >>> w[0].category.__name__
      'PrecisionWarning'
    """
    dt = np.dtype(dtype)
    if dt.kind != "f":
        raise ValueError(f"dtype must be a floating dtype, got {dt}.")
    arr = np.asarray(X)
    m, d = arr.shape
    big = float(np.finfo(dt).max) / 4
    lo = np.full(d, np.inf)
    hi = np.full(d, -np.inf)
    for start in range(0, m, block_rows):  # min and max in X's own dtype: exact, no copy
        block = arr[start : start + block_rows]
        lo = np.minimum(lo, block.min(axis=0).astype(np.float64))
        hi = np.maximum(hi, block.max(axis=0).astype(np.float64))
    absmax = np.maximum(np.abs(lo), np.abs(hi))
    # the underflow side: ‖x_i − x_j‖² at its largest, as a norm (its square may underflow
    # float64 itself: X·1e-170)
    ranges = hi - lo
    top = float(ranges.max())
    spread = top * float(np.sqrt(np.sum((ranges / top) ** 2))) if top > 0 else 0.0
    if underflow and 0 < spread < math.sqrt(spread_floor(dt)):
        raise ValueError(
            f"{name} spans at most {spread:.3g} between rows: squared distances and inner "
            f"products of rows (~{spread:.3g}²) underflow {dt} (smallest normal "
            f"{float(np.finfo(dt).tiny):.3g}, resolved to full precision above "
            f"{spread_floor(dt):.3g}) and the kernel would be constant or NaN. Rescale {name} "
            "(e.g. StandardScaler)" + (" or pass dtype=np.float64." if dt.itemsize < 8 else ".")
        )
    with np.errstate(over="ignore"):
        sq = float(np.sum(absmax * absmax))
    if not sq <= big:
        raise ValueError(
            f"{name} has values up to {absmax.max():.3g}: squared distances between rows "
            f"(~{sq:.3g}) overflow {dt} (largest {np.finfo(dt).max:.3g}) and the kernel would be "
            f"inf/NaN. Rescale {name} (e.g. StandardScaler)"
            + (" or pass dtype=np.float64." if dt.itemsize < 8 else ".")
        )
    if np.can_cast(arr.dtype, dt, "safe"):
        return
    shift = arr[0].astype(np.float64)  # sums about one row: no cancellation far from 0
    sums = np.zeros((4, d))
    for start in range(0, m, block_rows):
        block = arr[start : start + block_rows]
        exact = block.astype(np.float64) - shift
        cast = block.astype(dt).astype(np.float64) - shift
        sums += [exact.sum(0), (exact * exact).sum(0), cast.sum(0), (cast * cast).sum(0)]
    var = np.maximum(sums[1] / m - (sums[0] / m) ** 2, 0)
    var_cast = np.maximum(sums[3] / m - (sums[2] / m) ** 2, 0)
    total = float(var.sum())
    if total == 0:
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        change = np.abs(var_cast - var) / var
    bad = np.flatnonzero((var >= 0.01 * total) & (change > 0.01))
    if bad.size == 0:
        return
    j = int(bad[0])
    cols = ", ".join(str(int(c)) for c in bad[:5]) + (" ..." if bad.size > 5 else "")
    warnings.warn(
        f"casting {name} to {dt} changes the variance of column(s) {cols} by more than 1 % "
        f"(column {j}: values up to {absmax[j]:.3g} with standard deviation "
        f"{np.sqrt(var[j]):.3g}; {dt} steps there are {float(np.spacing(dt.type(absmax[j]))):.3g})."
        f" The fit would run on rounded data: centre {name} (e.g. StandardScaler) or pass "
        "dtype=np.float64.",
        PrecisionWarning,
        stacklevel=3,
    )


def check_key(key, name: str = "key"):
    """Return ``key`` after checking it is one JAX PRNG key; ``ValueError`` otherwise.

    Accepts a typed key (``jax.random.key(0)``, shape ``()``) or legacy raw key data
    (``jax.random.PRNGKey(0)``: uint32, shape ``(2,)``). An integer gets a message naming the
    fix (``jax.random.key(3)``); ``None`` a message saying the key is required. Checked with
    numpy only (a typed key's dtype prints as ``key<impl>``).

    Example:
      >>> check_key(3)
      Traceback (most recent call last):
      ...
      ValueError: key must be a jax.random.key, got the integer 3; pass key=jax.random.key(3).
    """
    if key is None:
        raise ValueError(f"{name} is required: pass {name}=jax.random.key(...).")
    if isinstance(key, bool | np.bool_):
        raise ValueError(f"{name} must be a jax.random.key, got {key!r}.")
    if isinstance(key, int | np.integer):
        raise ValueError(
            f"{name} must be a jax.random.key, got the integer {key}; "
            f"pass {name}=jax.random.key({key})."
        )
    dtype, shape = getattr(key, "dtype", None), getattr(key, "shape", None)
    typed = dtype is not None and str(dtype).startswith("key<") and shape == ()
    raw = False
    if not typed and dtype is not None and shape == (2,):
        try:
            raw = np.dtype(dtype) == np.uint32
        except TypeError:
            raw = False
    if not (typed or raw):
        what = f"an array of dtype {dtype} and shape {shape}" if dtype is not None else repr(key)
        raise ValueError(
            f"{name} must be a single jax.random.key(...) (or jax.random.PRNGKey data), got "
            f"{what[:80]}."
        )
    return key


def check_real(value, name: str, lo: float, hi: float, *, lo_open: bool, hi_open: bool) -> float:
    """Return ``value`` as a float after checking it lies in the given interval."""
    v = _as_float(value, name, "a number")
    below = v <= lo if lo_open else v < lo
    above = v >= hi if hi_open else v > hi
    if not math.isfinite(v) or below or above:
        interval = f"{'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
        raise ValueError(f"{name} must lie in {interval}, got {value!r}.")
    return v


def check_int(value, name: str, minimum: int, maximum: int | None = None) -> int:
    """Return ``value`` as an int after checking it is an integer ``>= minimum`` (and
    ``<= maximum`` when given)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    try:
        v = operator.index(value)
    except TypeError as err:
        raise ValueError(f"{name} must be an integer, got {value!r}.") from err
    if maximum is not None and not minimum <= v <= maximum:
        raise ValueError(f"{name} must be in [{minimum}, {maximum}], got {v}.")
    if v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {v}.")
    return v


def check_in_dtype(value, name: str, dtype, *, zero: bool = False, hint: str = "") -> float:
    """Return ``value`` as a float after checking it is a normal number of ``dtype``.

    A positive scale parameter (σ², ν, ε, γ, a kernel offset) computed in ``dtype`` must lie in
    ``[tiny, max]``: below ``tiny`` (1.18e-38 in float32) it is subnormal or rounds to 0 and a
    division by it gives inf or NaN; above ``max`` it is inf. ``zero=True`` also accepts 0 (an
    offset that may vanish) and a value of either sign.

    Args:
      value: a real number (already checked finite by the caller or here).
      name: the argument named in the message.
      dtype: the floating dtype the fit computes in.
      zero: accept 0 and negative values of normal size.
      hint: appended to the message (how to fix it).

    Raises:
      ValueError: ``value`` is NaN, inf, outside the dtype's normal range, or not a number.

    Example:
      >>> check_in_dtype(1e-300, "sigma2", np.float32)  # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      ValueError: sigma2 = 1e-300 is outside float32's range of normal numbers, ...
    """
    v = _as_float(value, name, "a number")
    dt = np.dtype(dtype)
    info = np.finfo(dt)
    size = abs(v) if zero else v
    if zero and v == 0:
        return v
    if not math.isfinite(v) or not float(info.tiny) <= size <= float(info.max):
        where = "" if zero else " (and > 0)"
        raise ValueError(
            f"{name} = {v:.4g} is outside {dt.name}'s range of normal numbers, "
            f"{float(info.tiny):.3g} to {float(info.max):.3g}{where}: in a {dt.name} fit it "
            "would round to 0 or inf and the kernel or loss would be NaN"
            + (f"; {hint}" if hint else "")
            + "."
        )
    return v


def check_eps_dtype(eps, dtype) -> None:
    """The smoothed hinge's ε in ``dtype``: ε and its quadratic coefficient ``1/(4ε)`` (seed 000
    eq. 13) both normal numbers (ε = 1e-300 in float32 is 0, and 1/(4ε) inf: a NaN loss).

    Raises:
      ValueError: naming ``eps`` and the dtype's range.
    """
    check_in_dtype(eps, "eps", dtype, hint="the smoothed hinge's ε is usually in (0, 1]")
    check_in_dtype(0.25 / float(eps), "1/(4·eps)", dtype, hint="raise eps")


def spread_floor(dtype) -> float:
    """The smallest squared spread of rows a kernel in ``dtype`` resolves: ``tiny / eps``.

    Squared distances and inner products of rows are sums of squares; below ``tiny`` they are
    subnormal or 0, and within a factor ``1/eps`` of it they keep fewer significant bits than the
    dtype has (1e-31 in float32, 1e-292 in float64).
    """
    info = np.finfo(np.dtype(dtype))
    return float(info.tiny) / float(info.eps)


def check_fit_result(
    coef,
    status,
    name: str,
    values,
    *,
    who: str,
    dtype,
    causes: Sequence[str] | Callable[[], Sequence[str]] = (),
    zero: bool = True,
) -> None:
    """Refuse a fit's result that is NaN or degenerate, naming the likely cause.

    The solvers return status codes, never exceptions (they run under ``jit`` and ``vmap``); this
    is the host-side check after them. Two results are refused with a ``ValueError``:

    - a NaN or infinite coefficient (status ``NONFINITE``): a model that scores NaN;
    - a model whose coefficients are all exactly 0, whatever its status: every score is 0, so
      it ranks nothing. With status ``CONVERGED`` the zero start met the gradient test only
      because the loss's gradient there is below the tolerance (e.g. ε huge: the smoothed
      hinge's slope is at most 1/(2ε); or every kernel row equal in this dtype: far from the
      origin relative to the spread), which is no certificate of a model (a degenerate model is
      never CONVERGED); with another status the solver never left 0.

    Args:
      coef: ``(n,)`` or ``(L, n)`` coefficients, one row per entry of ``status``.
      status: ``()`` or ``(L,)`` :class:`~jaxrank.solver.Status` codes (``NONFINITE`` = 3,
        ``CONVERGED`` = 0).
      name: the grid's parameter name (``"λ"``), ``values`` its values (indexed like ``status``).
      who: the fitter, for the message.
      dtype: the fit's dtype, for the message.
      causes: likely causes in the caller's terms, listed in the message; or a function giving
        them, called only when a row is refused (a diagnosis may cost a pass over the data).
      zero: refuse all-zero rows (``False`` where 0 can be the certified optimum, as L1's at
        ``μ ≥ μ_max``).

    Raises:
      ValueError: some row is non-finite, or all zero (unless ``zero=False``).

    Example:
      >>> check_fit_result(np.zeros(3), 0, "λ", [0.5], who="fit", dtype=np.float32)
      ... # doctest: +ELLIPSIS
      Traceback (most recent call last):
      ...
      ValueError: fit returned the zero model (every coefficient 0, every score 0: ...
    """
    c = np.asarray(coef)
    st = np.atleast_1d(np.asarray(status))
    rows = c.reshape(st.size, -1)
    vals = np.atleast_1d(np.asarray(values, dtype=np.float64))
    dt = np.dtype(dtype).name
    nonfinite = np.flatnonzero(~np.all(np.isfinite(rows), axis=1))
    zero = np.flatnonzero(np.all(rows == 0, axis=1) & zero)
    if not (nonfinite.size or zero.size):
        return
    causes = list(causes() if callable(causes) else causes)
    why = ("; likely cause: " + "; or ".join(causes)) if causes else ""
    if nonfinite.size:
        listed = ", ".join(f"{name}={vals[i]:.3g}" for i in nonfinite[:6])
        raise ValueError(
            f"{who} reached NONFINITE: NaN or infinite coefficients in {dt} for {listed}"
            f"{why}. The fit is refused rather than returned as a model that scores NaN."
        )
    if zero.size:
        listed = ", ".join(f"{name}={vals[i]:.3g}" for i in zero[:6])
        codes = {int(st[i]) for i in zero}
        how = (
            "the loss's gradient at 0 is below the tolerance, which certifies no model"
            if codes == {0}
            else "the solver stopped before moving away from 0"
        )
        raise ValueError(
            f"{who} returned the zero model (every coefficient 0, every score 0: it ranks "
            f"nothing) for {listed}: {how}{why}."
        )
