"""The command line's model file: the fitted model, the standardisation, the labels and how λ
was chosen (``jaxrank fit`` writes it, ``jaxrank predict`` reads it; :mod:`jaxrank.cli`).

Version 2 (written since issue 42) is :mod:`jaxrank.io`'s container, nothing of its own: the
ranker's fields and the command line's as a declared :class:`jaxrank.io.Extension` (format
``jaxrank-cli-model``, version 2), written by :func:`jaxrank.io.save` and read and verified by
:func:`jaxrank.io.read_contents`, sealed by the one :func:`jaxrank.io.checksum`. Version 1 (its
own layout: the ranker's ``jaxrank.io`` file as a byte member ``model`` beside plain members
``format``, ``version``, ``mean``, ... and ``checksum``, a SHA-256 of its own,
:func:`legacy_checksum`) is no longer written; files already on disk still load through
:func:`read_legacy_arrays`, which keeps that checksum only to read them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

import numpy as np

from jaxrank import io as model_io

__all__ = [
    "LEGACY_VERSION",
    "MODEL_FORMAT",
    "MODEL_VERSION",
    "MODEL_VERSIONS",
    "ModelFile",
    "check_model_arrays",
    "legacy_checksum",
    "load_model_file",
    "model_from_arrays",
    "read_legacy_arrays",
    "read_model_arrays",
    "save_model_file",
]

MODEL_FORMAT = "jaxrank-cli-model"
#: The version ``jaxrank fit`` writes: jaxrank.io's container with the command line's extension.
MODEL_VERSION = 2
#: The layout of version 1 (its own members and checksum), read for the files already written.
LEGACY_VERSION = 1
#: The versions read.
MODEL_VERSIONS = (LEGACY_VERSION, MODEL_VERSION)


@dataclasses.dataclass(frozen=True)
class ModelFile:
    """What ``jaxrank fit`` saves: the ranker plus the preprocessing ``predict`` must repeat.

    Attributes:
      model: the scalar-λ :class:`~jaxrank.RankModel`, fitted on standardised rows.
      mean, scale: ``(d,)`` standardisation: the model scores ``(x - mean) / scale``.
      feature_names: CSV column names of the features, in model order, or ``None``.
      target: label column (CSV) or array (npz) name, or ``None`` (LIBSVM).
      positive_label: the rare class, as a canonical label string (``"1"``, ``"yes"``).
      classes: both labels.
      input_format: ``"csv"``, ``"libsvm"`` or ``"npz"``.
      zero_based: LIBSVM index base, or ``None``.
      selection: how λ was chosen (``"cv"``, ``"validation"``, ``"holdout"``, ``"fixed"``).
      grid: ``(L,)`` the λ grid; score, score_se: ``(L,)`` mean validation AUC per λ and its
        standard error (NaN where not defined).
    """

    model: object
    mean: np.ndarray
    scale: np.ndarray
    feature_names: tuple[str, ...] | None
    target: str | None
    positive_label: str
    classes: tuple[str, ...]
    input_format: str
    zero_based: bool | None
    selection: str
    grid: np.ndarray
    score: np.ndarray
    score_se: np.ndarray


def legacy_checksum(arrays: dict) -> str:
    """The checksum of a version-1 file (every member but ``checksum``: name, dtype, shape,
    bytes), kept only to read version-1 files; version 2 is sealed by
    :func:`jaxrank.io.checksum`."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        if name == "checksum":
            continue
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _text_list(items) -> np.ndarray:
    # a list of strings as the bytes of its JSON: the container stores numbers, not text arrays
    return np.frombuffer(json.dumps([str(x) for x in items]).encode(), np.uint8)


