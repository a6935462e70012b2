"""How a run ended: the short error block and ``check-run`` (lmms_eval_plugins/run_status.py)."""

from __future__ import annotations

import json
import os
import time

import pytest
import tenacity

from lmms_eval_plugins import run_status
from lmms_eval_plugins.errors import DataError, MediaError


def _retry_error(error: BaseException) -> BaseException:
    @tenacity.retry(stop=tenacity.stop_after_attempt(2), wait=tenacity.wait_none())
    def load():
        raise error

    try:
        load()
    except tenacity.RetryError as exc:  # what lmms-eval's task download raises around our error
        return exc
    raise AssertionError("no RetryError")


def test_the_plugin_error_is_found_inside_retry_errors_and_chains():
    error = DataError("bad record", record="q1", path="/d/x.csv", fix="fix it")
    assert run_status.plugin_error_in(_retry_error(error)) is error
    try:
        try:
            raise error
        except DataError as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as outer:
        assert run_status.plugin_error_in(outer) is error
    assert run_status.plugin_error_in(_retry_error(ValueError("not ours"))) is None
    assert run_status.plugin_error_in(None) is None


def test_a_cycle_of_contexts_ends():
    a, b = ValueError("a"), ValueError("b")
    a.__context__, b.__context__ = b, a
    assert run_status.plugin_error_in(a) is None


def _fields(block: str) -> list[str]:
    """The words of the block's fields (after the label column), in order."""
    return [w for line in block.splitlines()[2:-3] for w in line[11:].split()]


def test_the_block_names_record_file_and_fix_and_cuts_no_message():
    fix = "put the file there " + " ".join(f"word{i}" for i in range(200))
    error = MediaError(
        "video not found " + "x" * 300, record="CrossVid BU id 3", path="/data/crossvid/videos/a.mp4", fix=fix
    )
    block = run_status.stopped_block(error, "/runs/out/")
    lines = block.splitlines()
    assert lines[0] == lines[-1] == "=" * run_status.WIDTH and "..." not in block
    assert all(len(line) <= run_status.WIDTH for line in lines)
    # every character of every field, in order (the 300-character word is broken across lines, not cut)
    assert "".join(_fields(block)) == "".join(
        f"video not found {'x' * 300} CrossVid BU id 3 /data/crossvid/videos/a.mp4 {fix}".split()
    )
    assert "word199" in lines[-4]
    short = run_status.stopped_block(MediaError("no video", path="/v.mp4", fix="put it there"), None).splitlines()
    assert len(short) == 8  # a short message: a short block
    assert "the run stopped: MediaError" in lines[1]
    assert "record:  CrossVid BU id 3" in block and "file:    /data/crossvid/videos/a.mp4" in block
    assert "fix:     put the file there" in block and "lmms-eval-plugins check-run /runs/out" in block
    assert lines[-2] == "  (check the install: lmms-eval-plugins doctor)"
    assert "RetryError" not in block
    with_tasks = run_status.stopped_block(MediaError("no video", fix="put it there"), None, ["crossvid_bu", "mmerror"])
    assert (
        with_tasks.splitlines()[-2]
        == "  (check everything these tasks need: lmms-eval-plugins doctor --tasks crossvid_bu,mmerror)"
    )


def test_a_blocked_run_lists_every_blocker_with_its_fix_then_the_warnings():
    error = run_status.RunBlockedError(
        [("a data", "not public", "set ROOT"), ("b data", "offline " + "y" * 150, None)],
        [("judge", "none configured", "set OPENAI_BASE_URL")],
    )
    lines = run_status.stopped_block(error, "/o", ["a", "b"]).splitlines()
    assert all(len(line) <= run_status.WIDTH for line in lines) and "2 things must be fixed" in lines[2]
    assert [line.split(":")[0].strip() for line in lines[3:-3] if line[2] not in " ("] == [
        "blocker",
        "fix",
        "blocker",
        "warning",
        "fix",
    ]
    assert "set ROOT" in error.fix and "y" * 80 in "".join(lines).replace(" ", "")


def _results(folder, tasks, unscored=0, when=None):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model" / "20261124_results.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"results": {t: {"acc,none": 50.0, "unscored,none": unscored} for t in tasks}}))
    if when is not None:
        os.utime(path, (when, when))
    return path


