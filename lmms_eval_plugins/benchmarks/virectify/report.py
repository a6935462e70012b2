"""The ViRectify section of ``lmms-eval-plugins report``: tables, plots and the paper's reference rows."""

from __future__ import annotations

from typing import Any, Mapping

from lmms_eval_plugins.report import (
    Builder,
    Cell,
    Col,
    Entry,
    Section,
    Table,
    breakdown,
    fmt,
    judge_blocks,
    paper_rows,
    slug,
    variant_note,
)

# Copied from the paper "ViRectify: A Challenging Benchmark for Video Reasoning Correction with MLLMs" (see each table's source line); percentages.
PAPER_ROWS: dict[str, dict[str, Any]] = {
    "virectify": {
        "source": "ViRectify paper, Table 2",
        "decimals": 2,
        "columns": [
            "Dynamic Perception · Acc_i",
            "Dynamic Perception · IoU",
            "Dynamic Perception · Acc_r",
            "Scientific Reasoning · Acc_i",
            "Scientific Reasoning · IoU",
            "Scientific Reasoning · Acc_r",
            "Embodied Decision · Acc_i",
            "Embodied Decision · IoU",
            "Embodied Decision · Acc_r",
            "Total · Acc_i",
            "Total · IoU",
            "Total · Acc_r",
        ],
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


VR_METRICS = (("acc_i", "Acc_i"), ("iou", "IoU"), ("acc_r", "Acc_r"))
VR_DOMAINS = (
    ("dynamic_perception", "Dynamic Perception"),
    ("scientific_reasoning", "Scientific Reasoning"),
    ("embodied_decision", "Embodied Decision"),
)
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
    sec = Section(
        "virectify",
        "ViRectify",
        intro=(
            "Video reasoning correction (the paper's Table 2 layout): Acc_i step-wise error identification accuracy, "
            "IoU of the key timestamps, Acc_r corrected-answer accuracy by the semantic-match judge (judge errors are "
            "left out of its denominator and counted), plus the error-graph Jaccard (the paper's Eq. 1) and the "
            "format validity rate. " + variant_note(entries)
        ),
    )
    main = [e for e in entries if None in e.tasks]
    if main:
        domains: list[str] = []
        for e in main:
            domains += [d for d in vr_groups(e.m(None), "domain") if d not in domains]
        cols = [
            Col(f"{_vr_name(d)} · {name}", short=name, group=_vr_name(d), best="max")
            for d in domains
            for _, name in VR_METRICS
        ]
        cols += [Col(f"Total · {name}", short=name, group="Total", best="max") for _, name in VR_METRICS]
        cols += [
            Col("graph Jaccard", short="graph J.", group="beyond the paper", best="max"),
            Col("format rate", short="format", group="beyond the paper", best="max"),
            Col("records", group="beyond the paper"),
            Col("counts", group="beyond the paper"),
        ]
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
        ref, source = paper_rows(PAPER_ROWS["virectify"], cols, b.paper)
        sec.blocks.append(
            Table(
                "virectify-main",
                "By domain and in total (paper Table 2 layout)",
                cols,
                rows,
                ref,
                source,
                note="graph J.: edge-set Jaccard of the error graphs (Eq. 1); format: share of outputs with every tagged part; "
                "counts: unparseable output parts (a missing part scores 0 on its own metric only), judge errors, skipped records.",
            )
        )

        for by, title in (("domain", "domain"), ("error_type", "error type"), ("solution_source", "solution source")):
            groups: list[str] = []
            for e in main:
                groups += [g for g in vr_groups(e.m(None), by) if g not in groups]
            if not groups:
                continue
            if by != "domain":
                tcols = [
                    Col(f"{g} · {name}", short=name, group=g) for g in groups for _, name in (*VR_METRICS, ("n", "n"))
                ]
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
                sec.blocks.append(
                    Table(
                        f"virectify-{slug(by)}",
                        f"By {title}",
                        tcols,
                        trows,
                        note="The paper's Figure 4 compares models across error types."
                        if by == "error_type"
                        else "Who wrote the erroneous solution (the paper's cross-model analysis, Figure 6).",
                    )
                )
            panels = []
            for key, name in VR_METRICS:
                per = {e.label: breakdown(e.m(None), key, by) for e in main}
                if any(per.values()):
                    panels.append(
                        (
                            name,
                            [_vr_name(g) for g in groups],
                            {label: [d.get(g) for g in groups] for label, d in per.items() if d},
                        )
                    )
            if panels:
                fig = b.figure(
                    f"virectify-{slug(by)}",
                    f"By {title}",
                    lambda p=panels, t=title: b.plotter.panels_figure(f"ViRectify by {t}", p),
                )
                if fig:
                    sec.blocks.append(fig)

    reflect = [e for e in entries if "reflect" in e.tasks]
    if reflect:
        cols = [
            Col("Acc_r", best="max"),
            Col("Acc_r · error identification hint", best="max"),
            Col("Acc_r · rationale hint", best="max"),
            Col("records"),
            Col("counts"),
        ]
        rows = []
        for e in reflect:
            m = e.m("reflect")
            rows.append(
                (
                    e.label,
                    [
                        b.cell(m.get("acc_r"), {k: v for k, v in m.items() if "judge_error" in k})
                        if "acc_r" in m
                        else "—",
                        fmt(m.get("acc_r_error_identify")) if "acc_r_error_identify" in m else "—",
                        fmt(m.get("acc_r_rationale")) if "acc_r_rationale" in m else "—",
                        fmt(e.tasks["reflect"].n_samples),
                        b.counts_cell(m),
                    ],
                )
            )
        sec.blocks.append(
            Table(
                "virectify-reflect",
                "Reflection with hints (the paper's section 6.3)",
                cols,
                rows,
                note="The model answers again given an error identification or a rationale (its final answer removed).",
            )
        )
    sec.blocks.extend(judge_blocks(b, entries, ("semantic_match",), "virectify"))
    return sec