def save_model_file(path, mf: ModelFile) -> None:
    """Write ``mf`` to ``path`` atomically: a :mod:`jaxrank.io` model file of the ranker (no
    pickle, every member stored) carrying the command line's fields as a declared extension,
    :class:`jaxrank.io.Extension` (format :data:`MODEL_FORMAT`, version :data:`MODEL_VERSION`):

    - the ranker's fields, as :func:`jaxrank.io.save` writes them;
    - ``extension.mean``, ``extension.scale``, ``extension.grid``, ``extension.score`` and
      ``extension.score_se`` (float64 arrays), ``extension.feature_names`` and
      ``extension.classes`` (UTF-8 JSON lists as bytes; ``feature_names`` ``null`` when there
      are none) and, in the metadata, ``target``, ``positive_label``, ``input_format``,
      ``zero_based``, ``selection`` and ``model_dtype``;
    - the one checksum (:func:`jaxrank.io.checksum`) over the metadata and every array.

    Example:
      >>> import os, tempfile
      >>> import numpy as np
      >>> import jaxrank
      >>> from jaxrank.cli import ModelFile, load_model_file, save_model_file
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> mf = ModelFile(model=jaxrank.fit_rankrc(X, y, 0.5), mean=np.zeros(5), scale=np.ones(5),
      ...                feature_names=None, target=None, positive_label="1", classes=("-1", "1"),
      ...                input_format="npz", zero_based=None, selection="fixed",
      ...                grid=np.array([0.5]), score=np.array([np.nan]),
      ...                score_se=np.array([np.nan]))
      >>> path = os.path.join(tempfile.mkdtemp(), "model.npz")
      >>> save_model_file(path, mf)
      >>> load_model_file(path).selection
      'fixed'
    """
    names = mf.feature_names
    fields = {
        "model_dtype": np.asarray(mf.model.coef).dtype.name,
        "mean": np.asarray(mf.mean, np.float64),
        "scale": np.asarray(mf.scale, np.float64),
        "feature_names": None if names is None else _text_list(names),
        "target": None if mf.target is None else str(mf.target),
        "positive_label": str(mf.positive_label),
        "classes": _text_list(mf.classes),
        "input_format": str(mf.input_format),
        "zero_based": None if mf.zero_based is None else bool(mf.zero_based),
        "selection": str(mf.selection),
        "grid": np.asarray(mf.grid, np.float64),
        "score": np.asarray(mf.score, np.float64),
        "score_se": np.asarray(mf.score_se, np.float64),
    }
    ext = model_io.Extension(MODEL_FORMAT, MODEL_VERSION, fields)
    model_io.save(mf.model, os.fspath(path), extension=ext)


_SELECTIONS = ("cv", "validation", "holdout", "fixed")
_KIND = "a model file written by 'jaxrank fit'"
# each member of a version-1 file: (dtype kinds, number of dimensions)
_MEMBERS = {
    "format": ("U", 0),
    "version": ("iu", 0),
    "model": ("u", 1),
    "model_dtype": ("U", 0),
    "mean": ("f", 1),
    "scale": ("f", 1),
    "has_feature_names": ("b", 0),
    "feature_names": ("U", 1),
    "target": ("U", 0),
    "has_target": ("b", 0),
    "positive_label": ("U", 0),
    "classes": ("U", 1),
    "input_format": ("U", 0),
    "zero_based": ("iu", 0),
    "selection": ("U", 0),
    "grid": ("f", 1),
    "score": ("f", 1),
    "score_se": ("f", 1),
    "checksum": ("U", 0),
}
# the largest scalar member of a version-1 file (a text field: a label, a column name)
_SCALAR_MAX_BYTES = 1 << 20
# version 2's extension fields: "text" (str), "text?" (str or None), "floats" (1-D float
# array), "list" (a JSON list of strings as bytes), "list?" (the same or None), "flag?"
_FIELDS = {
    "model_dtype": "text",
    "mean": "floats",
    "scale": "floats",
    "feature_names": "list?",
    "target": "text?",
    "positive_label": "text",
    "classes": "list",
    "input_format": "text",
    "zero_based": "flag?",
    "selection": "text",
    "grid": "floats",
    "score": "floats",
    "score_se": "floats",
}


