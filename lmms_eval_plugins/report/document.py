"""The report as a document: tables, figures, notes and sections, before any rendering.

A benchmark's section builder (``Benchmark.report_section``) returns a :class:`Section` of these
blocks; :mod:`~lmms_eval_plugins.report.html_page` and :mod:`~lmms_eval_plugins.report.markdown_page`
render them. An :class:`Entry` is one row of a benchmark section: a run and one variant of its tasks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from lmms_eval_plugins.benchmark import benchmark_of_task
from lmms_eval_plugins.runs import Run, TaskResult


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
    """Starts a collapsible part of a section (``<details>``); ``open``: shown without a click."""

    text: str
    open: bool = False


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
    """``errorradar_step_sample`` -> (``errorradar``, ``step``, ``sample``): the installed benchmark whose
    name prefixes the task, the first token naming one of its roles, and the rest (the variant)."""
    spec = benchmark_of_task(task)
    if spec is None:
        return None, None, task
    role = None
    rest = []
    for token in task[len(spec.name) :].split("_")[1:]:
        if role is None and token in spec.roles:
            role = token
        else:
            rest.append(token)
    return spec.name, role, "_".join(rest)


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
    return (
        f"Several variants ({', '.join(v or 'full' for v in variants)}): rows are labelled model [variant]; {listed}."
    )


@dataclass
class Report:
    title: str
    sections: list[Section]
    notes: list[str]
    generated: str  # when, in UTC ("2026-11-25 18:52:07 UTC")
    samples_page: str = ""  # the samples view's file beside report.html ("" when not written)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def best_index(values: Sequence[float | None], how: str) -> set[int]:
    present = [v for v in values if v is not None]
    if len(present) < 2 or max(present) == min(present):
        return set()
    target = max(present) if how == "max" else min(present)
    return {i for i, v in enumerate(values) if v is not None and v == target}


def cell_parts(cell: Cell) -> tuple[str, str]:
    """(text, annotation) of a cell."""
    if isinstance(cell, tuple):
        return str(cell[0]), str(cell[1])
    return str(cell), ""


def lead_number(text: str) -> float | None:
    match = re.match(r"\s*(-?\d+(?:\.\d+)?)", text)
    return float(match.group(1)) if match else None


def bold_sets(table: Table) -> list[set[int]]:
    """Per column: the model rows holding the best value."""
    out = []
    for j, col in enumerate(table.columns):
        if not col.best or len(table.rows) < 2:
            out.append(set())
            continue
        values = [lead_number(cell_parts(cells[j])[0]) if j < len(cells) else None for _, cells in table.rows]
        out.append(best_index(values, col.best))
    return out
