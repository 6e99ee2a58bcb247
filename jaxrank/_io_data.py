"""Readers for the command line's data files: CSV with a header row, LIBSVM/svmlight, ``.npz``.

numpy and the standard library only (no pandas). Every reader returns a :class:`Table` of float64
features and the labels as read; a bad file raises a ``ValueError`` that names the file, the line
and the column (a missing file: ``FileNotFoundError``), so that the CLI can print one clear line.
Nothing is standardised here: that is the CLI's job (docs/design.md §2).

- CSV: the first row names the columns; ``target`` picks the label column by name or by
  (0-based, possibly negative) index. Every other selected column must hold finite numbers, or
  ``True``/``False`` in every cell (read as 1/0: pandas writes bool columns so).
- LIBSVM / svmlight: ``label idx:value idx:value ... [# comment]``; indices one-based unless
  some index is 0 (scikit-learn's ``zero_based="auto"`` rule); absent entries are 0.
- ``.npz``: arrays ``X`` (2-D) and, for training, the label array (``y`` unless named otherwise).
"""

from __future__ import annotations

import csv
import itertools
import math
import os
import warnings
from typing import NamedTuple

import numpy as np

__all__ = [
    "FORMATS",
    "Table",
    "check_delimiter",
    "dense_budget",
    "detect_format",
    "not_utf8",
    "read_csv",
    "read_libsvm",
    "read_npz",
    "read_table",
]

FORMATS = ("csv", "libsvm", "npz")
_SUFFIXES = {
    ".csv": "csv",
    ".tsv": "csv",
    ".npz": "npz",
    ".svm": "libsvm",
    ".libsvm": "libsvm",
    ".svmlight": "libsvm",
}


class Table(NamedTuple):
    """Rows read from a data file.

    Attributes:
      X: ``(n, d)`` float64 features, all finite.
      y: ``(n,)`` labels as read (strings from CSV, float64 from LIBSVM, the stored array from
        ``.npz``), or ``None`` when the file has no label column / array.
      feature_names: column names of ``X`` (CSV), or ``None``.
      target: name of the label column or array, or ``None``.
      format: ``"csv"``, ``"libsvm"`` or ``"npz"``.
      zero_based: LIBSVM only: whether feature indices were read as 0-based (else ``None``).
    """

    X: np.ndarray
    y: np.ndarray | None
    feature_names: tuple[str, ...] | None
    target: str | None
    format: str
    zero_based: bool | None = None


def _check_file(path) -> str:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such file: {path}")
    if os.path.isdir(path):
        raise ValueError(f"{path} is a directory, not a data file.")
    return path


def check_delimiter(delimiter) -> str:
    """``delimiter`` if it is one character a CSV field can be split on; ``ValueError`` naming
    ``--delimiter`` otherwise (the csv module's own ``TypeError`` names no option)."""
    if not isinstance(delimiter, str) or len(delimiter) != 1 or delimiter in '\r\n"':
        raise ValueError(
            f"--delimiter must be one character other than a quote or a line break, got "
            f"{delimiter!r}."
        )
    return delimiter


def not_utf8(path: str, err: UnicodeDecodeError) -> str:
    """The message for a data file that is not UTF-8 text (naming the file and the likely
    encoding: a UTF-16 byte-order mark, or a byte of latin-1 / cp1252 text)."""
    with open(path, "rb") as fh:
        head = fh.read(2)
    if head in (b"\xff\xfe", b"\xfe\xff"):
        what = "UTF-16 text (it starts with a UTF-16 byte-order mark)"
        fix = "iconv -f UTF-16 -t UTF-8"
    else:
        what = f"not UTF-8 (byte 0x{err.object[err.start]:02x} at offset {err.start})"
        fix = "iconv -f LATIN1 -t UTF-8 (for latin-1 / Windows-1252 text)"
    return f"{path} is {what}; jaxrank reads UTF-8 CSV files: convert it, e.g. with {fix}."


