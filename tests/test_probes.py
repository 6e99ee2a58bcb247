"""The probe suite of issue 31: every input refused with a clear error, or answered right.

Each probe gives bad or extreme input to every fitter and estimator (or the I/O and command line
it concerns) and accepts exactly two outcomes: a ``ValueError`` whose message names the cause
(never a traceback of another type, never "internal error"), or a model whose scores are finite
and not all tied. A NaN score, a silent all-zero model or a zero model labelled CONVERGED fails.
Data are tiny (24 rows) so the whole file stays within the default suite's budget.

The cases and their tests are listed in ``docs/validation.md`` ("Issue 31").
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import _cache, cli, io, kernels
from jaxrank._validation import check_fit_result, check_in_dtype

ROOT = Path(__file__).resolve().parent.parent
M = 24
KEY = jax.random.key(0)
F32 = np.float32


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(M, 3))
    y = np.where(np.arange(M) < 6, 1, -1)
    return X, y


# every fitter, as (X, y, **kwargs) -> model; kwargs: dtype, kernel, eps where it takes them
FITTERS = {
    "fit_rankrc": lambda X, y, **k: jaxrank.fit_rankrc(X, y, 0.1, **k),
    "fit_ranksvm": lambda X, y, **k: jaxrank.fit_ranksvm(X, y, 0.1, **k),
    "fit random": lambda X, y, **k: jaxrank.fit(X, y, 0.1, basis="random", key=KEY, **k),
    "fit kmeans++": lambda X, y, **k: jaxrank.fit(X, y, 0.1, basis="kmeans++", key=KEY, **k),
    "fit greedy": lambda X, y, **k: jaxrank.fit(X, y, 0.1, basis="greedy", key=KEY, n_basis=4, **k),
    "fit_greedy": lambda X, y, **k: jaxrank.fit_greedy(X, y, 0.1, n_basis=4, key=KEY, **k),
    "fit_l1": lambda X, y, **k: jaxrank.fit_l1(X, y, 0.1, l1=0.01, **k),
    "fit_push": lambda X, y, **k: jaxrank.fit_push(X, y, 0.1, **k),
    "fit_multilevel": lambda X, y, **k: jaxrank.fit_multilevel(X, np.arange(M) % 3, 0.1, **k),
    "fit_rankrc_stochastic": lambda X, y, **k: jaxrank.fit_rankrc_stochastic(
        X, y, 0.1, key=KEY, batch_size=8, **k
    ),
    "fit_mibc": lambda X, y, **k: jaxrank.fit_mibc(X, y, nu=0.1, **k),
    "fit_dopmid": lambda X, y, **k: jaxrank.fit_dopmid(X, y, 0.5, **k),
}
# the fitters with the smoothed hinge's ε (the greedy ones use the squared hinge by default)
WITH_EPS = ("fit_rankrc", "fit_ranksvm", "fit random", "fit kmeans++", "fit_l1", "fit_push",
            "fit_multilevel", "fit_rankrc_stochastic")  # fmt: skip


def _estimators():
    from jaxrank import sklearn as sk

    return {
        "RankRCClassifier": lambda **k: sk.RankRCClassifier(0.1, **k),
        "RankSVMClassifier": lambda **k: sk.RankSVMClassifier(0.1, **k),
        "RandomBasisRankClassifier": lambda **k: sk.RandomBasisRankClassifier(
            0.1, random_state=0, **k
        ),
        "SparseAUCClassifier": lambda **k: sk.SparseAUCClassifier(
            0.1, n_basis=4, random_state=0, **k
        ),
        "NystromRankClassifier": lambda **k: sk.NystromRankClassifier(0.1, **k),
        "RankRCClassifierCV": lambda **k: sk.RankRCClassifierCV(cv=2, random_state=0, **k),
        "MultiLevelRankRC": lambda **k: sk.MultiLevelRankRC(0.1, **k),
    }


ESTIMATORS = (
    "RankRCClassifier",
    "RankSVMClassifier",
    "RandomBasisRankClassifier",
    "SparseAUCClassifier",
    "NystromRankClassifier",
    "RankRCClassifierCV",
    "MultiLevelRankRC",
)


def _scores(model, X) -> np.ndarray:
    f = getattr(model, "ranking_score", None) or model.decision_function
    return np.asarray(f(X), np.float64)


def outcome(run, X_score) -> str:
    """``"refused"`` (a ValueError naming a cause) or ``"model"`` (finite, not all tied);
    anything else fails the probe."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PrecisionWarning / ConvergenceWarning may come
            model = run()
    except ValueError as err:
        msg = str(err)
        assert msg and "internal error" not in msg
        assert "nan" not in msg.lower().split(":")[0]  # the cause, not a NaN echo
        return "refused"
    s = _scores(model, X_score)
    assert np.all(np.isfinite(s)), f"{np.sum(~np.isfinite(s))} non-finite scores"
    assert np.ptp(s.reshape(-1)) > 0, "a degenerate model (every score tied) was returned"
    return "model"


