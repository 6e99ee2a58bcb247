"""Model files are untrusted input: corrupted bytes in every part of a saved model give either the
identical model or one clear error, never an internal error (issue 17, items 6 and 7).

A model file is a zip archive of ``.npy`` members. Its bytes fall into classes: each member's
local zip header, its ``.npy`` header and its data, each central-directory entry, and the end
record. The default run corrupts a fixed set of positions of every class (first, middle, last
and two seeded random bytes, each with three XOR masks) and truncates at every class boundary;
the slow run corrupts every byte. Each outcome must be:

- Python (:func:`jaxrank.io.load`, :func:`jaxrank.cli.load_model_file`): bit-identical
  decision values, or a ``ValueError``;
- the command line (``jaxrank predict``): exit 0 with the identical scores, or exit 2 with one
  line on stderr naming the file.
"""

import contextlib
import io as stdio
import itertools
import struct
import zipfile
from collections import Counter

import numpy as np
import pytest

from jaxrank import cli, datasets
from jaxrank import io as model_io

MASKS = (0x01, 0x80, 0xFF)


def regions(blob: bytes) -> dict[str, tuple[int, int]]:
    """``{class: (start, stop)}`` byte ranges of a zip archive of ``.npy`` members."""
    out = {}
    with zipfile.ZipFile(stdio.BytesIO(blob)) as zf:
        for info in zf.infolist():
            h = info.header_offset
            n_name, n_extra = struct.unpack("<HH", blob[h + 26 : h + 30])
            start = h + 30 + n_name + n_extra
            head = model_io._npy_header(zf.read(info))[3]
            out[f"{info.filename}: zip local header"] = (h, start)
            out[f"{info.filename}: .npy header"] = (start, start + head)
            if info.file_size > head:
                out[f"{info.filename}: data"] = (start + head, start + info.file_size)
    end = blob.rindex(b"PK\x05\x06")
    size_cd, offset_cd = struct.unpack("<II", blob[end + 12 : end + 20])
    if offset_cd == 0xFFFFFFFF:  # zip64: the real offset is in the zip64 end record
        z64 = blob.rindex(b"PK\x06\x06")
        size_cd, offset_cd = struct.unpack("<QQ", blob[z64 + 40 : z64 + 56])
        out["zip64 end records"] = (z64, end)
    pos = offset_cd
    while pos < offset_cd + size_cd:
        n_name, n_extra, n_comment = struct.unpack("<HHH", blob[pos + 28 : pos + 34])
        size = 46 + n_name + n_extra + n_comment
        name = blob[pos + 46 : pos + 46 + n_name].decode()
        out[f"{name}: central directory entry"] = (pos, pos + size)
        pos += size
    out["end of central directory"] = (end, len(blob))
    covered = sorted(out.values())
    gaps = [(a[1], b[0]) for a, b in itertools.pairwise(covered) if b[0] > a[1]]
    assert not gaps and covered[0][0] == 0 and covered[-1][1] == len(blob), gaps
    return out


