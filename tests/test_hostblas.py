"""The host BLAS pin shared by concurrent fits (jaxrank._hostblas)."""

import threading

import numpy as np
import pytest

from jaxrank import _hostblas

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


def test_one_blas_thread_pins_until_the_last_thread_leaves():
    if not _blas_threads():
        pytest.skip("no BLAS library that threadpoolctl can see")
    before = _blas_threads()
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with _hostblas.one_blas_thread():
            a_in.set()
            b_in.wait(10)
        a_out.set()

    def second():
        a_in.wait(10)
        with _hostblas.one_blas_thread():
            b_in.set()
            a_out.wait(10)
            # the first thread has left: the pin holds while this one is inside
            seen["inside"] = _blas_threads()
            np.linalg.cholesky(np.eye(4))

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert a_out.is_set() and "inside" in seen
    assert set(seen["inside"]) == {1}
    # and the last to leave restored the library's own setting
    assert _blas_threads() == before
    with _hostblas.one_blas_thread(), _hostblas.one_blas_thread():  # nested on one thread
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before
