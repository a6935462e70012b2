"""The ViRectify benchmark as the core sees it (registered in pyproject.toml, group lmms_eval_plugins.benchmarks):
every metric with its aggregation (scoring.py); a metric is added, renamed or removed here alone."""

from __future__ import annotations

from dataclasses import replace

from lmms_eval_plugins.benchmark import Benchmark, Metric, task_folder
from lmms_eval_plugins.benchmarks.virectify.judge_prompt import ACC_R_JUDGE_PROMPT
from lmms_eval_plugins.benchmarks.virectify.records import DOMAINS, ERROR_TYPES
from lmms_eval_plugins.benchmarks.virectify.scoring import (
    ItemFields,
    answer_parse_failures,
    hint_accuracy,
    hint_accuracy_counts,
    judge_errors,
    judged_accuracy,
    judged_accuracy_counts,
    judged_columns,
    judged_percent,
    parse_failures,
    percent_mean,
    share_true,
    table,
    without_parsed,
)

# Where a scored item holds each per-sample score (the metrics' item_score; also what stored runs carry).
FIELDS = ItemFields(step_accuracy="acc_i", time_iou="iou", edge_jaccard="graph_jaccard", judged="acc_r")
# The judged metrics' per-item counts, made once so the metrics that share them share their sums.
JUDGED_COLUMNS = judged_columns(FIELDS.judged)
# The columns of each row of the paper's Table 2 breakdowns, in percent.
TABLE_COLUMNS = {
    "acc_i": percent_mean(FIELDS.step_accuracy),
    "iou": percent_mean(FIELDS.time_iou),
    "acc_r": judged_percent(FIELDS.judged),
}

# Shared by both tasks. needs_judge: computed from verdicts, so null while a sample's verdict is missing.
ACC_R = Metric(
    "acc_r",
    True,
    paper_name="Acc_r",
    aggregate=judged_accuracy("acc_r"),
    needs_judge=True,
    sufficient=judged_accuracy_counts(JUDGED_COLUMNS),
    description="rectification accuracy: the corrected reasoning judged right",
)
JUDGE_ERRORS = Metric("acc_r_judge_errors", False, unit="count", aggregate=judge_errors)

REFLECT_TEMPLATE = (
    ACC_R,
    Metric(
        "acc_r_error_identify",
        True,
        paper_name="Acc_r (error identification hint)",
        aggregate=hint_accuracy(kind="error_identify", field=FIELDS.judged),
        needs_judge=True,
        sufficient=hint_accuracy_counts(kind="error_identify", columns=JUDGED_COLUMNS),
    ),
    Metric(
        "acc_r_rationale",
        True,
        paper_name="Acc_r (rationale hint)",
        aggregate=hint_accuracy(kind="rationale", field=FIELDS.judged),
        needs_judge=True,
        sufficient=hint_accuracy_counts(kind="rationale", columns=JUDGED_COLUMNS),
    ),
    JUDGE_ERRORS,
    Metric("answer_parse_fail", False, unit="count", aggregate=answer_parse_failures),
)


def _parsed_logged_once(metrics: tuple[Metric, ...], under: str) -> tuple[Metric, ...]:
    """What was parsed from a reply is logged once per sample, in the item of the metric ``under``."""
    return tuple(m if m.name == under else replace(m, per_item=without_parsed) for m in metrics)


TEMPLATE = _parsed_logged_once(
    (
        Metric(
            "acc_i",
            True,
            paper_name="Acc_i",
            item_score=FIELDS.step_accuracy,
            aggregate=percent_mean(FIELDS.step_accuracy),
            description="identification accuracy: the first wrong step of the reasoning found",
        ),
        Metric("iou", True, paper_name="IoU", item_score=FIELDS.time_iou, aggregate=percent_mean(FIELDS.time_iou)),
        ACC_R,
        Metric("graph_jaccard", True, item_score=FIELDS.edge_jaccard, aggregate=percent_mean(FIELDS.edge_jaccard)),
        Metric("format_rate", True, item_score="format_ok", aggregate=share_true(field="format_ok")),
        JUDGE_ERRORS,
        Metric("parse_fail", False, unit="count", aggregate=parse_failures),
        Metric(
            "by_domain",
            True,
            unit="dict",
            needs_judge=True,
            aggregate=table(group_by="domain", names=DOMAINS, columns=TABLE_COLUMNS),
        ),
        Metric(
            "by_error_type",
            True,
            unit="dict",
            needs_judge=True,
            aggregate=table(group_by="error_type", names=ERROR_TYPES, columns=TABLE_COLUMNS),
        ),
        Metric(
            "by_solution_source",
            True,
            unit="dict",
            needs_judge=True,
            aggregate=table(group_by="solution_source", names=None, columns=TABLE_COLUMNS),
        ),
    ),
    under="format_rate",
)

BENCHMARK = Benchmark(
    name="virectify",
    title="ViRectify",
    description="Video reasoning correction: find the wrong step, its key time and correct it (Acc_i, IoU, Acc_r)",
    tasks_dir=task_folder("virectify"),
    metric_lists={
        "_reflect_template_yaml": REFLECT_TEMPLATE,
        "_template_yaml": TEMPLATE,
    },
    roles=("reflect",),
    data="ViRectify JSONL and videos in a local folder",
    judge="semantic_match",
    judge_prompt=ACC_R_JUDGE_PROMPT,  # the paper's Table 5 prompt, which the semantic_match judge sends
    cluster_key="source_video",  # items (and reflect hints) made from one video
    report_section="lmms_eval_plugins.benchmarks.virectify.report:section_virectify",
    sample_data="lmms_eval_plugins.benchmarks.virectify.sample_data:make_virectify",
    readme=task_folder("virectify") / "README.md",
    order=50,
)
