"""What a task folder's ``utils.py`` hands lmms-eval, built from the benchmark's spec.

lmms-eval names every hook in a task YAML as ``!function utils.<name>``. A benchmark's ``utils.py`` is
generated (:func:`utils_source`; ``lmms-eval-plugins sync-yaml`` rewrites it) and binds, one plain
assignment each, so that "go to definition" leads from the YAML to the code:

- the benchmark's own hooks (the names in its hooks module's ``HOOKS``: ``process_docs_*``,
  ``doc_to_*``, ``process_results*``, filters), a hook taking ``sample_dir`` bound to the sample data
  beside that ``utils.py`` (:func:`with_sample_dir`), so no module is ever written to;
- ``agg_<metric>`` for every metric of every metric list of the spec (:func:`aggregation_hook`), from
  ``Metric.aggregate``, null when an item is unscored (lmms_eval_plugins/outcome.py); the run-wide
  counts are the core's.

:func:`task_hooks` returns the same names as a mapping (for tests and tools).

A ``process_results`` hook scores one item (the benchmark's code) and returns :func:`item_values`:
the item under each metric of its list, as the spec says. So a metric is added, renamed or removed in
the spec alone.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from lmms_eval_plugins.benchmark import Benchmark, Metric
from lmms_eval_plugins.outcome import (
    SKIPPED_BY_REASON_METRIC,
    SKIPPED_METRIC,
    UNSCORED_METRIC,
    agg_skipped,
    agg_skipped_by_reason,
    count_unscored,
    guard,
    with_unscored,
)

SAMPLE_DATA = "sample_data"  # the bundled sample records, beside the task YAMLs
# Counts every task reports, computed by the core from the run (never by a benchmark's scorer).
RUN_COUNTS = {
    SKIPPED_METRIC: agg_skipped,
    SKIPPED_BY_REASON_METRIC: agg_skipped_by_reason,
    UNSCORED_METRIC: count_unscored,
}


class SpecError(ValueError):
    """A spec that cannot drive its tasks (a metric with no aggregation, a hook that is missing)."""


def aggregation_of(metric: Metric, benchmark: str = "") -> Any:
    """``metric``'s aggregation hook: its ``aggregate``, made null-safe, or the core's run-wide count."""
    if metric.aggregate is not None:
        return guard(metric.aggregate)
    if metric.name in RUN_COUNTS:
        return RUN_COUNTS[metric.name]
    raise SpecError(
        f"{benchmark or 'a benchmark'}: metric {metric.name!r} declares no aggregate; "
        f"fix: give it Metric(..., aggregate=<items -> value>) in the benchmark's spec.py"
    )


def takes_sample_dir(hook: Any) -> bool:
    """Whether ``hook`` reads the bundled sample data (a ``sample_dir`` parameter: process_docs hooks)."""
    try:
        return "sample_dir" in inspect.signature(hook).parameters
    except (TypeError, ValueError):  # a class or builtin: nothing to bind
        return False


def with_sample_dir(hook: Any, sample_dir: Path) -> Any:
    """``hook`` with ``sample_dir`` filled in, when it takes one (process_docs hooks read sample data)."""
    if not takes_sample_dir(hook):
        return hook

    @functools.wraps(hook)
    def bound(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("sample_dir", sample_dir)
        return hook(*args, **kwargs)

    return bound


def hook_names(hooks: ModuleType) -> tuple[str, ...]:
    """The names in ``hooks.HOOKS``, each checked to be defined there."""
    names = getattr(hooks, "HOOKS", None)
    if not isinstance(names, (tuple, list)):
        raise SpecError(f"{hooks.__name__} has no HOOKS tuple; fix: list there the hooks its task YAMLs name")
    for name in names:
        if not hasattr(hooks, name):
            raise SpecError(f"{hooks.__name__}.HOOKS names {name!r}, which it does not define")
    return tuple(names)


def declared_aggregations(spec: Benchmark) -> dict[str, Metric]:
    """Each aggregation hook name of the spec's metric lists (``agg_<metric>``) -> its first metric; one
    hook name with two computations is a SpecError."""
    declared: dict[str, Metric] = {}
    for metrics in spec.metric_lists.values():
        for metric in metrics:
            first = declared.setdefault(metric.hook, metric)
            if first.aggregate is not metric.aggregate:  # one YAML hook name, two computations: refuse
                raise SpecError(
                    f"{spec.name}: two metrics aggregate through {metric.hook} differently "
                    f"({first.name!r} and {metric.name!r}); fix: share one aggregate, or give one "
                    f"Metric(..., aggregation='agg_<other name>')"
                )
    return declared


def aggregation_hook(spec: Benchmark, hook: str) -> Any:
    """The aggregation lmms-eval calls for ``!function utils.<hook>`` (a generated ``utils.py`` line)."""
    declared = declared_aggregations(spec)
    if hook not in declared:
        raise SpecError(
            f"{spec.name}: no metric aggregates through {hook}; fix: run `lmms-eval-plugins sync-yaml {spec.name}` "
            "(it rewrites utils.py and the YAMLs' metric_list from the spec)"
        )
    return aggregation_of(declared[hook], spec.name)


def task_hooks(spec: Benchmark, hooks: ModuleType, folder: Path) -> dict[str, Any]:
    """Every name the task YAMLs of ``spec`` may call, as the ``utils.py`` in ``folder`` binds them."""
    sample_dir = folder / SAMPLE_DATA
    out: dict[str, Any] = {"SAMPLE_DIR": sample_dir}
    for name in hook_names(hooks):
        out[name] = with_sample_dir(getattr(hooks, name), sample_dir)
    for hook, metric in declared_aggregations(spec).items():
        out.setdefault(hook, aggregation_of(metric, spec.name))
    return out


def item_values(
    metrics: Sequence[Metric],
    item: Mapping[str, Any],
    responses: Sequence[Any],
    *,
    doc: Mapping[str, Any] | None = None,
    judge: Any = None,
) -> dict[str, Any]:
    """``process_results``' return for one item: each metric's value (``per_item`` of the scored item,
    else the item itself) plus the run-wide counts, unscored where the request or the judge failed."""
    scored = dict(item)
    for metric in metrics:  # the headline's 0/1 under the metric's name, for lmms-eval's score_key
        if metric.item_score and metric.name not in scored and metric.item_score in scored:
            scored[metric.name] = float(scored[metric.item_score])
    per_metric = {m.name: (m.per_item(scored) if m.per_item else scored) for m in metrics if m.name not in RUN_COUNTS}
    judged = [m.name for m in metrics if m.needs_judge]
    return with_unscored(per_metric, responses, judge=judge, judged=judged, doc=doc)


def utils_text(
    benchmark: str,
    package: str,
    hooks: Sequence[tuple[str, bool]],
    aggregations: Sequence[str],
    hooks_module: str = "tasks",
) -> str:
    """The text of a task folder's ``utils.py``: ``hooks`` are (name, takes sample_dir) of the hooks module's
    ``HOOKS``, ``aggregations`` the spec's aggregation hook names (the scaffold writes one from its template)."""
    lines = [
        f'"""lmms-eval\'s `!function utils.*` hooks for the {benchmark} tasks, generated from the spec and',
        f"hooks of {package} (lmms_eval_plugins/task_hooks.py):",
        f'edit those, then run `lmms-eval-plugins sync-yaml {benchmark}`, which rewrites this file."""',
        "",
        "from pathlib import Path",
        "",
        f"from {package} import {hooks_module}",
        f"from {package}.spec import BENCHMARK",
        "from lmms_eval_plugins.task_hooks import aggregation_hook, with_sample_dir",
        "",
        f'SAMPLE_DIR = Path(__file__).resolve().parent / "{SAMPLE_DATA}"',
        "",
        f"# the benchmark's hooks ({hooks_module}.HOOKS)",
    ]
    for name, binds in hooks:
        value = f"{hooks_module}.{name}"
        lines.append(f"{name} = with_sample_dir({value}, SAMPLE_DIR)" if binds else f"{name} = {value}")
    lines += ["", "# one aggregation per metric hook of the spec"]
    own = {name for name, _ in hooks}  # a hook of the same name wins, as in task_hooks
    lines += [f'{hook} = aggregation_hook(BENCHMARK, "{hook}")' for hook in aggregations if hook not in own]
    return "\n".join(lines) + "\n"


def utils_source(benchmark: str, package: str, hooks: str = "tasks") -> str:
    """The text of a task folder's ``utils.py`` for the importable ``package``: it holds ``spec.py``
    (``BENCHMARK``) and the hooks module ``hooks`` (a test keeps every shipped ``utils.py`` equal to it)."""
    import importlib

    module = importlib.import_module(f"{package}.{hooks}")
    spec = importlib.import_module(f"{package}.spec").BENCHMARK
    bound = [(name, takes_sample_dir(getattr(module, name))) for name in hook_names(module)]
    return utils_text(benchmark, package, bound, list(declared_aggregations(spec)), hooks)
