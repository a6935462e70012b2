"""Show that a refactor moved no number: every metric of every task, before and after, compared exactly.

Two checks, both run once with the code before the change and once after (a git worktree of the old
commit on ``PYTHONPATH`` gives "before"), then compared:

1. ``runs``: the real ``lmms-eval`` CLI on every ``*_sample`` task with ``--model oracle`` and
   ``--model random --model_args seed=0`` (``PYTHONPATH=tests python -m testkit.report_fixtures --dest DIR``
   writes them); ``compare-runs BEFORE AFTER`` compares every metric of every results JSON.
2. ``full``: each benchmark's sample tasks at full size, in process: the bundled sample docs repeated to
   ``--size`` items (each copy its own unit: ``cluster_key`` and ``doc_id`` suffixed), seeded random
   replies (a chance reply, the gold one, or garbage), the task's filters (offline judges), its
   ``process_results`` and every aggregation of its metric list, as lmms-eval loads them from the YAML.

Usage::

    git worktree add /tmp/before <old commit>
    PYTHONPATH=/tmp/before python bench/no_number_moves.py full /tmp/full_before.json
    python bench/no_number_moves.py full /tmp/full_after.json
    python bench/no_number_moves.py compare-full /tmp/full_before.json /tmp/full_after.json
    PYTHONPATH=/tmp/before:tests python -m testkit.report_fixtures --dest /tmp/runs_before
    PYTHONPATH=tests python -m testkit.report_fixtures --dest /tmp/runs_after
    python bench/no_number_moves.py compare-runs /tmp/runs_before /tmp/runs_after
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

GARBAGE = ("", "I cannot tell from the video.", "<think>hmm</think>", "Answer: Z", "[1, 2", "None of the above")


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str, allow_nan=True))


def _task_yamls() -> list[tuple[str, Path]]:
    from lmms_eval_plugins.benchmark import ordered_benchmarks
    from lmms_eval_plugins.yaml_index import is_sample_task, read_task_yamls

    out = []
    for spec in ordered_benchmarks():
        for entry in read_task_yamls([spec.tasks_dir], recursive=False, skip_unreadable=True):
            if entry.kind == "task" and is_sample_task(entry.name):
                out.append((spec.name, entry.path))
    return sorted(out, key=lambda x: x[1].name)


def _replies(doc: dict[str, Any], rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.15:
        return rng.choice(GARBAGE)
    if roll < 0.45 and doc.get("oracle_response"):
        return str(doc["oracle_response"])
    chance = doc.get("chance_responses") or [doc.get("oracle_response") or ""]
    return str(rng.choice(list(chance)))


def scored_items(
    benchmark: str, path: Path, size: int, seed: int
) -> tuple[dict[str, Any], list[dict], dict[str, list[Any]]] | None:
    """(task config, docs, metric -> per-item values) of one sample task YAML, its docs repeated to ``size``
    items (each copy its own cluster unit), seeded replies through its filters and ``process_results``."""
    os.environ.setdefault("LMMS_EVAL_PLUGINS_JUDGE", "offline")
    from lmms_eval.utils import load_yaml_config

    from lmms_eval_plugins.benchmark import get

    config = load_yaml_config(str(path), mode="full")
    if "process_docs" not in config or "process_results" not in config:
        return None
    source = path.parent / config["dataset_kwargs"]["data_files"]["test"]
    rows = json.loads(source.read_text(encoding="utf-8"))
    docs = list(config["process_docs"](rows if isinstance(rows, list) else [rows]))
    if not docs:
        return None
    key = get(benchmark).cluster_key
    repeats = max(1, math.ceil(size / len(docs)))
    grown = []
    for k in range(repeats):
        for doc in docs:
            copy_ = copy.deepcopy(dict(doc))
            if k and key and isinstance(copy_.get(key), str):
                copy_[key] = f"{copy_[key]}#{k}"
            grown.append(copy_)
    grown = grown[: max(size, len(docs))]
    rng = random.Random(f"{seed}:{config['task']}")
    resps = [[_replies(d, rng)] for d in grown]
    for spec in config.get("filter_list") or []:
        for step in spec.get("filter", []):
            function = step["function"]
            if isinstance(function, type):
                options = {k: v for k, v in step.items() if k != "function"}
                resps = function(**options).apply(resps, grown)
    per_metric: dict[str, list[Any]] = {}
    for doc, responses in zip(grown, resps):
        for metric, value in config["process_results"](doc, responses).items():
            per_metric.setdefault(metric, []).append(value)
    return config, grown, per_metric


def full_size(size: int, seed: int) -> dict[str, Any]:
    """{task: {metric: value}} for every sample task, its docs repeated to ``size`` items."""
    results: dict[str, Any] = {}
    for benchmark, path in _task_yamls():
        started = time.perf_counter()
        scored = scored_items(benchmark, path, size, seed)
        if scored is None:
            continue
        config, grown, per_metric = scored
        metrics = {}
        for entry in config.get("metric_list", []):
            name, aggregate = entry["metric"], entry["aggregation"]
            metrics[name] = _jsonable(aggregate(per_metric.get(name, [])))
        results[config["task"]] = {
            "items": len(grown),
            "metrics": metrics,
            "seconds": round(time.perf_counter() - started, 2),
        }
        print(f"{config['task']}: {len(grown)} items, {len(metrics)} metrics", file=sys.stderr)
    return results


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def compare(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every task's metrics before and after: how many compared, and each difference."""
    diffs, compared = [], 0
    for task in sorted(set(before) | set(after)):
        old, new = before.get(task), after.get(task)
        if old is None or new is None:
            diffs.append({"task": task, "problem": "only before" if new is None else "only after"})
            continue
        for metric in sorted(set(old) | set(new)):
            compared += 1
            if metric not in old or metric not in new or not _same(old[metric], new[metric]):
                diffs.append({"task": task, "metric": metric, "before": old.get(metric), "after": new.get(metric)})
    return {"tasks": len(set(before) | set(after)), "metrics_compared": compared, "differences": diffs}


