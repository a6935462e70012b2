"""The MMErroR section of ``lmms-eval-plugins report``: tables, plots and the paper's reference rows."""

from __future__ import annotations

import math
from typing import Any

from lmms_eval_plugins.report import (
    Builder,
    Col,
    Entry,
    Section,
    Table,
    dict_metric,
    fmt,
    num,
    paper_rows,
    variant_note,
)

# Copied from the paper "MMErroR: A Benchmark for Erroneous Reasoning in Vision-Language Models" (see each table's source line); percentages.
PAPER_ROWS: dict[str, dict[str, Any]] = {
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
}


def _mm_short(label: str) -> str:
    names = {"A": "A VPE", "B": "B RE", "C": "C QCE", "D": "D KDE", "E": "E none"}
    if label == "unparseable":
        return "unp."
    return names.get(label[:1], label) if len(label) > 2 and label[1] == "_" else label


def _ratio_text(value: Any) -> str:
    # official_accuracy is NaN when the official parser read nothing (0/0)
    return "N/A" if isinstance(value, float) and math.isnan(value) else fmt(value)


def _official_table(b: Builder, entries: list[Entry]) -> Table | None:
    """Our accuracy (robust parser) beside the official report's two accuracies (official parser)."""
    present = [e for e in entries if any("official_strict_accuracy" in e.m(p) for p in ("etc", "epd") if p in e.tasks)]
    if not present:
        return None
    cols, rows = [], []
    for proto in ("etc", "epd"):
        group = proto.upper()
        cols += [
            Col(f"{group} accuracy", short="accuracy", group=group, best="max"),
            Col(f"{group} official accuracy", short="official accuracy", group=group, best="max"),
            Col(f"{group} official strict accuracy", short="official strict", group=group, best="max"),
            Col(f"{group} official unparsed", short="official unparsed", group=group),
        ]
    for e in present:
        cells = []
        for proto in ("etc", "epd"):
            m = e.m(proto) if proto in e.tasks else {}
            if "official_strict_accuracy" not in m:
                cells += ["—"] * 4
                continue
            cells += [
                fmt(m.get("accuracy")),
                _ratio_text(m.get("official_accuracy")),
                b.cell(m.get("official_strict_accuracy")),
                fmt(m.get("official_parse_fail")),
            ]
        rows.append((e.label, cells))
    return Table(
        "mmerror-official",
        "Robust and official answer parsers",
        cols,
        rows,
        note="accuracy: correct / all samples with our robust parser. Official accuracy and official strict "
        "accuracy are the official report's accuracy (correct / parsed) and strict_accuracy (correct / all), "
        "with the official parser (normalize_label); N/A when it parsed nothing. "
        "Official unparsed: samples it could not read (the official runner retries those, then leaves them out).",
    )


