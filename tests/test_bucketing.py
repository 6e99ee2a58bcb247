"""The bucketing recipe of docs/jax.md ("One program for many score lengths"): scores padded on
the host to a few bucket lengths, the padding masked with ``where=``, give the exact value and
gradient, and new lengths inside a bucket reuse the compiled program."""

import jax
import numpy as np
import pytest
from _compiles import count_compiles

import jaxrank

BUCKETS = (64, 256)


def _bucket(n):
    return next(b for b in BUCKETS if b >= n)


@jax.jit
def _value_and_grad(scores, labels, where, weights):
    f = lambda s: jaxrank.pairwise_loss(s, labels, where=where, weights=weights).sum()
    return jax.value_and_grad(f)(scores)


def bucketed(scores, labels, weights):
    # as in docs/jax.md: numpy padding on the host (a jnp.pad would compile per length)
    n = scores.shape[-1]
    width = [(0, 0)] * (scores.ndim - 1) + [(0, _bucket(n) - n)]
    pad = lambda a: np.pad(np.asarray(a), width)
    where = pad(np.ones(scores.shape, bool))
    value, grad = _value_and_grad(pad(scores), pad(labels), where, pad(weights))
    return value, np.asarray(grad)[..., :n]


def _data(n, seed):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(3, n))
    s[0, : n // 4] = 0.5  # ties
    return s, rng.random((3, n)) < 0.2, rng.random((3, n))


def test_bucketed_value_and_gradient_are_exact():
    for n in (5, 63, 64, 65, 200):
        s, y, w = _data(n, n)
        value, grad = bucketed(s, y, w)
        exact = lambda s, y, w: jaxrank.pairwise_loss(s, y, weights=w).sum()
        want, want_grad = jax.value_and_grad(exact)(s, y, w)
        np.testing.assert_allclose(value, want, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-10, atol=1e-12)


def test_lengths_in_one_bucket_compile_once():
    data = {n: _data(n, n) for n in (100, 131, 256, 180, 65)}  # all in the 256 bucket
    bucketed(*data[100])  # the bucket's program
    before = _value_and_grad._cache_size()
    with count_compiles() as seen:
        for n in (131, 256, 180, 65):
            bucketed(*data[n])
    assert seen == {"traces": 0, "compiles": 0}
    assert _value_and_grad._cache_size() == before
    # a length in the next bucket down compiles one program more, once
    bucketed(*_data(40, 0))
    with count_compiles() as seen:
        bucketed(*_data(17, 1))
    assert seen["compiles"] == 0
    assert _value_and_grad._cache_size() <= before + 1  # (the 64 bucket may be compiled)


def test_unbucketed_lengths_do_compile():
    # the control: without padding, every new length is a new program
    f = jax.jit(lambda s, y: jaxrank.pairwise_loss(s, y))
    f(*_data(70, 0)[:2])
    with count_compiles() as seen:
        f(*_data(71, 0)[:2])
    assert seen["compiles"] >= 1


@pytest.mark.parametrize("n", [1, 64])
def test_padding_is_never_read(n):
    # whatever the padded entries hold (NaN, inf, labels, weights), masked they change nothing
    s, y, w = _data(n, 3)
    where = np.zeros((3, 64), bool)
    where[:, :n] = True
    fill = lambda a, v: np.concatenate([a, np.full((3, 64 - n), v, a.dtype)], axis=1)
    f = jax.jit(lambda s, y, w: jaxrank.pairwise_loss(s, y, where=where, weights=w))
    a = f(fill(s, np.nan), fill(y, True), fill(w, -1.0))
    b = f(fill(s, 0.0), fill(y, False), fill(w, 0.0))
    np.testing.assert_array_equal(a, b)
