"""What a run adds to lmms-eval's console, as pure functions of its results dict: dict metrics shortened
for the table, and the block that ends a run with unscored samples (``run_status``/``check-run`` read
the same counts). The hook that prints them is ``compat.patches`` (entry ``console-table``)."""

from __future__ import annotations

import copy
from typing import Any


def compact_container_values(result_dict: dict[str, Any]) -> dict[str, Any]:
    """A copy of lmms-eval's results dict with dict/list metric values shortened for display."""
    compact = copy.deepcopy(result_dict)
    for column in ("results", "groups"):
        for metrics in compact.get(column, {}).values():
            for key, value in list(metrics.items()):
                if isinstance(value, (dict, list)) and value:
                    metrics[key] = f"{{{len(value)} entries, see results JSON}}"
    return compact


def unscored_counts(result_dict: dict[str, Any]) -> dict[str, int]:
    """Tasks of an lmms-eval results dict with unscored samples: task -> count (filters summed)."""
    counts: dict[str, int] = {}
    groups = {name for name, members in (result_dict.get("group_subtasks") or {}).items() if members}
    for task, metrics in (result_dict.get("results") or {}).items():
        if not isinstance(metrics, dict):
            continue
        n = sum(v for k, v in metrics.items() if k.split(",")[0] == "unscored" and isinstance(v, int) and not isinstance(v, bool))
        if n and task not in groups:
            counts[task] = n
    return counts


def unscored_block(result_dict: dict[str, Any], argv: list[str]) -> str:
    """The error block that ends a run with unscored samples ('' when there are none)."""
    counts = unscored_counts(result_dict)
    if not counts:
        return ""
    total = sum(counts.values())
    from lmms_eval_plugins.judges.runtime import lmms_eval_output_path

    output_path = (lmms_eval_output_path(argv) or "OUTPUT_PATH").rstrip("/")
    kept = "--log_samples" in argv or "--predict_only" in argv
    bar = "=" * 100
    lines = [bar, f"lmms-eval-plugins: {total} sample(s) are UNSCORED; their metrics are null (never counted as wrong):"]
    lines += [f"  {task}: {n}" for task, n in sorted(counts.items())]
    lines.append("The reason is in each logged sample (`unscored`). Judge failures and --predict_only runs are finished, "
                 "without the model, by:")
    lines.append(f"    lmms-eval-plugins score {output_path}" if kept else
                 "    (none here: this run did not log samples; pass --log_samples so `lmms-eval-plugins score` can finish them)")
    lines.append("Failed model requests need the model: run the same command again (with --use_cache DIR only they are asked again).")
    lines.append(bar)
    return "\n" + "\n".join(lines)