def detect_format(path) -> str:
    """``"csv"``, ``"libsvm"`` or ``"npz"`` from the file name, else from the first data line.

    ``.csv``/``.tsv`` are CSV, ``.npz`` is npz, ``.svm``/``.libsvm``/``.svmlight`` are LIBSVM;
    any other name is sniffed: a zip archive is npz, a first non-comment line whose second field
    looks like ``index:value`` is LIBSVM, anything else CSV.
    """
    path = _check_file(path)
    suffix = os.path.splitext(path)[1].lower()
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    with open(path, "rb") as fh:
        if fh.read(4) == b"PK\x03\x04":
            return "npz"
    with open(path, encoding="utf-8-sig", errors="replace") as fh:
        for line in fh:
            body = line.split("#", 1)[0].split()
            if body:
                return "libsvm" if len(body) > 1 and ":" in body[1] else "csv"
    raise ValueError(f"{path} is empty.")


def _column_index(header: list[str], target, path: str) -> int:
    """Index of ``target`` in ``header``: a column name first, else an integer index."""
    if isinstance(target, str) and target in header:
        return header.index(target)
    try:
        k = int(target)
    except (TypeError, ValueError):
        shown = ", ".join(repr(h) for h in header[:12]) + (", ..." if len(header) > 12 else "")
        raise ValueError(
            f"{path}: no column named {target!r} (columns: {shown}); --target takes a column "
            "name or a 0-based index."
        ) from None
    if not -len(header) <= k < len(header):
        raise ValueError(
            f"{path}: target column index {k} is out of range for {len(header)} columns."
        )
    return k % len(header)


#: A column whose every cell is one of these (any case) reads as 0/1: pandas writes a bool
#: column, such as ``get_dummies``' one-hot columns since pandas 2, as ``True``/``False``.
_BOOL_CELLS = {"false": 0.0, "true": 1.0}


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _parse_column(cells: np.ndarray, lines: np.ndarray, name: str, path: str) -> np.ndarray:
    """Float64 values of one CSV column; errors name the line and the column. A column of
    ``True``/``False`` cells (any case, every cell) reads as 1/0."""
    try:
        col = cells.astype(np.float64)
    except (ValueError, TypeError):
        words = [str(c).strip().lower() for c in cells]
        is_bool = [w in _BOOL_CELLS for w in words]
        if all(is_bool):
            return np.array([_BOOL_CELLS[w] for w in words], np.float64)
        if any(is_bool) and not any(_is_number(w) for w in words):
            i = is_bool.index(False)
            what = "an empty cell (missing value)" if not words[i] else repr(str(cells[i]).strip())
            raise ValueError(
                f"{path} line {lines[i]}, column {name!r}: a True/False column holds {what}."
            ) from None
        i = next(i for i, cell in enumerate(cells) if not _is_number(cell))
        what = "an empty cell (missing value)" if not cells[i].strip() else repr(str(cells[i]))
        raise ValueError(
            f"{path} line {lines[i]}, column {name!r}: cannot read {what} as a number."
        ) from None
    bad = np.flatnonzero(~np.isfinite(col))
    if bad.size:
        i = bad[0]
        raise ValueError(
            f"{path} line {lines[i]}, column {name!r}: {str(cells[i]).strip()!r} is not a finite "
            f"number ({bad.size} such cell(s) in this column); impute or drop those rows."
        )
    return col


