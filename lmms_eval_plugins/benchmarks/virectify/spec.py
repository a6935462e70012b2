"""The ViRectify benchmark as the core sees it (registered in pyproject.toml, group lmms_eval_plugins.benchmarks)."""

from __future__ import annotations

from lmms_eval_plugins import tasks_dir
from lmms_eval_plugins.benchmark import Benchmark, Metric

REFLECT_TEMPLATE = (
    Metric("acc_r", True, paper_name="Acc_r"),
    Metric("acc_r_error_identify", True, paper_name="Acc_r (error identification hint)"),
    Metric("acc_r_rationale", True, paper_name="Acc_r (rationale hint)"),
    Metric("acc_r_judge_errors", False, unit="count"),
    Metric("answer_parse_fail", False, unit="count"),
    Metric("skipped", False, unit="count"),
    Metric("unscored", False, unit="count"),
    Metric("skipped_by_reason", False, unit="dict"),
)
TEMPLATE = (
    Metric("acc_i", True, paper_name="Acc_i", item_score="acc_i"),
    Metric("iou", True, paper_name="IoU", item_score="iou"),
    Metric("acc_r", True, paper_name="Acc_r"),
    Metric("graph_jaccard", True, item_score="graph_jaccard"),
    Metric("format_rate", True, item_score="format_ok"),
    Metric("acc_r_judge_errors", False, unit="count"),
    Metric("parse_fail", False, unit="count"),
    Metric("by_domain", True, unit="dict"),
    Metric("by_error_type", True, unit="dict"),
    Metric("by_solution_source", True, unit="dict"),
    Metric("skipped", False, unit="count"),
    Metric("unscored", False, unit="count"),
    Metric("skipped_by_reason", False, unit="dict"),
)

BENCHMARK = Benchmark(
    name="virectify",
    title="ViRectify",
    description="Video reasoning correction: find the wrong step, its key time and correct it (Acc_i, IoU, Acc_r)",
    tasks_dir=tasks_dir() / "virectify",
    metric_lists={
        "_reflect_template_yaml": REFLECT_TEMPLATE,
        "_template_yaml": TEMPLATE,
    },
    roles=('reflect',),
    data="ViRectify JSONL and videos in a local folder",
    judge="semantic_match",
    cluster_key="source_video",  # items (and reflect hints) made from one video
    report_section="lmms_eval_plugins.benchmarks.virectify.report:section_virectify",
    sample_data="lmms_eval_plugins.benchmarks.virectify.sample_data:make_virectify",
    readme=tasks_dir() / "virectify" / "README.md",
    order=50,
)
