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

from jaxrank.cli._commands import demo
from jaxrank.cli._main import main
from jaxrank.cli._modelfile import load_model_file, save_model_file

# importable from here too, as before the command line became a package: the model file
# (MODEL_FORMAT, MODEL_VERSION, ModelFile) and the default λ grid (PAPER_LOG2_GRID)
from jaxrank.cli._common import PAPER_LOG2_GRID as PAPER_LOG2_GRID  # isort: skip
from jaxrank.cli._modelfile import MODEL_FORMAT as MODEL_FORMAT  # isort: skip
from jaxrank.cli._modelfile import MODEL_VERSION as MODEL_VERSION  # isort: skip
from jaxrank.cli._modelfile import ModelFile as ModelFile  # isort: skip

__all__ = ["demo", "load_model_file", "main", "save_model_file"]
