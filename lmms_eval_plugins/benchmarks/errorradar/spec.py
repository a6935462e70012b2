"""The ErrorRadar benchmark as the core sees it (registered in pyproject.toml, group lmms_eval_plugins.benchmarks)."""

from __future__ import annotations

from typing import Any

from lmms_eval_plugins.benchmark import Benchmark, Metric, task_folder
from lmms_eval_plugins.benchmarks.errorradar.scoring import (
    CATEGORIES,
    by_question_type,
    confusion,
    item_accuracy,
    macro,
    parse_failures,
    per_class,
    pred_distribution,
    prf_sufficient,
    round_mean,
    round_mean_by_key,
    round_std,
    round_std_by_key,
)

CLASSES = CATEGORIES
_TABLE = {"precision": ("precision", "Table 5"), "recall": ("recall", "Table 4"), "f1": ("F1", "Table 6")}

# A metric and its `_std` over rounds (None for a count: counts are totals over all rounds).
Pair = tuple[Metric, "Metric | None"]


def _score(name: str, per_round: Any, *, by_key: bool = False, **kw: Any) -> Pair:
    """A score (or breakdown, ``by_key``) computed per round: the mean over rounds and its ``_std``."""
    mean, std = (round_mean_by_key, round_std_by_key) if by_key else (round_mean, round_std)
    unit = kw.pop("unit", "dict" if by_key else "%")
    metric = Metric(name, kw.pop("higher_is_better", True), unit=unit, aggregate=mean(per_round), **kw)
    return metric, Metric(
        f"{name}_std",
        False,
        unit=unit,
        aggregate=std(per_round),
        description=f"sample standard deviation of {name} over the rounds",
    )


def _count(name: str) -> Pair:
    return Metric(name, False, unit="count", aggregate=parse_failures), None


def _per_class(kind: str) -> tuple[Pair, ...]:
    """``cate_<kind>_<class>`` for the five classes, as the paper's per-class table for ``kind``."""
    label, table = _TABLE[kind]
    return tuple(
        _score(
            f"cate_{kind}_{c.lower()}",
            per_class(kind, c),
            paper_name=f"{c} {label}",
            description=f"{c} {label} (paper {table}, printed there as a fraction)",
            sufficient=prf_sufficient(kind, c),
        )
        for c in CLASSES
    )


CATE_PAIRS = (
    # the paper's CATE headline: "recall on CATE" over all records (support-weighted), i.e. accuracy (human 60.7%)
    _score(
        "cate_acc",
        item_accuracy,
        paper_name="CATE acc",
        item_score="correct",
        description="CATE headline: accuracy = support-weighted recall (paper §4.3.1, Figures 6/17)",
    ),
    _score(
        "cate_macro_precision",
        macro("precision"),
        sufficient=prf_sufficient("precision"),
        paper_name="macro P",
        description="unweighted mean of the per-class precisions",
    ),
    _score(
        "cate_macro_recall",
        macro("recall"),
        sufficient=prf_sufficient("recall"),
        paper_name="macro R",
        description="unweighted mean of the per-class recalls",
    ),
    _score(
        "cate_macro_f1",
        macro("f1"),
        sufficient=prf_sufficient("f1"),
        paper_name="macro F1",
        description="unweighted mean of the per-class F1s",
    ),
    *_per_class("f1"),
    *_per_class("precision"),
    *_per_class("recall"),
    _count("cate_parse_fail"),
    _score(
        "cate_pred_distribution",
        pred_distribution,
        by_key=True,
        paper_name="prediction distribution",
        description="share of each predicted class (paper Figures 9 and 21, CAL bias)",
    ),
    _score("cate_acc_by_question_type", by_question_type, by_key=True),
    _score(
        "cate_confusion",
        confusion,
        by_key=True,
        paper_name="confusion matrix",
        description="gold row, predicted column (paper Figures 22-24)",
    ),
)
STEP_PAIRS = (
    _score("step_acc", item_accuracy, paper_name="STEP acc", item_score="correct", description="Acc_step (paper §3.1)"),
    _count("step_parse_fail"),
    _score("step_acc_by_question_type", by_question_type, by_key=True),
)


def _one_round(pairs: tuple[Pair, ...]) -> tuple[Metric, ...]:
    return tuple(m for m, _ in pairs)


def _three_rounds(pairs: tuple[Pair, ...]) -> tuple[Metric, ...]:
    """The metrics as the 3-round task reports them: each score or breakdown (the mean over rounds,
    per key for a dict) followed by its ``_std``; counts stay totals over all rounds."""
    return tuple(m for pair in pairs for m in pair if m is not None)


CATE_TEMPLATE = _one_round(CATE_PAIRS)
STEP_TEMPLATE = _one_round(STEP_PAIRS)
# The paper's protocol: every number is the mean over three rounds (§4.1).
ERRORRADAR_CATE_3ROUNDS = _three_rounds(CATE_PAIRS)
ERRORRADAR_STEP_3ROUNDS = _three_rounds(STEP_PAIRS)

BENCHMARK = Benchmark(
    name="errorradar",
    title="ErrorRadar",
    description="Multimodal math error detection: find the first wrong step (STEP) and name its error category (CATE)",
    tasks_dir=task_folder("errorradar"),
    metric_lists={
        "_cate_template_yaml": CATE_TEMPLATE,
        "_step_template_yaml": STEP_TEMPLATE,
        "errorradar_cate_3rounds.yaml": ERRORRADAR_CATE_3ROUNDS,
        "errorradar_step_3rounds.yaml": ERRORRADAR_STEP_3ROUNDS,
    },
    roles=("step", "cate"),
    data="ErrorRadar CSV and problem images: ErrorRadar/ErrorRadar on the Hugging Face hub, or a local folder",
    cluster_key="question_id",
    judge="",
    report_section="lmms_eval_plugins.benchmarks.errorradar.report:section_errorradar",
    sample_data="lmms_eval_plugins.benchmarks.errorradar.sample_data:make_errorradar",
    readme=task_folder("errorradar") / "README.md",
    order=10,
)
