"""ViRectify through the real ``lmms-eval`` CLI (subprocess), judged by the results JSON, not the exit code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from lmms_eval_plugins.cli_run import run_lmms_eval
from testkit.task_utils import load_task_utils

sys.path.insert(0, str(Path(__file__).resolve().parent))  # judge_server.py
from judge_server import TEST_API_KEY, JudgeServer, Reply, client_error

pytestmark = pytest.mark.cli
vr = load_task_utils("virectify")
TASK, REFLECT = "virectify_sample", "virectify_reflect_sample"
SAMPLE_ROW = {
    "benchmark": "virectify",
    "source": "sample",
    "num_frames": 32,
    "max_long_side": 448,
    "visual_mode": "interleaved",
}
JUDGE_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_URL",
    "LMMS_EVAL_PLUGINS_JUDGE",
    "LMMS_EVAL_PLUGINS_JUDGE_MODEL",
    "LMMS_EVAL_PLUGINS_JUDGE_MAX_ERROR_RATE",
    "LMMS_EVAL_PLUGINS_VIRECTIFY_HINTS",
)


@pytest.fixture()
def clean_judge_env(isolated_env, monkeypatch):
    for name in JUDGE_VARS:
        monkeypatch.delenv(name, raising=False)
    return isolated_env


def sample_docs() -> list[dict]:
    return list(vr.process_docs([SAMPLE_ROW]))


def logged_judgements(run, task: str) -> dict[str, dict]:
    """record id -> the judge outcome the logged sample carries."""
    return {s["acc_r"]["id"]: s["acc_r"]["judge"] for s in run.samples(task)}


def test_oracle_scores_100_with_the_offline_judge(tmp_path, clean_judge_env):
    run = run_lmms_eval(
        tasks=[TASK, REFLECT], model="oracle", output_dir=tmp_path / "out", env={"LMMS_EVAL_PLUGINS_JUDGE": "offline"}
    )
    m = run.task_results(TASK)
    for metric in ("acc_i", "iou", "acc_r", "graph_jaccard", "format_rate"):
        assert m[metric] == 100.0, metric
    assert m["acc_r_judge_errors"] == 0 and set(m["parse_fail"].values()) == {0}
    assert list(m["by_domain"]) == ["Dynamic Perception", "Scientific Reasoning", "Embodied Decision", "Total"]
    assert all(
        row == {"acc_i": 100.0, "iou": 100.0, "acc_r": 100.0, "n": 4}
        for name, row in m["by_domain"].items()
        if name != "Total"
    )
    assert m["by_domain"]["Total"]["n"] == 12 and m["by_error_type"]["Logical"]["n"] == 3
    assert set(m["by_solution_source"]) == {"gpt-4o-injection", "Qwen2.5-VL-7B", "InternVL3-8B", "Total"}
    r = run.task_results(REFLECT)
    assert r["acc_r"] == r["acc_r_error_identify"] == r["acc_r_rationale"] == 100.0 and r["answer_parse_fail"] == 0
    assert run.results["n-samples"][REFLECT]["effective"] == 24
    # the logged samples show the verdict, the scores and what was read
    sample = run.samples(TASK)[0]
    assert sample["acc_r"]["judge"]["name"] == "semantic_match_offline" and sample["acc_r"]["judge"]["verdict"] == 1.0
    assert sample["format_rate"]["parsed"]["answer"] == "3" and sample["format_rate"]["missing"] == {}
    # every item names its source video, the error-bar cluster (ours and lmms-eval's, cluster_key)
    clips = {d["id"]: d["source_video"] for d in vr.process_docs([SAMPLE_ROW])}
    assert all(s["acc_i"]["source_video"] == clips[s["acc_i"]["id"]] for s in run.samples(TASK))
    assert m["acc_i_stderr"] == 0.0 and m["acc_i_stderr_clustered"] == 0.0  # 12 items on fewer clips, all right
    # the logged outputs turn into a hints file for the reflection task (here: the gold hints again)
    samples_file = next(run.results_path.parent.glob(f"*_samples_{TASK}.jsonl"))
    hints = tmp_path / "hints.jsonl"
    assert vr.hints_from_samples(samples_file, hints) == 12
    reflect_row = {**SAMPLE_ROW, "hints": ["error_identify", "rationale"]}
    gold = [d["hint"] for d in vr.process_docs_reflect([reflect_row])]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(vr.HINTS_ENV, str(hints))
        assert [d["hint"] for d in vr.process_docs_reflect([reflect_row])] == gold


def test_llm_judge_verdicts_reach_the_logged_samples_and_acc_r(tmp_path, clean_judge_env, monkeypatch):
    docs = sample_docs()
    rejected = {docs[1]["question"], docs[5]["question"], docs[9]["question"]}
    failing = docs[7]["question"]

    def behaviour(request):
        question = request.fields.get("QUESTION", "")
        if question == failing:
            return client_error(400)  # not retried: a judge error
        if question in rejected:
            return Reply(content="0")
        return None  # the canned verdict: 1 when the answers match (they do: the oracle answers)

    with JudgeServer(behaviour, lifetime=600) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
        monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_MAX_ERROR_RATE", "0.1")  # 1 error in 12 is 8.3%
        run = run_lmms_eval(tasks=TASK, model="oracle", output_dir=tmp_path / "out")
        m = run.task_results(TASK)
        # the judge error makes the sample unscored: acc_r waits for `score` (null, never 8/12 nor 8/11),
        # the metrics that need no judge are computed, and nothing stops the run
        assert m["acc_r"] is None and m["by_domain"] is None
        assert m["acc_r_judge_errors"] == 1 and m["unscored"] == 1
        assert m["acc_i"] == m["iou"] == m["graph_jaccard"] == 100.0
        assert {b["model"] for b in server.requests} == {"gpt-4o"}
        assert len(server.requests) == 12
        asked = [json.loads(json.dumps(b)) for b in server.requests]
        assert all("Only output 0 or 1" in b["messages"][0]["content"] for b in asked)  # the paper's Table 5 prompt
    judged = logged_judgements(run, TASK)
    by_id = {d["id"]: d["question"] for d in docs}
    for record_id, outcome in judged.items():
        question = by_id[record_id]
        if question == failing:
            assert outcome["verdict"] is None and "400" in outcome["error"]
        else:
            assert outcome["error"] is None and outcome["verdict"] == (0.0 if question in rejected else 1.0)


def test_tiny_qwen_completes(tmp_path, clean_judge_env, tiny_qwen_args):
    run = run_lmms_eval(
        tasks=TASK,
        model="qwen2_5_vl",
        model_args=tiny_qwen_args,
        output_dir=tmp_path / "out",
        env={"LMMS_EVAL_PLUGINS_JUDGE": "offline"},
        extra_args=["--gen_kwargs", "max_new_tokens=24"],
    )
    m = run.task_results(TASK)
    assert run.results["n-samples"][TASK]["effective"] == 12
    for metric in ("acc_i", "iou", "acc_r", "graph_jaccard", "format_rate"):
        assert 0.0 <= m[metric] <= 100.0, metric
    # a random model's output is noise: every missing part is counted and named, never a crash
    samples = run.samples(TASK)
    assert m["parse_fail"]["error_identify"] == sum("error_identify" in s["acc_i"]["missing"] for s in samples)
    assert all(s["format_rate"]["format_ok"] == (not set(s["format_rate"]["missing"]) & set(vr.PARTS)) for s in samples)