def read_model_arrays(path) -> dict:
    """The fields of a ``jaxrank fit`` model file (versions 1 and 2), every size checked before
    it is read, as a dict in version 1's layout (``model``: the verified
    :class:`jaxrank.io.Contents` of a version-2 file, the ranker's bytes in version 1).

    The file is untrusted input. Version 2 goes through :func:`jaxrank.io.read_contents` (the
    zip directory, the metadata, the format name and version, the manifest, each ``.npy``
    header, the checksum: nothing is inflated, no size exceeds the file's), version 1 through
    :func:`read_legacy_arrays`; then every field's value (:func:`check_model_arrays`). Any
    failure is a ``ValueError`` naming ``path``.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such model file: {path}")
    if os.path.isdir(path):
        raise ValueError(f"{path} is a directory, not a model file.")
    raw = model_io.read_regular(path, f"the model file {path}")
    ar = model_io.Archive(raw, path, _KIND)
    if "format" in ar.members and "__meta__" not in ar.members:
        return read_legacy_arrays(ar, path)
    formats = {MODEL_FORMAT: MODEL_VERSIONS, model_io.FORMAT_NAME: (model_io.FORMAT_VERSION,)}
    contents = model_io.read_contents(raw, path, formats, _KIND)
    if contents.format == model_io.FORMAT_NAME:
        raise ValueError(
            f"{path} is a bare jaxrank.io model file (RankModel.save), without the "
            "standardisation and column names that 'jaxrank predict' applies; load it "
            "with jaxrank.io.load in Python, or fit with 'jaxrank fit'."
        )
    if contents.version != MODEL_VERSION:
        raise ValueError(
            f"{path} is damaged or not {_KIND}: it says version {contents.version} in the "
            f"layout of version {MODEL_VERSION} (version {LEGACY_VERSION} has its own)."
        )
    arrays = _v2_arrays(model_io.extension_fields(contents), path)
    arrays["model"] = contents
    problem = check_model_arrays(arrays)
    if problem:
        raise ValueError(f"{path} is damaged or not {_KIND}: {problem}.")
    return arrays


def _v2_arrays(ext: dict, path: str) -> dict:
    """Version 2's extension fields in version 1's layout, after checking each one's kind."""
    missing = [n for n in _FIELDS if n not in ext]
    extra = sorted(set(ext) - set(_FIELDS))
    if missing or extra:
        what = f"lacks {missing[0]!r}" if missing else f"holds an unknown record {extra[0]!r}"
        raise ValueError(f"{path} is damaged or not {_KIND}: it {what}.")
    out = {"format": np.array(MODEL_FORMAT), "version": np.array(MODEL_VERSION)}
    for name, kind in _FIELDS.items():
        v = ext[name]
        if kind.endswith("?") and v is None:
            continue
        if kind.startswith("text") and isinstance(v, str):
            out[name] = np.array(v)
        elif kind == "floats" and isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.ndim == 1:
            out[name] = v.astype(np.float64)
        elif kind.startswith("list") and isinstance(v, np.ndarray) and v.dtype == np.uint8:
            try:
                items = json.loads(v.tobytes().decode("utf-8"))
            except Exception:  # UnicodeDecodeError, JSONDecodeError, RecursionError: all damage
                items = None
            if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
                raise ValueError(f"{path} is damaged: {name} is not a JSON list of strings.")
            out[name] = np.array(items, dtype=str).reshape(len(items))
        elif kind == "flag?" and type(v) is bool:
            out[name] = np.array(int(v))
        else:
            shown = f"{type(v).__name__} {v!r}"[:60]
            raise ValueError(f"{path} is damaged or not {_KIND}: {name} is {shown}.")
    out["has_feature_names"] = np.array(ext["feature_names"] is not None)
    out.setdefault("feature_names", np.array([], dtype=str))
    out["has_target"] = np.array(ext["target"] is not None)
    out.setdefault("target", np.array(""))
    out.setdefault("zero_based", np.array(-1))
    return out


