"""Building the report: the section builders' toolkit (:class:`Builder`), the sections every report has
(runs, judge accounting, error bars, every metric) and :func:`build_report`, which asks each installed
benchmark for its own section (``Benchmark.report_section``, else :func:`default_section`).
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lmms_eval_plugins import compare, errorbars, stats
from lmms_eval_plugins.benchmark import Benchmark, benchmark_of_task, ordered_benchmarks
from lmms_eval_plugins.report.document import (
    Block,
    Cell,
    Col,
    Entry,
    Figure,
    Heading,
    Note,
    Report,
    Section,
    Table,
    entries_for,
    slug,
    split_task,
    variant_note,
)
from lmms_eval_plugins.report.formatting import (
    fmt,
    fmt_ref,
    num,
    run_date_utc,
    utc_text,
)
from lmms_eval_plugins.report.metric_values import (
    count_note,
    counts_of,
    flatten,
    is_count,
)
from lmms_eval_plugins.report.plots import Plotter
from lmms_eval_plugins.runs import LMMS_EVAL_DEFAULT_TIMEZONE, Run


class Builder:
    def __init__(self, runs: Sequence[Run], *, plots: bool = True, paper: bool = True) -> None:
        self.runs = list(runs)
        self.plotter = Plotter(enabled=plots)
        self.paper = paper
        self._figure_ids: set[str] = set()
        self._compared: dict[tuple[int, int], list[compare.Row]] = {}
        for run in self.runs:
            self.plotter.color(run.label)

    def compared(self, base: Run, other: Run) -> list[compare.Row]:
        """``compare`` of two runs over every task, once per report (each benchmark section shows its own rows)."""
        key = (id(base), id(other))
        if key not in self._compared:
            self._compared[key] = compare.compare_runs(base, other)
        return self._compared[key]

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
    def cell(
        value: Any,
        metrics: Mapping[str, Any] | None = None,
        *,
        std: Any = None,
        note: str = "",
        unit: str | None = None,
    ) -> Cell:
        """``value`` (± ``std``) in ``unit``, annotated with ``note`` or the nonzero counts of ``metrics``."""
        text = fmt(value, unit)
        if isinstance(std, (int, float)) and not isinstance(std, bool) and value is not None:
            text = f"{text} ± {fmt(float(std), unit)}"
        annotation = note or (count_note(metrics) if metrics is not None else "")
        return (text, annotation) if annotation else text

    @staticmethod
    def counts_cell(*metric_sets: Mapping[str, Any]) -> Cell:
        found = [c for metrics in metric_sets for c in counts_of(metrics)]
        if not found:
            return "—"
        nonzero = [f"{n} {what}" for _, what, n in found if n]
        return ", ".join(nonzero) if nonzero else "0"

    def samples_note(
        self, entries: Sequence[Entry], role: str | None, what: str
    ) -> tuple[list[tuple[Entry, list]], Note | None]:
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
            note = Note(
                f"{what}: no usable logged samples for {', '.join(missing)}; left out (see the notes at the end)",
                "warn",
            )
        return have, note


def paper_rows(
    spec: Mapping[str, Any], columns: Sequence[Col], enabled: bool
) -> tuple[list[tuple[str, list[Cell]]], str]:
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
        rows.append(
            (
                f"{model} (paper)",
                [fmt_ref(by_name.get(c.name), places.get(c.name)) if c.name in by_name else "" for c in columns],
            )
        )
    return rows, spec["source"]


# ============================================================ judges, runs, error bars, every metric

JUDGE_STAT_COLUMNS = (
    "verdicts",
    "calls",
    "failed_calls",
    "retries",
    "reasks",
    "cache_hits",
    "tokens_in",
    "tokens_out",
    "judge_errors",
    "skipped",
    "empty_predictions",
    "offline_verdicts",
)
JUDGE_STAT_NAMES = {
    "failed_calls": "failed",
    "cache_hits": "cached",
    "empty_predictions": "empty answers",
    "offline_verdicts": "offline",
    "reasks": "re-asks",
}


def judge_table(
    table_id: str, title: str, reports: Sequence[tuple[str, Path, dict[str, Any]]], judge_prefixes: Sequence[str] | None
) -> Table | None:
    cols = [
        *(Col(JUDGE_STAT_NAMES.get(c, c.replace("_", " "))) for c in JUDGE_STAT_COLUMNS),
        Col("failed calls by reason"),
        Col("file"),
    ]
    rows = []
    for label, path, data in reports:
        reasons = failure_reasons(data)
        for judge, judge_stats in sorted((data.get("by_judge") or {}).items()):
            if judge_prefixes is not None and not any(judge.startswith(p) for p in judge_prefixes):
                continue
            if not isinstance(judge_stats, dict):
                continue
            rows.append(
                (
                    f"{label} · {judge}",
                    [
                        *(fmt(judge_stats.get(c)) if c in judge_stats else "—" for c in JUDGE_STAT_COLUMNS),
                        reasons,
                        path.name,
                    ],
                )
            )
    if not rows:
        return None
    return Table(
        table_id,
        title,
        cols,
        rows,
        first="model · judge",
        note="From the judge runtime's accounting JSON (docs/judges.md); a sample without a verdict is unscored "
        "(its judged metric is N/A until `lmms-eval-plugins score`), never scored 0.",
    )


def failure_reasons(data: Mapping[str, Any]) -> str:
    """'HTTP 500: 4, timeout after 60 s: 1' over the judge models of one accounting file ('—' for none)."""
    total: dict[str, int] = {}
    for by_reason in (data.get("failures_by_reason") or {}).values():
        if isinstance(by_reason, dict):
            for reason, n in by_reason.items():
                if is_count(n):
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
                str(j).startswith(tuple(prefixes))
                and ("_offline" in str(j) or (isinstance(s, dict) and s.get("offline_verdicts")))
                for j, s in by_judge.items()
            ):
                flagged.add(e.run.label)
                blocks.append(
                    Note(
                        f"{e.run.label}: verdicts from the offline judge ({path.name}); lower fidelity, "
                        "not comparable with the papers' numbers.",
                        "warn",
                    )
                )
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
    sec = Section(
        "runs",
        "Runs",
        intro="One row per model run; the label is --label, else the model args' pretrained/model name, else lmms-eval's model name.",
    )
    cols = [
        Col("model"),
        Col("model args"),
        Col("tasks"),
        Col("date"),
        Col("lmms-eval"),
        Col("lmms-eval-plugins"),
        Col("limit"),
        Col("results files"),
        Col("logged samples"),
    ]
    rows = []
    for run in b.runs:
        leaves = [t for t in run.tasks.values() if not t.is_group]
        with_samples = sum(1 for t in leaves if t.samples_path.is_file())
        date = run_date_utc(run.info.get("date"), run.info.get("timezone") or LMMS_EVAL_DEFAULT_TIMEZONE)
        rows.append(
            (
                run.label,
                [
                    run.model or "—",
                    run.model_args or "—",
                    str(len(leaves)),
                    date,
                    run_lmms_eval_version(run.info),
                    run_plugin_version(run.info),
                    fmt(run.info.get("limit")),
                    ", ".join(
                        str(p.relative_to(run.folder)) if p.is_relative_to(run.folder) else str(p)
                        for p in run.results_files
                    ),
                    f"{with_samples} of {len(leaves)} tasks",
                ],
            )
        )
    sec.blocks.append(Table("runs", "Runs", cols, rows, first="run"))
    reports = [(run.label, path, data) for run in b.runs for path, data in run.judge_reports]
    known = ("rubric", "semantic_match")
    other = judge_table("runs-judges", "Judge accounting (other judges)", reports, None)
    if other:
        other.rows = [row for row in other.rows if not row[0].split(" · ")[-1].startswith(known)]
        if other.rows:
            sec.blocks.append(other)
    if reports:
        sec.blocks.append(
            Note("Judge accounting files: " + "; ".join(f"{label}: {_shown_path(path)}" for label, path, _ in reports))
        )
    return sec


def unit_of(task: str, name: str) -> str | None:
    """The spec's unit of ``name`` in ``task`` (None for a task or metric of no installed benchmark)."""
    spec = benchmark_of_task(task)
    metric = spec.task_metrics(task).get(name) if spec else None
    return metric.unit if metric else None


