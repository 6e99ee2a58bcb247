"""The ``jaxrank`` command line: ``demo``, ``fit``, ``predict`` and ``bench``.

Run it as ``jaxrank COMMAND ...`` (console script) or ``python -m jaxrank COMMAND ...``; with no
command it prints its help and exits with code 0 (it used to run the 15 s demo).

``jaxrank demo``
  reproduces one cell of seed 000 Table 2 on the paper's simulated data (Sec. 6.1): 1,000
  training, 1,000 validation and 10,000 test rows, medium overlap (t = 0.75), ρ = 10 %, RankRC
  fitted over the paper's λ grid (log₂ λ = −20, −18, …, 10) in one batched solve, λ picked by
  validation AUC, test AUC printed beside the generator's true-Bayes AUC.

``jaxrank fit DATA --target COL -o model.npz``
  reads CSV (header row; ``--target`` names the label column or gives its 0-based index),
  LIBSVM/svmlight or ``.npz`` (arrays ``X``, ``y``), standardises every feature to zero mean and
  unit variance on these training rows (seed 000 Sec. 6: "all datasets are standardized"; the
  mean and scale are stored in the model file and applied by ``predict``), and fits a kernel
  ranker (``--basis rare``: RankRC, ``all``: RankSVM, ``random``: RANK-RND, ``greedy``: the
  sparse greedy basis of seed 001 through :func:`jaxrank.greedy.fit_greedy`, squared hinge,
  ``--n-basis`` rows, default ⌈m/10⌉). λ is chosen over a grid, by default the paper's
  log₂ λ = −20, −18, …, 10:

  - ``--cv K``: stratified K-fold cross-validated AUC (seed 000 Sec. 6.2, K = 10 there), the
    protocol of :func:`jaxrank.select_lambda` with the same folds and keys (``--seed``), then a
    refit on every row at the best λ;
  - ``--validation FILE``: the grid is fitted on DATA and λ chosen by AUC on FILE (seed 000
    Sec. 6.1: separate training and validation sets); the model is the fit on DATA;
  - otherwise, with more than one λ: a stratified hold-out of ``--val-frac`` (default 1/4) of
    the rows of each class scores the grid fitted on the rest, then the ranker is refitted on
    every row at the best λ;
  - a single λ (``--lam``) is fitted on every row, no selection.

  Ties in AUC go to the larger λ. The features are standardised once on all rows of DATA
  before any split (as when :func:`jaxrank.select_lambda` is given standardised rows).

``jaxrank predict model.npz DATA [--out FILE]``
  prints one score per row of DATA (higher: more likely the rare class), with the stored
  standardisation applied; CSV columns are matched to the training columns by name. When DATA
  carries labels, the AUC goes to stderr.

``jaxrank bench NAME [ARGS...]``
  runs ``bench/NAME.py`` of the source repository with ``ARGS``.

Errors are one line on stderr (``jaxrank: error: ...``) and a non-zero exit code: 2 for bad
input or usage, 1 for an internal error (``--debug`` shows the traceback). A model file is
untrusted input: a damaged, truncated, foreign or tampered one is exit 2 with one line naming
the file (:func:`load_model_file`). Warnings are one line each (``jaxrank: warning: ...``).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import io as _stdio
import math
import os
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["demo", "load_model_file", "main", "save_model_file"]

PAPER_LOG2_GRID = tuple(range(-20, 11, 2))
"""The paper's λ grid, log₂ λ = −20, −18, …, 10 (seed 000 Sec. 6)."""

MODEL_FORMAT = "jaxrank-cli-model"
MODEL_VERSION = 1


def demo(*, trials: int = 3, t: float = 0.75, rho: float = 0.1, seed: int = 0, out=None) -> dict:
    """Run the simulated-data demo; returns the per-trial AUCs (in %) and timings.

    Args:
      trials: number of independent draws of the generator (the paper uses 10).
      t: class overlap (0.9 high, 0.75 medium, 0.6 low).
      rho: rare-class fraction.
      seed: base seed; trial ``k`` uses ``seed + k``.
      out: text stream for the report (default stdout).
    """
    import jax

    import jaxrank
    from jaxrank import datasets, metrics

    out = out or sys.stdout
    lams = 2.0 ** np.arange(-20, 11, 2)
    print(
        f"jaxrank {jaxrank.__version__} on {jax.devices()[0].platform.upper()}: RankRC on the "
        f"simulated data of seed 000 Sec. 6.1 (t={t}, rho={rho:.0%}, d=5; 1000 train / "
        "1000 validation / 10000 test rows)",
        file=out,
    )
    print(f"{'trial':>5} {'best log2 lam':>13} {'test AUC %':>10} {'true Bayes %':>12} "
          f"{'fit s':>6}", file=out)  # fmt: skip
    rows = []
    for k in range(trials):
        key = jax.random.key(seed + k)
        kc, ktr, kva, kte = jax.random.split(key, 4)
        centers = datasets.rare_class_centers(t, key=kc)
        Xtr, ytr = datasets.make_rare_class(1000, rho, None, centers=centers, key=ktr)
        Xva, yva = datasets.make_rare_class(1000, rho, None, centers=centers, key=kva)
        Xte, yte = datasets.make_rare_class(10000, rho, None, centers=centers, key=kte)
        mu, sd = Xtr.mean(0), Xtr.std(0)  # standardise on the training split, as the paper
        Xtr, Xva, Xte = ((A - mu) / sd for A in (Xtr, Xva, Xte))
        t0 = time.perf_counter()
        model = jaxrank.fit_rankrc(Xtr, ytr, lams)
        jax.block_until_ready(model.coef)
        seconds = time.perf_counter() - t0
        val = np.asarray(metrics.auc(yva, model.decision_function(Xva)))
        best = int(np.argmax(val))
        test = float(metrics.auc(yte, model.select(best).decision_function(Xte))) * 100
        bayes = float(metrics.auc(yte, datasets.bayes_scores(Xte * sd + mu, centers))) * 100
        rows.append((float(np.log2(lams[best])), test, bayes, seconds))
        print(f"{k:>5} {rows[-1][0]:>13.0f} {test:>10.1f} {bayes:>12.1f} {seconds:>6.2f}",
              file=out)  # fmt: skip
    tests = np.array([r[1] for r in rows])
    bayes = np.array([r[2] for r in rows])
    se = tests.std(ddof=1) / np.sqrt(len(tests)) if len(tests) > 1 else float("nan")
    print(
        f"mean test AUC {tests.mean():.1f} ± {se:.1f} (s.e.)  |  true Bayes {bayes.mean():.1f}  "
        f"|  paper (Table 2, medium overlap, 10%): RANK-RC 61.4, true Bayes 69.5",
        file=out,
    )
    return {"test_auc": tests.tolist(), "bayes_auc": bayes.tolist(),
            "seconds": [r[3] for r in rows]}  # fmt: skip