def read_csv(
    path, *, target=None, columns=None, delimiter: str | None = None, optional_target: bool = False
) -> Table:
    """Read a CSV file whose first row names the columns.

    Args:
      path: the file (UTF-8; a byte-order mark is skipped).
      target: label column, by name or 0-based index (negative counts from the end); ``None``:
        no label column (every column is a feature unless ``columns`` says otherwise).
      columns: feature columns to take, by name, in this order (prediction on a fitted model);
        ``None``: every column but the target. With ``columns`` the target is optional: read if
        present, ignored otherwise.
      delimiter: field separator; default tab for ``.tsv`` files, else comma.
      optional_target: a ``target`` name that is not a column means "no labels" (prediction)
        instead of an error; it is then matched by name only, never as an index.

    Returns:
      A :class:`Table` with ``y`` the target cells as stripped strings.

    Raises:
      FileNotFoundError: no such file.
      ValueError: no header, duplicate column names, unknown target or feature column, a row
        with the wrong number of fields, no data rows, or a feature cell that is not a finite
        number (the message names the line and the column). A feature column whose every cell
        is ``True`` or ``False`` (any case) reads as 1/0.

    Example:
      >>> import os, tempfile
      >>> path = os.path.join(tempfile.mkdtemp(), "d.csv")
      >>> _ = open(path, "w").write("a,b,label\\n1,2,yes\\n3,4,no\\n")
      >>> t = read_csv(path, target="label")
      >>> t.X.tolist(), t.y.tolist(), t.feature_names
      ([[1.0, 2.0], [3.0, 4.0]], ['yes', 'no'], ('a', 'b'))
    """
    path = _check_file(path)
    if delimiter is None:
        delimiter = "\t" if path.lower().endswith(".tsv") else ","
    check_delimiter(delimiter)
    rows: list[list[str]] = []
    lines: list[int] = []
    with open(path, encoding="utf-8-sig", newline="") as fh:
        reader = csv.reader(fh, delimiter=delimiter)
        header = None
        try:
            for row in reader:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue  # a blank line
                if header is None:
                    header = [c.strip() for c in row]
                    continue
                rows.append(row)
                lines.append(reader.line_num)
        except csv.Error as err:
            raise ValueError(f"{path} line {reader.line_num}: {err}.") from None
        except UnicodeDecodeError as err:
            raise ValueError(not_utf8(path, err)) from None
    if header is None:
        raise ValueError(f"{path} is empty (a CSV file needs a header row naming the columns).")
    seen = set()
    for name in header:
        if name in seen:
            raise ValueError(f"{path}: duplicate column name {name!r} in the header.")
        seen.add(name)
    if not rows:
        raise ValueError(f"{path} has a header but no data rows.")
    width = len(header)
    for k, row in enumerate(rows):
        if len(row) != width:
            raise ValueError(
                f"{path} line {lines[k]} has {len(row)} fields, the header has {width}."
            )

    t = None
    if columns is None:
        if optional_target:
            t = header.index(target) if target in header else None
        elif target is not None:
            t = _column_index(header, target, path)
        feats = [k for k in range(len(header)) if k != t]
    else:
        missing = [c for c in columns if c not in header]
        if missing:
            raise ValueError(
                f"{path} lacks the feature column(s) {', '.join(map(repr, missing[:8]))} that "
                "the model was fitted on."
            )
        feats = [header.index(c) for c in columns]
        if target is not None and target in header:
            t = header.index(target)
    if not feats:
        raise ValueError(f"{path} has no feature column besides the target.")
    # one object array of the cells (no per-cell numpy strings): float() per cell in C loops
    table = np.fromiter(itertools.chain.from_iterable(rows), dtype=object,
                        count=len(rows) * width).reshape(len(rows), width)  # fmt: skip
    line_no = np.asarray(lines)
    X = np.empty((len(rows), len(feats)), dtype=np.float64)
    for j, k in enumerate(feats):
        X[:, j] = _parse_column(table[:, k], line_no, header[k], path)
    y = None if t is None else np.array([c.strip() for c in table[:, t]], dtype=str)
    return Table(
        X=X,
        y=y,
        feature_names=tuple(header[k] for k in feats),
        target=None if t is None else header[t],
        format="csv",
    )


