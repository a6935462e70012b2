"""The report as one self-contained HTML page: inline CSS, plots as base64 PNG, no script, no network."""

from __future__ import annotations

import base64
import html
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
    lead_number,
)
from lmms_eval_plugins.report.formatting import UNITS_LINE
from lmms_eval_plugins.safe_text import escape_controls

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
    return html.escape(escape_controls(text), quote=True)  # text from stored runs: no markup, no control characters


def table_html(table: Table) -> str:
    bold = bold_sets(table)
    parts = [
        f'<div class="tablewrap"><table class="report" id="{_esc(table.id)}"><caption>{_esc(table.title)}</caption><thead>'
    ]
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
            text, ann = cell_parts(cells[j]) if j < len(cells) else ("", "")
            classes = (["b"] if i is not None and i in bold[j] else []) + (
                ["t"] if text not in ("", "—", "N/A") and lead_number(text) is None else []
            )
            cls = f' class="{" ".join(classes)}"' if classes else ""
            ann_html = f'<span class="ann">{_esc(ann)}</span>' if ann else ""
            tds.append(f'<td data-col="{_esc(col.name)}"{cls}>{_esc(text)}{ann_html}</td>')
        return f'<tr data-row="{_esc(label)}">' + "".join(tds) + "</tr>"

    for i, (label, cells) in enumerate(table.rows):
        parts.append(row_html(label, cells, i))
    parts.append("</tbody>")
    if table.ref_rows:
        parts.append(
            f'<tbody class="ref"><tr class="divider"><td colspan="{len(table.columns) + 1}">'
            f"Copied from the paper, not computed here: {_esc(table.ref_source)}</td></tr>"
        )
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
    if report.samples_page:
        nav += f' <a class="samples" href="{_esc(report.samples_page)}">Samples: every reply, side by side →</a>'
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
                body.append(f"<details{' open' if block.open else ''}><summary>{_esc(block.text)}</summary>")
                in_details = True
            elif isinstance(block, Table):
                body.append(table_html(block))
            elif isinstance(block, Figure):
                data = base64.b64encode(block.png).decode("ascii")
                caption = f"<figcaption>{_esc(block.caption)}</figcaption>" if block.caption else ""
                body.append(
                    f'<figure id="fig-{_esc(block.id)}"><img alt="{_esc(block.title)}" '
                    f'src="data:image/png;base64,{data}">{caption}</figure>'
                )
            elif isinstance(block, Note):
                body.append(f'<div class="{"warn" if block.kind == "warn" else "note"}">{_esc(block.text)}</div>')
        if in_details:
            body.append("</details>")
        body.append("</section>")
    if report.notes:
        body.append(
            '<section id="notes"><h2>Notes</h2><ul>'
            + "".join(f"<li>{_esc(n)}</li>" for n in report.notes)
            + "</ul></section>"
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_esc(report.title)}</title><style>{CSS}</style></head><body>"
        f'<header><h1>{_esc(report.title)}</h1><p class="meta">generated {_esc(report.generated)} by '
        f"lmms-eval-plugins report ({_esc(provenance.describe(provenance.software_versions()))}) · "
        f"{_esc(UNITS_LINE)} · dates in UTC · bold: best model per column · "
        "italic rows: copied from the papers</p>"
        f"<nav>{nav}</nav></header><main>{''.join(body)}</main></body></html>\n"
    )
