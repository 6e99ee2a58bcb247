"""Editing saved jaxrank.io model files in tests: split into members, rebuild a zip-valid file."""

import io as stdio
import json
import zipfile

import numpy as np

from jaxrank import io


def members(blob: bytes) -> dict[str, np.ndarray]:
    """``{name: array}`` of a model file's ``.npy`` members (pickled ones too: tests build them)."""
    with zipfile.ZipFile(stdio.BytesIO(blob)) as zf:
        return {
            n[:-4]: np.lib.format.read_array(stdio.BytesIO(zf.read(n)), allow_pickle=True)
            for n in zf.namelist()
        }


def meta_of(members) -> dict:
    return json.loads(members["__meta__"].tobytes())


def rebuild(members, meta=None, *, rehash=False) -> bytes:
    """A zip-valid archive (CRCs right) from edited members; optionally a matching checksum."""
    members = dict(members)
    if meta is not None:
        members["__meta__"] = np.frombuffer(
            json.dumps(meta, sort_keys=True, separators=(",", ":")).encode(), np.uint8
        )
    if rehash:
        meta = meta_of(members)
        arrays = {k: v for k, v in members.items() if not k.startswith("__")}
        members["__sha256__"] = np.frombuffer(io.checksum(meta, arrays).encode(), np.uint8)
    buf = stdio.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, a in members.items():
            b = stdio.BytesIO()
            np.lib.format.write_array(b, a, allow_pickle=True)
            zf.writestr(name + ".npy", b.getvalue())
    return buf.getvalue()


# --------------------------------------------------------------------------------------------
# `jaxrank fit` model files: version 1 (the legacy layout, no longer written) and version 2
# --------------------------------------------------------------------------------------------


def legacy_cli_file(mf) -> bytes:
    """A version-1 ``jaxrank fit`` model file of ``mf`` (a ``ModelFile``): the writer jaxrank
    used before version 2, kept here verbatim to test the legacy reader (no jaxrank writes it)."""
    from jaxrank.cli import _modelfile

    buf = stdio.BytesIO()
    io.save(mf.model, buf)
    names = mf.feature_names
    arrays = {
        "format": np.array("jaxrank-cli-model"),
        "version": np.array(1),
        "model": np.frombuffer(buf.getvalue(), dtype=np.uint8),
        "model_dtype": np.array(np.asarray(mf.model.coef).dtype.name),
        "mean": np.asarray(mf.mean, np.float64),
        "scale": np.asarray(mf.scale, np.float64),
        "has_feature_names": np.array(names is not None),
        "feature_names": np.array(list(names) if names is not None else [], dtype=str),
        "target": np.array("" if mf.target is None else mf.target),
        "has_target": np.array(mf.target is not None),
        "positive_label": np.array(mf.positive_label),
        "classes": np.array(list(mf.classes), dtype=str),
        "input_format": np.array(mf.input_format),
        "zero_based": np.array(-1 if mf.zero_based is None else int(mf.zero_based)),
        "selection": np.array(mf.selection),
        "grid": np.asarray(mf.grid, np.float64),
        "score": np.asarray(mf.score, np.float64),
        "score_se": np.asarray(mf.score_se, np.float64),
    }
    arrays["checksum"] = np.array(_modelfile.legacy_checksum(arrays))
    out = stdio.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def edit_cli_file(blob: bytes, edit) -> bytes:
    """A version-2 ``jaxrank fit`` model file with ``edit(members, meta)`` applied and a fresh,
    matching checksum (the one of jaxrank.io)."""
    parts = members(blob)
    meta = meta_of(parts)
    edit(parts, meta)
    return rebuild(parts, meta, rehash=True)


def set_extension(name, value):
    """An ``edit`` for :func:`edit_cli_file`: the extension field ``name`` set to ``value`` (an
    array becomes the member, a list its JSON bytes, anything else a JSON value)."""

    def edit(parts, meta):
        v = value
        if isinstance(value, list):
            v = np.frombuffer(json.dumps(value).encode(), np.uint8)
        node = meta["extension"][name]
        if isinstance(v, np.ndarray) and "numpy" in node:
            parts[node["numpy"]] = v
            if v.dtype.kind != "O":
                meta["arrays"][node["numpy"]] = {"dtype": v.dtype.str, "shape": list(v.shape)}
        else:
            meta["extension"][name] = {"value": v}

    return edit
