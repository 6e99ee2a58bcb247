"""scikit-learn estimators over :func:`jaxrank.fit`: RankRC, RankSVM and RANK-RND rankers.

Thin faces (DESIGN §8): every number comes from :func:`jaxrank.fit`; these classes only map
scikit-learn's conventions (``classes_``, ``n_features_in_``, ``get_params``) onto it. They
work inside ``Pipeline`` and ``GridSearchCV``; as everywhere in jaxrank nothing is standardised
silently, so put a scaler first (the paper standardises every data set)::

    import numpy as np
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
    from jaxrank.sklearn import RankRCClassifier

    pipe = Pipeline([("scale", StandardScaler()), ("rank", RankRCClassifier())])
    search = GridSearchCV(pipe, {"rank__lam": 2.0 ** np.arange(-20, 11, 2)}, scoring="roc_auc")

scikit-learn is an optional dependency (``pip install scikit-learn``).
"""

from __future__ import annotations

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.utils.multiclass import check_classification_targets, type_of_target
    from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data
except ImportError as err:  # pragma: no cover - exercised only without scikit-learn
    raise ImportError(
        "jaxrank.sklearn needs scikit-learn >= 1.6: pip install -U 'scikit-learn>=1.6'"
    ) from err

import jax

from jaxrank import kernels as _kernels
from jaxrank._validation import check_binary_labels, check_lam
from jaxrank.bases import resolve_basis
from jaxrank.fit import fit
from jaxrank.metrics import mauc
from jaxrank.multilevel import fit_multilevel

__all__ = [
    "MultiLevelRankRC",
    "NystromRankClassifier",
    "RandomBasisRankClassifier",
    "RankRCClassifier",
    "RankSVMClassifier",
    "SparseAUCClassifier",
]


class _KernelRankerParams(BaseEstimator):
    """The parameters every jaxrank estimator shares (stored as given, as scikit-learn asks)
    and the kernel they name."""

    def __init__(
        self,
        lam=2.0**-8,
        *,
        kernel="gaussian",
        sigma2=None,
        eps=0.5,
        loss="smoothed_hinge",
        tol=1e-6,
        max_iter=100,
        max_cg=25,
        dtype="float32",
    ):
        self.lam = lam
        self.kernel = kernel
        self.sigma2 = sigma2
        self.eps = eps
        self.loss = loss
        self.tol = tol
        self.max_iter = max_iter
        self.max_cg = max_cg
        self.dtype = dtype

    def _kernel(self):
        if self.sigma2 is None:
            return self.kernel
        if self.kernel not in ("gaussian", "rbf"):
            raise ValueError(
                f"sigma2 is the Gaussian kernel's σ²; it cannot be set with kernel={self.kernel!r}."
            )
        return _kernels.gaussian(self.sigma2)