# --------------------------------------------------------------------------------------------
# values too small (or too large) for the dtype
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FITTERS)
def test_underflowing_data_refused(data, name):
    """X·1e-30 in float32: squared distances are 0 (every score was NaN, NONFINITE)."""
    X, y = data
    with pytest.raises(ValueError, match="underflow float32"):
        FITTERS[name](X * 1e-30, y, dtype=F32)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_underflowing_data_refused_estimators(data, name):
    X, y = data
    with pytest.raises(ValueError, match="underflow float32"):
        _estimators()[name]().fit(X * 1e-30, y)


@pytest.mark.parametrize("name", [n for n in FITTERS if n != "fit_dopmid"])
def test_sigma2_below_the_dtype_refused(data, name):
    """gaussian(1e-300) is 0 in float32: exp(-0/0) on the diagonal."""
    X, y = data
    with pytest.raises(ValueError, match="sigma2 = 1e-300 is outside float32's range"):
        FITTERS[name](X, y, dtype=F32, kernel=kernels.gaussian(1e-300))


def test_sigma2_below_the_dtype_refused_dopmid(data):
    X, y = data
    with pytest.raises(ValueError, match="sigma2 = 1e-300 is outside float32's range"):
        jaxrank.fit_dopmid(X, y, 0.5, dtype=F32, kernel=kernels.gaussian(1e-300))


def test_sigma2_below_the_dtype_refused_nystrom(data):
    X, _ = data
    with pytest.raises(ValueError, match="sigma2 = 1e-45 is outside float32's range"):
        jaxrank.nystrom_features(X, X[:4], kernels.gaussian(1e-45), dtype=F32)


@pytest.mark.parametrize("name", ("fit_rankrc", "fit_mibc"))
def test_polynomial_overflow_and_underflow_refused(data, name):
    X, y = data
    with pytest.raises(ValueError, match="beyond float32's largest value"):
        FITTERS[name](X, y, dtype=F32, kernel=kernels.polynomial(40, gamma=100.0))
    with pytest.raises(ValueError, match="below what float32 resolves"):
        FITTERS[name](X, y, dtype=F32, kernel=kernels.polynomial(3, gamma=1e-20, coef0=0.0))


def test_mibc_nu_beyond_the_dtype(data):
    """fit_mibc(nu=1e-300): C = 1/(ν m+) is inf in float32 (every score was NaN)."""
    X, y = data
    with pytest.raises(ValueError, match=r"C = 1/\(nu·m\+\) = .* outside float32's range"):
        jaxrank.fit_mibc(X, y, nu=1e-300, dtype=F32)


def test_learning_rate_beyond_the_dtype(data):
    X, y = data
    with pytest.raises(ValueError, match="learning_rate = 1e-300 is outside float32's range"):
        jaxrank.fit_rankrc_stochastic(X, y, 0.1, key=KEY, batch_size=8, learning_rate=1e-300,
                                      dtype=F32)  # fmt: skip


