"""The shared face of jaxrank's scikit-learn estimators: parameters, labels, scoring, threshold.

Below the plain estimators (``jaxrank/sklearn/_classes.py``) and ``RankRCClassifierCV``
(``jaxrank/sklearn/_cv.py``), which both build on
:class:`RankClassifier`: the label handling (``classes_``, ``pos_label``, the rare class),
chunked scoring (:func:`scores`) and the training-prevalence threshold (:func:`midpoint`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import check_is_fitted, validate_data
except ImportError as err:  # pragma: no cover - exercised only without scikit-learn
    raise ImportError(
        "jaxrank.sklearn needs scikit-learn >= 1.6: pip install -U 'scikit-learn>=1.6'"
    ) from err


from jaxrank import _cache
from jaxrank import kernels as _kernels
from jaxrank._validation import check_lam
from jaxrank.fit import fit

# Kernel entries k(x, basis_r) per scoring call: 4096 rows for up to 256 basis rows, fewer for
# larger bases, so one row scored alone costs at most ~1M kernel entries.
SCORE_ENTRIES = 2**20


def block_rows(model) -> int:
    """Rows per scoring block for ``model``: a power of two in [64, 4096], ≈ 2²⁰ / n_basis.

    A function of the model alone (never of the rows scored), so every row of every call goes
    through the same compiled program."""
    rows = SCORE_ENTRIES // max(int(model.n_basis), 1)
    return int(min(4096, max(64, 2 ** (max(rows, 1).bit_length() - 1))))


def rank_scores(model, X) -> np.ndarray:
    """``model.decision_function(X)`` as float64, evaluated in zero-padded blocks of exactly
    :func:`block_rows` rows.

    scikit-learn asks that a row's score not depend on the batch it is scored in
    (``check_methods_subset_invariance``, atol 1e-7). XLA picks different product kernels for
    different row counts, so in float32 a row scored alone and in a batch differed by ~1e-6; one
    fixed shape makes each row's score a function of that row alone (and compiles once per
    model, whatever the number of rows). Measured on 2 shared CPU cores (200 basis rows,
    4096-row blocks): 2·10⁵ rows in 1.0-1.4x the time of one direct call, one row in ~2 ms
    against ~0.2 ms. float64
    output so that a threshold halfway between two float32 scores is exact (:func:`midpoint`).
    """
    rows = block_rows(model)
    n = X.shape[0]
    Xp = np.zeros((-(-n // rows) * rows, X.shape[1]), X.dtype)
    Xp[:n] = X
    out = [
        np.asarray(model.decision_function(Xp[i : i + rows]), np.float64)
        for i in range(0, Xp.shape[0], rows)
    ]
    return np.concatenate(out)[:n]


def midpoint(sorted_scores: np.ndarray, n_below) -> np.ndarray:
    """Thresholds halfway between the ``n_below``-th and ``(n_below + 1)``-th smallest scores.

    A score ``s`` then lies above threshold ``t`` iff ``s − t > 0`` (IEEE subtraction keeps the
    sign), so exactly ``len − n_below`` training scores lie above it when the two neighbours
    differ. If they are adjacent floats the midpoint may round up onto the upper one; it is then
    moved down onto the lower one (``s > t`` still holds for the upper).
    """
    lo, hi = sorted_scores[n_below - 1], sorted_scores[n_below]
    t = lo + (hi - lo) / 2
    return np.where(t >= hi, lo, t)


def rare_index(pos_label, classes: np.ndarray, counts: np.ndarray) -> int:
    """The index in ``classes`` of the rare class: ``pos_label``, or the minority class
    (``1`` on a tie)."""
    if pos_label is None:
        return 0 if counts[0] < counts[1] else 1
    if np.ndim(pos_label) != 0:
        raise ValueError(f"pos_label must be one label, got {pos_label!r}.")
    hits = [i for i, c in enumerate(classes) if bool(c == pos_label)]
    if not hits:
        raise ValueError(
            f"pos_label={pos_label!r} is not one of the labels of y {classes.tolist()!r}."
        )
    return hits[0]


def score_sign(classes, pos_label) -> float:
    """+1 when the rare class ``pos_label`` is ``classes[1]``, −1 when it is ``classes[0]``."""
    return 1.0 if classes[1] == pos_label else -1.0


#: The estimators' parameters are dataclass fields: the generated ``__init__`` stores each
#: parameter unchanged under its own name and has the explicit signature scikit-learn reads
#: (``get_params``, ``clone``), so parameters shared by several estimators are declared once, in
#: the class that introduces them. ``eq=False`` and ``repr=False`` keep scikit-learn's identity
#: comparison, hashing and ``__repr__``; every parameter but the first (``lam``) is keyword-only.
#: A subclass that adds parameters is decorated with ``estimator_params`` too.
estimator_params = dataclasses.dataclass(eq=False, repr=False, kw_only=True)


def positional(default):
    """A field that may also be given by position (the first parameter, e.g. ``lam``)."""
    return dataclasses.field(default=default, kw_only=False)


@estimator_params
class KernelRankerParams(BaseEstimator):
    """The parameters every kernel-ranker estimator shares, declared once (``lam``, ``kernel``,
    ``sigma2``, ``eps``, ``loss``, ``tol``, ``max_iter``, ``max_cg``, ``dtype``), and what they
    make of them: the kernel they name and the fitters' keyword arguments."""

    lam: float = positional(2.0**-8)
    kernel: Any = "gaussian"
    sigma2: float | None = None
    eps: float = 0.5
    loss: str = "smoothed_hinge"
    tol: float = 1e-6
    max_iter: int = 100
    max_cg: int = 25
    dtype: str = "float32"

    def _kernel(self):
        if self.sigma2 is None:
            return self.kernel
        if self.kernel in ("binary", "ard"):
            # the scales from the training rows at fit time (kernels.binary_scales), σ² given
            return _kernels.ARDGaussian(sigma2=_kernels.gaussian(self.sigma2).sigma2)
        if self.kernel not in ("gaussian", "rbf"):
            raise ValueError(
                f"sigma2 is the Gaussian kernel's σ²; it cannot be set with kernel={self.kernel!r}."
            )
        return _kernels.gaussian(self.sigma2)

    def _solver_params(self) -> dict:
        """The fitters' keyword arguments named by these parameters (``kernel`` resolved by
        :meth:`_kernel`)."""
        return dict(kernel=self._kernel(), eps=self.eps, loss=self.loss, tol=self.tol,
                    max_iter=self.max_iter, max_cg=self.max_cg, dtype=self.dtype)  # fmt: skip

    def _one_lam(self) -> float:
        """``lam`` as one float; ``ValueError`` for a grid (or a bad λ, as :func:`check_lam`)."""
        lam, scalar = check_lam(self.lam)
        if not scalar:
            raise ValueError(
                "lam must be one value here; tune it with GridSearchCV or "
                "jaxrank.select.select_lambda."
            )
        return float(lam[0])