def positions(span: tuple[int, int], seed: int, n_random: int = 2) -> list[int]:
    """First, middle, last and ``n_random`` seeded random bytes of a class."""
    a, b = span
    rng = np.random.default_rng(seed)
    return sorted({a, (a + b) // 2, b - 1, *rng.integers(a, b, n_random).tolist()})


def mutants(blob: bytes, *, exhaustive: bool = False, masks=MASKS, n_random: int = 2):
    """``(label, bytes)`` of single-byte corruptions and truncations of ``blob``."""
    spans = regions(blob)
    if exhaustive:
        picks = [(p, "every byte") for p in range(len(blob))]
        masks = (0xFF,)
    else:
        picks = [(p, name) for k, (name, span) in enumerate(spans.items())
                 for p in positions(span, k, n_random)]  # fmt: skip
    for p, name in picks:
        for mask in masks:
            raw = bytearray(blob)
            raw[p] ^= mask
            yield f"{name} byte {p} ^ {mask:#04x}", bytes(raw)
    cuts = {0, 1, 4, len(blob) - 1} | {c for s in spans.values() for c in (s[0], s[0] + 1)}
    if exhaustive:
        cuts = set(range(len(blob)))
    for c in sorted(cuts - {len(blob)}):
        yield f"truncated to {c} bytes", blob[:c]


# --------------------------------------------------------------------------------------------
# jaxrank.io files
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def data():
    X, y = datasets.make_rare_class(40, 0.15, 0.75, seed=0)  # the shapes of test_io
    return (X - X.mean(0)) / X.std(0), y


@pytest.fixture(scope="module")
def cli_model(data, tmp_path_factory):
    """``(folder, bytes)`` of a model file written by ``jaxrank fit`` (the module's one fit)."""
    X, y = data
    tmp = tmp_path_factory.mktemp("fuzz")
    np.savez(tmp / "data.npz", X=X, y=y)
    path = tmp / "model.npz"
    with contextlib.redirect_stdout(stdio.StringIO()):
        code = cli.main(["fit", tmp / "data.npz", "--lam", "2^-4", "--dtype", "float64", "-q",
                         "-o", path])  # fmt: skip
    assert code == 0
    return tmp, path.read_bytes()


@pytest.fixture(scope="module")
def saved(cli_model, data):
    """``(bytes, scores)`` of a jaxrank.io file of the CLI model file's ranker (no second fit)."""
    tmp, _ = cli_model
    model = cli.load_model_file(tmp / "model.npz").model
    buf = stdio.BytesIO()
    model_io.save(model, buf)
    return buf.getvalue(), np.asarray(model.decision_function(data[0]))


@pytest.fixture(scope="module")
def cli_model_v1(cli_model):
    """``(folder, bytes)`` of the same model as a version-1 file (read by the legacy reader)."""
    from _modelfiles import legacy_cli_file

    tmp, _ = cli_model
    return tmp, legacy_cli_file(cli.load_model_file(tmp / "model.npz"))


def outcomes_io(blob: bytes, X, want: np.ndarray, *, exhaustive: bool = False) -> Counter:
    """Load every mutant: count ``identical`` / ``ValueError``; anything else is returned too."""
    counts: Counter = Counter()
    other = []
    for label, raw in mutants(blob, exhaustive=exhaustive):
        try:
            model = model_io.load(stdio.BytesIO(raw))
        except ValueError:
            counts["ValueError"] += 1
            continue
        except Exception as err:  # the failure this test exists to catch
            other.append(f"{label}: {type(err).__name__}: {err}")
            continue
        got = np.asarray(model.decision_function(X))
        if got.dtype == want.dtype and np.array_equal(got, want):
            counts["identical"] += 1
        else:
            other.append(f"{label}: loaded with different scores")
    counts["other"] = len(other)
    return counts, other


def test_every_byte_class_of_a_model_file_is_identical_or_refused(saved, data):
    blob, want = saved
    counts, other = outcomes_io(blob, data[0], want)
    assert not other, other[:10]
    n_regions = len(regions(blob))
    assert n_regions >= 3 * 11 + 1  # 11 members: local header, .npy header, data, directory
    assert counts["ValueError"] > counts["identical"] > 0, counts


@pytest.mark.slow  # every byte of the file (~4 k loads, ~30 s)
def test_every_byte_of_a_model_file_is_identical_or_refused(saved, data):
    blob, want = saved
    counts, other = outcomes_io(blob, data[0], want, exhaustive=True)
    assert not other, other[:10]
    print(f"\n{len(blob)} bytes: {dict(counts)}")


# --------------------------------------------------------------------------------------------
# jaxrank fit model files, through Python and through the command line
# --------------------------------------------------------------------------------------------


def _predict(tmp, raw: bytes, capsys):
    (tmp / "bad.npz").write_bytes(raw)
    code = cli.main(["predict", tmp / "bad.npz", tmp / "data.npz", "-q"])
    out, err = capsys.readouterr()
    return code, out, err


def _cli_outcomes(tmp, blob, X, items, capsys=None) -> tuple[Counter, list[str]]:
    """Each ``(label, bytes)`` through :func:`cli.load_model_file` (or ``jaxrank predict`` when
    ``capsys`` is given): identical scores, or ValueError / exit 2 with one line naming it."""
    (tmp / "good.npz").write_bytes(blob)
    ref = cli.load_model_file(tmp / "good.npz")
    want = np.asarray(ref.model.decision_function((X - ref.mean) / ref.scale))
    if capsys is not None:
        code, want_out, _ = _predict(tmp, blob, capsys)
        assert code == 0 and want_out.count("\n") == X.shape[0]
    counts: Counter = Counter()
    bad = []
    for label, raw in items:
        if capsys is not None:
            code, out, err = _predict(tmp, raw, capsys)
            if code == 0 and out == want_out and err == "":
                counts["identical"] += 1
            elif code == 2 and out == "" and err.count("\n") == 1 and "bad.npz" in err:
                assert err.startswith("jaxrank: error: ") and "internal error" not in err, err
                counts["exit 2"] += 1
            else:
                bad.append(f"{label}: exit {code}, stderr {err!r}")
            continue
        (tmp / "bad.npz").write_bytes(raw)
        try:
            mf = cli.load_model_file(tmp / "bad.npz")
        except ValueError as err:
            assert "bad.npz" in str(err), err
            counts["ValueError"] += 1
            continue
        except Exception as err:  # the failure this test exists to catch
            bad.append(f"{label}: {type(err).__name__}: {err}")
            continue
        got = np.asarray(mf.model.decision_function((X - mf.mean) / mf.scale))
        same = (mf.classes, mf.positive_label) == (ref.classes, ref.positive_label)
        if np.array_equal(got, want) and same:
            counts["identical"] += 1
        else:
            bad.append(f"{label}: loaded with different scores or labels")
    return counts, bad


def test_cli_model_file_every_byte_class(cli_model, data, capsys):
    tmp, blob = cli_model
    # Python: every class at five positions, two masks, and the truncations
    counts, bad = _cli_outcomes(tmp, blob, data[0], mutants(blob, masks=(0x01, 0xFF)))
    assert not bad, bad[:10]
    assert counts["ValueError"] > counts["identical"] > 0, counts
    # the command line: a whole `jaxrank predict` per file (~30 ms), so the middle byte of each
    # class with one mask, and the truncations at each class boundary
    spans = regions(blob)
    items = [(f"{name} byte {p}", blob[:p] + bytes([blob[p] ^ 0xFF]) + blob[p + 1 :])
             for name, (a, b) in spans.items() for p in [(a + b) // 2]]  # fmt: skip
    items += [(f"truncated to {a}", blob[:a]) for a, _ in spans.values()]
    counts, bad = _cli_outcomes(tmp, blob, data[0], items, capsys)
    assert not bad, bad[:10]
    assert counts["exit 2"] > counts["identical"] > 0, counts


def test_cli_model_file_version_1_every_byte_class(cli_model_v1, data):
    """The legacy reader (version 1, its own checksum) keeps the same guarantee."""
    tmp, blob = cli_model_v1
    counts, bad = _cli_outcomes(tmp, blob, data[0], mutants(blob, masks=(0x01, 0xFF)))
    assert not bad, bad[:10]
    assert counts["ValueError"] > counts["identical"] > 0, counts


@pytest.mark.slow  # every byte of a ~9 kB CLI model file through load_model_file (~60 s)
@pytest.mark.parametrize("version", [2, 1])
def test_cli_model_file_every_byte_python(version, cli_model, cli_model_v1, data):
    tmp, blob = cli_model if version == 2 else cli_model_v1
    counts, bad = _cli_outcomes(tmp, blob, data[0], mutants(blob, exhaustive=True))
    assert not bad, bad[:10]
    print(f"\n{len(blob)} bytes: {dict(counts)}")
