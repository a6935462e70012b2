"""MMErroR through the real ``lmms-eval`` CLI (subprocess), judged by the results JSON, not the exit code."""

from __future__ import annotations

import json
import shutil

import pytest

from lmms_eval_plugins.benchmarks.mmerror.spec import EPD_TEMPLATE, ETC_TEMPLATE
from lmms_eval_plugins.models.random_baseline import chance_pick
from lmms_eval_plugins.task_hooks import RUN_COUNTS
from lmms_eval_plugins.cli_run import run_lmms_eval
from testkit.task_utils import load_task_utils

pytestmark = pytest.mark.cli
mm = load_task_utils("mmerror")
ETC_TASK, EPD_TASK = "mmerror_etc_sample", "mmerror_epd_sample"


def sample_docs(task: str) -> list[dict]:
    process = mm.process_docs_etc if "etc" in task else mm.process_docs_epd
    return list(process([{"benchmark": "mmerror", "source": "sample"}]))


def expected_metrics(task: str, replies: list[str]) -> dict:
    """What the task's own hooks make of these replies (doc i gets replies[i])."""
    process = mm.process_results_etc if "etc" in task else mm.process_results_epd
    names = [m.name for m in (ETC_TEMPLATE if "etc" in task else EPD_TEMPLATE) if m.name not in RUN_COUNTS]
    per_doc = [process(doc, [reply]) for doc, reply in zip(sample_docs(task), replies)]
    return {m: getattr(mm, f"agg_{m}")([x[m] for x in per_doc]) for m in names}


def test_oracle_scores_100_on_both_tasks(tmp_path, isolated_env):
    run = run_lmms_eval(tasks="mmerror_sample", model="oracle", output_dir=tmp_path / "out")
    etc, epd = run.task_results(ETC_TASK), run.task_results(EPD_TASK)
    for metrics in (etc, epd):
        assert metrics["accuracy"] == 100.0 and metrics["accuracy_domain_macro"] == 100.0
        assert metrics["parse_fail"] == 0
        # the official parser reads the oracle's bare letters too; official_parse_fail is the official report's
        # dataset_total - scored_total, so ETC's 3 unasked E_NoError records count there (issue 37 case 6)
        assert metrics["official_accuracy"] == 100.0
        assert metrics["official_parse_fail"] == (3 if metrics is etc else 0)
        assert metrics["official_accuracy_stderr"] == 0.0 and metrics["official_parse_fail_stderr"] == "N/A"
        assert set(metrics["accuracy_by_domain"].values()) == {100.0}
        assert set(metrics["accuracy_by_label"].values()) == {100.0}
    assert set(etc["accuracy_by_label"]) == set(mm.ERROR_LABELS) and set(epd["accuracy_by_label"]) == set(mm.ALL_LABELS)
    # officially ETC's strict denominator counts the 3 E_NoError records it never asks: 9 of 12
    assert etc["official_strict_accuracy"] == 75.0 and epd["official_strict_accuracy"] == 100.0
    assert epd["false_alarm_rate"] == 0.0 and epd["no_error_rate"] == 25.0 and epd["presence_parse_fail"] == 0
    assert sum(epd["confusion"][label][label] for label in mm.ALL_LABELS) == 12
    # n-samples counts requests: 9 ETC samples (E_NoError left out), 2 requests for each of 12 EPD samples
    assert run.results["n-samples"][ETC_TASK]["effective"] == 9
    assert run.results["n-samples"][EPD_TASK]["effective"] == 24
    logged = run.samples(ETC_TASK)[0]["accuracy"]
    assert logged["pred"] == logged["gold"] and logged["parse_error"] is None
    assert logged["official_pred"] == logged["gold"] and logged["official_correct"] is True
    stages = [s["accuracy"]["stage"] for s in run.samples(EPD_TASK)]
    assert stages.count("presence") == stages.count("type") == 12


