"""What a benchmark provides, and the registry that finds every installed one.

A benchmark is one package that fills a :class:`Benchmark` and names it in the entry-point group
``lmms_eval_plugins.benchmarks`` (ours do so in pyproject.toml; another installed package can add
its own the same way). The core (discovery, report, YAML generation, scaffolding, export) walks
:func:`registry` and never names a benchmark.

Everything here is data: hooks that build a number live in the benchmark's package and are named by
``"module:attribute"`` strings, imported only when needed (the report imports a section builder when
it draws that section), so loading the registry stays cheap and free of import cycles.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from lmms_eval_plugins.stats import Sufficient

ENTRY_POINT_GROUP = "lmms_eval_plugins.benchmarks"

# What an aggregation reads (the per-item values process_results logged) and what it is.
Items = Sequence[Mapping[str, Any]]
Aggregation = Callable[[Items], Any]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Metric:
    """One metric of a task: its ``metric_list`` row, how it is computed, and what the report needs.

    ``aggregate`` turns the task's per-item values into the metric (lmms-eval's aggregation hook
    ``agg_<name>``, generated from it by :func:`lmms_eval_plugins.task_hooks.task_hooks`, never
    null-unsafe: an unscored item makes it null). ``per_item`` picks this metric's value from the item
    the task's scorer built from the record and the model's output (default: that whole item).
    The run-wide counts (``skipped``, ``unscored``, ``skipped_by_reason``) need neither: the core owns them.
    """

    name: str
    higher_is_better: bool
    paper_name: str = ""  # the paper's name for it ("Acc_i", "CSR"); "" where the paper has none
    unit: str = "%"  # "%" (0-100), "number" (its own scale), "count", "fraction" (0-1), "dict" (a breakdown), "list"
    aggregation: str = ""  # the hook in the task folder's utils.py; "" means agg_<name>
    description: str = ""
    # the per-item field whose mean (x100 for "%") the metric is; "" when it is not a mean of items
    # (then its standard error is a bootstrap of its aggregation: lmms_eval_plugins/errorbars.py)
    item_score: str = ""
    aggregate: Callable[[Any], Any] | None = field(default=None, compare=False, repr=False)
    per_item: Callable[[Any], Any] | None = field(default=None, compare=False, repr=False)
    needs_judge: bool = False  # computed from judge verdicts: a failed verdict leaves only these unscored
    # the metric as a function of sums of per-item statistics: its bootstrap runs every resample at once
    # (lmms_eval_plugins/stats.py); None: the generic bootstrap runs ``aggregate`` on each resample
    sufficient: Sufficient | None = field(default=None, compare=False, repr=False)

    @property
    def error_bar_method(self) -> str:
        """How this metric's standard error and 95% interval are computed (README 'Error bars')."""
        if self.item_score:
            return (
                "mean of a per-item score: analytic standard error (clustered where the benchmark names a unit); "
                "95% interval: percentile bootstrap of the mean"
            )
        if self.sufficient is not None:
            return (
                "not a mean: standard deviation and percentile interval of a seeded (cluster) bootstrap of the "
                "statistic, computed from per-item counts, every resample at once"
            )
        return (
            "not a mean: standard deviation and percentile interval of a seeded (cluster) bootstrap of the "
            "statistic, its aggregation run on each resample (generic fallback)"
        )

    @property
    def hook(self) -> str:
        return self.aggregation or f"agg_{self.name}"

    def yaml_entry(self) -> dict[str, Any]:
        return {
            "metric": self.name,
            "aggregation": f"!function utils.{self.hook}",
            "higher_is_better": self.higher_is_better,
        }


# The counts every task reports, computed by the core from the run (lmms_eval_plugins/outcome.py and
# task_hooks.RUN_COUNTS), never by a benchmark: appended to every metric list of every spec.
RUN_COUNT_METRICS: tuple[Metric, ...] = (
    Metric("skipped", False, unit="count"),
    Metric("unscored", False, unit="count"),
    Metric("skipped_by_reason", False, unit="dict"),
)


def with_run_counts(metrics: Sequence[Metric]) -> tuple[Metric, ...]:
    """``metrics`` ended by the run-wide counts it does not name itself."""
    named = {m.name for m in metrics}
    return (*metrics, *(m for m in RUN_COUNT_METRICS if m.name not in named))


