"""The MMErroR benchmark as the core sees it (registered in pyproject.toml, group lmms_eval_plugins.benchmarks)."""

from __future__ import annotations

from lmms_eval_plugins.benchmark import Benchmark, Metric, task_folder
from lmms_eval_plugins.benchmarks.mmerror.scoring import (
    DOMAIN_MACRO,
    FALSE_ALARM_RATE,
    NO_ERROR_RATE,
    OFFICIAL_ALL_ACCURACY,
    OFFICIAL_READ_ACCURACY,
    SAMPLE_ACCURACY,
    accuracy_per,
    answered_no_error,
    domain_macro,
    false_alarms,
    label_confusion,
    official_all_accuracy,
    official_read_accuracy,
    official_unparsed,
    predicted_shares,
    sample_accuracy,
    unparsed_answers,
    unparsed_presence,
)

_OFFICIAL_ACC = (
    "the official report's accuracy: correct / samples the official parser read "
    "(0 when it reads none, as officially); error bar: bootstrap over questions"
)
_OFFICIAL_STRICT = (
    "the official report's strict_accuracy: correct with the official parser / all samples "
    "(ETC: the E_NoError records it never asks included, as officially)"
)


def _official(strict_item_score: str) -> tuple[Metric, ...]:
    return (
        Metric(
            "official_accuracy",
            True,
            paper_name="accuracy (official report)",
            description=_OFFICIAL_ACC,
            aggregate=official_read_accuracy,
            sufficient=OFFICIAL_READ_ACCURACY,
        ),
        Metric(
            "official_strict_accuracy",
            True,
            paper_name="strict_accuracy (official report)",
            item_score=strict_item_score,
            description=_OFFICIAL_STRICT,
            aggregate=official_all_accuracy,
            sufficient=OFFICIAL_ALL_ACCURACY,
        ),
        Metric(
            "official_parse_fail",
            False,
            unit="count",
            description="samples the official parser could not read (dataset_total - scored_total)",
            aggregate=official_unparsed,
        ),
    )


# Both tasks: accuracy per domain, subdomain and gold label, the confusion matrix, the predictions' shares.
_BREAKDOWNS = (
    Metric(
        "accuracy_domain_macro", True, paper_name="domain macro Acc", aggregate=domain_macro, sufficient=DOMAIN_MACRO
    ),
    Metric("accuracy_by_domain", True, unit="dict", aggregate=accuracy_per("domain")),
    Metric("accuracy_by_subdomain", True, unit="dict", aggregate=accuracy_per("subdomain")),
    Metric("accuracy_by_label", True, unit="dict", aggregate=accuracy_per("gold")),
    Metric("confusion", True, unit="dict", aggregate=label_confusion),
    Metric("pred_distribution", True, unit="dict", aggregate=predicted_shares),
)

# Both task YAMLs name one hook per metric name (utils.agg_<name>), so a metric of both tasks has one
# aggregation: it tells EPD's per-request items (replayed per sample, scoring.replay_epd) from ETC's.
EPD_TEMPLATE = (
    Metric(
        "accuracy",
        True,
        paper_name="Acc",
        aggregate=sample_accuracy,
        sufficient=SAMPLE_ACCURACY,
        description="error presence detection accuracy, both stages replayed",
    ),
    Metric("parse_fail", False, unit="count", aggregate=unparsed_answers),
    *_official(strict_item_score=""),  # per sample after the two-stage replay: not a mean of per-request items
    *_BREAKDOWNS,
    Metric("no_error_rate", False, aggregate=answered_no_error, sufficient=NO_ERROR_RATE),
    Metric("false_alarm_rate", False, aggregate=false_alarms, sufficient=FALSE_ALARM_RATE),
    Metric("presence_parse_fail", False, unit="count", aggregate=unparsed_presence),
)
ETC_TEMPLATE = (
    Metric(
        "accuracy",
        True,
        paper_name="Acc",
        item_score="correct",
        aggregate=sample_accuracy,
        description="error type classification accuracy",
    ),
    Metric("parse_fail", False, unit="count", aggregate=unparsed_answers),
    # not a mean of items: the official denominator adds the unasked E_NoError records (bootstrap error bar)
    *_official(strict_item_score=""),
    *_BREAKDOWNS,
)

BENCHMARK = Benchmark(
    name="mmerror",
    title="MMErroR",
    description="Multimodal reasoning error type classification (ETC) and error presence detection (EPD)",
    tasks_dir=task_folder("mmerror"),
    metric_lists={
        "_epd_template_yaml": EPD_TEMPLATE,
        "_etc_template_yaml": ETC_TEMPLATE,
    },
    roles=("etc", "epd"),
    data="MMErroR JSON and images: s-u-do/mmerror-benchmark on the Hugging Face hub, or a local folder",
    cluster_key="question_id",
    judge="",
    report_section="lmms_eval_plugins.benchmarks.mmerror.report:section_mmerror",
    sample_data="lmms_eval_plugins.benchmarks.mmerror.sample_data:make_mmerror",
    readme=task_folder("mmerror") / "README.md",
    order=20,
)
