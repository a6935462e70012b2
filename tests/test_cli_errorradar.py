"""ErrorRadar through the real ``lmms-eval`` CLI (subprocess), judged by the results JSON, not the exit code."""

from __future__ import annotations

import re
import shutil

import numpy as np
import pytest

from lmms_eval_plugins import report, run_status, stats
from lmms_eval_plugins.models.random_baseline import chance_pick
from lmms_eval_plugins.cli_run import run_lmms_eval
from testkit.report_fixtures import html_table_rows
from testkit.task_utils import load_task_utils

pytestmark = pytest.mark.cli
er = load_task_utils("errorradar")
STEP_TASK, CATE_TASK = "errorradar_step_sample", "errorradar_cate_sample"


def sample_docs(kind: str) -> list[dict]:
    process = er.process_docs_step if kind == "step" else er.process_docs_cate
    return list(process([{"benchmark": "errorradar", "source": "sample"}]))


def test_oracle_scores_100_on_every_metric(tmp_path, isolated_env):
    run = run_lmms_eval(tasks="errorradar_sample", model="oracle", output_dir=tmp_path / "out")
    step, cate = run.task_results(STEP_TASK), run.task_results(CATE_TASK)
    assert step["step_acc"] == 100.0 and step["step_parse_fail"] == 0
    per_class = [f"cate_{kind}_{c.lower()}" for kind in ("precision", "recall", "f1") for c in er.CATEGORIES]
    for metric in ("cate_acc", "cate_macro_precision", "cate_macro_recall", "cate_macro_f1", *per_class):
        assert cate[metric] == 100.0, metric
    # a 1-round task has no spread over rounds: absent, not an empty list
    assert not [k for k in (*step, *cate) if k.endswith("_std") or isinstance(step.get(k, cate.get(k)), list)]
    assert isinstance(cate["cate_precision_vis_stderr"], float) and cate["cate_confusion_stderr"] == "N/A"
    # issue 37: an all-correct run has error bar 0 on every headline metric (was cate_f1_cal ± 32.04: a resample
    # without the class counted as F1 0), its 95% intervals are [100, 100], and the CLT columns are in percent
    # for a mean and N/A for a metric that is not one (was cate_acc's 0-1 figure on every metric)
    intervals = run.results["lmms_eval_plugins_intervals"]
    for metric in ("cate_acc", "cate_macro_precision", "cate_macro_recall", "cate_macro_f1", *per_class):
        assert cate[f"{metric}_stderr"] == 0.0, metric
        assert intervals[CATE_TASK][f"{metric},none"] == [100.0, 100.0], metric
        if metric != "cate_acc":
            assert (cate[f"{metric}_stderr_clt"], cate[f"{metric}_stderr_clustered"]) == ("N/A", "N/A"), metric
    assert cate["cate_acc_stderr_clt"] == 0.0 and cate["cate_parse_fail_stderr_clt"] == "N/A"
    console = [line for line in run.output.splitlines() if re.search(r"\|\s*cate_f1_cal\s*\|", line)]
    assert console and all(line.count("N/A") == 2 and "32.0" not in line for line in console), console
    assert cate["cate_parse_fail"] == 0
    assert set(step["step_acc_by_question_type"].values()) == {100.0}
    assert cate["cate_pred_distribution"]["unparseable"] == 0.0
    assert sum(cate["cate_confusion"][c][c] for c in er.CATEGORIES) == len(sample_docs("cate"))
    # logged samples carry the parsed prediction, the gold value and the parse status
    logged = run.samples(STEP_TASK)[0]["step_acc"]
    assert logged["pred"] == logged["gold"] and logged["parse_error"] is None


def test_random_baseline_is_seeded_and_matches_its_definition(tmp_path, isolated_env):
    run = run_lmms_eval(tasks=STEP_TASK, model="random", model_args="seed=7", output_dir=tmp_path / "out")
    docs = sample_docs("step")
    right = [
        float(chance_pick(d["chance_responses"], seed=7, task=STEP_TASK, doc_id=i) == d["oracle_response"])
        for i, d in enumerate(docs)
    ]
    results = run.task_results(STEP_TASK)
    assert results["step_acc"] == pytest.approx(100 * sum(right) / len(docs))
    # the error bar lmms-eval leaves N/A for a custom aggregation: the standard error of the mean, in percent
    # (one round: every record is its own cluster)
    assert results["step_acc_stderr"] == pytest.approx(100 * stats.mean_stderr(right))
    assert results["step_parse_fail_stderr"] == "N/A"  # a count has none
    # lmms-eval's CLT columns, in the metric's units (issue 37: they were fractions beside a percent Stderr)
    assert results["step_acc_stderr_clt"] == pytest.approx(100 * stats.mean_stderr(right))
    assert results["step_acc_stderr_clustered"] == pytest.approx(
        100 * stats.mean_stderr(right)
    )  # one round: one item per record
    # the report's "Error bars" table shows them, open without a click (issue 29): read from report.html
    out = tmp_path / "report"
    assert report.main([str(run.results_path.parent), "-o", str(out), "--no-plots", "--no-markdown"]) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<details open><summary>Error bars</summary>" in page
    (row,) = [
        r for r in html_table_rows(page, "errorradar-errorbars") if r["task"] == STEP_TASK and r["metric"] == "STEP acc"
    ]
    value, se = 100 * sum(right) / len(docs), 100 * stats.mean_stderr(right)
    assert (row["value"], row["stderr"]) == (f"{value:.2f}", f"{se:.2f}")
    # the 95% CI: the percentile interval of the seeded bootstrap (seed 1234, 1000 resamples of the records),
    # computed here by hand: the 25th and 976th of the sorted resampled means; inside [0, 100] by construction
    draws = np.random.default_rng(1234).integers(0, len(right), size=(1000, len(right)))
    means = np.sort(100 * np.asarray(right)[draws].mean(axis=1))
    assert row["95% CI"] == f"[{means[24]:.2f}, {means[975]:.2f}]" and 0 <= means[24] <= means[975] <= 100
    assert row["MDE"] == f"{(1.959964 + 0.841621) * se * 2**0.5:.2f}"  # z_.975 + z_.8, SE of a difference of two runs


