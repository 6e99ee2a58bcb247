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
