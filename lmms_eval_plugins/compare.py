"""``lmms-eval-plugins compare OUTPUT_A OUTPUT_B``: paired differences B - A for every headline metric.

For each task both runs logged (``--log_samples``) and each headline metric of its benchmark's spec,
the items both runs scored are paired by ``doc_id`` (a pair whose ``target`` differs means the runs
read different data: that task is refused). Every row has one method, a seeded joint bootstrap of
the difference (whole clusters resampled where the benchmark names a cluster unit; for a mean of
per-item scores, the mean of the per-item differences, computed at once): its 95% percentile
interval and its p-value come from the same resamples, so the * (interval excludes 0) and p < 0.05
always agree, and the interval stays inside the metric's range (:func:`stats.percentile_test`).
Values, differences and intervals are in the metric's units (percent for ours).

``--json`` prints a JSON list of objects with keys ``task``, ``metric``, ``a``, ``b``, ``diff``,
``ci_low``, ``ci_high``, ``p_value``, ``n``, ``method``. A task or metric the runs cannot be compared
on (no shared items, a task in one run only, different task versions or data, a metric missing or
undefined in one run, too few independent units for an interval) gets a note naming why; the others
are still compared. Exit status: 0 when something was compared, 1 when nothing could be, 2 on bad input.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from lmms_eval_plugins import errorbars, logged_samples, stats
from lmms_eval_plugins.benchmark import Benchmark, Metric, benchmark_of_task
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.outcome import is_unscored
from lmms_eval_plugins.runs import Run, RunInputError, discover_runs

JSON_KEYS = ("task", "metric", "a", "b", "diff", "ci_low", "ci_high", "p_value", "n", "method")


@dataclass(frozen=True)
class Row(stats.Paired):
    """One task and metric: the paired difference with where it comes from."""

    task: str = ""
    metric: str = ""


def _item(sample: Mapping[str, Any], metric: str) -> Any:
    """The per-sample item of ``metric`` (:func:`logged_samples.item_of`)."""
    return logged_samples.item_of(sample, metric)


def paired_samples(
    a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]
) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """The samples of the doc_ids both runs logged, in doc_id order (one pairing for every metric of a task);
    a pair whose ``target`` differs is a :class:`RunInputError` (the runs read different data)."""
    by_id_a = {s.get("doc_id"): s for s in a}
    by_id_b = {s.get("doc_id"): s for s in b}
    pairs = []
    for doc_id in sorted(set(by_id_a) & set(by_id_b), key=lambda d: (str(type(d)), d)):
        sa, sb = by_id_a[doc_id], by_id_b[doc_id]
        if sa.get("target") != sb.get("target"):
            raise RunInputError(
                f"doc_id {doc_id}: the runs' targets differ ({sa.get('target')!r:.60} vs "
                f"{sb.get('target')!r:.60}): they did not read the same data"
            )
        pairs.append((sa, sb))
    return pairs


def items_of_pairs(
    pairs: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]], metric: str
) -> tuple[list[Any], list[Any], int]:
    """Items of ``metric`` for paired samples, and how many pairs were left out because either side was
    unscored (a failed request or judge call)."""
    left_a, left_b, unscored = [], [], 0
    for sa, sb in pairs:
        ia, ib = _item(sa, metric), _item(sb, metric)
        if ia is None or ib is None:
            continue
        if is_unscored(ia) or is_unscored(ib):
            unscored += 1
            continue
        left_a.append(ia)
        left_b.append(ib)
    return left_a, left_b, unscored


def paired_items(
    a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]], metric: str
) -> tuple[list[Any], list[Any], int]:
    """Items of ``metric`` for the doc_ids both runs scored, in doc_id order, and how many pairs were
    left out because either side was unscored (a failed request or judge call)."""
    return items_of_pairs(paired_samples(a, b), metric)


def _same_items(x: Sequence[Any], y: Sequence[Any]) -> bool:
    return len(x) == len(y) and all(i is j for i, j in zip(x, y))


def compare_metric(
    spec: Benchmark,
    metric: Metric,
    aggregation: Any,
    a_items: Sequence[Any],
    b_items: Sequence[Any],
    *,
    iterations: int | None = None,
) -> stats.Paired:
    clusters = _clusters(spec, a_items, b_items)
    sa, sb = errorbars.item_scores(metric, a_items), errorbars.item_scores(metric, b_items)
    result = None
    if sa is not None and sb is not None:
        result = stats.paired_mean(sa, sb, clusters=clusters, scale=errorbars.SCALE[metric.unit], iterations=iterations)
    elif metric.sufficient is not None:
        try:
            result = stats.paired_sufficient(
                metric.sufficient, list(a_items), list(b_items), clusters=clusters, iterations=iterations
            )
        except (KeyError, TypeError, ValueError):
            result = None  # items the counts cannot read: the generic route below
    if result is None:
        with errorbars.quiet():
            result = stats.paired_bootstrap(
                aggregation,
                list(a_items),
                list(b_items),
                clusters=clusters,
                iterations=iterations,
                relabel=spec.cluster_key if clusters is not None else None,
            )
    return replace(result, method=f"{result.method} by {spec.cluster_key}") if clusters is not None else result


def _clusters(spec: Benchmark, a_items: Sequence[Any], b_items: Sequence[Any]) -> list[Any] | None:
    clusters = errorbars.clusters_of(spec, a_items)
    if clusters is not None and errorbars.clusters_of(spec, b_items) != clusters:
        return None  # the runs disagree on the units: pair items as independent
    return clusters


def compare_sufficients(
    spec: Benchmark, group: Sequence[tuple[str, Metric, Sequence[Any], Sequence[Any]]], *, iterations: int | None = None
) -> list[stats.Paired]:
    """:func:`compare_metric` of counted metrics (``Metric.sufficient``) over the same paired items, from
    one set of resamples (issue 40: one resample matrix for every metric of a task pair)."""
    a_items, b_items = group[0][2], group[0][3]
    clusters = _clusters(spec, a_items, b_items)
    results = stats.paired_sufficients(
        [(m.sufficient, a, b) for _, m, a, b in group], clusters=clusters, iterations=iterations
    )
    return [replace(r, method=f"{r.method} by {spec.cluster_key}") if clusters is not None else r for r in results]


def _one_run(path: Path) -> Run:
    runs = discover_runs(path)
    if len(runs) != 1:
        raise RunInputError(f"{path}: holds {len(runs)} runs (folders with *_results.json); name one run's folder")
    return runs[0]


def _refuse_duplicates(run: Run, task: str) -> None:
    """A samples file logging a doc_id twice is bad input (exit 2), not a task left out: which line's item
    would be paired is arbitrary (issue 27). Asked only of a file the report's reader already refused."""
    path = run.tasks[task].samples_path
    try:
        logged_samples.read_samples(path)
    except logged_samples.UnusableDocError as exc:
        raise RunInputError(f"{path}: {exc.problem}; {exc.fix}") from exc
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
        why: dict[str, list[str]] = {}  # a note on this task: the metrics it applies to (one line each)
        try:
            pairs = paired_samples(sa, sb)  # one pairing for every metric of the task
        except RunInputError as exc:
            notes.append(f"{task}: {exc}; not compared")
            continue
        results: dict[str, stats.Paired] = {}
        seen: list[tuple[list[Any], list[Any]]] = []  # item lists already built: metrics sharing items share them
        # a metric no line names carries the line's first item (logged_samples.lean): all such share one pairing
        named = set(itertools.chain.from_iterable(s.keys() for s in sa)) | set(
            itertools.chain.from_iterable(s.keys() for s in sb)
        )
        built: dict[str | None, tuple[list[Any], list[Any], int]] = {}
        batched: dict[tuple[int, int], list[tuple[str, Metric, list[Any], list[Any]]]] = {}
        for name, metric in task_metrics.items():
            if not errorbars.has_error_bar(metric):
                continue
            missing = [side for side, run in (("A", a), ("B", b)) if name not in run.tasks[task].metrics]
            if missing:
                why.setdefault(f"missing in run {' and '.join(missing)}; not compared", []).append(name)
                continue
            try:
                source = name if name in named else None
                if source not in built:
                    built[source] = items_of_pairs(pairs, name)
                a_items, b_items, unscored = built[source]
                for known_a, known_b in seen:
                    if _same_items(known_a, a_items) and _same_items(known_b, b_items):
                        a_items, b_items = known_a, known_b
                        break
                else:
                    seen.append((a_items, b_items))
                if unscored:
                    why.setdefault(f"{unscored} item(s) unscored in either run left out of the pairing", []).append(
                        name
                    )
                if metric.sufficient is not None and errorbars.item_scores(metric, a_items) is None:
                    batched.setdefault((id(a_items), id(b_items)), []).append((name, metric, a_items, b_items))
                    continue
                results[name] = compare_metric(
                    spec, metric, getattr(hooks, metric.hook), a_items, b_items, iterations=iterations
                )
            except Exception as exc:  # one metric's failure must not hide the others
                notes.append(f"{task} {name}: not compared: {type(exc).__name__}: {exc}")
        for group in batched.values():  # one set of resamples for every counted metric over the same items
            names = [name for name, *_ in group]
            try:
                results.update(zip(names, compare_sufficients(spec, group, iterations=iterations)))
                continue
            except (KeyError, TypeError, ValueError):
                pass  # items the counts cannot read: each metric by its own route (the generic fallback)
            for name, metric, a_items, b_items in group:
                try:
                    results[name] = compare_metric(
                        spec, metric, getattr(hooks, metric.hook), a_items, b_items, iterations=iterations
                    )
                except Exception as exc:  # one metric's failure must not hide the others
                    notes.append(f"{task} {name}: not compared: {type(exc).__name__}: {exc}")
        for name in task_metrics:
            result = results.get(name)
            if result is None:
                continue
            if result.note:
                why.setdefault(result.note + ("; not compared" if result.diff is None else ""), []).append(name)
            if result.diff is not None:
                rows.append(Row(**asdict(result), task=task, metric=name))
        notes.extend(f"{task} {', '.join(names)}: {reason}" for reason, names in why.items())
    return rows