def test_check_in_dtype_both_sides():
    assert check_in_dtype(1e-30, "s", F32) == 1e-30
    for bad in (1e-45, 0.0, -1.0, 1e39, np.nan, np.inf):
        with pytest.raises(ValueError, match="s = "):
            check_in_dtype(bad, "s", F32)
    assert check_in_dtype(0.0, "c", F32, zero=True) == 0.0
    assert check_in_dtype(-2.0, "c", F32, zero=True) == -2.0


# --------------------------------------------------------------------------------------------
# kernel objects built from the class
# --------------------------------------------------------------------------------------------

BAD_KERNELS = {
    "Gaussian(sigma2=-1.0)": (lambda: jaxrank.Gaussian(sigma2=-1.0), "sigma2 must be finite"),
    "Gaussian(sigma2=0.0)": (lambda: jaxrank.Gaussian(sigma2=0.0), "sigma2 must be finite"),
    "Gaussian(sigma2=nan)": (lambda: jaxrank.Gaussian(sigma2=np.nan), "sigma2 must be finite"),
    "Gaussian(sigma2=True)": (lambda: jaxrank.Gaussian(sigma2=True), "sigma2 must be finite"),
    "Polynomial(degree=0)": (lambda: jaxrank.Polynomial(degree=0), "degree must be a positive"),
    "Polynomial(degree=2.5)": (lambda: jaxrank.Polynomial(degree=2.5), "degree must be a"),
    "Polynomial(gamma=nan)": (lambda: jaxrank.Polynomial(gamma=np.nan), "gamma must be finite"),
    "Polynomial(gamma=0)": (lambda: jaxrank.Polynomial(gamma=0.0), "gamma must be finite"),
    "Polynomial(coef0=inf)": (lambda: jaxrank.Polynomial(coef0=np.inf), "coef0 must be finite"),
    "gaussian(-1)": (lambda: kernels.gaussian(-1.0), "sigma2 must be finite"),
    "polynomial(0)": (lambda: kernels.polynomial(0), "degree must be a positive"),
}


@pytest.mark.parametrize("case", BAD_KERNELS)
def test_kernel_parameters_checked_where_made(case):
    make, match = BAD_KERNELS[case]
    with pytest.raises(ValueError, match=match):
        make()


def test_kernel_objects_still_pytrees():
    """The check judges user numbers only: traced and vmapped leaves pass through JAX."""
    k = jaxrank.Gaussian(sigma2=2.0)
    grid = jaxrank.Gaussian(sigma2=jnp.array([1.0, 4.0]))
    U = jnp.zeros((1, 2))
    V = jnp.ones((1, 2))
    out = jax.vmap(lambda kk: kk(U, V))(grid)
    assert out.shape == (2, 1, 1)
    g = jax.grad(lambda kk: kk(U, V)[0, 0])(k)  # a cotangent kernel (a JAX array leaf)
    assert np.isfinite(float(g.sigma2))
    assert jax.jit(lambda kk: kk(U, V))(jaxrank.Polynomial(2, 1.0, 0.0)).shape == (1, 1)
    # tree utilities rebuild kernels with other leaves: vmap's in_axes, orbax's parameter names
    assert jax.vmap(lambda kk: kk(U, V), in_axes=(jaxrank.Gaussian(sigma2=0),))(grid).shape[0] == 2
    assert jax.tree.map(lambda _: "name", k).sigma2 == "name"


@pytest.mark.parametrize("sigma2", ["2", 0, -3])
def test_kernel_parameters_no_class_check_judges_are_refused_by_the_fit(sigma2):
    X, y = jaxrank.datasets.make_rare_class(60, 0.2, 0.75, d=3, seed=0)
    with pytest.raises(ValueError, match="sigma2"):
        jaxrank.fit(X, y, 0.1, kernel=jaxrank.Gaussian(sigma2=sigma2))


