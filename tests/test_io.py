"""Model files: bit-exact round trips, refusal of every kind of damage, the type registry."""

import dataclasses
import io as stdio
import json
import pickle
import zipfile
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import datasets, io, kernels

# One data set for test_io, test_determinism and test_extremes: the compiled solver is shared.
M, RHO = 40, 0.15


@pytest.fixture(scope="module")
def data():
    X, y = datasets.make_rare_class(M, RHO, 0.75, seed=0)
    return (X - X.mean(0)) / X.std(0), y


@pytest.fixture(scope="module")
def models(data):
    X, y = data
    m64 = jaxrank.fit_rankrc(X, y, 1e-2, dtype=np.float64)
    m32 = jaxrank.fit_rankrc(X, y, 1e-2, dtype=np.float32)
    grid = jaxrank.fit_rankrc(X, y, [1e-1, 1e-2, 1e-3], dtype=np.float64)
    return {
        "float64 scalar": m64,
        "float32 scalar": m32,
        "float64 grid": grid,
        "float32 linear": dataclasses.replace(m32, kernel=kernels.linear()),
        "float64 polynomial": dataclasses.replace(m64, kernel=kernels.polynomial(3, 0.25, 2.0)),
        "sigma2 as an array": dataclasses.replace(
            m64, kernel=kernels.Gaussian(sigma2=jnp.asarray(2.5, jnp.float64))
        ),
        "numpy fields": dataclasses.replace(
            m64, coef=np.asarray(m64.coef), eps=np.float32(0.25), loss="squared_hinge"
        ),
    }


def _bits(a):
    a = np.asarray(a)
    return a.dtype.str, a.shape, a.tobytes()


def assert_identical(a, b):
    """Same pytree structure, same leaf types, dtypes, shapes and bytes, same static fields."""
    la, ta = jax.tree.flatten(a)
    lb, tb = jax.tree.flatten(b)
    assert ta == tb  # includes the kernel class, its static fields and the loss name
    for x, y in zip(la, lb, strict=True):
        assert type(x) is type(y) or (isinstance(x, jax.Array) and isinstance(y, jax.Array))
        if isinstance(x, float | int | str):
            assert x == y
        else:
            assert _bits(x) == _bits(y)


@pytest.mark.parametrize(
    "name",
    [
        "float64 scalar",
        "float32 scalar",
        "float64 grid",
        "float32 linear",
        "float64 polynomial",
        "sigma2 as an array",
        "numpy fields",
    ],
)
def test_round_trip_bit_exact(models, data, tmp_path, name):
    model = models[name]
    path = tmp_path / "model.npz"
    io.save(model, path)
    loaded = io.load(path)
    assert isinstance(loaded, jaxrank.RankModel)
    assert_identical(model, loaded)
    assert type(loaded.eps) is type(model.eps)
    assert type(loaded.kernel) is type(model.kernel)
    X = data[0]
    assert _bits(loaded.decision_function(X)) == _bits(model.decision_function(X))


def test_grid_model_select_after_load(models, tmp_path):
    grid = models["float64 grid"]
    grid.save(tmp_path / "g.npz")
    loaded = jaxrank.io.load(tmp_path / "g.npz")
    for i in range(3):
        assert_identical(loaded.select(i), grid.select(i))


def test_method_paths_file_objects_and_deterministic_bytes(models, tmp_path):
    model = models["float32 scalar"]
    model.save(tmp_path / "a.npz")
    io.save(model, str(tmp_path / "b"))  # the name is used as given: no ".npz" appended
    buf = stdio.BytesIO()
    io.save(model, buf)
    a = (tmp_path / "a.npz").read_bytes()
    assert (tmp_path / "b").read_bytes() == a == buf.getvalue()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npz", "b"]  # no temporary left
    assert_identical(io.load(stdio.BytesIO(a)), model)
    # an ordinary npz: numpy reads it without pickle
    with np.load(tmp_path / "a.npz", allow_pickle=False) as z:
        np.testing.assert_array_equal(z["coef"], model.coef)
        meta = json.loads(z["__meta__"].tobytes())
    assert meta["format_version"] == io.FORMAT_VERSION and meta["model_type"] == "RankModel"
    assert meta["fields"]["kernel"] == {
        "kernel": "Gaussian",
        "fields": {"sigma2": {"value": model.kernel.sigma2}},
    }
    assert meta["arrays"]["coef"] == {"dtype": "<f4", "shape": [model.n_basis]}


