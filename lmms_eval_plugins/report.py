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
import html
import io
import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from lmms_eval_plugins.data import read_jsonl
from lmms_eval_plugins.errors import DataError

BENCHMARKS: dict[str, str] = {
    "errorradar": "ErrorRadar",
    "mmerror": "MMErroR",
    "crossvid": "CrossVid",
    "causalstep": "CausalStep",
    "virectify": "ViRectify",
}
# Tokens of a task name that name a subtask (its "role") rather than a variant of the benchmark.
ROLE_TOKENS: dict[str, tuple[str, ...]] = {
    "errorradar": ("step", "cate"),
    "mmerror": ("etc", "epd"),
    "crossvid": ("bu", "nc", "cc", "pea", "pi", "fsa", "pss", "msr", "moc", "ccqa", "comparative", "temporal", "multiview"),
    "causalstep": (),
    "virectify": ("reflect",),
}
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
        stem = self.results_path.name[: -len(RESULTS_SUFFIX)]
        return self.results_path.parent / f"{stem}_samples_{self.task}.jsonl"


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
        return read_jsonl(path)
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
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportInputError(f"{path}: cannot read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
                               "is the run still writing it, or was it cut short?") from exc
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise ReportInputError(f"{path}: not an lmms-eval results file (no \"results\" object)")
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
        "limit": config.get("limit"),
        "gen_kwargs": config.get("gen_kwargs"),
        "model_backend": config.get("model_backend"),
        "total_evaluation_time_seconds": newest.get("total_evaluation_time_seconds"),
    }
    model_args = config.get("model_args")
    run = Run(label or model_label(newest, folder), folder, str(config.get("model") or ""),
              model_args if isinstance(model_args, str) else json.dumps(model_args or ""),
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
            data = json.loads(path.read_text(encoding="utf-8"))
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
        for pattern, what in COUNT_PATTERNS:
            if pattern not in name:
                continue
            label = _count_what(name, pattern, what)
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
    """``errorradar_step_sample`` -> (``errorradar``, ``step``, ``sample``)."""
    tokens = task.split("_")
    bench = tokens[0]
    if bench not in BENCHMARKS:
        return None, None, task
    role = None
    rest = []
    for token in tokens[1:]:
        if role is None and token in ROLE_TOKENS[bench]:
            role = token
        else:
            rest.append(token)
    return bench, role, "_".join(rest)


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
                              "pip install 'lmms-eval-plugins[report]'")
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