def appendix_blocks(b: Builder, tasks: Sequence[str]) -> list[Block]:
    blocks: list[Block] = []
    for task in tasks:
        runs = [run for run in b.runs if task in run.tasks]
        flat = {run.label: flatten(run.tasks[task].metrics) for run in runs}
        names = list(dict.fromkeys(k for f in flat.values() for k in f))
        units = {name: unit_of(task, name) for name in names}  # a breakdown's "name[key]" has none: by type
        cols = [Col(run.label) for run in runs]
        rows = [
            (name, [fmt(flat[run.label][name], units[name]) if name in flat[run.label] else "—" for run in runs])
            for name in names
        ]
        n_row = ("(records)", [fmt(run.tasks[task].n_samples) for run in runs])
        blocks.append(Table(f"all-{task}", f"{task}: every metric", cols, [n_row] + rows, first="metric"))
    return blocks


def _error_bar_metrics(spec: Benchmark, task: str, runs: Sequence[Run]) -> dict[str, str | None]:
    """metric -> unit: the spec's headline metrics, then any other metric the results give a stderr
    (never a count or a breakdown: a stderr of those means nothing)."""
    out: dict[str, str | None] = {n: m.unit for n, m in spec.task_metrics(task).items() if errorbars.has_error_bar(m)}
    for run in runs:
        for name, bars in (run.tasks[task].error_bars if task in run.tasks else {}).items():
            unit = unit_of(task, name)
            if "stderr" in bars and unit not in ("count", "dict", "list"):
                out.setdefault(name, unit)
    return out