def test_tiny_qwen_completes(tmp_path, isolated_env, tiny_qwen_args):
    run = run_lmms_eval(
        tasks="errorradar_sample", model="qwen2_5_vl", model_args=tiny_qwen_args, output_dir=tmp_path / "out"
    )
    for task in (STEP_TASK, CATE_TASK):
        metrics = run.task_results(task)
        assert 0.0 <= metrics.get("step_acc", metrics.get("cate_acc")) <= 100.0
        assert run.results["n-samples"][task]["effective"] == 10
    # a random model's output is mostly unparseable: counted, never a crash
    assert all("parse_error" in s["step_acc"] for s in run.samples(STEP_TASK))


def test_local_data_root_and_three_round_average(tmp_path, isolated_env):
    shutil.copytree(er.SAMPLE_DIR, tmp_path / "data" / "errorradar")
    run = run_lmms_eval(
        tasks="errorradar_3rounds",
        model="oracle",
        output_dir=tmp_path / "out",
        env={"LMMS_EVAL_PLUGINS_DATA_ROOT": str(tmp_path / "data")},
    )
    step = run.task_results("errorradar_step_3rounds")
    assert step["step_acc"] == 100.0 and step["step_acc_std"] == 0.0
    assert run.results["n-samples"]["errorradar_step_3rounds"]["effective"] == 3 * 10
    assert set(step["step_acc_by_question_type"].values()) == {100.0}
    assert set(step["step_acc_by_question_type_std"].values()) == {0.0}
    cate = run.task_results("errorradar_cate_3rounds")
    assert cate["cate_macro_f1"] == 100.0 and cate["cate_macro_f1_std"] == 0.0
    for kind in ("precision", "recall", "f1"):
        for c in er.CATEGORIES:
            assert (cate[f"cate_{kind}_{c.lower()}"], cate[f"cate_{kind}_{c.lower()}_std"]) == (100.0, 0.0)
    # breakdowns: the per-key mean over the rounds, with a dict of standard deviations
    assert cate["cate_pred_distribution"]["unparseable"] == 0.0 and set(
        cate["cate_pred_distribution_std"].values()
    ) == {0.0}
    assert sum(cate["cate_confusion"][c][c] for c in er.CATEGORIES) == len(sample_docs("cate"))
    assert set(cate["cate_acc_by_question_type"].values()) == {100.0}
    assert not [k for k, v in cate.items() if isinstance(v, list)]


def test_bad_local_data_fails_with_a_message_naming_record_and_fix(tmp_path, isolated_env):
    folder = tmp_path / "data" / "errorradar"
    shutil.copytree(er.SAMPLE_DIR, folder)
    csv_path = folder / er.CSV_NAME
    text = csv_path.read_text(encoding="utf-8")
    first_id = text.splitlines()[1].split(",")[0]
    csv_path.write_text(text.replace("Visual Perception Error", "Spelling Error", 1), encoding="utf-8")
    run = run_lmms_eval(
        tasks="errorradar_cate",
        model="oracle",
        output_dir=tmp_path / "out",
        env={"LMMS_EVAL_PLUGINS_DATA_ROOT": str(tmp_path / "data")},
        log_samples=False,
    )
    assert "errorradar_cate" not in run.results.get("results", {})
    assert first_id in run.output and "Spelling Error" in run.output and "fix:" in run.output
    # The output ends with a short block naming the record and the fix, every message in full (never cut
    # with "..."); no RetryError anywhere. lmms-eval exits 0 all the same; check-run exits 1 on this folder.
    lines = run.output.rstrip().splitlines()
    bars = [i for i, line in enumerate(lines) if line.startswith("=" * 50)]
    assert bars[-1] == len(lines) - 1 and bars[-1] - bars[-2] + 1 <= 14
    block = "\n".join(lines[bars[-2] :])
    assert " ..." not in block and all(
        len(line) <= 100 for line in lines[bars[-2] : bars[-1]] if "check-run" not in line
    )
    assert "the run stopped: DataError" in block and first_id in block and "fix:" in block and "check-run" in block
    assert "RetryError" not in run.output and run.returncode == 0
    assert run_status.main([str(tmp_path / "out")]) == 1
