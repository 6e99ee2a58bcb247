"""The ``jaxrank`` command line: fit / predict / bench against the Python API, data readers
against independent parsers, and every error path as one line on stderr.

Sizes are small and shared (one data set of 120 rows, 30 rare; 3-fold CV over 3 λ) so that the
fits of the command line and of the API hit the same compiled solver.
"""

import contextlib
import io
import os
import subprocess
import sys
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

import jaxrank
from jaxrank import _io_data, cli, datasets, metrics
from jaxrank import io as model_io
from jaxrank.cli import _commands as cli_commands
from jaxrank.cli import _common as _cli_common
from jaxrank.cli import _fit as _cli_fit
from jaxrank.cli import _main as cli_main
from jaxrank.cli import _modelfile as _cli_modelfile

ROOT = Path(__file__).resolve().parent.parent
GRID = 2.0 ** np.array([-10.0, -6.0, -2.0])
GRID_ARGS = ["--lam-grid", "2^-10", "2^-6", "2^-2"]
F64 = ["--dtype", "float64", "-q"]
NAMES = ["a", "b", "c", "d", "e"]


def _write_csv(path, X, labels, names=NAMES, target="label", target_at=None):
    cols = list(names)
    at = len(cols) if target_at is None else target_at
    cols.insert(at, target)
    with open(path, "w") as fh:
        fh.write(",".join(cols) + "\n")
        for row, lab in zip(X, labels, strict=True):
            cells = [repr(float(v)) for v in row]
            cells.insert(at, str(lab))
            fh.write(",".join(cells) + "\n")


def _write_libsvm(path, X, y, zero_based=False):
    with open(path, "w") as fh:
        for row, lab in zip(X, y, strict=True):
            base = 0 if zero_based else 1
            items = [f"{j + base}:{float(v)!r}" for j, v in enumerate(row) if v != 0]
            fh.write(f"{int(lab):+d} " + " ".join(items) + "\n")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    X, y = datasets.make_rare_class(120, 0.25, 0.75, seed=0)  # 30 rare rows, d = 5
    Xte, yte = datasets.make_rare_class(50, 0.2, 0.75, seed=1)
    X[:, 2] = np.round(X[:, 2], 1)
    X[::7, 2] = 0.0  # some zeros, so the LIBSVM file is sparse
    _write_csv(tmp / "train.csv", X, y)
    _write_csv(tmp / "test.csv", Xte, yte)
    np.savez(tmp / "train.npz", X=X, y=y)
    _write_libsvm(tmp / "train.svm", X, y)
    return {"dir": tmp, "X": X, "y": y, "Xte": Xte, "yte": yte}


def _quiet_main(argv):
    """``main(argv)`` with stdout and stderr swallowed (for module fixtures)."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return cli.main([str(a) for a in argv])


@pytest.fixture(scope="module")
def one_model(files):
    """A float64 model at λ = 2^-6 fitted by the command line on train.csv."""
    path = files["dir"] / "one.npz"
    argv = ["fit", files["dir"] / "train.csv", "--target", "label", "--lam", "2^-6", *F64]
    assert _quiet_main([*argv, "-o", path]) == 0
    return path


def _standardise(X):
    return (X - X.mean(0)) / X.std(0)


def _run(argv, capsys):
    """``main(argv)`` in-process: ``(exit code, stdout, stderr)``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _predict(model, data, capsys, *extra):
    code, out, err = _run(["predict", model, data, *extra], capsys)
    assert code == 0, err
    return np.array([float(s) for s in out.split()])


def _api_scores(model, X, Xte):
    return np.asarray(model.decision_function((Xte - X.mean(0)) / X.std(0)))


# ---------------------------------------------------------------------------------------------
# fit / predict against the Python API
# ---------------------------------------------------------------------------------------------


