"""The CrossVid benchmark as the core sees it (registered in pyproject.toml, group lmms_eval_plugins.benchmarks)."""

from __future__ import annotations

from lmms_eval_plugins import tasks_dir
from lmms_eval_plugins.benchmark import Benchmark, Metric

CCQA_TEMPLATE = (
    Metric("score", True, aggregation="agg_ccqa_score", paper_name="Acc"),
    Metric("score_strict", True, aggregation="agg_ccqa_score", paper_name="Acc (official exact string)"),
    Metric("per_question_mean", True, aggregation="agg_ccqa_per_question_mean"),
    Metric("judge_errors", False, unit="count"),
    Metric("skipped", False, unit="count"),
    Metric("unscored", False, unit="count"),
    Metric("skipped_by_reason", False, unit="dict"),
)
FSA_TEMPLATE = (
    Metric("score", True, paper_name="Acc", item_score="score"),
    Metric("score_strict", True, paper_name="Acc (official exact string)", item_score="strict"),
    Metric("parse_fail", False, unit="count"),
    Metric("reversed", False, unit="count"),
    Metric("skipped", False, unit="count"),
    Metric("unscored", False, unit="count"),
    Metric("skipped_by_reason", False, unit="dict"),
)
TEMPLATE = (
    Metric("score", True, paper_name="Acc", item_score="score"),
    Metric("score_strict", True, paper_name="Acc (official exact string)", item_score="strict"),
    Metric("parse_fail", False, unit="count"),
    Metric("skipped", False, unit="count"),
    Metric("unscored", False, unit="count"),
    Metric("skipped_by_reason", False, unit="dict"),
)
# MSR/MOC: also the records the official script drops (scoring.agg_official_dropped)
UAV_TEMPLATE = (*TEMPLATE, Metric("official_dropped", False, unit="count"))

BENCHMARK = Benchmark(
    name="crossvid",
    title="CrossVid",
    description="Cross-video reasoning: ten tasks over 2-4 videos (comparative, temporal, multi-view; free-form CCQA is LLM-judged)",
    tasks_dir=tasks_dir() / "crossvid",
    metric_lists={
        "_ccqa_template_yaml": CCQA_TEMPLATE,
        "_fsa_template_yaml": FSA_TEMPLATE,
        "_template_yaml": TEMPLATE,
        "_uav_template_yaml": UAV_TEMPLATE,
    },
    roles=('bu', 'nc', 'cc', 'pea', 'pi', 'fsa', 'pss', 'msr', 'moc', 'ccqa', 'comparative', 'temporal', 'multiview'),
    data="CrossVid QA JSON and videos or frame folders: Chuntianli/CrossVid on the Hugging Face hub, or a local folder",
    judge="rubric",
    cluster_key="video_group",  # questions asked over the same videos
    report_section="lmms_eval_plugins.benchmarks.crossvid.report:section_crossvid",
    sample_data="lmms_eval_plugins.benchmarks.crossvid.sample_data:make_crossvid",
    readme=tasks_dir() / "crossvid" / "README.md",
    order=30,
)
