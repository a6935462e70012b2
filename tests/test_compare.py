"""``lmms-eval-plugins compare`` on stored runs (the report's fixture runs: random and oracle replies
to every sample task)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lmms_eval_plugins import compare, stats
from lmms_eval_plugins.benchmark import benchmark_of_task
from lmms_eval_plugins.runs import discover_runs

RUNS = Path(__file__).parent / "data" / "report_runs"
KEYS = ["task", "metric", "a", "b", "diff", "ci_low", "ci_high", "p_value", "n", "method"]


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
    assert step.method == "paired cluster bootstrap by question_id"  # records as clusters
    # before: the normal interval [40.06, 99.94]; the bootstrap's resampled means of 0/1 differences
    # stay in [-100, 100], here all 7 records B got right and A did not resampled: 100
    assert step.ci_high == 100.0
    csr = by["causalstep_sample", "csr"]
    assert csr.method == "paired cluster bootstrap by video_id" and csr.diff == pytest.approx(100.0)
    assert csr.ci_low is None and csr.units == 4  # 4 videos: too few for an interval (a note says so)


def test_a_run_against_itself_differs_by_nothing(rows):
    a, _, _ = rows
    same = compare.compare_runs(a, a, iterations=100)
    assert same and all(r.diff == 0.0 for r in same)
    assert all(r.p_value in (1.0, None) and not r.significant for r in same)
    assert all((r.ci_low, r.ci_high) == (0.0, 0.0) for r in same if r.p_value is not None)


def test_the_oracle_against_random_f1_rows_no_longer_disagree(rows):
    _, _, found = rows
    vis = {(r.task, r.metric): r for r in found}["errorradar_cate_sample", "cate_f1_vis"]
    # before issue 25: CI [0, 100] (not starred) with a normal-approximation p of 0.001. Since issue 37 a
    # resample without the class leaves it undefined (not a 0 on both sides), and only the records that hold
    # or predict VIS carry its F1: fewer than MIN_UNITS of them, so no interval, no p, no star.
    assert vis.diff == 100.0 and vis.ci_low is None and vis.p_value is None and not vis.significant
    assert vis.units < stats.MIN_UNITS and "unit" in vis.note


def test_json_output_and_exit_status(capsys):
    assert compare.main([str(RUNS / "random"), str(RUNS / "oracle"), "--json", "--iterations", "50"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data and all(list(row) == KEYS for row in data)
    assert {row["method"] for row in data} == {
        "paired bootstrap",
        "paired cluster bootstrap by question_id",
        "paired cluster bootstrap by video_id",
    }


def _in_range(task: str, metric: str, low: float, high: float) -> bool:
    unit = benchmark_of_task(task).task_metrics(task)[metric].unit
    # a difference of two values in [0, span]; a "number" (CausalStep's chain lengths, scores) has no bound
    span = {"%": 100.0, "fraction": 1.0, "number": float("inf")}[unit]
    return -span <= low <= high <= span


@pytest.mark.cli
def test_compare_through_the_cli_every_row_in_range_one_method_star_iff_p(tmp_path):
    """The issue's check, on every *_sample task: oracle against random through the installed command."""
    cli = Path(sys.executable).parent / "lmms-eval-plugins"
    args = [str(cli), "compare", str(RUNS / "oracle"), str(RUNS / "random"), "--iterations", "200"]
    done = subprocess.run([*args, "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    data = json.loads(done.stdout)
    assert {row["task"] for row in data} == {
        p.name.split("_samples_")[1][:-6] for p in RUNS.glob("oracle/*_samples_*.jsonl")
    }
    with_ci = [row for row in data if row["ci_low"] is not None]
    # since issue 37 a per-class row counts only the records holding or predicting its class, and the sample's
    # rarest classes have fewer than MIN_UNITS of them: those rows have no interval (a note says why)
    assert len(with_ci) >= 15
    for row in data:
        assert row["method"].startswith(("paired bootstrap", "paired cluster bootstrap")), row
        if row["ci_low"] is None:  # no interval: no p either, and a note names the task and why
            assert row["p_value"] is None and f"note: {row['task']} " in done.stderr, row
            continue
        assert _in_range(row["task"], row["metric"], row["ci_low"], row["ci_high"]), row
        assert (row["ci_low"] > 0 or row["ci_high"] < 0) == (row["p_value"] < 0.05), row
    # the table: the star where and only where p < 0.05, and the method named on every row
    table = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert table.returncode == 0, table.stderr[-2000:]
    lines = {tuple(line.split()[:2]): line for line in table.stdout.splitlines()}
    for row in data:
        line = lines[row["task"], row["metric"]]
        assert line.endswith(row["method"]) and (" * " in line) == (
            row["p_value"] is not None and row["p_value"] < 0.05
        ), line


def test_one_sided_and_degenerate_comparisons_are_notes_not_blanks(tmp_path, capsys):
    (a,) = discover_runs(RUNS / "oracle")
    other = tmp_path / "other"
    shutil.copytree(RUNS / "oracle", other)
    (samples,) = other.glob("*_samples_errorradar_step_sample.jsonl")
    lines = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
    for line in lines:  # every item of one task unscored in B (a failed request)
        line["step_acc"] = {**line["step_acc"], "unscored": "request_failed"}
    samples.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    (b,) = discover_runs(other)
    notes: list[str] = []
    found = compare.compare_runs(a, b, iterations=50, notes=notes)
    assert not any(r.task == "errorradar_step_sample" for r in found)
    assert "errorradar_step_sample step_acc: 10 item(s) unscored in either run left out of the pairing" in notes
    assert "errorradar_step_sample step_acc: no item scored in both runs; not compared" in notes
    # identical runs elsewhere: a difference of 0 with the interval [0, 0] and p = 1, never a blank
    vir = {(r.task, r.metric): r for r in found}["virectify_sample", "acc_i"]
    assert (vir.diff, vir.ci_low, vir.ci_high, vir.p_value) == (0.0, 0.0, 0.0, 1.0)
    # runs with no task in common: each task named, and the reason for exit 1
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    for path in (RUNS / "oracle").glob("*"):
        if "errorradar" in path.name or path.name.endswith("_results.json"):
            shutil.copy(path, lonely / path.name)
    _edit_results(lonely, lambda d: [d["results"].pop(t) for t in list(d["results"]) if not t.startswith("errorradar")])
    strange = tmp_path / "strange"
    shutil.copytree(RUNS / "oracle", strange)
    _edit_results(strange, lambda d: [d["results"].pop(t) for t in list(d["results"]) if t.startswith("errorradar")])
    assert compare.main([str(lonely), str(strange), "--iterations", "20"]) == 1
    err = capsys.readouterr().err
    assert "note: errorradar_step_sample: only in A; not compared" in err
    assert "nothing to compare" in err


def test_runs_over_different_data_are_refused(tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(RUNS / "oracle", other)
    (samples,) = other.glob("*_samples_errorradar_step_sample.jsonl")
    lines = samples.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["target"] = "Error Step: Step 9"
    samples.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    assert (
        compare.main([str(RUNS / "random"), str(other), "--iterations", "20", "--json"]) == 0
    )  # the others still compare
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
    (step,) = [
        cells
        for label, cells in tables["errorradar-paired"].rows
        if cells[:2] == ["errorradar_step_sample", "step_acc"]
    ]
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
    samples.write_text(
        "".join(json.dumps({**r, "doc_id": r["doc_id"] + 10_000}) + "\n" for r in rows), encoding="utf-8"
    )
    (a,), (b,) = discover_runs(RUNS / "random"), discover_runs(other)
    notes: list[str] = []
    found = compare.compare_runs(a, b, iterations=50, notes=notes)
    compared = {(r.task, r.metric) for r in found}
    assert "mmerror_etc_sample: task versions differ (0.1 vs 99); not compared" in notes or any(
        n.startswith("mmerror_etc_sample: task versions differ") for n in notes
    )
    assert "virectify_sample iou: missing in run B; not compared" in notes
    assert "crossvid_pi_sample: only in A; not compared" in notes
    assert "causalstep_sample: the runs share no item (doc_id); not compared" in notes
    assert not any(t in ("mmerror_etc_sample", "causalstep_sample", "crossvid_pi_sample") for t, _ in compared)
    assert ("virectify_sample", "acc_i") in compared and ("errorradar_step_sample", "step_acc") in compared
