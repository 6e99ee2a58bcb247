"""Host (numpy) LAPACK on the small matrices of a fit, on one BLAS thread.

A fit factorises ``K_RR`` and the preconditioner's ``|R| × |R|`` matrices on the host
(:func:`jaxrank._fitting.spectral_precond`, :func:`jaxrank._fitting.cholesky_precond`,
:func:`jaxrank._fitting.psd_gram`). Right after a JAX computation, XLA:CPU's worker threads are
still spinning, and a multi-threaded OpenBLAS call then competes with them for the cores (up to
70 times slower, measured: docs/design.md §12). On one thread these factorisations are O(|R|³)
flops that stay below a second up to ``|R|`` ≈ 2000, so nothing is lost by pinning them.

The pin uses ``threadpoolctl`` when it is installed (it comes with scikit-learn); without it
the calls run with the BLAS library's own threading, as before.

The pin is process-wide (OpenBLAS without OpenMP has one thread setting), and threadpoolctl
lets one thread at a time change it: a limit set in one thread and restored from another is
silently not restored (measured: a search whose worker threads each pinned and restored left
the process on one BLAS thread for good). So a pin is always set and restored by the thread
that enters it, and while one is held every other :func:`one_blas_thread` block, on any
thread, runs under it without touching the setting: the threaded search
(:func:`jaxrank._cv.cv_search`) holds one on its calling thread around its workers.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading


@functools.cache
def _controller():
    # importing threadpoolctl sets KMP_DUPLICATE_LIB_OK=True in os.environ (a setdefault at
    # its import, for Intel's OpenMP runtime loaded twice); a fit is not to change the user's
    # environment, so a value it adds is taken out again (issue 41 item 12). Importing
    # scikit-learn does the same, which the estimators cannot avoid.
    had = "KMP_DUPLICATE_LIB_OK" in os.environ
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # optional: scikit-learn installs it
        return None
    finally:
        if not had:
            os.environ.pop("KMP_DUPLICATE_LIB_OK", None)
    try:
        # XLA:CPU's LAPACK calls (the fit's Cholesky and eigensolves, jaxrank._fitting) run on
        # the OpenBLAS that scipy bundles, which jaxlib loads on its first linear-algebra op:
        # load it now, so that the controller, made once, covers it too
        import scipy.linalg.cython_lapack  # noqa: F401
    except ImportError:
        pass
    try:
        return ThreadpoolController()
    except Exception:  # an unusual BLAS build threadpoolctl cannot inspect: leave it alone
        return None


_lock = threading.Lock()
_held = 0  # blocks inside one_blas_thread, all threads


@contextlib.contextmanager
def one_blas_thread():
    """Run the block with the host BLAS/LAPACK on one thread (a no-op without threadpoolctl).

    A block entered while another (on any thread) holds the pin runs under that pin.

    Example:
      >>> import numpy as np
      >>> from jaxrank._hostblas import one_blas_thread
      >>> with one_blas_thread():
      ...     L = np.linalg.cholesky(np.eye(3))
    """
    global _held
    ctl = _controller()
    with _lock:
        covered = _held > 0
        _held += 1
    try:
        if ctl is None or covered:
            yield
        else:
            with ctl.limit(limits=1, user_api="blas"):
                yield
    finally:
        with _lock:
            _held -= 1
