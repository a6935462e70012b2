"""The MMErroR benchmark as the core sees it (registered in pyproject.toml, group lmms_eval_plugins.benchmarks)."""

from __future__ import annotations

from lmms_eval_plugins import tasks_dir
from lmms_eval_plugins.benchmark import Benchmark, Metric

_OFFICIAL_ACC = ("the official report's accuracy: correct / samples the official parser read "
                 "(NaN when it reads none); error bar: bootstrap over questions")
_OFFICIAL_STRICT = "the official report's strict_accuracy: correct with the official parser / all samples"


def _official(strict_item_score: str) -> tuple[Metric, ...]:
    return (Metric("official_accuracy", True, paper_name="accuracy (official report)", description=_OFFICIAL_ACC),
            Metric("official_strict_accuracy", True, paper_name="strict_accuracy (official report)",
                   item_score=strict_item_score, description=_OFFICIAL_STRICT),
            Metric("official_parse_fail", False, unit="count",
                   description="samples the official parser could not read (dataset_total - scored_total)"))


EPD_TEMPLATE = (
    Metric("accuracy", True, paper_name="Acc"),
    Metric("parse_fail", False, unit="count"),
    *_official(""),  # per sample after the two-stage replay: not a mean of per-request items
    Metric("accuracy_domain_macro", True, paper_name="domain macro Acc"),
    Metric("accuracy_by_domain", True, unit="dict"),
    Metric("accuracy_by_subdomain", True, unit="dict"),
    Metric("accuracy_by_label", True, unit="dict"),
    Metric("confusion", True, unit="dict"),
    Metric("pred_distribution", True, unit="dict"),
    Metric("no_error_rate", False),
    Metric("false_alarm_rate", False),
    Metric("presence_parse_fail", False, unit="count"),
    Metric("skipped", False, unit="count"),
    Metric("unscored", False, unit="count"),
    Metric("skipped_by_reason", False, unit="dict"),
)
ETC_TEMPLATE = (
    Metric("accuracy", True, paper_name="Acc", item_score="correct"),
    Metric("parse_fail", False, unit="count"),
    *_official("official_correct"),
    Metric("accuracy_domain_macro", True, paper_name="domain macro Acc"),
    Metric("accuracy_by_domain", True, unit="dict"),
    Metric("accuracy_by_subdomain", True, unit="dict"),
    Metric("accuracy_by_label", True, unit="dict"),
    Metric("confusion", True, unit="dict"),
    Metric("pred_distribution", True, unit="dict"),
    Metric("skipped", False, unit="count"),
    Metric("unscored", False, unit="count"),
    Metric("skipped_by_reason", False, unit="dict"),
)

BENCHMARK = Benchmark(
    name="mmerror",
    title="MMErroR",
    description="Multimodal reasoning error type classification (ETC) and error presence detection (EPD)",
    tasks_dir=tasks_dir() / "mmerror",
    metric_lists={
        "_epd_template_yaml": EPD_TEMPLATE,
        "_etc_template_yaml": ETC_TEMPLATE,
    },
    roles=('etc', 'epd'),
    data="MMErroR JSON and images: s-u-do/mmerror-benchmark on the Hugging Face hub, or a local folder",
    cluster_key="question_id",
    judge="",
    report_section="lmms_eval_plugins.benchmarks.mmerror.report:section_mmerror",
    sample_data="lmms_eval_plugins.benchmarks.mmerror.sample_data:make_mmerror",
    readme=tasks_dir() / "mmerror" / "README.md",
    order=20,
)
