"""The CausalStep benchmark as the core sees it (registered in pyproject.toml, group lmms_eval_plugins.benchmarks).

Every metric is an aggregation of the per-request items (scoring.py). Each video's replayed chain is
logged once, on the ``videos`` item of its first request; every other metric's item is the request's
own fields (``scoring.request_item``).
"""

from __future__ import annotations

from typing import Any

from lmms_eval_plugins.benchmark import Benchmark, Metric, task_folder
from lmms_eval_plugins.benchmarks.causalstep import scoring as s


def _metric(
    name: str, higher_is_better: bool, aggregate: s.Aggregation, *, logs_chain: bool = False, **kw: Any
) -> Metric:
    return Metric(name, higher_is_better, aggregate=aggregate, per_item=None if logs_chain else s.request_item, **kw)


# "number": a plain number on its own scale (questions, restarts per video, points), not a percentage.
CHAIN_METRICS = (
    _metric(
        "csr",
        True,
        s.chain_success_rate,
        sufficient=s.CHAIN_SUCCESS_RATE,
        paper_name="CSR",
        description="chain success rate: share of videos whose whole causal chain was answered right",
    ),
    _metric(
        "amcl", True, s.average_max_chain_length, sufficient=s.AVERAGE_LONGEST_RUN, paper_name="AMCL", unit="number"
    ),
    _metric("mcl", True, s.max_chain_length, sufficient=s.LONGEST_RUN, paper_name="MCL", unit="number"),
    _metric("rf", False, s.restart_frequency, sufficient=s.RESTARTS_PER_VIDEO, paper_name="RF", unit="number"),
    _metric("ws", True, s.weighted_score, sufficient=s.WEIGHTED_SCORE_MEAN, paper_name="WS", unit="number"),
    _metric(
        "ws_max", True, s.perfect_weighted_score, sufficient=s.PERFECT_SCORE_MEAN, paper_name="WS max", unit="number"
    ),
    _metric("dua", True, s.descriptive_accuracy, sufficient=s.DESCRIPTIVE_ACCURACY, paper_name="DUA"),
    _metric("icra", True, s.isolated_causal_accuracy, sufficient=s.ISOLATED_ACCURACY, paper_name="ICRA"),
)
VIDEOS = _metric("videos", True, s.complete_videos, unit="count", logs_chain=True)
TEMPLATE = (
    *CHAIN_METRICS,
    _metric("parse_fail", False, s.parse_failures, unit="count"),
    _metric("by_category", True, s.per_category({m.name: m.aggregate for m in (*CHAIN_METRICS, VIDEOS)}), unit="dict"),
    VIDEOS,
    _metric("incomplete_videos", False, s.count_incomplete_videos, unit="count"),
)

BENCHMARK = Benchmark(
    name="causalstep",
    title="CausalStep",
    description="Stepwise causal reasoning in video: chains of segment questions replayed by the paper's Algorithm 1",
    tasks_dir=task_folder("causalstep"),
    metric_lists={
        "_template_yaml": TEMPLATE,
    },
    roles=(),
    data="CausalStep QA JSON and videos in a local folder",
    cluster_key="video_id",
    judge="",
    report_section="lmms_eval_plugins.benchmarks.causalstep.report:section_causalstep",
    sample_data="lmms_eval_plugins.benchmarks.causalstep.sample_data:make_causalstep",
    readme=task_folder("causalstep") / "README.md",
    order=40,
)
