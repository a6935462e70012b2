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


def test_the_block_has_at_most_ten_lines_and_names_record_file_and_fix():
    error = MediaError("video not found " + "x" * 300, record="CrossVid BU id 3", path="/data/crossvid/videos/a.mp4",
                       fix="put the file there " + "and more words " * 80)
    block = run_status.stopped_block(error, "/runs/out/")
    lines = block.splitlines()
    assert len(lines) <= run_status.MAX_BLOCK_LINES and lines[0] == lines[-1] == "=" * run_status.WIDTH
    assert all(len(line) <= run_status.WIDTH for line in lines)
    assert "the run stopped: MediaError" in lines[1]
    assert "record:  CrossVid BU id 3" in block and "file:    /data/crossvid/videos/a.mp4" in block
    assert "fix:     put the file there" in block and "lmms-eval-plugins check-run /runs/out" in block
    assert lines[-2] == "  (check the install: lmms-eval-plugins doctor)"
    assert "RetryError" not in block


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
    assert run_status.check_run(out, ["a", "c"]) == (1, [run_status.check_run(out, ["a", "c"])[1][0], "  no results for: c"])
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
