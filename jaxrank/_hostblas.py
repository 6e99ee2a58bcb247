"""Host (numpy) LAPACK on the small matrices of a fit, on one BLAS thread.

A fit factorises ``K_RR`` and the preconditioner's ``|R| × |R|`` matrices on the host
(:func:`jaxrank._fitting.spectral_precond`, :func:`jaxrank._fitting.cholesky_precond`,
:func:`jaxrank._fitting.psd_gram`). Right after a JAX computation, XLA:CPU's worker threads are
still spinning, and a multi-threaded OpenBLAS call then competes with them for the cores:
measured on
the project's 2-core machine, ``np.linalg.eigh`` of a 256 × 256 matrix took 32-490 ms with
OpenBLAS's default threads against 6-7 ms on one thread, and a 600-row
``RankRCClassifierCV`` (36 fits) spent 11 of its 38 s there. On one thread these factorisations
are O(|R|³) flops that stay below a second up to ``|R|`` ≈ 2000, so nothing is lost by pinning
them.

The pin uses ``threadpoolctl`` when it is installed (it comes with scikit-learn); without it
the calls run with the BLAS library's own threading, as before. The pin is process-wide (the
BLAS library has one thread setting), so concurrent fits (the threads of
:func:`jaxrank._cv.cv_search`) share it: the first to enter sets it, the last to leave restores
the library's own setting. Entering and leaving independently would let a thread restore the
setting under another that is still inside, and a late leaver "restore" the pinned value for
good.
"""

from __future__ import annotations

import contextlib
import functools
import threading


@functools.cache
def _controller():
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # optional: scikit-learn installs it
        return None
    try:
        return ThreadpoolController()
    except Exception:  # an unusual BLAS build threadpoolctl cannot inspect: leave it alone
        return None


_lock = threading.Lock()
_depth = 0  # threads inside one_blas_thread
_limiter = None  # the pin they share, restored by the last to leave


@contextlib.contextmanager
def one_blas_thread():
    """Run the block with the host BLAS/LAPACK on one thread (a no-op without threadpoolctl).

    Example:
      >>> import numpy as np
      >>> from jaxrank._hostblas import one_blas_thread
      >>> with one_blas_thread():
      ...     L = np.linalg.cholesky(np.eye(3))
    """
    global _depth, _limiter
    ctl = _controller()
    if ctl is None:
        yield
        return
    with _lock:
        if _depth == 0:
            _limiter = ctl.limit(limits=1, user_api="blas")
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _limiter.restore_original_limits()
                _limiter = None
