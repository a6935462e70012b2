"""The report as GitHub-flavoured Markdown (plots referenced as ``figures/<id>.png``); text from stored runs is escaped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lmms_eval_plugins import provenance
from lmms_eval_plugins.report.document import (
    Cell,
    Figure,
    Heading,
    Note,
    Report,
    Table,
    bold_sets,
    cell_parts,
)
from lmms_eval_plugins.report.formatting import UNITS_LINE
from lmms_eval_plugins.safe_text import md_text


def _md(text: Any) -> str:
    return md_text(text)  # names, labels and notes come from stored runs: no raw HTML, no links


def table_md(table: Table) -> str:
    bold = bold_sets(table)
    lines = [
        f"**{_md(table.title)}**",
        "",
        f"| {_md(table.first)} | " + " | ".join(_md(c.name) for c in table.columns) + " |",
        "|---|" + "|".join("---:" for _ in table.columns) + "|",
    ]

    def row(label: str, cells: Sequence[Cell], i: int | None) -> str:
        out = []
        for j in range(len(table.columns)):
            text, ann = cell_parts(cells[j]) if j < len(cells) else ("", "")
            text = _md(text)
            if i is not None and i in bold[j] and text:
                text = f"**{text}**"
            out.append(f"{text} ({_md(ann)})" if ann else text)
        return f"| {_md(label)} | " + " | ".join(out) + " |"

    for i, (label, cells) in enumerate(table.rows):
        lines.append(row(label, cells, i))
    if table.ref_rows:
        lines.append(
            f"| *copied from the paper, not computed here: {_md(table.ref_source)}* |" + " |" * len(table.columns)
        )
        for label, cells in table.ref_rows:
            lines.append(
                row(
                    f"*{label}*",
                    [f"*{cell_parts(c)[0]}*" if cell_parts(c)[0] not in ("", "—") else cell_parts(c)[0] for c in cells],
                    None,
                )
            )
    if table.note:
        lines += ["", f"_{_md(table.note)}_"]
    return f"<!-- table: {table.id} -->\n" + "\n".join(lines) + "\n"


def render_markdown(report: Report, figure_dir: str = "figures") -> str:
    out = [
        f"# {_md(report.title)}",
        "",
        (
            f"Generated {report.generated} by `lmms-eval-plugins report` "
            f"({provenance.describe(provenance.software_versions())}). {UNITS_LINE.capitalize()}; dates in UTC; "
            "**bold**: best model per column; *italic* rows are copied from the papers."
        ),
        "",
    ]
    for sec in report.sections:
        out += [f"## {_md(sec.title)}", ""]
        if sec.intro:
            out += [_md(sec.intro), ""]
        in_details = False
        for block in sec.blocks:
            if isinstance(block, Heading):
                if in_details:
                    out += ["</details>", ""]
                out += [f"<details{' open' if block.open else ''}><summary>{_md(block.text)}</summary>", ""]
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
