"""The CausalStep section of ``lmms-eval-plugins report``: tables, plots and the paper's reference rows."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from lmms_eval_plugins.report import (
    Builder,
    Col,
    Entry,
    Note,
    Section,
    Table,
    dict_metric,
    fmt,
    num,
    paper_rows,
    variant_note,
)

# Copied from the paper "CausalStep: A Benchmark for Explicit Stepwise Causal Reasoning in Videos" (see each table's source line); percentages.
PAPER_ROWS: dict[str, dict[str, Any]] = {
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
}


CS_METRICS = (
    ("csr", "CSR", "max"),
    ("amcl", "AMCL", "max"),
    ("mcl", "MCL", "max"),
    ("rf", "RF", "min"),
    ("ws", "WS", "max"),
    ("dua", "DUA", "max"),
    ("icra", "ICRA", "max"),
)


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
    sec = Section(
        "causalstep",
        "CausalStep",
        intro=(
            "Stepwise causal reasoning over segmented videos, replayed with the paper's Algorithm 1 (Table 3 layout). "
            "CSR, DUA, ICRA in %; AMCL/MCL in questions; RF restarts per video; WS the weighted score. "
            + variant_note(entries)
        ),
    )
    cols = [Col(name, best=how) for _, name, how in CS_METRICS] + [
        Col("WS max"),
        Col("videos"),
        Col("incomplete videos"),
        Col("unparseable"),
    ]
    rows = []
    for e in entries:
        m = e.m(None)
        rows.append(
            (
                e.label,
                [fmt(m.get(k)) if k in m else "—" for k, _, _ in CS_METRICS]
                + [fmt(m.get(k)) if k in m else "—" for k in ("ws_max", "videos", "incomplete_videos", "parse_fail")],
            )
        )
    ref, source = paper_rows(PAPER_ROWS["causalstep"], cols, b.paper)
    sec.blocks.append(
        Table(
            "causalstep-main",
            "Seven diagnostic metrics (paper Table 3 layout)",
            cols,
            rows,
            ref,
            source,
            note="WS max: the mean over videos of N(N+1)/2, the score of a perfect chain on this data. "
            "Incomplete videos (a --limit cut their requests) are left out of the chain metrics.",
        )
    )
    cats = sorted({c for e in entries for c in dict_metric(e.m(None), "by_category")})
    if cats:
        ccols = [Col(name) for _, name, _ in CS_METRICS] + [Col("videos")]
        crows = []
        for c in cats:
            for e in entries:
                by = dict_metric(e.m(None), "by_category")
                if isinstance(by.get(c), dict):
                    crows.append(
                        (
                            f"{e.label} · {c}",
                            [fmt(by[c].get(k)) if k in by[c] else "—" for k, _, _ in CS_METRICS]
                            + [fmt(by[c].get("videos")) if "videos" in by[c] else "—"],
                        )
                    )
        sec.blocks.append(Table("causalstep-category", "By video category", ccols, crows, first="model · category"))
        panels = [
            (
                name,
                cats,
                {
                    e.label: [
                        num(dict_metric(e.m(None), "by_category").get(c, {}).get(k))
                        if isinstance(dict_metric(e.m(None), "by_category").get(c), dict)
                        else None
                        for c in cats
                    ]
                    for e in entries
                },
            )
            for k, name in (("csr", "CSR %"), ("dua", "DUA %"), ("icra", "ICRA %"))
        ]
        fig = b.figure(
            "causalstep-category", "By category", lambda: b.plotter.panels_figure("CausalStep by category", panels)
        )
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
        fig = b.figure(
            "causalstep-chains",
            "Chain-length distributions",
            lambda: b.plotter.histograms(
                "CausalStep chains (from the logged samples)",
                data,
                ("questions answered in a row", "questions answered in a row", "restarts"),
                panels=("longest chain per video", "every unbroken chain", "restarts per video"),
            ),
        )
        if fig:
            sec.blocks.append(fig)
    elif have and not note:
        sec.blocks.append(Note("Chain-length distributions: the logged samples hold no replayed chains.", "warn"))
    if note:
        sec.blocks.append(note)
    return sec
