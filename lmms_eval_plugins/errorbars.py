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
from typing import Any

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
    if not key or not items or not all(isinstance(i, dict) and isinstance(i.get(key), Hashable) and i.get(key) is not None
                                       for i in items):
        return None
    return [i[key] for i in items]


def item_scores(metric: Metric, items: Sequence[Any]) -> list[float] | None:
    """Per-item scores of a metric that is their mean, else None."""
    field = metric.item_score
    if not field or not all(isinstance(i, dict) and isinstance(i.get(field), (bool, int, float)) for i in items):
        return None
    return [float(i[field]) for i in items]


def metric_stderr(spec: Benchmark, metric: Metric, aggregation: Callable[[list[Any]], Any], items: Sequence[Any], *,
                  iterations: int | None = None) -> float | None:
    """The standard error of ``metric`` over ``items`` in the metric's units (None: not defined)."""
    if not has_error_bar(metric):
        return None
    clusters = clusters_of(spec, items)
    scores = item_scores(metric, items)
    if scores is not None:
        se = stats.clustered_stderr(scores, clusters) if clusters is not None else stats.mean_stderr(scores)
        return None if se is None else se * SCALE[metric.unit]
    with quiet():
        return stats.bootstrap_stderr(aggregation, list(items), clusters=clusters, iterations=iterations,
                                      relabel=spec.cluster_key if clusters is not None else None)


def fill_stderrs(task_output: Any, bootstrap_iters: int) -> None:
    """Set ``<metric>_stderr`` on an lmms-eval ``TaskOutput`` of one of our tasks where lmms-eval left N/A."""
    spec = benchmark_of_task(str(getattr(task_output, "task_name", "") or ""))
    if spec is None or getattr(task_output, "task", None) is None:
        return
    metrics = spec.task_metrics(str(task_output.task_name))
    aggregations = task_output.task.aggregation()
    iterations = stats.bootstrap_iterations() if bootstrap_iters else 0
    for (name, filter_key), items in task_output.sample_metrics.items():
        metric = metrics.get(name)
        if metric is None or name not in aggregations or not has_error_bar(metric):
            continue
        key = f"{name}_stderr,{filter_key}"
        if task_output.agg_metrics.get(key) not in (None, "N/A") or task_output.agg_metrics.get(f"{name},{filter_key}") is None:
            continue  # lmms-eval has one, or the metric itself is unscored (null)
        try:
            se = metric_stderr(spec, metric, aggregations[name], items, iterations=iterations)
        except Exception as exc:  # an error bar must never cost the run its numbers
            log.warning("lmms-eval-plugins: no standard error for %s %s: %s: %s", task_output.task_name, name, type(exc).__name__, exc)
            continue
        if se is not None:
            task_output.agg_metrics[key] = se