def test_cv_fit_predict_equals_select_lambda(files, capsys):
    d = files["dir"]
    code, out, err = _run(
        ["fit", d / "train.csv", "--target", "label", *GRID_ARGS, "--cv", 3, "--seed", 4,
         "--dtype", "float64", "-o", d / "cv.npz"], capsys,
    )  # fmt: skip
    assert code == 0, err
    X, y = files["X"], files["y"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        res = jaxrank.select_lambda(
            _standardise(X), y, GRID, folds=3, key=jax.random.key(4), dtype=np.float64
        )
    mf = cli.load_model_file(d / "cv.npz")
    assert mf.selection == "cv"
    np.testing.assert_allclose(mf.score, res.mean_auc, rtol=0, atol=1e-12)
    np.testing.assert_allclose(mf.score_se, res.se_auc, rtol=0, atol=1e-12)
    assert float(mf.model.lam) == res.best_lam
    np.testing.assert_allclose(mf.model.coef, res.model.coef, rtol=0, atol=1e-10)
    scores = _predict(d / "cv.npz", d / "test.csv", capsys)
    expect = _api_scores(res.model, X, files["Xte"])
    np.testing.assert_allclose(scores, expect, rtol=0, atol=1e-10)
    # the report: the CV table and the model line on stdout; on stderr (not a terminal) one
    # progress line per fold and one for the refit
    assert "3-fold stratified CV" in out and "<- best" in out and "saved" in out
    lines = err.splitlines()
    assert len(lines) == 4 and all(ln.startswith("jaxrank: [") for ln in lines), err
    assert "1/4 fold 1/3" in lines[0] and "4/4 refit" in lines[3]
    assert lines[3].startswith("jaxrank: [" + "#" * 20 + "]")


def test_holdout_and_single_lambda_equal_api(files, one_model, capsys):
    d = files["dir"]
    X, y = files["X"], files["y"]
    Xs = _standardise(X)
    # hold-out of 1/3 of each class: the grid is fitted on 20 + 60 rows, scored on 10 + 30
    code, _, err = _run(
        ["fit", d / "train.csv", "--target", "label", *GRID_ARGS, "--val-frac", 1 / 3,
         "--seed", 2, *F64, "-o", d / "ho.npz"], capsys,
    )  # fmt: skip
    assert code == 0, err
    split_key, _, _ = jax.random.split(jax.random.key(2), 3)
    val = _cli_fit.holdout(y == 1, 1 / 3, split_key)
    assert (val & (y == 1)).sum() == 10 and (val & (y != 1)).sum() == 30
    grid_model = jaxrank.fit(Xs[~val], y[~val], GRID, dtype=np.float64)
    auc = np.asarray(metrics.auc(y[val], grid_model.decision_function(Xs[val])))
    best = max(np.flatnonzero(auc == auc.max()), key=lambda j: GRID[j])
    mf = cli.load_model_file(d / "ho.npz")
    assert mf.selection == "holdout" and float(mf.model.lam) == GRID[best]
    np.testing.assert_allclose(mf.score, auc, rtol=0, atol=1e-12)
    ref = jaxrank.fit(Xs, y, GRID[best], dtype=np.float64)
    np.testing.assert_allclose(mf.model.coef, ref.coef, rtol=0, atol=1e-10)

    ref = jaxrank.fit(Xs, y, 2.0**-6, dtype=np.float64)
    assert cli.load_model_file(one_model).selection == "fixed"
    scores = _predict(one_model, d / "test.csv", capsys)
    np.testing.assert_allclose(scores, _api_scores(ref, X, files["Xte"]), rtol=0, atol=1e-10)


def test_validation_file(files, capsys, tmp_path):
    X, y = files["X"], files["y"]
    rng = np.random.default_rng(0)
    val = np.zeros(120, dtype=bool)
    val[rng.choice(np.flatnonzero(y == 1), 10, replace=False)] = True
    val[rng.choice(np.flatnonzero(y != 1), 30, replace=False)] = True
    # columns of the validation file in another order, and an extra column: matched by name
    _write_csv(tmp_path / "fit.csv", X[~val], y[~val])
    _write_csv(tmp_path / "val.csv", X[val][:, ::-1], y[val], names=NAMES[::-1], target_at=0)
    code, _, err = _run(
        ["fit", tmp_path / "fit.csv", "--target", "label", *GRID_ARGS, "--validation",
         tmp_path / "val.csv", *F64, "-o", tmp_path / "m.npz"], capsys,
    )  # fmt: skip
    assert code == 0, err
    Xf = X[~val]
    model = jaxrank.fit(_standardise(Xf), y[~val], GRID, dtype=np.float64)
    auc = np.asarray(
        metrics.auc(y[val], model.decision_function((X[val] - Xf.mean(0)) / Xf.std(0)))
    )
    mf = cli.load_model_file(tmp_path / "m.npz")
    best = max(np.flatnonzero(auc == auc.max()), key=lambda j: GRID[j])
    np.testing.assert_allclose(mf.score, auc, rtol=0, atol=1e-12)
    np.testing.assert_allclose(mf.model.coef, model.coef[best], rtol=0, atol=1e-12)


@pytest.mark.slow  # the command line in fresh processes
def test_subprocess_fit_and_predict(files, tmp_path):
    # the console entry point in a fresh process: default dtype (float32) with x64 off
    d = files["dir"]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    run = lambda *a: subprocess.run(
        [sys.executable, "-m", "jaxrank", *map(str, a)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    fit = run("fit", d / "train.csv", "--target", "label", "--lam", "2^-6", "-q", "-o", "m.npz")
    assert fit.returncode == 0, fit.stderr
    assert "float32" in fit.stdout and "saved m.npz" in fit.stdout
    pred = run("predict", "m.npz", d / "test.csv", "--out", "scores.txt")
    assert pred.returncode == 0, pred.stderr
    assert pred.stdout == "" and "jaxrank: AUC " in pred.stderr
    scores = np.loadtxt(tmp_path / "scores.txt")
    mf = cli.load_model_file(tmp_path / "m.npz")
    assert mf.model.coef.dtype == np.float32
    # printed with float32's shortest round-trip repr: the model's own float32 scores
    Xte = (files["Xte"] - mf.mean) / mf.scale
    own = np.asarray(mf.model.decision_function(Xte))
    np.testing.assert_allclose(scores.astype(np.float32), own, rtol=1e-6, atol=0)
    # and, to float32 accuracy, the float64 fit of the Python API on the same standardised rows
    X = files["X"]
    ref = jaxrank.fit(_standardise(X), files["y"], 2.0**-6, dtype=np.float64)
    np.testing.assert_allclose(scores, _api_scores(ref, X, files["Xte"]), rtol=0, atol=5e-5)


@pytest.mark.parametrize("source", ["train.svm", "train.npz"])
def test_libsvm_and_npz_inputs(files, one_model, capsys, source):
    d = files["dir"]
    out = d / f"model-{source.replace('.', '-')}.npz"
    code, _, err = _run(["fit", d / source, "--lam", "2^-6", *F64, "-o", out], capsys)
    assert code == 0, err
    ref = cli.load_model_file(one_model)  # the same rows read from CSV
    X = files["X"]
    api = jaxrank.fit(_standardise(X), files["y"], 2.0**-6, dtype=np.float64)
    mf = cli.load_model_file(out)
    np.testing.assert_allclose(mf.model.coef, api.coef, rtol=0, atol=1e-10)
    np.testing.assert_allclose(mf.mean, X.mean(0), rtol=0, atol=1e-15)
    assert mf.input_format == source.split(".")[1].replace("svm", "libsvm")
    np.testing.assert_allclose(mf.model.coef, ref.model.coef, rtol=0, atol=1e-10)
    # predict on the same format (labels present: AUC on stderr) and on the CSV test file
    same = _predict(out, d / source, capsys)
    np.testing.assert_allclose(same, np.asarray(api.decision_function(_standardise(X))),
                               rtol=0, atol=1e-10)  # fmt: skip
    other = _predict(out, d / "test.csv", capsys, "--target", "label")
    np.testing.assert_allclose(other, _api_scores(api, X, files["Xte"]), rtol=0, atol=1e-10)


def test_kernels_and_random_basis(files, capsys):
    d = files["dir"]
    X, y = files["X"], files["y"]
    Xs = _standardise(X)
    cases = [
        (["--kernel", "linear"], dict(kernel=jaxrank.kernels.linear())),
        (["--kernel", "poly", "--degree", "3"], dict(kernel=jaxrank.kernels.polynomial(3))),
        (["--sigma2", "2.5"], dict(kernel=jaxrank.kernels.gaussian(2.5))),
        (["--basis", "random", "--n-basis", "30", "--seed", "5"],
         dict(basis="random", n_basis=30, key=jax.random.key(5))),
    ]  # fmt: skip
    for opts, kw in cases:
        code, _, err = _run(
            ["fit", d / "train.npz", "--lam", "2^-6", *opts, *F64, "-o", d / "k.npz"], capsys
        )
        assert code == 0, (opts, err)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
            api = jaxrank.fit(Xs, y, 2.0**-6, dtype=np.float64, **kw)
        mf = cli.load_model_file(d / "k.npz")
        assert type(mf.model.kernel) is type(api.kernel), opts
        np.testing.assert_allclose(mf.model.coef, api.coef, rtol=0, atol=1e-10, err_msg=str(opts))
        np.testing.assert_array_equal(mf.model.basis_index, api.basis_index)
        scores = _predict(d / "k.npz", d / "test.csv", capsys, "--target", "label")
        np.testing.assert_allclose(scores, _api_scores(api, X, files["Xte"]), rtol=0, atol=1e-10)


@pytest.mark.slow  # fit_greedy compiles its own candidate and retrain solvers (~25 CPU-s here)
def test_greedy_basis_matches_fit_greedy(files, capsys):
    from jaxrank.greedy import fit_greedy

    d = files["dir"]
    code, out, err = _run(
        ["fit", d / "train.npz", "--lam", "2^-6", "--basis", "greedy", "--n-basis", 8,
         "--kappa", 10, "--seed", 3, *F64, "-o", d / "g.npz"], capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "greedy basis (8 basis rows)" in out
    api = fit_greedy(_standardise(files["X"]), files["y"], 2.0**-6, n_basis=8, kappa=10,
                     key=jax.random.key(3), dtype=np.float64)  # fmt: skip
    mf = cli.load_model_file(d / "g.npz")
    assert mf.model.loss == api.loss == "squared_hinge"
    np.testing.assert_array_equal(mf.model.basis_index, api.basis_index)
    np.testing.assert_allclose(mf.model.coef, api.coef, rtol=0, atol=1e-10)
    scores = _predict(d / "g.npz", d / "test.csv", capsys, "--target", "label")
    np.testing.assert_allclose(scores, _api_scores(api, files["X"], files["Xte"]), rtol=0,
                               atol=1e-10)  # fmt: skip


def test_model_file_round_trip_and_checksum(files, one_model, capsys, tmp_path):
    d = files["dir"]
    mf = cli.load_model_file(one_model)
    cli.save_model_file(tmp_path / "copy.npz", mf)
    back = cli.load_model_file(tmp_path / "copy.npz")
    for name in ("mean", "scale", "grid"):
        np.testing.assert_array_equal(getattr(back, name), getattr(mf, name))
    assert back.feature_names == tuple(NAMES) and back.target == "label"
    assert back.positive_label == "1" and back.classes == ("-1", "1")
    np.testing.assert_array_equal(back.model.coef, mf.model.coef)
    np.testing.assert_array_equal(back.model.basis, mf.model.basis)
    assert back.model.kernel == mf.model.kernel and back.model.info == mf.model.info
    # version 2 is jaxrank.io's container: its format and version in the metadata, the one
    # checksum; jaxrank.load refuses it (the ranker scores standardised rows) and names the reader
    from _modelfiles import members, meta_of

    meta = meta_of(members((tmp_path / "copy.npz").read_bytes()))
    assert (meta["format"], meta["format_version"]) == ("jaxrank-cli-model", 2)
    assert meta["model_type"] == "RankModel" and "mean" in meta["extension"]
    with pytest.raises(ValueError, match=r"jaxrank\.cli\.load_model_file"):
        model_io.load(tmp_path / "copy.npz")
    # a flipped standardisation mean is caught by the checksum
    with np.load(tmp_path / "copy.npz") as z:
        arrays = dict(z)
    arrays["extension.mean"] = arrays["extension.mean"] + 1e-3
    np.savez(tmp_path / "bad.npz", **arrays)
    code, out, err = _run(["predict", tmp_path / "bad.npz", d / "test.csv"], capsys)
    assert code == 2 and out == "" and "checksum" in err and err.count("\n") == 1
    with pytest.raises(ValueError, match="checksum"):
        cli.load_model_file(tmp_path / "bad.npz")
    # a bare jaxrank.io file of the ranker is refused by predict with a reason
    model_io.save(mf.model, tmp_path / "bare.npz")
    bare = model_io.load(tmp_path / "bare.npz")
    np.testing.assert_array_equal(bare.coef, mf.model.coef)
    code, out, err = _run(["predict", tmp_path / "bare.npz", d / "test.csv"], capsys)
    assert code == 2 and out == "" and "bare jaxrank.io model" in err


def test_version_1_model_files_still_load(files, one_model, capsys, tmp_path):
    """A version-1 file (the layout written before version 2, its own checksum) loads through
    the legacy reader: the same model, the same scores; saving it again writes version 2."""
    from _modelfiles import legacy_cli_file, members, meta_of

    d = files["dir"]
    mf = cli.load_model_file(one_model)
    (tmp_path / "v1.npz").write_bytes(legacy_cli_file(mf))
    old = cli.load_model_file(tmp_path / "v1.npz")
    for name in ("mean", "scale", "grid", "score", "score_se"):
        np.testing.assert_array_equal(getattr(old, name), getattr(mf, name))
    for name in ("feature_names", "target", "positive_label", "classes", "input_format",
                 "zero_based", "selection"):  # fmt: skip
        assert getattr(old, name) == getattr(mf, name), name
    np.testing.assert_array_equal(old.model.coef, mf.model.coef)
    assert old.model.kernel == mf.model.kernel and old.model.info == mf.model.info
    want = _predict(one_model, d / "test.csv", capsys, "--target", "label")
    np.testing.assert_array_equal(
        _predict(tmp_path / "v1.npz", d / "test.csv", capsys, "--target", "label"), want
    )
    cli.save_model_file(tmp_path / "v2.npz", old)
    assert meta_of(members((tmp_path / "v2.npz").read_bytes()))["format_version"] == 2
    np.testing.assert_array_equal(
        _predict(tmp_path / "v2.npz", d / "test.csv", capsys, "--target", "label"), want
    )


# ---------------------------------------------------------------------------------------------
# Readers and preprocessing against independent implementations
# ---------------------------------------------------------------------------------------------


def test_standardizer_matches_sklearn():
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 4)) * [1.0, 1e3, 1e-3, 1.0] + [0.0, 5.0, -2.0, 0.0]
    X[:, 3] = 7.25  # a constant column: centred, not scaled
    mean, scale = _cli_common.standardizer(X)
    ref = StandardScaler().fit(X)
    np.testing.assert_allclose(mean, ref.mean_, rtol=1e-14, atol=0)
    np.testing.assert_allclose(scale, ref.scale_, rtol=1e-14, atol=0)
    np.testing.assert_allclose((X - mean) / scale, ref.transform(X), rtol=0, atol=1e-12)


@pytest.mark.parametrize("zero_based", [False, True])
def test_libsvm_reader_matches_sklearn(tmp_path, zero_based):
    from sklearn.datasets import load_svmlight_file

    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 7)) * (rng.random((30, 7)) < 0.4)
    X[:, 0] = 0.0 if not zero_based else X[:, 0]
    X[0, 0] = 1.5 if zero_based else 0.0
    y = np.where(rng.random(30) < 0.3, 1, -1)
    path = tmp_path / "d.svm"
    _write_libsvm(path, X, y, zero_based=zero_based)
    with open(path, "a") as fh:
        fh.write("# a comment line\n\n-1 2:0.5 # trailing comment\n")
    t = _io_data.read_libsvm(path)
    Xs, ys = load_svmlight_file(str(path), zero_based="auto")
    assert t.zero_based is zero_based
    np.testing.assert_array_equal(t.y, ys)
    Xs = Xs.toarray()
    np.testing.assert_array_equal(t.X[:, : Xs.shape[1]], Xs)
    assert not t.X[:, Xs.shape[1] :].any()
    wide = _io_data.read_libsvm(path, n_features=12)
    assert wide.X.shape == (31, 12)


