"""Benchmark: what happens after the model (issue 40): error bars, compare and report, against their floors.

    .venv/bin/python bench/bench_postprocess.py [--sizes 1000,10000,100000] [--iterations 1000] [--json OUT]

For ErrorRadar CATE (one round; the record is the cluster unit) at each size, in this process:

- **error bars**: :func:`lmms_eval_plugins.errorbars.error_bars` of every headline metric of the task, as
  the ``error-bars`` hook computes them after lmms-eval aggregates, against the numpy floor over the same
  seeded resamples: drawing them (``stats.resample_blocks``), counting each (``np.bincount`` per resample)
  and one matrix product of the counts with the per-class counts (what any bootstrap of these metrics
  costs at the least). Also the task's scoring without error bars (every aggregation once).
- **compare**: ``lmms-eval-plugins compare`` of two stored runs of that size (seeded random replies), as a
  subprocess, against reading both samples files once (``logged_samples.read_samples``).
- **report**: ``lmms-eval-plugins report`` of one stored run, as a subprocess, against reading its samples once.

Each figure is CPU seconds (this process, or the child's), with the child's peak RSS, and the machine's
load average. ``process_docs``: bench/bench_process_docs.py; batch ingest: bench/bench_batch.py --ingest-sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import environment  # noqa: E402

from lmms_eval_plugins import errorbars, stats  # noqa: E402
from lmms_eval_plugins.benchmarks.errorradar.scoring import CATEGORIES, prf_columns  # noqa: E402
from lmms_eval_plugins.benchmarks.errorradar.spec import BENCHMARK, CATE_TEMPLATE  # noqa: E402
from lmms_eval_plugins.logged_samples import read_samples, without_repeated_items  # noqa: E402

TASK = "errorradar_cate_sample"


def items(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for q in range(n):
        gold = CATEGORIES[q % len(CATEGORIES)]
        pred = gold if rng.random() < 0.4 else rng.choice((*CATEGORIES, None))
        out.append(
            {
                "gold": gold,
                "pred": pred,
                "correct": pred == gold,
                "question_type": "t",
                "round": 0,
                "question_id": f"q{q}",
                "parse_error": None if pred else "no category found",
            }
        )
    return out


def cpu(fn) -> float:
    started = time.process_time()
    fn()
    return time.process_time() - started


def error_bar_figures(n: int, iterations: int) -> dict:
    data = items(n, seed=1)
    wanted = [(m, m.aggregate, data) for m in CATE_TEMPLATE if errorbars.has_error_bar(m)]
    ours = cpu(lambda: errorbars.error_bars(BENCHMARK, wanted, iterations=iterations))
    scoring = cpu(lambda: [m.aggregate(data) for m in CATE_TEMPLATE if m.aggregate is not None])
    counts = prf_columns(data)

    def floor() -> None:
        for picks in stats.resample_blocks(n, iterations):
            weights = np.stack([np.bincount(row, minlength=n) for row in picks]).astype(float)
            weights @ counts

    floor_cpu = cpu(floor)
    return {
        "error_bars_cpu_s": round(ours, 3),
        "floor_cpu_s": round(floor_cpu, 3),
        "ratio_to_floor": round(ours / floor_cpu, 2),
        "scoring_without_error_bars_cpu_s": round(scoring, 3),
        "ratio_to_scoring": round(ours / max(scoring, 1e-9), 2),
        "metrics": len(wanted),
    }


def write_run(folder: Path, n: int, seed: int) -> Path:
    """A stored lmms-eval run of the CATE task: a results JSON and a samples file, written as the run writes
    it (the ``samples-writer`` compat entry: the item lmms-eval logs under every metric name kept once)."""
    folder.mkdir(parents=True)
    names = [m.name for m in CATE_TEMPLATE]
    results = {
        "results": {TASK: {"alias": TASK, **{f"{m},none": 0.0 for m in names if m != "cate_confusion"}}},
        "config": {"model": f"random{seed}", "model_args": f"seed={seed}"},
        "date": "20261129_000000",
        "n-samples": {TASK: {"original": n, "effective": n}},
        "versions": {TASK: 1},
    }
    (folder / "20261129_000000_results.json").write_text(json.dumps(results), encoding="utf-8")
    path = folder / f"20261129_000000_samples_{TASK}.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for doc_id, item in enumerate(items(n, seed)):
            line = {
                "doc_id": doc_id,
                "target": item["gold"],
                "doc": {"question": "q" * 200},
                "arguments": ["prompt"],
                "resps": [[item["pred"] or "?"]],
                "filtered_resps": [item["pred"] or "?"],
                **{m: item for m in names},
            }
            out.write(json.dumps(without_repeated_items(line, names)) + "\n")
    return path


def child(command: list[str], env: dict) -> tuple[float, int]:
    """CPU seconds and peak RSS (MB) of a child command."""
    probe = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); "
        "u = resource.getrusage(resource.RUSAGE_CHILDREN); print(u.ru_utime + u.ru_stime, u.ru_maxrss // 1024)"
    )
    done = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True, env=env, check=True)
    seconds, peak = done.stdout.split()
    return float(seconds), int(peak)


def run_figures(n: int, iterations: int, workdir: Path) -> dict:
    a, b = workdir / f"a{n}", workdir / f"b{n}"
    samples_a, _ = write_run(a, n, 2), write_run(b, n, 3)
    env = {**os.environ, "LMMS_EVAL_PLUGINS_BOOTSTRAP_ITERS": str(iterations)}
    cli = [sys.executable, "-m", "lmms_eval_plugins.cli"]
    read_one = cpu(lambda: read_samples(samples_a))
    compare_cpu, compare_peak = child([*cli, "compare", str(a), str(b)], env)
    report_cpu, report_peak = child([*cli, "report", str(a), "-o", str(workdir / f"report{n}"), "--no-plots"], env)
    return {
        "samples_mb": round(samples_a.stat().st_size / 1e6, 1),
        "read_samples_cpu_s": round(read_one, 2),
        "compare_cpu_s": round(compare_cpu, 2),
        "compare_peak_mb": compare_peak,
        "compare_ratio_to_reading_both": round(compare_cpu / (2 * read_one), 2),
        "report_cpu_s": round(report_cpu, 2),
        "report_peak_mb": report_peak,
        "report_ratio_to_reading": round(report_cpu / read_one, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument(
        "--run-sizes",
        default="1000,10000,100000",
        help="sizes at which compare and report run too (a 100k run's samples file is about 50 MB)",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    run_sizes = {int(s) for s in args.run_sizes.split(",") if s}
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            runs = run_figures(n, args.iterations, Path(tmp)) if n in run_sizes else {}
            figures[n] = {**error_bar_figures(n, args.iterations), **runs, "load_avg_1m": round(os.getloadavg()[0], 2)}
            print(n, json.dumps(figures[n]), flush=True)
    per_item = {n: f["error_bars_cpu_s"] / n for n, f in figures.items()}
    report = {
        "task": TASK,
        "iterations": args.iterations,
        "sizes": figures,
        "error_bars_cost_per_item_growth_last_step": round(per_item[sizes[-1]] / per_item[sizes[-2]], 2)
        if len(sizes) > 1
        else None,
        "environment": environment(["lmms-eval", "numpy"]),
        "peak_rss_this_process_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
