"""Values read out of one task's metrics: counts (unparseable, judge errors...), breakdowns, flattening.

Pure functions over the ``{metric: value}`` of a :class:`~lmms_eval_plugins.runs.TaskResult`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lmms_eval_plugins.report.formatting import fmt, num


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) or (isinstance(value, float) and value.is_integer())


COUNT_PATTERNS: tuple[tuple[str, str], ...] = (
    ("unscored", "unscored"),  # failed model requests: the metrics they touch are N/A (lmms_eval_plugins/outcome.py)
    ("parse_fail", "unparseable"),
    ("judge_errors", "judge errors"),
    ("judge_error", "judge errors"),
    ("skipped", "skipped"),
    ("incomplete", "incomplete"),
)


def _count_what(name: str, pattern: str, what: str) -> str:
    qualifier = name.replace(pattern, "").strip("_")
    return f"{what} ({qualifier})" if qualifier else what


def counts_of(metrics: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """(metric, what, count) for every count metric: unscored samples, parse failures (``parse_fail``,
    ``step_parse_fail``, or a dict of counts per output part), judge errors, skipped records,
    incomplete items."""
    out = []
    for name, value in metrics.items():
        by_reason = metrics.get(f"{name}_by_reason")
        if isinstance(by_reason, dict) and by_reason:
            continue  # the total is shown split by reason
        for pattern, what in COUNT_PATTERNS:
            if pattern not in name:
                continue
            label = what if name.endswith("_by_reason") else _count_what(name, pattern, what)
            if is_count(value):
                out.append((name, label, int(value)))
            elif isinstance(value, dict) and value and all(is_count(v) for v in value.values()):
                out.extend(
                    (f"{name}[{k}]", f"{label} ({k})" if label == what else f"{label[:-1]}, {k})", int(v))
                    for k, v in value.items()
                )
            break
    return out


def count_note(metrics: Mapping[str, Any]) -> str:
    """'2 unparseable, 1 judge errors' for the nonzero counts ('' when none)."""
    return ", ".join(f"{n} {what}" for _, what, n in counts_of(metrics) if n)


def flatten(metrics: Mapping[str, Any], depth: int = 2) -> dict[str, Any]:
    """Scalar metrics, and dict metrics flattened to ``name[key]`` / ``name[key][key]``."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any, level: int) -> None:
        if isinstance(value, dict):
            if level >= depth:
                return
            for key, inner in value.items():
                walk(f"{prefix}[{key}]", inner, level + 1)
        elif isinstance(value, (list, tuple)):
            if value:
                out[prefix] = ", ".join(fmt(v) for v in value)
        else:
            out[prefix] = value

    for name, value in metrics.items():
        walk(name, value, 0)
    return out


def dict_metric(metrics: Mapping[str, Any], name: str) -> dict[str, Any]:
    value = metrics.get(name)
    return value if isinstance(value, dict) else {}


def breakdown(metrics: Mapping[str, Any], base: str, by: str) -> dict[str, float | None]:
    """``base`` broken down by ``by`` whichever way the task reports it: ``{base}_by_{by}``
    (group -> number), or ``by_{by}`` / ``{by}_breakdown`` (group -> {metric: number})."""
    direct = metrics.get(f"{base}_by_{by}")
    if isinstance(direct, dict):
        return {str(k): num(v) for k, v in direct.items() if not isinstance(v, dict)}
    for name in (f"by_{by}", f"{by}_breakdown", f"breakdown_by_{by}"):
        nested = metrics.get(name)
        if isinstance(nested, dict):
            out = {str(k): num(v.get(base)) for k, v in nested.items() if isinstance(v, dict) and base in v}
            if out:
                return out
    return {}
