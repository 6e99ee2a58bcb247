"""Model files: bit-exact round trips, refusal of every kind of damage, the type registry."""

import dataclasses
import io as stdio
import json
import pickle
import struct
import zipfile
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from _modelfiles import members as _members
from _modelfiles import meta_of as _meta
from _modelfiles import rebuild as _rebuild

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


# --------------------------------------------------------------------------------------------
# files are untrusted input (issue 17): valid checksums on invalid content, zip bombs, absurd
# headers, and writing
# --------------------------------------------------------------------------------------------


def _fields(meta, *path):
    d = meta["fields"]
    for k in path:
        d = d[k]
    return d


def _set_array(name, fn):
    """An edit setting array ``name`` to ``fn(old)``, manifest updated; checksum made to match."""

    def edit(m, meta):
        m[name] = np.asarray(fn(m[name]))
        meta["arrays"][name] = {"dtype": m[name].dtype.str, "shape": list(m[name].shape)}

    return _edit(edit, rehash=True)


REWRITTEN = {  # each made with a fresh, matching checksum: only field validation can refuse it
    "sigma2 = -1": (
        _edit(
            lambda m, meta: _fields(meta, "kernel", "fields", "sigma2").update(value=-1.0),
            rehash=True,
        ),
        "Gaussian sigma2 must be finite and > 0, got -1.0",
    ),
    "sigma2 = NaN": (
        _edit(
            lambda m, meta: _fields(meta, "kernel", "fields", "sigma2").update(value=np.nan),
            rehash=True,
        ),
        "Gaussian sigma2 must be finite and > 0",
    ),
    "sigma2 a string": (
        _edit(
            lambda m, meta: _fields(meta, "kernel", "fields", "sigma2").update(value="2"),
            rehash=True,
        ),
        "Gaussian sigma2 must be finite and > 0, got '2'",
    ),
    "unknown loss": (
        _edit(lambda m, meta: _fields(meta, "loss").update(value="mystery"), rehash=True),
        "loss is 'mystery', expected one of smoothed_hinge, squared_hinge",
    ),
    "loss hinge (no fitter accepts it)": (
        _edit(lambda m, meta: _fields(meta, "loss").update(value="hinge"), rehash=True),
        "loss is 'hinge'",
    ),
    "eps a string": (
        _edit(lambda m, meta: _fields(meta, "eps").update(value="0.5"), rehash=True),
        "eps must be a finite number > 0, got '0.5'",
    ),
    "eps = -1": (
        _edit(lambda m, meta: _fields(meta, "eps").update(value=-1.0), rehash=True),
        "eps must be a finite number > 0, got -1.0",
    ),
    "eps = True": (
        _edit(lambda m, meta: _fields(meta, "eps").update(value=True), rehash=True),
        "eps must be a finite number > 0, got True",
    ),
    "lam <= 0": (_set_array("lam", lambda a: -a), "lam must be finite floats > 0"),
    "lam NaN": (_set_array("lam", lambda a: a * np.nan), "lam must be finite floats > 0"),
    "status code 7": (
        _set_array("info.status", lambda a: a * 0 + 7),
        r"info.status holds \[7\], valid codes are \[0, 1, 2, 3\]",
    ),
    "status RUNNING": (_set_array("info.status", lambda a: a * 0 - 1), "valid codes"),
    "status as floats": (_set_array("info.status", lambda a: a.astype(np.float64)), "info.status"),
    "negative iterations": (
        _set_array("info.iterations", lambda a: a * 0 - 3),
        "info.iterations must be integers >= 0",
    ),
    "negative basis index": (
        _set_array("basis_index", lambda a: a - 1000),
        "basis_index must be integers >= 0",
    ),
    "basis NaN": (
        _set_array("basis", lambda a: np.where(np.arange(a.size).reshape(a.shape) == 3, np.nan, a)),
        "basis holds NaN",
    ),
    "coef NaN with status CONVERGED": (
        _set_array("coef", lambda a: a * np.nan),
        "coef holds NaN or infinite values while the solver status is finite",
    ),
    "coef float32, basis float64": (
        _set_array("coef", lambda a: a.astype(np.float32)),
        "must be arrays of one float dtype",
    ),
    "polynomial degree 0": (
        _edit(
            lambda m, meta: meta["fields"].__setitem__(
                "kernel",
                {
                    "kernel": "Polynomial",
                    "fields": {
                        "degree": {"value": 0},
                        "gamma": {"value": 1.0},
                        "coef0": {"value": 1.0},
                    },
                },
            ),
            rehash=True,
        ),
        "polynomial degree must be a positive integer, got 0",
    ),
    "format version 0": (
        _edit(lambda m, meta: meta.__setitem__("format_version", 0), rehash=True),
        "unknown format version 0; this jaxrank reads version 1 only",
    ),
    "format version -7": (
        _edit(lambda m, meta: meta.__setitem__("format_version", -7), rehash=True),
        "unknown format version -7; this jaxrank reads version 1 only",
    ),
    "format version 1.0": (
        _edit(lambda m, meta: meta.__setitem__("format_version", 1.0), rehash=True),
        "unknown format version 1.0",
    ),
    "format version True": (
        _edit(lambda m, meta: meta.__setitem__("format_version", True), rehash=True),
        "unknown format version True",
    ),
    "format version 2 (newer)": (
        _edit(lambda m, meta: meta.__setitem__("format_version", 2), rehash=True),
        "unknown format version 2; this jaxrank reads version 1: upgrade jaxrank",
    ),
    "manifest shape negative": (
        _edit(lambda m, meta: meta["arrays"]["lam"].update(shape=[-3]), rehash=True),
        "manifest entry 'lam'",
    ),
}


