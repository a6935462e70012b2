"""The CausalStep benchmark as the core sees it (registered in pyproject.toml, group lmms_eval_plugins.benchmarks)."""

from __future__ import annotations

from lmms_eval_plugins import tasks_dir
from lmms_eval_plugins.benchmark import Benchmark, Metric

TEMPLATE = (
    Metric("csr", True, paper_name="CSR"),
    Metric("amcl", True, paper_name="AMCL"),
    Metric("mcl", True, paper_name="MCL"),
    Metric("rf", False, paper_name="RF"),
    Metric("ws", True, paper_name="WS"),
    Metric("ws_max", True, paper_name="WS max"),
    Metric("dua", True, paper_name="DUA"),
    Metric("icra", True, paper_name="ICRA"),
    Metric("parse_fail", False, unit="count"),
    Metric("by_category", True, unit="dict"),
    Metric("videos", True, unit="count"),
    Metric("incomplete_videos", False, unit="count"),
    Metric("skipped", False, unit="count"),
    Metric("unscored", False, unit="count"),
    Metric("skipped_by_reason", False, unit="dict"),
)

BENCHMARK = Benchmark(
    name="causalstep",
    title="CausalStep",
    description="Stepwise causal reasoning in video: chains of segment questions replayed by the paper's Algorithm 1",
    tasks_dir=tasks_dir() / "causalstep",
    metric_lists={
        "_template_yaml": TEMPLATE,
    },
    roles=(),
    data="CausalStep QA JSON and videos in a local folder",
    cluster_key="video_id",
    judge="",
    report_section="lmms_eval_plugins.benchmarks.causalstep.report:section_causalstep",
    sample_data="lmms_eval_plugins.benchmarks.causalstep.sample_data:make_causalstep",
    readme=tasks_dir() / "causalstep" / "README.md",
    order=40,
)
