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

Modules: ``document`` (the blocks a report is made of), ``sections`` (building it: :class:`Builder`, the
shared sections, :func:`build_report`), ``plots`` (matplotlib), ``formatting`` (numbers by unit, dates
in UTC), ``metric_values`` (counts and breakdowns read from a task's metrics), ``html_page`` and
``markdown_page`` (rendering), ``command`` (the CLI). Runs are read by :mod:`lmms_eval_plugins.runs`.
Section builders of benchmarks import what they need from this package.
"""

from lmms_eval_plugins.report.command import main, write_report
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
    best_index,
    entries_for,
    slug,
    split_task,
    variant_note,
)
from lmms_eval_plugins.report.formatting import (
    fmt,
    fmt_count,
    fmt_fraction,
    fmt_percent,
    fmt_ref,
    num,
)
from lmms_eval_plugins.report.html_page import render_html
from lmms_eval_plugins.report.markdown_page import render_markdown
from lmms_eval_plugins.report.metric_values import (
    breakdown,
    count_note,
    counts_of,
    dict_metric,
    flatten,
)
from lmms_eval_plugins.report.sections import (
    Builder,
    build_report,
    default_section,
    failure_reasons,
    judge_blocks,
    paper_rows,
)
from lmms_eval_plugins.runs import items_of

__all__ = [
    "Block",
    "Builder",
    "Cell",
    "Col",
    "Entry",
    "Figure",
    "Heading",
    "Note",
    "Report",
    "Section",
    "Table",
    "best_index",
    "breakdown",
    "build_report",
    "count_note",
    "counts_of",
    "default_section",
    "dict_metric",
    "entries_for",
    "failure_reasons",
    "flatten",
    "fmt",
    "fmt_count",
    "fmt_fraction",
    "fmt_percent",
    "fmt_ref",
    "items_of",
    "judge_blocks",
    "main",
    "num",
    "paper_rows",
    "render_html",
    "render_markdown",
    "slug",
    "split_task",
    "variant_note",
    "write_report",
]