# --------------------------------------------------------------------------------------------
# degenerate models are never CONVERGED, and NaN fits are refused
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", FITTERS)
def test_far_from_origin(data, name):
    """X + 1e17 (float64 steps of 16 there: the rows round alike), and, for the fitters that
    are quick in float32, X + 1e8 in float32: refused or a ranking model, never zero or NaN."""
    X, y = data
    outcome(lambda: FITTERS[name](X + 1e17, y), X + 1e17)
    if name in ("fit_rankrc", "fit_greedy", "fit_mibc", "fit_dopmid"):
        outcome(lambda: FITTERS[name](X + 1e8, y, dtype=F32), X + 1e8)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_far_from_origin_estimators(data, name):
    X, y = data
    outcome(lambda: _estimators()[name](dtype="float64").fit(X + 1e17, y), X + 1e17)


@pytest.mark.parametrize("name", WITH_EPS)
def test_tiny_eps_beyond_the_dtype(data, name):
    """eps = 1e-300 in float32 is 0 and the loss's 1/(4ε) inf."""
    X, y = data
    with pytest.raises(ValueError, match="eps = 1e-300 is outside float32's range"):
        FITTERS[name](X, y, eps=1e-300, dtype=F32)


@pytest.mark.parametrize("name", WITH_EPS)
def test_huge_eps_is_no_model(data, name):
    """eps = 1e30: the smoothed hinge's slope 1/(2ε) is below tol, so 0 'converged'."""
    X, y = data
    assert outcome(lambda: FITTERS[name](X, y, eps=1e30), X) == "refused"


def test_huge_eps_names_the_cause(data):
    X, y = data
    with pytest.raises(ValueError, match=r"zero model .* eps = 1e\+30"):
        jaxrank.fit(X, y, 0.1, eps=1e30)


@pytest.mark.parametrize("name", ("fit_greedy", "SparseAUCClassifier"))
def test_greedy_far_from_origin_warns_and_refuses(data, name):
    """fit_greedy(X + 1e8) gave coefficients all 0, CONVERGED and no warning."""
    X, y = data
    run = (
        (lambda: jaxrank.fit_greedy(X + 1e8, y, 0.1, n_basis=4, key=KEY, dtype=F32))
        if name == "fit_greedy"
        else (lambda: _estimators()[name]().fit(X + 1e8, y))
    )
    with pytest.warns(jaxrank.PrecisionWarning), pytest.raises(ValueError, match="zero model"):
        run()


def test_polynomial_degree_zero_is_no_model(data):
    """Polynomial(degree=0) returned an all-zero model labelled CONVERGED; now refused."""
    X, y = data
    with pytest.raises(ValueError, match="degree"):
        jaxrank.fit(X, y, 0.1, kernel=jaxrank.Polynomial(degree=0))


@pytest.mark.parametrize("bad", (np.nan, np.inf, 1e39))
def test_init_must_be_finite(data, bad):
    X, y = data
    init = np.zeros(6)
    init[2] = bad
    with pytest.raises(ValueError, match="init holds 1 NaN or infinite"):
        jaxrank.fit(X, y, 0.1, init=init, dtype=F32)
    with pytest.raises(ValueError, match="init must be finite"):
        jaxrank.fit_l1(X, y, 0.1, l1=0.01, init=init, dtype=F32)


def test_check_fit_result():
    """The shared host-side check: NaN rows and zero rows refused, with their causes named."""
    with pytest.raises(ValueError, match=r"NONFINITE.*for λ=2"):
        check_fit_result(np.array([[1.0, 2.0], [np.nan, 0.0]]), np.array([0, 3]), "λ",
                         [1.0, 2.0], who="fit", dtype=F32)  # fmt: skip
    with pytest.raises(ValueError, match=r"zero model.*λ=1, λ=2: .*; likely cause: c\."):
        check_fit_result(np.zeros((2, 2)), np.array([0, 0]), "λ", [1.0, 2.0], who="fit",
                         dtype=F32, causes=["c"])  # fmt: skip
    with pytest.raises(ValueError, match=r"zero model.*stopped before moving away from 0"):
        check_fit_result(np.zeros(2), 2, "λ", [1.0], who="fit", dtype=F32)
    # where 0 is the certified optimum (L1 at μ ≥ μ_max): no error
    check_fit_result(np.zeros(2), 0, "μ", [1.0], who="fit_l1", dtype=F32, zero=False)