def section_mmerror(b: Builder, entries: list[Entry]) -> Section:
    sec = Section(
        "mmerror",
        "MMErroR",
        intro=(
            "Error-type classification with a known error (ETC) and with error presence detection first (EPD). "
            "Accuracy is strict (unparseable = wrong) and counted per sample (EPD replays its two stages). "
            + variant_note(entries)
        ),
    )
    for proto in ("etc", "epd"):
        present = [e for e in entries if proto in e.tasks]
        if not present:
            continue
        domains = sorted({d for e in present for d in dict_metric(e.m(proto), "accuracy_by_domain")})
        cols = [
            *(Col(d, group="accuracy by domain", best="max") for d in domains),
            Col(f"Total ({proto.upper()})", best="max"),
            Col("domain macro", best="max"),
            Col("unparseable"),
            Col("samples"),
        ]
        rows = []
        for e in present:
            m = e.m(proto)
            by = dict_metric(m, "accuracy_by_domain")
            confusion = dict_metric(m, "confusion")
            samples = sum(num(v) or 0 for row in confusion.values() if isinstance(row, dict) for v in row.values())
            rows.append(
                (
                    e.label,
                    [
                        *(fmt(by.get(d)) if d in by else "—" for d in domains),
                        b.cell(m.get("accuracy"), m),
                        fmt(m.get("accuracy_domain_macro")) if "accuracy_domain_macro" in m else "—",
                        fmt(m.get("parse_fail")) if "parse_fail" in m else "—",
                        fmt(int(samples)) if confusion else fmt(e.tasks[proto].n_samples),
                    ],
                )
            )
        ref, source = ([], "")
        if proto == "etc":
            ref, source = paper_rows(PAPER_ROWS["mmerror_domains"], cols, False)
        sec.blocks.append(
            Table(
                f"mmerror-{proto}-domains",
                f"{proto.upper()} accuracy by domain (paper main-results layout)",
                cols,
                rows,
                ref,
                source,
            )
        )
        if proto == "etc" and b.paper:
            pcols = [Col(c) for c in PAPER_ROWS["mmerror_domains"]["columns"]]
            prow, psource = paper_rows(PAPER_ROWS["mmerror_domains"], pcols, True)
            sec.blocks.append(
                Table(
                    "mmerror-paper-domains",
                    "Published ETC results by domain (reference)",
                    pcols,
                    [],
                    prow,
                    psource,
                    note="The paper's six domains (ML, PE, CM, BH, EE, DA) are listed as abbreviations; "
                    "the columns above use the domain values of the data that was evaluated.",
                )
            )

    parity = _official_table(b, entries)
    if parity is not None:
        sec.blocks.append(parity)

    both = [e for e in entries if "etc" in e.tasks or "epd" in e.tasks]
    cols = [
        Col("ETC", best="max"),
        Col("EPD", best="max"),
        Col("EPD drop", best="max"),
        Col("no-error rate"),
        Col("false-alarm rate", best="min"),
        Col("ETC unparseable"),
        Col("EPD unparseable"),
        Col("EPD stage-1 unparseable"),
    ]
    rows = []
    for e in both:
        etc, epd = e.m("etc"), e.m("epd")
        drop = (
            (num(epd.get("accuracy")) - num(etc.get("accuracy")))
            if num(epd.get("accuracy")) is not None and num(etc.get("accuracy")) is not None
            else None
        )
        rows.append(
            (
                e.label,
                [
                    fmt(etc.get("accuracy")) if "accuracy" in etc else "—",
                    fmt(epd.get("accuracy")) if "accuracy" in epd else "—",
                    fmt(drop) if drop is not None else "—",
                    fmt(epd.get("no_error_rate")) if "no_error_rate" in epd else "—",
                    fmt(epd.get("false_alarm_rate")) if "false_alarm_rate" in epd else "—",
                    fmt(etc.get("parse_fail")) if "parse_fail" in etc else "—",
                    fmt(epd.get("parse_fail")) if "parse_fail" in epd else "—",
                    fmt(epd.get("presence_parse_fail")) if "presence_parse_fail" in epd else "—",
                ],
            )
        )
    ref, source = paper_rows(PAPER_ROWS["mmerror_drop"], cols, b.paper)
    sec.blocks.append(
        Table(
            "mmerror-drop",
            "From ETC to EPD",
            cols,
            rows,
            ref,
            source,
            note="EPD drop = EPD − ETC accuracy. False-alarm rate: share of E_NoError samples answered P "
            "(N/A when the data has none, as in the public release).",
        )
    )
    pairs = {e.label: (num(e.m("etc").get("accuracy")), num(e.m("epd").get("accuracy"))) for e in both}
    if any(v[0] is not None or v[1] is not None for v in pairs.values()):
        fig = b.figure(
            "mmerror-drop",
            "ETC to EPD drop",
            lambda: b.plotter.bars_figure(
                "MMErroR accuracy: ETC vs EPD",
                list(pairs),
                {"ETC": [v[0] for v in pairs.values()], "EPD": [v[1] for v in pairs.values()]},
                ylabel="accuracy %",
            ),
        )
        if fig:
            sec.blocks.append(fig)

    panels = []
    for proto in ("etc", "epd"):
        present = [e for e in entries if dict_metric(e.m(proto), "accuracy_by_domain")]
        if present:
            domains = sorted({d for e in present for d in dict_metric(e.m(proto), "accuracy_by_domain")})
            panels.append(
                (
                    proto.upper(),
                    domains,
                    {
                        e.label: [num(dict_metric(e.m(proto), "accuracy_by_domain").get(d)) for d in domains]
                        for e in present
                    },
                )
            )
    if panels:
        fig = b.figure(
            "mmerror-domains",
            "Accuracy by domain",
            lambda: b.plotter.panels_figure("MMErroR accuracy by domain", panels),
        )
        if fig:
            sec.blocks.append(fig)

    labels = sorted({k for e in entries for p in ("etc", "epd") for k in dict_metric(e.m(p), "accuracy_by_label")})
    if labels:
        cols = [
            Col(f"{p.upper()} · {_mm_short(label)}", short=_mm_short(label), group=p.upper())
            for p in ("etc", "epd")
            for label in labels
        ]
        rows = []
        for e in entries:
            rows.append(
                (
                    e.label,
                    [
                        fmt(dict_metric(e.m(p), "accuracy_by_label").get(label))
                        if label in dict_metric(e.m(p), "accuracy_by_label")
                        else "—"
                        for p in ("etc", "epd")
                        for label in labels
                    ],
                )
            )
        sec.blocks.append(
            Table(
                "mmerror-labels",
                "Accuracy by gold label",
                cols,
                rows,
                note="A VPE visual perception, B RE reasoning, C QCE question comprehension, D KDE knowledge deployment, E no error.",
            )
        )

    for proto in ("etc", "epd"):
        confusions = {
            e.label: dict_metric(e.m(proto), "confusion") for e in entries if dict_metric(e.m(proto), "confusion")
        }
        if confusions:
            fig = b.figure(
                f"mmerror-{proto}-confusion",
                f"{proto.upper()} confusion matrices",
                lambda c=confusions, p=proto: b.plotter.confusion_grid(
                    f"MMErroR {p.upper()}: gold (rows) vs predicted (columns)", c, short=_mm_short
                ),
            )
            if fig:
                sec.blocks.append(fig)
    dist_panels = []
    for proto in ("etc", "epd"):
        dists = {
            e.label: dict_metric(e.m(proto), "pred_distribution")
            for e in entries
            if dict_metric(e.m(proto), "pred_distribution")
        }
        if dists:
            cats = list(dict.fromkeys(k for d in dists.values() for k in d))
            dist_panels.append(
                (
                    proto.upper(),
                    [_mm_short(c) for c in cats],
                    {n: [num(d.get(c)) for c in cats] for n, d in dists.items()},
                )
            )
    if dist_panels:
        fig = b.figure(
            "mmerror-pred-distribution",
            "Prediction distributions",
            lambda: b.plotter.panels_figure("MMErroR prediction distribution (% of samples)", dist_panels),
        )
        if fig:
            sec.blocks.append(fig)
    return sec
