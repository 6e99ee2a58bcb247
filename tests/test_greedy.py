"""Greedy sparse kernel AUC (seed 001): 1-D Newton scores vs the pair loop, retraining vs an
independent optimiser and vs jaxrank.fit, the schedule, determinism, validation stop, errors."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracles import rank_grad_hess, rank_objective
from scipy.optimize import minimize, minimize_scalar

import jaxrank
from jaxrank import datasets, kernels, losses, metrics
from jaxrank.greedy import GreedyHistory, fit_greedy, newton_candidates, retrain_sizes

LAM = 2.0**-5
N_BASIS = 12
KAPPA = 20


@pytest.fixture(scope="module")
def data():
    X, y = datasets.make_rare_class(120, 0.25, 0.75, seed=1)  # 30 positives, 90 negatives
    return (X - X.mean(0)) / X.std(0), y


@pytest.fixture(scope="module")
def grown(data):
    X, y = data
    Xv, yv = datasets.make_rare_class(200, 0.25, 0.75, seed=2)
    Xv = (Xv - X.mean(0)) / X.std(0)
    model, hist = fit_greedy(
        X, y, LAM, n_basis=N_BASIS, kappa=KAPPA, key=jax.random.key(0), tol=1e-10,
        dtype=np.float64, validation=(Xv, yv), return_history=True, precondition="cholesky",
    )  # fmt: skip
    return model, hist, (Xv, yv)


# --------------------------------------------------------------------------------------------
# Method 2 (eq. 4.10): the 1-D Newton problem per candidate
# --------------------------------------------------------------------------------------------


def _problem(seed, n_pos=9, n_neg=23, n_j=4, kappa=6, pad=5, empty=False):
    """Rows [positives; negatives]; a basis J of n_j rows with random β; candidate rows."""
    rng = np.random.default_rng(seed)
    m = n_pos + n_neg
    X = rng.normal(size=(m, 3))
    K = np.asarray(kernels.gaussian(2.0)(jnp.asarray(X), jnp.asarray(X)))
    pos = np.arange(m) < n_pos
    perm = rng.permutation(m)
    J, C = perm[:n_j], perm[n_j : n_j + kappa]
    beta = np.zeros(n_j) if empty else 2.0 * rng.normal(size=n_j)
    return K, pos, J, C, beta, pad


@pytest.mark.parametrize("empty", [False, True], ids=["J", "J-empty"])
@pytest.mark.parametrize(
    "loss", [losses.squared_hinge(), losses.smoothed_hinge(0.3)], ids=["sqhinge", "smoothed"]
)
@pytest.mark.parametrize("seed", [0, 1])
def test_newton_scores_equal_pair_loop(seed, loss, empty):
    K, pos, J, C, beta, pad = _problem(seed, empty=empty)
    lam = 0.05
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    f = K[:, J] @ beta
    rng = np.random.default_rng(seed + 10)
    # padding rows carry garbage that must be ignored
    f_pad = np.concatenate([f, rng.normal(size=pad)])
    D = np.concatenate([K[:, C], rng.normal(size=(pad, C.size))]).T
    out = newton_candidates(
        f_pad, D, f[C], np.diag(K)[C], lam, n_pos, n_neg, loss=loss, tol=1e-13, max_newton=60
    )
    F0 = rank_objective(beta, K[:, J], K[np.ix_(J, J)], pos, lam, loss)
    JC = lambda c: np.concatenate([J, [c]])
    for k, c in enumerate(C):
        t = float(out.step[k])
        b1 = np.concatenate([beta, [t]])
        Kx, Kxx = K[:, JC(c)], K[np.ix_(JC(c), JC(c))]
        F1 = rank_objective(b1, Kx, Kxx, pos, lam, loss)
        # the score is the decrease of F along the candidate, by the pair loop
        assert float(out.reduction[k]) == pytest.approx(F0 - F1, abs=1e-10, rel=0)
        # t* is the exact 1-D minimiser: ∂F/∂β_c = 0 by the pair loop
        grad, _ = rank_grad_hess(b1, Kx, Kxx, pos, lam, loss)
        assert abs(grad[-1]) <= 1e-10
        assert abs(float(out.grad[k]) - grad[-1]) <= 1e-10
        # and no other t does better (a derivative-free 1-D search on the pair-loop objective)
        phi = lambda s, Kx=Kx, Kxx=Kxx: rank_objective(
            np.concatenate([beta, [s]]), Kx, Kxx, pos, lam, loss
        )
        ref = minimize_scalar(phi, bracket=(t - 1.0, t + 1.0), tol=1e-12)
        assert F1 <= ref.fun + 1e-12
    assert int(out.iterations) <= 60


def test_newton_first_candidate_closed_form():
    # J = ∅, one positive, two negatives, d = e_pos, λ = 1: φ(t) = (1 − t)² + t²/2, min at 2/3.
    out = newton_candidates(jnp.zeros(3), jnp.array([[1.0, 0.0, 0.0]]), jnp.zeros(1),
                            jnp.ones(1), 1.0, 1, 2)  # fmt: skip
    assert float(out.step[0]) == pytest.approx(2.0 / 3.0, abs=1e-12)
    assert float(out.reduction[0]) == pytest.approx(1.0 - 1.0 / 3.0, abs=1e-12)


def _intermediate_sizes(jaxpr, out):
    for eqn in jaxpr.eqns:
        out.extend(int(np.prod(v.aval.shape)) for v in eqn.outvars if hasattr(v.aval, "shape"))
        for p in eqn.params.values():
            for sub in p if isinstance(p, list | tuple) else [p]:
                sub = getattr(sub, "jaxpr", sub)  # ClosedJaxpr -> Jaxpr
                if hasattr(sub, "eqns"):
                    _intermediate_sizes(sub, out)
    return out


def test_scoring_never_forms_the_pair_matrix():
    # every array traced in the candidate scorer (while loops, vmapped windows included) is
    # smaller than one candidate's m+ x m− pair matrix (m− above the 8 search cells per
    # positive, jaxrank.pairwise._CELLS, so that an O(m+) table is smaller than the pairs)
    from jaxrank.greedy import _newton

    n_pos, n_neg, kappa, m = 9, 30, 2, 42
    loss = jax.tree.map(lambda v: jnp.asarray(v, jnp.float64), losses.squared_hinge())
    score = lambda f, D, fc, kcc: _newton(
        f, D, fc, kcc, 0.1, loss, 1e-8, n_pos=n_pos, n_neg=n_neg, max_newton=5
    )
    zeros = jnp.zeros
    jaxpr = jax.make_jaxpr(score)(zeros(m), zeros((kappa, m)), zeros(kappa), zeros(kappa))
    sizes = _intermediate_sizes(jaxpr.jaxpr, [])
    assert len(sizes) > 200 and max(sizes) < n_pos * n_neg


def test_newton_input_checks():
    with pytest.raises(ValueError, match="D must have shape"):
        newton_candidates(jnp.zeros(5), jnp.zeros((2, 4)), jnp.zeros(2), jnp.ones(2), 1.0, 2, 3)
    with pytest.raises(ValueError, match="n_pos"):
        newton_candidates(jnp.zeros(5), jnp.zeros((2, 5)), jnp.zeros(2), jnp.ones(2), 1.0, 3, 3)


# --------------------------------------------------------------------------------------------
# The greedy fit
# --------------------------------------------------------------------------------------------


def test_schedule_sizes():
    # ⌊2^{j/4}⌋, j = 0 … 21, written out; 40 is added as the end
    paper = [1, 2, 3, 4, 5, 6, 8, 9, 11, 13, 16, 19, 22, 26, 32, 38, 40]
    assert retrain_sizes("paper", 40).tolist() == paper
    floats = sorted({int(np.floor(2.0 ** (j / 4))) for j in range(200)} & set(range(1, 1001)))
    assert retrain_sizes("paper", 1000).tolist() == [*floats, 1000]
    assert retrain_sizes("doubling", 40).tolist() == [1, 2, 4, 8, 16, 32, 40]
    assert retrain_sizes("always", 5).tolist() == [1, 2, 3, 4, 5]
    assert retrain_sizes([7, 3, 100], 40).tolist() == [3, 7, 40]
    with pytest.raises(ValueError, match="unknown schedule"):
        retrain_sizes("sometimes", 10)
    with pytest.raises(ValueError, match="positive integer"):
        retrain_sizes([0, 3], 10)


def test_history_follows_schedule(grown):
    model, hist, _ = grown
    assert isinstance(hist, GreedyHistory)
    np.testing.assert_array_equal(hist.basis_size, np.arange(1, N_BASIS + 1))
    expected = np.isin(hist.basis_size, retrain_sizes("paper", N_BASIS))
    np.testing.assert_array_equal(hist.retrained, expected)
    assert np.all(hist.status[hist.retrained] == jaxrank.Status.CONVERGED)
    assert np.all(hist.status[~hist.retrained] == -1)
    np.testing.assert_array_equal(hist.index, model.basis_index)
    assert np.unique(hist.index).size == N_BASIS  # drawn without replacement from rows not in J
    # every step decreases F by its score; retraining decreases it further
    assert np.all(hist.reduction > 0)
    steps = np.concatenate([[1.0], hist.objective[:-1]]) - hist.objective  # F(∅) = ℓ(0) = 1
    np.testing.assert_allclose(steps[~hist.retrained], hist.reduction[~hist.retrained], atol=1e-12)
    assert np.all(steps[hist.retrained] >= hist.reduction[hist.retrained] - 1e-12)
    assert hist.grow_lam == LAM and hist.best_size == N_BASIS and not hist.stopped_early


def test_retrains_are_exact_minimisers(data, grown):
    """Each retrain (padded to a fixed capacity) reaches min F over that basis prefix, checked
    against scipy's trust-ncg on the pair-loop objective."""
    X, y = data
    model, hist, _ = grown
    pos = y == 1
    loss = losses.squared_hinge()
    for size in hist.basis_size[hist.retrained][-4:]:
        idx = hist.index[:size]
        K = np.asarray(model.kernel(jnp.asarray(X), jnp.asarray(X[idx])))
        Krr = K[idx]
        fun = lambda b, K=K, Krr=Krr: rank_objective(b, K, Krr, pos, LAM, loss)
        jac = lambda b, K=K, Krr=Krr: rank_grad_hess(b, K, Krr, pos, LAM, loss)[0]
        hess = lambda b, K=K, Krr=Krr: rank_grad_hess(b, K, Krr, pos, LAM, loss)[1]
        ref = minimize(fun, np.zeros(size), jac=jac, hess=hess, method="trust-exact", tol=1e-14)
        assert hist.objective[size - 1] == pytest.approx(ref.fun, rel=1e-10)