PAPER_ROWS: dict[str, dict[str, Any]] = {
    "errorradar_f1": {
        "source": "ErrorRadar paper, Table 6 (per-class F1, printed there as fractions; ×100 here) and §4.3 (STEP accuracy)",
        "decimals": [1, 0, 0, 0, 0, 0],
        "columns": ["STEP acc", "VIS", "CAL", "REAS", "KNOW", "MIS"],
        "rows": {
            "GPT-4o": [None, 58, 55, 59, 15, 25],
            "Gemini-Pro-1.5": [None, 54, 56, 58, 25, 19],
            "Claude-3.5-Sonnet": [None, 45, 51, 58, 16, 18],
            "InternVL2-76B": [54.4, 41, 60, 36, 18, 14],
            "LLaVA-NEXT-72B": [51.8, 12, 57, 39, 12, 1],
            "Human": [69.8, 65, 71, 55, 28, 44],
        },
    },
    "errorradar_rp": {
        "source": "ErrorRadar paper, Tables 4 (recall) and 5 (precision), fractions ×100",
        "decimals": 0,
        "columns": ["R VIS", "R CAL", "R REAS", "R KNOW", "R MIS", "P VIS", "P CAL", "P REAS", "P KNOW", "P MIS"],
        "rows": {
            "GPT-4o": [46, 50, 64, 9, 46, 80, 61, 55, 44, 17],
            "InternVL2-76B": [33, 92, 25, 10, 8, 55, 45, 66, 56, 52],
            "LLaVA-NEXT-72B": [7, 85, 31, 7, 0, 66, 42, 51, 45, 8],
            "Human": [67, 76, 48, 35, 54, 64, 68, 64, 23, 38],
        },
    },
    "mmerror_domains": {
        "source": "MMErroR paper, main results (ETC accuracy by domain; the paper's domain abbreviations)",
        "decimals": 2,
        "columns": ["ML", "PE", "CM", "BH", "EE", "DA", "Total (ETC)"],
        "rows": {
            "Gemini-3-Pro-Preview": [66.37, 66.88, 69.81, 64.43, 65.39, 69.26, 66.65],
            "GPT-5.2 (xhigh)": [64.56, 63.62, 62.26, 60.50, 65.14, 69.59, 64.30],
            "Claude-Opus-4.5": [62.76, 61.00, 61.64, 57.70, 56.74, 68.58, 61.04],
            "Qwen3-VL-32B-Thinking": [59.46, 54.90, 52.20, 65.83, 60.81, 59.80, 59.29],
            "Human Expert (High)": [91.07, 88.65, 87.50, 90.15, 88.96, 90.18, 89.52],
            "Random Choice": [22.10, 23.62, 24.18, 24.06, 21.50, 25.53, 23.45],
        },
    },
    "mmerror_drop": {
        "source": "MMErroR paper, ETC vs EPD table",
        "decimals": 2,
        "columns": ["ETC", "EPD", "EPD drop"],
        "rows": {
            "Gemini-3-Pro-Preview": [66.65, 61.39, -5.26],
            "GPT-5.2 (xhigh)": [64.30, 58.54, -5.76],
            "Claude-Opus-4.5": [61.04, 55.18, -5.86],
            "Kimi-K2.5": [60.19, 51.63, -8.56],
            "LLaMA-4-Maverick": [39.46, 18.13, -21.33],
        },
    },
    "crossvid": {
        "source": "CrossVid paper, Table 2",
        "decimals": 1,
        "columns": ["O.Avg", "BU", "NC", "CC", "PEA", "C.Avg", "PI", "FSA", "PSS", "T.Avg", "MSR", "MOC", "M.Avg", "CCQA"],
        "rows": {
            "Human": [89.2, 85.6, 92.3, 90.7, 83.9, 88.1, 91.6, 85.2, 89.9, 88.9, 93.2, 94.2, 93.7, 85.2],
            "Gemini-2.5-Pro": [50.4, 54.2, 51.8, 68.7, 44.1, 54.7, 76.5, 13.4, 78.2, 56.0, 32.0, 25.3, 28.7, 59.8],
            "GPT-4.1": [45.2, 46.2, 34.6, 58.5, 51.2, 47.6, 70.9, 8.6, 60.5, 46.7, 38.6, 38.2, 38.4, 44.6],
            "Qwen2.5-VL-72B": [34.4, 37.7, 38.5, 52.6, 39.6, 42.1, 61.8, 5.9, 20.0, 29.2, 20.9, 26.0, 23.5, 41.2],
            "InternVL3-8B": [25.6, 15.2, 22.8, 24.3, 42.1, 26.1, 56.2, 3.2, 1.5, 20.3, 34.0, 47.3, 40.7, 9.7],
            "Qwen2.5-VL-7B": [18.3, 19.6, 19.0, 23.4, 15.0, 19.3, 58.6, 1.2, 0.3, 20.0, 11.8, 21.7, 16.8, 12.0],
        },
    },
    "causalstep": {
        "source": "CausalStep paper, Table 3 (its Maximum row and some AMCL > MCL rows cannot be derived from its own definitions)",
        "decimals": [0, 2, 0, 2, 2, 1, 1],
        "columns": ["CSR", "AMCL", "MCL", "RF", "WS", "DUA", "ICRA"],
        "rows": {
            "o4-mini-2025-04-16": [51, 7.19, 30, 1.69, 55.06, 85.2, 39.8],
            "Gemini-2.5-Flash": [48, 6.90, 27, 1.68, 47.63, 84.6, 36.2],
            "GPT-4o-2024-11-20": [39, 5.94, 23, 2.17, 38.88, 80.0, 29.7],
            "Qwen2.5-VL-72B": [26, 5.89, 17, 2.47, 37.69, 76.1, 25.2],
            "Qwen2.5-VL-7B": [16, 5.61, 9, 2.68, 35.42, 71.0, 21.8],
            "Human": [79, 8.03, 46, 0.74, 62.39, 92.0, 76.8],
        },
    },
    "virectify": {
        "source": "ViRectify paper, Table 2",
        "decimals": 2,
        "columns": ["Dynamic Perception · Acc_i", "Dynamic Perception · IoU", "Dynamic Perception · Acc_r",
                    "Scientific Reasoning · Acc_i", "Scientific Reasoning · IoU", "Scientific Reasoning · Acc_r",
                    "Embodied Decision · Acc_i", "Embodied Decision · IoU", "Embodied Decision · Acc_r",
                    "Total · Acc_i", "Total · IoU", "Total · Acc_r"],
        "rows": {
            "GPT-5": [77.51, 44.07, 37.33, 76.97, 48.25, 25.16, 80.32, 52.96, 30.54, 77.98, 46.93, 31.94],
            "Gemini-2.5-Pro": [75.34, 42.71, 36.86, 75.03, 47.16, 24.93, 79.15, 52.73, 30.22, 76.01, 45.68, 31.77],
            "GPT-4o": [74.25, 43.29, 36.17, 72.83, 47.82, 24.32, 78.41, 50.40, 29.43, 75.73, 46.15, 31.33],
            "Qwen2.5-VL-72B": [65.82, 39.84, 27.40, 66.84, 38.61, 20.57, 70.67, 52.48, 20.41, 66.88, 42.90, 23.67],
            "Qwen2.5-VL-7B": [36.29, 24.85, 18.19, 34.55, 25.85, 10.62, 36.71, 39.91, 10.88, 35.77, 28.44, 13.94],
            "InternVL3-8B": [42.14, 25.23, 15.87, 42.05, 25.58, 11.57, 43.48, 37.08, 18.74, 42.39, 27.85, 14.98],
        },
    },
}


def paper_rows(key: str, columns: Sequence[Col], enabled: bool) -> tuple[list[tuple[str, list[Cell]]], str]:
    """The paper's rows aligned to ``columns`` (by name; missing columns are blank)."""
    if not enabled:
        return [], ""
    spec = PAPER_ROWS[key]
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


# =============================================================================================== ErrorRadar

ER_CLASSES = ("VIS", "CAL", "REAS", "KNOW", "MIS")


def _prf_from_confusion(confusion: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, float], dict[str, float]]:
    recall, precision = {}, {}
    for c in ER_CLASSES:
        row = confusion.get(c, {})
        total = sum(num(v) or 0 for v in row.values())
        recall[c] = 100.0 * (num(row.get(c)) or 0) / total if total else 0.0
        predicted = sum(num(confusion.get(g, {}).get(c)) or 0 for g in confusion)
        precision[c] = 100.0 * (num(row.get(c)) or 0) / predicted if predicted else 0.0
    return recall, precision