# --------------------------------------------------------------------------------------------
# loaded values held to the fitters' rules
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model32(data):
    X, y = data
    return jaxrank.fit_rankrc(X, y, 0.1, dtype=F32)


LOADED = {
    "sigma2 = 1e-300": (
        lambda m: dataclasses.replace(m, kernel=kernels.Gaussian(sigma2=1e-300)),
        "sigma2 = 1e-300 is outside float32's range",
    ),
    "sigma2 = 1e-45 (subnormal)": (
        lambda m: dataclasses.replace(m, kernel=kernels.Gaussian(sigma2=1e-45)),
        "sigma2 = 1e-45 is outside float32's range",
    ),
    "coef 1e38": (
        lambda m: dataclasses.replace(m, coef=jnp.full_like(m.coef, 1e38)),
        "scores would overflow float32",
    ),
    "polynomial overflowing": (
        lambda m: dataclasses.replace(m, kernel=kernels.polynomial(60, 50.0)),
        "beyond float32's largest value",
    ),
}


@pytest.mark.parametrize("case", LOADED)
def test_loaded_values_checked(model32, tmp_path, case):
    """A file with a valid checksum but values no fit returns is refused on load."""
    edit, match = LOADED[case]
    path = tmp_path / "m.npz"
    edit(model32).save(path)  # save writes what it is given; load judges it
    with pytest.raises(ValueError, match=match):
        jaxrank.load(path)


def test_loaded_model_file_is_bounded(tmp_path):
    """A model path that is a symlink to /dev/zero is refused before reading, not read."""
    link = tmp_path / "zero.npz"
    os.symlink("/dev/zero", link)
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="not a regular file"):
        jaxrank.load(link)
    assert time.perf_counter() - t0 < 5


# --------------------------------------------------------------------------------------------
# saving: symlinks written through, temporaries of killed saves removed
# --------------------------------------------------------------------------------------------


def test_save_writes_through_a_symlink(model32, tmp_path):
    real = tmp_path / "real.npz"
    link = tmp_path / "link.npz"
    real.write_bytes(b"old")
    os.symlink(real, link)
    model32.save(link)
    assert link.is_symlink() and os.readlink(link) == str(real)
    np.testing.assert_array_equal(jaxrank.load(real).coef, model32.coef)


