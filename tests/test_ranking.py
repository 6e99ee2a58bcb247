"""jaxrank.pairwise_loss / pairwise_auc equal the pair loop under grad, jvp, hessian, jit, vmap."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracles import ranking_loss_oracle

import jaxrank
from jaxrank import losses, metrics, ranking

LOSSES = {
    "smoothed_hinge_0.5": ("smoothed_hinge", 0.5),
    "smoothed_hinge_0.1": ("smoothed_hinge", 0.1),
    "squared_hinge": ("squared_hinge", 0.5),
}
CASES = list(itertools.product([False, True], [False, True], [False, True]))  # mask, w, seg


def _data(seed, n, *, ties=True, mask=False, weights=False, segments=False, rho=0.3):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=n)
    if ties:  # equal scores, and pair differences landing exactly on breakpoints
        s = np.round(s, 1)
    pos = rng.random(n) < rho
    keep = rng.random(n) < 0.8 if mask else np.ones(n, bool)
    w = rng.uniform(0.2, 2.0, size=n) if weights else np.ones(n)
    seg = rng.integers(0, 3, size=n) if segments else np.zeros(n, np.int64)
    d = rng.normal(size=n)
    return s, pos, keep, w, seg, d


def _call(s, pos, keep, w, seg, mask, weights, segments, **kw):
    return jaxrank.pairwise_loss(
        s,
        pos,
        where=keep if mask else None,
        weights=w if weights else None,
        segments=seg if segments else None,
        **kw,
    )


def _all_orders(mask, weights, segments):
    # value, gradient, HVP (forward over reverse), mean and per-entry terms in one program per
    # option set (the loss parameters are dynamic: every loss shares it)
    @jax.jit
    def run(x, d, pos, keep, w, seg, loss):
        def f(x, reduce):
            return _call(x, pos, keep, w, seg, mask, weights, segments, reduce=reduce, loss=loss)

        v, g = jax.value_and_grad(lambda x: f(x, "sum"))(x)
        hv = jax.jvp(jax.grad(lambda x: f(x, "sum")), (x,), (d,))[1]
        ge = jax.grad(lambda x: jnp.sum(f(x, "none")))(x)
        return v, g, hv, f(x, "mean"), f(x, "none"), ge

    return run


@pytest.mark.parametrize("mask,weights,segments", CASES)
@pytest.mark.parametrize("n,sort", [(2, "xla"), (48, "xla"), (48, "host")])
def test_value_grad_hvp_match_pair_loop(mask, weights, segments, n, sort, monkeypatch):
    # sort: the CPU sort at these sizes is XLA's; "host" forces the one the loss uses above
    # ranking.HOST_SORT_MIN_ELEMENTS entries (the same order: test_host_and_xla_sorts_...)
    if sort == "host":
        monkeypatch.setattr(ranking, "HOST_SORT_MIN_ELEMENTS", 0)
    run = _all_orders(mask, weights, segments)
    for k, (loss_name, eps) in enumerate(LOSSES.values()):
        s, pos, keep, w, seg, d = _data(n + k, n, mask=mask, weights=weights, segments=segments)
        loss = losses.get_loss(loss_name, eps)
        ov, pairs, og, oh = ranking_loss_oracle(s, pos, keep, w, seg, loss, d)
        x = jnp.asarray(s)
        v, g, hv, mean, e, ge = run(x, jnp.asarray(d), pos, keep, w, seg, loss)
        scale = max(1.0, abs(ov))
        assert abs(float(v) - ov) <= 1e-10 * scale
        np.testing.assert_allclose(g, og, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(hv, oh, rtol=0, atol=1e-10 * scale)
        assert float(mean) == pytest.approx(ov / pairs if pairs else 0.0, abs=1e-12, rel=1e-10)
        # "none": per-entry terms summing to "sum", differentiated by JAX itself
        assert e.shape == (n,)
        assert float(jnp.sum(e)) == pytest.approx(ov, abs=1e-10 * scale)
        np.testing.assert_allclose(ge, og, rtol=0, atol=1e-10 * scale)


@pytest.mark.parametrize("mask,weights,segments", [CASES[0], CASES[-1]])
def test_reverse_modes_and_hessian(mask, weights, segments):
    s, pos, keep, w, seg, d = _data(11, 30, mask=mask, weights=weights, segments=segments)
    f = lambda x: _call(x, pos, keep, w, seg, mask, weights, segments, eps=0.25)
    x, dv = jnp.asarray(s), jnp.asarray(d)
    fwd = jax.jvp(jax.grad(f), (x,), (dv,))[1]
    rev = jax.grad(lambda x: jnp.vdot(jax.grad(f)(x), dv))(x)  # reverse over reverse
    H = jax.hessian(f)(x)
    jf = jax.jacfwd(f)(x)
    np.testing.assert_allclose(rev, fwd, atol=1e-12)
    np.testing.assert_allclose(H @ dv, fwd, atol=1e-12)
    np.testing.assert_allclose(jf, jax.grad(f)(x), atol=1e-12)
    np.testing.assert_allclose(H, H.T, atol=1e-12)


def test_finite_differences():
    s, pos, _, w, seg, d = _data(5, 40, ties=False, weights=True, segments=True)
    f = lambda x: jaxrank.pairwise_loss(x, pos, weights=w, segments=seg, eps=0.3)
    x, dv = jnp.asarray(s), jnp.asarray(d)
    h = 1e-6
    fd = (f(x + h * dv) - f(x - h * dv)) / (2 * h)
    assert float(jnp.vdot(jax.grad(f)(x), dv)) == pytest.approx(float(fd), rel=1e-7, abs=1e-9)
    g = jax.grad(f)
    fd2 = (g(x + h * dv) - g(x - h * dv)) / (2 * h)
    np.testing.assert_allclose(jax.jvp(g, (x,), (dv,))[1], fd2, atol=1e-6)


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (3, 64), (2, 700), (40, 30)])
def test_host_and_xla_sorts_give_one_order(shape):
    # the loss sorts by (class, segment, score) on the host above ranking.HOST_SORT_MIN_ELEMENTS
    # entries and in XLA below: both must give the same permutation, ties included (stable:
    # equal keys keep their index order), so the loss is one function of its inputs at any size
    rng = np.random.default_rng(shape[1])
    cls = rng.integers(0, 3, size=shape).astype(np.int32)
    seg = rng.integers(0, 2, size=shape).astype(np.int32)
    s = np.round(rng.normal(size=shape), 1)  # ties
    if shape[1] >= 4:  # -0.0 and 0.0 are one key for both; NaN sorts last in both
        s[0, :4] = [0.0, -0.0, np.nan, -0.0]
    for keys in [(cls,), (cls, seg)]:
        args = [jnp.asarray(k) for k in keys] + [jnp.asarray(s)]
        host = jax.jit(ranking._host_order)(*args)
        xla = jax.jit(ranking._device_order)(*args)
        np.testing.assert_array_equal(host, xla)
        np.testing.assert_array_equal(host, np.lexsort((s, *keys[::-1]), axis=-1))


@pytest.mark.parametrize("mask,weights,segments", [CASES[0], CASES[-1]])
def test_leading_axes_jit_and_vmap(mask, weights, segments):
    rows = [_data(k, 25, mask=mask, weights=weights, segments=segments) for k in range(6)]
    S, P, Kp, W, G, _ = (np.stack(c).reshape(2, 3, 25) for c in zip(*rows, strict=True))
    f = lambda s, p, k, w, g: _call(s, p, k, w, g, mask, weights, segments)
    batched = f(jnp.asarray(S), P, Kp, W, G)
    assert batched.shape == (2, 3)
    one = [float(f(jnp.asarray(r[0]), *r[1:5])) for r in rows]
    np.testing.assert_allclose(np.ravel(batched), one, rtol=1e-12, atol=1e-14)
    jitted = jax.jit(f)(jnp.asarray(S), P, Kp, W, G)
    np.testing.assert_allclose(jitted, batched, rtol=1e-12, atol=1e-14)
    vm = jax.vmap(jax.vmap(f))(jnp.asarray(S), P, Kp, W, G)
    np.testing.assert_allclose(vm, batched, rtol=1e-12, atol=1e-14)
    # gradients of the batch: each row's own gradient
    gb = jax.grad(lambda s: jnp.sum(f(s, P, Kp, W, G)))(jnp.asarray(S)).reshape(6, 25)
    gv = jax.vmap(jax.grad(f))(jnp.asarray(S).reshape(6, 25), P.reshape(6, 25),
                               Kp.reshape(6, 25), W.reshape(6, 25), G.reshape(6, 25))  # fmt: skip
    np.testing.assert_allclose(gb, gv, atol=1e-12)


def test_labels_as_traced_data_and_eps_traced():
    s, pos, *_ = _data(3, 50)

    @jax.jit
    def step(x, y, eps):
        return jax.value_and_grad(lambda x: jaxrank.pairwise_loss(x, y, eps=eps))(x)

    v, g = step(jnp.asarray(s), jnp.asarray(pos.astype(np.int32)), 0.5)
    v2, g2 = jax.value_and_grad(lambda x: jaxrank.pairwise_loss(x, pos))(jnp.asarray(s))
    assert float(v) == pytest.approx(float(v2), rel=1e-12)
    np.testing.assert_allclose(g, g2, atol=1e-14)
    # numeric labels: > 0 is the positive class (−1/+1 and 0/1 agree)
    v3 = jaxrank.pairwise_loss(jnp.asarray(s), np.where(pos, 1.0, -1.0))
    assert float(v3) == pytest.approx(float(v2), rel=1e-12)


def test_loss_object_and_names():
    s, pos, *_ = _data(4, 40)
    x = jnp.asarray(s)
    for name, obj in [("squared_hinge", losses.squared_hinge()), ("hinge", losses.hinge())]:
        assert float(jaxrank.pairwise_loss(x, pos, loss=name)) == pytest.approx(
            float(jaxrank.pairwise_loss(x, pos, loss=obj)), rel=1e-14
        )
    sh = jaxrank.pairwise_loss(x, pos, loss=losses.smoothed_hinge(0.2))
    assert float(sh) == pytest.approx(float(jaxrank.pairwise_loss(x, pos, eps=0.2)), rel=1e-14)


def test_rankings_without_pairs_are_zero_not_nan():
    x = jnp.asarray([0.3, -0.2, 1.0])
    for y in ([True] * 3, [False] * 3):
        assert float(jaxrank.pairwise_loss(x, y)) == 0.0
        g = jax.grad(jaxrank.pairwise_loss)(x, y)
        assert np.all(np.asarray(g) == 0)
    # everything masked out
    assert float(jaxrank.pairwise_loss(x, [1, 0, 1], where=[False] * 3)) == 0.0


def test_masked_equals_dropped():
    s, pos, keep, *_ = _data(9, 60, mask=True)
    x = jnp.asarray(s)
    f_mask = lambda x: jaxrank.pairwise_loss(x, pos, where=keep)
    f_drop = lambda x: jaxrank.pairwise_loss(x[keep], pos[keep])
    assert float(f_mask(x)) == pytest.approx(float(f_drop(x)), rel=1e-13)
    g = jax.grad(f_mask)(x)
    assert np.all(np.asarray(g)[~keep] == 0)
    np.testing.assert_allclose(np.asarray(g)[keep], jax.grad(f_drop)(x)[keep], atol=1e-14)


@pytest.mark.parametrize("mask,weights,segments", CASES)
def test_auc_matches_pair_loop(mask, weights, segments):
    s, pos, keep, w, seg, _ = _data(21, 70, mask=mask, weights=weights, segments=segments)
    num = den = 0.0
    for i in np.flatnonzero(pos & keep):
        for j in np.flatnonzero(~pos & keep):
            if seg[i] == seg[j]:
                ww = w[i] * w[j]
                den += ww
                num += ww * ((s[i] > s[j]) + 0.5 * (s[i] == s[j]))
    got = jaxrank.pairwise_auc(
        jnp.asarray(s),
        pos,
        where=keep if mask else None,
        weights=w if weights else None,
        segments=seg if segments else None,
    )
    assert float(got) == pytest.approx(num / den, rel=1e-12)
    if not (mask or weights or segments):
        assert float(got) == pytest.approx(float(metrics.auc(pos, jnp.asarray(s))), rel=1e-12)


def test_float32_matches_float64():
    rng = np.random.default_rng(0)
    n = 20_000
    s = rng.normal(size=n)
    pos = rng.random(n) < 0.05
    v64, g64 = jax.value_and_grad(lambda x: jaxrank.pairwise_loss(x, pos))(jnp.asarray(s))
    x32 = jnp.asarray(s, jnp.float32)
    v32, g32 = jax.value_and_grad(lambda x: jaxrank.pairwise_loss(x, pos))(x32)
    assert v32.dtype == jnp.float32 and g32.dtype == jnp.float32
    assert float(v32) == pytest.approx(float(v64), rel=1e-5)
    np.testing.assert_allclose(g32, g64, atol=1e-5 * float(jnp.max(jnp.abs(g64))))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(reduce="max"), "reduce"),
        (dict(loss="logistic"), "logistic"),
        (dict(loss="cross_entropy"), "unknown loss"),
        (dict(eps=0.0), "eps"),
        (dict(eps=-1.0), "eps"),
        (dict(where=np.ones(4, bool)), "where"),
        (dict(weights=np.ones(2)), "weights"),
        (dict(segments=np.zeros(5, np.int32)), "segments"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        jaxrank.pairwise_loss(jnp.zeros(3), [1, 0, 1], **kwargs)


def test_bad_shapes():
    with pytest.raises(ValueError, match="labels"):
        jaxrank.pairwise_loss(jnp.zeros(3), [1, 0])
    with pytest.raises(ValueError, match="scalar"):
        jaxrank.pairwise_loss(jnp.zeros(()), 1)
    with pytest.raises(ValueError, match="no entries"):
        jaxrank.pairwise_auc(jnp.zeros((2, 0)), jnp.zeros((2, 0)))