def test_final_model_equals_fit(data, grown):
    X, y = data
    model, _, _ = grown
    ref = jaxrank.fit(X, y, LAM, basis=np.asarray(model.basis_index), loss="squared_hinge",
                      dtype=np.float64, tol=1e-10, precondition="cholesky")  # fmt: skip
    assert model.loss == "squared_hinge" and model.coef.shape == (N_BASIS,)
    np.testing.assert_array_equal(model.basis, X[np.asarray(model.basis_index)])
    assert model.kernel.sigma2 == pytest.approx(kernels.sigma2_heuristic(X), rel=1e-15)
    assert float(model.info.objective) == pytest.approx(float(ref.info.objective), rel=1e-12)
    np.testing.assert_allclose(model.coef, ref.coef, rtol=0, atol=1e-6)
    np.testing.assert_allclose(
        model.decision_function(X), ref.decision_function(X), rtol=0, atol=1e-8
    )


def test_validation_auc_recorded(grown):
    model, hist, (Xv, yv) = grown
    assert np.all((hist.val_auc > 0.5) & (hist.val_auc <= 1))
    # the last step is retrained, and the final refit starts at its (converged) solution
    final = float(metrics.auc(yv, model.decision_function(Xv)))
    assert hist.val_auc[-1] == pytest.approx(final, abs=1e-12)


