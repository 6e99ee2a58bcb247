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

:func:`load` treats the file as untrusted input and refuses, with a ``ValueError`` naming the
file and the problem, a file that is not a zip archive, a truncated archive, a compressed or
encrypted member (nothing is ever inflated: a zip bomb is refused from the zip directory), a
member larger than its manifest entry allows or a metadata record over :data:`META_MAX_BYTES`,
an ``.npy`` header whose dtype or shape differs from the manifest (checked before the data is
read), a member failing its zip CRC-32, missing or unexpected arrays, a checksum mismatch (an
altered array or metadata with a consistent zip), a format version other than
:data:`FORMAT_VERSION`, an unknown model type or kernel class, a field a model type needs but
the file lacks, and field values no fitter would produce (:func:`check_fitted_fields`): the
checksum proves integrity, not authorship. Nothing in the file is ever unpickled or imported
by name: model types and kernels are looked up in registries.

A format built on this one carries its own fields beside the model as a declared
:class:`Extension`: the same archive, metadata, manifest and :func:`checksum`, written by the one
writer (:func:`save` with ``extension=``) and read by the one reader (:func:`read_contents`);
the file's ``format`` and ``format_version`` are the extension's (so :func:`load`, which
reads plain model files, refuses it with a pointer to its reader), its fields sit under
``"extension"`` in the metadata and its arrays are members ``extension.NAME``. The command
line's model file (``jaxrank-cli-model`` version 2: the standardisation, labels and λ
selection record, :mod:`jaxrank.cli`) is the one such format today.

Other model types join through :func:`register_model` with two functions: ``to_arrays(model)``
gives a flat ``{name: value}`` dict of the model's fields and ``from_arrays(fields)`` rebuilds
the model from the same dict. A value is an array (numpy or JAX; restored as the same kind,
same dtype), a JSON scalar (``None``, ``bool``, ``int``, ``float``, ``str``; restored exactly:
Python floats round-trip through their shortest ``repr``), or a kernel registered with
:func:`register_kernel` (the four jaxrank kernels are).

