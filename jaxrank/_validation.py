"""Input checks shared by every public entry point.

One module, not copies: each public function calls these before any numerics, so that bad input
gets a ``ValueError`` naming the problem instead of a silent NaN or a wrong model.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = [
    "check_X",
    "check_X_y",
    "check_binary_labels",
    "check_lam",
    "check_positive",
    "label_vector",
]


def check_X(X, *, name: str = "X", allow_jax: bool = True) -> np.ndarray:
    """Return ``X`` as a 2-D floating array after checking shape and finiteness.

    Args:
      X: array-like of shape ``(n, d)``.
      name: the argument name used in error messages.
      allow_jax: accept ``jax.Array`` inputs (converted to numpy for the checks).

    Raises:
      ValueError: ``X`` is empty, not 2-D, not numeric, or holds NaN or inf.
    """
    if hasattr(X, "toarray") and hasattr(X, "nnz"):
        raise ValueError(
            f"{name} is a scipy sparse matrix; jaxrank's kernels need a dense array: "
            f"pass {name}.toarray()."
        )
    arr = np.asarray(X)
    if arr.dtype == object:
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} holds non-numeric values (dtype object).") from err
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
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains NaN or infinite values.")
    values = np.unique(arr)
    if values.size == 1:
        raise ValueError(
            f"{name} has one class only ({values[0]!r}); a ranker needs both a rare (positive) "
            "and a majority class."
        )
    if values.size != 2:
        shown = ", ".join(repr(v) for v in values[:5]) + (" ..." if values.size > 5 else "")
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


def check_positive(value, name: str) -> float:
    """Return ``value`` as a float after checking it is finite and > 0 (a bool is refused)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a positive number, got {value!r}.")
    try:
        v = float(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a positive number, got {value!r}.") from err
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {value!r}.")
    return v


def check_lam(lam: float | Sequence[float] | np.ndarray) -> tuple[np.ndarray, bool]:
    """Return ``(lams, is_scalar)`` with ``lams`` a 1-D float64 array of positive values.

    Raises:
      ValueError: a value is <= 0, NaN or inf, the grid is empty or not 1-D.
    """
    arr = np.asarray(lam, dtype=np.float64) if not isinstance(lam, np.ndarray) else lam
    try:
        arr = np.asarray(arr, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"lam must be a positive float or a 1-D array, got {lam!r}.") from err
    scalar = arr.ndim == 0
    arr = arr.reshape(-1) if scalar else arr
    if arr.ndim != 1:
        raise ValueError(f"lam must be a scalar or a 1-D grid, got shape {arr.shape}.")
    if arr.size == 0:
        raise ValueError("lam is an empty grid.")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"lam must be finite and > 0, got {arr.tolist()}.")
    return arr, scalar
