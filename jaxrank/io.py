"""Saving and loading fitted models: checksummed ``.npz`` files, never pickle.

A model file is an ordinary ``.npz`` (zip) archive of ``.npy`` arrays, readable by
``numpy.load(path, allow_pickle=False)``, holding:

- one array per numeric field of the model (for a :class:`~jaxrank.RankModel`: ``basis``,
  ``coef``, ``lam``, ``basis_index``, ``info.objective``, ``info.grad_norm``,
  ``info.iterations``, ``info.cg_iterations``, ``info.status``), in their own dtypes, bit for
  bit;
- ``__meta__``: UTF-8 JSON (canonical: sorted keys, no spaces) with the format name and
  version, the model type, every non-array field (loss name, ε, the kernel's class and
  parameters, e.g. the Gaussian σ²), and a manifest of the arrays (dtype and shape of each);
- ``__sha256__``: the SHA-256 (hex) of a canonical byte serialisation of the metadata and of
  every array (name, dtype, shape, little-endian bytes; see :func:`checksum`).

:func:`load` refuses, with a ``ValueError`` naming the problem, a file that is not a zip
archive, a truncated archive, a member failing its zip CRC-32, missing or unexpected arrays,
an array whose dtype or shape differs from the manifest, a checksum mismatch (an altered array
or metadata with a consistent zip), an unknown format version, model type or kernel class, and
a field a model type needs but the file lacks. Nothing in the file is ever unpickled or
imported by name: model types and kernels are looked up in registries.

Other model types join through :func:`register_model` with two functions: ``to_arrays(model)``
gives a flat ``{name: value}`` dict of the model's fields and ``from_arrays(fields)`` rebuilds
the model from the same dict. A value is an array (numpy or JAX; restored as the same kind,
same dtype), a JSON scalar (``None``, ``bool``, ``int``, ``float``, ``str``; restored exactly:
Python floats round-trip through their shortest ``repr``), or a kernel registered with
:func:`register_kernel` (the three jaxrank kernels are).

Example:
  >>> import os, tempfile, numpy as np, jaxrank
  >>> from jaxrank import io
  >>> X, y = jaxrank.datasets.make_rare_class(100, 0.2, 0.75, seed=0)
  >>> model = jaxrank.fit_rankrc(X, y, 1e-2)
  >>> path = os.path.join(tempfile.mkdtemp(), "model.npz")
  >>> io.save(model, path)
  >>> same = io.load(path)
  >>> bool(np.array_equal(same.decision_function(X), model.decision_function(X)))
  True
"""

from __future__ import annotations

import dataclasses
import hashlib
import io as _stdio
import json
import os
import re
import tempfile
import zipfile
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import kernels as _kernels
from jaxrank.fit import RankModel
from jaxrank.solver import SolverInfo

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "checksum",
    "load",
    "register_kernel",
    "register_model",
    "save",
]

#: The ``format`` field of every file's metadata.
FORMAT_NAME = "jaxrank-model"
#: The version this module writes and the only one it reads.
FORMAT_VERSION = 1

_META = "__meta__"
_SHA = "__sha256__"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
# Plain numeric dtypes only: anything else (object, structured, ml_dtypes' bfloat16 stored as
# raw void bytes) would not come back as the same dtype from numpy.load(allow_pickle=False).
_DTYPES = frozenset("b1 i1 i2 i4 i8 u1 u2 u4 u8 f2 f4 f8".split())
# A fixed zip timestamp: the same model always gives the same file bytes.
_DATE = (1980, 1, 1, 0, 0, 0)


class _Codec(NamedTuple):
    cls: type
    to_arrays: Callable[[Any], dict[str, Any]]
    from_arrays: Callable[[dict[str, Any]], Any]


_MODELS: dict[str, _Codec] = {}
_KERNELS: dict[str, type] = {}