# --------------------------------------------------------------------------------------------
# Shared pieces: errors, progress, labels, standardisation
# --------------------------------------------------------------------------------------------


class _UsageError(Exception):
    """A command-line usage error (bad option or argument)."""


class _Parser(argparse.ArgumentParser):
    # argparse prints the usage block and then the error; the CLI promises one line instead.
    def error(self, message):
        raise _UsageError(f"{message} (see '{self.prog} --help')")


class _Progress:
    """A text progress bar on stderr; one step is one fit of the λ grid (a fold, a refit).

    The grid itself is solved in one batched call (DESIGN §4), so progress cannot be finer than
    one step per fit. On a terminal the bar is redrawn in place; otherwise (a log file, a pipe)
    each finished step is one line.
    """

    def __init__(self, total: int, *, enabled: bool = True, width: int = 20):
        self.total = max(int(total), 1)
        self.done = 0
        self.enabled = enabled
        self.width = width
        self.t0 = time.perf_counter()
        self._shown = 0

    @property
    def _stream(self):
        return sys.stderr

    def _tty(self) -> bool:
        isatty = getattr(self._stream, "isatty", None)
        return bool(isatty and isatty())

    def _line(self, what: str) -> str:
        filled = round(self.width * self.done / self.total)
        bar = "#" * filled + "-" * (self.width - filled)
        return (f"jaxrank: [{bar}] {self.done}/{self.total} {what} "
                f"({time.perf_counter() - self.t0:.1f} s)")  # fmt: skip

    def _draw(self, text: str, final: bool) -> None:
        if self._tty():
            pad = " " * max(self._shown - len(text), 0)
            self._stream.write("\r" + text + pad + ("\n" if final else ""))
            self._shown = 0 if final else len(text)
        elif final:
            self._stream.write(text + "\n")
        self._stream.flush()

    def start(self, what: str) -> None:
        """A step begins (shown on a terminal only)."""
        if self.enabled:
            self._draw(self._line(what + " ..."), final=False)

    def finish(self, what: str) -> None:
        """A step ended."""
        self.done += 1
        if self.enabled:
            self._draw(self._line(what), final=True)


def _one_line(message: str) -> str:
    return " ".join(str(message).split())


def _positive_float(text: str) -> float:
    """A positive number from ``0.001``, ``1e-3``, ``2^-8`` or ``2**-8`` (argparse type)."""
    m = re.fullmatch(r"\s*2\s*(?:\^|\*\*)\s*([+-]?\d+(?:\.\d*)?)\s*", text)
    try:
        value = 2.0 ** float(m.group(1)) if m else float(text)
    except OverflowError:  # 2^5000
        raise argparse.ArgumentTypeError(f"{text!r} is beyond the floating-point range") from None
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a positive number such as 0.001, 1e-3 or 2^-8, got {text!r}"
        ) from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _fmt_lam(lam: float) -> str:
    """``2^-8`` for powers of two, else the value (any float: 0, inf and NaN print as such)."""
    lam = float(lam)
    if not math.isfinite(lam) or lam <= 0:
        return f"{lam:.4g}"
    e = math.log2(lam)
    return f"2^{round(e)}" if abs(e - round(e)) < 1e-9 else f"{lam:.4g}"