# --------------------------------------------------------------------------------------------
# damaged files
# --------------------------------------------------------------------------------------------


def _members(blob: bytes) -> dict[str, np.ndarray]:
    with zipfile.ZipFile(stdio.BytesIO(blob)) as zf:
        return {
            n[:-4]: np.lib.format.read_array(stdio.BytesIO(zf.read(n)), allow_pickle=True)
            for n in zf.namelist()
        }


def _meta(members) -> dict:
    return json.loads(members["__meta__"].tobytes())


def _rebuild(members, meta=None, *, rehash=False) -> bytes:
    """A zip-valid archive (CRCs right) from edited members; optionally a matching checksum."""
    members = dict(members)
    if meta is not None:
        members["__meta__"] = np.frombuffer(
            json.dumps(meta, sort_keys=True, separators=(",", ":")).encode(), np.uint8
        )
    if rehash:
        meta = _meta(members)
        arrays = {k: v for k, v in members.items() if not k.startswith("__")}
        members["__sha256__"] = np.frombuffer(io.checksum(meta, arrays).encode(), np.uint8)
    buf = stdio.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, a in members.items():
            b = stdio.BytesIO()
            np.lib.format.write_array(b, a, allow_pickle=True)
            zf.writestr(name + ".npy", b.getvalue())
    return buf.getvalue()


@pytest.fixture(scope="module")
def blob(models):
    buf = stdio.BytesIO()
    io.save(models["float64 grid"], buf)
    return buf.getvalue()


def _flip_in_coef(blob: bytes) -> bytes:
    raw = bytearray(blob)
    with zipfile.ZipFile(stdio.BytesIO(blob)) as zf:
        info = zf.getinfo("coef.npy")
        coef = np.lib.format.read_array(stdio.BytesIO(zf.read(info)))
    # local header (30 bytes + name + extra), the .npy header, then the data
    npy_header = info.file_size - coef.nbytes
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + npy_header
    raw[start + 5] ^= 0x10
    return bytes(raw)


class _Trap:
    unpickled = False

    def __reduce__(self):
        return (_Trap._spring, ())

    @staticmethod
    def _spring():
        _Trap.unpickled = True
        return 0


def _with_object_array(blob, *, in_manifest=False):
    members = _members(blob)
    meta = _meta(members)
    members["coef"] = np.array([_Trap()], dtype=object)
    if in_manifest:
        meta["arrays"]["coef"] = {"dtype": "|O", "shape": [1]}
    return _rebuild(members, meta, rehash=False)


def _edit(fn, rehash=False):
    def make(blob):
        members = _members(blob)
        meta = _meta(members)
        fn(members, meta)
        return _rebuild(members, meta, rehash=rehash)

    return make


def _set(d, path, value):
    *head, last = path
    for k in head:
        d = d[k]
    d[last] = value