@pytest.mark.parametrize("case", list(REWRITTEN))
def test_rewritten_with_fresh_checksum_is_validated(blob, case):
    """A checksum guards integrity, not authenticity: every field is validated after it."""
    make, match = REWRITTEN[case]
    with pytest.raises(ValueError, match=match) as err:
        io.load(stdio.BytesIO(make(blob)))
    assert str(err.value).startswith("the file object"), err.value  # names the file


def test_nonfinite_status_may_hold_nan(blob, models):
    """A solve that ended NONFINITE keeps its NaN coefficients: such a model still loads."""
    from jaxrank.solver import Status

    def edit(m, meta):
        m["coef"] = m["coef"].copy()
        m["coef"][1] = np.nan
        m["info.status"] = m["info.status"].copy()
        m["info.status"][1] = int(Status.NONFINITE)

    model = io.load(stdio.BytesIO(_edit(edit, rehash=True)(blob)))
    assert np.isnan(model.coef[1]).all() and np.isfinite(model.coef[0]).all()


def _npy(a) -> bytes:
    b = stdio.BytesIO()
    np.lib.format.write_array(b, np.asarray(a), allow_pickle=False)
    return b.getvalue()


def _npy_header(descr: str, shape: tuple) -> bytes:
    """A 128-byte ``.npy`` 1.0 header claiming ``descr`` and ``shape`` (no data)."""
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".encode()
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", 118) + text.ljust(117) + b"\n"


def _bomb(claimed: int) -> bytes:
    """A real deflate bomb: ``__meta__.npy`` inflating to ``claimed`` bytes from ~1.5 MB.

    Built in milliseconds: after a full flush, deflate output is byte-aligned and the
    dictionary reset, so the stream of a 1 MiB block of zeros can simply be repeated.
    """
    import zlib

    header = _npy_header("|u1", (claimed - 128,))
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(header) + c.flush(zlib.Z_FULL_FLUSH)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = c.compress(bytes(1 << 20)) + c.flush(zlib.Z_FULL_FLUSH)
    n_blocks, tail = divmod(claimed - 128, 1 << 20)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    last = c.compress(bytes(tail)) + c.flush(zlib.Z_FINISH)
    stream = first + block * n_blocks + last
    info = zipfile.ZipInfo("__meta__.npy", date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.file_size, info.compress_size, info.CRC = claimed, len(stream), 0
    buf = stdio.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        # a member written by hand: local header, the stream, and its directory entry
        zf.fp.write(info.FileHeader(zip64=False))
        info.header_offset = 0
        zf.fp.write(stream)
        zf.filelist.append(info)
        zf.NameToInfo[info.filename] = info
        zf.start_dir = zf.fp.tell()
    return buf.getvalue()


def test_zip_bomb_refused_from_the_directory_before_inflating():
    import time
    import tracemalloc

    blob = _bomb(1_500_000_000)
    assert len(blob) < 2_000_000  # 1.5 GB claimed by a ~1.5 MB file
    with zipfile.ZipFile(stdio.BytesIO(blob)) as zf:  # a genuine stream: it starts to inflate
        with zf.open("__meta__.npy") as f:
            assert f.read(6) == b"\x93NUMPY" and len(f.read(1 << 20)) == 1 << 20
    tracemalloc.start()
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"is compressed .* declared to inflate to 1500000000"):
        io.load(stdio.BytesIO(blob))
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert seconds < 1.0 and peak < 16 * len(blob), (seconds, peak)