def test_libsvm_fast_parse_equals_checked_parse(tmp_path):
    rng = np.random.default_rng(3)
    lines = []
    for i in range(60):
        cols = rng.permutation(9)[: rng.integers(0, 6)]  # unsorted, sometimes empty
        items = " ".join(f"{c}:{rng.normal():.17g}" for c in cols)
        lines.append(f"{rng.choice(['+1', '-1', '1', '0'])} {items}" + (" # c" if i % 7 else ""))
    path = tmp_path / "d.svm"
    path.write_text("# header comment\n" + "\n".join(lines) + "\n")
    fast, checked = _io_data._libsvm_fast(str(path)), _io_data._libsvm_checked(str(path))
    assert fast is not None
    for a, b in zip(fast, checked, strict=True):
        np.testing.assert_array_equal(a, b)
    # anything irregular leaves the fast parse to the checked one, which names the line
    for bad, message in [
        ("1 3:1 3:2", "repeated"),
        ("1 2:1 qid:3", "qid"),
        ("1 2:1:3", "index:value"),
        ("1 2:", "index:value"),
        ("x 2:1", "label"),
        ("1 -2:1", "negative"),
        ("1 2:nan", "not finite"),
    ]:
        path.write_text("-1 1:0.5\n" + bad + "\n")
        assert _io_data._libsvm_fast(str(path)) is None, bad
        with pytest.raises(ValueError, match=f"line 2.*{message}"):
            _io_data.read_libsvm(path)


