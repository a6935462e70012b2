"""``lmms-eval-plugins compare OUTPUT_A OUTPUT_B``: paired differences B - A for every headline metric.

For each task both runs logged (``--log_samples``) and each headline metric of its benchmark's spec,
the items both runs scored are paired by ``doc_id`` (a pair whose ``target`` differs means the runs
read different data: that task is refused). A metric that is the mean of a per-item score gets the
mean of per-item differences with its (clustered) standard error; any other metric a seeded joint
bootstrap of the difference of its aggregation (whole clusters resampled where the benchmark names
a cluster unit). Values, differences and intervals are in the metric's units (percent for ours).

``--json`` prints a JSON list of objects with keys ``task``, ``metric``, ``a``, ``b``, ``diff``,
``ci_low``, ``ci_high``, ``p_value``, ``n``. A task the runs cannot be compared on (no shared items,
different task versions or data, a metric missing in one run) gets a note naming why; the other
tasks are still compared. Exit status: 0 when something was
compared, 1 when nothing could be, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lmms_eval_plugins import errorbars, logged_samples, stats
from lmms_eval_plugins.benchmark import Benchmark, Metric, benchmark_of_task
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.outcome import is_unscored
from lmms_eval_plugins.report import ReportInputError, Run, discover_runs, items_of

JSON_KEYS = ("task", "metric", "a", "b", "diff", "ci_low", "ci_high", "p_value", "n")


@dataclass(frozen=True)
class Row(stats.Paired):
    """One task and metric: the paired difference with where it comes from."""

    task: str = ""
    metric: str = ""


def _item(sample: Mapping[str, Any], metric: str, siblings: Sequence[str] = ()) -> Any:
    """The per-sample item of ``metric``: logged under its name, else the item logged under another
    metric of the task (lmms-eval logs one item for metrics that share it), else the sample's item."""
    if metric in sample:
        return sample[metric]
    for name in siblings:
        if isinstance(sample.get(name), dict):
            return sample[name]
    shared = items_of([sample])
    return shared[0] if shared else None


def paired_items(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], metric: str,
                 siblings: Sequence[str] = ()) -> tuple[list[Any], list[Any], int]:
    """Items of ``metric`` for the doc_ids both runs scored, in doc_id order, and how many pairs were
    left out because either side was unscored (a failed request or judge call)."""
    by_id_a = {s.get("doc_id"): s for s in a}
    by_id_b = {s.get("doc_id"): s for s in b}
    left_a, left_b, unscored = [], [], 0
    for doc_id in sorted(set(by_id_a) & set(by_id_b), key=lambda d: (str(type(d)), d)):
        sa, sb = by_id_a[doc_id], by_id_b[doc_id]
        if sa.get("target") != sb.get("target"):
            raise ReportInputError(f"doc_id {doc_id}: the runs' targets differ ({sa.get('target')!r:.60} vs "
                                   f"{sb.get('target')!r:.60}): they did not read the same data")
        ia, ib = _item(sa, metric, siblings), _item(sb, metric, siblings)
        if ia is None or ib is None:
            continue
        if is_unscored(ia) or is_unscored(ib):
            unscored += 1
            continue
        left_a.append(ia)
        left_b.append(ib)
    return left_a, left_b, unscored


def compare_metric(spec: Benchmark, metric: Metric, aggregation: Any, a_items: Sequence[Any], b_items: Sequence[Any], *,
                   iterations: int | None = None) -> stats.Paired:
    clusters = errorbars.clusters_of(spec, a_items)
    if clusters is not None and errorbars.clusters_of(spec, b_items) != clusters:
        clusters = None  # the runs disagree on the units: pair items as independent
    sa, sb = errorbars.item_scores(metric, a_items), errorbars.item_scores(metric, b_items)
    if sa is not None and sb is not None:
        return stats.paired_mean(sa, sb, clusters=clusters, scale=errorbars.SCALE[metric.unit])
    with errorbars.quiet():
        return stats.paired_bootstrap(aggregation, list(a_items), list(b_items), clusters=clusters, iterations=iterations,
                                      relabel=spec.cluster_key if clusters is not None else None)


def _one_run(path: Path) -> Run:
    runs = discover_runs(path)
    if len(runs) != 1:
        raise ReportInputError(f"{path}: holds {len(runs)} runs (folders with *_results.json); name one run's folder")
    return runs[0]


def _refuse_duplicates(run: Run, task: str) -> None:
    """A samples file logging a doc_id twice is bad input (exit 2), not a task left out: which line's item
    would be paired is arbitrary (issue 27). Asked only of a file the report's reader already refused."""
    path = run.tasks[task].samples_path
    try:
        logged_samples.read_samples(path)
    except logged_samples.DuplicateDocError as exc:
        raise ReportInputError(f"{path}: {exc.problem}; {exc.fix}") from exc
    except DataError:
        pass  # missing or malformed: a note, as before


