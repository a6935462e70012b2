"""The ErrorRadar benchmark as the core sees it (registered in pyproject.toml, group lmms_eval_plugins.benchmarks)."""

from __future__ import annotations

from lmms_eval_plugins import tasks_dir
from lmms_eval_plugins.benchmark import Benchmark, Metric

CATE_TEMPLATE = (
    Metric("cate_acc", True, paper_name="CATE acc", item_score="correct"),
    Metric("cate_macro_precision", True, paper_name="macro P"),
    Metric("cate_macro_recall", True, paper_name="macro R"),
    Metric("cate_macro_f1", True, paper_name="macro F1"),
    Metric("cate_f1_vis", True, paper_name="VIS F1"),
    Metric("cate_f1_cal", True, paper_name="CAL F1"),
    Metric("cate_f1_reas", True, paper_name="REAS F1"),
    Metric("cate_f1_know", True, paper_name="KNOW F1"),
    Metric("cate_f1_mis", True, paper_name="MIS F1"),
    Metric("cate_parse_fail", False, unit="count"),
    Metric("cate_pred_distribution", True, unit="dict"),
    Metric("cate_acc_by_question_type", True, unit="dict"),
    Metric("cate_confusion", True, unit="dict"),
    Metric("unscored", False, unit="count"),
)
STEP_TEMPLATE = (
    Metric("step_acc", True, paper_name="STEP acc", item_score="correct"),
    Metric("step_parse_fail", False, unit="count"),
    Metric("step_acc_by_question_type", True, unit="dict"),
    Metric("unscored", False, unit="count"),
)
ERRORRADAR_CATE_3ROUNDS = (
    Metric("cate_acc", True, paper_name="CATE acc", item_score="correct"),
    Metric("cate_acc_std", False),
    Metric("cate_macro_f1", True, paper_name="macro F1"),
    Metric("cate_macro_f1_std", False),
    Metric("cate_macro_precision", True, paper_name="macro P"),
    Metric("cate_macro_recall", True, paper_name="macro R"),
    Metric("cate_parse_fail", False, unit="count"),
    Metric("unscored", False, unit="count"),
)
ERRORRADAR_STEP_3ROUNDS = (
    Metric("step_acc", True, paper_name="STEP acc", item_score="correct"),
    Metric("step_acc_std", False),
    Metric("step_parse_fail", False, unit="count"),
    Metric("unscored", False, unit="count"),
)

BENCHMARK = Benchmark(
    name="errorradar",
    title="ErrorRadar",
    description="Multimodal math error detection: find the first wrong step (STEP) and name its error category (CATE)",
    tasks_dir=tasks_dir() / "errorradar",
    metric_lists={
        "_cate_template_yaml": CATE_TEMPLATE,
        "_step_template_yaml": STEP_TEMPLATE,
        "errorradar_cate_3rounds.yaml": ERRORRADAR_CATE_3ROUNDS,
        "errorradar_step_3rounds.yaml": ERRORRADAR_STEP_3ROUNDS,
    },
    roles=('step', 'cate'),
    data="ErrorRadar CSV and problem images: ErrorRadar/ErrorRadar on the Hugging Face hub, or a local folder",
    cluster_key="question_id",
    judge="",
    report_section="lmms_eval_plugins.benchmarks.errorradar.report:section_errorradar",
    sample_data="lmms_eval_plugins.benchmarks.errorradar.sample_data:make_errorradar",
    readme=tasks_dir() / "errorradar" / "README.md",
    order=10,
)