def test_csv_reader_matches_loadtxt(tmp_path):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 3))
    path = tmp_path / "d.csv"
    with open(path, "w") as fh:
        fh.write("\ufeff x , y,cls ,z\n")  # BOM, spaces around names
        for row, c in zip(X, rng.integers(0, 2, 40), strict=True):
            a, b, z = map(float, row)
            fh.write(f"{a!r}, {b!r},{c},{z!r}\n")
        fh.write("\n")  # a trailing blank line is ignored
    t = _io_data.read_csv(path, target="cls")
    ref = np.loadtxt(path, delimiter=",", skiprows=1, encoding="utf-8-sig")
    np.testing.assert_array_equal(t.X, ref[:, [0, 1, 3]])
    np.testing.assert_array_equal(t.y.astype(int), ref[:, 2].astype(int))
    assert t.feature_names == ("x", "y", "z") and t.target == "cls"
    assert _io_data.read_csv(path, target=-2).target == "cls"
    picked = _io_data.read_csv(path, columns=["z", "x"], target="nope", optional_target=True)
    np.testing.assert_array_equal(picked.X, ref[:, [3, 0]])
    assert picked.y is None


def test_csv_true_false_columns_read_as_0_1(tmp_path):
    # pandas writes bool columns (get_dummies' one-hot columns since pandas 2) as True/False
    rng = np.random.default_rng(3)
    X, flag = rng.normal(size=(12, 2)), rng.random(12) < 0.5
    words = np.where(flag, "True", "False").astype(object)
    words[[1, 4]] = np.where(flag[[1, 4]], "TRUE", "false")  # any case
    rows = [f"{a},{w},{b},{int(f)}" for (a, b), w, f in zip(X.tolist(), words, flag, strict=True)]
    (tmp_path / "b.csv").write_text("a,flag,b,y\n" + "\n".join(rows) + "\n")
    t = _io_data.read_csv(tmp_path / "b.csv", target="y")
    np.testing.assert_array_equal(t.X, np.column_stack([X[:, 0], flag, X[:, 1]]))
    # a True/False column with another cell, or an empty one, names the line; "True" in a
    # numeric column is still no number
    for cell, what in (("maybe", "holds 'maybe'"), ("", "holds an empty cell")):
        bad = [*rows[:5], rows[5].replace(f",{words[5]},", f",{cell},"), *rows[6:]]
        (tmp_path / "bad.csv").write_text("a,flag,b,y\n" + "\n".join(bad) + "\n")
        with pytest.raises(ValueError, match=f"line 7, column 'flag': a True/False column {what}"):
            _io_data.read_csv(tmp_path / "bad.csv", target="y")
    (tmp_path / "mix.csv").write_text("a,y\n1.5,1\nTrue,0\n")
    with pytest.raises(ValueError, match="line 3, column 'a': cannot read 'True' as a number"):
        _io_data.read_csv(tmp_path / "mix.csv", target="y")


def test_an_empty_label_is_missing_not_a_class(files, capsys, tmp_path):
    labels = np.where(files["y"] == 1, "yes", "no").astype(object)
    labels[6] = ""
    _write_csv(tmp_path / "e.csv", files["X"], labels)
    code, _, err = _run(["fit", tmp_path / "e.csv", "--target", "label", "--positive", "yes",
                         "-o", tmp_path / "e.npz"], capsys)  # fmt: skip
    assert code == 2
    assert "the target column 'label' has 1 empty cell(s) (missing labels; the first in data " \
        "row 7" in err, err  # fmt: skip


def test_detect_format(tmp_path):
    (tmp_path / "a.data").write_text("1 1:0.5 3:2\n")
    (tmp_path / "b.data").write_text("x,y\n1,2\n")
    np.savez(tmp_path / "c.npz", X=np.eye(2))
    (tmp_path / "c.npz").rename(tmp_path / "c.bin")
    assert _io_data.detect_format(tmp_path / "a.data") == "libsvm"
    assert _io_data.detect_format(tmp_path / "b.data") == "csv"
    assert _io_data.detect_format(tmp_path / "c.bin") == "npz"


