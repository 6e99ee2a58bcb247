"""``RankRCClassifierCV``: the ranker with its λ, σ² and basis chosen inside ``fit``.

Kept apart from :mod:`jaxrank.sklearn` (which re-exports it; import it from there) so that the
search code and the plain estimators evolve separately. The numbers come from
:mod:`jaxrank._cv`; this class only maps scikit-learn's conventions onto it, reusing the label,
``pos_label``, scoring and threshold code the other estimators share
(``jaxrank/sklearn/_base.py``).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_random_state, validate_data

from jaxrank import _ard, _cache, _cv
from jaxrank import kernels as _kernels
from jaxrank._validation import check_lam
from jaxrank.sklearn._base import (
    RankClassifier,
    estimator_params,
    midpoint,
    positional,
    rank_scores,
    rare_index,
    score_sign,
)

__all__ = [
    "DEFAULT_LAMS",
    "DEFAULT_SIGMA2_FACTORS",
    "KERNELS",
    "KERNEL_MARGIN_SE",
    "MAX_SIGMA2_FACTOR",
    "MIN_LAM",
    "RankRCClassifierCV",
]

#: λ grid searched by default: ``2^k``, k = −20, −18, …, 10 (seed 000 Sec. 6).
DEFAULT_LAMS = tuple(2.0 ** np.arange(-20, 11, 2))
#: σ² searched by default, as factors of the heuristic ``(1/m²) Σ_ij ||x_i − x_j||²``: 4^k,
#: k = −1 … 2 (1/4, 1, 4, 16). Chosen with the rule ``"smooth_grid"`` on 33 KEEL sets
#: (``bench/keel_wide.TUNE_SETS``; the measurements are in docs/design.md §10).
DEFAULT_SIGMA2_FACTORS = (0.25, 1.0, 4.0, 16.0)
#: The edge extension's limits (:func:`jaxrank._cv.search_edges`): σ² up to the heuristic × 256
#: (four steps of 4 past the default grid) ...
MAX_SIGMA2_FACTOR = 256.0
#: ... and λ down to 2^-24 (two steps of 4 past the paper's grid).
MIN_LAM = 2.0**-24
#: Kernels of the search: ``"auto"`` (the plain Gaussian and, where X has two-valued columns, the
#: binary-aware one, kept when it clearly wins on the same folds), ``"gaussian"`` (plain),
#: ``"binary"`` (binary-aware), ``"ard"`` (learned per-column scales on top of the ``"auto"``
#: choice).
KERNELS = ("auto", "gaussian", "binary", "ard")


#: ``kernel="auto"`` keeps the binary-aware search over the plain one only when its pick wins on
#: the same folds by more than this many standard errors of the paired differences
#: (:func:`jaxrank._cv.paired_win`; docs/design.md §10: a two-valued measured column, as in
#: KEEL's ecoli, is no one-hot dummy, and a bare win picked the binary kernel by chance).
KERNEL_MARGIN_SE = 1.0


def _paired_gain(search_a, pick_a, search_b, pick_b) -> float:
    """Mean over the (same) folds of the held-out AUC of pick ``a`` minus pick ``b``."""
    return float(np.mean(_cv.fold_auc(search_a, pick_a) - _cv.fold_auc(search_b, pick_b)))


@estimator_params
class RankRCClassifierCV(ClassifierMixin, BaseEstimator):
    """A kernel AUC ranker tuned by cross-validation inside ``fit`` (like ``LogisticRegressionCV``).

    Minimises the R-subset objective of seed 000 (eq. 11 with the smoothed hinge of eq. 13)::

        F(β) = 1/(m+ m−) Σ_{i∈+} Σ_{j∈−} ℓ_ε(f_i − f_j) + (λ/2) βᵀ K_RR β,   f = K_{·R} β,

    with the Gaussian kernel ``k(u, v) = exp(−||u − v||²/σ²)``, choosing λ, σ² and the basis
    ``R`` by stratified ``cv``-fold cross-validated AUC: for each fold, basis policy and σ² the
    whole λ grid is one batched solve, and all folds reuse the same compiled programs
    (:func:`jaxrank._cv.cv_search`). The chosen model is refitted on every row.

    Basis policies: ``"auto"`` (every rare row, then majority landmarks by k-means++ up to
    ``min_basis`` rows: never starved when the rare class is small; it is RankRC's basis when
    ``min_basis ≤ m+ ≤`` :data:`jaxrank.bases.AUTO_MAX_BASIS` = 512, and 512 rare rows by
    k-means++ past that, so the search's cost grows as ``m``, not ``m·m+``;
    :func:`jaxrank.bases.auto_basis`), ``"rare"`` (RankRC, the paper: every rare row),
    ``"all"`` (RankSVM, ``O(m²)`` memory).
    ``basis`` names one policy or a tuple of policies to search. The paper's protocol is
    ``RankRCClassifierCV(basis="rare", sigma2_factors=(1,), cv=10)`` up to two details of the
    search (σ² from the heuristic on all training rows, not on each fold; training folds trimmed
    to equal class counts); :func:`jaxrank.select_lambda` runs it exactly.

    Defaults (basis ``"auto"`` with floor 256, σ² = heuristic × 4^-1 … 4^2, the paper's λ grid,
    CV fits to ``search_tol = 1e-4`` on the warm path, the narrow extension ``extend_sigma2``)
    were chosen on the 35 KEEL sets of ``bench/keel_wide.TUNE_SETS`` (``bench/keel_wide_tune.py``
    and docs/design.md §10); ``bench/keel_wide.py`` reports the other sets as held out. The
    binary-aware kernel, the edge extension and the rule ``"smooth_mirror"`` were chosen on the
    development sets of ``bench/real_tabular.py`` (docs/choosing-a-model.md).

    Args:
      lams: λ grid (default :data:`DEFAULT_LAMS`, ``2^-20 … 2^10``).
      sigma2_factors: σ² values as multiples of the heuristic on the training rows
        (default :data:`DEFAULT_SIGMA2_FACTORS`).
      basis: a basis policy or a tuple of them (see above).
      min_basis: the auto basis floor (default :data:`jaxrank._cv.AUTO_MIN_BASIS`).
      rule: ``"max"``, ``"one_se"``, ``"smooth"``, ``"smooth_grid"`` or ``"smooth_mirror"``
        (default: the 3×3 average of the (σ², λ) table with its edges mirrored, so a corner
        cell is not judged on fewer cells than an inner one; :func:`jaxrank._cv.choose`).
      cv: number of stratified folds; reduced to the size of the smaller class when that is
        smaller (at least 2 rows of each class are needed).
      pos_label: the rare class (default: the minority class; ``classes_[1]`` on a 50/50 split).
      random_state: seeds the folds and the k-means++ landmarks (int, ``RandomState`` or None).
      eps, tol, max_iter, max_cg, dtype: as in :func:`jaxrank.fit` (``tol`` for the refit on
        every row).
      search_tol: the gradient tolerance of the CV fits (default ``1e-4``; ``None``: ``tol``).
        Selection needs held-out AUC, not a tight optimum (docs/design.md §10).
      extend_sigma2: on a set of :data:`jaxrank._cv.NARROW_MIN_ROWS` to
        :data:`jaxrank._cv.NARROW_MAX_ROWS` rows (512 to 2048) whose pick is the narrowest of two
        or more σ², or whose narrowest σ² scores within one standard error of the pick
        (:func:`jaxrank._cv.wants_narrower`), also search σ² = the narrowest / 16 with the auto
        floor raised to :data:`jaxrank._cv.NARROW_MIN_BASIS` (1024), then choose again on the
        merged table; the best narrow cell (judged by ``"smooth_grid"`` whatever ``rule``) is
        kept only if it beats that pick on the same folds by more than one standard error of
        the paired differences (:func:`jaxrank._cv.search_narrower`,
        :func:`jaxrank._cv.narrow_pick`; measured in docs/design.md §10). On a set of more
        rows, whose folds hold rare rows enough that a narrow cell is no lucky one, a pick at
        the narrowest σ² is an edge of ``extend_edges`` instead (σ² / 4 per step, down to
        :data:`jaxrank._cv.EDGE_MIN_SIGMA2_FACTOR` × the heuristic, h/64). ``False``: the σ²
        grid's narrow end as given.
      kernel: ``"auto"`` (default): the plain Gaussian on X as given and, where X has a column
        with two distinct values off the unit spread, also the binary-aware Gaussian
        (:func:`jaxrank.kernels.binary_scales`: such a column, a one-hot dummy standardised or
        not, has its two values 1 apart), each searched over σ² × λ on the same folds, the
        binary-aware one kept (``kernel_choice_``) only when its pick wins on the same folds
        by more than one standard error of the paired differences (:data:`KERNEL_MARGIN_SE`);
        ``"gaussian"``: the plain one only; ``"binary"``: the binary-aware one only;
        ``"ard"``: one learned scale per column or per group of ``feature_groups``
        (:class:`jaxrank.kernels.ARDGaussian`): σ² × λ searched with the univariate-AUC start
        beside the isotropic search, the better on the same folds tuned by implicit gradients
        of a held-out smoothed AUC, shrunk toward the isotropic kernel, the step judged on a
        fold the gradient never saw (:mod:`jaxrank.tune`; docs/choosing-a-model.md says when
        it pays).
      extend_edges: while the pick lies on the widest σ² or the smallest λ searched (or, on a
        set of more than 2048 rows with ``extend_sigma2``, the narrowest σ²), search one step
        further (σ² × 4, λ / 4, σ² / 4) up to ``max_sigma2_factor`` × the heuristic,
        ``min_lam`` and h/64. A step counts only when it raised the rule's best score by at
        least one standard error of the pick: then a further step may follow; a step that does
        not count ends the extension and is never picked, but its cells stay in the table
        (``cv_results_``) as data: the edge it probed is then judged by its true neighbours,
        and the pick is made again among the cells before the step
        (:func:`jaxrank._cv.search_edges`). ``False``: the grid as given.
      max_sigma2_factor, min_lam: the limits of ``extend_edges`` (defaults
        :data:`MAX_SIGMA2_FACTOR`, :data:`MIN_LAM`).
      feature_groups: ``(d,)`` group id of each column for ``kernel="ard"`` (e.g. the one-hot
        columns of one source variable share an id and a scale); default: one per column.
      search_engine: how the search fills its table: ``"fits"`` (the default: one fit per fold
        and σ² on threads) or ``"core"`` (batched calls of the pure core, docs/core.md; isotropic
        kernels only, the fits otherwise); :func:`jaxrank._cv.cv_search`'s ``engine``.

    Attributes:
      model_: the refitted :class:`jaxrank.RankModel` (raw rare-class scores).
      best_params_: ``{"lam", "sigma2", "sigma2_factor", "basis", "n_basis"}``.
      best_score_: the mean held-out AUC of the chosen parameters.
      best_index_: the chosen row of ``cv_results_`` (the rule's pick: under ``"smooth_grid"``
        not always the row of rank 1, which ``rank_test_score`` gives by raw mean).
      cv_results_: dict of arrays, one entry per (basis, σ², λ): ``param_lam``,
        ``param_sigma2``, ``param_sigma2_factor``, ``param_basis``, ``params``,
        ``split{k}_test_score``, ``mean_test_score``, ``std_test_score``, ``rank_test_score``
        (held-out AUC, as scikit-learn's searches name them).
      n_folds_: folds used; ``search_seconds_``: wall time of the search.
      kernel_choice_: ``"gaussian"`` or ``"binary"``: the distances the model uses.
      feature_scales_: ``(d,)`` what multiplies each column inside the kernel,
        ``k(u, v) = exp(−‖(u − v) ⊙ feature_scales_‖²)``: which columns the ranker uses
        (with ``kernel="ard"`` the learned ones; else the binary-aware scales over σ).
      ard_: ``None``, or with ``kernel="ard"`` what it did: ``start`` (``"isotropic"`` or
        ``"univariate"``: the search that won on the same folds), ``kept`` (``"start"`` or
        ``"tuned"``), ``lam``, ``steps``, ``best_step``, ``stop_auc`` (the stopping fold's AUC
        at each step).
      classes_, pos_label_, threshold_, n_iter_, n_features_in_: as in
        :class:`jaxrank.sklearn.RankRCClassifier` (``predict(X) ==
        classes_[(decision_function(X) > 0).astype(int)]``).

    There is no ``predict_proba``: the scores are not calibrated probabilities.

    Example:
      >>> import jaxrank
      >>> from jaxrank.sklearn import RankRCClassifierCV
      >>> X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
      >>> est = RankRCClassifierCV(cv=3, lams=(1e-4, 1e-2, 1.0), random_state=0).fit(X, y)
      >>> sorted(est.best_params_), est.decision_function(X).shape
      (['basis', 'lam', 'n_basis', 'sigma2', 'sigma2_factor'], (300,))
    """

    lams: Any = positional(None)
    sigma2_factors: Any = None
    basis: str = "auto"
    min_basis: int = _cv.AUTO_MIN_BASIS
    rule: str = "smooth_mirror"
    cv: int = 5
    pos_label: Any = None
    random_state: Any = None
    eps: float = 0.5
    tol: float = 1e-6
    max_iter: int = 100
    max_cg: int = 25
    dtype: str = "float32"
    search_tol: float = 1e-4
    extend_sigma2: bool = True
    kernel: str = "auto"
    extend_edges: bool = True
    max_sigma2_factor: float = MAX_SIGMA2_FACTOR
    min_lam: float = MIN_LAM
    feature_groups: Any = None
    search_engine: str = "fits"

    def _grids(self):
        lams, _ = check_lam(DEFAULT_LAMS if self.lams is None else self.lams)
        fac = DEFAULT_SIGMA2_FACTORS if self.sigma2_factors is None else self.sigma2_factors
        fac = np.atleast_1d(np.asarray(fac, np.float64))
        if fac.ndim != 1 or fac.size == 0 or not np.all(np.isfinite(fac) & (fac > 0)):
            raise ValueError(
                f"sigma2_factors must be a non-empty 1-D list of values > 0, got "
                f"{self.sigma2_factors!r}."
            )
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {self.kernel!r}.")
        lim = self.max_sigma2_factor
        if isinstance(lim, bool) or not isinstance(lim, int | float | np.number) or not lim > 0:
            raise ValueError(f"max_sigma2_factor must be a number > 0, got {lim!r}.")
        check_lam(self.min_lam)
        if self.rule not in _cv.RULES:
            raise ValueError(f"rule must be one of {_cv.RULES}, got {self.rule!r}.")
        if self.search_engine not in _cv.ENGINES:
            raise ValueError(
                f"search_engine must be one of {_cv.ENGINES}, got {self.search_engine!r}."
            )
        cv = self.cv
        if isinstance(cv, bool) or not isinstance(cv, int | np.integer) or cv < 2:
            raise ValueError(f"cv must be an integer >= 2, got {cv!r}.")
        _cv.auto_basis_size(1, 1, self.min_basis)  # checks min_basis
        return lams, fac, _cv.check_policies(self.basis)

    def fit(self, X, y):
        """Search λ × σ² × basis by cross-validated AUC, then refit on all rows.

        Returns:
          self.

        Raises:
          ValueError: ``y`` not two-valued, fewer than 2 rows in a class, ``pos_label`` not a
            label of ``y``, or a bad parameter.
        """
        _cache.enable_default_cache()  # the persistent cache for estimator users
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32])
        check_classification_targets(y)
        classes, index, counts = np.unique(y, return_inverse=True, return_counts=True)
        if classes.size != 2:
            raise ValueError(
                "Only binary classification is supported (a biclass ranker); y has "
                f"{classes.size} class(es)."
            )
        lams, fac, policies = self._grids()
        i_pos = rare_index(self.pos_label, classes, counts)
        pos = index == i_pos
        folds = min(int(self.cv), int(counts.min()))
        if folds < 2:
            raise ValueError(
                f"cross-validation needs at least 2 rows of each class; the smaller class has "
                f"{int(counts.min())}."
            )
        seed = check_random_state(self.random_state).randint(np.iinfo(np.int32).max)
        key = jax.random.key(seed)
        for name in ("extend_sigma2", "extend_edges"):
            if not isinstance(getattr(self, name), bool | np.bool_):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}.")
        # binary-aware distances (kernels.binary_scales): a dummy column, standardised or
        # not, moves a squared distance by 0 or 1
        binary = None if self.kernel == "gaussian" else _kernels.binary_scales(X)
        groups = _ard.check_groups(self.feature_groups, X.shape[1])
        opts = dict(eps=self.eps, tol=self.tol, max_iter=self.max_iter, max_cg=self.max_cg,
                    dtype=self.dtype)  # fmt: skip
        tol = self.tol if self.search_tol is None else self.search_tol
        sopts = dict(folds=folds, key=key, engine=self.search_engine, **{**opts, "tol": tol})
        scales = binary if self.kernel == "binary" else None
        search, pick, heuristic = self._search(X, pos, scales, lams, fac, policies, sopts)
        self.kernel_choice_ = "binary" if scales is not None else "gaussian"
        if binary is not None and self.kernel in ("auto", "ard"):
            # both distances on the same folds: a dummy column may own the distance (one-hot
            # data) or carry the signal (a rare measured value): the folds decide
            other = self._search(X, pos, binary, lams, fac, policies, sopts)
            if _cv.paired_win(_cv.fold_auc(*other[:2]), _cv.fold_auc(search, pick),
                              KERNEL_MARGIN_SE):  # fmt: skip
                (search, pick, heuristic), scales = other, binary
                self.kernel_choice_ = "binary"
        self.ard_ = None
        b, s, j = pick
        lam = float(search.lams[j])
        if self.kernel == "ard":
            scales, lam, search, pick, heuristic = self._fit_ard(
                X, pos, scales, groups, (search, pick, heuristic), lams, fac, policies, sopts
            )
            b, s, j = pick
        sigma2s, fac = search.sigma2s, search.sigma2s / heuristic
        # in the search's compiled program (same floors, warm path): no new compilation
        self.model_, idx = _cv.refit(
            X, pos, lam, policy=policies[b], sigma2=float(sigma2s[s]),
            key=key, lams=lams, policies=policies, min_basis=int(search.min_basis[s]),
            scales=scales, **opts,
        )  # fmt: skip
        lams = search.lams
        kern = self.model_.kernel
        col = np.ones(X.shape[1]) if scales is None else np.asarray(scales, np.float64)
        #: what multiplies each column inside exp(−‖(u − v) ⊙ s‖²/σ²), divided by σ
        self.feature_scales_ = col / np.sqrt(float(kern.sigma2))
        self.n_iter_ = int(self.model_.info.iterations)
        self.classes_ = classes
        self.pos_label_ = classes[i_pos]
        self.n_folds_ = folds
        self.search_seconds_ = search.fit_seconds
        self.best_params_ = {
            "lam": lam, "sigma2": float(sigma2s[s]), "sigma2_factor": float(fac[s]),
            "basis": policies[b], "n_basis": int(idx.size),
        }  # fmt: skip
        self.best_score_ = float(search.mean_auc[b, s, j])
        self._set_results(search, fac)
        self.best_index_ = int(np.ravel_multi_index((b, s, j), search.mean_auc.shape))
        # the training-prevalence threshold (as RankRCClassifier): predict == score > 0
        scores = np.sort(self._sign() * rank_scores(self.model_, X))
        self.threshold_ = float(midpoint(scores, int(counts[0])))
        return self

    def _search(self, X, pos, scales, lams, fac, policies, sopts):
        """The σ² × λ × basis table with the Gaussian of ``scales`` (``None``: isotropic), its
        edge and narrow extensions, and the pick: ``(search, (b, s, j), heuristic σ²)``."""
        heuristic = _kernels.sigma2_heuristic(X if scales is None else X * scales)
        sopts = {**sopts, "scales": scales}
        search = _cv.cv_search(X, pos, lams=lams, sigma2s=fac * heuristic, policies=policies,
                               min_basis=self.min_basis, **sopts)  # fmt: skip
        pick = _cv.choose(search.mean_auc, search.se_auc, lams, search.sigma2s, self.rule)
        if self.extend_edges:
            search, pick = _cv.search_edges(
                X, pos, search, pick, rule=self.rule, min_basis=self.min_basis,
                max_sigma2=float(self.max_sigma2_factor) * heuristic, min_lam=self.min_lam,
                min_sigma2=_cv.EDGE_MIN_SIGMA2_FACTOR * heuristic
                if self.extend_sigma2 and pos.size > _cv.NARROW_MAX_ROWS else None,
                **sopts,
            )  # fmt: skip
        if self.extend_sigma2:
            n_before = search.sigma2s.size
            search = _cv.search_narrower(
                X, pos, search, pick, rule=self.rule, min_basis=self.min_basis, **sopts
            )
            n_new = search.sigma2s.size - n_before
            if n_new:
                pick = _cv.narrow_pick(search, pick, n_new, self.rule)
        return search, pick, heuristic

    def _fit_ard(self, X, pos, scales, groups, iso, lams, fac, policies, sopts):
        """``kernel="ard"`` (:mod:`jaxrank._ard`): the univariate start searched beside the
        isotropic pick ``iso`` and kept when it wins on the same folds, then the scales and λ
        tuned by implicit gradients from the winner. Returns ``(scales, lam, search, pick,
        heuristic)``."""
        base = np.ones(X.shape[1]) if scales is None else np.asarray(scales, np.float64)
        w = _ard.start_weights(X, pos, groups, base)
        start = self._search(X, pos, base * w[groups], lams, fac, policies, sopts)
        use_start = _paired_gain(start[0], start[1], iso[0], iso[1]) > 0
        search, (b, s, j), heuristic = start if use_start else iso
        w = w if use_start else np.ones_like(w)
        lam = float(search.lams[j])
        _, held = _cv.fold_rows(pos, sopts["folds"], key=sopts["key"])
        self.ard_ = {"start": "univariate" if use_start else "isotropic", "kept": "start",
                     "lam": lam, "steps": 0, "best_step": 0}  # fmt: skip
        if len(held) < 3:  # no fold left for the stop: the start
            return base * w[groups], lam, search, (b, s, j), heuristic
        out, lam, res, kept = _ard.tune_scales(
            X, pos, held_rows=held, groups=groups, base=base, start=w,
            policy_basis=_cv.policy_basis(policies[b], int(search.min_basis[s])),
            sigma2=float(search.sigma2s[s]), lam=lam, key=_cv.basis_key(sopts["key"]),
            dtype=np.dtype(self.dtype), max_iter=self.max_iter,
        )  # fmt: skip
        self.ard_.update(kept=kept, lam=lam, steps=len(res.history) - 1,
                         best_step=res.best_step, stop_auc=res.stop_scores.tolist())  # fmt: skip
        return out, lam, search, (b, s, j), heuristic

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False  # a biclass ranker: two-valued labels only
        return tags

    def _sign(self) -> float:
        return score_sign(self.classes_, self.pos_label_)

    def decision_function(self, X) -> np.ndarray:
        """The score of ``classes_[1]``, shifted so that ``predict`` is ``score > 0``.

        ``σ·f(X) − threshold_`` with ``f = model_.decision_function`` (the rare-class score),
        ``σ = +1`` if the rare class is ``classes_[1]`` else ``−1``, exactly as
        :meth:`jaxrank.sklearn.RankRCClassifier.decision_function`.

        Returns:
          ``(n,)`` float64 array.
        """
        return RankClassifier.decision_function(self, X)

    def predict(self, X) -> np.ndarray:
        """``classes_[1]`` where ``decision_function(X) > 0``, else ``classes_[0]``."""
        return RankClassifier.predict(self, X)

    def _set_results(self, search: _cv.CVSearch, fac: np.ndarray) -> None:
        B, S, L = search.mean_auc.shape
        bb, ss, ll = (a.ravel() for a in np.meshgrid(range(B), range(S), range(L), indexing="ij"))
        mean = search.mean_auc.ravel()
        k = search.cv_auc.shape[2]
        res = {
            "param_basis": np.array([search.policies[i] for i in bb], dtype=object),
            "param_sigma2_factor": fac[ss],
            "param_sigma2": search.sigma2s[ss],
            "param_lam": search.lams[ll],
        }
        res["params"] = [
            {"basis": search.policies[i], "sigma2": float(search.sigma2s[j]),
             "lam": float(search.lams[t])}
            for i, j, t in zip(bb, ss, ll, strict=True)
        ]  # fmt: skip
        for f in range(k):
            res[f"split{f}_test_score"] = search.cv_auc[:, :, f, :].ravel()
        res["mean_test_score"] = mean
        res["std_test_score"] = search.cv_auc.std(axis=2).ravel()
        # rank 1 = best; equal means share the best rank among them (scikit-learn's "min")
        res["rank_test_score"] = rankdata(-mean, method="min").astype(np.int32)
        self.cv_results_ = res


# Named by its public path: pickles name jaxrank.sklearn.RankRCClassifierCV, and doctest and
# the API reference find it in jaxrank.sklearn.
RankRCClassifierCV.__module__ = "jaxrank.sklearn"