class _RankClassifier(ClassifierMixin, _KernelRankerParams):
    """Shared code of the jaxrank estimators; subclasses set ``_basis``.

    Parameters are named as in :func:`jaxrank.fit`; ``kernel`` is ``"gaussian"``, ``"linear"``,
    ``"polynomial"`` or a jaxrank kernel object, and ``sigma2`` (Gaussian only) is σ², ``None``
    for the paper's heuristic on the training rows.
    """

    _basis: str  # "rare", "all" or "random": the basis argument of jaxrank.fit

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # a biclass ranker: two-valued labels only
        return tags

    def _basis_options(self, X=None, pos=None) -> dict:
        """``basis`` (and ``key``, ``n_basis``) for :func:`jaxrank.fit`; ``X`` and ``pos`` (the
        validated training rows and rare-class mask) for strategies that need them."""
        return {"basis": self._basis}

    def _fit_model(self, X, pos, lam: float):
        """The fitted :class:`~jaxrank.fit.RankModel` and its iteration count (``n_iter_``)."""
        model = fit(
            X, pos, lam, kernel=self._kernel(), eps=self.eps, loss=self.loss, tol=self.tol,
            max_iter=self.max_iter, max_cg=self.max_cg, dtype=self.dtype,
            **self._basis_options(X, pos),
        )  # fmt: skip
        return model, int(model.info.iterations)

    def fit(self, X, y):
        """Fit the ranker on ``X`` (taken as given) and two-valued labels ``y``.

        The rare class is the one labelled ``+1``, ``1`` or ``True`` (as in :func:`jaxrank.fit`);
        other label sets raise ``ValueError``.

        Returns:
          self.
        """
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32])
        check_classification_targets(y)
        y_type = type_of_target(y, input_name="y")
        if y_type != "binary":
            raise ValueError(
                "Only binary classification is supported (a biclass ranker); the type of the "
                f"target is {y_type!r} ({np.unique(y).size} classes)."
            )
        pos = check_binary_labels(y)
        lam, scalar = check_lam(self.lam)
        if not scalar:
            raise ValueError(
                "lam must be one value here; tune it with GridSearchCV or "
                "jaxrank.select.select_lambda."
            )
        self.model_, self.n_iter_ = self._fit_model(X, pos, float(lam[0]))
        self.classes_ = np.unique(y)
        self.pos_label_ = y[pos][0]
        scores = self.decision_function(X)
        # The training-prevalence quantile: as many training scores lie above it as there are
        # rows of classes_[1] (midway between two consecutive sorted training scores).
        n_low = int(np.sum(~pos)) if self.classes_[1] == self.pos_label_ else int(np.sum(pos))
        low = np.sort(scores)[n_low - 1 : n_low + 1]
        self.threshold_ = float(low.mean())
        return self

    def decision_function(self, X) -> np.ndarray:
        """The ranking score of each row: larger means more likely ``classes_[1]``.

        This is ``model_.decision_function(X)``, the score of the rare class, when the rare class
        is ``classes_[1]`` (labels ``{0, 1}``, ``{-1, 1}``, ``{False, True}``); when the rare
        class sorts first (e.g. ``{1, 2}``, rare = 1) it is negated, keeping scikit-learn's
        convention that scores rank ``classes_[1]`` first (``roc_auc`` scoring relies on it).
        The offset is arbitrary: only the order is meaningful (AUC).

        Returns:
          ``(n,)`` float array.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        scores = np.asarray(self.model_.decision_function(X))
        return scores if self.classes_[1] == self.pos_label_ else -scores

    def predict(self, X) -> np.ndarray:
        """``classes_[1]`` where ``decision_function(X) > threshold_``, else ``classes_[0]``.

        A ranker's scores have an arbitrary offset, so 0 is no threshold: ``threshold_`` is the
        training-score quantile that matches the training prevalence (on the training rows, as
        many are predicted rare as there are rare rows, up to ties).
        """
        above = self.decision_function(X) > self.threshold_
        return self.classes_[above.astype(int)]


class RankRCClassifier(_RankClassifier):
    """RankRC (seed 000 eq. 13): a kernel ranker over the rare-class basis, for scikit-learn.

    Args:
      lam: the penalty λ > 0 (one value; tune it with ``GridSearchCV`` or
        :func:`jaxrank.select.select_lambda`).
      kernel: ``"gaussian"``, ``"linear"``, ``"polynomial"`` or a jaxrank kernel object.
      sigma2: Gaussian σ²; ``None``: the paper's heuristic on the training rows.
      eps: ε of the smoothed hinge.
      loss: ``"smoothed_hinge"`` or ``"squared_hinge"``.
      tol, max_iter, max_cg: the solver's stopping rule and caps, as in :func:`jaxrank.fit`.
      dtype: ``"float32"`` or ``"float64"`` (needs ``jax_enable_x64``).

    Attributes:
      model_: the fitted :class:`jaxrank.RankModel`.
      classes_: the two labels, sorted; ``decision_function`` ranks ``classes_[1]`` first.
      pos_label_: the rare-class label (``+1``, ``1`` or ``True``).
      threshold_: the ``predict`` threshold, on the ``decision_function`` scale.
      n_iter_: Newton (trust-region) iterations of the solve.
      n_features_in_, feature_names_in_: as in scikit-learn.

    A ranker gives no probabilities, so there is no ``predict_proba``. ``score`` is
    scikit-learn's accuracy of ``predict``; to tune or compare rankers use
    ``scoring="roc_auc"`` (e.g. in ``GridSearchCV``), which ranks by ``decision_function``.
    ``predict`` thresholds at ``threshold_``, not at 0, so ``decision_function(X) > 0`` is not
    ``predict(X)``.

    Example:
      >>> import jaxrank
      >>> from jaxrank.sklearn import RankRCClassifier
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> RankRCClassifier(lam=2.0**-6).fit(X, y).decision_function(X).shape
      (200,)
    """

    _basis = "rare"


class RankSVMClassifier(_RankClassifier):
    """Kernel RankSVM (seed 000 eq. 6, smoothed): every training row is a basis row.

    Parameters, attributes and methods as :class:`RankRCClassifier`. Needs the m × m kernel
    matrix: refused beyond the memory budget (:class:`jaxrank.MemoryBudgetError`).
    """

    _basis = "all"


class RandomBasisRankClassifier(_RankClassifier):
    """RANK-RND (seed 000 Sec. 6): a kernel ranker over ``n_basis`` random training rows.

    Parameters, attributes and methods as :class:`RankRCClassifier`, and:

    Args:
      n_basis: size of the random basis (default: the number of rare rows).
      random_state: an int (the basis is drawn with ``jax.random.key(random_state)``), a
        ``numpy.random.RandomState`` or ``None`` (a seed drawn from numpy's global state).
    """

    _basis = "random"

    def __init__(
        self,
        lam=2.0**-8,
        *,
        kernel="gaussian",
        sigma2=None,
        eps=0.5,
        loss="smoothed_hinge",
        tol=1e-6,
        max_iter=100,
        max_cg=25,
        dtype="float32",
        n_basis=None,
        random_state=None,
    ):
        super().__init__(
            lam, kernel=kernel, sigma2=sigma2, eps=eps, loss=loss, tol=tol,
            max_iter=max_iter, max_cg=max_cg, dtype=dtype,
        )  # fmt: skip
        self.n_basis = n_basis
        self.random_state = random_state

    def _basis_options(self, X=None, pos=None) -> dict:
        seed = self.random_state
        if not isinstance(seed, int | np.integer) or isinstance(seed, bool):
            seed = check_random_state(seed).randint(np.iinfo(np.int32).max)
        key = jax.random.key(int(seed))
        return super()._basis_options(X, pos) | {"key": key, "n_basis": self.n_basis}


class SparseAUCClassifier(_RankClassifier):
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

    def __init__(
        self,
        lam=2.0**-8,
        *,
        n_basis=None,
        kappa=100,
        kernel="gaussian",
        sigma2=None,
        eps=0.5,
        loss="squared_hinge",
        schedule="paper",
        tol=1e-6,
        max_iter=100,
        max_cg=25,
        dtype="float32",
        random_state=None,
    ):
        super().__init__(
            lam, kernel=kernel, sigma2=sigma2, eps=eps, loss=loss, tol=tol,
            max_iter=max_iter, max_cg=max_cg, dtype=dtype,
        )  # fmt: skip
        self.n_basis = n_basis
        self.kappa = kappa
        self.schedule = schedule
        self.random_state = random_state

    def _fit_model(self, X, pos, lam: float):
        """Grow the basis (:func:`jaxrank.greedy.fit_greedy`); ``n_iter_`` counts greedy steps
        (the final solve may take no Newton step)."""
        from jaxrank.greedy import fit_greedy

        n_basis = -(-X.shape[0] // 10) if self.n_basis is None else self.n_basis
        seed = self.random_state
        if not isinstance(seed, int | np.integer) or isinstance(seed, bool):
            seed = check_random_state(seed).randint(np.iinfo(np.int32).max)
        model = fit_greedy(
            X, pos, lam, n_basis=n_basis, kappa=self.kappa, key=jax.random.key(int(seed)),
            kernel=self._kernel(), loss=self.loss, eps=self.eps, schedule=self.schedule,
            tol=self.tol, max_iter=self.max_iter, max_cg=self.max_cg, dtype=self.dtype,
        )  # fmt: skip
        return model, model.n_basis


def _key_from(random_state) -> jax.Array:
    """``jax.random.key`` from an int, a ``numpy.random.RandomState`` or ``None``."""
    seed = random_state
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool):
        seed = check_random_state(seed).randint(np.iinfo(np.int32).max)
    return jax.random.key(int(seed))


class NystromRankClassifier(_RankClassifier):
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

    @classmethod
    def _xfail_checks(cls) -> dict:
        """scikit-learn's ``check_estimator`` checks that cannot pass, with the reason (for
        ``expected_failed_checks=``; scikit-learn's tags hold no per-check failures)."""
        return {
            "check_classifiers_train": (
                "predict thresholds decision_function at threshold_ (the training-prevalence "
                "quantile), not at 0: a ranker's scores have an arbitrary offset"
            ),
            "check_classifiers_classes": (
                "labels such as 'one'/'two' name no rare class; jaxrank needs the rare class "
                "labelled +1, 1 or True and refuses other label sets with a ValueError"
            ),
            "check_methods_subset_invariance": (
                "float32 scores (the default dtype): a row scored alone and in a batch goes "
                "through different matrix-product kernels (~1e-6 apart, above the check's 1e-7)"
            ),
        }

    def __init__(
        self,
        lam=2.0**-8,
        *,
        landmarks="rare_first",
        n_basis=None,
        kernel="gaussian",
        sigma2=None,
        eps=0.5,
        loss="smoothed_hinge",
        tol=1e-6,
        max_iter=100,
        max_cg=25,
        dtype="float32",
        random_state=None,
    ):
        super().__init__(
            lam, kernel=kernel, sigma2=sigma2, eps=eps, loss=loss, tol=tol,
            max_iter=max_iter, max_cg=max_cg, dtype=dtype,
        )  # fmt: skip
        self.landmarks = landmarks
        self.n_basis = n_basis
        self.random_state = random_state

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
        super().fit(X, y)
        self.landmarks_ = np.asarray(self.model_.basis_index)
        return self


class MultiLevelRankRC(ClassifierMixin, _KernelRankerParams):
    """Multi-level (ordinal) RankRC (seed 003 eq. 48) for scikit-learn.

    :func:`jaxrank.fit_multilevel`: one kernel ranker whose scores order the levels, with the
    basis = every row not in the majority level. ``y`` holds integer ordinal levels (higher =
    rarer / more important; only their order matters).

    - ``decision_function``: the ranking score (higher = higher level).
    - ``predict``: a level by thresholds on the score. ``thresholds_`` are chosen on the training
      scores so that each level is predicted as often as it occurs there: with the training
      scores sorted ascending and ``N_k`` the number of training rows below level ``k``
      (``k = 1 … R−1``), threshold ``t_k`` is midway between the ``N_k``-th and the
      ``(N_k+1)``-th smallest score; a row scoring ``s`` gets level ``classes_[#{k: s > t_k}]``.
      (A ranker's scores have an arbitrary offset and scale, so no fixed cut points exist.)
    - ``score``: the MAUC of seed 003 (the fraction of correctly ordered cross-level pairs,
      :func:`jaxrank.metrics.mauc`), not accuracy; it is what ``GridSearchCV`` maximises by
      default. Being a classifier, cross-validation splits are stratified by level.

    Args:
      lam: the penalty λ > 0 (one value).
      majority: the majority level, left out of the basis (default: the lowest level, as in the
        paper).
      kernel, sigma2, eps, loss, tol, max_iter, max_cg, dtype: as :class:`RankRCClassifier`.

    Attributes:
      model_: the fitted :class:`jaxrank.RankModel`.
      classes_: the levels, ascending.
      thresholds_: ``(R−1,)`` ascending thresholds of ``predict``.
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
    """

    @classmethod
    def _xfail_checks(cls) -> dict:
        """scikit-learn's ``check_estimator`` checks that cannot pass, with the reason (for
        ``expected_failed_checks=``; scikit-learn's tags hold no per-check failures)."""
        return {
            "check_classifiers_train": (
                "predict cuts the score at thresholds_ matched to the training level counts, "
                "not at 0 (a ranker's scores have an arbitrary offset), so with two classes "
                "decision_function > 0 is not predict == classes_[1]"
            ),
            "check_classifiers_classes": (
                "labels must be integer ordinal levels (their order is the ranking); string "
                "labels are refused with a ValueError"
            ),
            "check_methods_subset_invariance": (
                "float32 scores (the default dtype): a row scored alone and in a batch goes "
                "through different matrix-product kernels (~1e-6 apart, above the check's 1e-7)"
            ),
        }

    def __init__(
        self,
        lam=2.0**-8,
        *,
        majority=None,
        kernel="gaussian",
        sigma2=None,
        eps=0.5,
        loss="smoothed_hinge",
        tol=1e-6,
        max_iter=100,
        max_cg=25,
        dtype="float32",
    ):
        super().__init__(
            lam, kernel=kernel, sigma2=sigma2, eps=eps, loss=loss, tol=tol,
            max_iter=max_iter, max_cg=max_cg, dtype=dtype,
        )  # fmt: skip
        self.majority = majority

    def fit(self, X, y):
        """Fit the ordinal ranker on ``X`` (taken as given) and integer levels ``y``.

        Returns:
          self.
        """
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32])
        check_classification_targets(y)
        lam, scalar = check_lam(self.lam)
        if not scalar:
            raise ValueError(
                "lam must be one value here; tune it with GridSearchCV or "
                "jaxrank.select.select_lambda."
            )
        levels = np.unique(y)
        if levels.size < 2:
            raise ValueError(
                f"y has one class (level) only ({levels[0]!r}); a multi-level ranker needs at "
                "least two ordinal levels."
            )
        majority = levels[0] if self.majority is None else self.majority
        self.model_ = fit_multilevel(
            X, y, float(lam[0]), majority=majority, kernel=self._kernel(), eps=self.eps,
            loss=self.loss, tol=self.tol, max_iter=self.max_iter, max_cg=self.max_cg,
            dtype=self.dtype,
        )  # fmt: skip
        self.n_iter_ = int(self.model_.info.iterations)
        self.classes_ = levels
        scores = np.sort(np.asarray(self.model_.decision_function(X)))
        below = np.cumsum([np.sum(y == v) for v in levels])[:-1]  # N_k, rows below level k
        self.thresholds_ = (scores[below - 1] + scores[below]) / 2
        return self

    def decision_function(self, X) -> np.ndarray:
        """The ranking score of each row: higher means a higher level.

        Returns:
          ``(n,)`` float array.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        return np.asarray(self.model_.decision_function(X))

    def predict(self, X) -> np.ndarray:
        """Level ``classes_[#{k: score > thresholds_[k]}]`` of each row (see the class notes)."""
        scores = self.decision_function(X)
        return self.classes_[np.searchsorted(self.thresholds_, scores, side="left")]

    def score(self, X, y, sample_weight=None) -> float:
        """MAUC of ``decision_function(X)`` against the levels ``y`` (seed 003, after eq. 48).

        ``sample_weight`` is not supported (MAUC counts pairs).
        """
        if sample_weight is not None:
            raise ValueError("MultiLevelRankRC.score does not support sample_weight.")
        return float(mauc(np.asarray(y), self.decision_function(X)))