def test_label_encodings(files, capsys, tmp_path):
    X, y = files["X"], files["y"]
    # "+1", "1.0", "1" are one class; words need --positive unless they say positive/true
    mixed = np.where(y == 1, np.array(["+1", "1.0", "1"])[np.arange(120) % 3], "-1")
    pos, label, classes = _cli_common.rare_class(mixed, None, "y")
    np.testing.assert_array_equal(pos, y == 1)
    assert label == "1" and classes == ("-1", "1")
    words = np.where(y == 1, "fraud", "ok")
    pos, label, _ = _cli_common.rare_class(words, "fraud", "y")
    np.testing.assert_array_equal(pos, y == 1)
    pos, label, _ = _cli_common.rare_class(np.where(y == 1, "Positive", "negative"), None, "y")
    np.testing.assert_array_equal(pos, y == 1)
    with pytest.raises(ValueError, match="--positive LABEL"):
        _cli_common.rare_class(words, None, "y")
    # through the command line: string labels with --positive give the same model as ±1
    _write_csv(tmp_path / "w.csv", X, words)
    code, _, err = _run(
        ["fit", tmp_path / "w.csv", "--target", "label", "--positive", "fraud", "--lam", "2^-6",
         *F64, "-o", tmp_path / "w.npz"], capsys,
    )  # fmt: skip
    assert code == 0, err
    mf = cli.load_model_file(tmp_path / "w.npz")
    assert mf.positive_label == "fraud" and mf.classes == ("fraud", "ok")
    ref = jaxrank.fit(_standardise(X), y, 2.0**-6, dtype=np.float64)
    np.testing.assert_allclose(mf.model.coef, ref.coef, rtol=0, atol=1e-10)


def test_lambda_syntax():
    assert _cli_common.positive_float("2^-8") == 2.0**-8
    assert _cli_common.positive_float("2**3") == 8.0
    assert _cli_common.positive_float("1e-3") == 1e-3
    assert _cli_common.fmt_lam(2.0**-6) == "2^-6" and _cli_common.fmt_lam(0.3) == "0.3"


# ---------------------------------------------------------------------------------------------
# Errors: one line on stderr, a non-zero code, no traceback
# ---------------------------------------------------------------------------------------------


def _error(argv, capsys, *, code=2):
    got, _, err = _run(argv, capsys)
    assert got == code, (argv, got, err)
    assert err.startswith("jaxrank: error: ") and err.endswith("\n"), err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def test_error_paths(files, capsys, tmp_path):
    d = files["dir"]
    X, y = files["X"], files["y"]
    fit = lambda data, *a: ["fit", data, *a, "-o", tmp_path / "m.npz", "--lam", "1", "-q"]
    err = _error(fit(tmp_path / "missing.csv", "--target", "label"), capsys)
    assert "no such file" in err and "missing.csv" in err
    err = _error(fit(d / "train.csv", "--target", "lable"), capsys)
    assert "no column named 'lable'" in err and "'label'" in err
    assert "out of range" in _error(fit(d / "train.csv", "--target", "9"), capsys)
    assert "--target" in _error(fit(d / "train.csv"), capsys)
    # a non-numeric cell: the line and the column are named
    lines = (d / "train.csv").read_text().splitlines()
    cells = lines[5].split(",")
    cells[2] = "n/a"
    lines[5] = ",".join(cells)
    (tmp_path / "bad.csv").write_text("\n".join(lines) + "\n")
    err = _error(fit(tmp_path / "bad.csv", "--target", "label"), capsys)
    assert "line 6, column 'c'" in err and "'n/a'" in err
    cells[2] = ""
    lines[5] = ",".join(cells)
    (tmp_path / "bad.csv").write_text("\n".join(lines) + "\n")
    assert "empty cell" in _error(fit(tmp_path / "bad.csv", "--target", "label"), capsys)
    lines[5] = lines[5] + ",1"
    (tmp_path / "bad.csv").write_text("\n".join(lines) + "\n")
    assert "has 7 fields" in _error(fit(tmp_path / "bad.csv", "--target", "label"), capsys)
    # one class, three classes, labels without a rare class
    _write_csv(tmp_path / "one.csv", X, np.ones(120, dtype=int))
    assert "one class" in _error(fit(tmp_path / "one.csv", "--target", "label"), capsys)
    _write_csv(tmp_path / "three.csv", X, np.arange(120) % 3)
    assert "two-valued" in _error(fit(tmp_path / "three.csv", "--target", "label"), capsys)
    np.savez(tmp_path / "noy.npz", X=X)
    assert "no label array 'y'" in _error(fit(tmp_path / "noy.npz"), capsys)
    np.savez(tmp_path / "nan.npz", X=np.where(np.eye(120, 5) > 0, np.nan, X), y=y)
    assert "X[0, 0] is not a finite" in _error(fit(tmp_path / "nan.npz"), capsys)
    assert "drop --target" in _error(fit(d / "train.svm", "--target", "y"), capsys)
    (tmp_path / "bad.svm").write_text("+1 1:0.5\n-1 2=3\n")
    assert "line 2" in _error(fit(tmp_path / "bad.svm"), capsys)
    # usage errors are one line too
    assert "--output" in _error(["fit", d / "train.npz"], capsys)
    assert "2^-8" in _error(["fit", d / "train.npz", "--lam", "x", "-o", "m.npz"], capsys)
    assert "invalid choice" in _error(["fit", d / "train.npz", "--basis", "x"], capsys)
    err = _error(fit(d / "train.npz", "--cv", "2", "--val-frac", "0.5"), capsys)
    assert "--cv" in err
    assert "folds=40" in _error(fit(d / "train.npz", "--cv", "40"), capsys)
    assert "--n-basis" in _error(fit(d / "train.npz", "--n-basis", "3"), capsys)
    assert "--kappa" in _error(fit(d / "train.npz", "--kappa", "3"), capsys)
    assert "no directory" in _error(
        ["fit", d / "train.npz", "--lam", "1", "-o", tmp_path / "no" / "m.npz", "-q"], capsys
    )


def test_predict_errors(files, one_model, capsys, tmp_path):
    d = files["dir"]
    model = one_model
    assert "no such model file" in _error(["predict", tmp_path / "none.npz", d / "test.csv"],
                                          capsys)  # fmt: skip
    assert "not a model file" in _error(["predict", d / "train.npz", d / "test.csv"], capsys)
    (tmp_path / "short.csv").write_text("a,b,label\n1,2,1\n")
    err = _error(["predict", model, tmp_path / "short.csv"], capsys)
    assert "lacks the feature column(s) 'c', 'd', 'e'" in err
    np.savez(tmp_path / "narrow.npz", X=np.ones((3, 2)))
    assert "2 feature columns" in _error(["predict", model, tmp_path / "narrow.npz"], capsys)


def test_debug_shows_the_exception(files):
    with pytest.raises(FileNotFoundError):
        cli.main(["fit", "nowhere.csv", "--target", "y", "-o", "m.npz", "--debug"])