@dataclass(frozen=True)
class Benchmark:
    """A benchmark as the core sees it.

    ``metric_lists`` maps each task YAML file (a name inside ``tasks_dir``) that declares a
    ``metric_list`` to exactly that list, which the core ends with the run-wide counts
    (:data:`RUN_COUNT_METRICS`, unless a list names them itself): ``lmms-eval-plugins sync-yaml`` writes
    the YAML blocks from it and a test fails when a file and its spec disagree.
    """

    name: str  # the task-name prefix: every task of the benchmark is NAME or NAME_...
    title: str  # as the paper writes it
    description: str  # one line
    tasks_dir: Path  # the folder holding its task YAMLs and their utils.py
    metric_lists: Mapping[str, tuple[Metric, ...]]
    # task-name tokens naming a sub-task kind (errorradar_STEP_sample): the report groups variants by them
    roles: tuple[str, ...] = ()
    data: str = ""  # one line: what data a real run needs and where it comes from
    judge: str = ""  # the registered judge its judged tasks use; "" when it needs none
    # the system prompt `judge` sends for this benchmark (its official judging prompt), as text, not a
    # "module:attribute" ref: an exported task folder renames the modules it vendors, never such strings
    judge_prompt: str = field(default="", repr=False)
    cluster_key: str = ""  # per-item field naming the unit items share (a video, a record asked 3 times)
    report_section: str = ""  # "module:function(builder, entries) -> Section"; "" gives the report's default section
    sample_data: str = ""  # "module:function(folder: Path) -> None" writing the bundled sample records
    sample_dir: Path | None = None  # where the bundled sample data lives
    readme: Path | None = None
    order: int = 100  # position in the report and in listings (ties by name)

    def __post_init__(self) -> None:
        # the run-wide counts end every metric list: the core computes them, so no spec lists them
        object.__setattr__(
            self, "metric_lists", {name: with_run_counts(metrics) for name, metrics in self.metric_lists.items()}
        )

    def metrics(self) -> dict[str, Metric]:
        """Every metric of every task, by name (the first declaration wins)."""
        out: dict[str, Metric] = {}
        for metrics in self.metric_lists.values():
            for m in metrics:
                out.setdefault(m.name, m)
        return out

    def task_metrics(self, task: str) -> dict[str, Metric]:
        """The metric list ``task`` runs with: its own YAML's, else the one of the template it includes
        (the benchmark-wide :meth:`metrics` when the task's YAML is not found)."""
        source = _task_metric_files(self.tasks_dir).get(task)
        chosen = self.metric_lists.get(source) if source else None
        return {m.name: m for m in chosen} if chosen is not None else self.metrics()

    def owns(self, task: str) -> bool:
        return task == self.name or task.startswith(self.name + "_")

    def hooks(self) -> Any:
        """The task folder's ``utils.py``, imported by file path as lmms-eval's ``!function`` does (one
        module per benchmark and process): the hooks and aggregations the YAMLs name."""
        name = f"lmms_eval_plugins_task_utils_{self.name}"
        if name in sys.modules:
            return sys.modules[name]
        path = self.tasks_dir / "utils.py"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module

    def resolve(self, attribute: str) -> Any:
        """Import one of the ``"module:attribute"`` hooks (``report_section``, ``sample_data``...)."""
        ref = getattr(self, attribute)
        if not ref:
            return None
        return load_ref(ref)


@functools.lru_cache(maxsize=64)
def _task_metric_files(folder: Path) -> dict[str, str]:
    """task name -> the YAML file (name in ``folder``) whose metric_list it runs with."""
    from lmms_eval_plugins.yaml_index import read_task_yamls

    entries = {e.path.name: e for e in read_task_yamls([folder], recursive=False, skip_unreadable=True)}
    out: dict[str, str] = {}
    for name, entry in entries.items():
        if entry.kind != "task":
            continue
        current, seen = name, set()
        while current in entries and current not in seen:  # follow `include:` to the first metric_list
            seen.add(current)
            if "metric_list" in entries[current].config:
                out[entry.name] = current
                break
            current = entries[current].include
    return out


def task_folder(name: str) -> Path:
    """Our task folder ``name`` (``task_yamls/<name>``), found without importing the task package, so a
    spec also loads inside an exported task folder (lmms_eval_plugins/export.py)."""
    here = Path(__file__).resolve().parent
    for root in (here / "task_yamls", here.parent / "task_yamls"):  # installed, then a source checkout
        if (root / name).is_dir():
            return root / name
    return here / "task_yamls" / name


def load_ref(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part)
    return obj


@functools.lru_cache(maxsize=1)
def registry() -> dict[str, Benchmark]:
    """Every installed benchmark by name, in entry-point order sorted by name.

    An entry point that fails to load or is not a :class:`Benchmark` is logged and left out: one
    broken third-party package must not take the others down.
    """
    found: dict[str, Benchmark] = {}
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            spec = ep.load()
        except Exception as exc:  # a broken package is named, the rest still load
            log.warning("lmms-eval-plugins: benchmark entry point %r (%s) failed to load: %s", ep.name, ep.value, exc)
            continue
        if not isinstance(spec, Benchmark):
            log.warning(
                "lmms-eval-plugins: benchmark entry point %r is a %s, not a Benchmark", ep.name, type(spec).__name__
            )
            continue
        if spec.name in found:
            log.warning(
                "lmms-eval-plugins: benchmark %r registered twice; keeping %s", spec.name, found[spec.name].tasks_dir
            )
            continue
        found[spec.name] = spec
    return found


def ordered_benchmarks() -> list[Benchmark]:
    return sorted(registry().values(), key=lambda b: (b.order, b.name))


def get(name: str) -> Benchmark:
    try:
        return registry()[name]
    except KeyError:
        known = ", ".join(b.name for b in ordered_benchmarks()) or "none"
        raise KeyError(f"no benchmark named {name!r} is installed (installed: {known})") from None


def benchmark_of_task(task: str) -> Benchmark | None:
    """The benchmark whose name prefixes ``task`` (the longest such name), else None."""
    owners = [b for b in registry().values() if b.owns(task)]
    return max(owners, key=lambda b: len(b.name)) if owners else None