def test_compressed_model_file_refused(blob):
    """jaxrank stores members uncompressed; a recompressed file is refused, not inflated."""
    buf = stdio.BytesIO()
    with (
        zipfile.ZipFile(stdio.BytesIO(blob)) as src,
        zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as dst,
    ):
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
    with pytest.raises(ValueError, match=r"member 'basis.npy' is compressed \(zip method 8"):
        io.load(stdio.BytesIO(buf.getvalue()))


def _replace_member(blob, name, data: bytes) -> bytes:
    """``blob`` with member ``name`` replaced by ``data``, zip-consistent (CRC recomputed)."""
    buf = stdio.BytesIO()
    with zipfile.ZipFile(stdio.BytesIO(blob)) as src, zipfile.ZipFile(buf, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, data if info.filename == name else src.read(info))
    return buf.getvalue()


def test_absurd_npy_header_shape_refused_before_allocating(blob):
    import tracemalloc

    huge = _npy_header("<f8", (100_000_000_000,)) + bytes(24)
    tracemalloc.start()
    # the manifest says coef is (3, 6): the header's claim is refused from the header
    with pytest.raises(ValueError, match=r"array 'coef' has dtype <f8 and shape \[100000000000\]"):
        io.load(stdio.BytesIO(_replace_member(blob, "coef.npy", huge)))
    # the same claim in the metadata record: its header and its stored size disagree
    with pytest.raises(ValueError, match="has 24 data bytes, its header"):
        io.load(stdio.BytesIO(_replace_member(blob, "__meta__.npy", huge.replace(b"<f8", b"|u1"))))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 10_000_000, peak


def test_manifest_claiming_huge_arrays_refused_from_the_directory(blob):
    """A manifest (with a fresh checksum) claiming 10^11 floats: the member's stored size in the
    zip directory is far below, so nothing is read."""

    def edit(m, meta):
        meta["arrays"]["coef"]["shape"] = [100_000_000_000]

    with pytest.raises(ValueError, match=r"shape \[3, 6\], its manifest says"):
        io.load(stdio.BytesIO(_edit(edit, rehash=True)(blob)))


def test_metadata_record_size_is_bounded(blob):
    big = _npy(np.frombuffer(b" " * (io.META_MAX_BYTES + 1), np.uint8))
    with pytest.raises(ValueError, match=r"member '__meta__.npy' holds .* bytes, at most 1048576"):
        io.load(stdio.BytesIO(_replace_member(blob, "__meta__.npy", big)))


