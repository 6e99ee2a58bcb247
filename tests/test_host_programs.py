"""The host-side steps of a search run no eager JAX programs (jaxrank._random, metrics.auc).

Each eager ``jax.random`` call, ``jnp.asarray`` of a host array or ``jnp.int32(...)`` runs a
tiny XLA program (``stage``, ``convert_element_type``, ``threefry2x32``, ``unstack``, ...) that
every new process traces, lowers and loads (~10-20 ms apiece on CPU): a warm-cache
``RankRCClassifierCV().fit`` at m = 300 ran 25 programs, 13 of them such.
"""

import logging

import jax
import numpy as np
import pytest

from jaxrank import _cv, _random, bases, metrics
from jaxrank.select import stratified_folds

EAGER = {
    "stage", "convert_element_type", "dynamic_slice", "squeeze", "unstack", "iota",
    "iota_2x32_shape", "threefry2x32", "bitwise_xor", "_threefry_split", "_threefry_fold_in",
    "_shuffle",
}  # fmt: skip


class _Compiles(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.names = []

    def emit(self, record):
        msg = record.getMessage()
        if msg.startswith("Compiling "):
            self.names.append(msg.split(" ")[1].removeprefix("jit(").split(")")[0])


@pytest.fixture
def compiles():
    h = _Compiles()
    loggers = [logging.getLogger(n) for n in ("jax._src.interpreters.pxla", "jax._src.dispatch")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.addHandler(h)
        lg.setLevel(logging.DEBUG)
    with jax.log_compiles(True):
        yield h.names
    for lg, lev in zip(loggers, levels, strict=True):
        lg.removeHandler(h)
        lg.setLevel(lev)


@pytest.mark.parametrize("n", [137, 211])
def test_key_helpers_equal_jax_random(n):
    key = jax.random.key(n)
    for k in (2, 3):
        ref = jax.random.split(key, k)
        got = _random.split(key, k)
        assert len(got) == k
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(jax.random.key_data(a), jax.random.key_data(b))
    for i in (0, 4, 2**32 - 1):
        np.testing.assert_array_equal(
            jax.random.key_data(_random.fold_in(key, i)),
            jax.random.key_data(jax.random.fold_in(key, i)),
        )
    np.testing.assert_array_equal(
        _random.key_bits(key, n), np.asarray(jax.random.bits(key, (n,), np.uint32))
    )
    np.testing.assert_array_equal(
        _random.permutation(key, n), np.asarray(jax.random.permutation(key, n))
    )


def test_search_setup_runs_no_eager_programs(compiles):
    # sizes no other test uses, so nothing is already compiled in this process
    rng = np.random.default_rng(3)
    m, d = 173, 3
    X = rng.normal(size=(m, d))
    pos = np.zeros(m, bool)
    pos[:19] = True
    key = jax.random.key(11)
    k_fold, k_trim, _ = _random.split(key, 3)
    fold = stratified_folds(pos, 5, key=k_fold)
    train = _cv.equal_folds(fold, pos, key=k_trim)
    tr = train[0]
    idx = bases.auto_basis(X[tr], pos[tr], key=_random.fold_in(_cv.basis_key(key), 0),
                           min_basis=61)  # fmt: skip
    assert idx.size == 61
    scores = rng.normal(size=(4, m)).astype(np.float32)
    auc = metrics.auc(pos, scores, where=np.arange(m) < m - 3)
    assert auc.shape == (4,)
    eager = sorted(set(compiles) & EAGER)
    assert not eager, f"eager programs ran: {eager} (all: {compiles})"
    assert compiles, "the compile log caught nothing: the test would pass vacuously"
