"""The command line's shared pieces: usage errors, the argument parser, progress lines, number
parsing, labels and the rare class, standardisation (:mod:`jaxrank.cli`)."""

from __future__ import annotations

import argparse
import math
import re
import sys
import time

import numpy as np

__all__ = [
    "PAPER_LOG2_GRID",
    "Parser",
    "Progress",
    "UsageError",
    "check_grid_dtype",
    "delimiter_char",
    "fmt_lam",
    "label_keys",
    "one_line",
    "positive_float",
    "positive_int",
    "rare_class",
    "same_file",
    "seed_int",
    "standardise",
    "standardizer",
]

PAPER_LOG2_GRID = tuple(range(-20, 11, 2))
"""The paper's λ grid, log₂ λ = −20, −18, …, 10 (seed 000 Sec. 6)."""


class UsageError(Exception):
    """A command-line usage error (bad option or argument)."""


class Parser(argparse.ArgumentParser):
    # argparse prints the usage block and then the error; the CLI promises one line instead.
    def error(self, message):
        raise UsageError(f"{message} (see '{self.prog} --help')")


class Progress:
    """A text progress bar on stderr; one step is one fit of the λ grid (a fold, a refit).

    The grid itself is solved in one batched call (docs/design.md §4), so progress cannot be finer
    than one step per fit. On a terminal the bar is redrawn in place; otherwise (a log file, a pipe)
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


def one_line(message: str) -> str:
    return " ".join(str(message).split())


def positive_float(text: str) -> float:
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


def seed_int(text: str) -> int:
    """A seed for ``jax.random.key``: an integer in the int64 range (argparse type), checked
    before the data is read."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer seed, got {text!r}") from None
    if not -(2**63) <= value < 2**63:
        raise argparse.ArgumentTypeError(
            f"a seed must lie in [-2^63, 2^63 - 1] (a JAX key's 64 bits), got {text[:40]!r}"
        )
    return value


def delimiter_char(text: str) -> str:
    """A CSV field separator: one character (argparse type; ``\\t`` is accepted for a tab)."""
    from jaxrank._io_data import check_delimiter

    text = "\t" if text == "\\t" else text
    try:
        return check_delimiter(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected one character other than a quote or a line break, got {text!r}"
        ) from None


def same_file(a, b) -> bool:
    """Whether the paths ``a`` and ``b`` name one existing file (through links too)."""
    import os

    try:
        return os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b)
    except OSError:
        return False


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def fmt_lam(lam: float) -> str:
    """``2^-8`` for powers of two, else the value (any float: 0, inf and NaN print as such)."""
    lam = float(lam)
    if not math.isfinite(lam) or lam <= 0:
        return f"{lam:.4g}"
    e = math.log2(lam)
    return f"2^{round(e)}" if abs(e - round(e)) < 1e-9 else f"{lam:.4g}"


def check_grid_dtype(grid: np.ndarray, dtype, option: str) -> None:
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


def label_keys(y) -> np.ndarray:
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


def rare_class(y, positive: str | None, where: str) -> tuple[np.ndarray, str, tuple[str, ...]]:
    """``(positive mask, positive label, both labels)`` of two-valued labels.

    The rare class is ``--positive`` when given, else the one labelled ``+1``, ``1``, ``True`` or
    ``positive`` (:func:`jaxrank._validation.check_binary_labels`).
    """
    from jaxrank._validation import check_binary_labels, label_vector

    y = label_vector(y, where)
    if y.dtype.kind == "U":  # CSV cells: an empty one is a missing label, not a third class
        empty = np.flatnonzero(np.char.str_len(np.char.strip(y)) == 0)
        if empty.size:
            raise ValueError(
                f"{where} has {empty.size} empty cell(s) (missing labels; the first in data row "
                f"{empty[0] + 1}, the header not counted): drop those rows or label them."
            )
    keys = label_keys(y)
    classes = np.unique(keys)
    if positive is None:
        try:
            pos = check_binary_labels(keys, name=where)
        except ValueError as err:
            if "must be labelled" in str(err):
                raise ValueError(f"{err} Or name the rare class with --positive LABEL.") from None
            raise
    else:
        key = str(label_keys(np.array([positive]))[0])
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


def standardizer(X=None, *, mean=None, std=None) -> tuple[np.ndarray, np.ndarray]:
    """Mean and scale of each column (population std): the one standardiser of the command line
    (one process or several) and the benches, with one rule for constant columns: centred only.

    Args:
      X: ``(n, d)`` rows; or, instead, ``mean`` and ``std``: the columns' mean and population
        standard deviation computed elsewhere (the distributed command line pools them over
        processes).

    Returns:
      ``(mean, scale)``, both ``(d,)``: standardised rows are ``(X - mean) / scale``.
    """
    if X is not None:
        mean, std = X.mean(axis=0), X.std(axis=0)
    # as scikit-learn's StandardScaler: a zero (or rounding-level) spread leaves the column as is
    const = std <= 10 * np.finfo(np.float64).eps * np.maximum(np.abs(mean), 1.0)
    return mean, np.where(const, 1.0, std)


def standardise(Xtr: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """``Xtr`` and ``others`` centred and scaled by :func:`standardizer` of the training rows
    ``Xtr`` (what the benches call on a split)."""
    mean, scale = standardizer(Xtr)
    return [(A - mean) / scale for A in (Xtr, *others)]