def test_zip_structure_damage_is_a_value_error(blob):
    raw = bytearray(blob)
    # an encrypted flag in the central directory entry of the first member
    cd = blob.rindex(b"PK\x01\x02", 0, blob.rindex(b"PK\x05\x06"))
    first = blob.index(b"PK\x01\x02")
    for at in (first, cd):
        enc = bytearray(raw)
        enc[at + 8] |= 0x1
        with pytest.raises(ValueError, match="encrypted"):
            io.load(stdio.BytesIO(bytes(enc)))
    # a member listed twice
    buf = stdio.BytesIO()
    with zipfile.ZipFile(stdio.BytesIO(blob)) as src, zipfile.ZipFile(buf, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info))
        with pytest.warns(UserWarning, match="Duplicate name"):
            dst.writestr("coef.npy", src.read("coef.npy"))
    with pytest.raises(ValueError, match=r"'coef.npy' appears twice"):
        io.load(stdio.BytesIO(buf.getvalue()))
    # a member whose directory size runs past the end of the file
    with pytest.raises(ValueError, match="truncated or corrupt"):
        io.load(stdio.BytesIO(blob[: len(blob) // 3] + blob[-22:]))


# --- writing -------------------------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_saved_file_follows_the_umask(models, tmp_path, umask):
    import os
    import stat

    old = os.umask(umask)
    try:
        models["float32 scalar"].save(tmp_path / "m.npz")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "m.npz").st_mode) == 0o666 & ~umask


def test_write_errors_name_the_path_never_the_temporary(models, tmp_path, monkeypatch):
    import os

    model = models["float32 scalar"]
    with pytest.raises(IsADirectoryError, match="it is a directory") as err:
        io.save(model, tmp_path)
    with pytest.raises(FileNotFoundError, match="no directory") as err2:
        io.save(model, tmp_path / "missing" / "m.npz")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="is not a directory") as err3:
        io.save(model, tmp_path / "file" / "m.npz")
    monkeypatch.setattr(os, "access", lambda p, mode: False)  # a read-only folder (as non-root)
    with pytest.raises(PermissionError, match="is not writable") as err4:
        io.save(model, tmp_path / "m.npz")
    monkeypatch.undo()

    def full_disk(src, dst):
        raise OSError(28, "No space left on device", src)

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(OSError, match="No space left on device") as err5:
        io.save(model, tmp_path / "m.npz")
    monkeypatch.undo()
    for e in (err, err2, err3, err4, err5):
        assert ".jaxrank-" not in str(e.value) and "cannot write" in str(e.value), e.value
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # no temporary left behind


@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() == 0,
                    reason="root writes into read-only folders")  # fmt: skip
def test_read_only_folder_refused(models, tmp_path):
    import os

    folder = tmp_path / "ro"
    folder.mkdir()
    os.chmod(folder, 0o555)
    try:
        with pytest.raises(PermissionError, match="not writable"):
            models["float32 scalar"].save(folder / "m.npz")
    finally:
        os.chmod(folder, 0o755)


# --------------------------------------------------------------------------------------------
# the other registered model types (L1Model, MIBCModel): every field validated on load
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def other_models(data):
    from jaxrank.l1 import fit_l1
    from jaxrank.mibc import fit_mibc

    X, y = data
    return {
        "L1 grid": fit_l1(X, y, l1=[1e-2, 1e-1], dtype=np.float64),
        "L1 float32 elastic": fit_l1(X, y, l1=1e-2, lam=1e-3, dtype=np.float32),
        "MIBC full grid": fit_mibc(X, y, nu=[0.1, 0.5]),
        "MIBC factor": fit_mibc(
            X, y, nu=0.5, covariance="factor", n_factors=2, key=jax.random.key(0)
        ),
        "MIBC gaussian float32": fit_mibc(
            X, y, nu=0.5, covariance="diag", kernel=kernels.gaussian(), dtype=np.float32
        ),
    }


def _saved(model) -> bytes:
    buf = stdio.BytesIO()
    io.save(model, buf)
    return buf.getvalue()


@pytest.mark.parametrize(
    "name",
    ["L1 grid", "L1 float32 elastic", "MIBC full grid", "MIBC factor", "MIBC gaussian float32"],
)
def test_other_model_types_round_trip(other_models, data, name):
    """A genuine saved model of each type passes the field checks and scores identically."""
    model = other_models[name]
    same = io.load(stdio.BytesIO(_saved(model)))
    assert type(same) is type(model)
    assert_identical(same, model)
    X = data[0].astype(np.asarray(model.basis).dtype)
    assert _bits(same.decision_function(X)) == _bits(model.decision_function(X))


def _set_field(name, value):
    return _edit(lambda m, meta: _fields(meta, name).update(value=value), rehash=True)


def _nan_at_1(a):
    a = a.copy()
    a.reshape(-1)[min(1, a.size - 1)] = np.nan
    return a