def section_errorradar(b: Builder, entries: list[Entry]) -> Section:
    sec = Section("errorradar", "ErrorRadar", intro=(
        "First wrong step (STEP) and error category (CATE) of K-12 math solutions. The table follows "
        "the paper's Table 6 (per-class F1) with STEP/CATE accuracy and macro averages added; all numbers are "
        "percentages, unparseable answers count as wrong and are counted next to the score they affect. "
        + variant_note(entries)))
    cols = [Col("STEP acc", short="acc", group="STEP", best="max"), Col("STEP unparseable", short="unparseable", group="STEP"),
            *(Col(c, group="CATE F1 per class", best="max") for c in ER_CLASSES),
            Col("macro P", short="P", group="CATE macro", best="max"), Col("macro R", short="R", group="CATE macro", best="max"),
            Col("macro F1", short="F1", group="CATE macro", best="max"),
            Col("CATE acc", short="acc", group="CATE", best="max"), Col("CATE unparseable", short="unparseable", group="CATE"),
            Col("n (step / cate)")]
    rows = []
    for e in entries:
        s, c = e.m("step"), e.m("cate")
        n_step = e.tasks["step"].n_samples if "step" in e.tasks else None
        n_cate = e.tasks["cate"].n_samples if "cate" in e.tasks else None
        rows.append((e.label, [
            b.cell(s.get("step_acc"), std=s.get("step_acc_std")) if "step_acc" in s else "—",
            fmt(s.get("step_parse_fail")) if "step_parse_fail" in s else "—",
            *(fmt(c.get(f"cate_f1_{k.lower()}")) if f"cate_f1_{k.lower()}" in c else "—" for k in ER_CLASSES),
            fmt(c.get("cate_macro_precision")) if "cate_macro_precision" in c else "—",
            fmt(c.get("cate_macro_recall")) if "cate_macro_recall" in c else "—",
            b.cell(c.get("cate_macro_f1"), std=c.get("cate_macro_f1_std")) if "cate_macro_f1" in c else "—",
            b.cell(c.get("cate_acc"), std=c.get("cate_acc_std")) if "cate_acc" in c else "—",
            fmt(c.get("cate_parse_fail")) if "cate_parse_fail" in c else "—",
            f"{fmt(n_step) if n_step is not None else '—'} / {fmt(n_cate) if n_cate is not None else '—'}",
        ]))
    ref, source = paper_rows("errorradar_f1", cols, b.paper)
    sec.blocks.append(Table("errorradar-main", "STEP and CATE (paper Table 6 layout)", cols, rows, ref, source,
                            note="STEP acc / CATE acc: % correct over all records; F1 per class and macro averages over the five classes."))

    confusions = {e.label: dict_metric(e.m("cate"), "cate_confusion") for e in entries if dict_metric(e.m("cate"), "cate_confusion")}
    if confusions:
        rp_cols = [*(Col(f"R {k}", group="recall", best="max") for k in ER_CLASSES),
                   *(Col(f"P {k}", group="precision", best="max") for k in ER_CLASSES)]
        rp_rows = []
        for label, confusion in confusions.items():
            recall, precision = _prf_from_confusion(confusion)
            rp_rows.append((label, [fmt(recall[k]) for k in ER_CLASSES] + [fmt(precision[k]) for k in ER_CLASSES]))
        ref, source = paper_rows("errorradar_rp", rp_cols, b.paper)
        sec.blocks.append(Table("errorradar-recall-precision", "Per-class recall and precision (paper Tables 4 and 5 layout)",
                                rp_cols, rp_rows, ref, source,
                                note="Computed from the confusion matrix (cate_confusion); an unparseable answer counts against its gold class's recall."))
        fig = b.figure("errorradar-confusion", "CATE confusion matrices",
                       lambda: b.plotter.confusion_grid("ErrorRadar CATE: gold (rows) vs predicted (columns)", confusions,
                                                        short=lambda k: "unp." if k == "unparseable" else k))
        if fig:
            sec.blocks.append(fig)

    f1 = {e.label: [num(e.m("cate").get(f"cate_f1_{k.lower()}")) for k in ER_CLASSES]
          for e in entries if any(f"cate_f1_{k.lower()}" in e.m("cate") for k in ER_CLASSES)}
    if f1:
        refs = {}
        if b.paper:
            spec = PAPER_ROWS["errorradar_f1"]
            for name in ("GPT-4o", "Human"):
                refs[f"{name} (paper)"] = spec["rows"][name][1:]
        fig = b.figure("errorradar-radar", "Per-category F1 (radar)",
                       lambda: b.plotter.radar("ErrorRadar per-category F1 (%)", ER_CLASSES, f1, refs),
                       "Grey lines: the paper's GPT-4o and human rows (Table 6)." if refs else "")
        if fig:
            sec.blocks.append(fig)

    dists = {e.label: dict_metric(e.m("cate"), "cate_pred_distribution") for e in entries if dict_metric(e.m("cate"), "cate_pred_distribution")}
    if dists:
        gold = None
        first = next(iter(confusions.values()), None)
        if first:
            totals = {g: sum(num(v) or 0 for v in row.values()) for g, row in first.items()}
            grand = sum(totals.values()) or 1
            gold = {g: 100.0 * t / grand for g, t in totals.items()}
        fig = b.figure("errorradar-cal-bias", "CAL bias: prediction distribution",
                       lambda: b.plotter.cal_bias("ErrorRadar CATE prediction distribution", dists, ER_CLASSES, gold),
                       "The paper (Figure 21) finds most open-source models over-predict CAL; grey bars: the gold label distribution.")
        if fig:
            sec.blocks.append(fig)

    qt_cols, qt_rows = [], []
    types = sorted({t for e in entries for role in ("step", "cate")
                    for t in dict_metric(e.m(role), f"{role}_acc_by_question_type")})
    if types:
        qt_cols = [Col(f"{t} · {kind}", short=kind, group=t) for t in types for kind in ("STEP", "CATE")]
        for e in entries:
            s = dict_metric(e.m("step"), "step_acc_by_question_type")
            c = dict_metric(e.m("cate"), "cate_acc_by_question_type")
            qt_rows.append((e.label, [fmt(d.get(t)) if t in d else "—" for t in types for d in (s, c)]))
        sec.blocks.append(Table("errorradar-question-type", "Accuracy by question type", qt_cols, qt_rows))

    have, note = b.samples_note(entries, "step", "STEP offset plot")
    offsets = {}
    for e, samples in have:
        values = [int(i["pred"]) - int(i["gold"]) for i in items_of(samples)
                  if isinstance(i.get("pred"), int) and isinstance(i.get("gold"), int)]
        if values:
            offsets[e.label] = values
    if offsets:
        fig = b.figure("errorradar-step-offset", "Predicted minus gold error step",
                       lambda: b.plotter.histograms("ErrorRadar STEP: predicted − gold step (parsed answers)", offsets,
                                                    "predicted step − gold step"),
                       "From the logged samples; 0 is a correct answer, negative values name a step before the real first error.")
        if fig:
            sec.blocks.append(fig)
    if note:
        sec.blocks.append(note)
    return sec


