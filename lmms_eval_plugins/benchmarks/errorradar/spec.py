"""The ErrorRadar benchmark as the core sees it (registered in pyproject.toml, group lmms_eval_plugins.benchmarks)."""

from __future__ import annotations

from lmms_eval_plugins import tasks_dir
from lmms_eval_plugins.benchmark import Benchmark, Metric

CLASSES = ("VIS", "CAL", "REAS", "KNOW", "MIS")  # the paper's column order (Tables 4-6)
_TABLE = {"precision": ("precision", "Table 5"), "recall": ("recall", "Table 4"), "f1": ("F1", "Table 6")}


def _per_class(kind: str) -> tuple[Metric, ...]:
    """``cate_<kind>_<class>`` for the five classes, as the paper's per-class table for ``kind``."""
    label, table = _TABLE[kind]
    return tuple(Metric(f"cate_{kind}_{c.lower()}", True, paper_name=f"{c} {label}",
                        description=f"{c} {label} (paper {table}, printed there as a fraction)") for c in CLASSES)


def _std_of(metric: Metric) -> Metric:
    """``<name>_std``: the sample standard deviation over the rounds, in the metric's shape (a dict for a dict)."""
    return Metric(f"{metric.name}_std", False, unit=metric.unit,
                  description=f"sample standard deviation of {metric.name} over the rounds")


def _three_rounds(template: tuple[Metric, ...]) -> tuple[Metric, ...]:
    """A template's metrics as the 3-round task reports them: each score or breakdown (the mean over
    rounds, per key for a dict) followed by its ``_std``; counts stay totals over all rounds."""
    out: list[Metric] = []
    for m in template:
        out.append(m)
        if m.name.startswith(("step_", "cate_")) and m.unit != "count":
            out.append(_std_of(m))
    return tuple(out)


CATE_TEMPLATE = (
    # the paper's CATE headline: "recall on CATE" over all records (support-weighted), i.e. accuracy (human 60.7%)
    Metric("cate_acc", True, paper_name="CATE acc", item_score="correct",
           description="CATE headline: accuracy = support-weighted recall (paper §4.3.1, Figures 6/17)"),
    Metric("cate_macro_precision", True, paper_name="macro P", description="unweighted mean of the per-class precisions"),
    Metric("cate_macro_recall", True, paper_name="macro R", description="unweighted mean of the per-class recalls"),
    Metric("cate_macro_f1", True, paper_name="macro F1", description="unweighted mean of the per-class F1s"),
    *_per_class("f1"),
    *_per_class("precision"),
    *_per_class("recall"),
    Metric("cate_parse_fail", False, unit="count"),
    Metric("cate_pred_distribution", True, unit="dict", paper_name="prediction distribution",
           description="share of each predicted class (paper Figures 9 and 21, CAL bias)"),
    Metric("cate_acc_by_question_type", True, unit="dict"),
    Metric("cate_confusion", True, unit="dict", paper_name="confusion matrix",
           description="gold row, predicted column (paper Figures 22-24)"),
    Metric("skipped", False, unit="count"),
    Metric("unscored", False, unit="count"),
    Metric("skipped_by_reason", False, unit="dict"),
)
STEP_TEMPLATE = (
    Metric("step_acc", True, paper_name="STEP acc", item_score="correct", description="Acc_step (paper §3.1)"),
    Metric("step_parse_fail", False, unit="count"),
    Metric("step_acc_by_question_type", True, unit="dict"),
    Metric("skipped", False, unit="count"),
    Metric("unscored", False, unit="count"),
    Metric("skipped_by_reason", False, unit="dict"),
)
# The paper's protocol: every number is the mean over three rounds (§4.1).
ERRORRADAR_CATE_3ROUNDS = _three_rounds(CATE_TEMPLATE)
ERRORRADAR_STEP_3ROUNDS = _three_rounds(STEP_TEMPLATE)

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