def dense_budget() -> int:
    """Bytes a dense data array may take: 60 % of physical memory (16 GiB where unknown), the
    CPU budget of :func:`jaxrank.kernels.default_memory_budget`."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 16 * 2**30
    return int(0.6 * total)


def _libsvm_fast(path: str):
    """``(labels, rows, cols, values)`` of a well-formed LIBSVM file, or ``None``.

    One pass of string splitting, then all numbers at once (``np.fromstring``): about 3x faster
    than the line-by-line parse, which runs instead whenever this finds anything unexpected.
    """
    labels: list[str] = []
    counts: list[int] = []
    tokens: list[str] = []
    with open(path, encoding="utf-8-sig", errors="replace") as fh:
        for line in fh:
            body = line.split("#", 1)[0].split()
            if body:
                labels.append(body[0])
                counts.append(len(body) - 1)
                tokens.extend(body[1:])
    if not labels:
        return None
    text = " ".join(tokens)
    try:
        y = np.array(labels).astype(np.float64)
    except ValueError:
        return None
    if text.count(":") != len(tokens):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a malformed number: fromstring stops short and warns
        try:
            nums = np.fromstring(text.replace(":", " "), dtype=np.float64, sep=" ")
        except ValueError:
            return None
    if nums.size != 2 * len(tokens):
        return None
    idx, val = nums[0::2], nums[1::2]
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(val)) and np.all(idx >= 0)):
        return None
    if not np.all(idx == np.floor(idx)) or (idx.size and idx.max() >= 2**53):
        return None
    rows = np.repeat(np.arange(len(labels), dtype=np.int64), counts)
    cols = idx.astype(np.int64)
    same_line = rows[1:] == rows[:-1]
    if not np.all((cols[1:] > cols[:-1]) | ~same_line):  # indices not increasing in a line
        key = np.sort(rows * (int(cols.max()) + 1) + cols)
        if np.any(key[1:] == key[:-1]):
            return None  # a repeated index within a line
    return y, rows, cols, val


def _libsvm_checked(path: str):
    """The line-by-line LIBSVM parse: ``(labels, rows, cols, values)`` or a precise error."""
    labels: list[float] = []
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    with open(path, encoding="utf-8-sig", errors="replace") as fh:
        for line_no, line in enumerate(fh, start=1):
            body = line.split("#", 1)[0].split()
            if not body:
                continue
            try:
                label = float(body[0])
            except ValueError:
                raise ValueError(
                    f"{path} line {line_no}: cannot read the label {body[0]!r} as a number."
                ) from None
            idx = np.empty(len(body) - 1, dtype=np.int64)
            val = np.empty(len(body) - 1, dtype=np.float64)
            for k, field in enumerate(body[1:]):
                head, sep, tail = field.partition(":")
                if head == "qid":
                    raise ValueError(
                        f"{path} line {line_no}: qid fields (query groups) are not supported; "
                        "jaxrank ranks the rare class against the rest."
                    )
                try:
                    if not sep:
                        raise ValueError
                    idx[k] = int(head)
                    val[k] = float(tail)
                except ValueError:
                    raise ValueError(
                        f"{path} line {line_no}: {field!r} is not an index:value pair."
                    ) from None
            if idx.size and (idx.min() < 0):
                raise ValueError(f"{path} line {line_no}: negative feature index {idx.min()}.")
            if np.unique(idx).size != idx.size:
                raise ValueError(f"{path} line {line_no}: a feature index is repeated.")
            if not np.all(np.isfinite(val)):
                raise ValueError(f"{path} line {line_no}: a feature value is not finite.")
            if not np.isfinite(label):
                raise ValueError(f"{path} line {line_no}: the label is not finite.")
            labels.append(label)
            rows.append(np.full(idx.size, len(labels) - 1, dtype=np.int64))
            cols.append(idx)
            vals.append(val)
    if not labels:
        raise ValueError(f"{path} has no data lines.")
    return (
        np.asarray(labels, dtype=np.float64),
        np.concatenate(rows),
        np.concatenate(cols),
        np.concatenate(vals),
    )


def read_libsvm(path, *, n_features: int | None = None, zero_based: bool | None = None) -> Table:
    """Read a LIBSVM / svmlight file into a dense array.

    Each non-empty line is ``label idx:value idx:value ...``; ``#`` starts a comment. Absent
    entries are 0. ``qid:`` fields (query groups of ranking files) are refused: jaxrank ranks
    one rare class against the rest, not within queries.

    Args:
      path: the file.
      n_features: number of columns (prediction: the model's); default the largest index + 1.
      zero_based: whether indices start at 0; ``None``: 0-based if some index is 0, else 1-based
        (scikit-learn's ``load_svmlight_file(zero_based="auto")``).

    Returns:
      A :class:`Table` with float64 labels ``y``.

    Raises:
      FileNotFoundError: no such file.
      ValueError: a malformed line (bad label, ``idx:value`` pair, repeated or negative index),
        an index beyond ``n_features``, a non-finite value, or no data lines.

    Example:
      >>> import os, tempfile
      >>> path = os.path.join(tempfile.mkdtemp(), "d.svm")
      >>> _ = open(path, "w").write("+1 1:0.5 3:2\\n-1 2:1  # comment\\n")
      >>> t = read_libsvm(path)
      >>> t.X.tolist(), t.y.tolist()
      ([[0.5, 0.0, 2.0], [0.0, 1.0, 0.0]], [1.0, -1.0])
    """
    path = _check_file(path)
    parsed = _libsvm_fast(path)
    if parsed is None:  # something is off: the checked parse names the line and the problem
        parsed = _libsvm_checked(path)
    labels, r, c, v = parsed
    if zero_based is None:
        zero_based = bool(c.size and c.min() == 0)
    if not zero_based:
        if c.size and c.min() == 0:
            raise ValueError(f"{path}: index 0 in a file read as 1-based.")
        c = c - 1
    top = int(c.max()) + 1 if c.size else 0
    if n_features is None:
        n_features = top
    elif top > n_features:
        shift = 0 if zero_based else 1
        raise ValueError(
            f"{path} has feature index {top - 1 + shift}, beyond the {n_features} features the "
            "model was fitted on."
        )
    if n_features == 0:
        raise ValueError(f"{path} has no feature values at all.")
    need = labels.size * n_features * 8
    if need > dense_budget():  # before allocating: index 10⁹ would ask for hundreds of GiB
        shift = 0 if zero_based else 1
        raise ValueError(
            f"{path} has feature index {top - 1 + shift}: as the dense ({labels.size}, "
            f"{n_features}) float64 array the kernels need it takes {need / 2**30:.3g} GiB, more "
            f"than {dense_budget() / 2**30:.3g} GiB (60 % of this machine's memory). Renumber "
            "the features densely."
        )
    X = np.zeros((labels.size, n_features), dtype=np.float64)
    X[r, c] = v
    return Table(
        X=X,
        y=labels,
        feature_names=None,
        target=None,
        format="libsvm",
        zero_based=bool(zero_based),
    )


def read_npz(path, *, target="y", require_target: bool = True) -> Table:
    """Read arrays ``X`` (2-D, numeric, finite) and the label array ``target`` from ``.npz``.

    Args:
      path: the file (``numpy.savez``; object arrays are refused: no pickle).
      target: name of the label array.
      require_target: refuse a file without it (training); else ``y`` is ``None`` when absent.

    Raises:
      FileNotFoundError: no such file.
      ValueError: not an npz archive, no ``X`` or ``target`` array, ``X`` not 2-D numeric and
        finite, or labels of another length.

    Example:
      >>> import os, tempfile, numpy as np
      >>> path = os.path.join(tempfile.mkdtemp(), "d.npz")
      >>> np.savez(path, X=np.eye(2), y=np.array([1, -1]))
      >>> read_npz(path).y.tolist()
      [1, -1]
    """
    path = _check_file(path)
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic == b"\x93NUMPY":
        raise ValueError(f"{path} holds a single array, not an .npz archive with X and y.")
    try:
        archive = np.load(path, allow_pickle=False)
    except Exception as err:  # BadZipFile, a damaged directory, text: all "not readable"
        raise ValueError(f"{path} is not a readable .npz archive ({brief(err)}).") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{path} is not a readable .npz archive.")
    with archive:
        names = list(archive.files)
        if "X" not in names:
            raise ValueError(f"{path} has no array 'X' (arrays: {', '.join(names) or 'none'}).")
        try:
            _check_npz_member(archive.zip, "X")
            X = archive["X"]
            y = None
            if target in names:
                _check_npz_member(archive.zip, target)
                y = archive[target]
        except ValueError as err:
            raise ValueError(f"{path}: {err}") from None
        except Exception as err:  # a CRC mismatch, a damaged member: the file is damaged
            raise ValueError(f"{path} is damaged ({brief(err)}).") from None
    if y is None and require_target:
        raise ValueError(
            f"{path} has no label array {target!r} (arrays: {', '.join(names)}); name it with "
            "--target."
        )
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{path}: X must be a non-empty 2-D array, got shape {X.shape}.")
    if X.dtype.kind not in "biuf":
        raise ValueError(f"{path}: X must be numeric, got dtype {X.dtype}.")
    X = np.asarray(X, dtype=np.float64)
    bad = np.argwhere(~np.isfinite(X))
    if bad.size:
        raise ValueError(
            f"{path}: X[{bad[0][0]}, {bad[0][1]}] is not a finite number ({len(bad)} such "
            "value(s)); impute or drop those rows."
        )
    if y is not None:
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(
                f"{path}: the label array {target!r} has shape {y.shape}, X has {X.shape[0]} rows."
            )
    return Table(X=X, y=y, feature_names=None, target=target if y is not None else None,
                 format="npz")  # fmt: skip


def npy_header(f) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """``(shape, fortran_order, dtype, data offset)`` from the start of ``.npy`` bytes.

    Reads the header only (numpy's own parser, literal evaluation, at most 10 000 bytes), so a
    caller can check the claimed shape against what it expects before any data is read.

    Raises:
      ValueError: not ``.npy`` bytes, an unsupported version or a malformed header.
    """
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise ValueError(f"unsupported .npy version {version}")
    return shape, fortran, dtype, f.tell()


def brief(err: BaseException) -> str:
    """``Type: message`` of an exception on one line (at most 200 characters of message)."""
    text = " ".join(str(err).split()) or "no detail"
    return f"{type(err).__name__}: {text[:200]}"


def _check_npz_member(zf, name: str) -> None:
    """Refuse member ``name`` whose ``.npy`` header disagrees with its size in the zip directory.

    Only the header is inflated (a few hundred bytes): a header claiming ``(100000000000,)``
    floats is refused here instead of failing with MemoryError when the array is allocated.
    Data files may be compressed (``numpy.savez_compressed``); their declared size is the
    user's data and is not bounded.
    """
    info = zf.getinfo(f"{name}.npy")
    with zf.open(info) as f:
        shape, _, dtype, offset = npy_header(f)
    if dtype.hasobject:
        raise ValueError(f"array {name!r} holds Python objects (dtype object); save numbers.")
    need = math.prod(shape) * dtype.itemsize
    if info.file_size - offset != need:
        raise ValueError(
            f"array {name!r} is damaged: its header says {shape} of {dtype}, {need} bytes, the "
            f"archive holds {info.file_size - offset}."
        )


def read_table(
    path,
    *,
    fmt: str | None = None,
    target=None,
    columns=None,
    delimiter: str | None = None,
    n_features: int | None = None,
    zero_based: bool | None = None,
    require_target: bool = True,
) -> Table:
    """Read any supported file; ``fmt`` (``"csv"``, ``"libsvm"``, ``"npz"``) or detected.

    ``target`` is the CSV label column (required when ``require_target`` and no ``columns``) or
    the npz label array (default ``"y"``); LIBSVM files carry their label first on each line.
    The other arguments go to the reader of the format.
    """
    path = _check_file(path)
    fmt = detect_format(path) if fmt is None else fmt
    if fmt not in FORMATS:
        raise ValueError(f"unknown data format {fmt!r}; use one of {', '.join(FORMATS)}.")
    if fmt == "csv":
        if target is None and columns is None and require_target:
            raise ValueError(
                f"{path} is CSV: name its label column with --target (a header name or a "
                "0-based index)."
            )
        return read_csv(path, target=target, columns=columns, delimiter=delimiter)
    if fmt == "libsvm":
        return read_libsvm(path, n_features=n_features, zero_based=zero_based)
    return read_npz(path, target="y" if target is None else str(target),
                    require_target=require_target)  # fmt: skip
