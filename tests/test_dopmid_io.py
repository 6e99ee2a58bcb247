"""DOPMID model files (issue 31): ``DOPMIDModel.save`` and ``jaxrank.load`` round-trip bit for
bit (linear and kernel, float32 and float64, both scales, with and without a bias); damaged
files (every byte class corrupted, truncations) give the identical model or one clear
``ValueError``; rewritten fields with a matching checksum are refused by name."""

import io as stdio

import jax
import numpy as np
import pytest
from _modelfiles import members, meta_of, rebuild
from test_io_fuzz import mutants

import jaxrank
from jaxrank import datasets, io, kernels
from jaxrank.dopmid import DOPMIDModel, fit_dopmid
from jaxrank.solver import Status


@pytest.fixture(scope="module")
def data():
    X, y = datasets.make_rare_class(60, 0.15, 0.75, seed=0)
    return (X - X.mean(0)) / X.std(0), y


@pytest.fixture(scope="module")
def models(data):
    X, y = data
    return {
        "linear am float64": fit_dopmid(X, y, 1.0),
        "linear qm paper bias float32": fit_dopmid(
            X, y, 0.05, measure="qm", C_scale="paper", bias=1.0, dtype=np.float32
        ),
        "gaussian float32": fit_dopmid(X, y, 1.0, kernel="gaussian", dtype=np.float32),
        "polynomial bias float64": fit_dopmid(
            X, y, 0.3, kernel=kernels.polynomial(2, 0.5, 1.0), bias=0.5
        ),
    }


def _saved(model) -> bytes:
    buf = stdio.BytesIO()
    model.save(buf)
    return buf.getvalue()


def _bits(a):
    a = np.asarray(a)
    return a.dtype.str, a.shape, a.tobytes()


def assert_identical(a, b):
    la, ta = jax.tree.flatten(a)
    lb, tb = jax.tree.flatten(b)
    assert ta == tb  # the static fields (measure, feature map, scale) and the kernel class
    for x, y in zip(la, lb, strict=True):
        assert _bits(x) == _bits(y)


@pytest.mark.parametrize(
    "name",
    ["linear am float64", "linear qm paper bias float32", "gaussian float32",
     "polynomial bias float64"],
)  # fmt: skip
def test_round_trip_bit_exact(models, data, tmp_path, name):
    model = models[name]
    assert int(model.info.status) == Status.CONVERGED
    path = tmp_path / "dopmid.npz"
    model.save(path)
    same = jaxrank.load(path)  # the package's one loader dispatches on the model type
    assert type(same) is DOPMIDModel
    assert_identical(same, model)
    assert (same.measure, same.feature_map, same.C_scale) == (
        model.measure,
        model.feature_map,
        model.C_scale,
    )
    X = data[0]
    assert _bits(same.decision_function(X)) == _bits(model.decision_function(X))
    assert _bits(same.predict(X)) == _bits(model.predict(X))
    assert path.read_bytes() == _saved(model)  # deterministic bytes


@pytest.mark.parametrize("name", ["linear qm paper bias float32", "gaussian float32"])
def test_every_byte_class_identical_or_refused(models, data, name):
    """Each byte class of the file (zip headers, ``.npy`` headers, data, directory, end record)
    corrupted at several positions with three masks, and truncated at every class boundary:
    the identical model, or a ``ValueError`` naming the file object; nothing else."""
    model = models[name]
    X = data[0]
    want = np.asarray(model.decision_function(X))
    counts = {"identical": 0, "ValueError": 0}
    other = []
    for label, raw in mutants(_saved(model)):
        try:
            got = io.load(stdio.BytesIO(raw))
        except ValueError as err:
            assert str(err).startswith("the file object"), err
            counts["ValueError"] += 1
            continue
        except Exception as err:  # the failure this test exists to catch
            other.append(f"{label}: {type(err).__name__}: {err}")
            continue
        scores = np.asarray(got.decision_function(X))
        if scores.dtype == want.dtype and np.array_equal(scores, want):
            counts["identical"] += 1
        else:
            other.append(f"{label}: loaded with different scores")
    assert not other, other[:10]
    assert counts["ValueError"] > counts["identical"] > 0, counts


def _rewrite(blob, edit):
    m = members(blob)
    meta = meta_of(m)
    edit(m, meta)
    return rebuild(m, meta, rehash=True)