def _check_grid_dtype(grid: np.ndarray, dtype, option: str) -> None:
    """Every λ must lie in the range a fit in ``dtype`` can solve (:func:`lam_range`): 1e-300 is
    0 in float32 and 1e39 inf; checked before the data is read, with the command's options."""
    from jaxrank._validation import lam_range

    lo, hi = lam_range(np.dtype(dtype))
    bad = grid[(grid < lo) | (grid > hi)]
    if bad.size:
        name = np.dtype(dtype).name
        hint = " or --dtype float64" if np.dtype(dtype).itemsize < 8 else ""
        raise ValueError(
            f"{option} {bad[0]:.4g} is outside the range a {name} fit can solve ({lo:.3g} to "
            f"{hi:.3g}): choose λ in that range{hint}."
        )


def _label_keys(y) -> np.ndarray:
    """Labels as canonical strings: numbers as ``"1"``, ``"-1"``, ``"0.5"``; text stripped.

    ``+1``, ``1`` and ``1.0`` in a CSV cell are the same class; ``True``/``False`` stay words.
    """
    y = np.asarray(y)
    if y.dtype.kind == "b":
        return np.where(y, "True", "False")
    if y.dtype.kind in "iuf":
        num = y.astype(np.float64)
    else:
        text = np.char.strip(y.astype(str))
        try:
            num = text.astype(np.float64)
        except ValueError:
            return text
    if not np.all(np.isfinite(num)):
        raise ValueError("the labels contain NaN or infinite values.")
    values, inverse = np.unique(num, return_inverse=True)
    keys = np.array([str(int(v)) if v == int(v) else repr(float(v)) for v in values])
    return keys[inverse.reshape(-1)]


def _rare_class(y, positive: str | None, where: str) -> tuple[np.ndarray, str, tuple[str, ...]]:
    """``(positive mask, positive label, both labels)`` of two-valued labels.

    The rare class is ``--positive`` when given, else the one labelled ``+1``, ``1``, ``True`` or
    ``positive`` (:func:`jaxrank._validation.check_binary_labels`).
    """
    from jaxrank._validation import check_binary_labels, label_vector

    keys = _label_keys(label_vector(y, where))
    classes = np.unique(keys)
    if positive is None:
        try:
            pos = check_binary_labels(keys, name=where)
        except ValueError as err:
            if "must be labelled" in str(err):
                raise ValueError(f"{err} Or name the rare class with --positive LABEL.") from None
            raise
    else:
        key = str(_label_keys(np.array([positive]))[0])
        if key not in classes:
            shown = ", ".join(map(repr, classes[:6].tolist()))  # '-1', not np.str_('-1')
            raise ValueError(f"--positive {positive!r} is not a label of {where} ({shown}).")
        if classes.size > 2:
            raise ValueError(
                f"{where} has {classes.size} distinct labels; a biclass ranker needs two."
            )
        pos = keys == key
        if pos.all():
            raise ValueError(
                f"{where} has one class only ({key!r}); a ranker needs both a rare (positive) "
                "and a majority class."
            )
    return pos, str(keys[pos][0]), tuple(str(c) for c in classes)