def read_legacy_arrays(ar, path: str) -> dict:
    """The arrays of a version-1 file (:data:`LEGACY_VERSION`: its own members and checksum).

    ``ar`` is the file's :class:`jaxrank.io.Archive`. Kept only so that files written before
    version 2 still load: the format name and version (exactly 1 in this layout), every
    member's presence, dtype, rank and size, then :func:`legacy_checksum`, then every field's
    value (:func:`check_model_arrays`). Any failure is a ``ValueError`` naming ``path``.
    """

    def expect(name):
        kinds, ndim = _MEMBERS[name]

        def check(dtype, shape):
            if dtype.kind not in kinds or len(shape) != ndim:
                return f"has dtype {dtype.str} and shape {shape}, not a {ndim}-D {kinds} array"
            return None

        return check

    def read(name):
        limit = _SCALAR_MAX_BYTES if _MEMBERS[name][1] == 0 else None
        return ar.read(name, limit=limit, expect=expect(name))

    fmt = read("format")
    if str(fmt) != MODEL_FORMAT:
        raise ValueError(f"{path} is not {_KIND}: its format is {str(fmt)[:40]!r}.")
    missing = [n for n in _MEMBERS if n not in ar.members]
    extra = sorted(set(ar.members) - set(_MEMBERS))
    if missing or extra:
        what = f"lacks {missing[0]!r}" if missing else f"holds an unknown record {extra[0]!r}"
        raise ValueError(f"{path} is damaged or not {_KIND}: it {what}.")
    version = int(read("version"))
    if version != LEGACY_VERSION:
        raise ValueError(
            f"{path} has model format version {version}; this jaxrank reads versions "
            f"{LEGACY_VERSION} and {MODEL_VERSION}"
            + (
                ": upgrade jaxrank."
                if version > MODEL_VERSION
                else f" only, version {LEGACY_VERSION} in this layout (no jaxrank writes it)."
            )
        )
    arrays = {name: read(name) for name in _MEMBERS}
    if str(arrays["checksum"]) != legacy_checksum(arrays):
        raise ValueError(f"{path} is damaged: its checksum does not match its contents.")
    problem = check_model_arrays(arrays)
    if problem:
        raise ValueError(f"{path} is damaged or not {_KIND}: {problem}.")
    return arrays


def check_model_arrays(a: dict) -> str | None:
    """The first invalid field of a model file's arrays (version 1's layout), as text, or
    ``None``."""
    from jaxrank._io_data import FORMATS

    d, L = a["mean"].size, a["grid"].size
    if str(a["model_dtype"]) not in ("float32", "float64"):
        return f"model_dtype is {str(a['model_dtype'])[:40]!r}, not float32 or float64"
    if d < 1 or not np.all(np.isfinite(a["mean"])):
        return "the standardisation mean is empty or not finite"
    if a["scale"].shape != (d,) or not np.all(np.isfinite(a["scale"]) & (a["scale"] > 0)):
        return f"the standardisation scale is not {d} finite numbers > 0"
    # a mean and a spread of training values, which a fit accepts only where their squares stay
    # finite in float64 (jaxrank._validation.check_cast): 1e300 comes from no fitted data
    top = float(np.sqrt(np.finfo(np.float64).max / 4))
    big = float(max(np.max(np.abs(a["mean"])), np.max(a["scale"])))
    if big > top:
        return (
            f"the standardisation mean or scale reaches {big:.3g}, beyond the data a fit "
            f"accepts (|x| up to {top:.3g})"
        )
    names = a["feature_names"]
    if bool(a["has_feature_names"]):
        if names.shape != (d,) or np.unique(names).size != d:
            return f"feature_names are not {d} distinct names"
    elif names.size:
        return "feature_names are present but flagged absent"
    classes = a["classes"]
    if classes.shape != (2,) or classes[0] == classes[1]:
        return "classes are not two distinct labels"
    if str(a["positive_label"]) not in classes.tolist():
        return f"the rare class {str(a['positive_label'])[:40]!r} is not one of the classes"
    if str(a["input_format"]) not in FORMATS:
        return f"input_format is {str(a['input_format'])[:40]!r}, not one of {FORMATS}"
    if int(a["zero_based"]) not in (-1, 0, 1):
        return f"zero_based is {int(a['zero_based'])}, not -1, 0 or 1"
    if str(a["selection"]) not in _SELECTIONS:
        return f"selection is {str(a['selection'])[:40]!r}, not one of {_SELECTIONS}"
    grid = a["grid"]
    if L < 1 or not np.all(np.isfinite(grid) & (grid > 0)):
        return "the λ grid is empty or not finite and > 0"
    if a["score"].shape != (L,) or a["score_se"].shape != (L,):
        return f"score and score_se do not hold one value per λ ({L})"
    return None


