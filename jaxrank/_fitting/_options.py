"""The options every R-subset fit shares: the dtype choice and the checked loss and solver
options (:data:`FIT_OPTIONS`: :func:`jaxrank.fit`'s defaults, one definition)."""

from __future__ import annotations

import types
from typing import NamedTuple

import jax
import numpy as np

from jaxrank import kernels as _kernels
from jaxrank._validation import (
    check_cast,
    check_positive,
)
from jaxrank.losses import get_loss


def choose_dtype(X: np.ndarray, dtype) -> np.dtype:
    if dtype is not None:
        dtype = np.dtype(dtype)
        if dtype == np.float64 and not jax.config.jax_enable_x64:
            raise ValueError(
                "dtype=float64 needs x64: call jax.config.update('jax_enable_x64', True) first."
            )
        if dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {dtype}.")
        return dtype
    if X.dtype == np.float64 and jax.config.jax_enable_x64:
        return np.dtype(np.float64)
    return np.dtype(np.float32)


def check_max_kernel_bytes(max_kernel_bytes, memory_budget) -> int:
    """The largest kernel block a fit stores (``None``: the memory budget); beyond it the block
    is streamed (:class:`~jaxrank.kernels.StreamedBlock`)."""
    if max_kernel_bytes is None:
        return _kernels.default_memory_budget() if memory_budget is None else int(memory_budget)
    if isinstance(max_kernel_bytes, bool) or int(max_kernel_bytes) != max_kernel_bytes:
        raise ValueError(f"max_kernel_bytes must be an integer, got {max_kernel_bytes!r}.")
    if max_kernel_bytes < 0:
        raise ValueError(f"max_kernel_bytes must be >= 0, got {max_kernel_bytes!r}.")
    return int(max_kernel_bytes)


def check_solver_options(*, loss, eps, tol, path, chains, precondition, max_iter, max_cg) -> float:
    """Shared checks of the loss and solver options of every fit entry point; returns ``tol``."""
    if loss == "hinge":
        raise ValueError("loss='hinge' is not twice differentiable; use 'smoothed_hinge'.")
    get_loss(loss, check_positive(eps, "eps") if loss == "smoothed_hinge" else eps)
    tol = check_positive(tol, "tol")
    if path not in ("batch", "warm"):
        raise ValueError(f"path must be 'batch' or 'warm', got {path!r}.")
    if isinstance(chains, bool) or int(chains) != chains or chains < 1:
        raise ValueError(f"chains must be a positive integer, got {chains!r}.")
    if precondition not in ("auto", "spectral", "cholesky", "jacobi", "none"):
        raise ValueError(
            "precondition must be 'auto', 'spectral', 'cholesky', 'jacobi' or 'none', "
            f"got {precondition!r}."
        )
    for name, v in (("max_iter", max_iter), ("max_cg", max_cg)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}.")
    return tol


#: The loss and solver options every R-subset fit takes, with :func:`jaxrank.fit`'s defaults:
#: the one definition (issue 42) that the public fitters' keyword signatures follow
#: (``tests/test_fit.py`` checks ``fit``, ``fit_push``, ``fit_l1``, ``fit_greedy`` and
#: ``distributed.fit`` against it) and that a caller inside the package completes its options
#: from (``{**FIT_OPTIONS, **given}``). ``fit``'s ``loss=None`` means this loss, or the
#: squared hinge for ``basis="greedy"``.
FIT_OPTIONS = types.MappingProxyType(
    dict(
        loss="smoothed_hinge", eps=0.5, tol=1e-6, max_iter=100, max_cg=25, path="batch",
        chains=4, precondition="auto", dtype=None, memory_budget=None, max_kernel_bytes=None,
    )
)  # fmt: skip


class FitOptions(NamedTuple):
    """The checked loss and solver options of a :func:`fit_rows` call (:func:`check_fit_options`),
    built once by a fitter and passed on as one bundle (``fit_rows(..., **options._asdict())``)."""

    dtype: np.dtype
    loss: str
    eps: float
    tol: float
    max_iter: int
    max_cg: int
    path: str
    chains: int
    precondition: str
    memory_budget: int | None
    max_kernel_bytes: int | None


def check_fit_options(
    X, *, loss, eps, tol, path, chains, precondition, max_iter, max_cg, dtype, memory_budget,
    max_kernel_bytes, no_jacobi: str | None = None,
) -> FitOptions:  # fmt: skip
    """The checks :func:`jaxrank.fit`, :func:`jaxrank.push.fit_push` and
    :func:`jaxrank.multilevel.fit_multilevel` share, in this order: ``precondition="jacobi"``
    refused with the message ``no_jacobi`` (when given), :func:`check_solver_options`, the dtype
    (:func:`choose_dtype`) and the cast of ``X`` to it (:func:`~jaxrank._validation.check_cast`).
    """
    if no_jacobi is not None and precondition == "jacobi":
        raise ValueError(no_jacobi)
    tol = check_solver_options(
        loss=loss, eps=eps, tol=tol, path=path, chains=chains, precondition=precondition,
        max_iter=max_iter, max_cg=max_cg,
    )  # fmt: skip
    dt = choose_dtype(X, dtype)
    check_cast(X, dt)
    return FitOptions(dt, loss, eps, tol, max_iter, max_cg, path, chains, precondition,
                      memory_budget, max_kernel_bytes)  # fmt: skip
