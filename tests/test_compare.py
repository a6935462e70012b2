"""``lmms-eval-plugins compare`` on stored runs (the report's fixture runs: random and oracle replies
to every sample task)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lmms_eval_plugins import compare
from lmms_eval_plugins.report import discover_runs

RUNS = Path(__file__).parent / "data" / "report_runs"
KEYS = ["task", "metric", "a", "b", "diff", "ci_low", "ci_high", "p_value", "n"]


@pytest.fixture(scope="module")
def rows():
    (a,), (b,) = discover_runs(RUNS / "random"), discover_runs(RUNS / "oracle")
    return a, b, compare.compare_runs(a, b, iterations=200)


def test_every_benchmark_and_headline_metric_is_compared(rows):
    _, _, found = rows
    tasks = {r.task.split("_")[0] for r in found}
    assert tasks == {"errorradar", "mmerror", "crossvid", "causalstep", "virectify"}
    names = {(r.task, r.metric) for r in found}
    assert ("errorradar_step_sample", "step_acc") in names and ("causalstep_sample", "csr") in names
    assert ("virectify_sample", "iou") in names
    assert not any(r.metric.endswith(("parse_fail", "unscored", "_std")) for r in found)  # counts and spreads


def test_each_side_recomputed_from_items_equals_the_reported_metric(rows):
    a, b, found = rows
    checked = 0
    for r in found:
        for run, value in ((a, r.a), (b, r.b)):
            reported = run.tasks[r.task].metrics.get(r.metric)
            if value is not None and isinstance(reported, (int, float)):
                assert value == pytest.approx(reported, abs=1e-6), (r.task, r.metric)
                checked += 1
    assert checked > 50


def test_clear_wins_are_significant_and_the_difference_is_b_minus_a(rows):
    _, _, found = rows
    by = {(r.task, r.metric): r for r in found}
    step = by["errorradar_step_sample", "step_acc"]
    assert step.diff == pytest.approx(step.b - step.a) and step.diff > 0
    assert step.ci_low > 0 and step.p_value < 0.05 and step.n == 10
    assert step.method == "paired mean, clustered"  # a mean of per-item scores, records as clusters
    csr = by["causalstep_sample", "csr"]
    assert csr.method == "paired bootstrap, clustered" and csr.diff == pytest.approx(100.0)


def test_a_run_against_itself_differs_by_nothing(rows):
    a, _, _ = rows
    same = compare.compare_runs(a, a, iterations=100)
    assert same and all(r.diff in (0.0, None) for r in same)
    assert all(r.p_value in (1.0, None) for r in same)


def test_json_output_and_exit_status(capsys):
    assert compare.main([str(RUNS / "random"), str(RUNS / "oracle"), "--json", "--iterations", "50"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data and all(list(row) == KEYS for row in data)


def test_runs_over_different_data_are_refused(tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(RUNS / "oracle", other)
    (samples,) = other.glob("*_samples_errorradar_step_sample.jsonl")
    lines = samples.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["target"] = "Error Step: Step 9"
    samples.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    assert compare.main([str(RUNS / "random"), str(other), "--iterations", "20", "--json"]) == 0  # the others still compare
    out = capsys.readouterr()
    assert "errorradar_step_sample: doc_id 0: the runs' targets differ" in out.err
    tasks = {row["task"] for row in json.loads(out.out)}
    assert "errorradar_step_sample" not in tasks and "errorradar_cate_sample" in tasks


def test_nothing_to_compare_exits_1(tmp_path, capsys):
    bare = tmp_path / "bare"
    bare.mkdir()
    for path in (RUNS / "oracle").glob("*_results.json"):
        shutil.copy(path, bare / path.name)  # results without logged samples
    assert compare.main([str(bare), str(bare)]) == 1
    assert "--log_samples" in capsys.readouterr().err


def test_the_report_shows_error_bars_and_marks_paired_differences(rows, monkeypatch):
    from lmms_eval_plugins import report

    monkeypatch.setenv("LMMS_EVAL_PLUGINS_BOOTSTRAP_ITERS", "100")
    a, b, _ = rows
    built = report.build_report([a, b], plots=False)
    tables = {block.id: block for sec in built.sections for block in sec.blocks if isinstance(block, report.Table)}
    for name in ("errorradar", "mmerror", "crossvid", "causalstep", "virectify"):
        assert f"{name}-errorbars" in tables and f"{name}-paired" in tables, name
    (step,) = [cells for label, cells in tables["errorradar-paired"].rows if cells[:2] == ["errorradar_step_sample", "step_acc"]]
    assert step[2].endswith(" *") and step[5] == "10"
    # the stored runs predate error bars: the value is shown, the interval is not invented
    bars = [cells for label, cells in tables["errorradar-errorbars"].rows if cells[1] == "STEP acc"]
    assert bars and all(cells[3] == "—" and cells[4] == "—" for cells in bars)


def _edit_results(folder: Path, edit) -> None:
    (path,) = folder.glob("*_results.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_bad_input_gets_a_note_per_task_and_the_other_tasks_are_still_compared(tmp_path):
    other = tmp_path / "other"
    shutil.copytree(RUNS / "oracle", other)

    def edit(data):
        data["versions"]["mmerror_etc_sample"] = 99  # a different task version
        del data["results"]["virectify_sample"]["iou,none"]  # a metric missing in one run
        del data["results"]["crossvid_pi_sample"]  # a task only in one run

    _edit_results(other, edit)
    (samples,) = other.glob("*_samples_causalstep_sample.jsonl")
    rows = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
    samples.write_text("".join(json.dumps({**r, "doc_id": r["doc_id"] + 10_000}) + "\n" for r in rows), encoding="utf-8")
    (a,), (b,) = discover_runs(RUNS / "random"), discover_runs(other)
    notes: list[str] = []
    found = compare.compare_runs(a, b, iterations=50, notes=notes)
    compared = {(r.task, r.metric) for r in found}
    assert "mmerror_etc_sample: task versions differ (0.1 vs 99); not compared" in notes or any(
        n.startswith("mmerror_etc_sample: task versions differ") for n in notes)
    assert "virectify_sample iou: missing in run B; not compared" in notes
    assert "crossvid_pi_sample: only in A; not compared" in notes
    assert "causalstep_sample: the runs share no item (doc_id); not compared" in notes
    assert not any(t in ("mmerror_etc_sample", "causalstep_sample", "crossvid_pi_sample") for t, _ in compared)
    assert ("virectify_sample", "acc_i") in compared and ("errorradar_step_sample", "step_acc") in compared
