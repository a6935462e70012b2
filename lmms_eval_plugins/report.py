"""``lmms-eval-plugins report``: paper-style HTML and Markdown reports from lmms-eval output folders.

    lmms-eval-plugins report RUN_DIR [RUN_DIR ...] -o OUT [--label NAME ...]

Each RUN_DIR is an lmms-eval ``--output_path`` (or a folder below it, or one ``*_results.json``).
Every folder under it holding ``*_results.json`` files is one model run (several results files in
one folder are merged task by task, the newest winning); the logged samples
(``<date>_samples_<task>.jsonl``) beside a results file are read when present, and a judge
accounting JSON (``judge_report*.json``) in the run folder or next to it is shown.

OUT (a folder) receives ``report.html`` (self-contained: plots embedded as base64 PNG, inline CSS,
no script, no network) and ``report.md`` with its plots in ``OUT/figures/``.

Input problems: a results JSON that cannot be read is an error naming the file (exit status 2;
``--skip-bad`` turns it into a note in the report). A samples file that is missing or malformed
(the note names the file and line) only drops the plots that need it.
See docs/report.md.
"""

from __future__ import annotations

import argparse
import base64
import datetime as _dt
import functools
import html
import io
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from lmms_eval_plugins import logged_samples, provenance
from lmms_eval_plugins.benchmark import Benchmark, benchmark_of_task, ordered_benchmarks
from lmms_eval_plugins.data import JsonLimitError, parse_json
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.safe_text import md_text, redact_model_args

RESULTS_SUFFIX = "_results.json"
JUDGE_REPORT_GLOB = "judge_report*.json"


class ReportInputError(Exception):
    """An input file that cannot be read; the message names the file and what is wrong."""


# =============================================================================================== loading


@dataclass
class TaskResult:
    task: str
    metrics: dict[str, Any]
    results_path: Path
    n_samples: int | None = None
    higher_is_better: dict[str, bool] = field(default_factory=dict)
    is_group: bool = False  # an lmms-eval group's aggregate (no logged samples of its own)

    @property
    def samples_path(self) -> Path:
        return logged_samples.samples_path(self.results_path, self.task)


