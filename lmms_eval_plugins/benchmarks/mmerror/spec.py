"""The MMErroR benchmark as the core sees it (registered in pyproject.toml, group lmms_eval_plugins.benchmarks)."""

from __future__ import annotations

from lmms_eval_plugins import tasks_dir
from lmms_eval_plugins.benchmark import Benchmark, Metric

EPD_TEMPLATE = (
    Metric("accuracy", True, paper_name="Acc"),
    Metric("parse_fail", False, unit="count"),
    Metric("accuracy_domain_macro", True, paper_name="domain macro Acc"),
    Metric("accuracy_by_domain", True, unit="dict"),
    Metric("accuracy_by_subdomain", True, unit="dict"),
    Metric("accuracy_by_label", True, unit="dict"),
    Metric("confusion", True, unit="dict"),
    Metric("pred_distribution", True, unit="dict"),
    Metric("no_error_rate", False),
    Metric("false_alarm_rate", False),
    Metric("presence_parse_fail", False, unit="count"),
    Metric("unscored", False, unit="count"),
)
ETC_TEMPLATE = (
    Metric("accuracy", True, paper_name="Acc", item_score="correct"),
    Metric("parse_fail", False, unit="count"),
    Metric("accuracy_domain_macro", True, paper_name="domain macro Acc"),
    Metric("accuracy_by_domain", True, unit="dict"),
    Metric("accuracy_by_subdomain", True, unit="dict"),
    Metric("accuracy_by_label", True, unit="dict"),
    Metric("confusion", True, unit="dict"),
    Metric("pred_distribution", True, unit="dict"),
    Metric("unscored", False, unit="count"),
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