def _standardizer(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and scale of each column (population std); constant columns are centred only."""
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    # as scikit-learn's StandardScaler: a zero (or rounding-level) spread leaves the column as is
    const = scale <= 10 * np.finfo(np.float64).eps * np.maximum(np.abs(mean), 1.0)
    return mean, np.where(const, 1.0, scale)


# --------------------------------------------------------------------------------------------
# The model file
# --------------------------------------------------------------------------------------------


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


def _checksum(arrays: dict) -> str:
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
    arrays["checksum"] = np.array(_checksum(arrays))
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


def _read_model_arrays(path) -> dict:
    """The arrays of a ``jaxrank fit`` model file, every size checked before it is read.

    The file is untrusted input: the zip directory, each ``.npy`` header, the format name and
    version (exactly :data:`MODEL_VERSION`) and the checksum are checked in that order by
    :class:`jaxrank.io.Archive` (no member is ever inflated; sizes never exceed the file's),
    then every field's value (:func:`_check_model_arrays`). Any failure is a ``ValueError``
    naming ``path``.
    """
    from jaxrank import io as model_io

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such model file: {path}")
    if os.path.isdir(path):
        raise ValueError(f"{path} is a directory, not a model file.")
    with open(path, "rb") as fh:
        raw = fh.read()
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
    if str(arrays["checksum"]) != _checksum(arrays):
        raise ValueError(f"{path} is damaged: its checksum does not match its contents.")
    problem = _check_model_arrays(arrays)
    if problem:
        raise ValueError(f"{path} is damaged or not {kind}: {problem}.")
    return arrays


def _check_model_arrays(a: dict) -> str | None:
    """The first invalid field of a model file's arrays, as text, or ``None``."""
    from jaxrank._io_data import FORMATS

    d, L = a["mean"].size, a["grid"].size
    if str(a["model_dtype"]) not in ("float32", "float64"):
        return f"model_dtype is {str(a['model_dtype'])[:40]!r}, not float32 or float64"
    if d < 1 or not np.all(np.isfinite(a["mean"])):
        return "the standardisation mean is empty or not finite"
    if a["scale"].shape != (d,) or not np.all(np.isfinite(a["scale"]) & (a["scale"] > 0)):
        return f"the standardisation scale is not {d} finite numbers > 0"
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


def _model_from_arrays(arrays: dict, path="the model file") -> ModelFile:
    from jaxrank import io as model_io
    from jaxrank.fit import RankModel

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
      model: RankRC (20 basis rows), gaussian σ² = 10 kernel, λ = 2^-4, float32; solver ...
      saved ...m.npz
      0
      >>> cli.load_model_file(path).model.coef.shape
      (20,)
    """
    return _model_from_arrays(_read_model_arrays(path), os.fspath(path))


# --------------------------------------------------------------------------------------------
# jaxrank fit
# --------------------------------------------------------------------------------------------


def _labelled(table, where: str):
    if table.y is None:
        raise ValueError(f"{where} has no labels.")
    return table.y


def _holdout(pos: np.ndarray, frac: float, key) -> np.ndarray:
    """Validation mask: ``round(frac·n)`` rows of each class (at least 1, at most ``n − 1``)."""
    import jax

    val = np.zeros(pos.size, dtype=bool)
    for sub, mask, name in zip(jax.random.split(key), (pos, ~pos), ("rare", "majority"),
                               strict=True):  # fmt: skip
        rows = np.flatnonzero(mask)
        if rows.size < 2:
            raise ValueError(
                f"a validation split needs at least 2 rows of each class, the {name} class has "
                f"{rows.size}: give one λ (--lam) or a --validation file."
            )
        n = min(max(round(frac * rows.size), 1), rows.size - 1)
        perm = np.asarray(jax.random.permutation(sub, rows.size))
        val[rows[perm[:n]]] = True
    return val


def _best_index(score: np.ndarray, grid: np.ndarray) -> int:
    """Index of the largest score; ties to the larger λ (as :func:`jaxrank.select_lambda`)."""
    cand = np.flatnonzero(score == np.max(score))
    return int(cand[np.argmax(grid[cand])])


def _read_like(path, args, train, *, require_labels: bool):
    """Read ``path`` with the training file's columns, index base and label name."""
    from jaxrank import _io_data

    fmt = args.format or _io_data.detect_format(path)
    d = train.X.shape[1]
    if fmt == "csv":
        t = _io_data.read_csv(
            path,
            target=train.target,
            columns=train.feature_names,
            delimiter=args.delimiter,
            optional_target=not require_labels,
        )
    elif fmt == "libsvm":
        t = _io_data.read_libsvm(path, n_features=d, zero_based=train.zero_based)
    else:
        t = _io_data.read_npz(path, target=train.target or "y", require_target=require_labels)
    if t.X.shape[1] != d:
        raise ValueError(f"{path} has {t.X.shape[1]} feature columns, the training data {d}.")
    if require_labels and t.y is None:
        raise ValueError(f"{path} has no label column {train.target!r}.")
    return t


class _Selection(NamedTuple):
    model: object  # the scalar-λ model kept
    best: int  # its index in the grid
    score: np.ndarray  # (L,) validation AUC per λ (mean over folds with CV)
    score_se: np.ndarray  # (L,) standard error over folds, NaN otherwise
    selection: str  # "cv", "validation", "holdout" or "fixed"
    what: str | None  # how λ was scored, for the report


def _select_cv(X, pos, grid, k: int, key, fit_one, bar_of) -> _Selection:
    """Stratified k-fold CV AUC, then a refit at the best λ.

    :func:`jaxrank.select_lambda`'s protocol step by step (the same keys, folds and fits), so
    that each fold can report progress; the tests check the table and the model against it.
    """
    import jax

    from jaxrank import metrics
    from jaxrank.select import stratified_folds

    fold_key, fit_key = jax.random.split(key)
    fold = stratified_folds(pos, k, key=fold_key)
    keys = jax.random.split(fit_key, k + 1)
    bar = bar_of(k + 1)
    cv = np.empty((k, grid.size))
    for f in range(k):
        train = fold != f
        bar.start(f"fold {f + 1}/{k}: fitting {grid.size} λ")
        held = fit_one(X[train], pos[train], grid, keys[f]).decision_function(X[~train])
        cv[f] = np.asarray(metrics.auc(pos[~train], held), dtype=np.float64)
        bar.finish(f"fold {f + 1}/{k}: {grid.size} λ, held-out AUC up to {cv[f].max():.4f}")
    score = cv.mean(axis=0)
    best = _best_index(score, grid)
    what = f"refit on all {pos.size} rows at λ = {_fmt_lam(grid[best])}"
    bar.start(what)
    model = fit_one(X, pos, grid[best], keys[k])
    bar.finish(what)
    se = cv.std(axis=0, ddof=1) / math.sqrt(k)
    return _Selection(model, best, score, se, "cv", f"{k}-fold stratified CV AUC")


def _select_validation(X, pos, Xv, pos_v, grid, key, fit_one, bar) -> _Selection:
    """The grid fitted on ``X``, λ by AUC on ``Xv`` (seed 000 Sec. 6.1); no refit."""
    from jaxrank import metrics

    bar.start(f"fitting {grid.size} λ on {pos.size} rows")
    grid_model = fit_one(X, pos, grid, key)
    score = np.atleast_1d(np.asarray(metrics.auc(pos_v, grid_model.decision_function(Xv)),
                                     dtype=np.float64))  # fmt: skip
    best = _best_index(score, grid)
    model = grid_model if grid.size == 1 else grid_model.select(best)
    bar.finish(f"{grid.size} λ fitted, validation AUC up to {score.max():.4f}")
    return _Selection(model, best, score, np.full(grid.size, np.nan), "validation", None)


def _select_holdout(X, pos, grid, frac: float, key, fit_one, bar) -> _Selection:
    """λ by AUC on a stratified hold-out of ``frac`` of each class, then a refit on all rows."""
    import jax

    from jaxrank import metrics

    split_key, fit_key, refit_key = jax.random.split(key, 3)
    val = _holdout(pos, frac, split_key)
    bar.start(f"fitting {grid.size} λ on {int((~val).sum())} rows")
    held = fit_one(X[~val], pos[~val], grid, fit_key).decision_function(X[val])
    score = np.atleast_1d(np.asarray(metrics.auc(pos[val], held), dtype=np.float64))
    bar.finish(f"{grid.size} λ fitted, hold-out AUC up to {score.max():.4f}")
    best = _best_index(score, grid)
    what = f"refit on all {pos.size} rows at λ = {_fmt_lam(grid[best])}"
    bar.start(what)
    model = fit_one(X, pos, grid[best], refit_key)
    bar.finish(what)
    what = f"AUC on a stratified hold-out of {int(val.sum())} rows ({frac:.0%})"
    return _Selection(model, best, score, np.full(grid.size, np.nan), "holdout", what)


def _cmd_fit(args) -> int:
    import jax

    if args.dtype == "float64":
        # The library never switches x64 on; the command line does when asked for float64.
        jax.config.update("jax_enable_x64", True)
    import jaxrank
    from jaxrank import _io_data, kernels, metrics
    from jaxrank.solver import Status

    out = sys.stdout
    if args.cv is not None and (args.validation is not None or args.val_frac is not None):
        raise ValueError("--cv cannot be combined with --validation or --val-frac.")
    if args.validation is not None and args.val_frac is not None:
        raise ValueError("--validation and --val-frac exclude each other.")
    if args.n_basis is not None and args.basis not in ("random", "greedy"):
        raise ValueError("--n-basis applies to --basis random and greedy only.")
    if args.kappa is not None and args.basis != "greedy":
        raise ValueError("--kappa applies to --basis greedy only.")
    if args.sigma2 is not None and args.kernel != "gaussian":
        raise ValueError("--sigma2 is the Gaussian kernel's σ²; it needs --kernel gaussian.")
    if args.degree is not None and args.kernel != "poly":
        raise ValueError("--degree needs --kernel poly.")
    val_frac = 0.25 if args.val_frac is None else args.val_frac
    if not 0 < val_frac < 1:
        raise ValueError(f"--val-frac must lie in (0, 1), got {val_frac}.")
    if args.lam is not None:
        grid = np.array([args.lam], dtype=np.float64)
    elif args.lam_grid is not None:
        grid = np.array(args.lam_grid, dtype=np.float64)
    else:
        grid = 2.0 ** np.array(PAPER_LOG2_GRID, dtype=np.float64)
    if np.unique(grid).size != grid.size:
        raise ValueError("the λ grid repeats a value.")
    dtype = np.float64 if args.dtype == "float64" else np.float32
    _check_grid_dtype(grid, dtype, "--lam" if args.lam is not None else "--lam-grid value")

    # before reading the data and fitting, not after: a missing or read-only folder, a folder
    # given as the output, a device
    from jaxrank.io import check_output_path

    check_output_path(args.output)
    fmt = args.format or _io_data.detect_format(args.data)
    if fmt == "libsvm" and args.target is not None:
        raise ValueError("LIBSVM files carry the label first on each line: drop --target.")
    table = _io_data.read_table(args.data, fmt=fmt, target=args.target, delimiter=args.delimiter)
    where = f"the target column {table.target!r}" if fmt == "csv" else f"the labels of {args.data}"
    pos, positive, classes = _rare_class(_labelled(table, args.data), args.positive, where)
    X = table.X
    m, d = X.shape
    if args.no_standardize:
        mean, scale = np.zeros(d), np.ones(d)
    else:
        mean, scale = _standardizer(X)
    Xs = (X - mean) / scale

    if args.kernel == "gaussian":
        kernel = kernels.gaussian(args.sigma2)
    elif args.kernel == "linear":
        kernel = kernels.linear()
    else:
        kernel = kernels.polynomial(2 if args.degree is None else args.degree)
    extra = {} if args.n_basis is None else {"n_basis": args.n_basis}
    kappa = 100 if args.kappa is None else args.kappa

    n_greedy = args.n_basis if args.n_basis is not None else math.ceil(m / 10)

    def fit_one(Xf, yf, lam, key):
        if args.basis == "greedy":
            from jaxrank.greedy import fit_greedy

            return fit_greedy(Xf, yf, lam, n_basis=n_greedy, key=key, kappa=kappa,
                              kernel=kernel, dtype=dtype, max_iter=args.max_iter)  # fmt: skip
        return jaxrank.fit(Xf, yf, lam, basis=args.basis, kernel=kernel, key=key, dtype=dtype,
                           max_iter=args.max_iter, **extra)  # fmt: skip

    n_pos = int(pos.sum())
    print(
        f"data: {args.data} ({fmt}), {m} rows x {d} features; rare class {positive!r}: "
        f"{n_pos} rows ({n_pos / m:.1%})" + ("" if args.no_standardize else "; standardised"),
        file=out,
    )
    key = jax.random.key(args.seed)
    bar_of = lambda n: _Progress(n, enabled=not args.quiet)
    if args.cv is not None:
        sel = _select_cv(Xs, pos, grid, args.cv, key, fit_one, bar_of)
    elif args.validation is not None:
        vt = _read_like(args.validation, args, table, require_labels=True)
        keys_v = _label_keys(vt.y)
        unknown = sorted(set(keys_v.tolist()) - set(classes))
        if unknown:
            raise ValueError(
                f"{args.validation} has labels {unknown[:4]} not seen in {args.data} {classes}."
            )
        pos_v = keys_v == positive
        if pos_v.all() or not pos_v.any():
            raise ValueError(f"{args.validation} needs rows of both classes to score λ.")
        Xv = (vt.X - mean) / scale
        sel = _select_validation(Xs, pos, Xv, pos_v, grid, key, fit_one, bar_of(1))
        sel = sel._replace(what=f"AUC on {args.validation}")
    elif grid.size > 1 or args.val_frac is not None:
        sel = _select_holdout(Xs, pos, grid, val_frac, key, fit_one, bar_of(2))
    else:
        bar = bar_of(1)
        bar.start(f"fitting λ = {_fmt_lam(grid[0])} on {m} rows")
        model = fit_one(Xs, pos, grid[0], key)
        bar.finish(f"fitted λ = {_fmt_lam(grid[0])} on {m} rows")
        nan = np.full(1, np.nan)
        sel = _Selection(model, 0, nan, nan, "fixed", None)
    model, best, score, score_se, selection, what = sel

    if what is not None:
        print(f"λ by {what} over {grid.size} value(s):", file=out)
        print(f"{'lambda':>10} {'AUC':>8} {'s.e.':>7}", file=out)
        for j in np.argsort(grid):
            se = "" if np.isnan(score_se[j]) else f"{score_se[j]:7.4f}"
            mark = "  <- best" if j == best else ""
            print(f"{_fmt_lam(grid[j]):>10} {score[j]:8.4f} {se:>7}{mark}", file=out)
    names = {"rare": "RankRC", "all": "RankSVM", "random": "RANK-RND", "greedy": "greedy basis"}
    kdesc = args.kernel
    if isinstance(model.kernel, kernels.Gaussian):
        kdesc = f"gaussian σ² = {float(model.kernel.sigma2):.4g}"
    elif isinstance(model.kernel, kernels.Polynomial):
        kdesc = f"poly degree {model.kernel.degree}"
    info = model.info
    train_auc = float(metrics.auc(pos, model.decision_function(Xs)))
    print(
        f"model: {names[args.basis]} ({model.n_basis} basis rows), {kdesc} kernel, "
        f"λ = {_fmt_lam(float(model.lam))}, {args.dtype}; solver "
        f"{Status(int(info.status)).name} after {int(info.iterations)} Newton / "
        f"{int(info.cg_iterations)} CG steps; training AUC {train_auc:.4f}",
        file=out,
    )
    save_model_file(
        args.output,
        ModelFile(
            model=model,
            mean=mean,
            scale=scale,
            feature_names=table.feature_names,
            target=table.target,
            positive_label=positive,
            classes=classes,
            input_format=fmt,
            zero_based=table.zero_based,
            selection=selection,
            grid=grid,
            score=score,
            score_se=score_se,
        ),
    )
    print(f"saved {args.output}", file=out)
    return 0


# --------------------------------------------------------------------------------------------
# jaxrank predict
# --------------------------------------------------------------------------------------------


def _cmd_predict(args) -> int:
    import jax

    from jaxrank import _io_data, metrics

    arrays = _read_model_arrays(args.model)
    if str(arrays["model_dtype"]) == "float64":
        jax.config.update("jax_enable_x64", True)
    mf = _model_from_arrays(arrays, args.model)
    d = mf.mean.size
    target = mf.target if args.target is None else args.target
    fmt = args.format or _io_data.detect_format(args.data)
    if fmt == "csv":
        t = _io_data.read_csv(args.data, target=target, columns=mf.feature_names,
                              delimiter=args.delimiter, optional_target=True)  # fmt: skip
    elif fmt == "libsvm":
        t = _io_data.read_libsvm(args.data, n_features=d, zero_based=mf.zero_based)
    else:
        t = _io_data.read_npz(args.data, target=target or "y", require_target=False)
    if t.X.shape[1] != d:
        hint = " (name its label column with --target)" if fmt == "csv" and t.y is None else ""
        raise ValueError(f"{args.data} has {t.X.shape[1]} feature columns, the model {d}{hint}.")
    scores = np.asarray(mf.model.decision_function((t.X - mf.mean) / mf.scale))
    text = "\n".join(str(s) for s in scores) + "\n"
    if args.out in (None, "-"):
        sys.stdout.write(text)
    else:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    if t.y is not None and not args.quiet:
        keys = _label_keys(t.y)
        pos = keys == mf.positive_label
        if set(keys.tolist()) <= set(mf.classes) and pos.any() and not pos.all():
            auc = float(metrics.auc(pos, scores))
            print(f"jaxrank: AUC {auc:.4f} on {t.X.shape[0]} labelled rows of {args.data} "
                  f"(rare class {mf.positive_label!r}: {int(pos.sum())})",
                  file=sys.stderr)  # fmt: skip
    return 0


# --------------------------------------------------------------------------------------------
# jaxrank bench
# --------------------------------------------------------------------------------------------


def _bench_dir(explicit) -> Path:
    if explicit is not None:
        path = Path(explicit)
        if not path.is_dir():
            raise FileNotFoundError(f"--bench-dir {explicit}: no such directory")
        return path
    candidates = [Path(__file__).resolve().parent.parent / "bench", Path.cwd() / "bench"]
    for path in candidates:
        if path.is_dir():
            return path
    raise FileNotFoundError(
        "no bench/ directory found (looked in "
        + ", ".join(str(c) for c in dict.fromkeys(candidates))
        + "): the benchmarks ship with the source repository, not with the installed package; "
        "run from a clone of jaxrank or pass --bench-dir DIR"
    )


def _cmd_bench(args) -> int:
    folder = _bench_dir(args.bench_dir)
    names = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    if args.name is None:
        print(f"benchmarks in {folder}: {', '.join(names) if names else '(none)'}")
        return 0
    if args.name not in names:
        raise ValueError(
            f"no benchmark {args.name!r} in {folder}; available: {', '.join(names) or 'none'}."
        )
    return subprocess.call([sys.executable, str(folder / f"{args.name}.py"), *args.args])


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    debug = _Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the traceback of an error")  # fmt: skip
    parser = _Parser(
        prog="jaxrank",
        description="Kernel rankers that maximise AUC on rare-class data (RankRC and friends).",
        epilog="Run 'jaxrank COMMAND --help' for the options of a command. Errors are one line "
        "on stderr with exit code 2 (bad input or usage) or 1 (an internal error; --debug "
        "shows the traceback). With no command, this help is printed (exit code 0).",
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p_demo = sub.add_parser(
        "demo", help="fit RankRC on the paper's simulated data",
        description="Reproduce one cell of seed 000 Table 2 (Sec. 6.1): RankRC on simulated "
        "data (1000 training, 1000 validation and 10000 test rows), lambda chosen over the "
        "paper's grid by validation AUC, test AUC printed beside the true-Bayes AUC.",
    )  # fmt: skip
    p_demo.add_argument(
        "--trials", type=_positive_int, default=3,
        help="independent draws of the data (default 3; the paper uses 10)",
    )  # fmt: skip
    p_demo.add_argument(
        "--overlap", type=float, default=0.75,
        help="class overlap t: 0.9 high, 0.75 medium (default), 0.6 low",
    )  # fmt: skip
    p_demo.add_argument("--rho", type=float, default=0.1,
                        help="rare-class fraction of the rows (default 0.1)")  # fmt: skip
    p_demo.add_argument("--seed", type=int, default=0,
                        help="base seed; trial k draws with seed + k (default 0)")  # fmt: skip

    data = _Parser(add_help=False)
    data.add_argument("--format", choices=("csv", "libsvm", "npz"), default=None,
                      help="data format (default: from the file name, else sniffed)")  # fmt: skip
    data.add_argument("--delimiter", default=None, help="CSV field separator (default ',')")
    data.add_argument("-q", "--quiet", action="store_true", help="no progress or notes on stderr")

    p_fit = sub.add_parser(
        "fit", parents=[debug, data], help="fit a ranker on a data file and save it",
        description="Fit a kernel ranker (RankRC by default) on DATA, choosing λ over a grid; "
        "features are standardised on DATA and the scaling is saved with the model.",
    )  # fmt: skip
    p_fit.add_argument("data", metavar="DATA", help="CSV (with header), LIBSVM or .npz file")
    p_fit.add_argument(
        "--target",
        default=None,
        help="CSV label column (name or 0-based index); npz label array (y)",
    )
    p_fit.add_argument(
        "--positive",
        default=None,
        metavar="LABEL",
        help="the rare class (default: the label +1, 1, true or positive)",
    )
    p_fit.add_argument(
        "-o", "--output", required=True, metavar="MODEL.npz",
        help="where to save the model (checked before the fit)",
    )  # fmt: skip
    p_fit.add_argument(
        "--basis",
        choices=("rare", "all", "random", "greedy"),
        default="rare",
        help="rare: RankRC, all: RankSVM, random: RANK-RND, greedy: seed 001",
    )
    p_fit.add_argument(
        "--n-basis",
        type=_positive_int,
        default=None,
        help="basis size: random (default m+), greedy (default ceil(m/10))",
    )
    p_fit.add_argument(
        "--kappa",
        type=_positive_int,
        default=None,
        help="greedy: random candidates scored per added basis row (default 100, seed 001)",
    )
    lam = p_fit.add_mutually_exclusive_group()
    lam.add_argument(
        "--lam",
        type=_positive_float,
        default=None,
        metavar="λ",
        help="one λ, no selection (e.g. 2^-8 or 0.004)",
    )
    lam.add_argument(
        "--lam-grid",
        type=_positive_float,
        nargs="+",
        default=None,
        metavar="λ",
        help="λ values to choose from (default: 2^-20 2^-18 ... 2^10)",
    )
    p_fit.add_argument(
        "--cv",
        type=_positive_int,
        default=None,
        metavar="K",
        help="choose λ by stratified K-fold CV AUC (seed 000: K = 10)",
    )
    p_fit.add_argument(
        "--validation",
        default=None,
        metavar="FILE",
        help="choose λ by AUC on this labelled file (fit on DATA only)",
    )
    p_fit.add_argument(
        "--val-frac",
        type=float,
        default=None,
        metavar="F",
        help="without --cv/--validation: hold out this fraction of each class "
        "to choose λ, then refit on all rows (default 0.25)",
    )
    p_fit.add_argument(
        "--kernel", choices=("gaussian", "linear", "poly"), default="gaussian",
        help="kernel k(u, v) (default gaussian, exp(-|u - v|^2 / sigma2))",
    )  # fmt: skip
    p_fit.add_argument(
        "--sigma2",
        type=_positive_float,
        default=None,
        help="Gaussian σ² (default: mean squared pairwise distance)",
    )
    p_fit.add_argument("--degree", type=_positive_int, default=None, help="poly degree (2)")
    p_fit.add_argument("--seed", type=int, default=0, help="folds, splits, random bases")
    p_fit.add_argument(
        "--dtype", choices=("float32", "float64"), default="float32",
        help="precision of the fit (default float32; λ must lie in its range)",
    )  # fmt: skip
    p_fit.add_argument(
        "--max-iter", type=_positive_int, default=100, help="Newton steps per λ (default 100)"
    )
    p_fit.add_argument(
        "--no-standardize", action="store_true", help="take the features as they are"
    )
    p_fit.set_defaults(func=_cmd_fit)

    p_pred = sub.add_parser(
        "predict", parents=[debug, data], help="score a data file with a saved model",
        description="Print one score per row of DATA (higher: more likely the rare class).",
    )  # fmt: skip
    p_pred.add_argument("model", metavar="MODEL.npz")
    p_pred.add_argument("data", metavar="DATA")
    p_pred.add_argument("--out", default=None, metavar="FILE", help="write scores here")
    p_pred.add_argument(
        "--target",
        default=None,
        help="label column (CSV) or array (npz) of DATA, if any: left out of the "
        "features, used for the AUC (default: the training file's)",
    )
    p_pred.set_defaults(func=_cmd_predict)

    p_bench = sub.add_parser(
        "bench", parents=[debug], help="run bench/NAME.py of the source repository",
        description="Run bench/NAME.py with the remaining arguments; no NAME lists them.",
    )  # fmt: skip
    p_bench.add_argument("--bench-dir", default=None, help="folder holding the bench scripts")
    p_bench.add_argument("name", nargs="?", metavar="NAME")
    p_bench.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS")
    p_bench.set_defaults(func=_cmd_bench)
    return parser


def main(argv=None) -> int:
    """Entry point of the ``jaxrank`` console script; returns the exit code."""
    parser = _parser()
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    try:
        args = parser.parse_args(argv)
    except _UsageError as err:
        print(f"jaxrank: error: {_one_line(err)}", file=sys.stderr)
        return 2
    except SystemExit as exit_:  # --help
        return exit_.code if isinstance(exit_.code, int) else 0
    if args.command is None:  # a bare `jaxrank`: what can it do (the demo takes 15 s)
        parser.print_help()
        return 0
    debug = getattr(args, "debug", False)
    try:
        with warnings.catch_warnings():
            # any warning not collected below (the demo's) prints as one line, not Python's
            # two-line "file:line: Category: message" plus the source line; restored on exit
            warnings.showwarning = _show_warning
            if args.command == "demo":
                demo(trials=args.trials, t=args.overlap, rho=args.rho, seed=args.seed)
                return 0
            with warnings.catch_warnings(record=True) as caught:
                from jaxrank.fit import ConvergenceWarning

                warnings.simplefilter("always", ConvergenceWarning)
                code = args.func(args)
            _report_warnings(caught, quiet=getattr(args, "quiet", False))
            return code
    except KeyboardInterrupt:
        print("jaxrank: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if debug:
            raise
        if isinstance(err, OSError) and err.strerror and err.filename:
            message, code = f"{err.strerror}: {err.filename}", 2
        elif isinstance(err, ValueError | OSError | ImportError):
            message, code = str(err), 2
        else:
            message = (f"internal error ({type(err).__name__}: {err}); "
                       "rerun with --debug for the traceback")  # fmt: skip
            code = 1
        print(f"jaxrank: error: {_one_line(message)}", file=sys.stderr)
        return code


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` inside :func:`main`: ``jaxrank: warning: Category: message``."""
    stream = sys.stderr if file is None else file
    try:
        stream.write(f"jaxrank: warning: {category.__name__}: {_one_line(message)}\n")
    except (OSError, ValueError):  # a closed stream, as Python's own showwarning tolerates
        pass


def _report_warnings(caught, *, quiet: bool, limit: int = 3) -> None:
    """Each distinct warning as one ``jaxrank: warning:`` line (at most ``limit``)."""
    if quiet:
        return
    seen = list(dict.fromkeys(_one_line(w.message) for w in caught))
    for message in seen[:limit]:
        print(f"jaxrank: warning: {message}", file=sys.stderr)
    if len(seen) > limit:
        print(f"jaxrank: warning: ... and {len(seen) - limit} more", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