def test_deterministic_given_key(data, grown):
    X, y = data
    model, _, _ = grown
    kw = dict(n_basis=N_BASIS, kappa=KAPPA, tol=1e-10, dtype=np.float64, precondition="cholesky")
    again = fit_greedy(X, y, LAM, key=jax.random.key(0), **kw)
    np.testing.assert_array_equal(again.basis_index, model.basis_index)
    np.testing.assert_array_equal(again.coef, model.coef)
    other = fit_greedy(X, y, LAM, key=jax.random.key(1), **kw)
    assert not np.array_equal(other.basis_index, model.basis_index)


def test_validation_early_stop(data):
    X, y = data
    # the training rows with labels reversed: the better the ranker fits, the worse this AUC
    patience = 3
    model, hist = fit_greedy(
        X, y, LAM, n_basis=N_BASIS, kappa=KAPPA, key=jax.random.key(0), tol=1e-10,
        dtype=np.float64, validation=(X, -y), patience=patience, return_history=True,
        precondition="cholesky",
    )  # fmt: skip
    assert hist.stopped_early and hist.basis_size.size < N_BASIS
    # replay the rule: stop after `patience` steps without a new best
    best, wait, best_size = -np.inf, 0, 0
    for k, a in enumerate(hist.val_auc):
        if a > best:
            best, wait, best_size = a, 0, k + 1
        else:
            wait += 1
        assert (wait >= patience) == (k == hist.val_auc.size - 1)
    assert hist.best_size == best_size == model.n_basis
    np.testing.assert_array_equal(model.basis_index, hist.index[:best_size])
    # the returned model is the refit on that prefix
    ref = jaxrank.fit(X, y, LAM, basis=hist.index[:best_size], loss="squared_hinge",
                      dtype=np.float64, tol=1e-10, precondition="cholesky")  # fmt: skip
    assert float(model.info.objective) == pytest.approx(float(ref.info.objective), rel=1e-12)