def register_model(
    name: str,
    cls: type,
    to_arrays: Callable[[Any], dict[str, Any]],
    from_arrays: Callable[[dict[str, Any]], Any],
) -> None:
    """Let :func:`save` and :func:`load` handle models of type ``cls`` under ``name``.

    Args:
      name: the model type written to (and looked up from) the file, e.g. ``"RankModel"``.
        Renaming it makes old files unreadable: choose it once.
      cls: the model class; :func:`save` dispatches on ``type(model) is cls``.
      to_arrays: ``model -> {field: value}``, flat, field names ``[A-Za-z_][A-Za-z0-9_.]*``;
        values as described in the module notes.
      from_arrays: ``{field: value} -> model``, the inverse. A field the file lacks raises
        ``KeyError``, which :func:`load` reports as a missing field.

    Raises:
      ValueError: ``name`` is already registered for another class.
    """
    old = _MODELS.get(name)
    if old is not None and old.cls is not cls:
        raise ValueError(f"model type {name!r} is already registered for {old.cls.__name__}.")
    _MODELS[name] = _Codec(cls, to_arrays, from_arrays)


def register_kernel(cls: type, name: str | None = None) -> type:
    """Let kernels of the dataclass ``cls`` be saved (its fields) and loaded (``cls(**fields)``).

    Usable as a class decorator. ``name`` defaults to ``cls.__name__``.
    """
    if not dataclasses.is_dataclass(cls):
        raise ValueError(f"a savable kernel must be a dataclass, got {cls!r}.")
    name = cls.__name__ if name is None else name
    old = _KERNELS.get(name)
    if old is not None and old is not cls:
        raise ValueError(f"kernel {name!r} is already registered for {old!r}.")
    _KERNELS[name] = cls
    return cls


# --------------------------------------------------------------------------------------------
# values <-> (JSON node, arrays)
# --------------------------------------------------------------------------------------------


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name) or name.startswith("__"):
        raise ValueError(f"invalid field name {name!r}: use [A-Za-z_][A-Za-z0-9_.]*, no '__'.")


def _little_endian(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, order="C")  # not ascontiguousarray: it turns 0-d into 1-d
    return a.astype(a.dtype.newbyteorder("<")) if a.dtype.byteorder == ">" else a


def _encode(value, name: str, arrays: dict[str, np.ndarray]):
    """JSON node for ``value``; arrays are added to ``arrays`` under ``name``."""
    if value is None or isinstance(value, bool | int | float | str):
        if isinstance(value, float | int) and not isinstance(value, bool):
            value = float(value) if isinstance(value, float) else int(value)
        return {"value": value}
    if isinstance(value, jax.Array | np.ndarray | np.generic):
        if isinstance(value, jax.Array):
            kind = "jax"
        else:
            kind = "numpy_scalar" if isinstance(value, np.generic) else "numpy"
        arr = _little_endian(np.asarray(value))
        code = arr.dtype.str[1:]
        if code not in _DTYPES:
            raise ValueError(
                f"cannot save field {name!r} of dtype {arr.dtype}: only bool, int, uint and "
                "float16/32/64 arrays are stored."
            )
        arrays[name] = arr
        return {kind: name}
    for kname, cls in _KERNELS.items():
        if type(value) is cls:
            fields = {
                f.name: _encode(getattr(value, f.name), f"{name}.{f.name}", arrays)
                for f in dataclasses.fields(cls)
            }
            return {"kernel": kname, "fields": fields}
    raise TypeError(
        f"cannot save field {name!r} of type {type(value).__name__}: a value must be an array, "
        "a JSON scalar or a registered kernel (jaxrank.io.register_kernel)."
    )


def _decode(node, arrays: dict[str, np.ndarray], where: str):
    if not isinstance(node, dict) or len(node) not in (1, 2):
        raise ValueError(f"corrupt metadata: field {where!r} is malformed.")
    if "value" in node:
        return node["value"]
    for kind in ("numpy", "numpy_scalar", "jax"):
        if kind in node:
            arr = arrays[_lookup(node[kind], arrays, where)]
            if kind == "jax":
                return _to_jax(arr, node[kind])
            return arr[()] if kind == "numpy_scalar" else arr.copy()
    if "kernel" in node:
        cls = _KERNELS.get(node["kernel"])
        if cls is None:
            raise ValueError(
                f"unknown kernel class {node['kernel']!r} in field {where!r} (known: "
                f"{', '.join(sorted(_KERNELS))}); register it with jaxrank.io.register_kernel."
            )
        fields = node.get("fields")
        if not isinstance(fields, dict):
            raise ValueError(f"corrupt metadata: kernel field {where!r} has no parameters.")
        params = {k: _decode(v, arrays, f"{where}.{k}") for k, v in fields.items()}
        try:
            return cls(**params)
        except TypeError as err:
            raise ValueError(f"kernel {node['kernel']!r} in field {where!r}: {err}") from None
    raise ValueError(f"corrupt metadata: field {where!r} is malformed.")


