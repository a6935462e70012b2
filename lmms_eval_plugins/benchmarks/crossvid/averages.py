"""CrossVid's tasks and dimensions, declared once, and the paper's averages over them (Table 2).

Everything else derives from :data:`DIMENSIONS`: ``TASKS``, the spec's roles, the ten
``process_docs_<task>`` hooks (tasks.py), the report's columns, and a test holds the task YAMLs
(``crossvid.yaml``, ``crossvid_<task>.yaml``) to it. Pure: no I/O, no import of the task code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Dimension:
    column: str  # its average as the paper's Table 2 prints it
    role: str  # its subgroup in crossvid.yaml: crossvid_<role>
    title: str  # the paper's name for it
    tasks: tuple[str, ...]


DIMENSIONS = (
    Dimension("C.Avg", "comparative", "Comparative Analysis", ("BU", "NC", "CC", "PEA")),
    Dimension("T.Avg", "temporal", "Temporal Understanding", ("PI", "FSA", "PSS")),
    Dimension("M.Avg", "multiview", "Multi-view Reasoning", ("MSR", "MOC")),
)
FREE_FORM = "CCQA"  # judged, in no dimension; in the overall average
FREE_FORM_TITLE = "Free-form"
OVERALL = "O.Avg"
TASKS = (*(task for d in DIMENSIONS for task in d.tasks), FREE_FORM)


def task_code(name: str) -> str:
    """``crossvid_bu_sample``, ``crossvid_bu``, ``bu`` -> ``BU``."""
    code = str(name).strip()
    code = code[len("crossvid_") :] if code.lower().startswith("crossvid_") else code
    code = code[: -len("_sample")] if code.lower().endswith("_sample") else code
    return code.upper()


def crossvid_averages(task_scores: Mapping[str, float]) -> dict[str, float]:
    """The paper's Table 2 averages from per-task scores (percent).

    Keys may be task codes ("BU") or task names ("crossvid_bu", "crossvid_bu_sample").
    C.Avg = mean(BU, NC, CC, PEA), T.Avg = mean(PI, FSA, PSS), M.Avg = mean(MSR, MOC),
    O.Avg = unweighted mean of the ten task scores (not of the dimension averages). The paper's rule:
    an average is over all its tasks, so one with a task missing (or NaN) is NaN, never a mean over
    fewer tasks (task_yamls/crossvid/README.md, "Averages").
    """
    scores = {task_code(k): float(v) for k, v in task_scores.items()}

    def mean(codes: Sequence[str]) -> float:
        if any(c not in scores for c in codes):
            return math.nan
        return sum(scores[c] for c in codes) / len(codes)

    out = {d.column: mean(d.tasks) for d in DIMENSIONS}
    out[OVERALL] = mean(TASKS)
    return out