def _version(run: Run, task: str) -> Any:
    versions = run.info.get("versions") if isinstance(run.info, dict) else None
    return versions.get(task) if isinstance(versions, dict) else None


def compare_runs(a: Run, b: Run, *, iterations: int | None = None, notes: list[str] | None = None) -> list[Row]:
    notes = notes if notes is not None else []
    rows: list[Row] = []
    for task in sorted(set(a.tasks) ^ set(b.tasks)):
        if benchmark_of_task(task) is not None and not (a.tasks.get(task) or b.tasks.get(task)).is_group:
            notes.append(f"{task}: only in {'A' if task in a.tasks else 'B'}; not compared")
    for task in sorted(set(a.tasks) & set(b.tasks)):
        spec = benchmark_of_task(task)
        if spec is None or a.tasks[task].is_group:
            continue
        if _version(a, task) != _version(b, task):
            notes.append(f"{task}: task versions differ ({_version(a, task)} vs {_version(b, task)}); not compared")
            continue
        sa, sb = a.samples(task), b.samples(task)
        if sa is None or sb is None:
            for run in (a, b):
                _refuse_duplicates(run, task)
            notes.append(f"{task}: no logged samples in one run (lmms-eval --log_samples); not compared")
            continue
        if not {s.get("doc_id") for s in sa} & {s.get("doc_id") for s in sb}:
            notes.append(f"{task}: the runs share no item (doc_id); not compared")
            continue
        hooks = spec.hooks()
        task_metrics = spec.task_metrics(task)
        for name, metric in task_metrics.items():
            if not errorbars.has_error_bar(metric):
                continue
            missing = [side for side, run in (("A", a), ("B", b)) if name not in run.tasks[task].metrics]
            if missing:
                notes.append(f"{task} {name}: missing in run {' and '.join(missing)}; not compared")
                continue
            try:
                a_items, b_items, unscored = paired_items(sa, sb, name, list(task_metrics))
                if unscored:
                    notes.append(f"{task} {name}: {unscored} item(s) unscored in either run left out of the pairing")
                result = compare_metric(spec, metric, getattr(hooks, metric.hook), a_items, b_items, iterations=iterations)
            except ReportInputError as exc:
                notes.append(f"{task}: {exc}; not compared")
                break
            except Exception as exc:  # one metric's failure must not hide the others
                notes.append(f"{task} {name}: not compared: {type(exc).__name__}: {exc}")
                continue
            rows.append(Row(**asdict(result), task=task, metric=name))
    return rows


def _num(value: float | None, places: int = 2) -> str:
    return "—" if value is None else f"{value:.{places}f}"


def render(rows: Sequence[Row], a_label: str, b_label: str) -> str:
    head = ("task", "metric", "A", "B", "B - A", "95% CI", "p", "n")
    body = []
    for r in rows:
        ci = "—" if r.ci_low is None else f"[{_num(r.ci_low)}, {_num(r.ci_high)}]"
        mark = " *" if r.significant else ""
        body.append((r.task, r.metric, _num(r.a), _num(r.b), _num(r.diff) + mark, ci, _num(r.p_value, 3), str(r.n)))
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    lines = [f"A = {a_label}", f"B = {b_label}", ""]
    lines += ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in (head, *body)]
    lines += ["", "* the 95% confidence interval of B - A excludes 0. Paired on the items both runs scored."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lmms-eval-plugins compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("output_a", type=Path, help="the first run's lmms-eval --output_path folder (or one run inside it)")
    parser.add_argument("output_b", type=Path, help="the second run's")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    parser.add_argument("--iterations", type=int, default=None, help=f"bootstrap iterations (default {stats.BOOTSTRAP_ENV} or 1000)")
    args = parser.parse_args(argv)
    notes: list[str] = []
    try:
        a, b = _one_run(args.output_a), _one_run(args.output_b)
    except ReportInputError as exc:
        print(f"lmms-eval-plugins compare: {exc}", file=sys.stderr)
        return 2
    try:
        rows = compare_runs(a, b, iterations=args.iterations, notes=notes)
    except ReportInputError as exc:
        print(f"lmms-eval-plugins compare: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([{k: getattr(r, k) for k in JSON_KEYS} for r in rows], indent=2))
    else:
        print(render(rows, a.label, b.label))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if not rows:
        print("lmms-eval-plugins compare: no task and metric both runs logged with samples", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
