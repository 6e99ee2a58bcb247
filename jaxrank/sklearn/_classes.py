"""The plain scikit-learn estimators: RankRC, RankSVM, RANK-RND, sparse AUC, Nyström and
multi-level rankers (import them from :mod:`jaxrank.sklearn`, which re-exports them; its
docstring describes their conventions)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from jaxrank import _cache
from jaxrank.bases import resolve_basis
from jaxrank.metrics import mauc
from jaxrank.multilevel import fit_multilevel
from jaxrank.sklearn._base import (
    KernelRankerParams,
    RankClassifier,
    estimator_params,
    midpoint,
    rank_scores,
)

__all__ = [
    "MultiLevelRankRC",
    "NystromRankClassifier",
    "RandomBasisRankClassifier",
    "RankRCClassifier",
    "RankSVMClassifier",
    "SparseAUCClassifier",
]


class RankRCClassifier(RankClassifier):
    """RankRC (seed 000 eq. 13): a kernel ranker over the rare-class basis, for scikit-learn.

    Takes any two labels (numbers, strings, booleans). The ranker is fitted with the rare class
    ``pos_label`` as jaxrank's positive class; scikit-learn's conventions hold on top of it:
    ``decision_function`` scores ``classes_[1]`` (negated internally when the rare class is
    ``classes_[0]``, e.g. labels ``{1, 2}`` with rare ``1``), so ``scoring="roc_auc"`` gives the
    ranker's AUC whichever way the labels sort; and
    ``predict(X) == classes_[(decision_function(X) > 0).astype(int)]``.

    Args:
      lam: the penalty λ > 0 (one value; tune it with ``GridSearchCV`` or
        :func:`jaxrank.select.select_lambda`).
      pos_label: the label of the rare class, the one whose pairs the ranker puts first.
        ``None`` (default): the minority class of the training labels; on an exact 50/50 split,
        ``classes_[1]`` (the larger label in sorted order, e.g. ``1`` of ``{0, 1}``, ``"yes"``
        of ``{"no", "yes"}``). A label absent from ``y`` raises ``ValueError`` in ``fit``.
      kernel: ``"gaussian"``, ``"linear"``, ``"polynomial"`` or a jaxrank kernel object.
      sigma2: Gaussian σ²; ``None``: the paper's heuristic on the training rows.
      eps: ε of the smoothed hinge.
      loss: ``"smoothed_hinge"`` or ``"squared_hinge"``.
      tol, max_iter, max_cg: the solver's stopping rule and caps, as in :func:`jaxrank.fit`.
      dtype: ``"float32"`` or ``"float64"`` (needs ``jax_enable_x64``).

    Attributes:
      model_: the fitted :class:`jaxrank.RankModel`; ``model_.decision_function`` is the raw
        score of the rare class.
      classes_: the two labels, sorted (``numpy.unique``).
      pos_label_: the rare-class label used (``pos_label`` or the minority class).
      threshold_: the training-prevalence threshold on the score of ``classes_[1]``:
        ``decision_function(X) = σ·model_.decision_function(X) − threshold_`` with ``σ = +1``
        if ``pos_label_`` is ``classes_[1]``, else ``−1``. It lies midway between two consecutive
        sorted training scores, with as many above it as there are rows of ``classes_[1]``.
      n_iter_: Newton (trust-region) iterations of the solve.
      n_features_in_, feature_names_in_: as in scikit-learn.

    A ranker gives no probabilities, so there is no ``predict_proba``. ``score`` is
    scikit-learn's accuracy of ``predict``; to tune or compare rankers use
    ``scoring="roc_auc"`` (e.g. in ``GridSearchCV``), which ranks by ``decision_function``.

    Example:
      >>> import numpy as np, jaxrank
      >>> from jaxrank.sklearn import RankRCClassifier
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> names = np.where(y == 1, "fraud", "ok")
      >>> est = RankRCClassifier(lam=2.0**-6).fit(X, names)
      >>> est.classes_.tolist(), str(est.pos_label_), est.decision_function(X).shape
      (['fraud', 'ok'], 'fraud', (200,))
      >>> bool((est.predict(X) == est.classes_[(est.decision_function(X) > 0).astype(int)]).all())
      True
    """

    _basis = "rare"


class RankSVMClassifier(RankClassifier):
    """Kernel RankSVM (seed 000 eq. 6, smoothed): every training row is a basis row.

    Parameters, attributes and methods as :class:`RankRCClassifier`. Needs the m × m kernel
    matrix: refused beyond the memory budget (:class:`jaxrank.MemoryBudgetError`).

    Example:
      >>> from jaxrank import datasets
      >>> from jaxrank.sklearn import RankSVMClassifier
      >>> X, y = datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> est = RankSVMClassifier(lam=2.0**-4).fit(X, y)
      >>> est.model_.basis.shape  # every training row
      (200, 5)
    """

    _basis = "all"


def _key_from(random_state) -> jax.Array:
    """``jax.random.key`` from an int, a ``numpy.random.RandomState`` or ``None``."""
    seed = random_state
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool):
        seed = check_random_state(seed).randint(np.iinfo(np.int32).max)
    return jax.random.key(int(seed))


@estimator_params
class RandomBasisRankClassifier(RankClassifier):
    """RANK-RND (seed 000 Sec. 6): a kernel ranker over ``n_basis`` random training rows.

    Parameters, attributes and methods as :class:`RankRCClassifier`, and:

    Args:
      n_basis: size of the random basis (default: the number of rare rows).
      random_state: an int (the basis is drawn with ``jax.random.key(random_state)``), a
        ``numpy.random.RandomState`` or ``None`` (a seed drawn from numpy's global state).

    Example:
      >>> from jaxrank import datasets
      >>> from jaxrank.sklearn import RandomBasisRankClassifier
      >>> X, y = datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> est = RandomBasisRankClassifier(n_basis=15, random_state=0).fit(X, y)
      >>> est.model_.basis.shape, est.decision_function(X).shape
      ((15, 5), (200,))
    """

    _basis = "random"

    n_basis: int | None = None
    random_state: Any = None

    def _basis_options(self, X=None, pos=None) -> dict:
        key = _key_from(self.random_state)
        return super()._basis_options(X, pos) | {"key": key, "n_basis": self.n_basis}


@estimator_params
class SparseAUCClassifier(RankClassifier):
    """Sparse kernel AUC (seed 001): a greedily grown basis of ``n_basis`` training rows.

    :func:`jaxrank.greedy.fit_greedy` for scikit-learn: κ random candidates per step scored by
    their exact 1-D Newton problem (seed 001 eq. 4.10), retraining on the paper's schedule,
    squared-hinge loss by default. Parameters, attributes and methods as
    :class:`RankRCClassifier`, and:

    Args:
      n_basis: basis size (``d_max`` of seed 001); ``None``: ⌈m/10⌉ (the paper suggests 5-10 %
        of the training rows).
      kappa: candidates scored per added basis function (seed 001: 100).
      loss: ``"squared_hinge"`` (seed 001 eq. 2.4, the default) or ``"smoothed_hinge"``.
      schedule: retraining schedule (:func:`jaxrank.greedy.retrain_sizes`).
      random_state: an int (candidates drawn with ``jax.random.key(random_state)``), a
        ``numpy.random.RandomState`` or ``None`` (a seed drawn from numpy's global state).

    ``n_iter_`` counts the greedy steps (basis functions added, seed 001 Algorithm 1): the final
    solve starts at the last retrain's solution and may take no Newton step at all.

    Example:
      >>> import jaxrank
      >>> from jaxrank.sklearn import SparseAUCClassifier
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> est = SparseAUCClassifier(lam=2.0**-6, n_basis=10, kappa=20, random_state=0).fit(X, y)
      >>> est.model_.n_basis, est.decision_function(X).shape
      (10, (200,))
    """

    n_basis: int | None = None
    kappa: int = 100
    loss: str = "squared_hinge"
    schedule: str = "paper"
    random_state: Any = None

    def _fit_model(self, X, pos, lam: float):
        """Grow the basis (:func:`jaxrank.greedy.fit_greedy`); ``n_iter_`` counts greedy steps
        (the final solve may take no Newton step)."""
        from jaxrank.greedy import fit_greedy

        n_basis = -(-X.shape[0] // 10) if self.n_basis is None else self.n_basis
        model = fit_greedy(
            X, pos, lam, n_basis=n_basis, kappa=self.kappa, key=_key_from(self.random_state),
            schedule=self.schedule, **self._solver_params(),
        )  # fmt: skip
        return model, model.n_basis


@estimator_params
class NystromRankClassifier(RankClassifier):
    """An R-subset kernel ranker over Nyström landmarks chosen by a strategy (seed 003, Sec. 4).

    Fits :func:`jaxrank.fit` with ``basis`` = the landmark rows chosen by
    :func:`jaxrank.bases.resolve_basis` — by seed 003 Prop. 5 the ranker of the Nyström
    approximation ``K′ = K_{·R} K_RR^† K_{R·}`` of the kernel matrix (equivalently a linear
    ranker on :func:`jaxrank.nystrom.nystrom_features`). Parameters, attributes and methods as
    :class:`RankRCClassifier`, and:

    Args:
      landmarks: ``"rare_first"`` (every rare row, then random majority rows: the order that
        minimises the projected-map bound of seed 003 Cor. 4), ``"kmeans++"`` (k-means++
        seeding on the rare class when ``n_basis < m+``, then over the majority rows) or
        ``"random"`` (RANK-RND).
      n_basis: number of landmarks (default: the number of rare rows).
      random_state: an int (landmarks drawn with ``jax.random.key(random_state)``), a
        ``numpy.random.RandomState`` or ``None`` (a seed drawn from numpy's global state).

    Attributes:
      landmarks_: ``(n_basis,)`` the training rows used as landmarks (``model_.basis_index``).

    Example:
      >>> import jaxrank
      >>> from jaxrank.sklearn import NystromRankClassifier
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> est = NystromRankClassifier(n_basis=30, random_state=0).fit(X, y)
      >>> est.landmarks_.shape, bool((y[est.landmarks_[:20]] == 1).all())
      ((30,), True)
    """

    _strategies = ("rare_first", "kmeans++", "random")

    landmarks: str = "rare_first"
    n_basis: int | None = None
    random_state: Any = None

    def _basis_options(self, X=None, pos=None) -> dict:
        if self.landmarks not in self._strategies:
            raise ValueError(
                f"landmarks must be one of {', '.join(map(repr, self._strategies))}, "
                f"got {self.landmarks!r}."
            )
        key = _key_from(self.random_state)
        # resolved here (k-means++ needs the rows), then fitted as an index basis
        idx = resolve_basis(self.landmarks, pos, key=key, n_basis=self.n_basis, X=X)
        return {"basis": idx}

    def fit(self, X, y):
        """Choose the landmarks and fit the ranker (see :meth:`RankRCClassifier.fit`).

        Returns:
          self.
        """
        _cache.enable_default_cache()  # the persistent cache for estimator users
        super().fit(X, y)
        self.landmarks_ = np.asarray(self.model_.basis_index)
        return self


@estimator_params
class MultiLevelRankRC(ClassifierMixin, KernelRankerParams):
    """Multi-level (ordinal) RankRC (seed 003 eq. 48) for scikit-learn.

    :func:`jaxrank.fit_multilevel`: one kernel ranker whose scores order the levels, with the
    basis = every row not in the majority level. The levels are the labels of ``y`` in sorted
    order (``classes_``, as ``numpy.unique`` sorts them; higher = rarer / more important): for
    integer levels only their order matters; labels of any other type (strings) are ordered as
    they sort, so name ordinal levels by integers when their names do not sort in level order.

    - ``ranking_score``: the ranking score ``f(x)`` (higher = higher level).
    - ``thresholds_`` are chosen on the training scores so that each level is predicted as often
      as it occurs there: with the training scores sorted ascending and ``N_k`` the number of
      training rows below level ``k`` (``k = 1 … R−1``), threshold ``t_k`` is midway between the
      ``N_k``-th and the ``(N_k+1)``-th smallest score. (A ranker's scores have an arbitrary
      offset and scale, so no fixed cut points exist.)
    - ``decision_function``: the cumulative margins ``D_k(x) = Σ_{j≤k} (f(x) − t_j)``,
      ``k = 0 … R−1`` (``D_0 = 0``), as an ``(n, R)`` array; with two levels scikit-learn's
      binary convention, the ``(n,)`` column ``D_1 = f − t_1``. The increments ``f − t_k`` fall
      with ``k`` (the thresholds ascend), so ``D`` is concave in ``k`` and its first maximum is
      at ``#{k: f(x) > t_k}``, the number of thresholds below the score.
    - ``predict``: ``classes_[argmax_k D_k(x)] = classes_[#{k: f(x) > t_k}]`` (for two levels
      ``classes_[(decision_function(X) > 0).astype(int)]``), as scikit-learn requires.
    - ``score``: the MAUC of seed 003 (the fraction of correctly ordered cross-level pairs,
      :func:`jaxrank.metrics.mauc`) of ``ranking_score``, not accuracy; it is what
      ``GridSearchCV`` maximises by default. Being a classifier, cross-validation splits are
      stratified by level.

    Args:
      lam: the penalty λ > 0 (one value).
      majority: the majority level (a label of ``y``), left out of the basis (default: the
        lowest level, ``classes_[0]``, as in the paper).
      kernel, sigma2, eps, loss, tol, max_iter, max_cg, dtype: as :class:`RankRCClassifier`.

    Attributes:
      model_: the fitted :class:`jaxrank.RankModel`, fitted on the level indices
        ``0 … R−1`` (the positions of the labels in ``classes_``).
      classes_: the levels, sorted.
      thresholds_: ``(R−1,)`` ascending thresholds on ``ranking_score`` (float64).
      n_iter_: Newton (trust-region) iterations.
      n_features_in_, feature_names_in_: as in scikit-learn.

    Example:
      >>> import jax
      >>> from jaxrank.multilevel import make_ordinal
      >>> from jaxrank.sklearn import MultiLevelRankRC
      >>> X, lv = make_ordinal(300, key=jax.random.key(0))
      >>> est = MultiLevelRankRC(lam=2.0**-6).fit(X, lv)
      >>> est.classes_.tolist(), est.thresholds_.shape, est.score(X, lv) > 0.7
      ([0, 1, 2, 3], (3,), True)
      >>> est.decision_function(X[:2]).shape
      (2, 4)
    """

    majority: Any = None

    def fit(self, X, y):
        """Fit the ordinal ranker on ``X`` (taken as given) and levels ``y`` (ordered as they
        sort).

        Returns:
          self.

        Raises:
          ValueError: fewer than two levels, ``y`` not class labels, ``majority`` not one of
            the levels, or a bad parameter.
        """
        _cache.enable_default_cache()  # the persistent cache for estimator users
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32])
        check_classification_targets(y)
        lam = self._one_lam()
        levels, index, counts = np.unique(y, return_inverse=True, return_counts=True)
        if levels.size < 2:
            raise ValueError(
                f"y has one class (level) only ({levels[0]!r}); a multi-level ranker needs at "
                "least two ordinal levels."
            )
        if self.majority is None:
            majority = 0
        else:
            scalar = np.ndim(self.majority) == 0
            hits = [i for i, v in enumerate(levels) if scalar and bool(v == self.majority)]
            if not hits:
                raise ValueError(
                    f"majority={self.majority!r} is not one of the levels {levels.tolist()!r}."
                )
            majority = hits[0]
        # fitted on the level indices, so that any sortable labels are levels
        self.model_ = fit_multilevel(X, index, lam, majority=majority, **self._solver_params())
        self.n_iter_ = int(self.model_.info.iterations)
        self.classes_ = levels
        scores = np.sort(rank_scores(self.model_, X))
        self.thresholds_ = midpoint(scores, np.cumsum(counts)[:-1])  # N_k: rows below level k
        return self

    def ranking_score(self, X) -> np.ndarray:
        """The ordinal ranking score ``f(x)`` of each row (``model_.decision_function``): higher
        means a higher level. Rows are scored in fixed-size blocks, so a row's score does not
        depend on the other rows of ``X``.

        Returns:
          ``(n,)`` float64 array.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        return rank_scores(self.model_, X)

    def _margins(self, X) -> np.ndarray:
        """``(n, R)`` cumulative margins ``D_k = Σ_{j≤k} (f − t_j)``, ``D_0 = 0``."""
        steps = self.ranking_score(X)[:, None] - self.thresholds_[None, :]
        return np.concatenate([np.zeros((steps.shape[0], 1)), np.cumsum(steps, axis=1)], axis=1)

    def decision_function(self, X) -> np.ndarray:
        """Cumulative margins ``D_k(x) = Σ_{j≤k} (f(x) − t_j)`` of the levels (class notes).

        Returns:
          ``(n, R)`` float64 array whose row-wise argmax is the ``predict`` level; for two levels
          the ``(n,)`` array ``f(x) − t_1`` (positive where ``predict`` gives ``classes_[1]``).
        """
        margins = self._margins(X)
        return margins[:, 1] if self.classes_.size == 2 else margins

    def predict(self, X) -> np.ndarray:
        """Level ``classes_[argmax_k D_k(x)]``, i.e. ``classes_[#{k: f(x) > t_k}]``.

        The argmax of the ``float64`` margins equals the threshold count for a float32 model
        exactly (the increments are exact differences of the float32 score and the thresholds);
        for a float64 model up to rounding when a score lies within ~1e-16 relative of a
        threshold. ``predict`` is defined by the argmax, so it always agrees with
        ``decision_function``.
        """
        level = np.argmax(self._margins(X), axis=1)  # checks fitted before classes_ is read
        return self.classes_[level]

    def score(self, X, y, sample_weight=None) -> float:
        """MAUC of ``ranking_score(X)`` against the levels ``y`` (seed 003, after eq. 48).

        ``sample_weight`` is not supported (MAUC counts pairs).

        Raises:
          ValueError: ``sample_weight`` given, or a label of ``y`` not among ``classes_``.
        """
        if sample_weight is not None:
            raise ValueError("MultiLevelRankRC.score does not support sample_weight.")
        scores = self.ranking_score(X)
        y = np.asarray(y)
        index = np.clip(np.searchsorted(self.classes_, y), 0, self.classes_.size - 1)
        if y.shape != scores.shape or not np.all(self.classes_[index] == y):
            raise ValueError(
                f"y must hold {scores.shape[0]} labels among the fitted levels "
                f"{self.classes_.tolist()!r}."
            )
        return float(mauc(index, scores))


# Named by their public path, as before the move into this module: pickles name
# jaxrank.sklearn.<class>, and doctest and the API reference find them in jaxrank.sklearn.
for _cls in (
    RankRCClassifier,
    RankSVMClassifier,
    RandomBasisRankClassifier,
    SparseAUCClassifier,
    NystromRankClassifier,
    MultiLevelRankRC,
):
    _cls.__module__ = "jaxrank.sklearn"
del _cls
