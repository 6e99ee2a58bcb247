"""scikit-learn estimators over :func:`jaxrank.fit`: RankRC, RankSVM and RANK-RND rankers.

Thin faces (docs/design.md §8): every number comes from :func:`jaxrank.fit`; these classes only map
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

The biclass estimators take any two labels: ``pos_label`` names the rare class (default: the
minority class; ``classes_[1]`` on an exact 50/50 split), which jaxrank's fitters take as the
positive class. ``decision_function`` scores ``classes_[1]`` (as scikit-learn's ``roc_auc``
scoring reads it), shifted by the training-prevalence threshold so that ``predict`` is
``decision_function > 0``. They pass scikit-learn's ``check_estimator`` with no expected
failures.

scikit-learn is an optional dependency (``pip install scikit-learn``).
"""

# scikit-learn is optional: without it (or before 1.6) this import says what to install, each
# time it is tried
try:
    from sklearn.base import ClassifierMixin as _ClassifierMixin
    from sklearn.utils.validation import validate_data as _validate_data
except ImportError as err:  # pragma: no cover - exercised only without scikit-learn
    raise ImportError(
        "jaxrank.sklearn needs scikit-learn >= 1.6: pip install -U 'scikit-learn>=1.6'"
    ) from err

from jaxrank.sklearn._classes import (
    MultiLevelRankRC,
    NystromRankClassifier,
    RandomBasisRankClassifier,
    RankRCClassifier,
    RankSVMClassifier,
    SparseAUCClassifier,
)
from jaxrank.sklearn._cv import RankRCClassifierCV

del _ClassifierMixin, _validate_data

__all__ = [
    "MultiLevelRankRC",
    "NystromRankClassifier",
    "RandomBasisRankClassifier",
    "RankRCClassifier",
    "RankRCClassifierCV",
    "RankSVMClassifier",
    "SparseAUCClassifier",
]
