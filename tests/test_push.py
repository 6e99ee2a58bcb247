"""The p-norm push: sorted-window value, gradient and Hv against an explicit pair loop; p = 1
against the plain pairwise objective; the fitted optimum against scipy on the same objective."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

import jaxrank
from jaxrank import io, kernels, losses, pairwise
from jaxrank.push import (
    PushModel,
    check_p,
    fit_push,
    push_hvp,
    push_objective_closures,
    push_value_and_grad,
)

LOSSES = {
    "smoothed_hinge_0.5": losses.smoothed_hinge(0.5),
    "smoothed_hinge_0.1": losses.smoothed_hinge(0.1),
    "smoothed_hinge_2": losses.smoothed_hinge(2.0),
    "squared_hinge": losses.squared_hinge(),
}


def push_oracle(fp, fn, loss, p, dp, dn):
    """P(f) = 1/m− Σ_j (S_j/m+)^p, its gradient and Hessian-vector product, by a pair loop.

    For each negative j the gradient ∇S_j and the product ∇²S_j d are accumulated pair by pair;
    then ∇P = Σ_j g'(s_j) ∇s_j and ∇²P d = Σ_j [g''(s_j)(∇s_j·d) ∇s_j + g'(s_j) ∇²s_j d] with
    g(s) = s^p / m−. Pieces are decided by the comparisons documented in jaxrank.pairwise.
    """
    lo, q, c = (float(v) for v in loss)
    fp, fn, dp, dn = (np.asarray(v, np.float64) for v in (fp, fn, dp, dn))
    mp, mn = fp.size, fn.size
    value, gp, gn, hp, hn = 0.0, np.zeros(mp), np.zeros(mn), np.zeros(mp), np.zeros(mn)
    for j in range(mn):
        S, dS_p, dS_n, HS_p, HS_n = 0.0, np.zeros(mp), 0.0, np.zeros(mp), 0.0
        for i in range(mp):
            z = fp[i] - fn[j]
            if fp[i] < fn[j] + lo:
                ell, d1, d2 = c - z, -1.0, 0.0
            elif fp[i] < fn[j] + 1:
                ell, d1, d2 = q * (1 - z) ** 2, -2 * q * (1 - z), 2 * q
            else:
                ell, d1, d2 = 0.0, 0.0, 0.0
            S += ell
            dS_p[i] += d1
            dS_n -= d1
            HS_p[i] += d2 * (dp[i] - dn[j])
            HS_n += d2 * (dn[j] - dp[i])
        s = S / mp
        value += s**p / mn
        g1 = p * s ** (p - 1) / (mn * mp)  # d/dS of (S/mp)^p / mn
        g2 = p * (p - 1) * s ** (p - 2) / (mn * mp * mp) if s > 0 else 0.0
        dot = dS_p @ dp + dS_n * dn[j]
        gp += g1 * dS_p
        gn[j] += g1 * dS_n
        hp += g2 * dot * dS_p + g1 * HS_p
        hn[j] += g2 * dot * dS_n + g1 * HS_n
    return value, gp, gn, hp, hn


@jax.jit
def _ops(fp, fn, dp, dn, loss, p):
    """Value, gradient and Hv at once: one compilation per shape (eager op-by-op dispatch of
    every case would dominate the test time)."""
    value, gp, gn, lin = push_value_and_grad(fp, fn, loss, p)
    return (value, gp, gn, *push_hvp(lin, dp, dn, loss, p))


@jax.jit
def _pair_ops(fp, fn, dp, dn, loss):
    value, gp, gn, w = pairwise.value_and_grad(fp, fn, loss)
    return (value, gp, gn, *pairwise.hvp(w, dp, dn, loss))


def _scores(rng, n_pos, n_neg, ties):
    fp = rng.normal(size=n_pos)
    fn = rng.normal(size=n_neg) - 0.3
    if ties:  # equal scores, and pair differences exactly on the breakpoints
        fp, fn = np.round(fp, 1), np.round(fn, 1)
    return fp, fn


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("p", [1.0, 1.5, 2.0, 4.0, 7.0])
@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (7, 1), (23, 41)])
def test_matches_pair_loop(name, p, ties, shape):
    loss = LOSSES[name]
    rng = np.random.default_rng(abs(hash((name, p, ties, shape))) % 2**32)
    fp, fn = _scores(rng, *shape, ties)
    dp, dn = rng.normal(size=shape[0]), rng.normal(size=shape[1])
    loss = jax.tree.map(jnp.float64, loss)
    value, gp, gn, hp, hn = _ops(*map(jnp.asarray, (fp, fn, dp, dn)), loss, jnp.float64(p))
    ov, ogp, ogn, ohp, ohn = push_oracle(fp, fn, loss, p, dp, dn)
    scale = max(1.0, abs(ov))
    assert abs(float(value) - ov) <= 1e-10 * scale
    for got, want in ((gp, ogp), (gn, ogn), (hp, ohp), (hn, ohn)):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * scale)


@pytest.mark.parametrize("name", ["smoothed_hinge_0.5", "squared_hinge"])
def test_p1_is_the_pairwise_objective(name):
    loss = LOSSES[name]
    rng = np.random.default_rng(5)
    fp, fn = _scores(rng, 23, 41, ties=True)  # the shape of test_matches_pair_loop: compiled
    dp, dn = rng.normal(size=23), rng.normal(size=41)
    n = 23 * 41
    args = (*map(jnp.asarray, (fp, fn, dp, dn)), jax.tree.map(jnp.float64, loss))
    v, gp, gn, hp, hn = _ops(*args, jnp.float64(1.0))
    rv, rgp, rgn, rhp, rhn = _pair_ops(*args)
    assert float(v) == pytest.approx(float(rv) / n, rel=1e-13)
    for got, want in ((gp, rgp), (gn, rgn), (hp, rhp), (hn, rhn)):
        np.testing.assert_allclose(got, np.asarray(want) / n, rtol=0, atol=1e-15)


def test_separated_scores_have_zero_loss_and_finite_curvature():
    """All pairs in the zero piece: s_j = 0 for every negative; for p < 2 the s^{p−2} factor
    must not turn 0·∞ into NaN."""
    fp, fn = jnp.asarray([3.0, 4.0]), jnp.asarray([0.0, 1.0, 1.5])
    loss = jax.tree.map(jnp.float64, losses.smoothed_hinge(0.5))
    for p in (1.0, 1.5, 3.0):
        v, gp, gn, hp, hn = _ops(fp, fn, jnp.ones(2), jnp.arange(3.0), loss, jnp.float64(p))
        assert float(v) == 0.0
        assert np.all(np.asarray(jnp.concatenate([gp, gn, hp, hn])) == 0.0)


def test_vmap_over_scores_and_p():
    rng = np.random.default_rng(2)
    loss = jax.tree.map(jnp.float64, losses.smoothed_hinge(0.5))
    fp, fn = jnp.asarray(rng.normal(size=(3, 23))), jnp.asarray(rng.normal(size=(3, 41)))
    ps = jnp.asarray([1.0, 2.5, 4.0])
    dp, dn = jnp.asarray(rng.normal(size=(3, 23))), jnp.asarray(rng.normal(size=(3, 41)))

    def both(a, b, p, da, db):
        v, gp, gn, lin = push_value_and_grad(a, b, loss, p)
        return (v, gp, gn, *push_hvp(lin, da, db, loss, p))

    batched = jax.jit(jax.vmap(both))(fp, fn, ps, dp, dn)
    one_p = jax.jit(jax.vmap(lambda a, b, da, db: both(a, b, 2.5, da, db)))(fp, fn, dp, dn)
    single = lambda a, b, p, da, db: _ops(a, b, da, db, loss, jnp.asarray(p, jnp.float64))
    for k in range(3):
        for x, y in zip(batched, single(fp[k], fn[k], ps[k], dp[k], dn[k]), strict=True):
            np.testing.assert_allclose(x[k], y, atol=1e-13)
        for x, y in zip(one_p, single(fp[k], fn[k], 2.5, dp[k], dn[k]), strict=True):
            np.testing.assert_allclose(x[k], y, atol=1e-13)


def test_float32_large_m_matches_float64():
    """Window sums of float weights over 10⁵ negatives: float32 stays within 1e-5 (relative)
    of float64. Scores on the float32 grid in [4, 7) so both dtypes see the same pieces."""
    rng = np.random.default_rng(3)
    fp = np.clip(rng.normal(size=500) * 0.4 + 5.5, 4.0, 6.99).astype(np.float32)
    fn = np.clip(rng.normal(size=100_000) * 0.4 + 5.0, 4.0, 6.99).astype(np.float32)
    dp = rng.normal(size=500).astype(np.float32)
    dn = rng.normal(size=100_000).astype(np.float32)
    for p in (1.0, 4.0):
        out = {}
        for dt in (jnp.float64, jnp.float32):
            loss = jax.tree.map(lambda v, dt=dt: jnp.asarray(v, dt), losses.smoothed_hinge(0.5))
            args = (jnp.asarray(v, dt) for v in (fp, fn, dp, dn))
            out[dt] = [np.asarray(a, np.float64) for a in _ops(*args, loss, jnp.asarray(p, dt))]
        for a32, a64 in zip(out[jnp.float32], out[jnp.float64], strict=True):
            err = np.max(np.abs(a32 - a64)) / np.max(np.abs(a64))
            assert err < 1e-5, (p, err)


def _problem(seed, m=84, n_pos=12, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(m, d))
    X[:n_pos] += 0.8
    y = np.where(np.arange(m) < n_pos, 1, -1)
    k = kernels.Gaussian(sigma2=kernels.sigma2_heuristic(X))
    K = np.asarray(k(jnp.asarray(X), jnp.asarray(X[:n_pos])))
    return X, y, K, K[:n_pos]


def _oracle_fgh(K, Krr, n_pos, lam, loss, p):
    def parts(beta, v):
        f, d = K @ beta, K @ v
        val, gp, gn, hp, hn = push_oracle(f[:n_pos], f[n_pos:], loss, p, d[:n_pos], d[n_pos:])
        F = val + 0.5 * lam * beta @ Krr @ beta
        g = K.T @ np.concatenate([gp, gn]) + lam * Krr @ beta
        Hv = K.T @ np.concatenate([hp, hn]) + lam * Krr @ v
        return F, g, Hv

    zero = np.zeros(K.shape[1])
    return (lambda b: parts(b, zero)[0], lambda b: parts(b, zero)[1], lambda b, v: parts(b, v)[2])


def test_closures_match_oracle_in_beta():
    _, _, K, Krr = _problem(1, m=50, n_pos=8)
    loss, lam, p = losses.smoothed_hinge(0.3), 0.01, 3.0
    fun, hvp = push_objective_closures(jnp.asarray(K), jnp.asarray(Krr), lam, loss, 8, 42, p)
    rng = np.random.default_rng(0)
    beta, v = rng.normal(size=8), rng.normal(size=8)
    F, g, Hv = jax.jit(lambda b, u: (lambda o: (o[0], o[1], hvp(o[2], u)))(fun(b)))(
        jnp.asarray(beta), jnp.asarray(v)
    )
    oF, og, oH = _oracle_fgh(K, Krr, 8, lam, loss, p)
    assert float(F) == pytest.approx(oF(beta), rel=1e-12)
    np.testing.assert_allclose(g, og(beta), rtol=0, atol=1e-12)
    np.testing.assert_allclose(Hv, oH(beta, v), rtol=0, atol=1e-12)


@pytest.mark.parametrize("loss_name", ["smoothed_hinge", "squared_hinge"])
def test_fit_optimum_matches_scipy(loss_name):
    """fit_push's optimum is scipy trust-ncg's optimum of the same objective, built from the
    pair-loop oracle (value, gradient, Hv), and info.objective is that objective."""
    X, y, K, Krr = _problem(0)
    lam, p = 1e-2, 3.0
    loss = losses.get_loss(loss_name, 0.5)
    kernel = kernels.Gaussian(sigma2=kernels.sigma2_heuristic(X))
    # a grid of two λ: the same compiled solver as test_model_select_and_save_load
    grid = fit_push(X, y, [lam, 1e-1], p=p, loss=loss_name, kernel=kernel, dtype=np.float64,
                    tol=1e-10)  # fmt: skip
    model = grid.select(0)
    assert int(model.info.status) == jaxrank.Status.CONVERGED
    assert isinstance(model, PushModel) and model.p == p
    F, G, Hp = _oracle_fgh(K, Krr, 12, lam, loss, p)
    ref = scipy.optimize.minimize(
        F, np.zeros(12), jac=G, hessp=Hp, method="trust-ncg", options=dict(gtol=1e-10)
    )
    assert np.max(np.abs(G(ref.x))) <= 1e-8  # scipy may stop on "precision" just short of gtol
    beta = np.asarray(model.coef)
    assert abs(float(model.info.objective) - ref.fun) <= 1e-9 * abs(ref.fun)
    assert F(beta) == pytest.approx(float(model.info.objective), rel=1e-12)
    np.testing.assert_allclose(K @ beta, K @ ref.x, rtol=0, atol=1e-6)


def test_streamed_kernel_block_gives_the_same_fit():
    """A block over max_kernel_bytes is recomputed per product (kernels.StreamedBlock)."""
    X, y, _, _ = _problem(0)
    kernel = kernels.Gaussian(sigma2=kernels.sigma2_heuristic(X))
    kw = dict(p=3.0, kernel=kernel, dtype=np.float64)
    stored = fit_push(X, y, [1e-1, 1e-2], **kw)
    streamed = fit_push(X, y, [1e-1, 1e-2], max_kernel_bytes=1000, **kw)
    np.testing.assert_allclose(streamed.info.objective, stored.info.objective, rtol=1e-12)
    np.testing.assert_allclose(streamed.coef, stored.coef, rtol=0, atol=1e-9)


def test_model_select_and_save_load(tmp_path):
    X, y, _, _ = _problem(0)
    kernel = kernels.Gaussian(sigma2=kernels.sigma2_heuristic(X))
    model = fit_push(X, y, [1e-1, 1e-2], p=3.0, kernel=kernel, dtype=np.float64)
    one = model.select(1)
    assert isinstance(one, PushModel) and one.p == 3.0 and one.coef.shape == (12,)
    io.save(model, tmp_path / "push.npz")
    back = io.load(tmp_path / "push.npz")
    assert isinstance(back, PushModel) and back.p == 3.0
    np.testing.assert_array_equal(back.decision_function(X), model.decision_function(X))


@pytest.mark.slow
def test_p1_fit_equals_rankrc():
    X, y, _, _ = _problem(3)
    for pre in ("cholesky", "spectral"):
        a = fit_push(X, y, [1e-1, 1e-3], p=1, dtype=np.float64, tol=1e-9, precondition=pre)
        b = jaxrank.fit(X, y, [1e-1, 1e-3], dtype=np.float64, tol=1e-9, precondition=pre)
        np.testing.assert_allclose(a.info.objective, b.info.objective, rtol=1e-12)
        np.testing.assert_allclose(a.decision_function(X), b.decision_function(X), atol=1e-6)
        # the push's preconditioner curvature reduces to RankRC's at p = 1: same iterates
        np.testing.assert_array_equal(a.info.cg_iterations, b.info.cg_iterations)


def test_bad_input_refused():
    X, y, _, _ = _problem(0)
    for p in (0.5, float("nan"), float("inf"), True, "4", -2):
        with pytest.raises(ValueError, match="p must"):
            fit_push(X, y, 1e-2, p=p)
    with pytest.raises(ValueError, match="jacobi"):
        fit_push(X, y, 1e-2, precondition="jacobi")
    with pytest.raises(ValueError, match="lam"):
        fit_push(X, y, 0.0)
    with pytest.raises(ValueError, match="NaN"):
        fit_push(np.where(X > 1, np.nan, X), y, 1e-2)
    with pytest.raises(ValueError, match="one class"):
        fit_push(X, np.ones(len(y)), 1e-2)
    with pytest.raises(ValueError, match="hinge"):
        fit_push(X, y, 1e-2, loss="hinge")
    assert check_p(2) == 2.0