def errorbar_blocks(b: Builder, spec: Benchmark, runs: Sequence[Run]) -> list[Block]:
    """Headline metrics with every error bar the results hold: the stderr, the run's stored 95% percentile
    interval, the smallest difference a paired comparison of this size would detect (80% power, two-sided
    5%); with several runs, each run's paired difference from the first
    (``lmms-eval-plugins compare``), a * where the CI excludes 0. Shown open: no click needed."""
    tasks = [t for t in _all_tasks(runs, spec.name) if not any(run.tasks[t].is_group for run in runs if t in run.tasks)]
    rows: list[tuple[str, list[Cell]]] = []
    for task in tasks:
        for name, unit in _error_bar_metrics(spec, task, runs).items():
            metric = spec.task_metrics(task).get(name)
            for run in runs:
                result = run.tasks.get(task)
                value = num(result.metrics.get(name)) if result else None
                if result is None or value is None:
                    continue
                se = result.stderr(name)
                ci = result.intervals.get(name)
                mde = stats.minimum_detectable_effect(None if se is None else se * math.sqrt(2))
                rows.append(
                    (
                        f"{run.label}",
                        [
                            task,
                            (metric.paper_name if metric else "") or name,
                            fmt(value, unit),
                            "—" if se is None else fmt(se, unit),
                            "—" if ci is None else f"[{fmt(ci[0], unit)}, {fmt(ci[1], unit)}]",
                            "—" if mde is None else fmt(mde, unit),
                        ],
                    )
                )
    blocks: list[Block] = []
    if rows:
        cols = [Col("task"), Col("metric"), Col("value"), Col("stderr"), Col("95% CI"), Col("MDE")]
        blocks.append(Heading("Error bars", open=True))
        blocks.append(
            Table(
                f"{spec.name}-errorbars",
                f"{spec.title}: headline metrics with 95% confidence intervals",
                cols,
                rows,
                note="stderr in the metric's units (analytic or clustered for means of per-item scores, else the "
                "spread of a seeded bootstrap of the statistic). 95% CI: the percentile interval of the same "
                "seeded (cluster) bootstrap that `compare` uses, so it stays inside the metric's range; docs: "
                "README 'Error bars'. MDE: the smallest true difference between two runs of this size a test "
                "detects 80% of the time (two-sided 5%; unpaired, so an upper bound). '—': the run predates "
                "error bars or intervals (`lmms-eval-plugins score` re-scores it), or the metric has none.",
                first="run",
            )
        )
    if len(runs) >= 2:
        paired = paired_table(spec, runs[0], [(other, b.compared(runs[0], other)) for other in runs[1:]], tasks)
        if paired is not None:
            blocks.append(paired)
    return blocks


def paired_row(row: compare.Row, unit: str | None, note_mark: str = "") -> list[Cell]:
    """One compare row's cells: diff (* when its CI excludes 0), CI, p, paired items, method; CI, p and *
    all from the row's one method, so they never disagree. ``note_mark`` annotates a row without an interval."""
    mark = " *" if row.significant else ""
    ci: Cell = (
        f"[{fmt(row.ci_low, unit)}, {fmt(row.ci_high, unit)}]"
        if row.ci_low is not None and row.ci_high is not None
        else ("—", note_mark)
        if note_mark
        else "—"
    )
    return [
        row.task,
        row.metric,
        fmt(row.diff, unit) + mark,
        ci,
        compare.p_text(row.p_value, row.resamples),
        str(row.n),
        row.method,
    ]