def test_stale_temporaries_removed_on_the_next_save(model32, tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = tmp_path / f".jaxrank-{int(dead.stdout)}-abc.tmp"  # a save killed by kill -9
    old = tmp_path / ".jaxrank-xyz.tmp"  # the earlier naming, no pid: stale once old
    live = tmp_path / f".jaxrank-{os.getpid()}-def.tmp"  # a save in progress: kept
    for p in (stale, old, live):
        p.write_bytes(b"partial")
    os.utime(old, (time.time() - 2 * io.STALE_TMP_SECONDS,) * 2)
    model32.save(tmp_path / "m.npz")
    assert not stale.exists() and not old.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == [live.name]


# --------------------------------------------------------------------------------------------
# budgets checked before the work
# --------------------------------------------------------------------------------------------


def test_nystrom_output_budget_before_the_gram(data, monkeypatch):
    X, _ = data
    called = []
    monkeypatch.setattr(jaxrank.nystrom, "pinv_sqrt", lambda *a: called.append(1))
    with pytest.raises(jaxrank.MemoryBudgetError, match="Nyström features \\(24 x up to 8\\)"):
        jaxrank.nystrom_features(X, X[:8], kernels.gaussian(1.0), memory_budget=24 * 8 * 4 - 1)
    assert not called  # refused before K_RR or its eigendecomposition


def test_nystrom_gram_budget(monkeypatch):
    called = []
    monkeypatch.setattr(jaxrank.nystrom, "pinv_sqrt", lambda *a: called.append(1))
    with pytest.raises(jaxrank.MemoryBudgetError, match="basis Gram matrix K_RR \\(70000 x"):
        jaxrank.nystrom.nystrom_map(
            np.zeros((70_000, 1)), kernels.gaussian(1.0), memory_budget=6 * 2**30
        )
    assert not called


# --------------------------------------------------------------------------------------------
# the compilation cache refuses a directory others can write
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", (0o777, 0o770, 0o757))
def test_cache_refuses_a_directory_others_write(tmp_path, mode):
    before = jax.config.jax_compilation_cache_dir
    d = tmp_path / "jax"
    d.mkdir()
    d.chmod(mode)
    try:
        with pytest.warns(jaxrank.CompilationCacheWarning, match="writable by") as rec:
            assert jaxrank.set_compilation_cache(d) is None
        assert len(rec) == 1
        assert jax.config.jax_compilation_cache_dir is None
        d.chmod(0o700)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert jaxrank.set_compilation_cache(d) == d
    finally:
        _cache.set_compilation_cache(before)


def test_cache_refuses_a_directory_of_another_owner(tmp_path, monkeypatch):
    d = tmp_path / "jax"
    d.mkdir(mode=0o700)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(d).st_uid + 1)
    assert "not by this user" in _cache._unusable(d)


# --------------------------------------------------------------------------------------------
# the command line: every failure one line, exit 2, naming the file or option
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def files(tmp_path_factory, data):
    X, y = data
    d = tmp_path_factory.mktemp("cli")
    text = "a,b,c,y\n" + "".join(
        ",".join(f"{v:.4f}" for v in r) + f",{t}\n" for r, t in zip(X, y, strict=True)
    )
    (d / "d.csv").write_text(text)
    (d / "d16.csv").write_bytes(text.encode("utf-16"))
    (d / "dlat.csv").write_bytes(text.replace("a,b", "\xe9,b").encode("latin-1"))
    for name, idx in (("big.svm", 10**9), ("huge.svm", 2**40)):
        lines = "".join(f"{t} 1:{r[0]:.3f} {idx}:{r[1]:.3f}\n" for r, t in zip(X, y, strict=True))
        (d / name).write_text(lines)
    os.symlink("/dev/zero", d / "zero.npz")
    return d


def _main(argv, capsys):
    code = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err.strip().splitlines()
    return code, err


CLI = {
    "--delimiter ''": (["--delimiter", ""], "argument --delimiter"),
    "--delimiter ::": (["--delimiter", "::"], "argument --delimiter"),
    "--seed 2^70": (["--seed", "1180591620717411303424"], "argument --seed"),
}


@pytest.mark.parametrize("case", CLI)
def test_cli_options(files, capsys, case):
    extra, match = CLI[case]
    argv = ["fit", files / "d.csv", "--target", "y", "--lam", "0.1", *extra,
            "-o", files / "m.npz", "-q"]  # fmt: skip
    code, err = _main(argv, capsys)
    assert code == 2 and len(err) == 1 and match in err[0], err
    assert "internal error" not in err[0]


CLI_FILES = {
    "LIBSVM index 1e9": ("big.svm", "feature index 1000000000"),
    "LIBSVM index 2^40": ("huge.svm", "feature index 1099511627776"),
    "UTF-16 CSV": ("d16.csv", "d16.csv is UTF-16 text"),
    "latin-1 CSV": ("dlat.csv", "dlat.csv is not UTF-8"),
}


@pytest.mark.parametrize("case", CLI_FILES)
def test_cli_data_files(files, capsys, case):
    name, match = CLI_FILES[case]
    target = [] if name.endswith(".svm") else ["--target", "y"]
    argv = ["fit", files / name, *target, "--lam", "0.1", "-o", files / "m.npz", "-q"]
    code, err = _main(argv, capsys)
    assert code == 2 and len(err) == 1 and match in err[0], err


