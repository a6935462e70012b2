"""The ErrorRadar section of ``lmms-eval-plugins report``: tables, plots and the paper's reference rows."""

from __future__ import annotations

from typing import Any, Mapping

from lmms_eval_plugins.benchmarks.errorradar.spec import CLASSES
from lmms_eval_plugins.metrics import f1_score
from lmms_eval_plugins.report import (
    Builder,
    Col,
    Entry,
    Section,
    Table,
    dict_metric,
    fmt,
    items_of,
    num,
    paper_rows,
    slug,
    variant_note,
)

# Copied from the paper "ErrorRadar: Benchmarking Complex Mathematical Reasoning of MLLMs via Error Detection" (see each table's source line); percentages.
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
}


def _prf_from_confusion(confusion: Mapping[str, Mapping[str, Any]]) -> tuple[dict[str, float], dict[str, float]]:
    recall, precision = {}, {}
    for c in CLASSES:
        row = confusion.get(c, {})
        total = sum(num(v) or 0 for v in row.values())
        recall[c] = 100.0 * (num(row.get(c)) or 0) / total if total else 0.0
        predicted = sum(num(confusion.get(g, {}).get(c)) or 0 for g in confusion)
        precision[c] = 100.0 * (num(row.get(c)) or 0) / predicted if predicted else 0.0
    return recall, precision


PRF = ("precision", "recall", "f1")


def per_class_prf(cate: Mapping[str, Any]) -> dict[str, dict[str, tuple[float | None, Any]]]:
    """{class: {"precision" | "recall" | "f1": (value, std or None)}} from the run's per-class metrics (mean and
    ``_std`` over rounds in a 3-round run); a run from before they existed: P and R derived from ``cate_confusion``."""
    if any(f"cate_precision_{c.lower()}" in cate for c in CLASSES):
        return {
            c: {k: (num(cate.get(f"cate_{k}_{c.lower()}")), cate.get(f"cate_{k}_{c.lower()}_std")) for k in PRF}
            for c in CLASSES
        }
    confusion = dict_metric(cate, "cate_confusion")
    if not confusion:
        return {}
    recall, precision = _prf_from_confusion(confusion)
    return {
        c: {
            "precision": (precision[c], None),
            "recall": (recall[c], None),
            "f1": (f1_score(precision[c], recall[c]), None),
        }
        for c in CLASSES
    }