One idea at ~1,400 lines, on purpose: the file format (and its extensions), i.e. its writer,
its reader (a hardened parser of an untrusted file: a stored-only zip whose every size is
checked before anything is read, never numpy's pickle-capable loader) and the field checks a
loaded model must pass. The
three share the format's constants and are reviewed together for safety; split, a change to
one could silently loosen another.

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
import math
import os
import re
import stat
import tempfile
import time
import typing
import zipfile
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import kernels as _kernels
from jaxrank._io_data import brief, npy_header
from jaxrank._version import __version__

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "META_MAX_BYTES",
    "check_fitted_fields",
    "checksum",
    "load",
    "load_bytes",
    "register_export",
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
_EXPORTED: set[type] = set()


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

    Example:
      >>> import dataclasses, os, tempfile
      >>> import numpy as np
      >>> from jaxrank.io import load, register_model, save
      >>> @dataclasses.dataclass
      ... class Threshold:
      ...     cut: np.ndarray
      >>> register_model("DocThreshold", Threshold, lambda m: {"cut": m.cut},
      ...                lambda a: Threshold(np.asarray(a["cut"])))
      >>> path = os.path.join(tempfile.mkdtemp(), "t.npz")
      >>> save(Threshold(np.array([0.5])), path)
      >>> load(path)
      Threshold(cut=array([0.5]))
    """
    old = _MODELS.get(name)
    if old is not None and old.cls is not cls:
        raise ValueError(f"model type {name!r} is already registered for {old.cls.__name__}.")
    _MODELS[name] = _Codec(cls, to_arrays, from_arrays)
    register_export(cls)


def register_kernel(cls: type, name: str | None = None) -> type:
    """Let kernels of the dataclass ``cls`` be saved (its fields) and loaded (``cls(**fields)``).

    Usable as a class decorator. ``name`` defaults to ``cls.__name__``.

    Example:
      >>> import dataclasses
      >>> import jax.numpy as jnp
      >>> from jaxrank.io import register_kernel
      >>> @register_kernel
      ... @dataclasses.dataclass(frozen=True)
      ... class Laplacian:  # k(u, v) = exp(−||u − v||₁ / s)
      ...     s: float = 1.0
      ...     def __call__(self, U, V):
      ...         return jnp.exp(-jnp.abs(U[:, None] - V[None]).sum(-1) / self.s)
      ...     def diag(self, U):
      ...         return jnp.ones(U.shape[:1], U.dtype)
      >>> Laplacian(2.0)(jnp.zeros((1, 2)), jnp.ones((1, 2)))
      Array([[0.36787945]], dtype=float32)
    """
    if not dataclasses.is_dataclass(cls):
        raise ValueError(f"a savable kernel must be a dataclass, got {cls!r}.")
    name = cls.__name__ if name is None else name
    old = _KERNELS.get(name)
    if old is not None and old is not cls:
        raise ValueError(f"kernel {name!r} is already registered for {old!r}.")
    _KERNELS[name] = cls
    register_export(cls)
    return cls


def register_export(cls: type) -> type:
    """Register the pytree type ``cls`` for :mod:`jax.export`'s pytree serialisation.

    An exported function's argument and result structure is serialised with it; a type not
    registered there cannot be part of it (``Cannot serialize PyTreeDef containing an
    unregistered type``). :func:`register_model` and :func:`register_kernel` call this for
    their class, and for the ``NamedTuple`` types its fields are annotated with (a model's
    ``info``), so a model or kernel can be an argument or a result of an exported function.
    A dataclass registered with :func:`jax.tree_util.register_dataclass` is serialised under
    ``module.QualName`` with its static fields as JSON; a ``NamedTuple`` by its field names.
    Anything else (a class that is not a pytree) and a class registered already are left
    alone. Returns ``cls``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> import jaxrank
      >>> kernel = jaxrank.Gaussian(2.0)  # registered (jaxrank.io.register_kernel does it)
      >>> f = jax.jit(lambda k, X: k(X, X).sum())
      >>> exp = jax.export.deserialize(jax.export.export(f)(kernel, jnp.ones((3, 2))).serialize())
      >>> float(exp.call(kernel, jnp.ones((3, 2))))
      9.0
    """
    from jax import export

    if cls in _EXPORTED:
        return cls
    name = f"{cls.__module__}.{cls.__qualname__}"
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        export.register_namedtuple_serialization(cls, serialized_name=name)
        _EXPORTED.add(cls)
        return cls
    if not dataclasses.is_dataclass(cls):
        return cls
    fields = [f for f in dataclasses.fields(cls) if f.init]
    blank = object.__new__(cls)
    for f in fields:
        object.__setattr__(blank, f.name, None)
    node = jax.tree_util.tree_structure(blank).node_data()
    if node is None or node[0] is not cls:
        return cls  # a plain dataclass (not a pytree): nothing an export could see
    data = [f.name for f in fields if not f.metadata.get("static")]
    meta = [f.name for f in fields if f.metadata.get("static")]

    def from_children(aux, children):
        # the node without __init__ (its checks would see placeholders): the structure only
        obj = object.__new__(cls)
        for k, v in (*zip(meta, aux, strict=True), *zip(data, children, strict=True)):
            object.__setattr__(obj, k, v)
        return obj

    def serialize(aux) -> bytes:
        try:
            return json.dumps(list(aux)).encode()
        except TypeError:
            raise TypeError(
                f"{name}: static fields {dict(zip(meta, aux, strict=True))!r} are not JSON values; "
                "jax.export cannot serialise this pytree."
            ) from None

    export.register_pytree_node_serialization(
        cls,
        serialized_name=name,
        serialize_auxdata=serialize,
        deserialize_auxdata=lambda b: tuple(json.loads(b.decode())),
        from_children=from_children,
    )
    _EXPORTED.add(cls)
    for hint in _field_types(cls):
        register_export(hint)
    return cls


def _field_types(cls) -> list[type]:
    # the NamedTuple classes the dataclass's fields are annotated with (a model's info)
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # an annotation that does not resolve: nothing to add
        return []
    return [t for t in hints.values() if isinstance(t, type) and issubclass(t, tuple)
            and hasattr(t, "_fields")]  # fmt: skip


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
            kernel = cls(**params)
        except TypeError as err:
            raise ValueError(f"kernel {node['kernel']!r} in field {where!r}: {err}") from None
        except ValueError as err:  # the class's own checks (Gaussian(sigma2=-1.0) raises)
            raise ValueError(f"kernel field {where!r}: {err}") from None
        _check_kernel(kernel, where)
        return kernel
    raise ValueError(f"corrupt metadata: field {where!r} is malformed.")


def _real(value) -> float | None:
    """``value`` as a float if it is one real number (Python, numpy or 0-d array), else None."""
    if isinstance(value, bool | str | bytes) or value is None:
        return None
    arr = np.asarray(value) if isinstance(value, np.ndarray | np.generic | jax.Array) else None
    if arr is not None:
        return float(arr) if arr.shape == () and arr.dtype.kind in "iuf" else None
    return float(value) if isinstance(value, int | float) else None


def _check_kernel(kernel, where: str) -> None:
    """The parameters a jaxrank kernel's constructor would accept (``kernels.gaussian``...)."""
    if isinstance(kernel, _kernels.Gaussian):
        s = _real(kernel.sigma2)
        if s is None or not math.isfinite(s) or s <= 0:
            raise ValueError(
                f"kernel field {where!r}: Gaussian sigma2 must be finite and > 0, got "
                f"{kernel.sigma2!r}."
            )
        if isinstance(kernel, _kernels.ARDGaussian):
            sc = kernel.scales
            if (
                not isinstance(sc, np.ndarray | jax.Array)
                or np.asarray(sc).dtype.kind != "f"
                or np.ndim(sc) != 1
                or not np.all(np.isfinite(sc) & (np.asarray(sc) >= 0))
                or not np.any(np.asarray(sc) > 0)
            ):
                raise ValueError(
                    f"kernel field {where!r}: ARDGaussian scales must be a 1-D float array of "
                    f"finite values >= 0, not all 0, got {sc!r}."
                )
    elif isinstance(kernel, _kernels.Polynomial):
        deg = kernel.degree
        if type(deg) is not int or deg < 1:
            raise ValueError(
                f"kernel field {where!r}: polynomial degree must be a positive integer, got "
                f"{deg!r}."
            )
        for name in ("gamma", "coef0"):
            v = _real(getattr(kernel, name))
            if v is None or not math.isfinite(v):
                raise ValueError(
                    f"kernel field {where!r}: polynomial {name} must be a finite number, got "
                    f"{getattr(kernel, name)!r}."
                )


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

    Example:
      >>> import numpy as np
      >>> from jaxrank.io import checksum
      >>> a = checksum({"type": "X"}, {"w": np.arange(3.0)})
      >>> w = {"w": np.arange(3.0)}
      >>> a == checksum({"type": "X"}, w), a == checksum({}, w)
      (True, False)
      >>> len(a)  # SHA-256, hex
      64
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


class Extension(NamedTuple):
    """Fields a file format built on the model file carries beside the model (a declared extension).

    :func:`save` with ``extension=`` writes ``format`` and ``version`` as the file's format
    name and version (in place of :data:`FORMAT_NAME` and :data:`FORMAT_VERSION`, so that
    :func:`load`, which reads plain model files only, refuses the file instead of returning a
    model without its extension), the fields under ``"extension"`` in the metadata and their
    arrays as members named ``extension.NAME``, all sealed by the one :func:`checksum`.
    :func:`read_contents` reads such a file, :func:`build_model` and :func:`extension_fields`
    take it apart. ``jaxrank fit``'s model file (``jaxrank-cli-model`` version 2,
    :mod:`jaxrank.cli`) is one.

    Attributes:
      format: the file's format name (not :data:`FORMAT_NAME`).
      version: its version, an ``int`` >= 1.
      fields: ``{name: value}``, values as a model's fields (module notes).

    Example:
      >>> import io as _io, numpy as np, jaxrank
      >>> from jaxrank.io import Extension, extension_fields, read_contents, save
      >>> X, y = jaxrank.datasets.make_rare_class(100, 0.2, 0.75, seed=0)
      >>> buf = _io.BytesIO()
      >>> save(jaxrank.fit_rankrc(X, y, 0.5), buf,
      ...      extension=Extension("doc-format", 1, {"mean": np.zeros(5), "note": "hi"}))
      >>> contents = read_contents(buf.getvalue(), "a buffer", {"doc-format": (1,)})
      >>> extension_fields(contents)["note"], contents.version
      ('hi', 1)
    """

    format: str
    version: int
    fields: dict[str, Any]


#: Prefix of the member names of an :class:`Extension`'s arrays.
EXTENSION_PREFIX = "extension."


def save(model, path, *, extension: Extension | None = None) -> None:
    """Write ``model`` to ``path`` as a checksummed ``.npz`` file (format in the module notes).

    The file is written to a temporary file in the same folder and moved into place, so an
    interrupted save never leaves a half-written model under ``path``; its mode follows the
    umask (:func:`write_atomic`). ``path`` is used as given (no ``.npz`` suffix is added); a
    binary file object is written to directly. The same model always gives the same bytes, its
    members stored uncompressed (what :func:`load` accepts).

    Args:
      model: a model of a registered type (:class:`~jaxrank.RankModel` and any type added by
        :func:`register_model`).
      path: a file name (``str`` or ``os.PathLike``) or a writable binary file object.
      extension: extra fields for a format built on this one (:class:`Extension`); the file
        is then read by :func:`read_contents`, not :func:`load`.

    Raises:
      TypeError: ``model`` is not of a registered type, or holds a field that cannot be saved.
      ValueError: a field has an unsupported dtype or name; the metadata would exceed
        :data:`META_MAX_BYTES` (a file :func:`load` would refuse); ``path`` is not a regular
        file.
      OSError: ``path`` cannot be written (a directory, a missing or read-only folder, a full
        disk); the message names ``path``.

    Example:
      >>> import os, tempfile
      >>> import jaxrank
      >>> from jaxrank.io import load, save
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> path = os.path.join(tempfile.mkdtemp(), "model.npz")
      >>> save(jaxrank.fit_rankrc(X, y, 0.5), path)  # the same as model.save(path)
      >>> load(path).coef.shape
      (20,)
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
    meta = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION}
    if extension is not None:
        fmt, version, extra = extension
        if not isinstance(fmt, str) or not fmt or fmt == FORMAT_NAME:
            raise ValueError(f"an extension's format must be a name other than {FORMAT_NAME!r}.")
        if type(version) is not int or version < 1:
            raise ValueError(f"an extension's version must be an int >= 1, got {version!r}.")
        ext, ext_arrays = {}, {}
        for name, value in extra.items():
            _check_name(name)
            ext[name] = _encode(value, EXTENSION_PREFIX + name, ext_arrays)
        clash = sorted(set(arrays) & set(ext_arrays))
        if clash:
            raise ValueError(f"the model's array {clash[0]!r} collides with the extension's.")
        arrays |= ext_arrays
        meta = {"format": fmt, "format_version": version, "extension": ext}
    meta |= {
        "model_type": type_name,
        "fields": fields,
        "arrays": {k: {"dtype": a.dtype.str, "shape": list(a.shape)} for k, a in arrays.items()},
        "jaxrank_version": __version__,
    }
    blob = _canonical_json(meta)
    if len(blob) + 128 > META_MAX_BYTES:  # 128: the .npy header of the record
        raise ValueError(
            f"cannot save: the metadata would take {len(blob)} bytes, more than the "
            f"{META_MAX_BYTES} a reader accepts (store long values as arrays)."
        )
    members = {name: arrays[name] for name in sorted(arrays)}
    members[_META] = _text_array(blob.decode())
    members[_SHA] = _text_array(checksum(meta, arrays))
    buf = _stdio.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, a in members.items():
            zf.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=_DATE), _npy_bytes(a))
    blob = buf.getvalue()
    if hasattr(path, "write"):
        path.write(blob)
        return
    write_atomic(path, blob)


def check_output_path(path) -> str:
    """Check, before any work, that a file can be written at ``path``; returns ``path`` as ``str``.

    Catches what would otherwise surface only when the result is written (after a long fit):
    a missing folder, a folder that is not writable, a ``path`` that is a directory or another
    non-regular file (a device, a FIFO). An existing regular file is fine (it is replaced).

    Raises:
      FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError: with a message
        naming ``path``.
      ValueError: ``path`` exists and is not a regular file.
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot write {path}: it is a directory, not a file name.")
    if os.path.lexists(path) and not os.path.isfile(path):
        raise ValueError(f"cannot write {path}: it exists and is not a regular file.")
    if not os.path.exists(folder):
        raise FileNotFoundError(f"cannot write {path}: no directory {folder}.")
    if not os.path.isdir(folder):
        raise NotADirectoryError(f"cannot write {path}: {folder} is not a directory.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write {path}: the folder {folder} is not writable.")
    return path


def _umask() -> int:
    """The process umask (read without changing it where the OS allows)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # elsewhere: the only portable read is to set it and set it back
    os.umask(mask)
    return mask


def write_atomic(path, blob: bytes) -> None:
    """Write ``blob`` to ``path`` through a temporary file in the same folder, then rename.

    An interrupted write never leaves a half-written file under ``path``. The file gets the
    mode an ordinary ``open(path, "w")`` would give (``0o666`` less the umask), not the
    temporary file's private ``0o600``. Errors name ``path``, never the temporary file.

    A ``path`` that is a symbolic link is written through: the file the link names is replaced
    (atomically, in its own folder) and the link itself stays, as ``open(path, "w")`` would
    write through it. Temporaries a killed save left behind (``.jaxrank-<pid>-*.tmp`` of a
    process that no longer runs) are removed first (:func:`remove_stale_temporaries`).

    Raises:
      OSError: the folder is missing or not writable, ``path`` is a directory, the disk is full
        (the message names ``path``).
      ValueError: ``path`` exists and is not a regular file.
    """
    path = check_output_path(path)
    # a symlink is written through: the file it names is replaced, the link stays
    target = os.path.realpath(path) if os.path.islink(path) else path
    folder = os.path.dirname(os.path.abspath(target))
    remove_stale_temporaries(folder)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".jaxrank-{os.getpid()}-", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
        tmp = None
    except OSError as err:
        reason = err.strerror or str(err)
        raise type(err)(f"cannot write {path}: {reason}.") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)


_TMP_NAME = re.compile(r"\.jaxrank-(?:(\d+)-)?[^/]*\.tmp\Z")
#: Age (seconds) after which a temporary without a process id in its name counts as stale.
STALE_TMP_SECONDS = 3600


def remove_stale_temporaries(folder) -> int:
    """Remove the ``.jaxrank-*.tmp`` files an interrupted save left in ``folder``; their count.

    A save writes ``.jaxrank-<pid>-<random>.tmp`` and renames it into place; ``kill -9``
    between the two leaves it behind. A temporary is stale when it belongs to this user and
    the process named in it no longer runs (names without a process id, from older versions:
    when older than :data:`STALE_TMP_SECONDS`). A save in progress in another process is never
    touched. Errors (a file gone meanwhile, a folder not listable) are ignored.
    """
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    now = None
    for entry in entries:
        m = _TMP_NAME.match(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
                continue
            if m.group(1) is not None:
                if _alive(int(m.group(1))):
                    continue
            else:
                now = time.time() if now is None else now
                if now - st.st_mtime < STALE_TMP_SECONDS:
                    continue
            os.remove(entry.path)
            removed += 1
        except OSError:
            continue
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's process (or not a pid at all): leave its file alone
    return True


# --------------------------------------------------------------------------------------------
# reading: a stored-only archive, every size checked before anything is read
# --------------------------------------------------------------------------------------------

#: Largest ``__meta__`` record read (bytes): a RankModel's is about 1 kB.
META_MAX_BYTES = 1 << 20
_ZIP_MAGIC = b"PK\x03\x04"
# kinds numpy.load(allow_pickle=False) restores exactly; "U" for the CLI's text fields
_KINDS = frozenset("biufU")


def _npy_header(data: bytes) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """``(shape, fortran_order, dtype, data offset)`` of ``.npy`` bytes (header only)."""
    return npy_header(_stdio.BytesIO(data))


class Archive:
    """An ``.npz`` file held in memory, read without trusting any size written in it.

    Opening reads only the zip directory and refuses, before any member is read: encrypted
    or compressed members (jaxrank writes every member stored, so nothing is ever inflated and
    no member can claim more bytes than the file holds), a stored size that differs from the
    compressed one, a member reaching past the end of the file, repeated member names and
    names that are not ``NAME.npy``. :meth:`read` checks a member's size in the directory
    against a limit, then its ``.npy`` header (dtype, shape) against what the caller expects,
    and only then copies the data: a header claiming ``(100000000000,)`` is refused from the
    header. Every failure is a ``ValueError`` naming the file (``what``).

    Args:
      raw: the file's bytes.
      what: how messages name the file (e.g. ``"'model.npz'"``).
      kind: what the file should be, for "is not ..." messages.
    """

    def __init__(self, raw: bytes, what: str, kind: str = "a jaxrank model file"):
        self.what = what
        if not raw.startswith(_ZIP_MAGIC):
            raise ValueError(f"{what} is not {kind}: not an .npz (zip) archive.")
        try:
            self._zf = zipfile.ZipFile(_stdio.BytesIO(raw))
            infos = self._zf.infolist()
        except Exception as err:  # BadZipFile, struct.error, UnicodeDecodeError, ...: all damage
            raise ValueError(
                f"{what} is truncated or corrupt: not a readable .npz archive ({brief(err)})."
            ) from None
        self.members: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            name = info.filename
            if not name.endswith(".npy") or "/" in name:
                raise ValueError(f"{what} is not {kind}: unexpected member {name!r}.")
            if name[:-4] in self.members:
                raise ValueError(f"{what} is corrupt: member {name!r} appears twice.")
            if info.flag_bits & 0x1:
                raise ValueError(f"{what} is corrupt: member {name!r} is encrypted.")
            if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
                raise ValueError(
                    f"{what}: member {name!r} is compressed (zip method {info.compress_type}, "
                    f"{info.compress_size} bytes declared to inflate to {info.file_size}); "
                    "jaxrank writes every member uncompressed and inflates none (a recompressed "
                    "or crafted file)."
                )
            if info.header_offset + 30 + len(name) + info.file_size > len(raw):
                raise ValueError(
                    f"{what} is truncated or corrupt: member {name!r} declares "
                    f"{info.file_size} bytes, more than the file holds."
                )
            self.members[name[:-4]] = info

    def size(self, name: str) -> int:
        """The stored size of member ``name`` (``.npy`` header and data), from the directory."""
        return self.members[name].file_size

    def read(
        self,
        name: str,
        *,
        limit: int | None = None,
        expect: Callable[[np.dtype, tuple[int, ...]], str | None] | None = None,
    ) -> np.ndarray:
        """Member ``name`` as an array, after the size and header checks.

        Args:
          name: the member without ``.npy``.
          limit: most bytes the member may hold (checked on the directory entry).
          expect: ``(dtype, shape) -> problem or None``, called on the header before the data
            is read; a problem refuses the member.
        """
        what, member = self.what, f"{name}.npy"
        info = self.members[name]
        if limit is not None and info.file_size > limit:
            raise ValueError(
                f"{what} is corrupt: member {member!r} holds {info.file_size} bytes, at most "
                f"{limit} expected."
            )
        try:
            data = self._zf.read(info)
            shape, fortran, dtype, offset = _npy_header(data)
        except Exception as err:  # a CRC mismatch, a damaged header: all damage
            raise ValueError(
                f"{what} is corrupt: member {member!r} is not a readable array ({brief(err)})."
            ) from None
        if dtype.kind not in _KINDS or dtype.fields is not None or dtype.subdtype is not None:
            raise ValueError(
                f"{what} is corrupt: member {member!r} has dtype {dtype.str}, not a plain "
                "number or text array (nothing is unpickled)."
            )
        if expect is not None:
            problem = expect(dtype, shape)
            if problem:
                raise ValueError(f"{what}: array {name!r} {problem}.")
        count = math.prod(shape)  # Python ints: no overflow whatever the header claims
        if len(data) - offset != count * dtype.itemsize:
            raise ValueError(
                f"{what} is corrupt: member {member!r} has {len(data) - offset} data bytes, its "
                f"header (dtype {dtype.str}, shape {shape}) needs {count * dtype.itemsize}."
            )
        arr = np.frombuffer(data, dtype=dtype, count=count, offset=offset)
        return arr.reshape(shape, order="F" if fortran else "C").copy()


def _read(path) -> tuple[bytes, str]:
    if hasattr(path, "read"):
        return path.read(), "the file object"
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"{path!r} is a directory, not a model file.")
    return read_regular(path, repr(path)), repr(path)


def read_regular(path, what: str) -> bytes:
    """The bytes of the regular file ``path``, read to its size at open time and no further.

    A model path that is (or links to) a device, a FIFO or a socket is refused before reading:
    ``/dev/zero`` has no end, and reading it "whole" would exhaust memory.

    Raises:
      ValueError: ``path`` is not a regular file (``what`` names it).
      OSError: it cannot be opened.
    """
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(
                f"{what} is not a regular file (a device, FIFO or socket): a model file is read "
                "only from a regular file."
            )
        return f.read(st.st_size)


def _expect_manifest(spec) -> Callable[[np.dtype, tuple[int, ...]], str | None]:
    def check(dtype, shape):
        if [dtype.str, list(shape)] != [spec["dtype"], spec["shape"]]:
            return f"has dtype {dtype.str} and shape {list(shape)}, its manifest says {spec!r}"
        return None

    return check


def _check_manifest(manifest, what: str) -> None:
    """Each entry ``{"dtype": "<f8", "shape": [n, d]}`` with a stored dtype, shape ints >= 0."""
    if not isinstance(manifest, dict):
        raise ValueError(f"{what} has corrupt metadata: malformed manifest.")
    for name, spec in manifest.items():
        shape = spec.get("shape") if isinstance(spec, dict) else None
        ok = (
            isinstance(name, str)
            and isinstance(spec, dict)
            and set(spec) == {"dtype", "shape"}
            and isinstance(spec["dtype"], str)
            and spec["dtype"][1:] in _DTYPES
            and spec["dtype"][:1] in "<|"
            and isinstance(shape, list)
            and len(shape) <= 32
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
        )
        if not ok:
            raise ValueError(f"{what} has corrupt metadata: manifest entry {name!r} is {spec!r}.")


def load(path):
    """Read a model written by :func:`save`, checking format, version, manifest and checksum.

    Arrays come back bit for bit in their saved dtypes (a float64 model needs x64 switched on:
    without it the file is refused rather than rounded). Never unpickles anything, never
    inflates a compressed member, and never allocates more than the file's own size: every
    member's size in the zip directory and every ``.npy`` header are checked against the
    manifest (of at most :data:`META_MAX_BYTES`) before the member is read. After the
    checksum, every field is validated as the fitters validate their arguments (a Gaussian
    σ² finite and > 0, a known loss, ε a finite number > 0, λ finite and > 0, solver status
    codes that exist, basis indices >= 0, shapes that agree): a checksum proves integrity,
    not that the file was written by jaxrank.

    Args:
      path: a file name (``str`` or ``os.PathLike``) or a readable binary file object.

    Returns:
      The model (a :class:`~jaxrank.RankModel` or another registered type).

    Raises:
      ValueError: the file is not an ``.npz`` archive, is truncated or corrupt, is not a jaxrank
        model, has another format version than :data:`FORMAT_VERSION`, an unknown model type
        or kernel, lacks a field or array, holds arrays the manifest does not list or list
        otherwise, fails its checksum, holds an invalid or inconsistent model, or holds
        float64 arrays while x64 is off.
      FileNotFoundError: ``path`` does not exist.

    Example:
      >>> import os, tempfile
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> model = jaxrank.fit_rankrc(X, y, 0.5)
      >>> path = os.path.join(tempfile.mkdtemp(), "model.npz")
      >>> model.save(path)
      >>> again = jaxrank.load(path)
      >>> bool((again.decision_function(X) == model.decision_function(X)).all())
      True
    """
    raw, what = _read(path)
    return load_bytes(raw, what)


def load_bytes(raw: bytes, what: str):
    """:func:`load` of a file's bytes; messages name the file as ``what``.

    Example:
      >>> import io as _io
      >>> import jaxrank
      >>> from jaxrank.io import load_bytes, save
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> buf = _io.BytesIO()
      >>> save(jaxrank.fit_rankrc(X, y, 0.5), buf)
      >>> type(load_bytes(buf.getvalue(), "a buffer")).__name__
      'RankModel'
      >>> try:
      ...     load_bytes(b"not a model", "a buffer")
      ... except ValueError as err:
      ...     print("a buffer" in str(err))
      True
    """
    return build_model(read_contents(raw, what, {FORMAT_NAME: (FORMAT_VERSION,)}))


class Contents(NamedTuple):
    """A model file read and verified (:func:`read_contents`), its model not yet built.

    Attributes:
      what: how messages name the file.
      format, version: the file's format name and version.
      meta: the metadata (JSON).
      arrays: every array the manifest lists, by member name, in its saved dtype.
    """

    what: str
    format: str
    version: int
    meta: dict
    arrays: dict[str, np.ndarray]


def _versions_text(versions) -> str:
    v = [str(x) for x in sorted(versions)]
    return f"version {v[0]}" if len(v) == 1 else f"versions {', '.join(v[:-1])} and {v[-1]}"


def read_contents(
    raw: bytes, what: str, formats: dict[str, tuple[int, ...]], kind: str = "a jaxrank model file"
) -> Contents:
    """The one reader of model files: the archive, the metadata, the manifest and the checksum.

    Reads a plain model file (:data:`FORMAT_NAME`) or one carrying an :class:`Extension`,
    checking in this order (each failure a ``ValueError`` naming ``what``): the zip directory
    (:class:`Archive`), the ``__meta__`` record (at most :data:`META_MAX_BYTES`, JSON), the
    format name and version against ``formats`` (``{name: versions read}``), the metadata's
    keys (an ``"extension"`` record exactly when the format is not :data:`FORMAT_NAME`), the
    manifest, every member's size and ``.npy`` header against it, then the checksum over the
    metadata and every array. Nothing is built yet: :func:`build_model` builds the model (and
    checks its fields), :func:`extension_fields` decodes the extension's.

    Example:
      >>> import io as _io, jaxrank
      >>> from jaxrank.io import FORMAT_NAME, build_model, read_contents, save
      >>> X, y = jaxrank.datasets.make_rare_class(100, 0.2, 0.75, seed=0)
      >>> buf = _io.BytesIO()
      >>> save(jaxrank.fit_rankrc(X, y, 0.5), buf)
      >>> contents = read_contents(buf.getvalue(), "a buffer", {FORMAT_NAME: (1,)})
      >>> type(build_model(contents)).__name__
      'RankModel'
    """
    ar = Archive(raw, what, kind)
    if _META not in ar.members:
        raise ValueError(f"{what} is not {kind}: it has no {_META!r} record.")
    meta_arr = ar.read(
        _META,
        limit=META_MAX_BYTES,
        expect=lambda dt, sh: None if dt == np.uint8 and len(sh) == 1 else "is not a byte string",
    )
    try:
        meta = json.loads(meta_arr.tobytes().decode("utf-8"))
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
    except Exception as err:  # JSONDecodeError, UnicodeDecodeError, RecursionError: all damage
        raise ValueError(f"{what} has corrupt metadata ({brief(err)}).") from None
    fmt = meta.get("format")
    if not isinstance(fmt, str) or fmt not in formats:
        expected = " or ".join(repr(f) for f in formats)
        hint = ""
        if isinstance(fmt, str) and "extension" in meta and list(formats) == [FORMAT_NAME]:
            hint = (
                " It is a model with the extension fields of that format: read it with that "
                "format's reader (jaxrank.cli.load_model_file reads 'jaxrank-cli-model', the "
                "files 'jaxrank fit' writes)."
            )
        raise ValueError(f"{what} is not {kind}: format is {fmt!r}, expected {expected}.{hint}")
    version = meta.get("format_version")
    versions = formats[fmt]
    if type(version) is not int or version not in versions:
        newer = type(version) is int and version > max(versions)
        raise ValueError(
            f"{what} has unknown format version {version!r}; this jaxrank reads "
            f"{_versions_text(versions)}" + (": upgrade jaxrank." if newer else " only.")
        )
    for key in ("model_type", "fields", "arrays"):
        if key not in meta:
            raise ValueError(f"{what} has corrupt metadata: missing field {key!r}.")
    if ("extension" in meta) != (fmt != FORMAT_NAME) or not isinstance(
        meta.get("extension", {}), dict
    ):
        raise ValueError(f"{what} has corrupt metadata: malformed extension record.")
    manifest = meta["arrays"]
    _check_manifest(manifest, what)
    if not isinstance(meta["fields"], dict) or not isinstance(meta["model_type"], str):
        raise ValueError(f"{what} has corrupt metadata: malformed fields.")
    if _SHA not in ar.members:
        raise ValueError(f"{what} has no checksum record {_SHA!r}: cannot verify it.")

    for name in manifest:
        if name not in ar.members:
            raise ValueError(f"{what} is missing array {name!r} listed in its manifest.")
    extra = sorted(set(ar.members) - set(manifest) - {_META, _SHA})
    if extra:
        raise ValueError(f"{what} holds array {extra[0]!r} that its manifest does not list.")
    arrays = {}
    for name, spec in manifest.items():
        # the member may hold a header (at most 64 kB in .npy 2.0) and the manifest's bytes
        nbytes = math.prod(spec["shape"]) * np.dtype(spec["dtype"]).itemsize
        arrays[name] = ar.read(name, limit=nbytes + 65546, expect=_expect_manifest(spec))

    stored = ar.read(
        _SHA,
        limit=1024,
        expect=lambda dt, sh: None if dt == np.uint8 and sh == (64,) else "is not a sha256 hex",
    )
    stored = stored.tobytes().decode("ascii", "replace")
    actual = checksum(meta, arrays)
    if stored != actual:
        raise ValueError(
            f"{what} fails its checksum: the file was altered or corrupted (stored sha256 "
            f"{stored[:16]}..., content hashes to {actual[:16]}...)."
        )
    return Contents(what, fmt, version, meta, arrays)


def build_model(contents: Contents):
    """The model of a verified file (:func:`read_contents`), its fields checked as a fit's.

    Raises:
      ValueError: an unknown model type or kernel, a missing field, an invalid model, or
        float64 arrays while x64 is off (messages name the file).

    Example:
      >>> import io as _io, jaxrank
      >>> from jaxrank.io import FORMAT_NAME, build_model, read_contents, save
      >>> X, y = jaxrank.datasets.make_rare_class(100, 0.2, 0.75, seed=0)
      >>> buf = _io.BytesIO()
      >>> save(jaxrank.fit_rankrc(X, y, 0.5), buf)
      >>> build_model(read_contents(buf.getvalue(), "a buffer", {FORMAT_NAME: (1,)})).coef.shape
      (20,)
    """
    what, meta, arrays = contents.what, contents.meta, contents.arrays
    codec = _MODELS.get(meta["model_type"])
    if codec is None:
        raise ValueError(
            f"{what} holds unknown model type {meta['model_type']!r} (known: "
            f"{', '.join(sorted(_MODELS))})."
        )
    try:
        fields = {k: _decode(v, arrays, k) for k, v in meta["fields"].items()}
        return codec.from_arrays(fields)
    except KeyError as err:
        raise ValueError(
            f"{what} lacks field {err.args[0]!r} that a {meta['model_type']} needs."
        ) from None
    except ValueError as err:
        raise ValueError(f"{what}: {err}") from None
    except TypeError as err:  # a field of the wrong kind reaching a constructor
        raise ValueError(f"{what} holds an invalid {meta['model_type']} ({err}).") from None


def extension_fields(contents: Contents) -> dict[str, Any]:
    """The :class:`Extension` fields of a verified file, decoded (arrays as numpy arrays).

    Only the container's rules apply (each field a JSON scalar, a manifest array or a
    registered kernel): the values are the extension's reader's to check.

    Raises:
      ValueError: the file has no extension, or a field is malformed (naming the file).

    Example:
      >>> import io as _io, jaxrank
      >>> from jaxrank.io import Extension, extension_fields, read_contents, save
      >>> X, y = jaxrank.datasets.make_rare_class(100, 0.2, 0.75, seed=0)
      >>> buf = _io.BytesIO()
      >>> save(jaxrank.fit_rankrc(X, y, 0.5), buf, extension=Extension("doc", 3, {"k": None}))
      >>> extension_fields(read_contents(buf.getvalue(), "a buffer", {"doc": (3,)}))
      {'k': None}
    """
    ext = contents.meta.get("extension")
    if not isinstance(ext, dict):
        raise ValueError(f"{contents.what} has no extension record.")
    try:
        return {k: _decode(v, contents.arrays, f"extension.{k}") for k, v in ext.items()}
    except ValueError as err:
        raise ValueError(f"{contents.what}: {err}") from None


# --------------------------------------------------------------------------------------------
# the jaxrank kernels (RankModel registers itself: jaxrank.model)
# --------------------------------------------------------------------------------------------


#: Losses a fitted model can hold: those the fitters accept (``hinge`` is refused there).
FITTED_LOSSES = ("smoothed_hinge", "squared_hinge")


def _kind(x) -> str:
    return np.asarray(x).dtype.kind if isinstance(x, np.ndarray | np.generic | jax.Array) else ""


def check_fitted_fields(
    model,
    name: str = "RankModel",
    *,
    penalty: str = "lam",
    counts: tuple[str, ...] = ("iterations", "cg_iterations"),
) -> None:
    """Validate a loaded kernel ranker as strictly as the fitters validate their arguments.

    Checks the fields shared by :class:`~jaxrank.RankModel` and the models built on it:
    ``basis`` a finite float ``(n_basis, d)`` array with n_basis, d >= 1; ``coef`` of the
    basis's dtype, ``(n_basis,)`` or ``(L, n_basis)``, finite wherever the solver status is
    not ``NONFINITE``; ``lam`` finite and > 0, ``()`` or ``(L,)``; ``basis_index`` integers >= 0;
    ``loss`` one of :data:`FITTED_LOSSES`; ``eps`` a finite number (> 0 for the smoothed
    hinge); ``info`` fields of the λ shape with integer iteration counts >= 0 and status codes
    of :class:`~jaxrank.solver.Status` other than ``RUNNING``.

    Args:
      model: the loaded model.
      name: its type's name, for the messages.
      penalty: the field holding the penalty weight that must be finite and > 0 and whose
        shape (``()`` or ``(L,)``) the coefficients and ``info`` follow (``"l1"`` for the μ of
        an :class:`~jaxrank.l1.L1Model`).
      counts: the ``info`` fields that are integer counts >= 0; every other ``info`` field but
        ``status`` must be floats.

    Raises:
      ValueError: naming every problem found.

    Example:
      >>> import dataclasses
      >>> import jax.numpy as jnp
      >>> import jaxrank
      >>> from jaxrank.io import check_fitted_fields
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> model = jaxrank.fit_rankrc(X, y, 0.5)
      >>> check_fitted_fields(model)  # a good model: nothing to say
      >>> try:
      ...     check_fitted_fields(dataclasses.replace(model, lam=jnp.asarray(-1.0)))
      ... except ValueError as err:
      ...     print("lam" in str(err))
      True
    """
    from jaxrank.solver import Status

    info_fields = type(model.info)._fields
    b, c = np.shape(model.basis), np.shape(model.coef)
    lam = np.shape(getattr(model, penalty))
    problems = []
    if len(b) != 2 or min(b, default=0) < 1:
        problems.append(f"basis has shape {b}, expected (n_basis, d) with both >= 1")
    elif c not in ((b[0],), (*lam, b[0])) or len(lam) > 1:
        problems.append(f"coef {c}, {penalty} {lam} and basis {b} disagree")
    elif np.shape(model.basis_index) != (b[0],):
        problems.append(f"basis_index has shape {np.shape(model.basis_index)}, basis {b}")
    for f in info_fields:
        if np.shape(getattr(model.info, f)) != lam:
            problems.append(
                f"info.{f} has shape {np.shape(getattr(model.info, f))}, {penalty} {lam}"
            )
    if problems:  # the value checks below need the shapes
        raise ValueError(f"inconsistent {name}: " + "; ".join(problems) + ".")

    basis, coef = np.asarray(model.basis), np.asarray(model.coef)
    if _kind(model.basis) != "f" or _kind(model.coef) != "f" or basis.dtype != coef.dtype:
        problems.append(
            f"basis ({basis.dtype}) and coef ({coef.dtype}) must be arrays of one float dtype"
        )
    elif not np.all(np.isfinite(basis)):
        problems.append("basis holds NaN or infinite values")
    status = np.asarray(model.info.status)
    codes = sorted(int(s) for s in Status if s is not Status.RUNNING)
    if _kind(model.info.status) not in "iu" or not np.all(np.isin(status, codes)):
        problems.append(
            f"info.status holds {np.unique(status).tolist()!r}, valid codes are {codes} "
            f"({', '.join(s.name for s in Status if s is not Status.RUNNING)})"
        )
    elif _kind(model.coef) == "f":
        # a solve that ended NONFINITE may hold NaN; any other status promises numbers
        rows = coef if coef.ndim == 1 else coef[status != Status.NONFINITE]
        if coef.ndim == 1 and int(status) == Status.NONFINITE:
            rows = coef[:0]
        if not np.all(np.isfinite(rows)):
            problems.append("coef holds NaN or infinite values while the solver status is finite")
    lams = np.asarray(getattr(model, penalty))
    if _kind(getattr(model, penalty)) != "f" or not np.all(np.isfinite(lams)) or np.any(lams <= 0):
        problems.append(f"{penalty} must be finite floats > 0, got {lams.tolist()!r}")
    idx = np.asarray(model.basis_index)
    if _kind(model.basis_index) not in "iu" or (idx.size and idx.min() < 0):
        problems.append(f"basis_index must be integers >= 0 (dtype {idx.dtype})")
    for f in info_fields:
        if f in counts:
            problems += count_problems(getattr(model.info, f), f"info.{f}")
        elif f != "status" and _kind(getattr(model.info, f)) != "f":
            problems.append(f"info.{f} must be floats")
    if model.loss not in FITTED_LOSSES:
        problems.append(f"loss is {model.loss!r}, expected one of {', '.join(FITTED_LOSSES)}")
    eps = _real(model.eps)
    if eps is None or not math.isfinite(eps) or (model.loss == "smoothed_hinge" and eps <= 0):
        problems.append(f"eps must be a finite number > 0, got {model.eps!r}")
    if not problems:
        problems += scale_problems(model.kernel, basis, coef, status)
    if problems:
        raise ValueError(f"invalid {name}: " + "; ".join(problems) + ".")


def scale_problems(kernel, basis: np.ndarray, coef: np.ndarray, status=None) -> list[str]:
    """``[message]`` unless a loaded model scores finite numbers in its dtype, as a fit's would.

    The rules a fit applies (:func:`jaxrank.kernels.check_kernel`: σ² a normal number of the
    basis's dtype, polynomial values neither overflowing nor underflowing it) and the score
    bound ``Σ_r |coef_r| · max_r k(b_r, b_r) ≤ max/4`` (a bound on every score at the basis
    rows, for a PSD kernel: ``|k(u, v)| ≤ √(k(u, u) k(v, v))``): coefficients of 1e38 in float32
    would sum to inf. Rows of a solve that ended ``NONFINITE`` are not judged.
    """
    from jaxrank.solver import Status

    dt = basis.dtype
    try:
        _kernels.check_kernel(kernel, basis, dt)
    except ValueError as err:
        return [f"kernel: {err}".rstrip(".")]
    c = coef.reshape(-1, basis.shape[0]).astype(np.float64)
    if status is not None:
        c = c[np.atleast_1d(np.asarray(status)).reshape(-1) != Status.NONFINITE]
    if c.size == 0:
        return []
    sq = np.sum(np.square(basis.astype(np.float64)), axis=1)
    if isinstance(kernel, _kernels.Gaussian):
        kmax = 1.0
    elif isinstance(kernel, _kernels.Polynomial):
        with np.errstate(over="ignore"):
            g, c0 = float(np.max(kernel.gamma)), float(np.max(np.abs(kernel.coef0)))
            kmax = float(np.max(np.abs(g * sq + c0) ** kernel.degree))
    else:
        kmax = float(np.max(sq))
    with np.errstate(over="ignore"):
        top = float(np.max(np.sum(np.abs(c), axis=1))) * max(kmax, 1.0)
    if not top <= float(np.finfo(dt).max) / 4:
        return [
            f"coef sums to {top:.3g} times the kernel's scale: scores would overflow {dt.name} "
            f"(largest {float(np.finfo(dt).max):.3g})"
        ]
    return []


def count_problems(value, name: str) -> list[str]:
    """``[message]`` unless ``value`` is an integer array (or scalar) of counts >= 0."""
    v = np.asarray(value)
    if _kind(value) not in "iu" or (v.size and v.min() < 0):
        return [f"{name} must be integers >= 0, got {v.tolist()!r}"]
    return []


def float_problems(value, name: str, *, dtype=None, lo=None, hi=None, open_lo=False) -> list[str]:
    """``[message]`` unless ``value`` is a finite float array in ``[lo, hi]`` (``(lo, hi]`` with
    ``open_lo``), of ``dtype`` when given: the loaded-field form of the fitters' range checks."""
    v = np.asarray(value)
    if _kind(value) != "f" or (dtype is not None and v.dtype != np.dtype(dtype)):
        want = f"{np.dtype(dtype)} " if dtype is not None else ""
        return [f"{name} must be a {want}float array, got dtype {v.dtype}"]
    bad = ~np.isfinite(v)
    if lo is not None:
        bad |= (v <= lo) if open_lo else (v < lo)
    if hi is not None:
        bad |= v > hi
    if np.any(bad):
        rng = (
            ""
            if lo is None and hi is None
            else " in "
            + (
                f"{'(' if open_lo else '['}{lo if lo is not None else '-inf'}, "
                f"{hi if hi is not None else 'inf'}" + ("]" if hi is not None else ")")
            )
        )
        return [f"{name} must be finite{rng}, got {v[bad].ravel()[:3].tolist()!r}"]
    return []


def status_problems(value, name: str = "info.status") -> list[str]:
    """``[message]`` unless ``value`` holds only :class:`~jaxrank.solver.Status` codes of a
    finished solve (not ``RUNNING``)."""
    from jaxrank.solver import Status

    status = np.asarray(value)
    codes = sorted(int(s) for s in Status if s is not Status.RUNNING)
    if _kind(value) not in "iu" or not np.all(np.isin(status, codes)):
        return [
            f"{name} holds {np.unique(status).tolist()!r}, valid codes are {codes} "
            f"({', '.join(s.name for s in Status if s is not Status.RUNNING)})"
        ]
    return []


for _k in (_kernels.Gaussian, _kernels.ARDGaussian, _kernels.Linear, _kernels.Polynomial):
    register_kernel(_k)
del _k