def test_lambda_grid_refits_the_grown_basis(data, grown):
    X, y = data
    lams = [LAM * 4, LAM, LAM / 4]
    # the default preconditioner ("auto") for the final grid refit; the retrains while growing
    # use K_JJ + δI whatever it is, so the basis is the scalar fit's
    model, hist = fit_greedy(X, y, lams, n_basis=N_BASIS, kappa=KAPPA, key=jax.random.key(0),
                             tol=1e-10, dtype=np.float64, return_history=True)  # fmt: skip
    # grown at the grid's median: the same basis as the scalar fit at that λ
    assert hist.grow_lam == LAM
    np.testing.assert_array_equal(model.basis_index, grown[0].basis_index)
    assert model.coef.shape == (3, N_BASIS) and model.lam.shape == (3,)
    for i, lam in enumerate(lams):
        ref = jaxrank.fit(X, y, lam, basis=np.asarray(model.basis_index), loss="squared_hinge",
                          dtype=np.float64, tol=1e-10, precondition="cholesky")  # fmt: skip
        assert float(model.info.objective[i]) == pytest.approx(float(ref.info.objective), rel=1e-12)


@pytest.mark.slow  # compiles every piece again in float32 (the estimator tests cover it too)
def test_float32_default(data):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        model = fit_greedy(X, y, LAM, n_basis=N_BASIS, kappa=KAPPA, key=jax.random.key(0),
                           dtype=np.float32)  # fmt: skip
    assert model.coef.dtype == np.float32 and model.n_basis == N_BASIS
    assert float(metrics.auc(y, model.decision_function(X))) > 0.7


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(n_basis=0), "n_basis must be in"),
        (dict(n_basis=121), "n_basis must be in"),
        (dict(n_basis=2.5), "n_basis must be an integer"),
        (dict(kappa=0), "kappa must be >= 1"),
        (dict(key=None), "key is required"),
        (dict(key=3), "got the integer 3"),
        (dict(key=np.zeros(3)), "key must be a single jax.random.key"),
        (dict(schedule="sometimes"), "unknown schedule"),
        (dict(schedule=[0, 2]), "positive integer"),
        (dict(validation="val"), "validation must be a pair"),
        (dict(validation=("X3", None)), "validation X has 3 features"),
        (dict(validation=("X10", None)), "different lengths"),
        (dict(validation=("X", "one")), "one class"),
        (dict(patience=2), "patience needs validation"),
        (dict(validation=("X", None), patience=0), "patience must be >= 1"),
        (dict(min_delta=-1.0), "min_delta"),
        (dict(lam=-1.0), "lam must be finite and > 0"),
        (dict(grow_lam=0.0), "grow_lam must be finite and > 0"),
        (dict(loss="hinge"), "not twice differentiable"),
        (dict(max_newton=0), "max_newton must be >= 1"),
        (dict(X="nan"), "NaN"),
        (dict(y="one"), "one class"),
        (dict(memory_budget=1000), "memory budget"),
    ],
)
def test_bad_input_refused(data, kwargs, match):
    X, y = data
    val = {"X": (X, y), "X3": (X[:, :3], y), "X10": (X, y[:10])}
    kw = dict(lam=LAM, n_basis=5, key=jax.random.key(0))
    kw.update(kwargs)
    if isinstance(kw.get("validation"), tuple):
        Xv, yv = val[kw["validation"][0]]
        kw["validation"] = (Xv, np.ones_like(y) if kw["validation"][1] == "one" else yv)
    if kw.get("X") == "nan":
        X = X.copy()
        X[3, 1] = np.nan
    if kw.pop("y", None) == "one":
        y = np.ones_like(y)
    kw.pop("X", None)
    lam = kw.pop("lam")
    with pytest.raises(ValueError, match=match):
        fit_greedy(X, y, lam, **kw)