# =============================================================================================== MMErroR

def _mm_short(label: str) -> str:
    names = {"A": "A VPE", "B": "B RE", "C": "C QCE", "D": "D KDE", "E": "E none"}
    if label == "unparseable":
        return "unp."
    return names.get(label[:1], label) if len(label) > 2 and label[1] == "_" else label


def section_mmerror(b: Builder, entries: list[Entry]) -> Section:
    sec = Section("mmerror", "MMErroR", intro=(
        "Error-type classification with a known error (ETC) and with error presence detection first (EPD). "
        "Accuracy is strict (unparseable = wrong) and counted per sample (EPD replays its two stages). "
        + variant_note(entries)))
    for proto in ("etc", "epd"):
        present = [e for e in entries if proto in e.tasks]
        if not present:
            continue
        domains = sorted({d for e in present for d in dict_metric(e.m(proto), "accuracy_by_domain")})
        cols = [*(Col(d, group="accuracy by domain", best="max") for d in domains),
                Col(f"Total ({proto.upper()})", best="max"), Col("domain macro", best="max"), Col("unparseable"), Col("samples")]
        rows = []
        for e in present:
            m = e.m(proto)
            by = dict_metric(m, "accuracy_by_domain")
            confusion = dict_metric(m, "confusion")
            samples = sum(num(v) or 0 for row in confusion.values() if isinstance(row, dict) for v in row.values())
            rows.append((e.label, [*(fmt(by.get(d)) if d in by else "—" for d in domains),
                                   b.cell(m.get("accuracy"), m), fmt(m.get("accuracy_domain_macro")) if "accuracy_domain_macro" in m else "—",
                                   fmt(m.get("parse_fail")) if "parse_fail" in m else "—",
                                   fmt(int(samples)) if confusion else fmt(e.tasks[proto].n_samples)]))
        ref, source = ([], "")
        if proto == "etc":
            ref, source = paper_rows("mmerror_domains", cols, False)
        sec.blocks.append(Table(f"mmerror-{proto}-domains", f"{proto.upper()} accuracy by domain (paper main-results layout)",
                                cols, rows, ref, source))
        if proto == "etc" and b.paper:
            pcols = [Col(c) for c in PAPER_ROWS["mmerror_domains"]["columns"]]
            prow, psource = paper_rows("mmerror_domains", pcols, True)
            sec.blocks.append(Table("mmerror-paper-domains", "Published ETC results by domain (reference)", pcols, [], prow, psource,
                                    note="The paper's six domains (ML, PE, CM, BH, EE, DA) are listed as abbreviations; "
                                         "the columns above use the domain values of the data that was evaluated."))

    both = [e for e in entries if "etc" in e.tasks or "epd" in e.tasks]
    cols = [Col("ETC", best="max"), Col("EPD", best="max"), Col("EPD drop", best="max"), Col("no-error rate"),
            Col("false-alarm rate", best="min"), Col("ETC unparseable"), Col("EPD unparseable"), Col("EPD stage-1 unparseable")]
    rows = []
    for e in both:
        etc, epd = e.m("etc"), e.m("epd")
        drop = (num(epd.get("accuracy")) - num(etc.get("accuracy"))) if num(epd.get("accuracy")) is not None and num(etc.get("accuracy")) is not None else None
        rows.append((e.label, [fmt(etc.get("accuracy")) if "accuracy" in etc else "—",
                               fmt(epd.get("accuracy")) if "accuracy" in epd else "—",
                               fmt(drop) if drop is not None else "—",
                               fmt(epd.get("no_error_rate")) if "no_error_rate" in epd else "—",
                               fmt(epd.get("false_alarm_rate")) if "false_alarm_rate" in epd else "—",
                               fmt(etc.get("parse_fail")) if "parse_fail" in etc else "—",
                               fmt(epd.get("parse_fail")) if "parse_fail" in epd else "—",
                               fmt(epd.get("presence_parse_fail")) if "presence_parse_fail" in epd else "—"]))
    ref, source = paper_rows("mmerror_drop", cols, b.paper)
    sec.blocks.append(Table("mmerror-drop", "From ETC to EPD", cols, rows, ref, source,
                            note="EPD drop = EPD − ETC accuracy. False-alarm rate: share of E_NoError samples answered P "
                                 "(N/A when the data has none, as in the public release)."))
    pairs = {e.label: (num(e.m("etc").get("accuracy")), num(e.m("epd").get("accuracy"))) for e in both}
    if any(v[0] is not None or v[1] is not None for v in pairs.values()):
        fig = b.figure("mmerror-drop", "ETC to EPD drop", lambda: b.plotter.bars_figure(
            "MMErroR accuracy: ETC vs EPD", list(pairs), {"ETC": [v[0] for v in pairs.values()], "EPD": [v[1] for v in pairs.values()]},
            ylabel="accuracy %"))
        if fig:
            sec.blocks.append(fig)

    panels = []
    for proto in ("etc", "epd"):
        present = [e for e in entries if dict_metric(e.m(proto), "accuracy_by_domain")]
        if present:
            domains = sorted({d for e in present for d in dict_metric(e.m(proto), "accuracy_by_domain")})
            panels.append((proto.upper(), domains, {e.label: [num(dict_metric(e.m(proto), "accuracy_by_domain").get(d)) for d in domains]
                                                    for e in present}))
    if panels:
        fig = b.figure("mmerror-domains", "Accuracy by domain", lambda: b.plotter.panels_figure("MMErroR accuracy by domain", panels))
        if fig:
            sec.blocks.append(fig)

    labels = sorted({k for e in entries for p in ("etc", "epd") for k in dict_metric(e.m(p), "accuracy_by_label")})
    if labels:
        cols = [Col(f"{p.upper()} · {_mm_short(l)}", short=_mm_short(l), group=p.upper()) for p in ("etc", "epd") for l in labels]
        rows = []
        for e in entries:
            rows.append((e.label, [fmt(dict_metric(e.m(p), "accuracy_by_label").get(l)) if l in dict_metric(e.m(p), "accuracy_by_label") else "—"
                                   for p in ("etc", "epd") for l in labels]))
        sec.blocks.append(Table("mmerror-labels", "Accuracy by gold label", cols, rows,
                                note="A VPE visual perception, B RE reasoning, C QCE question comprehension, D KDE knowledge deployment, E no error."))

    for proto in ("etc", "epd"):
        confusions = {e.label: dict_metric(e.m(proto), "confusion") for e in entries if dict_metric(e.m(proto), "confusion")}
        if confusions:
            fig = b.figure(f"mmerror-{proto}-confusion", f"{proto.upper()} confusion matrices",
                           lambda c=confusions, p=proto: b.plotter.confusion_grid(f"MMErroR {p.upper()}: gold (rows) vs predicted (columns)",
                                                                                c, short=_mm_short))
            if fig:
                sec.blocks.append(fig)
    dist_panels = []
    for proto in ("etc", "epd"):
        dists = {e.label: dict_metric(e.m(proto), "pred_distribution") for e in entries if dict_metric(e.m(proto), "pred_distribution")}
        if dists:
            cats = list(dict.fromkeys(k for d in dists.values() for k in d))
            dist_panels.append((proto.upper(), [_mm_short(c) for c in cats], {n: [num(d.get(c)) for c in cats] for n, d in dists.items()}))
    if dist_panels:
        fig = b.figure("mmerror-pred-distribution", "Prediction distributions",
                       lambda: b.plotter.panels_figure("MMErroR prediction distribution (% of samples)", dist_panels))
        if fig:
            sec.blocks.append(fig)
    return sec