def _run_metrics(folder: Path) -> dict[str, dict[str, Any]]:
    """{model/task: metrics} of every results JSON below ``folder`` (stderr and aliases left out)."""
    out = {}
    for path in sorted(folder.rglob("*_results.json")):
        model = path.relative_to(folder).parts[0]
        for task, metrics in json.loads(path.read_text(encoding="utf-8"))["results"].items():
            out[f"{model}/{task}"] = {k: v for k, v in metrics.items() if k != "alias" and "_stderr" not in k}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    full = sub.add_parser("full")
    full.add_argument("out", type=Path)
    full.add_argument("--size", type=int, default=2000)
    full.add_argument("--seed", type=int, default=0)
    for name in ("compare-full", "compare-runs"):
        p = sub.add_parser(name)
        p.add_argument("before", type=Path)
        p.add_argument("after", type=Path)
        p.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "full":
        args.out.write_text(json.dumps(full_size(args.size, args.seed), indent=1, sort_keys=True) + "\n")
        return 0
    if args.command == "compare-full":
        load = lambda p: {t: r["metrics"] for t, r in json.loads(p.read_text()).items()}  # noqa: E731
        report = compare(load(args.before), load(args.after))
    else:
        report = compare(_run_metrics(args.before), _run_metrics(args.after))
    text = json.dumps(report, indent=1, sort_keys=True, default=str)
    if args.out:
        args.out.write_text(text + "\n")
    print(
        f"{report['tasks']} tasks, {report['metrics_compared']} metrics compared, "
        f"{len(report['differences'])} differences"
    )
    for diff in report["differences"][:20]:
        print("  ", json.dumps(diff, default=str)[:300])
    return 1 if report["differences"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