# --------------------------------------------------------------------------------------------
# Issue 3 done-when: greedy with ≤ 10 % of m basis functions vs RankSVM, λ by validation
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_greedy_close_to_ranksvm():
    """make_rare_class(2000, 0.05, medium overlap t = 0.75): greedy (n_basis = 200 = 10 % of m,
    grown at the grid's median λ, refitted on the grid) within 1.5 test-AUC points of RankSVM
    (basis='all'), λ chosen on a validation set (2000 rows) for each, mean over 3 draws; test
    sets of 10000 rows."""
    lams = 2.0 ** np.arange(-20, 11, 2)
    gaps = []
    for seed in range(3):
        kc, ktr, kva, kte, kg = jax.random.split(jax.random.key(300 + seed), 5)
        c = datasets.rare_class_centers(0.75, key=kc)
        X, y = datasets.make_rare_class(2000, 0.05, None, centers=c, key=ktr)
        Xv, yv = datasets.make_rare_class(2000, 0.05, None, centers=c, key=kva)
        Xt, yt = datasets.make_rare_class(10000, 0.05, None, centers=c, key=kte)
        mu, sd = X.mean(0), X.std(0)
        X, Xv, Xt = ((A - mu) / sd for A in (X, Xv, Xt))
        test_auc = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
            svm = jaxrank.fit(X, y, lams, basis="all", path="warm")
            greedy = fit_greedy(X, y, lams, n_basis=200, key=kg, path="warm")
        for name, model in (("svm", svm), ("greedy", greedy)):
            best = int(np.argmax(np.asarray(metrics.auc(yv, model.decision_function(Xv)))))
            test_auc[name] = 100 * float(metrics.auc(yt, model.select(best).decision_function(Xt)))
        gaps.append(test_auc["svm"] - test_auc["greedy"])
    assert np.mean(gaps) <= 1.5, gaps