def paired_table(
    spec: Benchmark, base: Run, others: Sequence[tuple[Run, Sequence[compare.Row]]], tasks: Sequence[str]
) -> Table | None:
    """Each other run's paired differences from ``base`` (its ``compare`` rows) on ``tasks``. The method is
    a column, or the caption when every row shares it; compare's note on a row without an interval is
    numbered in its CI cell and written out once in the caption."""
    diffs: list[tuple[str, list[Cell]]] = []
    notes: dict[str, int] = {}
    for other, rows in others:
        for row in rows:
            if row.task not in tasks or row.diff is None:
                continue
            mark = ""
            if row.ci_low is None and row.note:
                mark = f"note {notes.setdefault(row.note, len(notes) + 1)}"
            diffs.append((other.label, paired_row(row, unit_of(row.task, row.metric), mark)))
    if not diffs:
        return None
    methods = {cells[-1] for _, cells in diffs}
    cols = [Col("task"), Col("metric"), Col("diff"), Col("95% CI"), Col("p"), Col("paired items"), Col("method")]
    caption = (
        "run minus the first run, on the items both scored (lmms-eval-plugins compare). * the 95% CI excludes 0, "
        "the same as p < 0.05: each row's CI and p come from its one method (the same seeded bootstrap resamples)."
    )
    if len(methods) == 1:
        caption += f" Method: {methods.pop()}."
        cols, diffs = cols[:-1], [(label, cells[:-1]) for label, cells in diffs]
    if notes:
        caption += " '—': no interval: " + "; ".join(f"note {k}: {text}" for text, k in notes.items()) + "."
    return Table(
        f"{spec.name}-paired",
        f"{spec.title}: paired differences from {base.label}",
        cols,
        diffs,
        note=caption,
        first="run",
    )


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
        rows.append((e.label, [b.cell(merged.get(n), unit=spec.metrics()[n].unit) for n in names]))
    blocks: list[Block] = [Note(variant_note(entries))]
    if cols:
        blocks.append(Table(f"{spec.name}-main", f"{spec.title}: headline metrics", cols, rows))
    return Section(spec.name, spec.title, blocks, intro=spec.description)


def section_of(spec: Benchmark) -> Callable[[Builder, list[Entry]], Section]:
    make = spec.resolve("report_section")
    return make if make is not None else functools.partial(default_section, spec=spec)


def build_report(
    runs: Sequence[Run],
    *,
    title: str | None = None,
    plots: bool = True,
    paper: bool = True,
    extra_notes: Sequence[str] = (),
) -> Report:
    b = Builder(runs, plots=plots, paper=paper)
    sections = [section_runs(b)]
    for spec in ordered_benchmarks():
        bench = spec.name
        entries = entries_for(bench, runs)
        if not entries:
            continue
        try:
            sec = section_of(spec)(b, entries)
        except (
            Exception
        ) as exc:  # one benchmark's unexpected metric shapes (or a broken section) must not hide the others
            sec = Section(
                bench,
                spec.title,
                [
                    Note(
                        f"this section could not be built: {type(exc).__name__}: {exc}; "
                        "every metric is still listed below",
                        "warn",
                    )
                ],
            )
        sec.blocks.extend(errorbar_blocks(b, spec, runs))
        sec.blocks.append(Heading("Every metric"))
        sec.blocks.extend(appendix_blocks(b, _all_tasks(runs, bench)))
        sections.append(sec)
    others = _all_tasks(runs, None)
    if others:
        sections.append(
            Section(
                "other",
                "Other tasks",
                appendix_blocks(b, others),
                intro="Tasks of no benchmark this package adds: every metric as lmms-eval reported it.",
            )
        )
    notes = list(extra_notes)
    if b.plotter.error:
        notes.append(b.plotter.error)
    for run in runs:
        notes.extend(f"{run.label}: {n}" for n in run.notes)
    labels = ", ".join(run.label for run in runs)
    return Report(title or f"lmms-eval report: {labels}", sections, notes, utc_text(_dt.datetime.now(_dt.timezone.utc)))
