"""The command line's model file: a checksummed ``.npz`` holding the fitted model, the
standardisation, the labels and how λ was chosen (``jaxrank fit`` writes it, ``jaxrank predict``
reads it; :mod:`jaxrank.cli`)."""

from __future__ import annotations

import dataclasses
import hashlib
import io as _stdio
import os

import numpy as np

__all__ = [
    "MODEL_FORMAT",
    "MODEL_VERSION",
    "ModelFile",
    "check_model_arrays",
    "checksum",
    "load_model_file",
    "model_from_arrays",
    "read_model_arrays",
    "save_model_file",
]

MODEL_FORMAT = "jaxrank-cli-model"
MODEL_VERSION = 1


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


def checksum(arrays: dict) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        if name == "checksum":
            continue
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save_model_file(path, mf: ModelFile) -> None:
    """Write ``mf`` to ``path`` atomically: an ``.npz`` archive (no pickle) holding

    - ``model``: the bytes of the ranker as written by :func:`jaxrank.io.save` (its own format
      version and checksum; extract them to get a file :func:`jaxrank.io.load` reads);
    - the preprocessing and the selection record under plain names (``mean``, ``scale``,
      ``feature_names``, ``target``, ``positive_label``, ``classes``, ``grid``, ``score``, ...);
    - ``format``/``version`` and ``checksum``, a SHA-256 of every other array, checked on load.

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
    from jaxrank import io as model_io

    buf = _stdio.BytesIO()
    model_io.save(mf.model, buf)
    names = mf.feature_names
    arrays = {
        "format": np.array(MODEL_FORMAT),
        "version": np.array(MODEL_VERSION),
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
    arrays["checksum"] = np.array(checksum(arrays))
    out = _stdio.BytesIO()
    np.savez(out, **arrays)  # members stored, not compressed: what load_model_file accepts
    model_io.write_atomic(path, out.getvalue())


_SELECTIONS = ("cv", "validation", "holdout", "fixed")
# each member of a CLI model file: (dtype kinds, number of dimensions)
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
# the largest scalar member (a text field: a label, a column name): a generous bound
_SCALAR_MAX_BYTES = 1 << 20


def read_model_arrays(path) -> dict:
    """The arrays of a ``jaxrank fit`` model file, every size checked before it is read.

    The file is untrusted input: the zip directory, each ``.npy`` header, the format name and
    version (exactly :data:`MODEL_VERSION`) and the checksum are checked in that order by
    :class:`jaxrank.io.Archive` (no member is ever inflated; sizes never exceed the file's),
    then every field's value (:func:`check_model_arrays`). Any failure is a ``ValueError``
    naming ``path``.
    """
    from jaxrank import io as model_io

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such model file: {path}")
    if os.path.isdir(path):
        raise ValueError(f"{path} is a directory, not a model file.")
    raw = model_io.read_regular(path, f"the model file {path}")
    kind = "a model file written by 'jaxrank fit'"
    ar = model_io.Archive(raw, path, kind)
    if "format" not in ar.members:
        if "__meta__" in ar.members:
            raise ValueError(
                f"{path} is a bare jaxrank.io model file (RankModel.save), without the "
                "standardisation and column names that 'jaxrank predict' applies; load it "
                "with jaxrank.io.load in Python, or fit with 'jaxrank fit'."
            )
        raise ValueError(f"{path} is not {kind}: it has no 'format' record.")

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
        raise ValueError(f"{path} is not {kind}: its format is {str(fmt)[:40]!r}.")
    missing = [n for n in _MEMBERS if n not in ar.members]
    extra = sorted(set(ar.members) - set(_MEMBERS))
    if missing or extra:
        what = f"lacks {missing[0]!r}" if missing else f"holds an unknown record {extra[0]!r}"
        raise ValueError(f"{path} is damaged or not {kind}: it {what}.")
    version = int(read("version"))
    if version != MODEL_VERSION:
        raise ValueError(
            f"{path} has model format version {version}; this jaxrank reads version "
            f"{MODEL_VERSION} only"
            + (": upgrade jaxrank." if version > MODEL_VERSION else " (no jaxrank writes it).")
        )
    arrays = {name: read(name) for name in _MEMBERS}
    if str(arrays["checksum"]) != checksum(arrays):
        raise ValueError(f"{path} is damaged: its checksum does not match its contents.")
    problem = check_model_arrays(arrays)
    if problem:
        raise ValueError(f"{path} is damaged or not {kind}: {problem}.")
    return arrays


def check_model_arrays(a: dict) -> str | None:
    """The first invalid field of a model file's arrays, as text, or ``None``."""
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
    from jaxrank import io as model_io
    from jaxrank.model import RankModel

    zb = int(arrays["zero_based"])
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
    """Read a model file written by ``jaxrank fit`` (:func:`save_model_file`).

    Raises:
      FileNotFoundError: no such file.
      ValueError: not a model file, a newer format version, a checksum mismatch (of the file or
        of the embedded :mod:`jaxrank.io` model), or a float64 model while ``jax_enable_x64``
        is off.

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