def test_random_baseline_is_seeded_and_replayed(tmp_path, isolated_env):
    run = run_lmms_eval(tasks="mmerror_sample", model="random", model_args="seed=7", output_dir=tmp_path / "out")
    for task in (ETC_TASK, EPD_TASK):
        replies = [
            chance_pick(d["chance_responses"], seed=7, task=task, doc_id=i) for i, d in enumerate(sample_docs(task))
        ]
        expected = expected_metrics(task, replies)
        got = run.task_results(task)
        for metric in (
            "accuracy",
            "parse_fail",
            "accuracy_by_label",
            "accuracy_domain_macro",
            "official_accuracy",
            "official_strict_accuracy",
            "official_parse_fail",
        ):
            assert got[metric] == pytest.approx(expected[metric]), (task, metric)
        # chance replies are bare letters: both parsers read them all, so the official numbers are ours
        # (ETC's strict one over 12 records, the 3 unasked E_NoError ones included)
        share = 9 / 12 if task == ETC_TASK else 1.0
        assert got["official_strict_accuracy"] == pytest.approx(share * got["accuracy"])
        assert got["official_parse_fail"] == (3 if task == ETC_TASK else 0)  # the unasked E_NoError records
        assert got["official_accuracy"] == pytest.approx(got["accuracy"])
        assert got["official_accuracy_stderr"] > 0 and got["official_strict_accuracy_stderr"] > 0
        assert got["confusion"] == expected["confusion"]
    assert run.task_results(EPD_TASK)["no_error_rate"] == pytest.approx(expected["no_error_rate"])
    assert run.task_results(EPD_TASK)["false_alarm_rate"] == pytest.approx(expected["false_alarm_rate"])


def test_tiny_qwen_completes(tmp_path, isolated_env, tiny_qwen_args):
    # A random model never stops on its own: cap the official 2048-token budget to keep the test fast.
    run = run_lmms_eval(
        tasks="mmerror_sample",
        model="qwen2_5_vl",
        model_args=tiny_qwen_args,
        output_dir=tmp_path / "out",
        extra_args=["--gen_kwargs", "max_new_tokens=16"],
    )
    for task, requests in ((ETC_TASK, 9), (EPD_TASK, 24)):
        metrics = run.task_results(task)
        assert 0.0 <= metrics["accuracy"] <= 100.0 and 0 <= metrics["parse_fail"]
        assert 0 <= metrics["official_parse_fail"] and 0.0 <= metrics["official_strict_accuracy"] <= 100.0
        assert run.results["n-samples"][task]["effective"] == requests
        assert all("parse_error" in s["accuracy"] for s in run.samples(task))


def test_local_data_root_runs_the_full_group_without_no_error_samples(tmp_path, isolated_env):
    # like the public release, which holds erroneous chains only: the false-alarm rate is absent (null)
    shutil.copytree(mm.SAMPLE_DIR, tmp_path / "data" / "mmerror")
    for path in (tmp_path / "data" / "mmerror" / "data" / "jsons").glob("MMErroR_0*.json"):
        if json.loads(path.read_text(encoding="utf-8"))["label"] == "E_NoError":
            path.unlink()
    # spellings the official loader maps (issue 30) load too: an opening letter, the first class named
    jsons = tmp_path / "data" / "mmerror" / "data" / "jsons"
    for name, label in (
        ("MMErroR_00001", "Visual Reasoning Error"),
        ("MMErroR_00004", "b"),
        ("MMErroR_00005", "Reasoning about the question"),
    ):
        record = json.loads((jsons / f"{name}.json").read_text(encoding="utf-8"))
        (jsons / f"{name}.json").write_text(json.dumps({**record, "label": label}), encoding="utf-8")
    run = run_lmms_eval(
        tasks="mmerror",
        model="oracle",
        output_dir=tmp_path / "out",
        env={"LMMS_EVAL_PLUGINS_DATA_ROOT": str(tmp_path / "data")},
        log_samples=False,
    )
    assert run.task_results("mmerror_etc")["accuracy"] == 100.0
    assert "2 label(s) name several classes" in run.output
    assert "MMErroR_00001.json 'Visual Reasoning Error' -> A_Visual_Perception_Error" in run.output
    epd = run.task_results("mmerror_epd")
    assert epd["accuracy"] == 100.0 and epd["no_error_rate"] == 0.0 and epd["false_alarm_rate"] is None
    assert run.results["n-samples"]["mmerror_epd"]["effective"] == 18


def test_bad_local_data_fails_with_a_message_naming_record_and_fix(tmp_path, isolated_env):
    folder = tmp_path / "data" / "mmerror"
    shutil.copytree(mm.SAMPLE_DIR, folder)
    path = folder / "data" / "jsons" / "MMErroR_00003.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**record, "label": "Spelling_Error"}), encoding="utf-8")
    run = run_lmms_eval(
        tasks="mmerror_etc",
        model="oracle",
        output_dir=tmp_path / "out",
        env={"LMMS_EVAL_PLUGINS_DATA_ROOT": str(tmp_path / "data")},
        log_samples=False,
    )
    assert "mmerror_etc" not in run.results.get("results", {})
    assert "MMErroR_00003" in run.output and "Spelling_Error" in run.output and "fix:" in run.output