# =============================================================================================== CrossVid

CV_DIMENSIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("C.Avg", ("bu", "nc", "cc", "pea")),
    ("T.Avg", ("pi", "fsa", "pss")),
    ("M.Avg", ("msr", "moc")),
)
CV_GROUPS = {"bu": "Comparative Analysis", "nc": "Comparative Analysis", "cc": "Comparative Analysis",
             "pea": "Comparative Analysis", "C.Avg": "Comparative Analysis", "pi": "Temporal Understanding",
             "fsa": "Temporal Understanding", "pss": "Temporal Understanding", "T.Avg": "Temporal Understanding",
             "msr": "Multi-view Reasoning", "moc": "Multi-view Reasoning", "M.Avg": "Multi-view Reasoning",
             "ccqa": "Free-form"}
CV_COLUMNS = ("O.Avg", "bu", "nc", "cc", "pea", "C.Avg", "pi", "fsa", "pss", "T.Avg", "msr", "moc", "M.Avg", "ccqa")
CV_SCORE_KEYS = ("score", "accuracy", "acc")
CV_TASKS = ("bu", "nc", "cc", "pea", "pi", "fsa", "pss", "msr", "moc", "ccqa")
# The task folder's own groups (lmms-eval aggregates ``score`` over their members): column -> role.
CV_GROUP_ROLES = {"C.Avg": "comparative", "T.Avg": "temporal", "M.Avg": "multiview", "O.Avg": None}


def _cv_score(metrics: Mapping[str, Any]) -> float | None:
    for key in CV_SCORE_KEYS:
        if num(metrics.get(key)) is not None:
            return num(metrics.get(key))
    return None


def crossvid_row(e: Entry) -> tuple[dict[str, float | None], set[str], list[str]]:
    """(task scores and dimension averages, the averages over an incomplete dimension, notes).

    Averages are computed from the task scores (C/T/M.Avg: mean of their tasks; O.Avg: mean of the
    ten). Where only the group's own aggregate exists it is shown; a group aggregate that differs
    from the computed mean is noted."""
    scores = {t: _cv_score(e.m(t)) for t in CV_TASKS if t in e.tasks}
    out: dict[str, float | None] = dict(scores)
    partial: set[str] = set()
    notes: list[str] = []
    dims = dict(CV_DIMENSIONS)
    dims["O.Avg"] = CV_TASKS
    for col, tasks in dims.items():
        values = [scores[t] for t in tasks if scores.get(t) is not None]
        group = CV_GROUP_ROLES[col]
        reported = _cv_score(e.m(group)) if group in e.tasks else None
        if values:
            out[col] = sum(values) / len(values)
            if len(values) < len(tasks):
                partial.add(col)
            elif reported is not None and abs(reported - out[col]) > 0.005:
                notes.append(f"{e.label}: lmms-eval's {e.tasks[group].task} score is {fmt(reported)}, "
                             f"the mean of its tasks {fmt(out[col])} (shown)")
        elif reported is not None:
            out[col] = reported
    return out, partial, notes