def _array(name, fn):
    def edit(m, meta):
        m[name] = np.asarray(fn(m[name]))
        meta["arrays"][name] = {"dtype": m[name].dtype.str, "shape": list(m[name].shape)}

    return edit


def _field(name, value):
    def edit(m, meta):
        meta["fields"][name] = {"value": value}

    return edit


def _nan(a):
    a = a.copy()
    a.reshape(-1)[0] = np.nan
    return a


REWRITTEN = {  # (model, edit, message): each with a fresh, matching checksum
    "coef 1e38": ("linear am float64", _array("coef", lambda a: a * 0 + 1e38), "exceeds info"),
    "coef NaN while CONVERGED": ("linear am float64", _array("coef", _nan), "coef must be"),
    "coef as ints": ("linear am float64", _array("coef", lambda a: a.astype(np.int64)), "float"),
    "coef of two rows": ("linear am float64", _array("coef", lambda a: np.stack([a, a])), "shape"),
    "C float64 in a float32 model": (
        "linear qm paper bias float32",
        _array("C", lambda a: a.astype(np.float64)),
        "C must be a float32 float array",
    ),
    "C = 0": ("linear am float64", _array("C", lambda a: a * 0), r"C must be finite in \(0.0"),
    "C NaN": ("gaussian float32", _array("C", _nan), "C must be finite"),
    "intercept inf": ("linear am float64", _array("intercept", lambda a: a + np.inf), "intercept"),
    "objective < 0": (
        "linear am float64",
        _array("info.objective", lambda a: -a),
        r"info.objective must be finite in \[0.0",
    ),
    "gap NaN": ("gaussian float32", _array("info.gap", _nan), "info.gap must be finite"),
    "status 9": ("linear am float64", _array("info.status", lambda a: a * 0 + 9), "info.status"),
    "status RUNNING": ("gaussian float32", _array("info.status", lambda a: a * 0 - 1), "codes"),
    "negative iterations": (
        "linear am float64",
        _array("info.iterations", lambda a: a * 0 - 1),
        "info.iterations must be integers >= 0",
    ),
    "more planes than iterations": (
        "linear am float64",
        _array("info.n_planes", lambda a: a + 1000),
        "exceeds info.iterations",
    ),
    "unknown measure": ("linear am float64", _field("measure", "f1"), "measure must be"),
    "unknown feature map": ("gaussian float32", _field("feature_map", "mean"), "feature_map"),
    "unknown scale": ("linear am float64", _field("C_scale", "joachims"), "C_scale must be"),
    "basis NaN": ("gaussian float32", _array("basis", _nan), "basis must be finite"),
    "basis of other rows": (
        "gaussian float32",
        _array("basis", lambda a: a[:-1]),
        "basis .* and coef .* disagree",
    ),
    "kernel dropped from a kernel model": (
        "gaussian float32",
        lambda m, meta: meta["fields"].update(kernel={"value": None}),
        "kernel NoneType is not a jaxrank kernel",
    ),
    "sigma2 = -1": (
        "gaussian float32",
        lambda m, meta: meta["fields"]["kernel"]["fields"]["sigma2"].update(value=-1.0),
        "sigma2 must be finite and > 0",
    ),
    "a missing field": (
        "linear am float64",
        lambda m, meta: meta["fields"].pop("intercept"),
        "lacks field 'intercept'",
    ),
}


@pytest.mark.parametrize("case", list(REWRITTEN))
def test_rewritten_fields_refused(models, case):
    name, edit, match = REWRITTEN[case]
    raw = _rewrite(_saved(models[name]), edit)
    with pytest.raises(ValueError, match=match) as err:
        io.load(stdio.BytesIO(raw))
    assert str(err.value).startswith("the file object"), err.value


def test_nonfinite_fit_may_hold_nan(models):
    """A fit that ended NONFINITE keeps its NaN values (as the other model types): it loads."""

    def edit(m, meta):
        for f in ("coef", "info.objective", "info.gap"):
            m[f] = _nan(m[f])
        m["info.status"] = m["info.status"] * 0 + int(Status.NONFINITE)

    model = io.load(stdio.BytesIO(_rewrite(_saved(models["linear am float64"]), edit)))
    assert np.isnan(model.coef[0]) and int(model.info.status) == Status.NONFINITE
