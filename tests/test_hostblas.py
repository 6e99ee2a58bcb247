"""The host BLAS pin shared by concurrent fits (jaxrank._hostblas)."""

import threading

import jax
import numpy as np
import pytest

from jaxrank import _hostblas

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


def test_a_pin_covers_other_threads_and_is_restored_by_its_own():
    if not _blas_threads():
        pytest.skip("no BLAS library that threadpoolctl can see")
    before = _blas_threads()
    seen = []

    def worker():
        with _hostblas.one_blas_thread():  # under the caller's pin: it changes nothing
            seen.append(_blas_threads())
            np.linalg.cholesky(np.eye(4))
        seen.append(_blas_threads())

    with _hostblas.one_blas_thread():
        assert set(_blas_threads()) == {1}
        threads = [threading.Thread(target=worker) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert set(_blas_threads()) == {1}
    assert len(seen) == 6 and all(set(s) == {1} for s in seen)
    assert _blas_threads() == before
    with _hostblas.one_blas_thread(), _hostblas.one_blas_thread():  # nested on one thread
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before


def test_a_pin_left_by_another_thread_than_the_last_is_still_restored():
    # thread A pins, B enters under it, A leaves first, B last. threadpoolctl lets only the
    # thread that set the limit restore it: restored from B, the process stayed on one thread
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
            seen["under_a"] = _blas_threads()
            b_in.set()
            a_out.wait(10)
            np.linalg.cholesky(np.eye(4))

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert a_out.is_set() and set(seen["under_a"]) == {1}
    assert _blas_threads() == before
    with _hostblas.one_blas_thread():  # a later pin on this thread still takes hold
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before


def test_a_threaded_search_leaves_the_blas_setting_as_it_found_it():
    # a limit set by a worker thread and restored by another is not restored (threadpoolctl
    # lets one thread at a time set it): the process stayed on one BLAS thread after a search
    from jaxrank import _cv, datasets

    if not _blas_threads():
        pytest.skip("no BLAS library that threadpoolctl can see")
    X, y = datasets.make_rare_class(120, 0.2, 0.75, seed=0)
    before = _blas_threads()
    for seed in range(3):  # 12 fits on 3 threads each: which thread sets and which restores varies
        _cv.cv_search(X, y == 1, lams=(1e-3, 1.0), sigma2s=(0.5, 1.0, 2.0, 4.0), folds=3,
                      key=jax.random.key(seed), min_basis=16, max_iter=5)  # fmt: skip
        assert _blas_threads() == before
    with _hostblas.one_blas_thread():  # and a later pin on this thread still takes hold
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before
