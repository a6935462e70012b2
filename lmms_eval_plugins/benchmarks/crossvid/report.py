"""The CrossVid section of ``lmms-eval-plugins report``: tables, plots and the paper's reference rows."""

from __future__ import annotations

import math
from typing import Any, Mapping

from lmms_eval_plugins.benchmarks.crossvid.averages import (
    DIMENSIONS,
    FREE_FORM,
    FREE_FORM_TITLE,
    OVERALL,
    TASKS,
    crossvid_averages,
)
from lmms_eval_plugins.report import (
    Builder,
    Cell,
    Col,
    Entry,
    Note,
    Section,
    Table,
    counts_of,
    fmt,
    items_of,
    judge_blocks,
    num,
    paper_rows,
    variant_note,
)

# Copied from the paper "CrossVid: A Comprehensive Benchmark for Evaluating Cross-Video Reasoning in MLLMs" (see each table's source line); percentages.
PAPER_ROWS: dict[str, dict[str, Any]] = {
    "crossvid": {
        "source": "CrossVid paper, Table 2",
        "decimals": 1,
        "columns": [
            "O.Avg",
            "BU",
            "NC",
            "CC",
            "PEA",
            "C.Avg",
            "PI",
            "FSA",
            "PSS",
            "T.Avg",
            "MSR",
            "MOC",
            "M.Avg",
            "CCQA",
        ],
        "rows": {
            "Human": [89.2, 85.6, 92.3, 90.7, 83.9, 88.1, 91.6, 85.2, 89.9, 88.9, 93.2, 94.2, 93.7, 85.2],
            "Gemini-2.5-Pro": [50.4, 54.2, 51.8, 68.7, 44.1, 54.7, 76.5, 13.4, 78.2, 56.0, 32.0, 25.3, 28.7, 59.8],
            "GPT-4.1": [45.2, 46.2, 34.6, 58.5, 51.2, 47.6, 70.9, 8.6, 60.5, 46.7, 38.6, 38.2, 38.4, 44.6],
            "Qwen2.5-VL-72B": [34.4, 37.7, 38.5, 52.6, 39.6, 42.1, 61.8, 5.9, 20.0, 29.2, 20.9, 26.0, 23.5, 41.2],
            "InternVL3-8B": [25.6, 15.2, 22.8, 24.3, 42.1, 26.1, 56.2, 3.2, 1.5, 20.3, 34.0, 47.3, 40.7, 9.7],
            "Qwen2.5-VL-7B": [18.3, 19.6, 19.0, 23.4, 15.0, 19.3, 58.6, 1.2, 0.3, 20.0, 11.8, 21.7, 16.8, 12.0],
        },
    },
}


# All from averages.DIMENSIONS (task names lower case, as the report's roles are).
CV_DIMENSIONS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (d.column, tuple(t.lower() for t in d.tasks)) for d in DIMENSIONS
)
CV_GROUPS = {
    **{key: d.title for d in DIMENSIONS for key in (*(t.lower() for t in d.tasks), d.column)},
    FREE_FORM.lower(): FREE_FORM_TITLE,
}
# The paper's Table 2 column order: O.Avg, each dimension's tasks then its average, the free-form task.
CV_COLUMNS = (
    OVERALL,
    *(key for d in DIMENSIONS for key in (*(t.lower() for t in d.tasks), d.column)),
    FREE_FORM.lower(),
)
CV_SCORE_KEYS = ("score", "accuracy", "acc")
CV_TASKS = tuple(t.lower() for t in TASKS)
# The task folder's own groups (lmms-eval aggregates ``score`` over their members): column -> role.
CV_GROUP_ROLES: dict[str, str | None] = {**{d.column: d.role for d in DIMENSIONS}, OVERALL: None}


def _cv_score(metrics: Mapping[str, Any]) -> float | None:
    for key in CV_SCORE_KEYS:
        if num(metrics.get(key)) is not None:
            return num(metrics.get(key))
    return None


def crossvid_row(e: Entry) -> tuple[dict[str, float | None], set[str], list[str]]:
    """(task scores and dimension averages, the averages left out for a missing task, notes).

    Averages are the paper's (averages.crossvid_averages: C/T/M.Avg the mean of their tasks, O.Avg the
    mean of the ten): one with a task missing or unscored is not shown, never a mean of fewer tasks.
    Where only the group's own aggregate exists it is shown; a group aggregate that differs from the
    computed mean is noted."""
    scores = {t: _cv_score(e.m(t)) for t in CV_TASKS if t in e.tasks}
    out: dict[str, float | None] = dict(scores)
    averages = crossvid_averages({t: v for t, v in scores.items() if v is not None})
    incomplete: set[str] = set()
    notes: list[str] = []
    for col, group in CV_GROUP_ROLES.items():
        reported = _cv_score(e.m(group)) if group in e.tasks else None
        if not math.isnan(averages[col]):
            out[col] = averages[col]
            if reported is not None and abs(reported - out[col]) > 0.005:
                notes.append(
                    f"{e.label}: lmms-eval's {e.tasks[group].task} score is {fmt(reported)}, "
                    f"the mean of its tasks {fmt(out[col])} (shown)"
                )
        elif reported is not None:
            out[col] = reported
        elif scores:
            incomplete.add(col)
    return out, incomplete, notes