# ---------------------------------------------------------------------------------------------
# jaxrank bench
# ---------------------------------------------------------------------------------------------


def test_bench_runs_script_with_arguments(tmp_path, capfd):
    (tmp_path / "hello.py").write_text(
        "import sys\nprint('args', sys.argv[1:])\nsys.exit(3 if '--fail' in sys.argv else 0)\n"
    )
    (tmp_path / "_helper.py").write_text("")
    assert cli.main(["bench", "--bench-dir", tmp_path, "hello", "--sizes", "10", "-x"]) == 0
    assert "args ['--sizes', '10', '-x']" in capfd.readouterr().out
    assert cli.main(["bench", "--bench-dir", tmp_path, "hello", "--fail"]) == 3
    capfd.readouterr()
    assert cli.main(["bench", "--bench-dir", tmp_path]) == 0
    assert capfd.readouterr().out.strip().endswith(": hello")  # _helper is not a bench


def test_bench_errors(tmp_path, capsys, monkeypatch):
    err = _error(["bench", "--bench-dir", tmp_path, "nope"], capsys)
    assert "no benchmark 'nope'" in err
    # the repository's bench/ folder is found from the package; the real core bench is listed
    assert cli.main(["bench"]) == 0
    assert "core" in capsys.readouterr().out
    # an installed wheel has no bench/ next to the package, and the cwd has none either
    monkeypatch.setattr(
        cli_commands, "__file__", str(tmp_path / "site" / "jaxrank" / "cli" / "_commands.py")
    )
    monkeypatch.chdir(tmp_path)
    err = _error(["bench", "core"], capsys)
    assert "no bench/ directory found" in err and "source repository" in err


def test_progress_redraws_in_place_on_a_terminal(monkeypatch):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    bar = _cli_common.Progress(2)
    bar.start("fold 1/1: fitting 3 λ")
    bar.finish("fold 1/1 done")
    bar.start("refit")
    bar.finish("refit done")
    lines = term.getvalue().split("\n")
    assert len(lines) == 3 and lines[2] == ""  # one finished line per step
    assert lines[0].startswith("\rjaxrank: [----------") and "fitting 3 λ ..." in lines[0]
    assert "\rjaxrank: [##########----------] 1/2 fold 1/1 done" in lines[0]
    assert lines[1].startswith("\rjaxrank: [##########----------] 1/2 refit ...")
    assert "\rjaxrank: [" + "#" * 20 + "] 2/2 refit done" in lines[1]
    quiet = _cli_common.Progress(2, enabled=False)
    quiet.start("x")
    quiet.finish("x")
    assert term.getvalue().count("\n") == 2


# ---------------------------------------------------------------------------------------------
# First contact (issue 15) and files as untrusted input (issue 17)
# ---------------------------------------------------------------------------------------------


