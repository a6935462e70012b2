"""CausalStep through the real ``lmms-eval`` CLI (subprocess), judged by the results JSON, not the exit code."""

from __future__ import annotations

import importlib.metadata

import pytest

from lmms_eval_plugins import compare, errorbars, run_status
from lmms_eval_plugins.benchmark import get as get_benchmark

from lmms_eval_plugins.models.random_baseline import chance_pick
from lmms_eval_plugins.benchmarks.causalstep.protocol import replay_chain
from lmms_eval_plugins.cli_run import run_lmms_eval
from testkit.task_utils import load_task_utils

pytestmark = pytest.mark.cli
cs = load_task_utils("causalstep")
TASK, SAME = "causalstep_sample", "causalstep_sample_restart_same"


def sample_docs() -> list[dict]:
    return list(cs.process_docs([{"benchmark": "causalstep", "source": "sample"}]))


def segment_counts() -> dict[str, int]:
    return {d["video_id"]: d["n_segments"] for d in sample_docs()}


def logged_chains(run, task: str) -> dict[str, dict]:
    """video_id -> the chain logged on that video's holder sample; every other sample refers to it."""
    samples = run.samples(task)
    chains = {s["videos"]["video_id"]: s["videos"]["chain"] for s in samples if s["videos"]["chain"] is not None}
    for s in samples:
        assert s["videos"]["chain_on"] == f"{s['videos']['video_id']}/S1/desc"
    return chains


def test_oracle_completes_every_chain(tmp_path, isolated_env):
    run = run_lmms_eval(tasks=[TASK, SAME], model="oracle", output_dir=tmp_path / "out")
    # the installed versions travel with the results (lmms-eval's own field says unknown@unknown on a pip install)
    versions = run.results["lmms_eval_plugins_versions"]
    assert versions["lmms-eval"] == importlib.metadata.version("lmms-eval") and versions["lmms-eval-plugins"]
    assert run_status.check_run(tmp_path / "out")[0] == 0
    counts = segment_counts()
    best_ws = sum(n * (n + 1) / 2 for n in counts.values()) / len(counts)  # (1 + 6 + 15 + 28) / 4
    for task in (TASK, SAME):
        m = run.task_results(task)
        assert m["csr"] == 100.0 and m["rf"] == 0 and m["ws"] == pytest.approx(best_ws) == m["ws_max"]
        assert m["amcl"] == pytest.approx(sum(counts.values()) / len(counts)) and m["mcl"] == max(counts.values())
        assert m["dua"] == m["icra"] == 100.0 and m["parse_fail"] == 0 and m["videos"] == 4
        assert set(m["by_category"]) == {"Cartoons", "Regular Sports"}
        assert run.results["n-samples"][task]["effective"] == len(sample_docs())
        assert m["skipped"] == 0 and m["skipped_by_reason"] == {}
        chains = logged_chains(run, task)
        assert set(chains) == set(counts)
        for video_id, chain in chains.items():
            n = counts[video_id]
            assert chain["completed"] and chain["score"] == n * (n + 1) // 2 and chain["longest_chain"] == n
            assert [(s["segment"], s["kind"], s["correct"], s["chain_length"]) for s in chain["steps"]] == [
                (i, "desc" if i == 1 else "causal_after_desc" if i == 2 else "causal_after_causal", True, i)
                for i in range(1, n + 1)
            ]


def test_random_baseline_chains_match_an_independent_replay(tmp_path, isolated_env):
    run = run_lmms_eval(tasks=TASK, model="random", model_args="seed=3", output_dir=tmp_path / "out")
    docs = sample_docs()
    right = {
        (d["video_id"], d["kind"], d["segment"]): chance_pick(d["chance_responses"], seed=3, task=TASK, doc_id=i)
        == d["gold"]
        for i, d in enumerate(docs)
    }
    counts = segment_counts()
    expected = {v: replay_chain(n, lambda kind, seg, v=v: right[(v, kind, seg)], "next") for v, n in counts.items()}
    m = run.task_results(TASK)
    assert m["ws"] == pytest.approx(sum(r.score for r in expected.values()) / 4)
    assert m["rf"] == pytest.approx(sum(r.restarts for r in expected.values()) / 4)
    assert m["amcl"] == pytest.approx(sum(r.longest_chain for r in expected.values()) / 4)
    # chain metrics get a bootstrap error bar over whole videos, the same from the run as from its stored items
    spec = get_benchmark("causalstep")
    metrics = spec.task_metrics(TASK)
    items = [compare._item(s, "ws") for s in run.samples(TASK)]
    assert m["ws_stderr"] > 0 and m["rf_stderr"] > 0
    assert m["ws_stderr"] == pytest.approx(errorbars.metric_stderr(spec, metrics["ws"], spec.hooks().agg_ws, items))
    assert m["videos_stderr"] == "N/A"  # a count
    chains = logged_chains(run, TASK)
    for video_id, r in expected.items():
        assert [
            (s["segment"], s["kind"], s["correct"], s["chain_length"], s["score"]) for s in chains[video_id]["steps"]
        ] == [(s.segment, s.kind, s.correct, s.chain_length, s.score) for s in r.steps]


def test_tiny_qwen_completes(tmp_path, isolated_env, tiny_qwen_args):
    run = run_lmms_eval(tasks=TASK, model="qwen2_5_vl", model_args=tiny_qwen_args, output_dir=tmp_path / "out")
    m = run.task_results(TASK)
    assert run.results["n-samples"][TASK]["effective"] == len(sample_docs())
    assert 0.0 <= m["csr"] <= 100.0 and 0 <= m["ws"] <= m["ws_max"] and m["videos"] == 4
    # the metrics and the logged chains come from the same replay
    chains = logged_chains(run, TASK)
    assert sum(c["score"] for c in chains.values()) / 4 == pytest.approx(m["ws"])
    assert sum(c["restarts"] for c in chains.values()) / 4 == pytest.approx(m["rf"])


def test_limit_keeps_whole_videos_and_counts_the_cut_one(tmp_path, isolated_env):
    # --limit 5: cs001 (1 request) and the first 4 of cs002's 8; cs002's chain needs S3 causal_after_causal.
    run = run_lmms_eval(tasks=TASK, model="oracle", output_dir=tmp_path / "out", extra_args=["--limit", "5"])
    m = run.task_results(TASK)
    assert (m["videos"], m["incomplete_videos"], m["ws"], m["csr"]) == (1, 1, 1.0, 100.0)
    chains = {s["videos"]["video_id"]: s["videos"]["chain"] for s in run.samples(TASK) if s["videos"]["chain"]}
    assert chains["cs001"]["score"] == 1 and chains["cs002"] == {
        "video_id": "cs002",
        "category": "Cartoons",
        "complete": False,
        "missing": "cs002/S3/causal_after_causal",
    }