CORRUPT = {
    "empty file": (lambda b: b"", "not an .npz"),
    "not an npz (text)": (lambda b: b"coef = [1, 2, 3]\n", "not an .npz"),
    "not an npz (.npy)": (
        lambda b: (lambda f: (np.save(f, np.arange(3)), f.getvalue())[1])(stdio.BytesIO()),
        "not an .npz",
    ),
    "truncated to half": (lambda b: b[: len(b) // 2], "truncated or corrupt"),
    "truncated by 10 bytes": (lambda b: b[:-10], "truncated or corrupt"),
    "truncated to the zip magic": (lambda b: b[:4], "truncated or corrupt"),
    "flipped byte in coef": (_flip_in_coef, "CRC-32"),
    "npz of another program": (
        lambda b: (lambda f: (np.savez(f, coef=np.ones(3)), f.getvalue())[1])(stdio.BytesIO()),
        "no '__meta__'",
    ),
    "altered coef, zip consistent": (
        _edit(lambda m, meta: m.__setitem__("coef", m["coef"] + 1e-12)),
        "fails its checksum",
    ),
    "altered sigma2 in metadata": (
        _edit(lambda m, meta: _set(meta, ["fields", "kernel", "fields", "sigma2", "value"], 9.0)),
        "fails its checksum",
    ),
    "altered eps in metadata": (
        _edit(lambda m, meta: _set(meta, ["fields", "eps", "value"], 0.25)),
        "fails its checksum",
    ),
    "checksum record removed": (_edit(lambda m, meta: m.pop("__sha256__")), "no checksum"),
    "unknown version": (
        _edit(lambda m, meta: meta.__setitem__("format_version", 2), rehash=True),
        "unknown format version 2.*upgrade",
    ),
    "version missing": (
        _edit(lambda m, meta: meta.pop("format_version"), rehash=True),
        "unknown format version None",
    ),
    "other format name": (
        _edit(lambda m, meta: meta.__setitem__("format", "other"), rehash=True),
        "format is 'other'",
    ),
    "corrupt metadata json": (
        lambda b: _rebuild(_members(b) | {"__meta__": np.frombuffer(b"{not json", np.uint8)}),
        "corrupt metadata",
    ),
    "missing field coef": (
        _edit(
            lambda m, meta: (m.pop("coef"), meta["fields"].pop("coef"), meta["arrays"].pop("coef")),
            rehash=True,
        ),
        "lacks field 'coef'",
    ),
    "missing array coef": (_edit(lambda m, meta: m.pop("coef")), "missing array 'coef'"),
    "array not in manifest": (
        _edit(lambda m, meta: m.__setitem__("extra", np.zeros(2))),
        "manifest does not list",
    ),
    "dtype differs from manifest": (
        _edit(lambda m, meta: m.__setitem__("coef", m["coef"].astype(np.float32))),
        "manifest says",
    ),
    "unknown model type": (
        _edit(lambda m, meta: meta.__setitem__("model_type", "Mystery"), rehash=True),
        "unknown model type 'Mystery'",
    ),
    "unknown kernel class": (
        _edit(lambda m, meta: _set(meta, ["fields", "kernel", "kernel"], "os.system"), rehash=True),
        "unknown kernel class 'os.system'",
    ),
    "inconsistent shapes": (
        _edit(
            lambda m, meta: (
                m.__setitem__("coef", m["coef"][:, :-1].copy()),
                _set(meta, ["arrays", "coef", "shape"], list(m["coef"].shape)),
            ),
            rehash=True,
        ),
        "inconsistent RankModel",
    ),
    "pickled object array": (_with_object_array, "not a plain number or text array"),
    "pickled object array in the manifest": (
        lambda b: _with_object_array(b, in_manifest=True),
        "manifest entry 'coef'",
    ),
}


@pytest.mark.parametrize("case", list(CORRUPT))
def test_damaged_file_refused(blob, tmp_path, case):
    make, match = CORRUPT[case]
    path = tmp_path / "bad.npz"
    path.write_bytes(make(blob))
    _Trap.unpickled = False
    with pytest.raises(ValueError, match=match):
        io.load(path)
    assert not _Trap.unpickled


def test_untouched_rebuild_loads(blob, models):
    """The editing helpers themselves keep a file valid: the cases above fail for their edit."""
    assert_identical(io.load(stdio.BytesIO(_rebuild(_members(blob)))), models["float64 grid"])
    assert_identical(
        io.load(stdio.BytesIO(_edit(lambda m, meta: None, rehash=True)(blob))),
        models["float64 grid"],
    )


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        io.load(tmp_path / "nowhere.npz")


def test_float64_model_without_x64_refused_not_rounded(models, tmp_path):
    models["float64 scalar"].save(tmp_path / "m64.npz")
    models["float32 scalar"].save(tmp_path / "m32.npz")
    with jax.enable_x64(False):
        with pytest.raises(ValueError, match="jax_enable_x64"):
            io.load(tmp_path / "m64.npz")
        m = io.load(tmp_path / "m32.npz")  # float32 and int32 arrays: fine
        assert m.coef.dtype == jnp.float32


def test_save_refuses_what_it_cannot_store(models, tmp_path):
    with pytest.raises(TypeError, match="registered model types"):
        io.save({"coef": np.ones(3)}, tmp_path / "x.npz")
    bad = dataclasses.replace(models["float32 scalar"], coef=jnp.ones(6, jnp.bfloat16))
    with pytest.raises(ValueError, match="dtype bfloat16"):
        io.save(bad, tmp_path / "x.npz")
    bad = dataclasses.replace(models["float32 scalar"], eps=[0.5])
    with pytest.raises(TypeError, match="field 'eps'"):
        io.save(bad, tmp_path / "x.npz")
    assert not list(tmp_path.iterdir())


def test_checksum_is_canonical():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    meta = {"b": 1, "a": [1.5, None]}
    ref = io.checksum(meta, {"x": a, "y": np.arange(3)})
    assert io.checksum({"a": [1.5, None], "b": 1}, {"y": np.arange(3), "x": a}) == ref
    assert io.checksum(meta, {"x": a.astype(">f4"), "y": np.arange(3)}) == ref  # byte order
    assert io.checksum(meta, {"x": np.asfortranarray(a), "y": np.arange(3)}) == ref
    assert io.checksum(meta, {"x": a.reshape(3, 2), "y": np.arange(3)}) != ref  # shape counts
    assert io.checksum(meta, {"x": a.astype(np.int32), "y": np.arange(3)}) != ref
    assert io.checksum({"b": 1, "a": [1.5]}, {"x": a, "y": np.arange(3)}) != ref


# --------------------------------------------------------------------------------------------
# the registry: another model type round-trips through the same file format
# --------------------------------------------------------------------------------------------


class _ToyModel(NamedTuple):
    weights: jax.Array
    offsets: np.ndarray
    kernel: object
    name: str
    depth: int
    scale: float | None


def test_register_another_model_type(tmp_path):
    io.register_model(
        "ToyModel",
        _ToyModel,
        lambda m: {f"parts.{k}": v for k, v in m._asdict().items()},
        lambda f: _ToyModel(**{k: f[f"parts.{k}"] for k in _ToyModel._fields}),
    )
    toy = _ToyModel(
        weights=jnp.arange(5, dtype=jnp.int32),
        offsets=np.array([[0.1, np.nan], [np.inf, -0.0]]),
        kernel=kernels.polynomial(2, 0.5, 1.0),
        name="toy",
        depth=3,
        scale=None,
    )
    io.save(toy, tmp_path / "toy.npz")
    back = io.load(tmp_path / "toy.npz")
    assert isinstance(back, _ToyModel) and isinstance(back.weights, jax.Array)
    assert isinstance(back.offsets, np.ndarray)
    assert _bits(back.offsets) == _bits(toy.offsets) and _bits(back.weights) == _bits(toy.weights)
    assert (back.kernel, back.name, back.depth, back.scale) == (toy.kernel, "toy", 3, None)
    with pytest.raises(ValueError, match="already registered"):
        io.register_model("ToyModel", dict, lambda m: {}, lambda f: {})
    with pytest.raises(ValueError, match="dataclass"):
        io.register_kernel(_ToyModel)


def test_pickle_never_used(monkeypatch, blob):
    def refuse(*args, **kwargs):
        raise AssertionError("pickle used")

    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    io.load(stdio.BytesIO(blob))
