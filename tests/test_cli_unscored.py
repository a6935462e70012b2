"""A failed model request is unscored, never wrong, through the real lmms-eval CLI and the `openai` class.

One run against a dead endpoint (every request fails) over a task of every benchmark and the CrossVid
group; then a run with the server up and lmms-eval's `--use_cache`: the failures were not cached, so
the model is asked again and the metrics are real.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest

from lmms_eval_plugins.outcome import REQUEST_FAILED, SKIPPED_BY_REASON_METRIC, SKIPPED_METRIC
from lmms_eval_plugins.cli_run import run_lmms_eval

sys.path.insert(0, str(Path(__file__).resolve().parent))
from judge_server import JudgeServer, Reply  # noqa: E402

pytestmark = pytest.mark.cli

TASKS = ["errorradar_step_sample", "mmerror_epd_sample", "crossvid_sample", "causalstep_sample", "virectify_sample"]
CROSSVID = [f"crossvid_{t}_sample" for t in ("bu", "nc", "cc", "pea", "pi", "fsa", "pss", "msr", "moc", "ccqa")]
GROUPS = ["crossvid_sample", "crossvid_comparative_sample", "crossvid_temporal_sample", "crossvid_multiview_sample"]


def _dead_port() -> int:
    with socket.socket() as s:  # a port nothing listens on: every connection is refused
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _openai_args(base_url: str) -> str:
    return f"model_version=served-model,base_url={base_url},api_key=k,max_retries=1,retry_backoff_s=0,num_concurrent=4"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("unscored")
    env = {
        "LMMS_EVAL_PLUGINS_JUDGE": "offline",
        "LMMS_EVAL_PLUGINS_CACHE": str(tmp / "cache"),
        "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(tmp / "cache" / "judge.sqlite3"),
        "HF_DATASETS_CACHE": str(tmp / "hf"),
    }
    cache = ["--use_cache", str(tmp / "response-cache")]
    dead = run_lmms_eval(
        tasks=TASKS,
        model="openai",
        model_args=_openai_args(f"http://127.0.0.1:{_dead_port()}/v1"),
        output_dir=tmp / "dead",
        env=env,
        extra_args=cache,
    )
    with JudgeServer(behaviour=lambda request: Reply(content="Error Step: Step 1")) as server:
        live = run_lmms_eval(
            tasks=["errorradar_step_sample"],
            model="openai",
            model_args=_openai_args(server.base_url),
            output_dir=tmp / "live",
            env=env,
            extra_args=cache,
        )
        seen = len(server.requests)
    return dead, live, seen


def test_every_task_has_results_with_null_metrics_and_a_count(runs):
    dead, _, _ = runs
    for task in ["errorradar_step_sample", "mmerror_epd_sample", "causalstep_sample", "virectify_sample", *CROSSVID]:
        metrics = dead.task_results(task)
        samples = dead.samples(task)
        assert metrics["unscored"] == len(samples) > 0, task
        # records left out of the run describe the data, not the model: counted even when every request failed
        by_reason = metrics[SKIPPED_BY_REASON_METRIC]
        assert isinstance(by_reason, dict) and metrics[SKIPPED_METRIC] == sum(by_reason.values()), task
        # lmms-eval's own entries: stderr columns ("N/A") and [] for a process_results key without aggregation
        data_level = {"unscored", SKIPPED_METRIC, SKIPPED_BY_REASON_METRIC}
        nulls = {k: v for k, v in metrics.items() if "_stderr" not in k and v != [] and k not in data_level}
        assert nulls and all(v is None for v in nulls.values()), (task, nulls)


def test_groups_are_null_instead_of_crashing_the_run(runs):
    dead, _, _ = runs
    for group in GROUPS:
        assert dead.results["groups"][group]["score,none"] is None, group
    # the group's count is the sum over its tasks (lmms-eval hands it to the `score` aggregation too)
    assert dead.results["groups"]["crossvid_sample"]["unscored,none"] == sum(
        dead.task_results(task)["unscored"] for task in CROSSVID
    )


def test_logged_samples_say_why(runs):
    dead, _, _ = runs
    sample = dead.samples("errorradar_step_sample")[0]
    assert sample["step_acc"]["unscored"] == REQUEST_FAILED
    assert sample["filtered_resps"].startswith("[LMMS_EVAL_REQUEST_FAILED")  # the reply itself is kept


def test_failures_are_not_replayed_from_the_response_cache(runs):
    dead, live, seen = runs
    n = len(dead.samples("errorradar_step_sample"))
    assert seen == n  # every request went to the model again
    metrics = live.task_results("errorradar_step_sample")
    assert metrics["unscored"] == 0 and metrics["step_parse_fail"] == 0
    assert metrics["step_acc"] is not None


def test_report_shows_null_metrics_with_their_unscored_count(runs, tmp_path):
    from lmms_eval_plugins import report

    dead, _, _ = runs
    assert report.main([str(dead.results_path.parent), "-o", str(tmp_path), "--no-plots", "--no-markdown"]) == 0
    html_text = (tmp_path / "report.html").read_text()
    # the paper-layout cells read N/A with the count beside them
    assert f"{len(dead.samples('mmerror_epd_sample'))} unscored" in html_text
    assert f"{len(dead.samples('crossvid_bu_sample'))} unscored" in html_text