def model_from_arrays(arrays: dict, path="the model file") -> ModelFile:
    from jaxrank.model import RankModel

    zb = int(arrays["zero_based"])
    if isinstance(arrays["model"], model_io.Contents):  # version 2: the file is the ranker's
        model = model_io.build_model(arrays["model"])
    else:  # version 1: the ranker's own jaxrank.io file, a member
        model = model_io.load_bytes(arrays["model"].tobytes(), f"{path} (the ranker inside)")
    d = arrays["mean"].size
    if not isinstance(model, RankModel) or np.ndim(model.coef) != 1:
        raise ValueError(f"{path} is damaged: the ranker inside is not a one-λ RankModel.")
    if model.basis.shape[1] != d or str(model.coef.dtype) != str(arrays["model_dtype"]):
        raise ValueError(
            f"{path} is damaged: the ranker inside ({model.basis.shape[1]} features, "
            f"{model.coef.dtype}) disagrees with the file ({d} features, "
            f"{arrays['model_dtype']})."
        )
    return ModelFile(
        model=model,
        mean=arrays["mean"],
        scale=arrays["scale"],
        feature_names=tuple(arrays["feature_names"].tolist())
        if bool(arrays["has_feature_names"])
        else None,
        target=str(arrays["target"]) if bool(arrays["has_target"]) else None,
        positive_label=str(arrays["positive_label"]),
        classes=tuple(arrays["classes"].tolist()),
        input_format=str(arrays["input_format"]),
        zero_based=None if zb < 0 else bool(zb),
        selection=str(arrays["selection"]),
        grid=arrays["grid"],
        score=arrays["score"],
        score_se=arrays["score_se"],
    )


def load_model_file(path) -> ModelFile:
    """Read a model file written by ``jaxrank fit`` (:func:`save_model_file`): version 2, and
    version 1 (the layout written before issue 42) through :func:`read_legacy_arrays`.

    Raises:
      FileNotFoundError: no such file.
      ValueError: not a model file, a newer format version, a checksum mismatch (of the file or,
        in version 1, of the embedded :mod:`jaxrank.io` model), an invalid field, or a float64
        model while ``jax_enable_x64`` is off.

    Example:
      >>> import os, tempfile, numpy as np, jaxrank
      >>> from jaxrank import cli
      >>> X, y = jaxrank.datasets.make_rare_class(100, 0.2, 0.75, seed=0)
      >>> path = os.path.join(tempfile.mkdtemp(), "m.npz")
      >>> np.savez(path[:-4] + "-data.npz", X=X, y=y)
      >>> cli.main(["fit", path[:-4] + "-data.npz", "--lam", "2^-4", "-o", path, "-q"])
      ... # doctest: +ELLIPSIS
      data: ...-data.npz (npz), 100 rows x 5 features; rare class '1': 20 rows (20.0%); ...
      model: RankRC (20 basis rows), gaussian kernel (σ² = 10), λ = 2^-4, float32; solver ...
      saved ...m.npz
      0
      >>> cli.load_model_file(path).model.coef.shape
      (20,)
    """
    return model_from_arrays(read_model_arrays(path), os.fspath(path))
