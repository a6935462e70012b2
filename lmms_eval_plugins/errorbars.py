"""``<metric>_stderr`` for every headline metric of an installed benchmark, inside lmms-eval.

lmms-eval 0.7.3 computes ``<metric>_stderr`` only for aggregations it knows (``mean``, ``f1_score``,
...); ours are custom, so its results and its Stderr column say ``N/A``. After lmms-eval aggregates a
task, :func:`fill_stderrs` (called by the compatibility entry ``error-bars``, ``compat/patches.py``)
fills ``<metric>_stderr`` for the task's headline metrics from the benchmark's spec, in the metric's
units (:mod:`lmms_eval_plugins.stats`): analytic (clustered) when the metric is a mean of a per-item
score, else a seeded bootstrap of the metric's own aggregation, resampling whole
clusters where the benchmark names a cluster unit. ``--bootstrap_iters 0`` (lmms-eval's switch)
turns ours off too; ``LMMS_EVAL_PLUGINS_BOOTSTRAP_ITERS`` sets the bootstrap iterations (default 1000).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lmms_eval_plugins import stats
from lmms_eval_plugins.benchmark import Benchmark, Metric, benchmark_of_task

log = logging.getLogger(__name__)
# "number": a mean on its own scale (chain lengths, restarts per video, points): an error bar, unscaled
HEADLINE_UNITS = ("%", "fraction", "number")
SCALE = {"%": 100.0, "fraction": 1.0, "number": 1.0}


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Our aggregations' log lines off while they run a thousand times on resamples."""
    try:
        from loguru import logger
    except ImportError:  # pragma: no cover - lmms-eval depends on loguru
        logger = None
    if logger is not None:
        logger.disable("lmms_eval_plugins")
    try:
        yield
    finally:
        if logger is not None:
            logger.enable("lmms_eval_plugins")


def has_error_bar(metric: Metric) -> bool:
    """Headline numbers get one; counts, breakdowns and the 3-round spreads (``*_std``) do not."""
    return metric.unit in HEADLINE_UNITS and not metric.name.endswith("_std")


def clusters_of(spec: Benchmark, items: Sequence[Any]) -> list[Hashable] | None:
    """The cluster unit of each item, when the benchmark names one and every item carries it."""
    key = spec.cluster_key
    if (
        not key
        or not items
        or not all(isinstance(i, dict) and isinstance(i.get(key), Hashable) and i.get(key) is not None for i in items)
    ):
        return None
    return [i[key] for i in items]


def item_scores(metric: Metric, items: Sequence[Any]) -> list[float] | None:
    """Per-item scores of a metric that is their mean, else None."""
    field = metric.item_score
    if not field or not all(isinstance(i, dict) and isinstance(i.get(field), (bool, int, float)) for i in items):
        return None
    return [float(i[field]) for i in items]


@dataclass(frozen=True)
class ErrorBar:
    """A metric's standard error and 95% interval, in its units (each None where not defined)."""

    stderr: float | None
    low: float | None = None
    high: float | None = None


def _sufficient(metric: Metric) -> stats.Sufficient | None:
    if metric.item_score:
        return stats.mean_sufficient(metric.item_score, SCALE[metric.unit])
    return metric.sufficient


def error_bars(
    spec: Benchmark,
    wanted: Sequence[tuple[Metric, Callable[[list[Any]], Any], Sequence[Any]]],
    *,
    iterations: int | None = None,
    task: str = "",
) -> list[ErrorBar | None]:
    """The error bar of each (metric, aggregation, items) of one task (None: the metric has none).

    - A mean of per-item scores: the analytic (clustered) standard error, as lmms-eval computes it.
    - Every other metric: the standard deviation of a seeded (cluster) bootstrap of the statistic,
      computed from per-item counts where the spec gives them (:class:`stats.Sufficient`), else by the
      metric's aggregation on each resample (generic fallback).
    - The 95% interval of every metric: the percentile interval of the same resamples.
    Statistics over the same items share one set of resamples (one multiplicity matrix per block). A
    metric whose error bar fails is logged and left without one; the others keep theirs."""
    iterations = stats.bootstrap_iterations() if iterations is None else iterations
    out: list[ErrorBar | None] = [None] * len(wanted)
    fast: dict[tuple[int, ...], list[tuple[int, stats.Sufficient]]] = {}
    units_of: dict[tuple[int, ...], list[Hashable] | None] = {}  # the same items: one look at their clusters
    first_items: dict[tuple[int, ...], Sequence[Any]] = {}
    columns_of: dict[tuple[int, tuple[int, ...]], Callable[[Sequence[Any]], np.ndarray]] = {}
    for k, (metric, aggregation, items) in enumerate(wanted):
        if not has_error_bar(metric):
            continue
        try:
            same = tuple(map(id, items))
            if same not in units_of:
                units_of[same], first_items[same] = clusters_of(spec, items), items
            clusters = units_of[same]
            scores = item_scores(metric, items)
            if scores is not None:
                se = stats.clustered_stderr(scores, clusters) if clusters is not None else stats.mean_stderr(scores)
                out[k] = ErrorBar(None if se is None else se * SCALE[metric.unit])
            suff = _sufficient(metric) if scores is not None or not metric.item_score else None
            key = (id(suff.columns), same) if suff is not None else None
            if suff is not None and key not in columns_of:  # computed (and checked) once for the metrics sharing them
                try:
                    computed = np.asarray(suff.columns(items), dtype=float).reshape(len(items), -1)
                    columns_of[key] = lambda _items, computed=computed: computed
                except (KeyError, TypeError, ValueError) as exc:  # items the counts cannot read: the generic route
                    log.debug("lmms-eval-plugins: %s %s: generic bootstrap (%s)", task or spec.name, metric.name, exc)
                    suff = None
            if suff is not None:
                fast.setdefault(same, []).append((k, stats.Sufficient(columns_of[key], suff.value)))
            elif scores is None:
                with quiet():
                    values = stats.bootstrap_values(
                        aggregation,
                        list(items),
                        clusters=clusters,
                        iterations=iterations,
                        relabel=spec.cluster_key if clusters is not None else None,
                    )
                out[k] = _bar(values, iterations)
        except Exception as exc:  # an error bar must never cost the run its numbers, nor another metric its bar
            log.warning(
                "lmms-eval-plugins: no standard error for %s %s: %s: %s",
                task or spec.name,
                metric.name,
                type(exc).__name__,
                exc,
            )
    for same, group in fast.items():
        items, clusters = first_items[same], units_of[same]
        try:
            units = stats.unit_index(len(items), clusters)[1]
            resampled = (
                stats.sufficient_resamples(
                    [(suff, items) for _, suff in group], clusters=clusters, iterations=iterations
                )
                if units >= 2
                else [np.empty(0)] * len(group)
            )
        except Exception as exc:
            log.warning(
                "lmms-eval-plugins: no bootstrap error bars for %s: %s: %s", task or spec.name, type(exc).__name__, exc
            )
            continue
        for (k, _suff), values in zip(group, resampled):
            bar = _bar(values, iterations)
            analytic = out[k]
            if analytic is not None:  # a mean: lmms-eval's analytic stderr, the bootstrap's interval
                bar = ErrorBar(analytic.stderr, bar.low if bar else None, bar.high if bar else None)
            out[k] = bar
    return out