def _num(value: float | None, places: int = 2) -> str:
    return "—" if value is None else f"{value:.{places}f}"


def p_text(p: float | None, resamples: int) -> str:
    """A bootstrap p-value for display: 0 means no resample fell on the other side of 0, that is
    p below the smallest non-zero value 2 / resamples."""
    if p is None:
        return "—"
    return f"<{2 / resamples:.3g}" if p == 0 and resamples else f"{p:.3f}"


def render(rows: Sequence[Row], a_label: str, b_label: str) -> str:
    head = ("task", "metric", "A", "B", "B - A", "95% CI", "p", "n", "method")
    body = []
    for r in rows:
        ci = "—" if r.ci_low is None else f"[{_num(r.ci_low)}, {_num(r.ci_high)}]"
        mark = " *" if r.significant else ""
        body.append(
            (
                r.task,
                r.metric,
                _num(r.a),
                _num(r.b),
                _num(r.diff) + mark,
                ci,
                p_text(r.p_value, r.resamples),
                str(r.n),
                r.method,
            )
        )
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    lines = [f"A = {a_label}", f"B = {b_label}", ""]
    lines += ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)).rstrip() for line in (head, *body)]
    lines += [
        "",
        "Paired on the items both runs scored (n). * the 95% CI of B - A excludes 0, the same as p < 0.05: both",
        "come from the same seeded bootstrap resamples (percentile interval; p = twice the smaller share of",
        "resampled differences on either side of 0). '—': no interval, see the notes.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lmms-eval-plugins compare", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "output_a", type=Path, help="the first run's lmms-eval --output_path folder (or one run inside it)"
    )
    parser.add_argument("output_b", type=Path, help="the second run's")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    parser.add_argument(
        "--iterations", type=int, default=None, help=f"bootstrap iterations (default {stats.BOOTSTRAP_ENV} or 1000)"
    )
    args = parser.parse_args(argv)
    notes: list[str] = []
    try:
        a, b = _one_run(args.output_a), _one_run(args.output_b)
    except RunInputError as exc:
        print(f"lmms-eval-plugins compare: {exc}", file=sys.stderr)
        return 2
    try:
        rows = compare_runs(a, b, iterations=args.iterations, notes=notes)
    except RunInputError as exc:
        print(f"lmms-eval-plugins compare: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([{k: getattr(r, k) for k in JSON_KEYS} for r in rows], indent=2))
    else:
        print(render(rows, a.label, b.label))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if not rows:
        print(
            "lmms-eval-plugins compare: nothing to compare: no task and metric that both runs scored on shared "
            "items (the notes above say why for each task; logged samples come from lmms-eval --log_samples)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