def test_cli_refused_fit_names_the_data(files, capsys):
    """Every row equal: the zero model is refused, in one line naming the data file."""
    const = files / "const.csv"
    const.write_text("a,b,y\n" + "".join(f"1,2,{1 if i % 4 == 0 else -1}\n" for i in range(20)))
    argv = ["fit", const, "--target", "y", "--lam", "0.1", "-o", files / "c.npz", "-q"]
    code, err = _main(argv, capsys)
    assert code == 2 and len(err) == 1, err
    assert f"fitting {const}: the fit returned the zero model" in err[0]
    assert "every row of X is equal" in err[0]


def test_cli_output_never_the_input(files, capsys):
    before = (files / "d.csv").read_bytes()
    argv = ["fit", files / "d.csv", "--target", "y", "--lam", "0.1", "-o", files / "d.csv", "-q"]
    code, err = _main(argv, capsys)
    assert code == 2 and len(err) == 1 and "-o/--output" in err[0] and "data file" in err[0]
    assert (files / "d.csv").read_bytes() == before
    # the same through a symlink to the data
    os.symlink(files / "d.csv", files / "alias.csv")
    code, err = _main([*argv[:-2], files / "alias.csv", "-q"], capsys)
    assert code == 2 and "data file" in err[0]
    assert (files / "d.csv").read_bytes() == before


def test_cli_predict(files, capsys):
    model = files / "m.npz"
    assert _main(["fit", files / "d.csv", "--target", "y", "--lam", "0.1", "-o", model, "-q"],
                 capsys)[0] == 0  # fmt: skip
    before = (files / "d.csv").read_bytes()
    for out in (files / "d.csv", model):
        code, err = _main(["predict", model, files / "d.csv", "--out", out], capsys)
        assert code == 2 and len(err) == 1 and "--out" in err[0], err
    assert (files / "d.csv").read_bytes() == before
    t0 = time.perf_counter()
    code, err = _main(["predict", files / "zero.npz", files / "d.csv"], capsys)
    assert code == 2 and len(err) == 1 and "zero.npz is not a regular file" in err[0]
    assert time.perf_counter() - t0 < 5


def test_cli_model_file_scaling_named(files, capsys, tmp_path):
    """A model file whose scaling mean is 1e300 (valid checksum): the model file is named."""
    from _modelfiles import edit_cli_file, legacy_cli_file

    from jaxrank import cli
    from jaxrank.cli._modelfile import legacy_checksum

    model = files / "m.npz"
    if not model.exists():
        _main(["fit", files / "d.csv", "--target", "y", "--lam", "0.1", "-o", model, "-q"], capsys)

    def shift(parts, meta):
        name = meta["extension"]["mean"]["numpy"]
        parts[name] = parts[name] + 1e300

    bad = tmp_path / "bad.npz"
    bad.write_bytes(edit_cli_file(model.read_bytes(), shift))
    code, err = _main(["predict", bad, files / "d.csv"], capsys)
    assert code == 2 and len(err) == 1 and "bad.npz" in err[0] and "mean" in err[0], err
    # a version-1 file (its own checksum, read by the legacy reader): the same
    (tmp_path / "v1.npz").write_bytes(legacy_cli_file(cli.load_model_file(model)))
    with np.load(tmp_path / "v1.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["mean"] = arrays["mean"] + 1e300
    arrays.pop("checksum")
    arrays["checksum"] = np.array(legacy_checksum(arrays))
    np.savez(bad, **arrays)
    code, err = _main(["predict", bad, files / "d.csv"], capsys)
    assert code == 2 and len(err) == 1 and "bad.npz" in err[0] and "mean" in err[0], err


def test_cli_subprocess_one_line(files):
    """Through the console entry point: one line on stderr, exit 2, no traceback."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-m", "jaxrank", "fit", str(files / "big.svm"), "--lam", "0.1",
         "-o", str(files / "m2.npz"), "-q"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