def test_bare_command_prints_help_and_runs_nothing(capsys, monkeypatch):
    monkeypatch.setattr(cli_main, "demo", lambda **kw: pytest.fail("a bare jaxrank ran the demo"))
    assert cli.main([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: jaxrank") and err == ""
    for command in ("demo", "fit", "predict", "bench"):
        assert f"    {command} " in out


@pytest.mark.parametrize("command", [[], ["demo"], ["fit"], ["predict"], ["bench"]])
def test_help_is_plain_text_and_every_option_explained(command, capsys):
    assert cli.main([*command, "--help"]) == 0
    out = capsys.readouterr().out
    assert "``" not in out and ":func:" not in out and ":class:" not in out, out
    # argparse puts an option's help on its line or the next; an option with no help has none
    lines = out.splitlines()
    options = lines[next(i for i, s in enumerate(lines) if s.startswith("options:")) :]
    for i, line in enumerate(options):
        if line.startswith("  -"):
            rest = line.strip().split("  ", 1)
            has_help = len(rest) == 2 or (
                i + 1 < len(options) and options[i + 1].startswith(" " * 8)
            )
            assert has_help, f"{command}: {line.strip()!r} has no help text"


def test_demo_help_names_its_options(capsys):
    assert cli.main(["demo", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "--trials TRIALS independent draws" in out
    assert "--rho RHO rare-class fraction" in out and "--seed SEED base seed" in out


def test_warnings_print_as_one_line_and_the_hook_is_restored(capsys, monkeypatch):
    def noisy_demo(**kwargs):
        print("trial 0")
        warnings.warn("solver stopped\n   with status MAX_ITER", jaxrank.ConvergenceWarning,
                      stacklevel=1)  # fmt: skip
        print("trial 1")

    monkeypatch.setattr(cli_main, "demo", noisy_demo)
    hook = warnings.showwarning
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert cli.main(["demo"]) == 0
    out, err = capsys.readouterr()
    assert out == "trial 0\ntrial 1\n"
    assert err == "jaxrank: warning: ConvergenceWarning: solver stopped with status MAX_ITER\n"
    assert warnings.showwarning is hook


@pytest.mark.parametrize(
    ("lam", "dtype"),
    [(["--lam", "1e300"], "float32"), (["--lam", "1e-300"], "float32"),
     (["--lam-grid", "1", "1e39"], "float32"), (["--lam", "1e20"], "float32"),
     (["--lam", "1e-320"], "float64"), (["--lam", "1e300"], "float64")],
)  # fmt: skip
def test_lambda_beyond_the_dtype_refused_before_reading_data(lam, dtype, capsys, tmp_path):
    argv = ["fit", tmp_path / "no-such-data.npz", *lam, "--dtype", dtype, "-o", tmp_path / "m.npz"]
    err = _error(argv, capsys)
    assert f"outside the range a {dtype} fit can solve" in err and "no such file" not in err, err


def test_lambda_overflow_and_formatting():
    with pytest.raises(Exception, match="beyond the floating-point range"):
        _cli_common.positive_float("2^5000")
    for lam in (0.0, float("inf"), float("nan"), 1e-300, -1.0):
        assert isinstance(_cli_common.fmt_lam(lam), str)  # no 'math domain error', no OverflowError
    assert _cli_common.fmt_lam(2.0**-1000) == "2^-1000"


def test_output_path_checked_before_the_fit(capsys, tmp_path, monkeypatch, files):
    data = tmp_path / "no-such-data.npz"  # the output is checked first: the data is never read
    (tmp_path / "plain").write_text("x")
    cases = {
        tmp_path: "it is a directory",
        tmp_path / "missing" / "m.npz": "no directory",
        tmp_path / "plain" / "m.npz": "is not a directory",
    }
    for out, message in cases.items():
        err = _error(["fit", data, "--lam", "1", "-o", out], capsys)
        assert message in err and str(out) in err and ".jaxrank-" not in err, err
    monkeypatch.setattr(os, "access", lambda p, mode: False)  # a read-only folder (non-root)
    err = _error(["fit", data, "--lam", "1", "-o", tmp_path / "m.npz"], capsys)
    assert "is not writable" in err
    monkeypatch.undo()

    # a failure while writing (after the fit) names the output, not the temporary file
    def denied(src, dst):
        raise PermissionError(13, "Permission denied", src)

    monkeypatch.setattr(os, "replace", denied)
    err = _error(["fit", files["dir"] / "train.npz", "--lam", "2^-6", *F64, "-o",
                  tmp_path / "m.npz"], capsys)  # fmt: skip
    assert f"cannot write {tmp_path / 'm.npz'}: Permission denied" in err, err
    assert ".jaxrank-" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain"]  # no temporary left


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0,
                    reason="root writes into read-only folders")  # fmt: skip
def test_read_only_output_folder(capsys, tmp_path, files):
    (tmp_path / "ro").mkdir()
    os.chmod(tmp_path / "ro", 0o555)
    try:
        argv = ["fit", files["dir"] / "train.npz", "--lam", "1", "-o", tmp_path / "ro" / "m.npz"]
        assert "not writable" in _error(argv, capsys)
    finally:
        os.chmod(tmp_path / "ro", 0o755)


def test_model_file_follows_the_umask(one_model, tmp_path):
    import stat

    mf = cli.load_model_file(one_model)
    for umask in (0o022, 0o027):
        old = os.umask(umask)
        try:
            cli.save_model_file(tmp_path / f"m{umask}.npz", mf)
        finally:
            os.umask(old)
        assert stat.S_IMODE(os.stat(tmp_path / f"m{umask}.npz").st_mode) == 0o666 & ~umask


def _arrays(path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return dict(z)


def _inner(arrays, edit) -> np.ndarray:
    """The embedded jaxrank.io ranker of a version-1 file, its metadata edited, a fresh checksum."""
    from _modelfiles import members, meta_of, rebuild

    parts = members(arrays["model"].tobytes())
    meta = meta_of(parts)
    edit(meta)
    return np.frombuffer(rebuild(parts, meta, rehash=True), np.uint8)


def _sigma2(value):
    def edit(meta):
        meta["fields"]["kernel"]["fields"]["sigma2"]["value"] = value

    return edit


def _meta(**changes):
    """An edit of a version-2 file's metadata: top-level keys set (``None``: removed)."""

    def edit(parts, meta):
        for key, value in changes.items():
            if value is None:
                del meta[key]
            else:
                meta[key] = value

    return edit


def _ranker(value):
    """An edit of a version-2 file: the ranker's σ² (its fields sit beside the extension's)."""

    def edit(parts, meta):
        _sigma2(value)(meta)

    return edit


def _drop_extension_field(name):
    def edit(parts, meta):
        del meta["extension"][name]

    return edit


def _add_extension_field(name, value):
    def edit(parts, meta):
        meta["extension"][name] = {"value": value}

    return edit


READS = "this jaxrank reads versions 1 and 2"


def _tampered_v2():
    from _modelfiles import set_extension as ext

    return {  # case -> (edit, message); each written with a fresh, matching checksum
        "version 0": (_meta(format_version=0), f"version 0; {READS} only"),
        "version -7": (_meta(format_version=-7), f"version -7; {READS} only"),
        "version 3": (_meta(format_version=3), f"version 3; {READS}: upgrade"),
        "version 1 in version 2's layout": (_meta(format_version=1), "says version 1 in the lay"),
        "another format": (_meta(format="other-program"), "format is 'other-program'"),
        "extension record removed": (_meta(extension=None), "malformed extension record"),
        "negative scale": (ext("scale", -np.ones(5)), "scale is not 5 finite numbers > 0"),
        "NaN mean": (ext("mean", np.full(5, np.nan)), "mean is empty or not finite"),
        "mean a string": (ext("mean", "0"), "mean is str '0'"),
        "one class twice": (ext("classes", ["1", "1"]), "classes are not two distinct labels"),
        "classes not JSON": (ext("classes", np.frombuffer(b"\xff[", np.uint8)), "not a JSON list"),
        "classes numbers": (ext("classes", [-1, 1]), "classes is not a JSON list of strings"),
        "rare class unknown": (ext("positive_label", "yes"), "rare class 'yes' is not one"),
        "input format": (ext("input_format", "xml"), "input_format is 'xml'"),
        "model dtype": (ext("model_dtype", "int8"), "model_dtype is 'int8'"),
        "model dtype disagrees": (ext("model_dtype", "float32"), "disagrees with the file"),
        "negative grid": (ext("grid", -np.ones(1)), "grid is empty or not finite and > 0"),
        "feature names": (ext("feature_names", ["a", "b"]), "not 5 distinct names"),
        "zero_based": (ext("zero_based", 7), "zero_based is int 7"),
        "selection": (ext("selection", "magic"), "selection is 'magic'"),
        "selection missing": (_drop_extension_field("selection"), "lacks 'selection'"),
        "unknown field": (_add_extension_field("extra", 1), "holds an unknown record 'extra'"),
        "object labels pickled": (ext("classes", np.array(["-1", "1"], object)), "not a plain"),
        "ranker sigma2 = -1": (_ranker(-1.0), "sigma2 must be finite and > 0, got -1.0"),
        "ranker sigma2 a string": (_ranker("1"), "sigma2 must be finite and > 0, got '1'"),
    }  # fmt: skip


@pytest.mark.parametrize("case", list(_tampered_v2()))
def test_tampered_model_file_is_exit_2_naming_the_file(case, one_model, capsys, tmp_path, files):
    from _modelfiles import edit_cli_file

    edit, message = _tampered_v2()[case]
    bad = tmp_path / "tampered.npz"
    bad.write_bytes(edit_cli_file(one_model.read_bytes(), edit))
    err = _error(["predict", bad, files["dir"] / "test.csv"], capsys)
    assert message in err and str(bad) in err and "np.str_" not in err, err
    with pytest.raises(ValueError, match=r"tampered\.npz"):
        cli.load_model_file(bad)


LEGACY_TAMPERED = {  # version-1 files: field -> (new value, message), a fresh legacy checksum
    "version 0": ("version", np.array(0), f"version 0; {READS} only"),
    "version -7": ("version", np.array(-7), f"version -7; {READS} only"),
    "version 2": ("version", np.array(2), f"version 2; {READS} only, version 1 in this layout"),
    "version 3": ("version", np.array(3), f"version 3; {READS}: upgrade"),
    "another format": ("format", np.array("other-program"), "its format is 'other-program'"),
    "negative scale": ("scale", -np.ones(5), "scale is not 5 finite numbers > 0"),
    "NaN mean": ("mean", np.full(5, np.nan), "mean is empty or not finite"),
    "one class twice": ("classes", np.array(["1", "1"]), "classes are not two distinct labels"),
    "rare class unknown": ("positive_label", np.array("yes"), "rare class 'yes' is not one"),
    "input format": ("input_format", np.array("xml"), "input_format is 'xml'"),
    "model dtype": ("model_dtype", np.array("int8"), "model_dtype is 'int8'"),
    "model dtype disagrees": ("model_dtype", np.array("float32"), "disagrees with the file"),
    "negative grid": ("grid", -np.ones(1), "grid is empty or not finite and > 0"),
    "feature names": ("feature_names", np.array(["a", "b"]), "not 5 distinct names"),
    "zero_based": ("zero_based", np.array(7), "zero_based is 7"),
    "selection": ("selection", np.array("magic"), "selection is 'magic'"),
    "object labels pickled": ("classes", np.array(["-1", "1"], dtype=object), "not a plain"),
    "inner sigma2 = -1": ("model", _sigma2(-1.0), "sigma2 must be finite and > 0, got -1.0"),
    "inner sigma2 a string": ("model", _sigma2("1"), "sigma2 must be finite and > 0, got '1'"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(LEGACY_TAMPERED))
def test_tampered_version_1_file_is_exit_2_naming_the_file(
    case, one_model, capsys, tmp_path, files
):
    from _modelfiles import legacy_cli_file

    name, value, message = LEGACY_TAMPERED[case]
    (tmp_path / "v1.npz").write_bytes(legacy_cli_file(cli.load_model_file(one_model)))
    arrays = _arrays(tmp_path / "v1.npz")
    arrays[name] = _inner(arrays, value) if name == "model" else value
    arrays["checksum"] = np.array(_cli_modelfile.legacy_checksum(arrays))
    bad = tmp_path / "tampered.npz"
    np.savez(bad, **arrays)
    err = _error(["predict", bad, files["dir"] / "test.csv"], capsys)
    assert message in err and str(bad) in err and "np.str_" not in err, err
    with pytest.raises(ValueError, match=r"tampered\.npz"):
        cli.load_model_file(bad)


def test_compressed_or_foreign_model_files(one_model, capsys, tmp_path, files):
    np.savez_compressed(tmp_path / "zipped.npz", **_arrays(one_model))
    err = _error(["predict", tmp_path / "zipped.npz", files["dir"] / "test.csv"], capsys)
    assert "is compressed" in err and "zipped.npz" in err
    (tmp_path / "text.npz").write_text("X,y\n1,2\n")
    err = _error(["predict", tmp_path / "text.npz", files["dir"] / "test.csv"], capsys)
    assert "not a model file written by 'jaxrank fit'" in err
    err = _error(["predict", tmp_path, files["dir"] / "test.csv"], capsys)
    assert "is a directory" in err
    (tmp_path / "half.npz").write_bytes(one_model.read_bytes()[:5000])
    err = _error(["predict", tmp_path / "half.npz", files["dir"] / "test.csv"], capsys)
    assert "truncated or corrupt" in err and "half.npz" in err


def test_labels_shown_plainly_and_object_labels_judged_as_numbers(capsys, tmp_path, files):
    from jaxrank._validation import check_binary_labels

    _write_csv(tmp_path / "one.csv", files["X"], np.full(120, -1))
    err = _error(["fit", tmp_path / "one.csv", "--target", "label", "--lam", "1", "-o",
                  tmp_path / "m.npz"], capsys)  # fmt: skip
    assert "one class only ('-1')" in err and "np.str_" not in err, err
    err = _error(["fit", files["dir"] / "train.csv", "--target", "label", "--positive", "maybe",
                  "--lam", "1", "-o", tmp_path / "m.npz"], capsys)  # fmt: skip
    assert "is not a label of the target column 'label' ('-1', '1')" in err, err
    y = files["y"]
    for labels in (y.astype(object), np.where(y > 0, 1, 0).astype(object)):
        np.testing.assert_array_equal(check_binary_labels(labels), y > 0)
    with pytest.raises(ValueError, match=r"3 distinct values \(-1, 0, 1\)"):
        check_binary_labels(np.array([-1, 0, 1] * 3, dtype=object))


def test_damaged_data_npz_is_exit_2(files, capsys, tmp_path):
    """Data files are untrusted too: every corruption and truncation is one line, exit 2."""
    raw = (files["dir"] / "train.npz").read_bytes()
    rng = np.random.default_rng(0)
    bad = tmp_path / "bad.npz"
    codes = []
    for p in rng.integers(0, len(raw), 40).tolist() + [None] * 8:
        cut = raw[: int(rng.integers(0, len(raw)))]
        bad.write_bytes(cut if p is None else raw[:p] + bytes([raw[p] ^ 0xFF]) + raw[p + 1 :])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
            code = cli.main(["fit", bad, "--lam", "1", "-o", tmp_path / "m.npz", "-q"])
        err = capsys.readouterr().err
        assert code in (0, 2) and "internal error" not in err, err
        assert code == 0 or (err.count("\n") == 1 and "bad.npz" in err), err
        codes.append(code)
    assert codes.count(2) > 30
    # a header claiming 10^11 floats: refused from the header, not a MemoryError
    header = b"{'descr': '<f8', 'fortran_order': False, 'shape': (100000000000, 5), }"
    npy = b"\x93NUMPY\x01\x00" + len(header.ljust(117) + b"\n").to_bytes(2, "little")
    npy += header.ljust(117) + b"\n" + bytes(40)
    import zipfile

    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("X.npy", npy)
    err = _error(["fit", bad, "--lam", "1", "-o", tmp_path / "m.npz"], capsys)
    assert "header says (100000000000, 5)" in err and "the archive holds 40" in err, err


def test_majority_rare_class_warned_once(capsys, tmp_path, files):
    """Labels whose +1 class is the majority: one line naming --positive, not the library's
    warning once per fold."""
    y = np.asarray(files["y"])
    _write_csv(tmp_path / "flip.csv", files["X"], -y)
    argv = ["fit", tmp_path / "flip.csv", "--target", "label", "--cv", "3", "-o",
            tmp_path / "m.npz"]  # fmt: skip
    code, _, err = _run(argv, capsys)
    assert code == 0, err
    assert err.count("majority") == 1 and "--positive LABEL" in err, err  # not once per fold