def section_crossvid(b: Builder, entries: list[Entry]) -> Section:
    sec = Section(
        "crossvid",
        "CrossVid",
        intro=(
            "Cross-video reasoning, ten tasks in four dimensions (the paper's Table 2 layout). Choice tasks: accuracy; "
            "FSA: mean temporal IoU; PSS: exact order; CCQA: rubric score (micro-average). "
            "C.Avg, T.Avg, M.Avg: means of their tasks; O.Avg: unweighted mean of the ten task scores. "
            + variant_note(entries)
        ),
    )
    cols = [Col(key if "." in key else key.upper(), group=CV_GROUPS.get(key), best="max") for key in CV_COLUMNS]
    rows, any_incomplete, mismatch = [], False, []
    for e in entries:
        values, incomplete, notes = crossvid_row(e)
        mismatch += notes
        any_incomplete = any_incomplete or bool(incomplete)
        cells: list[Cell] = []
        for key in CV_COLUMNS:
            value = values.get(key)
            if value is None:
                cells.append("—" if key not in values else fmt(None))
            elif key in CV_TASKS:
                cells.append(b.cell(value, e.m(key)))
            else:
                cells.append(fmt(value))
        rows.append((e.label, cells))
    ref, source = paper_rows(PAPER_ROWS["crossvid"], cols, b.paper)
    sec.blocks.append(
        Table(
            "crossvid-main",
            "Ten tasks and dimension averages (paper Table 2 layout)",
            cols,
            rows,
            ref,
            source,
            note=(
                "Counts after a score (unparseable answers, judge errors, skipped records) are that task's. "
                + (
                    "An average with a task missing or unscored is left out (—): the paper averages all its tasks."
                    if any_incomplete
                    else ""
                )
            ),
        )
    )
    sec.blocks.extend(Note(n, "warn") for n in mismatch)

    count_cols = [Col("records"), Col("score"), Col("counts"), Col("other")]
    count_rows = []
    for e in entries:
        for t in CV_TASKS:
            if t not in e.tasks:
                continue
            m = e.m(t)
            extra = [
                f"{k} {fmt(v)}"
                for k, v in m.items()
                if k not in CV_SCORE_KEYS
                and not isinstance(v, (dict, list))
                and k not in {name for name, _, _ in counts_of(m)}
            ]
            count_rows.append(
                (
                    f"{e.label} · {t.upper()}",
                    [fmt(e.tasks[t].n_samples), fmt(_cv_score(m)), b.counts_cell(m), "; ".join(extra) or "—"],
                )
            )
    if count_rows:
        sec.blocks.append(
            Table(
                "crossvid-counts",
                "Per task: records, counts and other metrics",
                count_cols,
                count_rows,
                first="model · task",
                note="counts: unparseable answers, judge errors, skipped records (0: none).",
            )
        )

    series = {}
    for e in entries:
        values, _, _ = crossvid_row(e)
        series[e.label] = [values.get(k) for k in CV_COLUMNS if k != "O.Avg"]
    if any(v is not None for vals in series.values() for v in vals):
        cats = [k if "." in k else k.upper() for k in CV_COLUMNS if k != "O.Avg"]
        fig = b.figure(
            "crossvid-tasks",
            "Task scores and dimension averages",
            lambda: b.plotter.bars_figure(
                "CrossVid scores by task and dimension", cats, series, width=12, value_labels=False
            ),
        )
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
            chunk = panels[k : k + 4]
            fig = b.figure(
                f"crossvid-pred-distribution-{k // 4}",
                "Prediction distributions",
                lambda c=chunk: b.plotter.panels_figure(
                    "CrossVid prediction distribution (% of records, from the logged samples)", c
                ),
            )
            if fig:
                sec.blocks.append(fig)
    sec.blocks.extend(missing_notes[:3])
    if len(missing_notes) > 3:
        sec.blocks.append(Note(f"… and {len(missing_notes) - 3} more tasks without usable logged samples", "warn"))
    sec.blocks.extend(judge_blocks(b, entries, ("rubric",), "crossvid"))
    return sec
