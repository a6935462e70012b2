"""The CrossVid benchmark as the core sees it (registered in pyproject.toml, group lmms_eval_plugins.benchmarks).

Each metric with how it aggregates (scoring.py); a metric is added, renamed or removed here alone."""

from __future__ import annotations

from lmms_eval_plugins.benchmark import Benchmark, Metric, task_folder
from lmms_eval_plugins.benchmarks.crossvid.averages import DIMENSIONS, TASKS
from lmms_eval_plugins.benchmarks.crossvid.ccqa import CCQA_JUDGE_PROMPT
from lmms_eval_plugins.benchmarks.crossvid.scoring import (
    ccqa_micro_score,
    ccqa_official_nan,
    ccqa_per_question_mean,
    judge_failures,
    mean_score,
    mean_strict,
    official_drops,
    official_nan_count,
    parse_failures,
    reversed_intervals,
)

_SCORE = Metric(
    "score",
    True,
    paper_name="Acc",
    item_score="score",
    aggregate=mean_score,
    description="accuracy, read robustly (FSA: mean IoU)",
)
_SCORE_STRICT = Metric(
    "score_strict", True, paper_name="Acc (official exact string)", item_score="strict", aggregate=mean_strict
)
_PARSE_FAIL = Metric("parse_fail", False, unit="count", aggregate=parse_failures)
# MSR/MOC: the records the official script drops; FSA: a video shorter than its frame slots (frames.frame_drop)
_OFFICIAL_DROPPED = Metric("official_dropped", False, unit="count", aggregate=official_drops)

CCQA_TEMPLATE = (
    # judged: a missing verdict leaves these unscored (null), never 0
    Metric(
        "score",
        True,
        aggregation="agg_ccqa_score",
        paper_name="Acc",
        aggregate=ccqa_micro_score,
        needs_judge=True,
        description="judged score of the open answers",
    ),
    Metric(
        "score_strict",
        True,
        aggregation="agg_ccqa_score",
        paper_name="Acc (official exact string)",
        aggregate=ccqa_micro_score,
        needs_judge=True,
    ),
    Metric(
        "per_question_mean",
        True,
        aggregation="agg_ccqa_per_question_mean",
        aggregate=ccqa_per_question_mean,
        needs_judge=True,
    ),
    Metric("judge_errors", False, unit="count", aggregate=judge_failures),
    Metric(
        "official_nan",
        False,
        unit="count",
        aggregation="agg_ccqa_official_nan",
        aggregate=ccqa_official_nan,
        description="questions whose official points are not a number (the official score is NaN then)",
    ),
)
FSA_TEMPLATE = (
    _SCORE,
    _SCORE_STRICT,
    _PARSE_FAIL,
    Metric("reversed", False, unit="count", aggregate=reversed_intervals),
    _OFFICIAL_DROPPED,
    Metric(
        "official_nan",
        False,
        unit="count",
        aggregate=official_nan_count,
        description="replies whose official IoU is NaN (a nan time): score_strict is NaN then, as officially",
    ),
)
TEMPLATE = (_SCORE, _SCORE_STRICT, _PARSE_FAIL)
UAV_TEMPLATE = (*TEMPLATE, _OFFICIAL_DROPPED)  # MSR/MOC

BENCHMARK = Benchmark(
    name="crossvid",
    title="CrossVid",
    description="Cross-video reasoning: ten tasks over 2-4 videos (comparative, temporal, multi-view; free-form CCQA is LLM-judged)",
    tasks_dir=task_folder("crossvid"),
    metric_lists={
        "_ccqa_template_yaml": CCQA_TEMPLATE,
        "_fsa_template_yaml": FSA_TEMPLATE,
        "_template_yaml": TEMPLATE,
        "_uav_template_yaml": UAV_TEMPLATE,
    },
    roles=(*(task.lower() for task in TASKS), *(d.role for d in DIMENSIONS)),
    data="CrossVid QA JSON and videos or frame folders: Chuntianli/CrossVid on the Hugging Face hub, or a local folder",
    judge="rubric",
    judge_prompt=CCQA_JUDGE_PROMPT,  # the official CCQA scoring prompt, which the rubric judge sends
    cluster_key="video_group",  # questions asked over the same videos
    report_section="lmms_eval_plugins.benchmarks.crossvid.report:section_crossvid",
    sample_data="lmms_eval_plugins.benchmarks.crossvid.sample_data:make_crossvid",
    readme=task_folder("crossvid") / "README.md",
    order=30,
)