def section_crossvid(b: Builder, entries: list[Entry]) -> Section:
    sec = Section("crossvid", "CrossVid", intro=(
        "Cross-video reasoning, ten tasks in four dimensions (the paper's Table 2 layout). Choice tasks: accuracy; "
        "FSA: mean temporal IoU; PSS: exact order; CCQA: rubric score (micro-average). "
        "C.Avg, T.Avg, M.Avg: means of their tasks; O.Avg: unweighted mean of the ten task scores. "
        + variant_note(entries)))
    cols = [Col(key if "." in key else key.upper(), group=CV_GROUPS.get(key), best="max") for key in CV_COLUMNS]
    rows, any_partial, mismatch = [], False, []
    for e in entries:
        values, partial, notes = crossvid_row(e)
        mismatch += notes
        cells: list[Cell] = []
        for key in CV_COLUMNS:
            value = values.get(key)
            if value is None:
                cells.append("—" if key not in values else fmt(None))
            elif key in partial:
                any_partial = True
                cells.append(b.cell(value, note="partial: over the tasks present"))
            elif key in CV_TASKS:
                cells.append(b.cell(value, e.m(key)))
            else:
                cells.append(fmt(value))
        rows.append((e.label, cells))
    ref, source = paper_rows("crossvid", cols, b.paper)
    sec.blocks.append(Table("crossvid-main", "Ten tasks and dimension averages (paper Table 2 layout)", cols, rows, ref, source,
                            note=("Counts after a score (unparseable answers, judge errors, skipped records) are that task's. "
                                  + ("A 'partial' average is over the tasks present only." if any_partial else ""))))
    sec.blocks.extend(Note(n, "warn") for n in mismatch)

    count_cols = [Col("records"), Col("score"), Col("counts"), Col("other")]
    count_rows = []
    for e in entries:
        for t in CV_TASKS:
            if t not in e.tasks:
                continue
            m = e.m(t)
            extra = [f"{k} {fmt(v)}" for k, v in m.items() if k not in CV_SCORE_KEYS and not isinstance(v, (dict, list))
                     and k not in {name for name, _, _ in counts_of(m)}]
            count_rows.append((f"{e.label} · {t.upper()}", [fmt(e.tasks[t].n_samples), fmt(_cv_score(m)), b.counts_cell(m),
                                                             "; ".join(extra) or "—"]))
    if count_rows:
        sec.blocks.append(Table("crossvid-counts", "Per task: records, counts and other metrics", count_cols, count_rows,
                                first="model · task", note="counts: unparseable answers, judge errors, skipped records (0: none)."))

    series = {}
    for e in entries:
        values, _, _ = crossvid_row(e)
        series[e.label] = [values.get(k) for k in CV_COLUMNS if k != "O.Avg"]
    if any(v is not None for vals in series.values() for v in vals):
        cats = [k if "." in k else k.upper() for k in CV_COLUMNS if k != "O.Avg"]
        fig = b.figure("crossvid-tasks", "Task scores and dimension averages",
                       lambda: b.plotter.bars_figure("CrossVid scores by task and dimension", cats, series, width=12, value_labels=False))
        if fig:
            sec.blocks.append(fig)

    panels, missing_notes = [], []
    for t in CV_TASKS:
        have, note = b.samples_note(entries, t, f"{t.upper()} prediction distribution")
        if note:
            missing_notes.append(note)
        dists = {}
        for e, samples in have:
            preds = []
            for item in items_of(samples):
                pred = item.get("pred")
                if isinstance(pred, list) and all(isinstance(p, str) for p in pred):
                    pred = "".join(sorted(pred))
                if pred is None:
                    pred = "unparseable"
                if isinstance(pred, str) and len(pred) <= 16:
                    preds.append(pred)
                else:
                    preds = []
                    break
            if preds:
                dists[e.label] = preds
        cats = sorted({p for v in dists.values() for p in v}, key=lambda p: (p == "unparseable", len(p), p))
        if dists and len(cats) <= 16:
            panels.append((t.upper(), cats, {n: [100.0 * v.count(c) / len(v) for c in cats] for n, v in dists.items()}))
    if panels:
        for k in range(0, len(panels), 4):
            chunk = panels[k:k + 4]
            fig = b.figure(f"crossvid-pred-distribution-{k // 4}", "Prediction distributions",
                           lambda c=chunk: b.plotter.panels_figure("CrossVid prediction distribution (% of records, from the logged samples)", c))
            if fig:
                sec.blocks.append(fig)
    sec.blocks.extend(missing_notes[:3])
    if len(missing_notes) > 3:
        sec.blocks.append(Note(f"… and {len(missing_notes) - 3} more tasks without usable logged samples", "warn"))
    sec.blocks.extend(judge_blocks(b, entries, ("rubric",), "crossvid"))
    return sec


# =============================================================================================== CausalStep

CS_METRICS = (("csr", "CSR", "max"), ("amcl", "AMCL", "max"), ("mcl", "MCL", "max"), ("rf", "RF", "min"),
              ("ws", "WS", "max"), ("dua", "DUA", "max"), ("icra", "ICRA", "max"))


