"""CrossVid through the real ``lmms-eval`` CLI (subprocess), judged by the results JSON, not the exit code.

CCQA runs with the offline rubric judge (``LMMS_EVAL_PLUGINS_JUDGE=offline``): no network.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lmms_eval_plugins.cli_run import run_lmms_eval
from testkit.task_utils import load_task_utils

pytestmark = pytest.mark.cli
cv = load_task_utils("crossvid")
TASKS = [f"crossvid_{t.lower()}_sample" for t in cv.TASKS]
GROUPS = ["crossvid_sample", "crossvid_comparative_sample", "crossvid_temporal_sample", "crossvid_multiview_sample"]
OFFLINE_JUDGE = {"LMMS_EVAL_PLUGINS_JUDGE": "offline"}


def test_oracle_scores_100_on_all_ten_tasks_and_every_average(tmp_path, isolated_env):
    run = run_lmms_eval(tasks="crossvid_sample", model="oracle", output_dir=tmp_path / "out", env=OFFLINE_JUDGE)
    for task in TASKS:
        metrics = run.task_results(task)
        assert metrics["score"] == 100.0 and metrics["score_strict"] == 100.0, task
        assert metrics["skipped"] == 0 and metrics.get("parse_fail", 0) == 0 and metrics.get("judge_errors", 0) == 0
        assert run.results["n-samples"][task]["effective"] == 2
        # every question names its video group, the error-bar cluster (ours and lmms-eval's cluster_key)
        clips = {
            d["id"]: {m["rel"] for m in d["media"]}
            for d in cv.load_docs({"benchmark": "crossvid", "source": "sample"}, task.split("_")[1].upper())
        }
        for sample in run.samples(task):
            assert sample["score"]["video_group"] == " | ".join(sorted(clips[sample["score"]["id"]])), task
    for group in GROUPS:  # O.Avg, C.Avg, T.Avg, M.Avg
        assert run.results["results"][group]["score,none"] == 100.0, group
    ccqa = run.task_results("crossvid_ccqa_sample")
    assert ccqa["per_question_mean"] == 100.0
    # MSR record 0 (a placeholder only in an option) and MOC record 1 (an object in no sampled frame) would be
    # dropped by the official scripts: kept and scored here, and counted; the metric exists only for MSR/MOC/FSA
    # (no sample FSA video is shorter than its 8 frame slots)
    for task, dropped_id in (("crossvid_msr_sample", "0"), ("crossvid_moc_sample", "1")):
        assert run.task_results(task)["official_dropped"] == 1
        reasons = {s["score"]["id"]: s["score"]["official_drop"] for s in run.samples(task)}
        assert reasons[dropped_id] and not any(r for i, r in reasons.items() if i != dropped_id)
    assert run.task_results("crossvid_fsa_sample")["official_dropped"] == 0
    assert all(
        "official_dropped" not in run.task_results(t)
        for t in TASKS
        if not any(k in t for k in ("_msr", "_moc", "_fsa"))
    )
    # the oracle's CCQA reply was judged by the offline rubric judge, and every point covered and correct
    for sample in run.samples("crossvid_ccqa_sample"):
        judge = sample["score"]["judge"]  # the per-sample item carries the filter's judge outcome
        assert judge["name"] == "rubric_offline" and judge["verdict"] == 1.0 and judge["error"] is None
        assert judge["detail"]["covered"] == judge["detail"]["correct"] == judge["detail"]["n_points"]


def test_tiny_qwen_completes_all_ten(tmp_path, isolated_env, tiny_qwen_args):
    run = run_lmms_eval(
        tasks="crossvid_sample",
        model="qwen2_5_vl",
        model_args=tiny_qwen_args,
        output_dir=tmp_path / "out",
        env=OFFLINE_JUDGE,
        extra_args=["--gen_kwargs", "max_new_tokens=8"],
    )
    for task in TASKS:
        metrics = run.task_results(task)
        assert 0.0 <= metrics["score"] <= 100.0, task
        assert run.results["n-samples"][task]["effective"] == 2
    assert 0.0 <= run.results["results"]["crossvid_sample"]["score,none"] <= 100.0
    # random weights: mostly unparseable replies, counted and logged, never a crash
    assert all("parse_error" in s["score"] for s in run.samples("crossvid_pss_sample"))


def test_local_data_with_a_missing_video_fails_naming_it_or_is_skipped(tmp_path, isolated_env):
    folder = tmp_path / "data" / "crossvid"
    shutil.copytree(cv.SAMPLE_DIR, folder)
    (folder / "videos" / "behavior" / "bh1.mp4").unlink()
    env = {"LMMS_EVAL_PLUGINS_DATA_ROOT": str(tmp_path / "data")}
    failed = run_lmms_eval(
        tasks="crossvid_bu", model="oracle", output_dir=tmp_path / "out1", env=env, log_samples=False
    )
    assert "crossvid_bu" not in failed.results.get("results", {})
    assert "record: CrossVid BU id 0" in failed.output and "bh1.mp4" in failed.output
    skipped = run_lmms_eval(
        tasks="crossvid_bu",
        model="oracle",
        output_dir=tmp_path / "out2",
        env={**env, "LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA": "1"},
        log_samples=False,
    )
    metrics = skipped.task_results("crossvid_bu")
    assert metrics["skipped"] == 1 and metrics["score"] == 100.0
    assert metrics["skipped_by_reason"] == {"missing media": 1}
    assert skipped.results["n-samples"]["crossvid_bu"]["effective"] == 1


def test_report_leaves_out_an_average_with_a_task_missing(tmp_path):
    """`lmms-eval-plugins report` on a stored run without MOC: M.Avg and O.Avg are left out with a note
    (the paper's rule: an average is over all its tasks), C.Avg and T.Avg are the means of their tasks."""
    run = tmp_path / "random"
    shutil.copytree(Path(__file__).parent / "data" / "report_runs" / "random", run)
    (results,) = run.glob("*_results.json")
    data = json.loads(results.read_text())
    gone = {"crossvid_moc_sample", "crossvid_multiview_sample", "crossvid_sample"}
    data["results"] = {t: v for t, v in data["results"].items() if t.startswith("crossvid_") and t not in gone}
    results.write_text(json.dumps(data))
    for path in run.glob("*_samples_*.jsonl"):
        if "crossvid_" not in path.name or "crossvid_moc_sample" in path.name:
            path.unlink()
    done = subprocess.run(
        [sys.executable, "-m", "lmms_eval_plugins.cli", "report", str(run), "-o", str(tmp_path / "out"), "--no-plots"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    start = lines.index("<!-- table: crossvid-main -->")
    header = next(line for line in lines[start:] if line.startswith("| "))
    row = next(line for line in lines[start:] if line.startswith(("| random", "| **random")))
    cells = dict(
        zip([c.strip() for c in header.split("|")[1:-1]], [c.strip().strip("*") for c in row.split("|")[1:-1]])
    )
    assert cells["M.Avg"] == "—" and cells["O.Avg"] == "—" and cells["MOC"] == "—"
    assert cells["C.Avg"].startswith("37.5") and cells["T.Avg"].startswith("38.1")  # (50+0+50+50)/4, (50+14.3+50)/3
    assert "An average with a task missing or unscored is left out" in text
