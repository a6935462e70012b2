"""``lmms-eval-plugins check-model``: per-task completion, format compliance, typical failure, request shapes."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from lmms_eval_plugins import check_model as cm
from lmms_eval_plugins.task_list import task_names

# One image benchmark, and one video benchmark with a free-form judged task when it exists.
IMAGE_GROUP = "errorradar_sample"
VIDEO_TASKS = [t for t in ("crossvid_bu_sample", "crossvid_ccqa_sample") if t in task_names()]


# ------------------------------------------------------------------------------------------------ unit


def test_task_selection_by_task_group_and_benchmark():
    index = cm.task_index()
    everything = cm.select_tasks(None, index)
    assert everything == sorted(t for t, kind in task_names().items() if kind == "task" and t.endswith("_sample"))
    assert cm.select_tasks("errorradar", index) == ["errorradar_cate_sample", "errorradar_step_sample"]  # not the full group
    assert cm.select_tasks("mmerror_sample,errorradar_step_sample", index) == [
        "mmerror_etc_sample", "mmerror_epd_sample", "errorradar_step_sample"]
    with pytest.raises(SystemExit, match="not a task"):
        cm.select_tasks("nope", index)


def frames(n, size=(8, 6)):
    return [Image.new("RGB", size) for _ in range(n)]


def test_request_shapes_count_visuals_and_flag_pitfalls():
    shapes = cm.Shapes()
    cm.measure_messages([
        {"role": "system", "content": [{"type": "text", "text": "You are a helpful video analyzer."}]},
        {"role": "user", "content": [
            {"type": "text", "text": "Video 1:"}, {"type": "video", "url": frames(4)},
            {"type": "text", "text": "Video 2:"}, {"type": "video", "url": frames(2) + frames(1, (4, 4))},
            {"type": "video", "url": []},
            {"type": "text", "text": "Question"}]},
    ], shapes, where="doc 0")
    cm.measure_messages([{"role": "user", "content": [{"type": "image", "url": Image.new("RGB", (20, 10))},
                                                      {"type": "text", "text": "Q"}]}], shapes, where="doc 1")
    s = shapes.summary()
    assert (s["requests"], s["images"], s["videos"], s["frames_per_video"], s["frames_per_request"]) == (2, "0-1", "0-3", "0-4", "0-7")
    assert s["interleaved_requests"] == 1 and s["max_size"] == "20x10"
    issues = " ".join(s["issues"])
    assert "video 2 mixes frame sizes" in issues and "video 3 is an empty frame list" in issues
    assert "fewer frames (3) than video 1 (4)" in issues


def test_compliance_from_logged_items():
    samples = [
        {"filtered_resps": ["Error Step: Step 2"], "step_acc": {"pred": 2, "parse_error": None}},
        {"filtered_resps": ["I think it is fine"], "step_acc": {"pred": None, "parse_error": "no step found"}},
        {"filtered_resps": ["nothing"], "step_acc": {"pred": None, "parse_error": "no step found"}},
        {"filtered_resps": ["Step 9"], "step_acc": {"pred": None, "parse_error": "step 9 out of range 1..4"}},
    ]
    stats = cm.compliance_from_samples(samples, ["step_acc"])
    assert stats["compliance"] == 25.0 and (stats["requests"], stats["parsed"]) == (4, 1)
    assert stats["typical_failure"] == {"parse_error": "no step found", "count": 2, "example_output": "I think it is fine"}
    # ViRectify's format flags, and a judged reply logged as the filter's JSON
    judged = json.dumps({"text": "no boxed answer here", "judge": {"skipped": True, "error": None}})
    stats = cm.compliance_from_samples([
        {"filtered_resps": ["<error_identify>..."], "acc_i": {"format_ok": True, "missing": {}}},
        {"filtered_resps": [judged], "acc_i": {"format_ok": False, "missing": {"timestamps": "no <timestamps> tag"}}},
    ], ["acc_i"])
    assert stats["compliance"] == 50.0
    assert stats["typical_failure"]["parse_error"] == "timestamps: no <timestamps> tag"
    assert stats["typical_failure"]["example_output"] == "no boxed answer here"
    assert cm.compliance_from_samples([{"filtered_resps": ["x"], "score": 1.0}], ["score"]) is None
    assert cm.compliance_from_metrics({"parse_fail": 3, "acc": 50.0}, 12)["compliance"] == 75.0


def test_last_exception_line():
    log = "INFO ok\nTraceback (most recent call last):\n  File x\nlmms_eval_plugins.errors.MediaError: video not found | record: 7\n"
    assert cm.last_exception(log) == "MediaError: video not found | record: 7"
    assert cm.last_exception("all good\n") is None


# ------------------------------------------------------------------------------------------------ real runs


def run_check(tmp_path, *args) -> tuple[int, str, dict]:
    out = tmp_path / "report.json"
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = cm.main([*args, "--json", str(out), "--output_path", str(tmp_path / "runs")])
    return code, buffer.getvalue(), json.loads(out.read_text())


@pytest.mark.cli
def test_oracle_completes_every_task_with_full_compliance(tmp_path, isolated_env):
    tasks = ",".join([IMAGE_GROUP, *VIDEO_TASKS])
    code, table, report = run_check(tmp_path, "--model", "oracle", "--tasks", tasks)
    assert code == 0 and report["all_completed"]
    rows = {r["task"]: r for r in report["tasks"]}
    assert set(rows) == {"errorradar_step_sample", "errorradar_cate_sample", *VIDEO_TASKS}
    for task, row in rows.items():
        assert row["completed"] and row["compliance"] == 100.0 and row["typical_failure"] is None, task
        assert row["requests"] > 0 and row["parsed"] == row["requests"]
    assert rows["errorradar_step_sample"]["shapes"]["images"] == "1"
    assert rows["errorradar_step_sample"]["shapes"]["interleaved_requests"] == 0  # one visual: nothing to interleave
    for task in VIDEO_TASKS:
        shapes = rows[task]["shapes"]
        assert shapes["error"] is None and shapes["images"] == "0" and int(shapes["videos"].split("-")[0]) >= 2
        assert shapes["interleaved_requests"] == shapes["requests"]  # "Video 1:" frames "Video 2:" frames
    assert "| errorradar_step_sample | yes | 100.0% (10/10) |" in table


@pytest.mark.cli
def test_tiny_qwen_completes_and_its_unreadable_replies_are_reported(tmp_path, isolated_env, tiny_qwen_args):
    tasks = ",".join(["errorradar_step_sample", *VIDEO_TASKS[:1]])
    code, table, report = run_check(tmp_path, "--model", "qwen2_5_vl", "--model_args", tiny_qwen_args,
                                    "--tasks", tasks, "--limit", "3", "--gen_kwargs", "max_new_tokens=8")
    assert code == 0
    for row in report["tasks"]:
        assert row["completed"], row
        assert 1 <= row["requests"] <= 3 and 0.0 <= row["compliance"] <= 100.0  # --limit 3 (the CrossVid sample has 2)
        if row["compliance"] < 100.0:  # random weights: noise, so the parser fails and says why
            failure = row["typical_failure"]
            assert failure["parse_error"] and failure["count"] >= 1 and isinstance(failure["example_output"], str)
            assert sum(row["failures"].values()) == row["requests"] - row["parsed"]
        assert row["shapes"]["requests"] == row["requests"]  # shapes computed on the same (limited) docs
    assert "| errorradar_step_sample | yes |" in table


@pytest.mark.cli
def test_a_failing_task_is_isolated_and_named(tmp_path, isolated_env, monkeypatch):
    # the full-data task reads an empty local data root and fails while building its docs; the sample
    # task (bundled data) in the same run must still be reported, and the failure must say why
    (tmp_path / "empty-root").mkdir()
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path / "empty-root"))
    reports = cm.check_model(model="oracle", model_args=None, tasks=["errorradar_step", "errorradar_step_sample"],
                             output_dir=tmp_path / "runs", shapes=False, limit=2)
    by_task = {r.task: r for r in reports}
    failed, ok = by_task["errorradar_step"], by_task["errorradar_step_sample"]
    assert not failed.completed and failed.error.startswith("DataError:") and "holds no 'errorradar' folder" in failed.error
    assert ok.completed and ok.compliance == 100.0 and ok.requests == 2
    assert "**run failed**: DataError" in cm.markdown(reports, model="oracle", model_args=None)