OTHER_REWRITTEN = {  # (model, edit, message); every edit carries a fresh, matching checksum
    "L1 l1 = 0": ("L1 grid", _set_array("l1", lambda a: a * 0), "l1 must be finite floats > 0"),
    "L1 l1 NaN": ("L1 grid", _set_array("l1", _nan_at_1), "l1 must be finite floats > 0"),
    "L1 lam < 0": ("L1 grid", _set_array("lam", lambda a: a - 1), r"lam must be finite in \[0"),
    "L1 lam inf": ("L1 float32 elastic", _set_array("lam", lambda a: a * np.inf), "lam must"),
    "L1 lam float64 in a float32 model": (
        "L1 float32 elastic",
        _set_array("lam", lambda a: a.astype(np.float64)),
        "lam must be a float32 float array",
    ),
    "L1 unknown loss": ("L1 grid", _set_field("loss", "mystery"), "loss is 'mystery'"),
    "L1 eps = 0": ("L1 grid", _set_field("eps", 0.0), "eps must be a finite number > 0"),
    "L1 eps NaN": ("L1 grid", _set_field("eps", np.nan), "eps must be a finite number > 0"),
    "L1 status 9": ("L1 grid", _set_array("info.status", lambda a: a * 0 + 9), "info.status"),
    "L1 status RUNNING": ("L1 grid", _set_array("info.status", lambda a: a * 0 - 1), "codes"),
    "L1 negative iterations": (
        "L1 grid",
        _set_array("info.iterations", lambda a: a * 0 - 1),
        "info.iterations must be integers >= 0",
    ),
    "L1 negative evaluations": (
        "L1 grid",
        _set_array("info.evaluations", lambda a: a * 0 - 1),
        "info.evaluations must be integers >= 0",
    ),
    "L1 evaluations as floats": (
        "L1 grid",
        _set_array("info.evaluations", lambda a: a.astype(np.float64)),
        "info.evaluations must be integers >= 0",
    ),
    "L1 n_nonzero negative": (
        "L1 grid",
        _set_array("info.n_nonzero", lambda a: a * 0 - 2),
        "info.n_nonzero must be integers >= 0",
    ),
    "L1 n_nonzero above the basis": (
        "L1 grid",
        _set_array("info.n_nonzero", lambda a: a * 0 + 10**6),
        "info.n_nonzero 1000000 exceeds",
    ),
    "L1 objective as ints": (
        "L1 grid",
        _set_array("info.objective", lambda a: a.astype(np.int64)),
        "info.objective must be floats",
    ),
    "L1 coef NaN while CONVERGED": ("L1 grid", _set_array("coef", _nan_at_1), "coef holds NaN"),
    "L1 basis_index negative": (
        "L1 grid",
        _set_array("basis_index", lambda a: a - 1000),
        "basis_index must be integers >= 0",
    ),
    "L1 sigma2 = -1": (
        "L1 grid",
        _edit(
            lambda m, meta: _fields(meta, "kernel", "fields", "sigma2").update(value=-1.0),
            rehash=True,
        ),
        "sigma2 must be finite and > 0",
    ),
    "MIBC nu = 0": ("MIBC full grid", _set_array("nu", lambda a: a * 0), r"nu must be finite in"),
    "MIBC nu > 1": ("MIBC full grid", _set_array("nu", lambda a: a + 1), r"nu must be finite in"),
    "MIBC nu NaN": ("MIBC full grid", _set_array("nu", _nan_at_1), r"nu must be finite in"),
    "MIBC C <= 0": ("MIBC full grid", _set_array("C", lambda a: -a), "C must be finite in"),
    "MIBC rho < 0": (
        "MIBC full grid",
        _set_array("moments.rho", lambda a: a * 0 - 1),
        r"moments.rho must be finite in \[0.0",
    ),
    "MIBC rho as ints": (
        "MIBC full grid",
        _set_array("moments.rho", lambda a: a.astype(np.int64)),
        "moments.rho must be a float64 float array",
    ),
    "MIBC mean NaN": ("MIBC full grid", _set_array("moments.mean", _nan_at_1), "moments.mean"),
    "MIBC chol inf": (
        "MIBC full grid",
        _set_array("moments.chol", lambda a: a + np.inf),
        "moments.chol must be finite",
    ),
    "MIBC diag <= 0": (
        "MIBC gaussian float32",
        _set_array("moments.diag", lambda a: -a),
        r"moments.diag must be finite in \(0.0",
    ),
    "MIBC shrink > 1": (
        "MIBC factor",
        _set_array("moments.shrink", lambda a: a + 2),
        r"moments.shrink must be finite in \[0.0, 1.0\]",
    ),
    "MIBC factors NaN": (
        "MIBC factor",
        _set_array("moments.factors", _nan_at_1),
        "moments.factors must be finite",
    ),
    "MIBC unknown covariance": (
        "MIBC full grid",
        _set_field("moments.covariance", "sparse"),
        "unknown covariance model 'sparse'",
    ),
    "MIBC dual_coef < 0": (
        "MIBC full grid",
        _set_array("dual_coef", lambda a: a - 1),
        r"dual_coef must be finite in \[0.0",
    ),
    "MIBC dual_coef > C": (
        "MIBC full grid",
        _set_array("dual_coef", lambda a: a + 10),
        "dual_coef exceeds C",
    ),
    "MIBC coef NaN while CONVERGED": (
        "MIBC full grid",
        _set_array("coef", _nan_at_1),
        "coef must be finite",
    ),
    "MIBC bound > 1": (
        "MIBC full grid",
        _set_array("neg_error_bound", lambda a: a + 2),
        r"neg_error_bound must be finite in \[0.0, 1.0\]",
    ),
    "MIBC gaussian bound < 0": (
        "MIBC full grid",
        _set_array("neg_error_bound_gaussian", lambda a: a - 2),
        "neg_error_bound_gaussian must be finite in",
    ),
    "MIBC margin_norm2 < 0": (
        "MIBC full grid",
        _set_array("margin_norm2", lambda a: a * 0 - 1),
        "margin_norm2 must be finite in",
    ),
    "MIBC status 7": (
        "MIBC full grid",
        _set_array("info.status", lambda a: a * 0 + 7),
        r"info.status holds \[7\]",
    ),
    "MIBC negative iterations": (
        "MIBC full grid",
        _set_array("info.iterations", lambda a: a * 0 - 1),
        "info.iterations must be integers >= 0",
    ),
    "MIBC gap as ints": (
        "MIBC full grid",
        _set_array("info.gap", lambda a: a.astype(np.int64)),
        "info.gap must be a float64 float array",
    ),
    "MIBC C float32 in a float64 model": (
        "MIBC full grid",
        _set_array("C", lambda a: a.astype(np.float32)),
        "C must be a float64 float array",
    ),
    "MIBC sigma2 NaN": (
        "MIBC gaussian float32",
        _edit(
            lambda m, meta: _fields(meta, "kernel", "fields", "sigma2").update(value=np.nan),
            rehash=True,
        ),
        "sigma2 must be finite and > 0",
    ),
}