def _bar(values: np.ndarray, iterations: int) -> ErrorBar | None:
    spread = stats.spread(values, iterations) if iterations > 0 else None
    return None if spread is None else ErrorBar(*spread)


def metric_stderr(
    spec: Benchmark,
    metric: Metric,
    aggregation: Callable[[list[Any]], Any],
    items: Sequence[Any],
    *,
    iterations: int | None = None,
) -> float | None:
    """The standard error of ``metric`` over ``items`` in the metric's units (None: not defined)."""
    bar = error_bars(spec, [(metric, aggregation, items)], iterations=iterations)[0]
    return None if bar is None else bar.stderr


def fill_stderrs(task_output: Any, bootstrap_iters: int) -> None:
    """Set ``<metric>_stderr`` on an lmms-eval ``TaskOutput`` of one of our tasks where lmms-eval left N/A,
    and note each metric's 95% interval with the run (the results hook writes them to the results file)."""
    spec = benchmark_of_task(str(getattr(task_output, "task_name", "") or ""))
    if spec is None or getattr(task_output, "task", None) is None:
        return
    metrics = spec.task_metrics(str(task_output.task_name))
    aggregations = task_output.task.aggregation()
    iterations = stats.bootstrap_iterations() if bootstrap_iters else 0
    wanted, keys = [], []
    for (name, filter_key), items in task_output.sample_metrics.items():
        metric = metrics.get(name)
        if metric is None or name not in aggregations or not has_error_bar(metric):
            continue
        key = f"{name}_stderr,{filter_key}"
        if (
            task_output.agg_metrics.get(key) not in (None, "N/A")
            or task_output.agg_metrics.get(f"{name},{filter_key}") is None
        ):
            continue  # lmms-eval has one, or the metric itself is unscored (null)
        wanted.append((metric, aggregations[name], items))
        keys.append((name, filter_key))
    bars = error_bars(spec, wanted, iterations=iterations, task=str(task_output.task_name))
    intervals: dict[str, list[float]] = {}
    for (name, filter_key), bar in zip(keys, bars):
        if bar is None:
            continue
        if bar.stderr is not None:
            task_output.agg_metrics[f"{name}_stderr,{filter_key}"] = bar.stderr
        if bar.low is not None and bar.high is not None:
            intervals[f"{name},{filter_key}"] = [bar.low, bar.high]
    if intervals:
        from lmms_eval_plugins.run_state import current_run

        current_run().note_intervals(str(task_output.task_name), intervals)


def fix_clt_columns(task_output: Any) -> None:
    """lmms-eval's ``_stderr_clt`` / ``_stderr_clustered`` of our tasks, in each metric's own units.

    lmms-eval computes both from an item's ``score`` field (0-1) for every metric of a task, so a
    non-mean metric would show a mean's error in a fraction beside its own in percent. For a mean of
    per-item scores we give the CLT and clustered errors of that mean in the metric's units; a metric
    that is not a mean has no CLT error: "N/A" (its error bar is the ``Stderr`` column)."""
    spec = benchmark_of_task(str(getattr(task_output, "task_name", "") or ""))
    if spec is None or getattr(task_output, "task", None) is None:
        return
    metrics = spec.task_metrics(str(task_output.task_name))
    for (name, filter_key), items in task_output.sample_metrics.items():
        clt_key, clustered_key = f"{name}_stderr_clt,{filter_key}", f"{name}_stderr_clustered,{filter_key}"
        if clt_key not in task_output.agg_metrics and clustered_key not in task_output.agg_metrics:
            continue
        metric = metrics.get(name)
        scores = item_scores(metric, items) if metric is not None and has_error_bar(metric) else None
        clt = clustered = None
        if scores is not None:
            scale = SCALE[metric.unit]
            se = stats.mean_stderr(scores)
            clt = None if se is None else se * scale
            clusters = clusters_of(spec, items)
            cse = stats.clustered_stderr(scores, clusters) if clusters is not None else None
            clustered = None if cse is None else cse * scale
        task_output.agg_metrics[clt_key] = "N/A" if clt is None else clt
        task_output.agg_metrics[clustered_key] = "N/A" if clustered is None else clustered