def section_errorradar(b: Builder, entries: list[Entry]) -> Section:
    sec = Section(
        "errorradar",
        "ErrorRadar",
        intro=(
            "First wrong step (STEP) and error category (CATE) of K-12 math solutions. The table follows "
            "the paper's Table 6 (per-class F1) with STEP/CATE accuracy and macro averages added; all numbers are "
            "percentages, unparseable answers count as wrong and are counted next to the score they affect. "
            "The paper's overall CATE number is CATE acc (its support-weighted recall), not macro F1. "
            + variant_note(entries)
        ),
    )
    cols = [
        Col("STEP acc", short="acc", group="STEP", best="max"),
        Col("STEP unparseable", short="unparseable", group="STEP"),
        *(Col(c, group="CATE F1 per class", best="max") for c in CLASSES),
        Col("macro P", short="P", group="CATE macro", best="max"),
        Col("macro R", short="R", group="CATE macro", best="max"),
        Col("macro F1", short="F1", group="CATE macro", best="max"),
        Col("CATE acc", short="acc", group="CATE", best="max"),
        Col("CATE unparseable", short="unparseable", group="CATE"),
        Col("n (step / cate)"),
    ]
    rows = []
    for e in entries:
        s, c = e.m("step"), e.m("cate")
        n_step = e.tasks["step"].n_samples if "step" in e.tasks else None
        n_cate = e.tasks["cate"].n_samples if "cate" in e.tasks else None
        rows.append(
            (
                e.label,
                [
                    b.cell(s.get("step_acc"), std=s.get("step_acc_std")) if "step_acc" in s else "—",
                    fmt(s.get("step_parse_fail")) if "step_parse_fail" in s else "—",
                    *(
                        b.cell(c.get(f"cate_f1_{k.lower()}"), std=c.get(f"cate_f1_{k.lower()}_std"))
                        if f"cate_f1_{k.lower()}" in c
                        else "—"
                        for k in CLASSES
                    ),
                    b.cell(c.get("cate_macro_precision"), std=c.get("cate_macro_precision_std"))
                    if "cate_macro_precision" in c
                    else "—",
                    b.cell(c.get("cate_macro_recall"), std=c.get("cate_macro_recall_std"))
                    if "cate_macro_recall" in c
                    else "—",
                    b.cell(c.get("cate_macro_f1"), std=c.get("cate_macro_f1_std")) if "cate_macro_f1" in c else "—",
                    b.cell(c.get("cate_acc"), std=c.get("cate_acc_std")) if "cate_acc" in c else "—",
                    fmt(c.get("cate_parse_fail")) if "cate_parse_fail" in c else "—",
                    f"{fmt(n_step) if n_step is not None else '—'} / {fmt(n_cate) if n_cate is not None else '—'}",
                ],
            )
        )
    ref, source = paper_rows(PAPER_ROWS["errorradar_f1"], cols, b.paper)
    sec.blocks.append(
        Table(
            "errorradar-main",
            "STEP and CATE (paper Table 6 layout)",
            cols,
            rows,
            ref,
            source,
            note="STEP acc / CATE acc: % correct over all records; F1 per class and macro averages over the five classes.",
        )
    )

    confusions = {
        e.label: dict_metric(e.m("cate"), "cate_confusion")
        for e in entries
        if dict_metric(e.m("cate"), "cate_confusion")
    }
    prf = {e.label: per_class_prf(e.m("cate")) for e in entries if per_class_prf(e.m("cate"))}
    if prf:
        rp_cols = [
            *(Col(f"R {k}", group="recall", best="max") for k in CLASSES),
            *(Col(f"P {k}", group="precision", best="max") for k in CLASSES),
        ]
        rp_rows = [
            (
                label,
                [b.cell(values[k]["recall"][0], std=values[k]["recall"][1]) for k in CLASSES]
                + [b.cell(values[k]["precision"][0], std=values[k]["precision"][1]) for k in CLASSES],
            )
            for label, values in prf.items()
        ]
        ref, source = paper_rows(PAPER_ROWS["errorradar_rp"], rp_cols, b.paper)
        sec.blocks.append(
            Table(
                "errorradar-recall-precision",
                "Per-class recall and precision (paper Tables 4 and 5 layout)",
                rp_cols,
                rp_rows,
                ref,
                source,
                note="cate_recall_<class> / cate_precision_<class> (mean ± std over rounds in a 3-round run; "
                "runs without them: computed from cate_confusion). An unparseable answer counts against "
                "its gold class's recall; a class never predicted has precision 0.",
            )
        )
        for label, values in prf.items():
            pc_cols = [Col("precision", short="P"), Col("recall", short="R"), Col("F1")]  # rows are classes: no "best"
            pc_rows = [(k, [b.cell(values[k][m][0], std=values[k][m][1]) for m in PRF]) for k in CLASSES]
            sec.blocks.append(
                Table(
                    f"errorradar-per-class-{slug(label)}",
                    f"{label}: per-class precision, recall and F1",
                    pc_cols,
                    pc_rows,
                    first="class",
                    note="Percent; the paper's Tables 5 (P), 4 (R) and 6 (F1) give one such row per model.",
                )
            )
    if confusions:
        fig = b.figure(
            "errorradar-confusion",
            "CATE confusion matrices",
            lambda: b.plotter.confusion_grid(
                "ErrorRadar CATE: gold (rows) vs predicted (columns)",
                confusions,
                short=lambda k: "unp." if k == "unparseable" else k,
            ),
        )
        if fig:
            sec.blocks.append(fig)

    f1 = {
        e.label: [num(e.m("cate").get(f"cate_f1_{k.lower()}")) for k in CLASSES]
        for e in entries
        if any(f"cate_f1_{k.lower()}" in e.m("cate") for k in CLASSES)
    }
    if f1:
        refs = {}
        if b.paper:
            spec = PAPER_ROWS["errorradar_f1"]
            for name in ("GPT-4o", "Human"):
                refs[f"{name} (paper)"] = spec["rows"][name][1:]
        fig = b.figure(
            "errorradar-radar",
            "Per-category F1 (radar)",
            lambda: b.plotter.radar("ErrorRadar per-category F1 (%)", CLASSES, f1, refs),
            "Grey lines: the paper's GPT-4o and human rows (Table 6)." if refs else "",
        )
        if fig:
            sec.blocks.append(fig)

    dists = {
        e.label: dict_metric(e.m("cate"), "cate_pred_distribution")
        for e in entries
        if dict_metric(e.m("cate"), "cate_pred_distribution")
    }
    if dists:
        gold = None
        first = next(iter(confusions.values()), None)
        if first:
            totals = {g: sum(num(v) or 0 for v in row.values()) for g, row in first.items()}
            grand = sum(totals.values()) or 1
            gold = {g: 100.0 * t / grand for g, t in totals.items()}
        fig = b.figure(
            "errorradar-cal-bias",
            "CAL bias: prediction distribution",
            lambda: b.plotter.cal_bias("ErrorRadar CATE prediction distribution", dists, CLASSES, gold),
            "The paper (Figure 21) finds most open-source models over-predict CAL; grey bars: the gold label distribution.",
        )
        if fig:
            sec.blocks.append(fig)

    qt_cols, qt_rows = [], []
    types = sorted(
        {
            t
            for e in entries
            for role in ("step", "cate")
            for t in dict_metric(e.m(role), f"{role}_acc_by_question_type")
        }
    )
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
        values = [
            int(i["pred"]) - int(i["gold"])
            for i in items_of(samples)
            if isinstance(i.get("pred"), int) and isinstance(i.get("gold"), int)
        ]
        if values:
            offsets[e.label] = values
    if offsets:
        fig = b.figure(
            "errorradar-step-offset",
            "Predicted minus gold error step",
            lambda: b.plotter.histograms(
                "ErrorRadar STEP: predicted − gold step (parsed answers)", offsets, "predicted step − gold step"
            ),
            "From the logged samples; 0 is a correct answer, negative values name a step before the real first error.",
        )
        if fig:
            sec.blocks.append(fig)
    if note:
        sec.blocks.append(note)
    return sec