def chains_of(samples: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Replayed per-video chains that the CausalStep task attaches to one logged sample per video."""
    out = []
    for sample in samples:
        for value in sample.values():
            if isinstance(value, dict) and isinstance(value.get("chain"), dict):
                out.append(value["chain"])
                break
    return out


def unbroken_chains(chain: Mapping[str, Any]) -> list[int]:
    """Lengths of the maximal runs of correct answers in one video's replayed chain."""
    runs, current = [], 0
    for step in chain.get("steps") or []:
        if step.get("correct"):
            current += 1
        else:
            if current:
                runs.append(current)
            current = 0
    if current:
        runs.append(current)
    return runs


def section_causalstep(b: Builder, entries: list[Entry]) -> Section:
    sec = Section("causalstep", "CausalStep", intro=(
        "Stepwise causal reasoning over segmented videos, replayed with the paper's Algorithm 1 (Table 3 layout). "
        "CSR, DUA, ICRA in %; AMCL/MCL in questions; RF restarts per video; WS the weighted score. "
        + variant_note(entries)))
    cols = [Col(name, best=how) for _, name, how in CS_METRICS] + [Col("WS max"), Col("videos"), Col("incomplete videos"),
                                                                  Col("unparseable")]
    rows = []
    for e in entries:
        m = e.m(None)
        rows.append((e.label, [fmt(m.get(k)) if k in m else "—" for k, _, _ in CS_METRICS]
                     + [fmt(m.get(k)) if k in m else "—" for k in ("ws_max", "videos", "incomplete_videos", "parse_fail")]))
    ref, source = paper_rows("causalstep", cols, b.paper)
    sec.blocks.append(Table("causalstep-main", "Seven diagnostic metrics (paper Table 3 layout)", cols, rows, ref, source,
                            note="WS max: the mean over videos of N(N+1)/2, the score of a perfect chain on this data. "
                                 "Incomplete videos (a --limit cut their requests) are left out of the chain metrics."))
    cats = sorted({c for e in entries for c in dict_metric(e.m(None), "by_category")})
    if cats:
        ccols = [Col(name) for _, name, _ in CS_METRICS] + [Col("videos")]
        crows = []
        for c in cats:
            for e in entries:
                by = dict_metric(e.m(None), "by_category")
                if isinstance(by.get(c), dict):
                    crows.append((f"{e.label} · {c}", [fmt(by[c].get(k)) if k in by[c] else "—" for k, _, _ in CS_METRICS]
                                  + [fmt(by[c].get("videos")) if "videos" in by[c] else "—"]))
        sec.blocks.append(Table("causalstep-category", "By video category", ccols, crows, first="model · category"))
        panels = [(name, cats, {e.label: [num(dict_metric(e.m(None), "by_category").get(c, {}).get(k)) if isinstance(dict_metric(e.m(None), "by_category").get(c), dict) else None
                                          for c in cats] for e in entries}) for k, name in (("csr", "CSR %"), ("dua", "DUA %"), ("icra", "ICRA %"))]
        fig = b.figure("causalstep-category", "By category", lambda: b.plotter.panels_figure("CausalStep by category", panels))
        if fig:
            sec.blocks.append(fig)

    have, note = b.samples_note(entries, None, "Chain-length distributions")
    data = {}
    for e, samples in have:
        chains = [c for c in chains_of(samples) if c.get("complete", True)]
        if chains:
            data[f"longest chain per video|{e.label}"] = [int(c.get("longest_chain") or 0) for c in chains]
            data[f"every unbroken chain|{e.label}"] = [n for c in chains for n in unbroken_chains(c)] or [0]
            data[f"restarts per video|{e.label}"] = [int(c.get("restarts") or 0) for c in chains]
    if data:
        fig = b.figure("causalstep-chains", "Chain-length distributions",
                       lambda: b.plotter.histograms("CausalStep chains (from the logged samples)", data,
                                                    ("questions answered in a row", "questions answered in a row", "restarts"),
                                                    panels=("longest chain per video", "every unbroken chain", "restarts per video")))
        if fig:
            sec.blocks.append(fig)
    elif have and not note:
        sec.blocks.append(Note("Chain-length distributions: the logged samples hold no replayed chains.", "warn"))
    if note:
        sec.blocks.append(note)
    return sec


# =============================================================================================== ViRectify

VR_METRICS = (("acc_i", "Acc_i"), ("iou", "IoU"), ("acc_r", "Acc_r"))
VR_DOMAINS = (("dynamic_perception", "Dynamic Perception"), ("scientific_reasoning", "Scientific Reasoning"),
              ("embodied_decision", "Embodied Decision"))
VR_TOTAL = "Total"


def _vr_name(key: str) -> str:
    return dict(VR_DOMAINS).get(key, key)


def vr_groups(metrics: Mapping[str, Any], by: str) -> list[str]:
    """The groups of a ViRectify breakdown in the task's order, without its Total row."""
    groups: list[str] = []
    for key, _ in VR_METRICS:
        for g in breakdown(metrics, key, by):
            if g != VR_TOTAL and g not in groups:
                groups.append(g)
    return groups


def _vr_n(metrics: Mapping[str, Any], by: str, group: str) -> Any:
    nested = metrics.get(f"by_{by}")
    if isinstance(nested, dict) and isinstance(nested.get(group), dict):
        return nested[group].get("n")
    return None


def section_virectify(b: Builder, entries: list[Entry]) -> Section:
    sec = Section("virectify", "ViRectify", intro=(
        "Video reasoning correction (the paper's Table 2 layout): Acc_i step-wise error identification accuracy, "
        "IoU of the key timestamps, Acc_r corrected-answer accuracy by the semantic-match judge (judge errors are "
        "left out of its denominator and counted), plus the error-graph Jaccard (the paper's Eq. 1) and the "
        "format validity rate. " + variant_note(entries)))
    main = [e for e in entries if None in e.tasks]
    if main:
        domains: list[str] = []
        for e in main:
            domains += [d for d in vr_groups(e.m(None), "domain") if d not in domains]
        cols = [Col(f"{_vr_name(d)} · {name}", short=name, group=_vr_name(d), best="max") for d in domains for _, name in VR_METRICS]
        cols += [Col(f"Total · {name}", short=name, group="Total", best="max") for _, name in VR_METRICS]
        cols += [Col("graph Jaccard", short="graph J.", group="beyond the paper", best="max"),
                 Col("format rate", short="format", group="beyond the paper", best="max"),
                 Col("records", group="beyond the paper"), Col("counts", group="beyond the paper")]
        rows = []
        for e in main:
            m = e.m(None)
            cells: list[Cell] = []
            for d in domains:
                for key, _ in VR_METRICS:
                    per = breakdown(m, key, "domain")
                    cells.append(fmt(per.get(d)) if d in per else "—")
            judge_counts = {k: v for k, v in m.items() if "judge_error" in k}
            for key, _ in VR_METRICS:
                cells.append(b.cell(m.get(key), judge_counts if key == "acc_r" else None) if key in m else "—")
            cells += [fmt(m.get(k)) if k in m else "—" for k in ("graph_jaccard", "format_rate")]
            cells += [fmt(e.tasks[None].n_samples), b.counts_cell(m)]
            rows.append((e.label, cells))
        ref, source = paper_rows("virectify", cols, b.paper)
        sec.blocks.append(Table("virectify-main", "By domain and in total (paper Table 2 layout)", cols, rows, ref, source,
                                note="graph J.: edge-set Jaccard of the error graphs (Eq. 1); format: share of outputs with every tagged part; "
                                     "counts: unparseable output parts (a missing part scores 0 on its own metric only), judge errors, skipped records."))

        for by, title in (("domain", "domain"), ("error_type", "error type"), ("solution_source", "solution source")):
            groups: list[str] = []
            for e in main:
                groups += [g for g in vr_groups(e.m(None), by) if g not in groups]
            if not groups:
                continue
            if by != "domain":
                tcols = [Col(f"{g} · {name}", short=name, group=g) for g in groups for _, name in (*VR_METRICS, ("n", "n"))]
                trows = []
                for e in main:
                    cells = []
                    for g in groups:
                        for key, _ in VR_METRICS:
                            per = breakdown(e.m(None), key, by)
                            cells.append(fmt(per.get(g)) if g in per else "—")
                        n = _vr_n(e.m(None), by, g)
                        cells.append(fmt(n) if n is not None else "—")
                    trows.append((e.label, cells))
                sec.blocks.append(Table(f"virectify-{slug(by)}", f"By {title}", tcols, trows,
                                        note="The paper's Figure 4 compares models across error types."
                                        if by == "error_type" else "Who wrote the erroneous solution (the paper's cross-model analysis, Figure 6)."))
            panels = []
            for key, name in VR_METRICS:
                per = {e.label: breakdown(e.m(None), key, by) for e in main}
                if any(per.values()):
                    panels.append((name, [_vr_name(g) for g in groups], {label: [d.get(g) for g in groups] for label, d in per.items() if d}))
            if panels:
                fig = b.figure(f"virectify-{slug(by)}", f"By {title}",
                               lambda p=panels, t=title: b.plotter.panels_figure(f"ViRectify by {t}", p))
                if fig:
                    sec.blocks.append(fig)

    reflect = [e for e in entries if "reflect" in e.tasks]
    if reflect:
        cols = [Col("Acc_r", best="max"), Col("Acc_r · error identification hint", best="max"),
                Col("Acc_r · rationale hint", best="max"), Col("records"), Col("counts")]
        rows = []
        for e in reflect:
            m = e.m("reflect")
            rows.append((e.label, [b.cell(m.get("acc_r"), {k: v for k, v in m.items() if "judge_error" in k}) if "acc_r" in m else "—",
                                   fmt(m.get("acc_r_error_identify")) if "acc_r_error_identify" in m else "—",
                                   fmt(m.get("acc_r_rationale")) if "acc_r_rationale" in m else "—",
                                   fmt(e.tasks["reflect"].n_samples), b.counts_cell(m)]))
        sec.blocks.append(Table("virectify-reflect", "Reflection with hints (the paper's section 6.3)", cols, rows,
                                note="The model answers again given an error identification or a rationale (its final answer removed)."))
    sec.blocks.extend(judge_blocks(b, entries, ("semantic_match",), "virectify"))
    return sec


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


def section_runs(b: Builder) -> Section:
    sec = Section("runs", "Runs", intro="One row per model run; the label is --label, else the model args' pretrained/model name, else lmms-eval's model name.")
    cols = [Col("model"), Col("model args"), Col("tasks"), Col("date"), Col("lmms-eval"), Col("limit"), Col("results files"),
            Col("logged samples")]
    rows = []
    for run in b.runs:
        leaves = [t for t in run.tasks.values() if not t.is_group]
        with_samples = sum(1 for t in leaves if t.samples_path.is_file())
        rows.append((run.label, [run.model or "—", run.model_args or "—", str(len(leaves)), fmt(run.info.get("date")),
                                 fmt(run.info.get("lmms_eval_version")), fmt(run.info.get("limit")),
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


def _all_tasks(runs: Sequence[Run], bench: str | None) -> list[str]:
    tasks = dict.fromkeys(t for run in runs for t in run.tasks if (split_task(t)[0] == bench))
    return sorted(tasks)


SECTION_BUILDERS: dict[str, Callable[[Builder, list[Entry]], Section]] = {
    "errorradar": section_errorradar,
    "mmerror": section_mmerror,
    "crossvid": section_crossvid,
    "causalstep": section_causalstep,
    "virectify": section_virectify,
}


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
    for bench, make in SECTION_BUILDERS.items():
        entries = entries_for(bench, runs)
        if not entries:
            continue
        try:
            sec = make(b, entries)
        except Exception as exc:  # one benchmark's unexpected metric shapes must not hide the others
            sec = Section(bench, BENCHMARKS[bench], [Note(f"this section could not be built: {type(exc).__name__}: {exc}; "
                                                          "every metric is still listed below", "warn")])
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
table.report th{background:#f6f8fa}
table.report td:first-child,table.report th:first-child{text-align:left}
table.report td.b{font-weight:700}
table.report td.t{text-align:left}
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
            "lmms-eval-plugins report · percentages unless a count · bold: best model per column · "
            "italic rows: copied from the papers</p>"
            f"<nav>{nav}</nav></header><main>{''.join(body)}</main></body></html>\n")


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


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
    out = [f"# {report.title}", "", f"Generated {report.generated} by `lmms-eval-plugins report`. Percentages unless a count; "
           "**bold**: best model per column; *italic* rows are copied from the papers.", ""]
    for sec in report.sections:
        out += [f"## {sec.title}", ""]
        if sec.intro:
            out += [sec.intro, ""]
        in_details = False
        for block in sec.blocks:
            if isinstance(block, Heading):
                if in_details:
                    out += ["</details>", ""]
                out += [f"<details><summary>{block.text}</summary>", ""]
                in_details = True
            elif isinstance(block, Table):
                out += [table_md(block), ""]
            elif isinstance(block, Figure):
                out += [f"![{block.title}]({figure_dir}/{block.id}.png)", ""]
                if block.caption:
                    out += [f"_{block.caption}_", ""]
            elif isinstance(block, Note):
                out += [f"> {'**Warning:** ' if block.kind == 'warn' else ''}{block.text}", ""]
        if in_details:
            out += ["</details>", ""]
    if report.notes:
        out += ["## Notes", ""] + [f"- {n}" for n in report.notes] + [""]
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