def _lookup(name, arrays, where):
    if not isinstance(name, str) or name not in arrays:
        raise ValueError(f"missing array {name!r} (field {where!r}).")
    return name


def _to_jax(arr: np.ndarray, name: str) -> jax.Array:
    if arr.dtype.itemsize == 8 and arr.dtype.kind in "fiu" and not jax.config.jax_enable_x64:
        if arr.dtype.kind == "f":
            raise ValueError(
                f"array {name!r} is {arr.dtype}; loading it without x64 would round it to 32 "
                "bits. Call jax.config.update('jax_enable_x64', True) first."
            )
        small = np.int32 if arr.dtype.kind == "i" else np.uint32
        if arr.size and not np.array_equal(arr.astype(small), arr):
            raise ValueError(
                f"array {name!r} holds {arr.dtype} values beyond 32 bits; call "
                "jax.config.update('jax_enable_x64', True) first."
            )
        arr = arr.astype(small)
    return jnp.asarray(arr, dtype=arr.dtype)


# --------------------------------------------------------------------------------------------
# checksum, save, load
# --------------------------------------------------------------------------------------------


def _canonical_json(meta: dict) -> bytes:
    return json.dumps(meta, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def checksum(meta: dict, arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 (hex) of the canonical serialisation of a model file's content.

    The bytes hashed are: the tag ``b"jaxrank-model\\0"``, the length (8 bytes, little-endian)
    and bytes of the canonical JSON of ``meta`` (sorted keys, separators ``,`` and ``:``, ASCII),
    then for each array in sorted name order its name, dtype string (e.g. ``<f4``) and shape,
    each NUL-terminated, the data length (8 bytes) and its C-order little-endian bytes. Equal
    models give equal checksums on every platform.
    """
    h = hashlib.sha256()
    h.update(FORMAT_NAME.encode() + b"\0")
    blob = _canonical_json(meta)
    h.update(len(blob).to_bytes(8, "little") + blob)
    for name in sorted(arrays):
        a = _little_endian(np.asarray(arrays[name]))
        data = a.tobytes(order="C")
        head = f"{name}\0{a.dtype.str}\0{list(a.shape)}\0".encode()
        h.update(head + len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def _npy_bytes(a: np.ndarray) -> bytes:
    buf = _stdio.BytesIO()
    np.lib.format.write_array(buf, a, allow_pickle=False)
    return buf.getvalue()


def _text_array(text: str) -> np.ndarray:
    return np.frombuffer(text.encode(), dtype=np.uint8)


def save(model, path) -> None:
    """Write ``model`` to ``path`` as a checksummed ``.npz`` file (format in the module notes).

    The file is written to a temporary file in the same folder and moved into place, so an
    interrupted save never leaves a half-written model under ``path``. ``path`` is used as given
    (no ``.npz`` suffix is added); a binary file object is written to directly. The same model
    always gives the same bytes.

    Args:
      model: a model of a registered type (:class:`~jaxrank.RankModel` and any type added by
        :func:`register_model`).
      path: a file name (``str`` or ``os.PathLike``) or a writable binary file object.

    Raises:
      TypeError: ``model`` is not of a registered type, or holds a field that cannot be saved.
      ValueError: a field has an unsupported dtype or name.
    """
    found = [(k, c) for k, c in _MODELS.items() if type(model) is c.cls]
    if not found:
        raise TypeError(
            f"cannot save a {type(model).__name__}: registered model types are "
            f"{', '.join(sorted(_MODELS))} (jaxrank.io.register_model)."
        )
    type_name, codec = found[0]
    arrays: dict[str, np.ndarray] = {}
    fields = {}
    for name, value in codec.to_arrays(model).items():
        _check_name(name)
        fields[name] = _encode(value, name, arrays)
    from jaxrank import __version__

    meta = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "model_type": type_name,
        "fields": fields,
        "arrays": {k: {"dtype": a.dtype.str, "shape": list(a.shape)} for k, a in arrays.items()},
        "jaxrank_version": __version__,
    }
    members = {name: arrays[name] for name in sorted(arrays)}
    members[_META] = _text_array(_canonical_json(meta).decode())
    members[_SHA] = _text_array(checksum(meta, arrays))
    buf = _stdio.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, a in members.items():
            zf.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=_DATE), _npy_bytes(a))
    blob = buf.getvalue()
    if hasattr(path, "write"):
        path.write(blob)
        return
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".jaxrank-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _read(path) -> tuple[bytes, str]:
    if hasattr(path, "read"):
        return path.read(), "the file object"
    with open(os.fspath(path), "rb") as f:
        return f.read(), repr(os.fspath(path))


def _read_member(zf: zipfile.ZipFile, member: str, what: str) -> np.ndarray:
    try:
        with zf.open(member) as f:
            return np.lib.format.read_array(_stdio.BytesIO(f.read()), allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        raise ValueError(
            f"{what} is corrupt: member {member!r} is not a readable array ({err})."
        ) from None


def load(path):
    """Read a model written by :func:`save`, checking format, version, manifest and checksum.

    Arrays come back bit for bit in their saved dtypes (a float64 model needs x64 switched on:
    without it the file is refused rather than rounded). Never unpickles anything
    (``allow_pickle=False``).

    Args:
      path: a file name (``str`` or ``os.PathLike``) or a readable binary file object.

    Returns:
      The model (a :class:`~jaxrank.RankModel` or another registered type).

    Raises:
      ValueError: the file is not an ``.npz`` archive, is truncated or corrupt, is not a jaxrank
        model, has an unknown format version, model type or kernel, lacks a field or array,
        holds arrays the manifest does not list or list otherwise, fails its checksum, holds an
        inconsistent model, or holds float64 arrays while x64 is off.
      FileNotFoundError: ``path`` does not exist.
    """
    raw, what = _read(path)
    if not raw.startswith(b"PK\x03\x04"):
        raise ValueError(f"{what} is not a jaxrank model file: not an .npz (zip) archive.")
    try:
        zf = zipfile.ZipFile(_stdio.BytesIO(raw))
        bad = zf.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as err:
        raise ValueError(
            f"{what} is truncated or corrupt: not a readable .npz archive ({err})."
        ) from None
    except Exception as err:  # zlib.error and friends from a damaged member header
        raise ValueError(f"{what} is truncated or corrupt ({type(err).__name__}: {err}).") from None
    if bad is not None:
        raise ValueError(f"{what} is corrupt: member {bad!r} fails its zip CRC-32 check.")
    members = {n[: -len(".npy")]: n for n in zf.namelist() if n.endswith(".npy")}
    others = [n for n in zf.namelist() if not n.endswith(".npy")]
    if others:
        raise ValueError(f"{what} is not a jaxrank model file: unexpected member {others[0]!r}.")
    if _META not in members:
        raise ValueError(f"{what} is not a jaxrank model file: it has no {_META!r} record.")

    meta_arr = _read_member(zf, members[_META], what)
    try:
        if meta_arr.dtype != np.uint8 or meta_arr.ndim != 1:
            raise ValueError("not a byte string")
        meta = json.loads(meta_arr.tobytes().decode("utf-8"))
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{what} has corrupt metadata ({err}).") from None
    if meta.get("format") != FORMAT_NAME:
        raise ValueError(
            f"{what} is not a jaxrank model file: format is {meta.get('format')!r}, "
            f"expected {FORMAT_NAME!r}."
        )
    version = meta.get("format_version")
    if version != FORMAT_VERSION or isinstance(version, bool):
        raise ValueError(
            f"{what} has unknown format version {version!r}; this jaxrank reads version "
            f"{FORMAT_VERSION}" + (": upgrade jaxrank." if isinstance(version, int) else ".")
        )
    for key in ("model_type", "fields", "arrays"):
        if key not in meta:
            raise ValueError(f"{what} has corrupt metadata: missing field {key!r}.")
    manifest = meta["arrays"]
    if not isinstance(manifest, dict) or not isinstance(meta["fields"], dict):
        raise ValueError(f"{what} has corrupt metadata: malformed manifest.")
    if _SHA not in members:
        raise ValueError(f"{what} has no checksum record {_SHA!r}: cannot verify it.")

    for name in manifest:
        if name not in members:
            raise ValueError(f"{what} is missing array {name!r} listed in its manifest.")
    extra = sorted(set(members) - set(manifest) - {_META, _SHA})
    if extra:
        raise ValueError(f"{what} holds array {extra[0]!r} that its manifest does not list.")
    arrays = {}
    for name, spec in manifest.items():
        arr = _read_member(zf, members[name], what)
        if not isinstance(spec, dict) or [arr.dtype.str, list(arr.shape)] != [
            spec.get("dtype"),
            spec.get("shape"),
        ]:
            raise ValueError(
                f"{what}: array {name!r} has dtype {arr.dtype.str} and shape {list(arr.shape)}, "
                f"its manifest says {spec!r}."
            )
        arrays[name] = arr

    stored = _read_member(zf, members[_SHA], what)
    stored = stored.tobytes().decode("ascii", "replace") if stored.dtype == np.uint8 else ""
    actual = checksum(meta, arrays)
    if stored != actual:
        raise ValueError(
            f"{what} fails its checksum: the file was altered or corrupted (stored sha256 "
            f"{stored[:16]}..., content hashes to {actual[:16]}...)."
        )

    codec = _MODELS.get(meta["model_type"])
    if codec is None:
        raise ValueError(
            f"{what} holds unknown model type {meta['model_type']!r} (known: "
            f"{', '.join(sorted(_MODELS))})."
        )
    fields = {k: _decode(v, arrays, k) for k, v in meta["fields"].items()}
    try:
        return codec.from_arrays(fields)
    except KeyError as err:
        raise ValueError(
            f"{what} lacks field {err.args[0]!r} that a {meta['model_type']} needs."
        ) from None


# --------------------------------------------------------------------------------------------
# RankModel and the jaxrank kernels
# --------------------------------------------------------------------------------------------


def _rank_model_to_arrays(model: RankModel) -> dict[str, Any]:
    fields = {
        "basis": model.basis,
        "coef": model.coef,
        "lam": model.lam,
        "basis_index": model.basis_index,
        "kernel": model.kernel,
        "loss": model.loss,
        "eps": model.eps,
    }
    for f in SolverInfo._fields:
        fields[f"info.{f}"] = getattr(model.info, f)
    return fields


def _rank_model_from_arrays(fields: dict[str, Any]) -> RankModel:
    info = SolverInfo(**{f: fields[f"info.{f}"] for f in SolverInfo._fields})
    model = RankModel(
        basis=fields["basis"],
        coef=fields["coef"],
        lam=fields["lam"],
        kernel=fields["kernel"],
        info=info,
        basis_index=fields["basis_index"],
        loss=fields["loss"],
        eps=fields["eps"],
    )
    _check_rank_model(model)
    return model


def _check_rank_model(model: RankModel) -> None:
    """Shapes that must agree for ``decision_function`` and ``select`` to work."""
    b, c, lam = np.shape(model.basis), np.shape(model.coef), np.shape(model.lam)
    problems = []
    if len(b) != 2:
        problems.append(f"basis has shape {b}, expected (n_basis, d)")
    elif c not in ((b[0],), (*lam, b[0])) or len(lam) > 1:
        problems.append(f"coef {c}, lam {lam} and basis {b} disagree")
    elif np.shape(model.basis_index) != (b[0],):
        problems.append(f"basis_index has shape {np.shape(model.basis_index)}, basis {b}")
    for f in SolverInfo._fields:
        if np.shape(getattr(model.info, f)) != lam:
            problems.append(f"info.{f} has shape {np.shape(getattr(model.info, f))}, lam {lam}")
    if not isinstance(model.loss, str):
        problems.append(f"loss is {model.loss!r}, expected a name")
    if problems:
        raise ValueError("inconsistent RankModel: " + "; ".join(problems) + ".")


for _k in (_kernels.Gaussian, _kernels.Linear, _kernels.Polynomial):
    register_kernel(_k)
del _k
register_model("RankModel", RankModel, _rank_model_to_arrays, _rank_model_from_arrays)
