"""Extreme but legal inputs give finite scores; the rest a clear error (docs/validation.md).

Decisions (also in ``check_X``'s docstring and docs/validation.md):
- float16 X is accepted as it is; bfloat16 / float8 (ml_dtypes, e.g. a JAX bfloat16 array) are
  widened exactly to float32; the fit then runs in its float32/float64 dtype.
- int and bool X are accepted (bool as 0/1); object arrays of real numbers become float64,
  strings in them are refused (a parsing mistake, not a number); ``None`` becomes NaN, refused.
- scipy sparse X is refused with a ``ValueError`` telling to call ``.toarray()``: the kernels
  need dense rows and densifying silently could exhaust memory (the scikit-learn estimators
  raise scikit-learn's ``TypeError`` with the same advice).
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp

import jaxrank
from jaxrank import datasets, metrics
from jaxrank._validation import PrecisionWarning, check_cast, check_key, check_X
from jaxrank.select import select_lambda

# The data set of test_io / test_determinism (shared compiled solver when run together):
# every case below keeps m = 40 rows with 6 positives, so one compilation serves them all.
M, RHO = 40, 0.15
F64 = {"dtype": np.float64}


@pytest.fixture(scope="module")
def data():
    X, y = datasets.make_rare_class(M, RHO, 0.75, seed=0)
    return (X - X.mean(0)) / X.std(0), y


@pytest.fixture(scope="module")
def reference(data):
    X, y = data
    return jaxrank.fit(X, y, 1e-2, **F64)


def _fit_quiet(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        return jaxrank.fit(*args, **kwargs)


def assert_finite_model(model, X, y=None):
    s = np.asarray(model.decision_function(X))
    assert np.all(np.isfinite(s)), "non-finite scores"
    assert np.all(np.isfinite(np.asarray(model.coef)))
    assert not np.any(np.asarray(model.info.status) == jaxrank.Status.NONFINITE)
    if y is not None:
        return np.asarray(metrics.auc(y, s))
    return s


def assert_same_model(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes()


# --------------------------------------------------------------------------------------------
# λ at the ends of the range
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", ["fit", "fit_rankrc"])
@pytest.mark.parametrize("lam", [1e-12, 1e12])
def test_extreme_lambda_finite(data, entry, lam):
    X, y = data
    model = getattr(jaxrank, entry)(X, y, lam, **F64)
    auc = assert_finite_model(model, X, y)
    assert int(model.info.status) == jaxrank.Status.CONVERGED
    if lam == 1e12:
        # β* ≈ −∇F(0)/λ: of order 1/λ (the data gradient is at most 1 per pair)
        assert np.max(np.abs(np.asarray(model.coef))) < 1e-10
    assert auc > 0.5


def test_extreme_lambda_grid(data):
    X, y = data
    model = jaxrank.fit(X, y, [1e-12, 1.0, 1e12], **F64)
    aucs = assert_finite_model(model, X, y)
    assert aucs.shape == (3,)
    np.testing.assert_array_equal(np.asarray(model.info.status), 0)


# --------------------------------------------------------------------------------------------
# degenerate data: duplicates, constant features, ties, tiny shapes
# --------------------------------------------------------------------------------------------


def test_duplicate_rows(data):
    """Every row twice (K_RR exactly singular), and one x labelled both ways."""
    X, y = data
    pos = np.flatnonzero(y == 1)[:3]
    neg = np.flatnonzero(y != 1)[:17]
    half = np.concatenate([pos, neg])
    Xd = np.concatenate([X[half], X[half]])
    yd = np.concatenate([y[half], y[half]])
    Xd[-1] = Xd[0]  # a negative at exactly the place of a positive
    model = jaxrank.fit(Xd, yd, 1e-2, **F64)
    assert_finite_model(model, Xd, yd)
    s = np.asarray(model.decision_function(Xd))
    np.testing.assert_allclose(s[:19], s[20:39], rtol=0, atol=1e-12)  # equal rows and scores
    assert abs(s[-1] - s[0]) <= 1e-12


def test_constant_feature(data, reference):
    """A constant column changes no distance: the Gaussian fit is the same model."""
    X, y = data
    Xc = np.concatenate([X, np.full((M, 1), 3.0)], axis=1)
    model = jaxrank.fit(Xc, y, 1e-2, **F64)
    assert_finite_model(model, Xc, y)
    np.testing.assert_allclose(model.coef, reference.coef, rtol=1e-9, atol=1e-12)


def test_all_features_constant_all_scores_tied(data):
    """Every row equal: ∇F(0) = 0, so the zero model meets the gradient test, but it ranks
    nothing: a degenerate model is refused, not returned as CONVERGED (issue 31)."""
    _, y = data
    Xc = np.ones((M, 3))
    with pytest.raises(ValueError, match=r"zero model .* every row of X is equal"):
        jaxrank.fit(Xc, y, 1e-2, **F64)


def test_one_feature(data):
    X, y = data
    model = jaxrank.fit(X[:, :1], y, 1e-2, **F64)
    assert_finite_model(model, X[:, :1], y)


def test_three_rows_one_positive_one_feature():
    """m = 3, a single positive, d = 1: the smallest problem there is."""
    X = np.array([[0.0], [1.0], [2.5]])
    y = np.array([-1, 1, -1])
    model = jaxrank.fit(X, y, 1e-2, **F64)
    assert model.coef.shape == (1,)
    assert float(assert_finite_model(model, X, y)) == 1.0
    # one positive: no stratified fold can hold it twice
    with pytest.raises(ValueError, match="more than the 1 rows of the positive"):
        select_lambda(X, y, [1e-2], folds=2, key=jax.random.key(0))


@pytest.mark.slow
def test_single_positive_among_many(data):
    X, y = data
    y1 = np.where(np.arange(M) == np.flatnonzero(y == 1)[0], 1, -1)
    model = jaxrank.fit(X, y1, 1e-2, **F64)
    assert model.coef.shape == (1,)
    assert_finite_model(model, X, y1)


@pytest.mark.slow
def test_ranksvm_on_degenerate_data():
    X = np.array([[0.0], [0.0], [1.0]])
    y = np.array([1, -1, -1])
    model = jaxrank.fit_ranksvm(X, y, 1e-12, **F64)
    assert_finite_model(model, X, y)


# --------------------------------------------------------------------------------------------
# magnitudes and dtypes
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("scale", "shift"), [(1e8, 0.0), (1.0, 1e8), (1e-8, 0.0)])
def test_large_and_small_values_float64(data, reference, scale, shift):
    """The Gaussian kernel with the σ² heuristic is invariant to scale and shift of X."""
    X, y = data
    Xs = X * scale + shift
    model = jaxrank.fit(Xs, y, 1e-2, **F64)
    assert_finite_model(model, Xs, y)
    # float64 resolves 1e8 + x to ~1.5e-8: the kernel moves by that much, β by ~1e-6
    np.testing.assert_allclose(
        model.decision_function(Xs), reference.decision_function(X), rtol=0, atol=1e-5
    )


@pytest.mark.parametrize("kernel", ["linear", "polynomial"])
def test_large_values_other_kernels(data, kernel):
    X, y = data
    model = _fit_quiet(X * 1e8, y, 1e-2, kernel=kernel, **F64)
    assert_finite_model(model, X * 1e8, y)


def test_large_values_float32(data):
    X, y = data
    model = jaxrank.fit(X * 1e8, y, 1e-2, dtype=np.float32)
    assert float(assert_finite_model(model, X * 1e8, y)) > 0.8


def test_float32_rounding_away_the_data_warns(data):
    """X + 1e8 in float32: the cast warns; the rows that remain give the zero model, which is
    refused rather than returned as CONVERGED (issue 31)."""
    X, y = data
    with pytest.warns(PrecisionWarning), pytest.raises(ValueError, match="zero model"):
        jaxrank.fit(X + 1e8, y, 1e-2, dtype=np.float32)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_float32_overflow_is_a_clear_error(data):
    X, y = data
    try:
        model = _fit_quiet(X * 1e20, y, 1e-2, dtype=np.float32)
    except ValueError as err:
        assert "overflow" in str(err)
        return
    assert_finite_model(model, X * 1e20, y)


@pytest.mark.parametrize(
    "convert",
    [
        lambda X: X.astype(np.float16),
        lambda X: np.asarray(jnp.asarray(X, jnp.bfloat16)),
        lambda X: jnp.asarray(X, jnp.bfloat16),
        lambda X: np.asarray(jnp.asarray(X, jnp.float8_e4m3fn)),
    ],
    ids=["float16", "numpy bfloat16", "jax bfloat16", "float8"],
)
def test_low_precision_floats_accepted_and_widened(data, convert):
    X, y = data
    low = convert(X)
    exact = np.asarray(low).astype(np.float64)  # the values the user holds, exactly
    a = jaxrank.fit(low, y, 1e-2, **F64)
    assert_same_model(a, jaxrank.fit(exact, y, 1e-2, **F64))
    np.testing.assert_array_equal(a.decision_function(low), a.decision_function(exact))
    assert check_X(low).dtype in (np.float16, np.float32)


def test_low_precision_default_dtype_is_float32(data):
    X, y = data
    model = jaxrank.fit(jnp.asarray(X, jnp.bfloat16), y, 1e-2)
    assert model.coef.dtype == jnp.float32
    assert_finite_model(model, X.astype(np.float16), y)


@pytest.mark.parametrize("kind", ["int64", "int32", "uint8", "bool"])
def test_integer_and_bool_X(data, kind):
    X, y = data
    Xi = (X > 0) if kind == "bool" else np.round(np.abs(X) * 10).astype(kind)
    a = jaxrank.fit(Xi, y, 1e-2, **F64)
    assert_same_model(a, jaxrank.fit(Xi.astype(np.float64), y, 1e-2, **F64))
    assert_finite_model(a, Xi, y)


def test_object_arrays(data, reference):
    X, y = data
    assert_same_model(jaxrank.fit(X.astype(object), y, 1e-2, **F64), reference)
    mixed = X.astype(object)
    mixed[0, 0] = 1
    mixed[1, 1] = np.float32(0.5)
    assert_finite_model(jaxrank.fit(mixed, y, 1e-2, **F64), X, y)
    with_str = X.astype(object)
    with_str[3, 2] = "0.5"
    with pytest.raises(ValueError, match="strings"):
        jaxrank.fit(with_str, y, 1e-2)
    with_none = X.astype(object)
    with_none[3, 2] = None
    with pytest.raises(ValueError, match="NaN"):
        jaxrank.fit(with_none, y, 1e-2)
    with_complex = X.astype(object)
    with_complex[3, 2] = 1 + 2j
    with pytest.raises(ValueError, match="non-numeric"):
        jaxrank.fit(with_complex, y, 1e-2)
    with pytest.raises(ValueError, match="numeric"):
        jaxrank.fit(X.astype(np.complex128), y, 1e-2)
    with pytest.raises(ValueError, match="numeric"):
        jaxrank.fit(X.astype(str), y, 1e-2)
    with pytest.raises(ValueError, match="strings"):
        reference.decision_function(with_str)


def test_pandas_dataframe(data, reference):
    pd = pytest.importorskip("pandas")
    X, y = data
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    assert_same_model(jaxrank.fit(df, pd.Series(y), 1e-2, **F64), reference)
    np.testing.assert_array_equal(reference.decision_function(df), reference.decision_function(X))


@pytest.mark.parametrize("fmt", ["csr_matrix", "csc_array", "coo_matrix"])
def test_sparse_refused_with_advice(data, reference, fmt):
    X, y = data
    Xs = getattr(sp, fmt)(X)
    with pytest.raises(ValueError, match=r"sparse.*toarray\(\)"):
        jaxrank.fit(Xs, y, 1e-2)
    with pytest.raises(ValueError, match=r"sparse.*toarray\(\)"):
        jaxrank.fit_rankrc(Xs, y, 1e-2)
    with pytest.raises(ValueError, match=r"sparse.*toarray\(\)"):
        reference.decision_function(Xs)
    with pytest.raises(ValueError, match=r"sparse.*toarray\(\)"):
        select_lambda(Xs, y, [1e-2], folds=2, key=jax.random.key(0))
    assert_same_model(jaxrank.fit(Xs.toarray(), y, 1e-2, **F64), reference)


# --------------------------------------------------------------------------------------------
# scikit-learn estimators
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sk():
    return pytest.importorskip("jaxrank.sklearn")


@pytest.mark.parametrize("lam", [1e-12, 1e12])
def test_sklearn_extreme_lambda(sk, data, lam):
    X, y = data
    est = sk.RankRCClassifier(lam=lam, dtype="float64").fit(X, y)
    s = est.decision_function(X)
    assert np.all(np.isfinite(s)) and np.isfinite(est.threshold_)
    assert set(np.unique(est.predict(X))) <= {-1, 1}


@pytest.mark.parametrize(
    "convert",
    [
        lambda X: X.astype(np.float16),
        lambda X: jnp.asarray(X, jnp.bfloat16),
        lambda X: X > 0,
        lambda X: np.round(X * 10).astype(np.int64),
        lambda X: X.astype(object),
        lambda X: np.concatenate([X, np.full((M, 1), 2.0)], axis=1),
        lambda X: X * 1e8,
    ],
    ids=["float16", "bfloat16", "bool", "int", "object", "constant column", "1e8"],
)
def test_sklearn_odd_inputs_finite(sk, data, convert):
    X, y = data
    Xo = convert(X)
    est = sk.RankRCClassifier(dtype="float64").fit(Xo, y)
    assert np.all(np.isfinite(est.decision_function(Xo)))


def test_sklearn_default_float32_and_tiny_problem(sk, data):
    X, y = data
    est = sk.RankRCClassifier().fit(X, y)
    assert est.model_.coef.dtype == jnp.float32
    assert np.all(np.isfinite(est.decision_function(X)))
    tiny = sk.RankRCClassifier(dtype="float64").fit([[0.0], [1.0], [2.5]], [-1, 1, -1])
    assert np.all(np.isfinite(tiny.decision_function([[0.5], [3.0]])))


@pytest.mark.parametrize(
    "cls", ["RankRCClassifier", "RankSVMClassifier", "RandomBasisRankClassifier"]
)
def test_sklearn_sparse_refused(sk, data, cls):
    X, y = data
    with pytest.raises(TypeError, match=r"[Ss]parse.*toarray"):
        getattr(sk, cls)().fit(sp.csr_matrix(X), y)


# --------------------------------------------------------------------------------------------
# the validation helpers themselves
# --------------------------------------------------------------------------------------------


def _precision_warnings(X, dtype):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_cast(X, dtype)
    return [w for w in caught if issubclass(w.category, PrecisionWarning)]


def test_check_cast_overflow():
    X = np.random.default_rng(0).normal(size=(50, 3))
    with pytest.raises(ValueError, match="overflow float32"):
        check_cast(X * 1e20, np.float32)
    check_cast(X * 1e20, np.float64)  # 1e40 is nothing for float64
    with pytest.raises(ValueError, match="overflow float64"):
        check_cast(X * 1e160, np.float64)
    check_cast(X * 1e18, np.float32)  # squared norms ~1e36 < max/4 ≈ 8.5e37
    with pytest.raises(ValueError, match=r"dtype=np\.float64"):
        check_cast(np.full((2, 1), 3e19), np.float32)


def test_check_cast_precision():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    assert _precision_warnings(X + 1e8, np.float32)  # steps of 8 against a spread of 1
    (w,) = _precision_warnings(X + 1e8, np.float32)
    assert "column(s) 0, 1, 2" in str(w.message) and "dtype=np.float64" in str(w.message)
    assert not _precision_warnings(X + 1e8, np.float64)
    assert not _precision_warnings(X, np.float32)
    assert not _precision_warnings(X + 1e3, np.float32)  # steps of 6e-5: harmless
    # a near-constant column far from 0 carries no variance: not worth a warning
    quiet = np.concatenate([X, 1e8 + 1e-3 * rng.normal(size=(200, 1))], axis=1)
    assert not _precision_warnings(quiet, np.float32)
    # only the columns that matter are named
    (w,) = _precision_warnings(np.concatenate([X, X[:, :1] * 10 + 1e9], axis=1), np.float32)
    assert "column(s) 3 " in str(w.message)
    # large integers: int64 beyond 2^24 rounds in float32
    big = (np.arange(200) + 2**40).reshape(-1, 1)
    assert _precision_warnings(big, np.float32)
    assert not _precision_warnings(np.arange(200)[:, None], np.float32)  # exact in float32
    assert not _precision_warnings(np.ones((5, 2)), np.float32)  # no variance at all
    with pytest.raises(ValueError, match="floating"):
        check_cast(X, np.int32)


def test_check_X_conversions():
    X = np.arange(6.0).reshape(3, 2)
    assert check_X(np.asarray(jnp.asarray(X, jnp.bfloat16))).dtype == np.float32
    assert check_X(X.astype(np.float16)).dtype == np.float16  # unchanged, as before
    assert check_X(X > 1).dtype == np.float32
    assert check_X(X.astype(np.int64)).dtype == np.int64
    assert check_X(X.astype(object)).dtype == np.float64
    with pytest.raises(ValueError, match="strings"):
        check_X(np.array([[1.0, b"2"]], dtype=object))
    with pytest.raises(ValueError, match="NaN or infinite"):
        check_X(np.asarray(jnp.asarray([[1.0, jnp.inf]], jnp.bfloat16)))
    with pytest.raises(ValueError, match="numeric"):
        check_X(np.zeros((2, 2), dtype=[("a", "f4"), ("b", "f4")]))


# --------------------------------------------------------------------------------------------
# options, keys and indices (the cases tests/test_fit.py does not cover; docs/validation.md)
# --------------------------------------------------------------------------------------------

OPTIONS = {
    "path": (dict(path="fast"), "path must be 'batch' or 'warm'"),
    "chains": (dict(chains=0), "chains must be a positive integer"),
    "precondition": (dict(precondition="x"), "precondition must be"),
    "max_iter": (dict(max_iter=0), "max_iter must be a positive integer"),
    "max_cg": (dict(max_cg=1.5), "max_cg must be a positive integer"),
    "tol": (dict(tol=-1.0), "tol must be finite and > 0"),
    "eps nan": (dict(eps=float("nan")), "eps must be finite and > 0"),
    "hinge loss": (dict(loss="hinge"), "not twice differentiable"),
    "dtype int32": (dict(dtype=np.int32), "dtype must be float32 or float64"),
    "kernel name": (dict(kernel="laplace"), "unknown kernel"),
    "kernel object": (dict(kernel=object()), "kernel must be a jaxrank kernel"),
    "repeated basis indices": (dict(basis=np.array([0, 0, 1])), "must not repeat"),
    "float basis indices": (dict(basis=np.array([0.0, 1.0])), "must be integers"),
    "2-D basis indices": (dict(basis=np.zeros((2, 2), int)), "1-D and non-empty"),
    "n_basis 0": (dict(basis="random", key=jax.random.key(0), n_basis=0), "n_basis must be in"),
    "lam string": (dict(lam="a"), "lam must be a positive float"),
    "lam bool": (dict(lam=True), "lam must be a positive float"),
    "lam 2-D": (dict(lam=np.ones((2, 2))), "scalar or a 1-D grid"),
    "lam inf": (dict(lam=np.inf), "finite and > 0"),
    "y NaN": (dict(y="nan"), "NaN"),
    "y 2-D": (dict(y="2d"), "1-D"),
    "y strings without a positive name": (dict(y="str"), r"\+1, 1 or True"),
    "init shape": (dict(init=np.zeros(3)), "init must have shape"),
}


@pytest.mark.parametrize("case", list(OPTIONS))
def test_bad_options_refused(data, case):
    X, y = data
    kw, match = OPTIONS[case]
    kw = dict(kw)
    yy = {
        None: y,
        "nan": np.where(y == 1, 1.0, np.nan),
        "2d": np.stack([y, y], 1),
        "str": np.where(y == 1, "yes", "no"),
    }[kw.pop("y", None)]
    lam = kw.pop("lam", 1e-2)
    with pytest.raises(ValueError, match=match):
        jaxrank.fit(X, yy, lam, **kw)


def test_float64_without_x64_refused(data):
    X, y = data
    with jax.enable_x64(False), pytest.raises(ValueError, match="needs x64"):
        jaxrank.fit(X, y, 1e-2, dtype=np.float64)


def test_fixed_basis_entry_points_refuse_basis(data):
    X, y = data
    with pytest.raises(TypeError, match="fixes basis='rare'"):
        jaxrank.fit_rankrc(X, y, 1e-2, basis="all")
    with pytest.raises(TypeError, match="fixes basis='all'"):
        jaxrank.fit_ranksvm(X, y, 1e-2, basis="rare")


def test_decision_function_bad_rows(reference):
    with pytest.raises(ValueError, match="2-D"):
        reference.decision_function(np.zeros(5))
    with pytest.raises(ValueError, match="empty"):
        reference.decision_function(np.zeros((0, 5)))
    with pytest.raises(ValueError, match="select\\(\\) needs a model fitted on a λ grid"):
        reference.select(0)


def test_select_out_of_range_refused(data):
    X, y = data
    grid = jaxrank.fit(X, y, [1e-1, 1e-2, 1e-3], **F64)
    with pytest.raises((IndexError, ValueError)):
        grid.select(5)


def test_integer_key_is_a_clear_error(data):
    X, y = data
    with pytest.raises(ValueError, match=r"jax\.random\.key\(3\)"):
        jaxrank.fit(X, y, 1e-2, basis="random", key=3)


def test_check_key():
    assert check_key(jax.random.key(0)) is not None
    assert check_key(jax.random.PRNGKey(0)) is not None
    for bad, match in [
        (3, r"integer 3; pass key=jax\.random\.key\(3\)"),
        (None, "key is required"),
        (True, "got True"),
        ("0", "single jax.random.key"),
        (jax.random.split(jax.random.key(0)), r"shape \(2,\)"),
        (np.zeros(2), "dtype float64"),
    ]:
        with pytest.raises(ValueError, match=match):
            check_key(bad)