@dataclass
class Run:
    label: str
    folder: Path
    model: str
    model_args: str
    results_files: list[Path]
    tasks: dict[str, TaskResult]
    info: dict[str, Any] = field(default_factory=dict)
    judge_reports: list[tuple[Path, dict[str, Any]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _samples: dict[str, list[dict[str, Any]] | None] = field(default_factory=dict, repr=False)

    def samples(self, task: str) -> list[dict[str, Any]] | None:
        """The logged samples of ``task``, or None (with a note) when missing or malformed."""
        if task not in self._samples:
            self._samples[task] = _read_samples(self.tasks[task].samples_path, self.notes)
        return self._samples[task]


def _read_samples(path: Path, notes: list[str]) -> list[dict[str, Any]] | None:
    if not path.is_file():
        notes.append(f"no logged samples {path} (run lmms-eval with --log_samples): plots that need them are left out")
        return None
    try:
        return logged_samples.read_samples(path)
    except DataError as exc:  # a broken samples file costs its plots, not the report
        notes.append(f"malformed samples file {path}, {exc.problem}: plots that need it are left out")
        return None


def _strip_filter(name: str) -> tuple[str, str]:
    metric, _, filt = name.partition(",")
    return metric, filt


def task_metrics(raw: Mapping[str, Any]) -> dict[str, Any]:
    """lmms-eval's ``"metric,filter"`` entries without stderr companions; the ``none`` filter wins."""
    out: dict[str, Any] = {}
    chosen: dict[str, str] = {}
    for key, value in raw.items():
        if key in ("alias", " ") or not isinstance(key, str):
            continue
        metric, filt = _strip_filter(key)
        if "_stderr" in metric or not metric.strip():
            continue
        if metric in out and chosen[metric] == "none":
            continue
        out[metric] = value
        chosen[metric] = filt
    return out


def read_results(path: Path) -> dict[str, Any]:
    try:
        data = parse_json(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportInputError(f"{path}: cannot read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                               "is the run still writing it, or was it cut short?") from exc
    except JsonLimitError as exc:  # deep nesting, a huge integer: data, refused by name (issue 27)
        raise ReportInputError(f"{path}: {exc}: not a file lmms-eval wrote (damaged or hostile)") from exc
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise ReportInputError(f"{path}: not an lmms-eval results file (no \"results\" object)")
    try:
        logged_samples.check_task_names(data, path)
    except DataError as exc:
        raise ReportInputError(f"{path}: {exc.problem}; {exc.fix}") from exc
    return data


def _model_args_dict(model_args: Any) -> dict[str, str]:
    if isinstance(model_args, dict):
        return {str(k): str(v) for k, v in model_args.items()}
    out = {}
    for part in str(model_args or "").split(","):
        key, sep, value = part.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


def model_label(data: Mapping[str, Any], folder: Path) -> str:
    """``pretrained`` (last path component) or the API model name from the model args, else
    ``config.model``, else the folder name."""
    config = data.get("config") or {}
    args = _model_args_dict(config.get("model_args"))
    for key in ("pretrained", "model_version", "model", "model_name", "model_id"):
        value = args.get(key)
        if value:
            return value.rstrip("/").split("/")[-1] or value
    return str(config.get("model") or data.get("model_name") or folder.name)


def _results_date(path: Path, data: Mapping[str, Any]) -> str:
    return str(data.get("date") or path.name[: -len(RESULTS_SUFFIX)])


def load_run(folder: Path, files: Sequence[Path], *, label: str | None, skip_bad: bool) -> Run | None:
    notes: list[str] = []
    loaded: list[tuple[Path, dict[str, Any]]] = []
    for path in files:
        try:
            loaded.append((path, read_results(path)))
        except ReportInputError as exc:
            if not skip_bad:
                raise
            notes.append(f"skipped: {exc}")
    if not loaded:
        return Run(label or folder.name, folder, "", "", list(files), {}, notes=notes) if notes else None
    loaded.sort(key=lambda pair: (_results_date(*pair), pair[0].name))
    tasks: dict[str, TaskResult] = {}
    for path, data in loaded:  # oldest first: a newer file's task replaces an older one
        n_samples = data.get("n-samples") or {}
        hib = data.get("higher_is_better") or {}
        groups = {g for g, members in (data.get("group_subtasks") or {}).items() if members}
        for task, raw in data["results"].items():
            if not isinstance(raw, dict):
                notes.append(f"{path}: results for {task!r} are not an object; ignored")
                continue
            metrics = task_metrics(raw)
            if not metrics:
                continue  # a group header without aggregated metrics
            if task in tasks:
                notes.append(f"task {task} is in {tasks[task].results_path.name} and {path.name}; the newer one is shown")
            count = n_samples.get(task, {})
            tasks[task] = TaskResult(task, metrics, path,
                                     count.get("effective") if isinstance(count, dict) else None,
                                     hib.get(task) if isinstance(hib.get(task), dict) else {}, task in groups)
    newest_path, newest = loaded[-1]
    config = newest.get("config") or {}
    info = {
        "date": _results_date(newest_path, newest),
        "lmms_eval_version": newest.get("lmms_eval_version"),
        "software": newest.get(provenance.RESULTS_KEY) if isinstance(newest.get(provenance.RESULTS_KEY), dict) else None,
        "limit": config.get("limit"),
        "gen_kwargs": config.get("gen_kwargs"),
        "model_backend": config.get("model_backend"),
        "total_evaluation_time_seconds": newest.get("total_evaluation_time_seconds"),
        "versions": {k: v for path, data in loaded for k, v in (data.get("versions") or {}).items()},
    }
    # Shown in every page the report writes: credential-like values are hidden here, once.
    model_args = config.get("model_args")
    run = Run(label or model_label(newest, folder), folder, str(config.get("model") or ""),
              redact_model_args(model_args) if isinstance(model_args, (str, dict)) else json.dumps(model_args or ""),
              [p for p, _ in loaded], tasks, info, notes=notes)
    return run


def _find_judge_reports(run_dir: Path, folder: Path, notes: list[str]) -> list[tuple[Path, dict[str, Any]]]:
    """``judge_report*.json`` in the run's folder and next to it: in its parent folder
    and in the RUN_DIR given on the command line (and that one's parent)."""
    candidates: list[Path] = list(folder.glob(JUDGE_REPORT_GLOB))
    given = run_dir if run_dir.is_dir() else run_dir.parent
    for base in {folder.parent, given, given.parent}:
        if base.is_dir():
            candidates.extend(base.glob(JUDGE_REPORT_GLOB))
    out = []
    for path in sorted(set(candidates)):
        try:
            data = parse_json(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("by_judge", {}), dict):
                raise ValueError("not a judge accounting object")
        except (OSError, ValueError) as exc:
            notes.append(f"judge accounting file {path} could not be read ({exc}); not shown")
            continue
        out.append((path, data))
    return out


def discover_runs(run_dir: Path, *, label: str | None = None, skip_bad: bool = False) -> list[Run]:
    """One Run per folder under ``run_dir`` that holds ``*_results.json`` files."""
    groups: dict[Path, list[Path]] = {}
    if run_dir.is_file():
        if not run_dir.name.endswith(RESULTS_SUFFIX):
            raise ReportInputError(f"{run_dir}: not a folder and not a *{RESULTS_SUFFIX} file")
        groups[run_dir.parent] = [run_dir]
    elif run_dir.is_dir():
        for path in sorted(run_dir.rglob(f"*{RESULTS_SUFFIX}")):
            groups.setdefault(path.parent, []).append(path)
        if not groups:
            raise ReportInputError(f"{run_dir}: no *{RESULTS_SUFFIX} file in it or below it (is it an lmms-eval --output_path?)")
    else:
        raise ReportInputError(f"{run_dir}: no such file or folder")
    runs = []
    for folder, files in sorted(groups.items()):
        sub_label = label
        if label and len(groups) > 1:
            sub_label = f"{label} ({folder.relative_to(run_dir) if folder != run_dir else '.'})"
        run = load_run(folder, files, label=sub_label, skip_bad=skip_bad)
        if run is None:
            continue
        run.judge_reports = _find_judge_reports(run_dir, folder, run.notes)
        runs.append(run)
    return runs


def _dedupe_labels(runs: Sequence[Run]) -> None:
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
    for run in runs:
        if seen[run.label] > 1:
            run.label = f"{run.label} ({run.folder.name})"
    counts: dict[str, int] = {}
    for run in runs:  # still clashing (same folder names): number them
        counts[run.label] = counts.get(run.label, 0) + 1
        if counts[run.label] > 1:
            run.label = f"{run.label} #{counts[run.label]}"


# =============================================================================================== helpers


def fmt(value: Any) -> str:
    """How a metric value is printed in every table: floats with two decimals, ints as they are."""
    if value is None:
        return "N/A"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return f"{value:.2f}"
    if isinstance(value, (list, tuple)) and not value:
        return "—"
    return str(value)


def fmt_ref(value: Any, decimals: int | None = None) -> str:
    """Paper numbers, printed as published (``decimals``: the paper's precision for that column)."""
    if value is None:
        return "—"
    if decimals is not None and isinstance(value, (int, float)):
        return f"{value:.{decimals}f}"
    return str(value)


def num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return float(value)
    return None


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) or (isinstance(value, float) and value.is_integer())


COUNT_PATTERNS: tuple[tuple[str, str], ...] = (
    ("unscored", "unscored"),  # failed model requests: the metrics they touch are N/A (lmms_eval_plugins/outcome.py)
    ("parse_fail", "unparseable"),
    ("judge_errors", "judge errors"),
    ("judge_error", "judge errors"),
    ("skipped", "skipped"),
    ("incomplete", "incomplete"),
)


def _count_what(name: str, pattern: str, what: str) -> str:
    qualifier = name.replace(pattern, "").strip("_")
    return f"{what} ({qualifier})" if qualifier else what


def counts_of(metrics: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """(metric, what, count) for every count metric: unscored samples, parse failures (``parse_fail``,
    ``step_parse_fail``, or a dict of counts per output part), judge errors, skipped records,
    incomplete items."""
    out = []
    for name, value in metrics.items():
        by_reason = metrics.get(f"{name}_by_reason")
        if isinstance(by_reason, dict) and by_reason:
            continue  # the total is shown split by reason
        for pattern, what in COUNT_PATTERNS:
            if pattern not in name:
                continue
            label = what if name.endswith("_by_reason") else _count_what(name, pattern, what)
            if _is_count(value):
                out.append((name, label, int(value)))
            elif isinstance(value, dict) and value and all(_is_count(v) for v in value.values()):
                out.extend((f"{name}[{k}]", f"{label} ({k})" if label == what else f"{label[:-1]}, {k})", int(v))
                           for k, v in value.items())
            break
    return out


def count_note(metrics: Mapping[str, Any]) -> str:
    """'2 unparseable, 1 judge errors' for the nonzero counts ('' when none)."""
    return ", ".join(f"{n} {what}" for _, what, n in counts_of(metrics) if n)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def flatten(metrics: Mapping[str, Any], depth: int = 2) -> dict[str, Any]:
    """Scalar metrics, and dict metrics flattened to ``name[key]`` / ``name[key][key]``."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any, level: int) -> None:
        if isinstance(value, dict):
            if level >= depth:
                return
            for key, inner in value.items():
                walk(f"{prefix}[{key}]", inner, level + 1)
        elif isinstance(value, (list, tuple)):
            if value:
                out[prefix] = ", ".join(fmt(v) for v in value)
        else:
            out[prefix] = value

    for name, value in metrics.items():
        walk(name, value, 0)
    return out


# =============================================================================================== report model


@dataclass
class Col:
    name: str  # unique within the table; the Markdown header and the HTML data-col
    short: str | None = None  # HTML header under a group header
    group: str | None = None
    best: str | None = None  # "max" / "min": bold the best model value


Cell = Any  # str, or (text, annotation)


@dataclass
class Table:
    id: str
    title: str
    columns: list[Col]
    rows: list[tuple[str, list[Cell]]]
    ref_rows: list[tuple[str, list[Cell]]] = field(default_factory=list)
    ref_source: str = ""
    note: str = ""
    first: str = "model"  # header of the row-label column


@dataclass
class Figure:
    id: str
    title: str
    png: bytes
    caption: str = ""


@dataclass
class Note:
    text: str
    kind: str = "note"  # note | warn


@dataclass
class Heading:
    text: str


Block = Table | Figure | Note | Heading


@dataclass
class Section:
    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)
    intro: str = ""


@dataclass
class Entry:
    """One row of a benchmark section: a run and one variant of the benchmark (e.g. ``sample``)."""
    run: Run
    variant: str
    tasks: dict[str | None, TaskResult]
    label: str = ""

    def m(self, role: str | None) -> dict[str, Any]:
        task = self.tasks.get(role)
        return task.metrics if task else {}

    def samples(self, role: str | None) -> list[dict[str, Any]] | None:
        task = self.tasks.get(role)
        return self.run.samples(task.task) if task else None


def split_task(task: str) -> tuple[str | None, str | None, str]:
    """``errorradar_step_sample`` -> (``errorradar``, ``step``, ``sample``): the installed benchmark whose
    name prefixes the task, the first token naming one of its roles, and the rest (the variant)."""
    spec = benchmark_of_task(task)
    if spec is None:
        return None, None, task
    role = None
    rest = []
    for token in task[len(spec.name):].split("_")[1:]:
        if role is None and token in spec.roles:
            role = token
        else:
            rest.append(token)
    return spec.name, role, "_".join(rest)


def entries_for(bench: str, runs: Sequence[Run]) -> list[Entry]:
    entries: dict[tuple[int, str], Entry] = {}
    for index, run in enumerate(runs):
        for task, result in run.tasks.items():
            b, role, variant = split_task(task)
            if b != bench:
                continue
            entry = entries.setdefault((index, variant), Entry(run, variant, {}))
            entry.tasks[role] = result
    out = sorted(entries.values(), key=lambda e: (runs.index(e.run), e.variant))
    variants = {e.variant for e in out}
    for e in out:
        e.label = e.run.label if len(variants) == 1 else f"{e.run.label} [{e.variant or 'full'}]"
    return out


def variant_note(entries: Sequence[Entry]) -> str:
    variants = sorted({e.variant for e in entries})
    n_tasks = len({t.task for e in entries for t in e.tasks.values() if not t.is_group})
    listed = f"{n_tasks} task{'s' if n_tasks != 1 else ''} (listed under 'Every metric')"
    if len(variants) == 1:
        return f"Variant: {variants[0]}, {listed}." if variants[0] else f"Full benchmark, {listed}."
    return f"Several variants ({', '.join(v or 'full' for v in variants)}): rows are labelled model [variant]; {listed}."


# =============================================================================================== plots


class Plotter:
    """matplotlib (Agg canvas, no pyplot state) figures as PNG bytes; disabled when matplotlib is absent."""

    def __init__(self, enabled: bool = True, dpi: int = 96) -> None:
        self.dpi = dpi
        self.error: str | None = None
        self.enabled = enabled
        if enabled:
            try:
                import matplotlib  # noqa: F401
                from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
                from matplotlib.figure import Figure as _F  # noqa: F401
            except ImportError as exc:  # pragma: no cover - depends on the environment
                self.enabled = False
                self.error = (f"plots left out: matplotlib is not installed ({exc}); "
                              "pip install matplotlib (a dependency of lmms-eval-plugins: reinstall it)")
        self.colors: dict[str, str] = {}

    def color(self, label: str) -> str:
        if label not in self.colors:
            palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                       "#bcbd22", "#17becf"]
            self.colors[label] = palette[len(self.colors) % len(palette)]
        return self.colors[label]

    def figure(self, width: float, height: float):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure as MplFigure

        fig = MplFigure(figsize=(width, height), dpi=self.dpi, layout="constrained")
        FigureCanvasAgg(fig)
        return fig

    def png(self, fig) -> bytes:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=self.dpi, facecolor="white")
        return buffer.getvalue()

    # ------------------------------------------------------------------------------- chart kinds

    def grouped_bars(self, ax, categories: Sequence[str], series: Mapping[str, Sequence[float | None]], *,
                     ylabel: str = "", ylim: tuple[float, float] | None = None, colors: Mapping[str, str] | None = None,
                     value_labels: bool = False, hatches: Mapping[str, str] | None = None) -> None:
        n = max(1, len(series))
        width = 0.8 / n
        for i, (name, values) in enumerate(series.items()):
            xs = [k + (i - (n - 1) / 2) * width for k in range(len(categories))]
            heights = [v if v is not None else 0.0 for v in values]
            bars = ax.bar(xs, heights, width=width * 0.95, label=name,
                          color=(colors or {}).get(name) or self.color(name),
                          hatch=(hatches or {}).get(name))
            if value_labels:
                for bar, v in zip(bars, values):
                    if v is not None:
                        ax.annotate(f"{v:.1f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                                    ha="center", va="bottom", fontsize=7, xytext=(0, 1), textcoords="offset points")
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels(categories, rotation=30 if max((len(c) for c in categories), default=0) > 6 else 0,
                           ha="right" if max((len(c) for c in categories), default=0) > 6 else "center", fontsize=8)
        if ylabel:
            ax.set_ylabel(ylabel)
        if ylim:
            ax.set_ylim(*ylim)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)

    @staticmethod
    def legend(fig, ax, ncol: int | None = None) -> None:
        handles, labels = ax.get_legend_handles_labels()
        if len(labels) > 1:
            fig.legend(handles, labels, loc="outside lower center", ncol=ncol or min(6, len(labels)), fontsize=8,
                       frameon=False)

    def bars_figure(self, title: str, categories: Sequence[str], series: Mapping[str, Sequence[float | None]], *,
                    ylabel: str = "%", ylim: tuple[float, float] | None = (0, 105), width: float | None = None,
                    value_labels: bool = True) -> bytes:
        fig = self.figure(width or max(5.0, 1.2 + 0.55 * len(categories) * max(1, len(series)) ** 0.5), 3.4)
        ax = fig.add_subplot()
        if value_labels and ylim:
            ylim = (ylim[0], ylim[1] * 1.07)
        self.grouped_bars(ax, categories, series, ylabel=ylabel, ylim=ylim, value_labels=value_labels)
        ax.set_title(title, fontsize=10)
        self.legend(fig, ax)
        return self.png(fig)

    def panels_figure(self, title: str, panels: Sequence[tuple[str, Sequence[str], Mapping[str, Sequence[float | None]]]],
                      *, ylabel: str = "%", ylim: tuple[float, float] | None = (0, 105)) -> bytes:
        n = len(panels)
        widest = max(len(p[1]) for p in panels)
        fig = self.figure(min(16.0, max(5.0, n * (1.6 + 0.45 * widest))), 3.6)
        axes = fig.subplots(1, n, squeeze=False)[0]
        for ax, (sub, cats, series) in zip(axes, panels):
            self.grouped_bars(ax, cats, series, ylabel=ylabel, ylim=ylim)
            ax.set_title(sub, fontsize=9)
        fig.suptitle(title, fontsize=10)
        self.legend(fig, max(axes, key=lambda a: len(a.get_legend_handles_labels()[1])))
        return self.png(fig)

    def confusion_grid(self, title: str, matrices: Mapping[str, Mapping[str, Mapping[str, int]]],
                       short: Callable[[str], str] = str) -> bytes:
        n = len(matrices)
        cols = min(n, 3)
        rows = math.ceil(n / cols)
        first = next(iter(matrices.values()))
        size = max(len(first), 3)
        fig = self.figure(cols * (1.6 + 0.55 * size), rows * (1.4 + 0.5 * size) + 0.4)
        axes = fig.subplots(rows, cols, squeeze=False)
        for ax in axes.flat[n:]:
            ax.set_visible(False)
        for ax, (name, matrix) in zip(axes.flat, matrices.items()):
            gold = list(matrix)
            pred = list(dict.fromkeys(k for row in matrix.values() for k in row))
            values = [[float(matrix[g].get(p, 0) or 0) for p in pred] for g in gold]
            shares = [[v / (sum(row) or 1) for v in row] for row in values]
            ax.imshow(shares, cmap="Blues", vmin=0, vmax=1, aspect="auto")
            for i, row in enumerate(values):
                for j, v in enumerate(row):
                    ax.text(j, i, f"{int(v)}", ha="center", va="center", fontsize=7,
                            color="white" if shares[i][j] > 0.6 else "black")
            ax.set_xticks(range(len(pred)))
            ax.set_xticklabels([short(p) for p in pred], rotation=45, ha="right", fontsize=7)
            ax.set_yticks(range(len(gold)))
            ax.set_yticklabels([short(g) for g in gold], fontsize=7)
            ax.set_xlabel("predicted", fontsize=8)
            ax.set_ylabel("gold", fontsize=8)
            ax.set_title(name, fontsize=9)
        fig.suptitle(title, fontsize=10)
        return self.png(fig)

    def radar(self, title: str, axes_labels: Sequence[str], series: Mapping[str, Sequence[float | None]],
              references: Mapping[str, Sequence[float | None]] | None = None) -> bytes:
        fig = self.figure(5.2, 4.8)
        ax = fig.add_subplot(projection="polar")
        angles = [2 * math.pi * k / len(axes_labels) for k in range(len(axes_labels))]
        closed = angles + angles[:1]
        for (name, values), style in zip((references or {}).items(), ("--", ":", "-.", (0, (5, 1)))):
            vals = [v or 0.0 for v in values]
            ax.plot(closed, vals + vals[:1], linestyle=style, linewidth=1.1, color="#888888", label=name)
        for name, values in series.items():
            vals = [v or 0.0 for v in values]
            ax.plot(closed, vals + vals[:1], linewidth=1.6, color=self.color(name), label=name)
            ax.fill(closed, vals + vals[:1], alpha=0.12, color=self.color(name))
        ax.set_xticks(angles)
        ax.set_xticklabels(axes_labels, fontsize=8)
        ax.set_ylim(0, 100)
        ax.set_yticks([25, 50, 75, 100])
        ax.tick_params(axis="y", labelsize=6)
        ax.set_title(title, fontsize=10)
        self.legend(fig, ax, ncol=3)
        return self.png(fig)

    def histograms(self, title: str, data: Mapping[str, Sequence[int]], xlabel: str | Sequence[str], *,
                   panels: Sequence[str] = ()) -> bytes:
        """Side-by-side bars of integer distributions (share of items, %); ``data`` keys are
        ``"panel|series"`` when ``panels`` are given (then ``xlabel`` may be one label per panel)."""
        groups = list(panels) or [""]
        fig = self.figure(max(5.0, 4.6 * len(groups)), 3.3)
        axes = fig.subplots(1, len(groups), squeeze=False)[0]
        xlabels = [xlabel] * len(groups) if isinstance(xlabel, str) else list(xlabel)
        for ax, panel, label in zip(axes, groups, xlabels):
            series = {k.split("|", 1)[-1]: v for k, v in data.items() if not panels or k.split("|", 1)[0] == panel}
            lo = min((min(v) for v in series.values() if v), default=0)
            hi = max((max(v) for v in series.values() if v), default=1)
            cats = list(range(lo, hi + 1))
            shares = {name: [100.0 * sum(1 for x in values if x == c) / len(values) if values else None for c in cats]
                      for name, values in series.items()}
            self.grouped_bars(ax, [str(c) for c in cats], shares, ylabel="% of items", ylim=(0, 105))
            ax.set_xlabel(label, fontsize=8)
            if panel:
                ax.set_title(panel, fontsize=9)
        fig.suptitle(title, fontsize=10)
        self.legend(fig, axes[0])
        return self.png(fig)

    def cal_bias(self, title: str, distributions: Mapping[str, Mapping[str, float]], classes: Sequence[str],
                 gold: Mapping[str, float] | None) -> bytes:
        fig = self.figure(10.0, 3.9)
        left, right = fig.subplots(1, 2, width_ratios=[1.6, 1])
        cats = list(classes) + (["unparseable"] if any(d.get("unparseable") for d in distributions.values()) else [])
        series: dict[str, list[float | None]] = {}
        colors = {}
        if gold:
            series["gold (data)"] = [gold.get(c, 0.0) for c in cats]
            colors["gold (data)"] = "#cccccc"
        for name, dist in distributions.items():
            series[name] = [num(dist.get(c)) or 0.0 for c in cats]
        self.grouped_bars(left, cats, series, ylabel="% of predictions", ylim=(0, 105), colors=colors)
        left.set_title("prediction distribution", fontsize=9)
        left.legend(fontsize=7, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=min(6, len(series)))
        names = list(distributions)
        cal = [num(distributions[n].get("CAL")) or 0.0 for n in names]
        unp = [num(distributions[n].get("unparseable")) or 0.0 for n in names]
        other = [max(0.0, 100.0 - c - u) for c, u in zip(cal, unp)]
        ys = range(len(names))
        right.barh(ys, cal, color="#d62728", label="CAL")
        right.barh(ys, other, left=cal, color="#1f77b4", label="non-CAL")
        right.barh(ys, unp, left=[c + o for c, o in zip(cal, other)], color="#bbbbbb", label="unparseable")
        if gold and "CAL" in gold:
            right.axvline(gold["CAL"], color="black", linestyle="--", linewidth=1, label="gold CAL share")
        right.set_yticks(list(ys))
        right.set_yticklabels(names, fontsize=8)
        right.invert_yaxis()
        right.set_xlim(0, 100)
        right.set_xlabel("% of predictions", fontsize=8)
        right.legend(fontsize=7, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4)
        right.set_title("CAL vs non-CAL (the paper's Figure 21)", fontsize=9)
        fig.suptitle(title, fontsize=10)
        return self.png(fig)


# =============================================================================================== paper rows
# Copied from the papers in /work/shared/papers (see each table's source line); percentages.



def paper_rows(spec: Mapping[str, Any], columns: Sequence[Col], enabled: bool) -> tuple[list[tuple[str, list[Cell]]], str]:
    """A paper's rows (``{"source", "columns", "rows", "decimals"}``, kept in the benchmark's report module)
    aligned to ``columns`` (by name; missing columns are blank)."""
    if not enabled:
        return [], ""
    decimals = spec.get("decimals", [None] * len(spec["columns"]))
    if isinstance(decimals, int):
        decimals = [decimals] * len(spec["columns"])
    places = dict(zip(spec["columns"], decimals))
    rows = []
    for model, values in spec["rows"].items():
        by_name = dict(zip(spec["columns"], values))
        rows.append((f"{model} (paper)", [fmt_ref(by_name.get(c.name), places.get(c.name)) if c.name in by_name else ""
                                          for c in columns]))
    return rows, spec["source"]


# =============================================================================================== building blocks


class Builder:
    def __init__(self, runs: Sequence[Run], *, plots: bool = True, paper: bool = True) -> None:
        self.runs = list(runs)
        self.plotter = Plotter(enabled=plots)
        self.paper = paper
        self._figure_ids: set[str] = set()
        for run in self.runs:
            self.plotter.color(run.label)

    def figure(self, fig_id: str, title: str, make: Callable[[], bytes], caption: str = "") -> Block | None:
        if not self.plotter.enabled:
            return None
        base, k = slug(fig_id), 2
        fig_id = base
        while fig_id in self._figure_ids:
            fig_id, k = f"{base}-{k}", k + 1
        self._figure_ids.add(fig_id)
        try:
            return Figure(fig_id, title, make(), caption)
        except Exception as exc:  # a plot must never sink the whole report
            return Note(f"plot '{title}' could not be drawn: {type(exc).__name__}: {exc}", "warn")

    @staticmethod
    def cell(value: Any, metrics: Mapping[str, Any] | None = None, *, std: Any = None, note: str = "") -> Cell:
        text = fmt(value)
        if isinstance(std, (int, float)) and not isinstance(std, bool) and value is not None:
            text = f"{text} ± {fmt(float(std))}"
        annotation = note or (count_note(metrics) if metrics is not None else "")
        return (text, annotation) if annotation else text

    @staticmethod
    def counts_cell(*metric_sets: Mapping[str, Any]) -> Cell:
        found = [c for metrics in metric_sets for c in counts_of(metrics)]
        if not found:
            return "—"
        nonzero = [f"{n} {what}" for _, what, n in found if n]
        return ", ".join(nonzero) if nonzero else "0"

    def samples_note(self, entries: Sequence[Entry], role: str | None, what: str) -> tuple[list[tuple[Entry, list]], Note | None]:
        have, missing = [], []
        for e in entries:
            if role not in e.tasks:
                continue
            samples = e.samples(role)
            if samples is None:
                missing.append(f"{e.label} ({e.tasks[role].samples_path.name})")
            else:
                have.append((e, samples))
        note = None
        if missing:
            note = Note(f"{what}: no usable logged samples for {', '.join(missing)}; "
                        "left out (see the notes at the end)", "warn")
        return have, note


def items_of(samples: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The per-record item of each logged sample: the first metric value that is an object with
    ``gold``/``pred``/``correct`` (lmms-eval logs the same item under every metric name)."""
    out = []
    for sample in samples:
        for key, value in sample.items():
            if key in ("doc", "filtered_resps", "resps", "arguments"):
                continue
            if isinstance(value, dict) and ("pred" in value or "gold" in value or "correct" in value):
                out.append(value)
                break
    return out


def dict_metric(metrics: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = metrics.get(name)
    return value if isinstance(value, dict) else {}


def breakdown(metrics: Mapping[str, Any], base: str, by: str) -> dict[str, float | None]:
    """``base`` broken down by ``by`` whichever way the task reports it: ``{base}_by_{by}``
    (group -> number), or ``by_{by}`` / ``{by}_breakdown`` (group -> {metric: number})."""
    direct = metrics.get(f"{base}_by_{by}")
    if isinstance(direct, dict):
        return {str(k): num(v) for k, v in direct.items() if not isinstance(v, dict)}
    for name in (f"by_{by}", f"{by}_breakdown", f"breakdown_by_{by}"):
        nested = metrics.get(name)
        if isinstance(nested, dict):
            out = {str(k): num(v.get(base)) for k, v in nested.items() if isinstance(v, dict) and base in v}
            if out:
                return out
    return {}


def best_index(values: Sequence[float | None], how: str) -> set[int]:
    present = [v for v in values if v is not None]
    if len(present) < 2 or max(present) == min(present):
        return set()
    target = max(present) if how == "max" else min(present)
    return {i for i, v in enumerate(values) if v is not None and v == target}


# =============================================================================================== judges, overview, appendix

JUDGE_STAT_COLUMNS = ("verdicts", "calls", "failed_calls", "retries", "reasks", "cache_hits", "tokens_in", "tokens_out",
                      "judge_errors", "skipped", "empty_predictions", "offline_verdicts")
JUDGE_STAT_NAMES = {"failed_calls": "failed", "cache_hits": "cached", "empty_predictions": "empty answers",
                    "offline_verdicts": "offline", "reasks": "re-asks"}


def judge_table(table_id: str, title: str, reports: Sequence[tuple[str, Path, dict[str, Any]]],
                judge_prefixes: Sequence[str] | None) -> Table | None:
    cols = [*(Col(JUDGE_STAT_NAMES.get(c, c.replace("_", " "))) for c in JUDGE_STAT_COLUMNS), Col("failed calls by reason"),
            Col("file")]
    rows = []
    for label, path, data in reports:
        reasons = failure_reasons(data)
        for judge, stats in sorted((data.get("by_judge") or {}).items()):
            if judge_prefixes is not None and not any(judge.startswith(p) for p in judge_prefixes):
                continue
            if not isinstance(stats, dict):
                continue
            rows.append((f"{label} · {judge}", [*(fmt(stats.get(c)) if c in stats else "—" for c in JUDGE_STAT_COLUMNS),
                                                reasons, path.name]))
    if not rows:
        return None
    return Table(table_id, title, cols, rows, first="model · judge",
                 note="From the judge runtime's accounting JSON (docs/judges.md); a sample without a verdict is unscored "
                      "(its judged metric is N/A until `lmms-eval-plugins score`), never scored 0.")


def failure_reasons(data: Mapping[str, Any]) -> str:
    """'HTTP 500: 4, timeout after 60 s: 1' over the judge models of one accounting file ('—' for none)."""
    total: dict[str, int] = {}
    for by_reason in (data.get("failures_by_reason") or {}).values():
        if isinstance(by_reason, dict):
            for reason, n in by_reason.items():
                if _is_count(n):
                    total[str(reason)] = total.get(str(reason), 0) + int(n)
    return ", ".join(f"{reason}: {n}" for reason, n in sorted(total.items())) or "—"


def judge_blocks(b: Builder, entries: Sequence[Entry], prefixes: Sequence[str], bench: str) -> list[Block]:
    reports = []
    seen = set()
    for e in entries:
        for path, data in e.run.judge_reports:
            if (e.run.label, path) not in seen:
                seen.add((e.run.label, path))
                reports.append((e.run.label, path, data))
    table = judge_table(f"{bench}-judges", "Judge accounting", reports, prefixes)
    blocks: list[Block] = [table] if table else []
    flagged = set()
    for e in entries:
        for path, data in e.run.judge_reports:
            by_judge = data.get("by_judge") or {}
            if e.run.label not in flagged and any(
                    str(j).startswith(tuple(prefixes)) and ("_offline" in str(j) or (isinstance(s, dict) and s.get("offline_verdicts")))
                    for j, s in by_judge.items()):
                flagged.add(e.run.label)
                blocks.append(Note(f"{e.run.label}: verdicts from the offline judge ({path.name}); lower fidelity, "
                                   "not comparable with the papers' numbers.", "warn"))
    return blocks


def _shown_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def run_lmms_eval_version(info: Mapping[str, Any]) -> str:
    """The installed lmms-eval version the run recorded; lmms-eval's own ``branch@commit`` only when it is known."""
    software = info.get("software") or {}
    if software.get("lmms-eval"):
        return str(software["lmms-eval"])
    own = info.get("lmms_eval_version")
    return str(own) if own and own != "unknown@unknown" else "— (not recorded)"


def run_plugin_version(info: Mapping[str, Any]) -> str:
    software = info.get("software") or {}
    if not software.get("lmms-eval-plugins"):
        return "— (not recorded)"
    commit = software.get("lmms-eval-plugins commit")
    return str(software["lmms-eval-plugins"]) + (f" ({commit})" if commit else "")


def section_runs(b: Builder) -> Section:
    sec = Section("runs", "Runs", intro="One row per model run; the label is --label, else the model args' pretrained/model name, else lmms-eval's model name.")
    cols = [Col("model"), Col("model args"), Col("tasks"), Col("date"), Col("lmms-eval"), Col("lmms-eval-plugins"), Col("limit"),
            Col("results files"), Col("logged samples")]
    rows = []
    for run in b.runs:
        leaves = [t for t in run.tasks.values() if not t.is_group]
        with_samples = sum(1 for t in leaves if t.samples_path.is_file())
        rows.append((run.label, [run.model or "—", run.model_args or "—", str(len(leaves)), fmt(run.info.get("date")),
                                 run_lmms_eval_version(run.info), run_plugin_version(run.info), fmt(run.info.get("limit")),
                                 ", ".join(str(p.relative_to(run.folder)) if p.is_relative_to(run.folder) else str(p)
                                           for p in run.results_files),
                                 f"{with_samples} of {len(leaves)} tasks"]))
    sec.blocks.append(Table("runs", "Runs", cols, rows, first="run"))
    reports = [(run.label, path, data) for run in b.runs for path, data in run.judge_reports]
    known = ("rubric", "semantic_match")
    other = judge_table("runs-judges", "Judge accounting (other judges)", reports, None)
    if other:
        other.rows = [row for row in other.rows if not row[0].split(" · ")[-1].startswith(known)]
        if other.rows:
            sec.blocks.append(other)
    if reports:
        sec.blocks.append(Note("Judge accounting files: " + "; ".join(f"{label}: {_shown_path(path)}" for label, path, _ in reports)))
    return sec


def appendix_blocks(b: Builder, tasks: Sequence[str]) -> list[Block]:
    blocks: list[Block] = []
    for task in tasks:
        runs = [run for run in b.runs if task in run.tasks]
        flat = {run.label: flatten(run.tasks[task].metrics) for run in runs}
        names = list(dict.fromkeys(k for f in flat.values() for k in f))
        cols = [Col(run.label) for run in runs]
        rows = [(name, [fmt(flat[run.label][name]) if name in flat[run.label] else "—" for run in runs]) for name in names]
        n_row = ("(records)", [fmt(run.tasks[task].n_samples) for run in runs])
        blocks.append(Table(f"all-{task}", f"{task}: every metric", cols, [n_row] + rows, first="metric"))
    return blocks


def errorbar_blocks(b: Builder, spec: Benchmark, runs: Sequence[Run]) -> list[Block]:
    """Headline metrics with their 95% confidence interval and the smallest difference a paired
    comparison of this size would detect (80% power, two-sided 5%); with several runs, each run's
    paired difference from the first (``lmms-eval-plugins compare``), a * where the CI excludes 0."""
    from lmms_eval_plugins import compare, errorbars, stats

    tasks = [t for t in _all_tasks(runs, spec.name) if not any(run.tasks[t].is_group for run in runs if t in run.tasks)]
    rows: list[tuple[str, list[Cell]]] = []
    for task in tasks:
        for name, metric in spec.task_metrics(task).items():
            if not errorbars.has_error_bar(metric):
                continue
            for run in runs:
                metrics = run.tasks[task].metrics if task in run.tasks else {}
                value, se = num(metrics.get(name)), num(metrics.get(f"{name}_stderr"))
                if value is None:
                    continue
                ci = stats.ci95(value, se)
                mde = stats.minimum_detectable_effect(None if se is None else se * math.sqrt(2))
                rows.append((f"{run.label}", [task, metric.paper_name or name, fmt(value), "—" if se is None else fmt(se),
                                              "—" if ci is None else f"[{fmt(ci[0])}, {fmt(ci[1])}]",
                                              "—" if mde is None else fmt(mde)]))
    blocks: list[Block] = []
    if rows:
        cols = [Col("task"), Col("metric"), Col("value"), Col("stderr"), Col("95% CI"), Col("MDE")]
        blocks.append(Heading("Error bars"))
        blocks.append(Table(f"{spec.name}-errorbars", f"{spec.title}: headline metrics with 95% confidence intervals", cols, rows,
                            note="stderr in the metric's units (analytic or clustered for means of per-item scores, else a "
                                 "seeded bootstrap; docs: README 'Error bars'). MDE: the smallest true difference between two "
                                 "runs of this size a test detects 80% of the time (two-sided 5%; unpaired, so an upper bound). "
                                 "'—': the run predates error bars or the metric has none.", first="run"))
    if len(runs) >= 2:
        base = runs[0]
        diffs: list[tuple[str, list[Cell]]] = []
        for other in runs[1:]:
            notes: list[str] = []
            for row in compare.compare_runs(base, other, notes=notes):
                if row.task not in tasks or row.diff is None:
                    continue
                mark = " *" if row.significant else ""
                ci = "—" if row.ci_low is None else f"[{fmt(row.ci_low)}, {fmt(row.ci_high)}]"
                diffs.append((other.label, [row.task, row.metric, fmt(row.diff) + mark, ci,
                                            "—" if row.p_value is None else f"{row.p_value:.3f}", str(row.n)]))
        if diffs:
            cols = [Col("task"), Col("metric"), Col("diff"), Col("95% CI"), Col("p"), Col("paired items")]
            blocks.append(Table(f"{spec.name}-paired", f"{spec.title}: paired differences from {base.label}", cols, diffs,
                                note="run minus the first run, on the items both scored; * the 95% CI excludes 0 "
                                     "(lmms-eval-plugins compare).", first="run"))
    return blocks


def _all_tasks(runs: Sequence[Run], bench: str | None) -> list[str]:
    tasks = dict.fromkeys(t for run in runs for t in run.tasks if (split_task(t)[0] == bench))
    return sorted(tasks)


def default_section(b: Builder, entries: list[Entry], spec: Benchmark) -> Section:
    """A benchmark without a section of its own: one row per run and variant, one column per number
    of its metric table (breakdowns and lists are left to 'Every metric')."""
    names = [m.name for m in spec.metrics().values() if m.unit not in ("dict", "list")]
    cols = [Col(spec.metrics()[n].paper_name or n) for n in names]
    rows = []
    for e in entries:
        merged: dict[str, Any] = {}
        for result in e.tasks.values():
            for name, value in result.metrics.items():
                merged.setdefault(name, value)
        rows.append((e.label, [b.cell(merged.get(n)) for n in names]))
    blocks: list[Block] = [Note(variant_note(entries))]
    if cols:
        blocks.append(Table(f"{spec.name}-main", f"{spec.title}: headline metrics", cols, rows))
    return Section(spec.name, spec.title, blocks, intro=spec.description)


def section_of(spec: Benchmark) -> Callable[[Builder, list[Entry]], Section]:
    make = spec.resolve("report_section")
    return make if make is not None else functools.partial(default_section, spec=spec)


@dataclass
class Report:
    title: str
    sections: list[Section]
    notes: list[str]
    generated: str


def build_report(runs: Sequence[Run], *, title: str | None = None, plots: bool = True, paper: bool = True,
                 extra_notes: Sequence[str] = ()) -> Report:
    b = Builder(runs, plots=plots, paper=paper)
    sections = [section_runs(b)]
    for spec in ordered_benchmarks():
        bench = spec.name
        entries = entries_for(bench, runs)
        if not entries:
            continue
        try:
            sec = section_of(spec)(b, entries)
        except Exception as exc:  # one benchmark's unexpected metric shapes (or a broken section) must not hide the others
            sec = Section(bench, spec.title, [Note(f"this section could not be built: {type(exc).__name__}: {exc}; "
                                                          "every metric is still listed below", "warn")])
        sec.blocks.extend(errorbar_blocks(b, spec, runs))
        sec.blocks.append(Heading("Every metric"))
        sec.blocks.extend(appendix_blocks(b, _all_tasks(runs, bench)))
        sections.append(sec)
    others = _all_tasks(runs, None)
    if others:
        sections.append(Section("other", "Other tasks", appendix_blocks(b, others),
                                intro="Tasks of no benchmark this package adds: every metric as lmms-eval reported it."))
    notes = list(extra_notes)
    if b.plotter.error:
        notes.append(b.plotter.error)
    for run in runs:
        notes.extend(f"{run.label}: {n}" for n in run.notes)
    labels = ", ".join(run.label for run in runs)
    return Report(title or f"lmms-eval report: {labels}", sections, notes,
                  _dt.datetime.now().strftime("%Y-%m-%d %H:%M"))


# =============================================================================================== rendering

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#1b1f24;background:#fff;font-size:14px}
header{padding:18px 28px 8px;border-bottom:1px solid #d0d7de;background:#f6f8fa}
header h1{margin:0 0 4px;font-size:22px}
.meta{color:#57606a;font-size:12px;margin:0 0 8px}
nav a{margin-right:14px;color:#0969da;text-decoration:none;font-weight:600}
main{padding:8px 28px 40px}
section{padding:6px 0 18px;border-bottom:1px solid #eaeef2}
h2{font-size:19px;margin:18px 0 6px}
h3{font-size:15px;margin:16px 0 6px}
p.intro{color:#3d444d;max-width:980px;margin:4px 0 10px}
.tablewrap{overflow-x:auto;margin:8px 0 4px}
table.report{border-collapse:collapse;font-size:12.5px;font-variant-numeric:tabular-nums}
table.report caption{text-align:left;font-weight:600;padding:4px 0;font-size:13.5px}
table.report th,table.report td{border:1px solid #d0d7de;padding:3px 7px;text-align:right;white-space:nowrap}
table.report th{background:#f6f8fa;white-space:normal;min-width:3.5em;vertical-align:bottom}
table.report td:first-child,table.report th:first-child{text-align:left}
table.report td.b{font-weight:700}
table.report td.t{text-align:left;white-space:normal;max-width:24em;overflow-wrap:anywhere}
table.report tbody.ref td{color:#57606a;background:#fbfbfc;font-style:italic}
table.report tbody.ref tr.divider td{text-align:left;background:#fff8c5;color:#4d2d00;font-style:normal;font-weight:600}
span.ann{display:inline-block;margin-left:4px;font-size:10.5px;color:#9a6700;background:#fff8c5;border-radius:3px;padding:0 3px}
p.tnote{color:#57606a;font-size:12px;margin:2px 0 10px;max-width:980px}
figure{margin:10px 0 16px}
figure img{max-width:100%;height:auto;border:1px solid #eaeef2}
figcaption{color:#57606a;font-size:12px}
div.note{border-left:4px solid #0969da;background:#ddf4ff;padding:6px 10px;margin:8px 0;max-width:980px}
div.warn{border-left:4px solid #bf8700;background:#fff8c5;padding:6px 10px;margin:8px 0;max-width:980px}
details{margin:10px 0}
summary{cursor:pointer;font-weight:600}
"""


def _esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _cell_parts(cell: Cell) -> tuple[str, str]:
    if isinstance(cell, tuple):
        return str(cell[0]), str(cell[1])
    return str(cell), ""


def _lead_number(text: str) -> float | None:
    match = re.match(r"\s*(-?\d+(?:\.\d+)?)", text)
    return float(match.group(1)) if match else None


def _bold_sets(table: Table) -> list[set[int]]:
    """Per column: the model rows holding the best value."""
    out = []
    for j, col in enumerate(table.columns):
        if not col.best or len(table.rows) < 2:
            out.append(set())
            continue
        values = [_lead_number(_cell_parts(cells[j])[0]) if j < len(cells) else None for _, cells in table.rows]
        out.append(best_index(values, col.best))
    return out


def table_html(table: Table) -> str:
    bold = _bold_sets(table)
    parts = [f'<div class="tablewrap"><table class="report" id="{_esc(table.id)}"><caption>{_esc(table.title)}</caption><thead>']
    first = _esc(table.first)
    if any(c.group for c in table.columns):
        row = [f'<th rowspan="2">{first}</th>']
        k = 0
        while k < len(table.columns):
            col = table.columns[k]
            if col.group is None:
                row.append(f'<th rowspan="2">{_esc(col.name)}</th>')
                k += 1
                continue
            span = 1
            while k + span < len(table.columns) and table.columns[k + span].group == col.group:
                span += 1
            row.append(f'<th colspan="{span}">{_esc(col.group)}</th>')
            k += span
        parts.append("<tr>" + "".join(row) + "</tr><tr>")
        parts.append("".join(f"<th>{_esc(c.short or c.name)}</th>" for c in table.columns if c.group is not None))
        parts.append("</tr>")
    else:
        parts.append(f"<tr><th>{first}</th>" + "".join(f"<th>{_esc(c.name)}</th>" for c in table.columns) + "</tr>")
    parts.append("</thead><tbody>")

    def row_html(label: str, cells: Sequence[Cell], i: int | None) -> str:
        tds = [f'<td data-col="model">{_esc(label)}</td>']
        for j, col in enumerate(table.columns):
            text, ann = _cell_parts(cells[j]) if j < len(cells) else ("", "")
            classes = (["b"] if i is not None and i in bold[j] else []) + (
                ["t"] if text not in ("", "—", "N/A") and _lead_number(text) is None else [])
            cls = f' class="{" ".join(classes)}"' if classes else ""
            ann_html = f'<span class="ann">{_esc(ann)}</span>' if ann else ""
            tds.append(f'<td data-col="{_esc(col.name)}"{cls}>{_esc(text)}{ann_html}</td>')
        return f'<tr data-row="{_esc(label)}">' + "".join(tds) + "</tr>"

    for i, (label, cells) in enumerate(table.rows):
        parts.append(row_html(label, cells, i))
    parts.append("</tbody>")
    if table.ref_rows:
        parts.append(f'<tbody class="ref"><tr class="divider"><td colspan="{len(table.columns) + 1}">'
                     f'Copied from the paper, not computed here: {_esc(table.ref_source)}</td></tr>')
        for label, cells in table.ref_rows:
            parts.append(row_html(label, cells, None))
        parts.append("</tbody>")
    parts.append("</table></div>")
    if table.note:
        parts.append(f'<p class="tnote">{_esc(table.note)}</p>')
    return "".join(parts)


def render_html(report: Report) -> str:
    nav = " ".join(f'<a href="#{_esc(s.id)}">{_esc(s.title)}</a>' for s in report.sections)
    if report.notes:
        nav += ' <a href="#notes">Notes</a>'
    body = []
    for sec in report.sections:
        body.append(f'<section id="{_esc(sec.id)}"><h2>{_esc(sec.title)}</h2>')
        if sec.intro:
            body.append(f'<p class="intro">{_esc(sec.intro)}</p>')
        in_details = False
        for block in sec.blocks:
            if isinstance(block, Heading):
                if in_details:
                    body.append("</details>")
                body.append(f"<details><summary>{_esc(block.text)}</summary>")
                in_details = True
            elif isinstance(block, Table):
                body.append(table_html(block))
            elif isinstance(block, Figure):
                data = base64.b64encode(block.png).decode("ascii")
                caption = f"<figcaption>{_esc(block.caption)}</figcaption>" if block.caption else ""
                body.append(f'<figure id="fig-{_esc(block.id)}"><img alt="{_esc(block.title)}" '
                            f'src="data:image/png;base64,{data}">{caption}</figure>')
            elif isinstance(block, Note):
                body.append(f'<div class="{"warn" if block.kind == "warn" else "note"}">{_esc(block.text)}</div>')
        if in_details:
            body.append("</details>")
        body.append("</section>")
    if report.notes:
        body.append('<section id="notes"><h2>Notes</h2><ul>' + "".join(f"<li>{_esc(n)}</li>" for n in report.notes)
                    + "</ul></section>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_esc(report.title)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>{_esc(report.title)}</h1><p class=\"meta\">generated {_esc(report.generated)} by "
            f"lmms-eval-plugins report ({_esc(provenance.describe(provenance.software_versions()))}) · "
            "percentages unless a count · bold: best model per column · "
            "italic rows: copied from the papers</p>"
            f"<nav>{nav}</nav></header><main>{''.join(body)}</main></body></html>\n")


def _md(text: Any) -> str:
    return md_text(text)  # names, labels and notes come from stored runs: no raw HTML, no links


def table_md(table: Table) -> str:
    bold = _bold_sets(table)
    lines = [f"**{_md(table.title)}**", "", f"| {_md(table.first)} | " + " | ".join(_md(c.name) for c in table.columns) + " |",
             "|---|" + "|".join("---:" for _ in table.columns) + "|"]

    def row(label: str, cells: Sequence[Cell], i: int | None) -> str:
        out = []
        for j in range(len(table.columns)):
            text, ann = _cell_parts(cells[j]) if j < len(cells) else ("", "")
            text = _md(text)
            if i is not None and i in bold[j] and text:
                text = f"**{text}**"
            out.append(f"{text} ({_md(ann)})" if ann else text)
        return f"| {_md(label)} | " + " | ".join(out) + " |"

    for i, (label, cells) in enumerate(table.rows):
        lines.append(row(label, cells, i))
    if table.ref_rows:
        lines.append(f"| *copied from the paper, not computed here: {_md(table.ref_source)}* |" + " |" * len(table.columns))
        for label, cells in table.ref_rows:
            lines.append(row(f"*{label}*", [f"*{_cell_parts(c)[0]}*" if _cell_parts(c)[0] not in ("", "—") else _cell_parts(c)[0]
                                            for c in cells], None))
    if table.note:
        lines += ["", f"_{_md(table.note)}_"]
    return f"<!-- table: {table.id} -->\n" + "\n".join(lines) + "\n"


def render_markdown(report: Report, figure_dir: str = "figures") -> str:
    out = [f"# {_md(report.title)}", "", f"Generated {report.generated} by `lmms-eval-plugins report` "
           f"({provenance.describe(provenance.software_versions())}). Percentages unless a count; "
           "**bold**: best model per column; *italic* rows are copied from the papers.", ""]
    for sec in report.sections:
        out += [f"## {_md(sec.title)}", ""]
        if sec.intro:
            out += [_md(sec.intro), ""]
        in_details = False
        for block in sec.blocks:
            if isinstance(block, Heading):
                if in_details:
                    out += ["</details>", ""]
                out += [f"<details><summary>{_md(block.text)}</summary>", ""]
                in_details = True
            elif isinstance(block, Table):
                out += [table_md(block), ""]
            elif isinstance(block, Figure):
                out += [f"![{_md(block.title)}]({figure_dir}/{block.id}.png)", ""]
                if block.caption:
                    out += [f"_{_md(block.caption)}_", ""]
            elif isinstance(block, Note):
                out += [f"> {'**Warning:** ' if block.kind == 'warn' else ''}{_md(block.text)}", ""]
        if in_details:
            out += ["</details>", ""]
    if report.notes:
        out += ["## Notes", ""] + [f"- {_md(n)}" for n in report.notes] + [""]
    return "\n".join(out)


def write_report(report: Report, out_dir: Path, *, markdown: bool = True) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {"html": out_dir / "report.html"}
    written["html"].write_text(render_html(report), encoding="utf-8")
    if markdown:
        figures = out_dir / "figures"
        if figures.is_dir():
            for old in figures.glob("*.png"):
                old.unlink()
        for sec in report.sections:
            for block in sec.blocks:
                if isinstance(block, Figure):
                    figures.mkdir(exist_ok=True)
                    (figures / f"{block.id}.png").write_bytes(block.png)
        written["markdown"] = out_dir / "report.md"
        written["markdown"].write_text(render_markdown(report), encoding="utf-8")
    return written


# =============================================================================================== command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lmms-eval-plugins report",
        description="Paper-style HTML and Markdown report from lmms-eval output folders, several models side by side.",
        epilog="Example: lmms-eval-plugins report out/qwen7b out/qwen72b -o report/ --label Qwen2.5-VL-7B --label Qwen2.5-VL-72B")
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR",
                        help="an lmms-eval --output_path (or a folder below it, or one *_results.json)")
    parser.add_argument("-o", "--output", required=True, type=Path, metavar="OUT",
                        help="folder for report.html, report.md and figures/")
    parser.add_argument("--label", action="append", default=[], metavar="NAME",
                        help="name of a run in the tables; give it once per RUN_DIR, in order (default: from the results JSON)")
    parser.add_argument("--title", help="report title")
    parser.add_argument("--no-paper", action="store_true", help="leave out the rows copied from the papers")
    parser.add_argument("--no-plots", action="store_true", help="tables only (no matplotlib needed)")
    parser.add_argument("--no-markdown", action="store_true", help="write report.html only")
    parser.add_argument("--skip-bad", action="store_true",
                        help="turn an unreadable results JSON into a note in the report instead of an error")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if len(args.label) > len(args.run_dirs):
        parser.error(f"{len(args.label)} --label for {len(args.run_dirs)} RUN_DIR")
    runs: list[Run] = []
    notes: list[str] = []
    try:
        for k, run_dir in enumerate(args.run_dirs):
            label = args.label[k] if k < len(args.label) else None
            try:
                found = discover_runs(run_dir, label=label, skip_bad=args.skip_bad)
            except ReportInputError as exc:
                if not args.skip_bad or not run_dir.exists():
                    raise
                notes.append(f"skipped: {exc}")
                continue
            runs.extend(found)
    except ReportInputError as exc:
        print(f"lmms-eval-plugins report: error: {exc}", file=sys.stderr)
        return 2
    runs = [r for r in runs if r.tasks or r.notes]
    if not any(r.tasks for r in runs):
        print("lmms-eval-plugins report: error: no task results in " + ", ".join(map(str, args.run_dirs)), file=sys.stderr)
        return 2
    _dedupe_labels(runs)
    report = build_report(runs, title=args.title, plots=not args.no_plots, paper=not args.no_paper, extra_notes=notes)
    written = write_report(report, args.output, markdown=not args.no_markdown)
    for kind, path in written.items():
        print(f"wrote {path}")
    if report.notes:
        print(f"{len(report.notes)} note(s) in the report, e.g. {report.notes[0]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