def test_check_run_tells_success_failure_and_unscored_apart(tmp_path, capsys):
    out = tmp_path / "out"
    assert run_status.check_run(out)[0] == 1  # nothing there
    out.mkdir()
    status, lines = run_status.check_run(out)
    assert status == 1 and "no *_results.json" in lines[0]
    _results(out, ["a", "b"], when=time.time() - 60)
    assert run_status.check_run(out)[0] == 0
    assert run_status.check_run(out, ["a", "c"]) == (
        1,
        [run_status.check_run(out, ["a", "c"])[1][0], "  no results for: c"],
    )
    # a later failed run in the same folder wins over the older results
    run_status.record_failure(str(out), DataError("holds no 'x' folder", path="/d/x", fix="set the root"))
    status, lines = run_status.check_run(out)
    assert status == 1 and "holds no 'x' folder" in lines[0] and "  fix: set the root" in lines
    assert run_status.main([str(out)]) == 1 and "FAILED" in capsys.readouterr().out
    # ... and a later successful run clears it
    run_status.clear_failure(str(out))
    _results(out, ["a"], unscored=2)
    status, lines = run_status.check_run(out)
    assert status == 1 and "a: 2 unscored sample(s)" in lines[1] and "lmms-eval-plugins score" in lines[1]


def test_unreadable_results_are_a_failure(tmp_path):
    path = _results(tmp_path, ["a"])
    path.write_text("{not json")
    status, lines = run_status.check_run(tmp_path)
    assert status == 1 and "not readable JSON" in lines[0]


@pytest.mark.parametrize("argv", [["--help"]])
def test_check_run_is_a_command(argv, capsys):
    from lmms_eval_plugins.cli import main

    with pytest.raises(SystemExit) as info:
        main(["check-run", *argv])
    assert info.value.code == 0 and "OUTPUT_PATH" in capsys.readouterr().out.upper()


def test_a_long_judge_message_fits_in_full():
    """The missing-judge message (the longest we raise) was cut at "Either set OPENAI_API_KEY (OpenAI)..."."""
    from lmms_eval_plugins.judges.endpoint import missing_endpoint_message

    message = missing_endpoint_message("semantic_match")
    block = run_status.stopped_block(DataError(message, fix=message), "out")
    assert " ".join(_fields(block)) == f"{message} {message}" and "..." not in block


def test_a_misspelled_task_is_named_with_the_closest_names(tmp_path):
    known = ["virectify_sample", "virectify", "errorradar_sample", "crossvid_bu_sample"]
    assert run_status.closest_tasks("virectfy_sample", known) == ["virectify_sample"]
    assert run_status.closest_tasks("mmmu_val", known) == []
    error = run_status.TaskNotFound(["virectfy_sample", "mmmu_vall"], known)
    assert error.problem == "no task named 'virectfy_sample', 'mmmu_vall': lmms-eval ran nothing"
    assert error.fix == "'virectfy_sample': did you mean virectify_sample?"
    assert "lmms-eval --tasks list" in run_status.TaskNotFound(["zzz"], known).fix
    # check-run, when lmms-eval wrote nothing: the task name, not the output path, is blamed
    status, lines = run_status.check_run(tmp_path / "never", ["virectfy_sample"])
    assert status == 1 and lines == [
        f"check-run: FAILED: no task named 'virectfy_sample': lmms-eval ran nothing, so {tmp_path / 'never'} was never written",
        "  fix: 'virectfy_sample': did you mean virectify_sample or virectify_reflect_sample?",
    ]
    status, lines = run_status.check_run(tmp_path / "never", ["virectify_sample"])
    assert status == 1 and "was it the --output_path?" in lines[0]  # a real task: the path is the suspect
    # the record the task-names hook writes is what check-run reports
    run_status.record_failure(str(tmp_path / "out"), error)
    status, lines = run_status.check_run(tmp_path / "out")
    assert (
        status == 1 and "no task named 'virectfy_sample'" in lines[0] and "did you mean virectify_sample?" in lines[1]
    )


def test_the_task_names_hook_adds_did_you_mean_and_records_the_failure(tmp_path, monkeypatch):
    """compat entry task-names: lmms-eval's own matching is unchanged; a missing name gets the hint (printed
    at exit, after lmms-eval's "Tasks not found") and the record check-run reads."""
    import atexit
    import sys
    from types import SimpleNamespace

    from lmms_eval.tasks import TaskManager

    from lmms_eval_plugins import compat

    assert compat.install("task-names")
    printed: list[str] = []
    monkeypatch.setattr(atexit, "register", lambda fn, *args: printed.append(args[0]) if args else None)
    monkeypatch.setattr(
        sys, "argv", ["lmms-eval", "--tasks", "virectfy_sample,mmmu_val", "--output_path", str(tmp_path / "out")]
    )
    manager = SimpleNamespace(all_tasks=["virectify_sample", "mmmu_val", "errorradar_sample"])
    assert TaskManager.match_tasks(manager, ["virectfy_sample", "mmmu_val", "mmmu_*"]) == ["mmmu_val"]
    assert printed == ["lmms-eval-plugins: did you mean virectify_sample (not virectfy_sample)?"]
    status, lines = run_status.check_run(tmp_path / "out")
    assert (
        status == 1 and "no task named 'virectfy_sample'" in lines[0] and "did you mean virectify_sample?" in lines[1]
    )
    printed.clear()
    assert TaskManager.match_tasks(manager, ["virectify_sample"]) == ["virectify_sample"] and printed == []
