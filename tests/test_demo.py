"""``lmms-eval-plugins demo``: the README's first command, end to end (one lmms-eval process, three models)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lmms_eval_plugins import demo

pytestmark = pytest.mark.cli


def test_headline_is_the_first_percent_metric_of_the_spec():
    metrics = {"alias": "x", "step_parse_fail,none": 3, "step_acc,none": 40.0, "step_acc_stderr,none": 5.0}
    assert demo.headline("errorradar_step_sample", metrics) == ("step_acc", 40.0)
    assert demo.headline("not_ours", metrics) == ("", None)


def test_results_by_model_keeps_each_models_newest_file_and_skips_damaged_ones(tmp_path):
    import json

    def write(name, model, value, mtime):
        path = tmp_path / name / "x_results.json"
        path.parent.mkdir()
        path.write_text(
            json.dumps({"config": {"model": model}, "results": {"t": {"acc,none": value}}}), encoding="utf-8"
        )
        os.utime(path, (mtime, mtime))

    write("old", "oracle", 1.0, 1_000)
    write("new", "oracle", 2.0, 2_000)
    write("rnd", "random", 3.0, 1_500)
    (tmp_path / "cut").mkdir()
    (tmp_path / "cut" / "y_results.json").write_text('{"config": {"model": "oracle"}, "resul', encoding="utf-8")
    (tmp_path / "deep").mkdir()  # nested past the bounded reader's limit: refused, never parsed
    (tmp_path / "deep" / "z_results.json").write_text(
        '{"config": {"model": "oracle"}, "results": ' + "[" * 100_000 + "]" * 100_000 + "}", encoding="utf-8"
    )
    os.utime(tmp_path / "deep" / "z_results.json", (3_000, 3_000))
    runs = demo.results_by_model(tmp_path)
    assert {m: r["results"]["t"]["acc,none"] for m, r in runs.items()} == {"oracle": 2.0, "random": 3.0}


def test_demo_prints_the_tiny_model_beside_oracle_and_random(tmp_path, isolated_env):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lmms_eval_plugins.cli",
            "demo",
            "--output_path",
            str(tmp_path / "demo"),
            "--tasks",
            "errorradar_sample,mmerror_sample,causalstep_sample,causalstep_sample_restart_same,virectify_sample",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("task "))
    assert lines[header].split()[-3:] == ["Qwen2.5-VL", "oracle", "random"]
    rows = {
        line.split()[0]: line.split()
        for line in lines[header + 2 :]
        if line.strip() and not line.startswith(" ") and "_sample" in line.split()[0]
    }
    assert {
        "errorradar_step_sample",
        "errorradar_cate_sample",
        "mmerror_etc_sample",
        "mmerror_epd_sample",
        "causalstep_sample",
        "causalstep_sample_restart_same",
        "virectify_sample",
    } <= set(rows)
    for task, cells in rows.items():
        tiny, oracle, random = cells[-3:]
        assert oracle == "100.0", (task, cells)  # every headline is a percent whose maximum is 100
        assert float(tiny) <= 100.0 and float(random) <= 100.0
    assert "random weights" in done.stdout and "near the random row" in done.stdout
    assert any(line.startswith("Metrics: ") and "csr = CSR" in line for line in lines)  # what each headline means
    # one folder per model (issue 37 case 13): report, compare and check-run see three runs, never one merged
    from lmms_eval_plugins.runs import discover_runs

    assert sorted(p.name for p in (tmp_path / "demo").iterdir() if p.is_dir()) == ["oracle", "qwen2_5_vl", "random"]
    assert sorted(r.model for r in discover_runs(tmp_path / "demo")) == ["oracle", "qwen2_5_vl", "random"]
    # the judged row says which judge scored it (the demo runs the offline judges)
    note = next(line for line in lines if line.startswith("Judged rows:"))
    assert "semantic_match_offline scored virectify_sample" in note and "LMMS_EVAL_PLUGINS_JUDGE=offline" in note


def test_the_judge_note_names_each_judge_and_its_tasks():
    assert demo.judge_note({}) == ""
    note = demo.judge_note(
        {
            "virectify_sample": "semantic_match_offline",
            "crossvid_ccqa_sample": "rubric_offline",
            "virectify_reflect_sample": "semantic_match_offline",
        }
    )
    assert note.startswith(
        "Judged rows: rubric_offline scored crossvid_ccqa_sample; semantic_match_offline scored "
        "virectify_reflect_sample, virectify_sample (offline judges, LMMS_EVAL_PLUGINS_JUDGE=offline:"
    )


def test_the_demo_table_knows_which_rows_are_judged():
    lines = [
        "task  metric  a",
        "----  ------  -",
        "virectify_sample  acc_i  1.0",
        "causalstep_sample  csr  0.0",
        "crossvid_ccqa_sample  score  0.0",
    ]
    assert demo.table_judges(lines) == {
        "virectify_sample": "semantic_match_offline",
        "crossvid_ccqa_sample": "rubric_offline",
    }


LOG_WITH_TRACEBACK = """\
\x1b[32m2026-11-25 20:24:12\x1b[0m | INFO | lmms_eval.__main__:cli_evaluate:516 - Verbosity set to INFO
Traceback (most recent call last):
  File "lmms_eval/__main__.py", line 583, in cli_evaluate
    results, samples = cli_evaluate_single(args)
                       ^^^^^^^^^^^^^^^^^^^^^^^^^
  File "lmms_eval/evaluator.py", line 134, in _enable_reentrant_filelocks
    import filelock._api as _fl_api
ModuleNotFoundError: No module named 'filelock._api'
2026-11-25 20:24:12 | ERROR | lmms_eval.__main__:cli_evaluate:614 - Error during evaluation: No module named 'filelock._api'
"""


def test_the_cause_is_the_last_traceback_without_caret_lines_or_the_plugins_error_block():
    assert demo.log_excerpt(LOG_WITH_TRACEBACK, n=4) == [
        "    results, samples = cli_evaluate_single(args)",
        '  File "lmms_eval/evaluator.py", line 134, in _enable_reentrant_filelocks',
        "    import filelock._api as _fl_api",
        "ModuleNotFoundError: No module named 'filelock._api'",
    ]
    block = (
        "noise\n"
        + "=" * 100
        + "\nlmms-eval-plugins: the run stopped: DataError\n  problem: no data\n"
        + "=" * 100
        + "\nafter\n"
    )
    assert demo.log_excerpt(LOG_WITH_TRACEBACK + block) == [
        "lmms-eval-plugins: the run stopped: DataError",
        "  problem: no data",
    ]
    assert demo.log_excerpt("a\n\nb\nc\n", n=2) == ["b", "c"]  # no traceback: the log's last lines


def test_the_failure_report_says_what_failed_then_the_cause_the_fix_and_doctor():
    lines = demo.failure_report(
        ["oracle"], 0, ["Boom: x"], ["filelock 4.3.1: gone. Fix: pip install 'filelock<4.3'"], "out/demo.log"
    )
    assert lines == [
        "lmms-eval-plugins demo: FAILED: lmms-eval wrote no results for oracle (lmms-eval exit status 0).",
        "cause (from the lmms-eval log, out/demo.log):",
        "    Boom: x",
        "fix: filelock 4.3.1: gone. Fix: pip install 'filelock<4.3'",
        "(check the install: lmms-eval-plugins doctor)",
    ]


def test_a_failed_lmms_eval_run_prints_the_cause_and_fix_first_and_exits_1(tmp_path, isolated_env):
    from test_doctor import shadow_filelock

    shadow = shadow_filelock(tmp_path / "shadow")  # filelock 4.3.1: lmms-eval stops before its first request
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(shadow), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lmms_eval_plugins.cli",
            "demo",
            "--output_path",
            str(tmp_path / "demo"),
            "--model",
            "oracle",
            "--no-baselines",
            "--tasks",
            "errorradar_step_sample",
            "--limit",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 1, done.stdout[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("lmms-eval-plugins demo: oracle on errorradar_step_sample")
    assert lines[1].startswith("lmms-eval-plugins demo: FAILED: lmms-eval wrote no results for oracle")
    assert "ModuleNotFoundError: No module named 'filelock._api'" in done.stdout
    fix = next(i for i, line in enumerate(lines) if line.startswith("fix: filelock 4.3.1"))
    assert (
        "pip install 'filelock<4.3'" in lines[fix] and lines[fix + 1] == "(check the install: lmms-eval-plugins doctor)"
    )
    assert lines[fix + 1] == lines[-1]  # nothing after: no empty table, no success text
    assert not any(line.startswith("task ") for line in lines) and "every answer right" not in done.stdout


def test_the_demo_table_says_what_each_headline_metric_means():
    # issue 37 case 17: csr, acc_i, acc_r and score were unexplained under the table
    lines = [
        "task  metric  m",
        "----",
        "causalstep_sample  csr  1.0",
        "virectify_sample  acc_i  2.0",
        "virectify_reflect_sample  acc_r  3.0",
        "crossvid_bu_sample  score  4.0",
        "mmerror_etc_sample  accuracy  5.0",
        "mmerror_epd_sample  accuracy  6.0",
    ]
    legend = demo.metric_legend(lines)
    assert legend.startswith("Metrics: csr = CSR (chain success rate")
    for name in (
        "acc_i = Acc_i (identification",
        "acc_r = Acc_r (rectification",
        "score = Acc (accuracy",
        "accuracy = Acc (error type classification accuracy) / Acc (error presence detection",
    ):
        assert name in legend, legend
    assert demo.metric_legend(lines[:2]) == ""


def test_two_models_in_one_folder_are_two_runs_never_one(tmp_path):
    # issue 37 case 13: `report` on one folder holding the oracle's and random's results showed one run "random"
    from lmms_eval_plugins.runs import discover_runs

    for stamp, model, args in (("20261122_143442", "oracle", ""), ("20261122_143503", "random", "seed=0")):
        (tmp_path / f"{stamp}_results.json").write_text(
            json.dumps(
                {
                    "results": {
                        "errorradar_step_sample": {"alias": "x", "step_acc,none": 100.0 if model == "oracle" else 30.0}
                    },
                    "config": {"model": model, "model_args": args},
                    "date": stamp,
                }
            ),
            encoding="utf-8",
        )
    runs = discover_runs(tmp_path)
    assert sorted(r.model for r in runs) == ["oracle", "random"]
    assert sorted(r.tasks["errorradar_step_sample"].metrics["step_acc"] for r in runs) == [30.0, 100.0]
    assert all("holds the results of 2 models" in " ".join(r.notes) for r in runs)
