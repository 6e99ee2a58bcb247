"""``RankRCClassifierCV().fit`` of this checkout against an earlier jaxrank, interleaved.

The default search's time at m = 3000 against an earlier commit's (issue 40: "the default search
at most 1.5× today's time at m = 3000"). The earlier jaxrank is a copy outside this checkout
with its own ``bench/``::

    git archive d65dfdd jaxrank bench | tar -x -C /tmp/old
    python bench/cv_speed_against.py --old /tmp/old --sizes 3000 --repeats 3

Each measurement is a fresh Python process running ``bench/cv_speed.py --child`` of its own
version (the earlier one from ``--old``, this one from this checkout), ``fit`` alone timed (import
and data excluded), on its own compilation cache directory: the first process of each version
fills an empty cache (reported as ``empty_cache_s``), then the versions and SVC-W's
7 C × 3 γ ``GridSearchCV`` alternate ``--repeats`` times so that they share the machine's load;
medians are reported with ratios new / old and against SVC-W.

Writes ``bench/out/cv_speed_against.json`` (``--save``: also ``bench/results/``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C
import numpy as np

HERE = Path(__file__).resolve().parent


def _spawn(src: Path, method: str, name: str, cache: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(src), XDG_CACHE_HOME=cache)
    cmd = [sys.executable, str(src / "bench" / "cv_speed.py"), "--child", method, name, "fits"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(name: str, old: Path, new: Path, repeats: int, svc: bool = True) -> dict:
    srcs = {"old": old, "new": new}
    row: dict = {"data": name, "empty_cache_s": {}, "best": {}, "warm": {"old": [], "new": []}}
    svc_runs = []
    with tempfile.TemporaryDirectory() as tmp:
        caches = {k: str(Path(tmp) / k) for k in srcs}
        for k, src in srcs.items():
            r = _spawn(src, "rankrc-cv", name, caches[k])
            row["empty_cache_s"][k] = r["seconds"]
            row["best"][k] = {"params": r["best_params"], "cv_auc": r["best_score"]}
        for _ in range(repeats):
            for k, src in srcs.items():
                row["warm"][k].append(_spawn(src, "rankrc-cv", name, caches[k])["seconds"])
            if svc:
                svc_runs.append(_spawn(srcs["new"], "svc-w", name, caches["new"])["seconds"])
    med = {k: float(np.median(v)) for k, v in row["warm"].items()}
    row["median"] = med
    row["new_over_old"] = med["new"] / med["old"]
    row["empty_new_over_old"] = row["empty_cache_s"]["new"] / row["empty_cache_s"]["old"]
    if svc:
        row["svc_w"] = {"median": float(np.median(svc_runs)), "runs": svc_runs}
        row["ratio_vs_svc_w"] = {k: med[k] / row["svc_w"]["median"] for k in med}
    print(json.dumps(row), flush=True)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, required=True, help="an earlier jaxrank with its bench/")
    ap.add_argument(
        "--new",
        type=Path,
        default=HERE.parent,
        help="the jaxrank to compare (default: this checkout)",
    )
    ap.add_argument("--sizes", type=int, nargs="*", default=[3000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(C.out_path("cv_speed_against")))
    ap.add_argument("--save", action="store_true")
    ap.add_argument("--no-svc", action="store_true", help="skip SVC-W (the slow part)")
    args = ap.parse_args(argv)
    stamps = {k: getattr(args, k) / "COMMIT" for k in ("old", "new")}
    env = C.header("cv_speed_against", f"against {args.old}")
    t0 = time.perf_counter()
    rows = [run(f"m={m}", args.old.resolve(), args.new.resolve(), args.repeats, not args.no_svc)
            for m in args.sizes]  # fmt: skip
    report = {"benchmark": "cv_speed_against", "env": env,
              "sources": {k: {"path": str(getattr(args, k)),
                              "commit": s.read_text().strip() if s.is_file() else None}
                          for k, s in stamps.items()},
              "result": {"rows": rows, "repeats": args.repeats, "svc_w": not args.no_svc},
              "seconds": time.perf_counter() - t0}  # fmt: skip
    C.write_report(report, args.out, "cv_speed_against.json" if args.save else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