@estimator_params
class RankClassifier(ClassifierMixin, KernelRankerParams):
    """Shared code of the jaxrank estimators; subclasses set ``_basis``.

    Parameters are named as in :func:`jaxrank.fit`; ``kernel`` is ``"gaussian"``, ``"binary"``
    (binary-aware, :func:`jaxrank.kernels.binary_scales`), ``"linear"``, ``"polynomial"`` or a
    jaxrank kernel object (e.g. :func:`jaxrank.kernels.ard`), and ``sigma2`` (Gaussian kinds
    only) is σ², ``None`` for the paper's heuristic on the training rows.
    """

    _basis: ClassVar[str]  # "rare", "all" or "random": the basis argument of jaxrank.fit

    pos_label: Any = None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # a biclass ranker: two-valued labels only
        return tags

    def _basis_options(self, X=None, pos=None) -> dict:
        """``basis`` (and ``key``, ``n_basis``) for :func:`jaxrank.fit`; ``X`` and ``pos`` (the
        validated training rows and rare-class mask) for strategies that need them."""
        return {"basis": self._basis}

    def _fit_model(self, X, pos, lam: float):
        """The fitted :class:`~jaxrank.model.RankModel` and its iteration count (``n_iter_``)."""
        model = fit(X, pos, lam, **self._solver_params(), **self._basis_options(X, pos))
        return model, int(model.info.iterations)

    def fit(self, X, y):
        """Fit the ranker on ``X`` (taken as given) and any two-valued labels ``y``.

        The rare class is ``pos_label`` (default: the minority class of ``y``; on an exact 50/50
        split, ``classes_[1]``, the larger label in sorted order). The ranker is fitted with the
        rare class as jaxrank's positive class (:func:`jaxrank.fit`), then ``threshold_`` is set
        so that on the training rows as many are predicted ``classes_[1]`` as there are rows of
        ``classes_[1]`` (up to ties).

        Returns:
          self.

        Raises:
          ValueError: ``y`` not two-valued (one class, or more than two), not class labels,
            ``pos_label`` not one of the labels, or a bad parameter.
        """
        _cache.enable_default_cache()  # the persistent cache for estimator users
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32])
        check_classification_targets(y)
        classes, index, counts = np.unique(y, return_inverse=True, return_counts=True)
        if classes.size == 1:
            raise ValueError(
                f"y has one class only ({classes.tolist()[0]!r}); a ranker needs two classes (a "
                "rare and a majority one)."
            )
        if classes.size > 2:
            raise ValueError(
                "Only binary classification is supported (a biclass ranker); y has "
                f"{classes.size} classes. For ordinal levels use MultiLevelRankRC."
            )
        i_pos = self._rare_index(classes, counts)
        lam = self._one_lam()
        pos = index == i_pos  # jaxrank's positive (rare) class
        self.model_, self.n_iter_ = self._fit_model(X, pos, lam)
        self.classes_ = classes
        self.pos_label_ = classes[i_pos]
        # The training-prevalence threshold on the score of classes_[1]: as many training scores
        # lie above it as there are rows of classes_[1] (midway between two sorted scores).
        scores = np.sort(self._sign() * rank_scores(self.model_, X))
        self.threshold_ = float(midpoint(scores, int(counts[0])))
        return self

    def _rare_index(self, classes: np.ndarray, counts: np.ndarray) -> int:
        return rare_index(self.pos_label, classes, counts)

    def _sign(self) -> float:
        return score_sign(self.classes_, self.pos_label_)

    def decision_function(self, X) -> np.ndarray:
        """The score of ``classes_[1]``, shifted so that ``predict`` is ``score > 0``.

        ``decision_function(X) = σ·f(X) − threshold_``, with ``f = model_.decision_function``
        (the rare-class ranking score) and ``σ = +1`` when the rare class ``pos_label_`` is
        ``classes_[1]``, ``−1`` when it is ``classes_[0]``. So larger always means more likely
        ``classes_[1]``, as scikit-learn's ``roc_auc`` scoring expects, and
        ``predict(X) == classes_[(decision_function(X) > 0).astype(int)]``. The shift by the
        constant ``threshold_`` changes no ranking and no AUC. Rows are scored in fixed-size
        blocks, so a row's score does not depend on the other rows of ``X``.

        Returns:
          ``(n,)`` float64 array.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        return self._sign() * rank_scores(self.model_, X) - self.threshold_

    def predict(self, X) -> np.ndarray:
        """``classes_[1]`` where ``decision_function(X) > 0``, else ``classes_[0]``.

        A ranker's scores have an arbitrary offset; the decision function is shifted by the
        training-prevalence threshold ``threshold_`` (on the training rows as many are predicted
        ``classes_[1]`` as there are rows of it, up to ties).
        """
        above = self.decision_function(X) > 0  # checks fitted before classes_ is read
        return self.classes_[above.astype(int)]
