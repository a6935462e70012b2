"""Benchmark: building a task's docs (``process_docs``) against ``datasets.Dataset.from_list`` (issue 40, item 5).

    .venv/bin/python bench/bench_process_docs.py [--sizes 1000,10000,100000] [--json OUT]

For ErrorRadar CATE, MMErroR ETC and EPD, and ViRectify, in this process: the bundled sample records
repeated to each size (the tasks' own ``load_records`` wrapped to repeat them), then the task's
``process_docs`` as lmms-eval calls it. The floor is ``Dataset.from_list`` of the very docs that
``process_docs`` handed to ``data.to_dataset`` (captured), so the ratio is what building the rows and the
Arrow table costs beyond the least any ``datasets`` loader pays. CPU seconds, best of ``--repeats``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import environment  # noqa: E402

import datasets  # noqa: E402

from lmms_eval_plugins import data  # noqa: E402
from lmms_eval_plugins.benchmarks.errorradar import tasks as errorradar  # noqa: E402
from lmms_eval_plugins.benchmarks.mmerror import tasks as mmerror  # noqa: E402
from lmms_eval_plugins.benchmarks.virectify import tasks as virectify  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CASES = {
    "errorradar_cate": (errorradar, errorradar.process_docs_cate, "errorradar"),
    "mmerror_etc": (mmerror, mmerror.process_docs_etc, "mmerror"),
    "mmerror_epd": (mmerror, mmerror.process_docs_epd, "mmerror"),
    "virectify": (virectify, virectify.process_docs, "virectify"),
}


def best_cpu(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.process_time()
        fn()
        best = min(best, time.process_time() - started)
    return best


def figures(name: str, size: int, repeats: int) -> dict:
    module, process_docs, benchmark = CASES[name]
    sample_dir = REPO / "task_yamls" / benchmark / "sample_data"
    load_records, to_dataset = module.load_records, module.to_dataset
    captured: dict = {}

    def repeated(source):
        records = load_records(source)
        grown = data.Kept(dict(records[k % len(records)]) for k in range(size))
        grown.skipped = getattr(records, "skipped", {})
        return grown

    def capturing(docs, *args, **kwargs):
        captured["docs"] = docs
        return to_dataset(docs, *args, **kwargs)

    module.load_records, module.to_dataset = repeated, capturing
    try:
        ours = best_cpu(lambda: process_docs([{"benchmark": benchmark, "source": "sample"}], sample_dir), repeats)
    finally:
        module.load_records, module.to_dataset = load_records, to_dataset
    docs = captured["docs"]
    floor = best_cpu(lambda: datasets.Dataset.from_list(docs), repeats)
    return {
        "docs": len(docs),
        "process_docs_cpu_s": round(ours, 4),
        "from_list_cpu_s": round(floor, 4),
        "ratio_to_from_list": round(ours / floor, 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict = {}
    for name in CASES:
        results[name] = {}
        for size in sizes:
            results[name][size] = {**figures(name, size, args.repeats), "load_avg_1m": round(os.getloadavg()[0], 2)}
            print(name, size, json.dumps(results[name][size]), flush=True)
        if len(sizes) > 1:
            per_doc = {s: results[name][s]["process_docs_cpu_s"] / results[name][s]["docs"] for s in sizes}
            results[name]["cost_per_doc_growth_last_step"] = round(per_doc[sizes[-1]] / per_doc[sizes[-2]], 2)
    report = {"sizes": sizes, "tasks": results, "environment": environment(["datasets", "pyarrow"])}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