@pytest.fixture(scope="module")
def other_blobs(other_models):
    return {name: _saved(m) for name, m in other_models.items()}


@pytest.mark.parametrize("case", list(OTHER_REWRITTEN))
def test_other_model_types_rewritten_fields_refused(other_blobs, case):
    """Each field of an L1Model / MIBCModel rewritten (checksum matching) is refused by name."""
    model, make, match = OTHER_REWRITTEN[case]
    with pytest.raises(ValueError, match=match) as err:
        io.load(stdio.BytesIO(make(other_blobs[model])))
    assert str(err.value).startswith("the file object"), err.value  # names the file


def test_other_model_types_nonfinite_row_may_hold_nan(other_blobs):
    """A solve that ended NONFINITE keeps its NaN row (L1 and MIBC): such a model loads."""
    from jaxrank.solver import Status

    def edit(m, meta):
        for f in ("coef", "dual_coef", "margin_norm2", "info.objective"):
            if f in m:
                m[f] = m[f].copy()
                m[f][1] = np.nan
        m["info.status"] = m["info.status"].copy()
        m["info.status"][1] = int(Status.NONFINITE)

    for name in ("L1 grid", "MIBC full grid"):
        model = io.load(stdio.BytesIO(_edit(edit, rehash=True)(other_blobs[name])))
        assert np.isnan(model.coef[1]).all() and np.isfinite(model.coef[0]).all()
