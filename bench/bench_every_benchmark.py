"""Benchmark: error bars and samples lines of every benchmark at scale (issues 40 and 41).

    .venv/bin/python bench/bench_every_benchmark.py [--sizes 1000,10000,100000] [--iterations 1000] [--json OUT]

For one sample task of each benchmark (ErrorRadar CATE, MMErroR EPD and ETC, ViRectify reflect,
CausalStep), its bundled docs are repeated to each size (each copy its own cluster unit) and scored
from seeded replies through the task's own filters and ``process_results`` (``no_number_moves.scored_items``).
Then, in this process, CPU seconds of:

- **scoring**: every aggregation of the task's metric list once (what lmms-eval does without error bars);
- **error bars**: :func:`lmms_eval_plugins.errorbars.error_bars` of every headline metric, as the
  ``error-bars`` hook computes them;
- **floor**: what any bootstrap of these metrics costs at the least over the same seeded resamples:
  drawing them (``stats.resample_blocks``) and one ``np.bincount`` per resample.

And the bytes of the task's samples lines (the per-item values only: lmms-eval's other fields are the
same either way): as lmms-eval 0.7.3 logs them (each metric's value under its name), as the plugin
writes them now (``logged_samples.without_repeated_items``), and the same information once (each
distinct value of a line once). Each size also gives the cost per item, to show the curves are linear.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import environment  # noqa: E402
from no_number_moves import _task_yamls, scored_items  # noqa: E402

from lmms_eval_plugins import errorbars, stats  # noqa: E402
from lmms_eval_plugins.benchmark import get  # noqa: E402
from lmms_eval_plugins.logged_samples import without_repeated_items  # noqa: E402

TASKS = (
    "errorradar_cate_sample",
    "mmerror_epd_sample",
    "mmerror_etc_sample",
    "virectify_reflect_sample",
    "causalstep_sample",
)


def cpu(fn) -> float:
    started = time.process_time()
    fn()
    return time.process_time() - started


def line_bytes(per_metric: dict[str, list], names: list[str]) -> tuple[int, int, int]:
    """(as lmms-eval logs them, as written now, each distinct value once) over every line."""
    logged = written = once = 0
    for k in range(len(per_metric[names[0]])):
        line = {m: per_metric[m][k] for m in names if m in per_metric}
        logged += len(json.dumps(line, default=str))
        written += len(json.dumps(without_repeated_items(line, frozenset(names)), default=str))
        distinct: list = []
        for value in line.values():
            if not any(value == seen for seen in distinct):
                distinct.append(value)
        once += len(json.dumps(distinct, default=str))
    return logged, written, once


def figures(task: str, benchmark: str, path: Path, n: int, iterations: int) -> dict:
    scored = scored_items(benchmark, path, n, seed=1)
    assert scored is not None, task
    config, docs, per_metric = scored
    spec = get(benchmark)
    metrics = spec.task_metrics(task)
    rows = [(entry["metric"], entry["aggregation"]) for entry in config["metric_list"]]
    scoring = cpu(lambda: [aggregate(per_metric.get(name, [])) for name, aggregate in rows])
    wanted = [
        (metrics[name], aggregate, per_metric[name])
        for name, aggregate in rows
        if name in metrics and errorbars.has_error_bar(metrics[name])
    ]
    ours = cpu(lambda: errorbars.error_bars(spec, wanted, iterations=iterations, task=task))
    items = wanted[0][2]
    clusters = errorbars.clusters_of(spec, items)
    index, units = stats.unit_index(len(items), clusters)

    def floor() -> None:
        for picks in stats.resample_blocks(units, iterations):
            np.stack([np.bincount(row, minlength=units) for row in picks])

    floor_cpu = cpu(floor)
    generic = [m.name for m, _, _ in wanted if m.sufficient is None and not m.item_score]
    logged, written, once = line_bytes(per_metric, [name for name, _ in rows])
    items_n = len(items)
    return {
        "items": items_n,
        "units": units,
        "metrics_with_error_bars": len(wanted),
        "generic_route": generic,
        "scoring_cpu_s": round(scoring, 3),
        "error_bars_cpu_s": round(ours, 3),
        "floor_cpu_s": round(floor_cpu, 3),
        "error_bars_per_floor": round(ours / max(floor_cpu, 1e-9), 2),
        "error_bars_per_scoring": round(ours / max(scoring, 1e-9), 2),
        "error_bars_ms_per_item": round(1000 * ours / items_n, 4),
        "bytes_per_item_logged_by_lmms_eval": round(logged / items_n),
        "bytes_per_item_written": round(written / items_n),
        "bytes_per_item_information_once": round(once / items_n),
        "written_per_information_once": round(written / max(once, 1), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    paths = {path.stem: (benchmark, path) for benchmark, path in _task_yamls()}
    out: dict = {"iterations": args.iterations, "tasks": {}}
    for task in args.tasks.split(","):
        benchmark, path = paths[task]
        out["tasks"][task] = {}
        for n in sizes:
            row = figures(task, benchmark, path, n, args.iterations)
            out["tasks"][task][str(n)] = row
            print(task, n, json.dumps(row), flush=True)
        if len(sizes) >= 2:
            a, b = out["tasks"][task][str(sizes[-2])], out["tasks"][task][str(sizes[-1])]
            out["tasks"][task]["error_bars_cost_per_item_growth_last_step"] = round(
                b["error_bars_ms_per_item"] / max(a["error_bars_ms_per_item"], 1e-9), 2
            )
    out["environment"] = environment(["lmms-eval", "numpy"])
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
