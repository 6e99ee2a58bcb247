"""jax.export of the pairwise loss and of fitted models (issue 41 item 8).

The CPU sort of :func:`jaxrank.pairwise_loss` (above 1024 entries) is a host callback, which an
exported program cannot hold ("serialization of host_callbacks is not yet implemented"); lowered
for export it is ``lax.sort``. Kernels and models are registered for export's pytree
serialisation, so a model can be an argument (or a result) of an exported function. Every program
here is exported, serialised, deserialised and run on CPU against the plain call, float32 and
float64.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import ranking

pytest.importorskip("flatbuffers")  # jax.export's serialisation

F32_F64 = pytest.mark.parametrize("dt", [jnp.float32, jnp.float64])


def _roundtrip(f, *args, **kw):
    exported = jax.export.export(jax.jit(f), **kw)(*args)
    return jax.export.deserialize(exported.serialize())


def _scores(dt, n=342, seed=0):
    # 3 · 342 entries: above ranking.HOST_SORT_MIN_ELEMENTS, so the plain call sorts on the host
    rng = np.random.default_rng(seed)
    s = rng.normal(size=(3, n)).astype(dt)
    s[0, 5] = 1e6  # a far score and ties: the exported sort must order them as the host one
    s[1, :20] = 0.25
    return jnp.asarray(s), jnp.asarray(rng.random((3, n)) < 0.15)


@F32_F64
def test_loss_and_auc_export_and_run(dt):
    s, y = _scores(dt)
    w = jnp.asarray(np.random.default_rng(1).random(s.shape), dt)
    seg = jnp.asarray(np.arange(s.shape[1]) % 4)

    def f(s, y):
        value, grad = jax.value_and_grad(lambda s: jaxrank.pairwise_loss(s, y).sum())(s)
        return (value, grad, jaxrank.pairwise_auc(s, y),
                jaxrank.pairwise_loss(s, y, weights=w, segments=seg, loss="squared_hinge"),
                jaxrank.pairwise_loss(s, y, reduce="none"))  # fmt: skip

    got = _roundtrip(f, s, y).call(s, y)
    want = f(s, y)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6 * float(jnp.max(jnp.abs(b))))


def test_loss_exports_for_several_platforms():
    # multi-platform lowering: every branch is lax.sort (no host callback to serialise)
    s, y = _scores(jnp.float32, n=50)
    f = lambda s: jaxrank.pairwise_loss(s, y)
    exp = _roundtrip(f, s, platforms=("cpu", "cuda"))
    assert exp.platforms == ("cpu", "cuda")
    np.testing.assert_allclose(exp.call(s), f(s), rtol=1e-6)


@pytest.mark.parametrize("n,host", [(50, False), (341, False), (342, True)])
def test_plain_jit_keeps_the_host_sort_on_cpu_for_large_sorts(n, host):
    # export changes nothing for a program run in this process: the fast host sort stays for a
    # sort of more than HOST_SORT_MIN_ELEMENTS entries (3 rows: 3 · 341 = 1023, 3 · 342 = 1026);
    # smaller sorts are lax.sort, which the persistent compilation cache can store
    if jax.default_backend() != "cpu":
        pytest.skip("the host sort is the CPU path")
    assert 3 * 341 <= ranking.HOST_SORT_MIN_ELEMENTS < 3 * 342
    s, y = _scores(jnp.float32, n=n)
    text = jax.jit(lambda s: jaxrank.pairwise_loss(s, y)).lower(s).as_text()
    assert ("callback" in text) == host
    # under vmap the rows of every mapped call are one sort
    one = jax.jit(jax.vmap(lambda s, y: jaxrank.pairwise_loss(s, y))).lower(s, y).as_text()
    assert ("callback" in one) == host


def test_vmap_and_hessian_of_the_loss_unchanged():
    s, y = _scores(jnp.float64, n=40)
    f = lambda s: jaxrank.pairwise_loss(s, y[0])
    np.testing.assert_allclose(jax.vmap(f)(s), f(s))
    H = jax.hessian(f)(s[0])
    v = jnp.ones_like(s[0])
    np.testing.assert_allclose(H @ v, jax.jvp(jax.grad(f), (s[0],), (v,))[1], atol=1e-12)


def _models(dt):
    X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
    X = X.astype(dt)
    return X, [
        jaxrank.fit_rankrc(X, y, 2.0**-6),
        jaxrank.fit_rankrc(X, y, np.array([1.0, 0.25])),
        jaxrank.fit(X, y, 2.0**-6, kernel=jaxrank.Polynomial(1.0, 1.0, 3)),
        jaxrank.fit(X, y, 2.0**-6, kernel=jaxrank.Linear()),
        jaxrank.fit_l1(X, y, l1=1e-2),
    ]


@F32_F64
def test_fitted_model_is_an_exported_argument(dt):
    X, models = _models(dt)
    score = lambda m, X: m.decision_function(X)
    for model in models:
        assert model.basis.dtype == dt
        Xj = jnp.asarray(X)
        got = _roundtrip(score, model, Xj).call(model, Xj)
        want = model.decision_function(X)
        scale = float(jnp.max(jnp.abs(want)))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * scale)


def _other_models(dt):
    X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
    X = X.astype(dt)
    return X, {
        "push": jaxrank.fit_push(X, y, 2.0**-6, dtype=dt),
        "mibc": jaxrank.fit_mibc(X, y, nu=0.5, covariance="diag", dtype=dt),
        "dopmid": jaxrank.fit_dopmid(X, y, 1.0, dtype=dt),
    }


@F32_F64
def test_push_mibc_dopmid_models_are_exported_arguments(dt):
    # every registered model type, not only RankModel and L1Model: an argument of an exported
    # scoring program, and returned by one unchanged
    X, models = _other_models(dt)
    Xj = jnp.asarray(X)
    for name, model in models.items():
        want = np.asarray(model.decision_function(X))
        got = _roundtrip(lambda m, X: m.decision_function(X), model, Xj).call(model, Xj)
        scale = float(np.max(np.abs(want)))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * scale, err_msg=name)
        back = _roundtrip(lambda m: m, model).call(model)
        assert type(back) is type(model), name
        np.testing.assert_array_equal(back.decision_function(X), want, err_msg=name)


def test_ard_kernel_and_model_as_a_result():
    X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
    kern = jaxrank.kernels.ARDGaussian(2.0, jnp.linspace(0.5, 1.5, X.shape[1]))
    model = jaxrank.fit(X, y, 2.0**-6, kernel=kern)
    exp = _roundtrip(lambda m: m, model)
    back = exp.call(model)
    assert type(back) is type(model) and type(back.kernel) is jaxrank.kernels.ARDGaussian
    np.testing.assert_allclose(back.decision_function(X), model.decision_function(X))


def test_symbolic_rankings_export_symbolic_length_is_refused():
    # leading axes (the number of rankings) may be symbolic; the score length may not, and
    # says what to do (pad to one length, where= masks the padding)
    f = jax.jit(lambda s, y: (jaxrank.pairwise_loss(s, y), jaxrank.pairwise_auc(s, y)))
    b, n = jax.export.symbolic_shape("b, n")
    spec = lambda *shape: (jax.ShapeDtypeStruct(shape, jnp.float32),
                           jax.ShapeDtypeStruct(shape, jnp.int32))  # fmt: skip
    exp = jax.export.deserialize(jax.export.export(f)(*spec(b, 4)).serialize())
    s = jnp.array([[2.0, 0.5, 0.0, -1.0]] * 3, jnp.float32)
    loss, auc = exp.call(s, jnp.array([[1, 0, 1, 0]] * 3, jnp.int32))
    np.testing.assert_allclose(loss, 0.25)
    np.testing.assert_allclose(auc, 0.75)
    with pytest.raises(ValueError, match=r"symbolic .*where="):
        jax.export.export(f)(*spec(n))
