"""``lmms-eval-plugins doctor``: each check's verdict on hand-made facts, then the command itself (two runs
of ~10 s: the real venv, and a venv where filelock 4.3.1 shadows the real one)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from lmms_eval_plugins import doctor
from lmms_eval_plugins.doctor import Check, DataFacts, JudgeFacts
from lmms_eval_plugins.tested_versions import KNOWN_BAD, KnownBad

FILELOCK_BAD = (KnownBad("filelock", ">=4.3", "imports filelock._api", "pip install 'filelock<4.3'"),)
JUDGE_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_URL", "OPENAI_API_BASE")


def shadow_filelock(folder: Path, version: str = "4.3.1") -> Path:
    """``folder`` holding a copy of the installed filelock posing as ``version``: its ``_api`` module is
    renamed (as filelock 4.3 removed it; everything else still works) and its dist-info says ``version``.
    Put ``folder`` first on PYTHONPATH."""
    import filelock

    target = folder / "filelock"
    shutil.copytree(Path(filelock.__file__).parent, target, ignore=shutil.ignore_patterns("__pycache__"))
    if (target / "_api.py").exists():
        (target / "_api.py").rename(target / "_core.py")
    for path in target.rglob("*.py"):
        path.write_text(re.sub(r"\b_api\b", "_core", path.read_text(encoding="utf-8")), encoding="utf-8")
    info = folder / f"filelock-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: filelock\nVersion: {version}\n", encoding="utf-8")
    return folder


# ---------------------------------------------------------------------------------- verdicts


def test_python_inside_the_range_is_ok_outside_fails():
    assert doctor.python_check("3.11.7", ">=3.10").status == "ok"
    old = doctor.python_check("3.9.18", ">=3.10")
    assert old.status == "FAIL" and ">=3.10" in old.detail and ">=3.10" in old.fix


def test_lmms_eval_outside_the_range_fails_and_an_untested_one_inside_is_a_note():
    assert doctor.lmms_eval_check("0.7.3", ">=0.7.3,<0.8", "0.7.3").status == "ok"
    assert doctor.lmms_eval_check("0.7.4", ">=0.7.3,<0.8", "0.7.3").status == "note"
    newer = doctor.lmms_eval_check("0.8.0", ">=0.7.3,<0.8", "0.7.3")
    assert newer.status == "FAIL" and newer.fix == "pip install 'lmms-eval==0.7.3'"
    missing = doctor.lmms_eval_check(None, ">=0.7.3,<0.8", "0.7.3")
    assert missing.status == "FAIL" and "not installed" in missing.detail


def test_a_known_bad_version_fails_with_its_fix_and_another_untested_one_is_a_note():
    bad = doctor.package_check("filelock", "4.3.1", "4.2.12", FILELOCK_BAD)
    assert bad.status == "FAIL" and "4.3.1" in bad.detail and "filelock._api" in bad.detail
    assert bad.fix == "pip install 'filelock<4.3'"
    assert doctor.package_check("filelock", "5.0", "4.2.12", FILELOCK_BAD).status == "FAIL"
    assert doctor.package_check("filelock", "4.2.12", "4.2.12", FILELOCK_BAD) == Check(
        "filelock", "ok", "4.2.12 (tested)"
    )
    older = doctor.package_check("filelock", "4.2.10", "4.2.12", FILELOCK_BAD)
    assert older.status == "note" and "untested" in older.detail and "4.2.12" in older.detail
    assert doctor.package_check("torch", "2.14.1", None, FILELOCK_BAD).status == "ok"  # nothing recorded to compare
    gone = doctor.package_check("decord", None, "0.6.0", FILELOCK_BAD)
    assert gone.status == "FAIL" and gone.fix == "pip install 'decord==0.6.0'"


def test_the_shipped_known_bad_list_fails_filelock_4_3():
    row = doctor.package_check("filelock", "4.3.1", None, KNOWN_BAD)
    assert row.status == "FAIL" and "filelock<4.3" in row.fix


def test_compat_rows_one_ok_row_or_one_fail_per_missing_entry():
    def entry(name: str, ok: bool, problem: str | None = None) -> SimpleNamespace:
        return SimpleNamespace(
            entry=SimpleNamespace(name=name, target=f"lmms_eval.x.{name}", without=f"{name} off"),
            ok=ok,
            problem=problem,
        )

    assert doctor.compat_checks([entry("a", True), entry("b", True)]) == [
        Check("compatibility", "ok", "all 2 lmms-eval entries present")
    ]
    rows = doctor.compat_checks([entry("a", True), entry("b", False, "attribute missing")])
    assert [(r.name, r.status) for r in rows] == [("compat b", "FAIL")]
    assert (
        "lmms_eval.x.b: attribute missing" in rows[0].detail and "without it: b off" in rows[0].detail and rows[0].fix
    )
    broken = doctor.compat_checks(None, "ModuleNotFoundError: No module named 'filelock._api'")
    assert broken[0].status == "FAIL" and "filelock._api" in broken[0].detail


def test_decoder_verdicts():
    assert doctor.decoder_check("v.mp4", 4, None).status == "ok"
    assert doctor.decoder_check("v.mp4", 0, None).status == "FAIL"
    failed = doctor.decoder_check("v.mp4", 0, "ImportError: no decord")
    assert failed.status == "FAIL" and "decord" in failed.fix and "no decord" in failed.detail
    assert doctor.decoder_check(None, 0, None).status == "note"  # no bundled video: nothing to try


def test_cache_folder_not_writable_fails_and_switched_off_is_a_note():
    assert doctor.cache_check("/c/frames", None).status == "ok"
    bad = doctor.cache_check("/c/frames", "PermissionError: denied")
    assert bad.status == "FAIL" and "/c/frames" in bad.fix and "LMMS_EVAL_PLUGINS_FRAME_CACHE" in bad.fix
    assert doctor.cache_check(None, None).status == "note"


def test_cuda_is_never_a_failure():
    assert doctor.cuda_check(True, "1 GPU(s)").status == "ok"
    assert doctor.cuda_check(False, "no GPU visible").status == "note"
    assert doctor.cuda_check(None, "torch does not import").status == "note"


def test_data_found_locally_or_in_the_hub_cache_is_ok_and_missing_is_sample_only_unless_needed():
    local = doctor.data_check(DataFacts("bench", "/data", True, None, None))
    assert local.status == "ok" and local.detail == f"local folder {Path('/data') / 'bench'}"
    hub = doctor.data_check(DataFacts("bench", None, False, "org/bench", "/hf/snap"))
    assert hub == Check("bench data", "ok", "Hugging Face cache: /hf/snap")
    not_cached = doctor.data_check(DataFacts("bench", None, False, "org/bench", None))
    assert not_cached.status == "note" and "sample tasks only" in not_cached.detail and "org/bench" in not_cached.detail
    private = doctor.data_check(DataFacts("bench", None, False, None, None))
    assert private.status == "note" and "LMMS_EVAL_PLUGINS_DATA_ROOT" in private.fix
    # the data root wins over the hub, as resolve_source decides: a root without the folder is missing
    no_folder = doctor.data_check(DataFacts("bench", "/data", False, "org/bench", "/hf/snap"))
    assert no_folder.status == "note" and "holds no 'bench' folder" in no_folder.detail
    needed = doctor.data_check(DataFacts("bench", None, False, "org/bench", None), ["bench_a", "bench_b"])
    assert needed.status == "FAIL" and needed.detail.endswith("needed by bench_a, bench_b") and needed.fix


def test_judge_verdicts_never_need_a_judge_unless_tasks_do():
    assert doctor.judge_check(JudgeFacts(True, None)).status == "ok"
    configured = doctor.judge_check(JudgeFacts(False, "http://127.0.0.1:9", "from OPENAI_BASE_URL", "m"))
    assert configured.status == "ok" and "http://127.0.0.1:9" in configured.detail and "model m" in configured.detail
    none = doctor.judge_check(JudgeFacts(False, None), judged=["b1", "b2"])
    assert none.status == "note" and "b1, b2" in none.detail and "OPENAI_BASE_URL" in none.fix
    # issue 37 case 15: a requested judged task without a judge runs with its judged metrics null: a note, as
    # the README says, not a FAIL beside a summary saying the task can run
    needed = doctor.judge_check(JudgeFacts(False, None), ["b1_x"])
    assert needed.status == "note" and "b1_x run, with their judged metrics null" in needed.detail
    assert "cannot run" not in none.detail + needed.detail
    refused = doctor.judge_check(JudgeFacts(False, None, error="OPENAI_API_BASE is not read"), ["b1_x"])
    assert refused.status == "FAIL" and "OPENAI_API_BASE is not read" in refused.detail


def test_judge_probe_verdicts():
    assert doctor.judge_probe_check("http://h", "m", 0.2, None).status == "ok"
    down = doctor.judge_probe_check("http://h", "m", 0.1, "APIConnectionError: Connection error.")
    assert down.status == "FAIL" and "APIConnectionError" in down.detail and down.fix
    assert doctor.judge_probe_check(None, "", 0.0, None).status == "FAIL"


def test_exit_status_and_table():
    notes = [Check("a", "ok", "fine"), Check("b", "note", "untested", "ignored fix")]
    assert doctor.exit_status(notes) == 0
    rows = [*notes, Check("long name", "FAIL", "broken", "do this")]
    assert doctor.exit_status(rows) == 1
    assert doctor.render(rows) == [
        "check      status  detail",
        "---------  ------  ------",
        "a          ok      fine",
        "b          note    untested",
        "long name  FAIL    broken",
        "                   fix: do this",
    ]
    assert (
        doctor.can_run([Check("x data", "ok", ""), Check("y data", "note", ""), Check("judge", "note", "")])
        == "can run today: full data: x; sample tasks only: y; judged metrics: null (no working judge)"
    )
    assert doctor.can_run([Check("judge", "ok", "")]).endswith("judged metrics: yes")
    assert doctor.can_run([Check("judge", "ok", ""), Check("judge answers", "FAIL", "")]).endswith(
        "judged metrics: null (no working judge)"
    )


def test_fixes_for_a_failed_run_come_from_installed_versions_and_import_errors_in_the_log():
    log = "Traceback ...\nModuleNotFoundError: No module named 'filelock._api'\n"
    named = doctor.fixes_for_log(log, {"filelock": "4.2.12"}, FILELOCK_BAD)
    assert len(named) == 1 and "pip install 'filelock<4.3'" in named[0]
    assert doctor.fixes_for_log("", {"filelock": "4.3.1"}, FILELOCK_BAD)[0].startswith("filelock 4.3.1:")
    assert (
        doctor.fixes_for_log(
            "ImportError: cannot import name 'x' from 'filelocker'", {"filelock": "4.2.12"}, FILELOCK_BAD
        )
        == []
    )
    assert doctor.fixes_for_log("all went well", {"filelock": None}, FILELOCK_BAD) == []


def test_requested_tasks_need_full_data_unless_sample_and_a_judge_when_judged():
    rows, data, judge = doctor.requested_needs(
        ["errorradar_step", "errorradar_sample", "crossvid_ccqa_sample", "crossvid_sample", "nosuch_task"]
    )
    assert [(r.name, r.status) for r in rows] == [("task nosuch_task", "FAIL")]
    assert data == {"errorradar": ["errorradar_step"]}
    assert judge == ["crossvid_ccqa_sample", "crossvid_sample"]  # the group holds the judged CCQA task


# ---------------------------------------------------------------------------------- facts


def test_data_is_found_in_the_data_root_or_in_the_hub_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path / "root"))
    (tmp_path / "root" / "causalstep").mkdir(parents=True)
    found, missing = doctor.gather_data(["causalstep", "virectify"])
    assert found == DataFacts("causalstep", str(tmp_path / "root"), True, None, None)
    assert not missing.local_found
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_DATA_ROOT")
    repo = tmp_path / "hub" / "datasets--ErrorRadar--ErrorRadar"  # huggingface_hub's cache layout
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123", encoding="utf-8")
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "data.csv").write_text("x\n", encoding="utf-8")
    (cached,) = doctor.gather_data(["errorradar"], hub_cache=str(tmp_path / "hub"))
    assert cached.hub_repo == "ErrorRadar/ErrorRadar" and Path(cached.hub_cached) == repo / "snapshots" / "abc123"
    (empty,) = doctor.gather_data(["errorradar"], hub_cache=str(tmp_path / "empty"))
    assert empty.hub_cached is None


def test_the_decoder_check_really_decodes_with_the_frame_cache_bypassed(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", str(tmp_path / "frames"))
    row = doctor.gather_decoder()
    assert row.status == "ok" and row.detail.startswith("decord decoded 4 frames of ") and row.detail.endswith(".mp4")
    assert not (tmp_path / "frames").exists()  # nothing went through the cache
    assert os.environ["LMMS_EVAL_PLUGINS_FRAME_CACHE"] == str(tmp_path / "frames")  # setting restored


def test_an_unwritable_cache_folder_fails(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", str(blocker / "frames"))  # a folder under a file
    row = doctor.gather_cache()
    assert row.status == "FAIL" and str(blocker / "frames") in row.detail
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", str(tmp_path / "frames"))
    assert doctor.gather_cache().status == "ok" and list((tmp_path / "frames").iterdir()) == []  # probe removed


@pytest.fixture
def no_judge_env(monkeypatch):
    for name in list(os.environ):
        if name in JUDGE_VARS or name.startswith("LMMS_EVAL_PLUGINS_JUDGE"):
            monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_tasks_that_need_missing_data_or_a_judge_make_main_fail(tmp_path, no_judge_env, capsys):
    monkeypatch = no_judge_env
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # main sets it; monkeypatch restores it
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path))  # holds no benchmark folder
    for slow in ("gather_decoder", "gather_cache", "gather_cuda"):  # checked above; keep this test fast
        monkeypatch.setattr(doctor, slow, lambda name=slow: Check(name, "ok", "stub"))
    monkeypatch.setattr(doctor, "gather_compat", lambda: [Check("compatibility", "ok", "stub")])
    assert doctor.main(["--tasks", "errorradar_sample", "--json"]) == 0  # sample tasks need nothing more
    capsys.readouterr()
    assert doctor.main(["--tasks", "errorradar_step,crossvid_ccqa_sample", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    rows = {r["name"]: r for r in report["checks"]}
    assert report["exit_status"] == 1
    assert (
        rows["errorradar data"]["status"] == "FAIL" and "needed by errorradar_step" in rows["errorradar data"]["detail"]
    )
    # a judged task without a judge runs with its judged metrics null: a note naming it, not a stop (issue 37)
    assert (
        rows["judge"]["status"] == "note"
        and "crossvid_ccqa_sample run, with their judged metrics null" in rows["judge"]["detail"]
    )
    assert rows["mmerror data"]["status"] == "note"
    capsys.readouterr()
    assert doctor.main(["--tasks", "crossvid_ccqa_sample", "--json"]) == 0  # nothing else is missing


def test_the_judge_probe_gets_an_answer_from_a_live_judge_and_the_cause_from_a_closed_port(no_judge_env):
    sys.path.insert(0, str(Path(__file__).parent))
    from judge_server import TEST_API_KEY, JudgeServer

    monkeypatch = no_judge_env
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    with JudgeServer(lifetime=30) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        row = doctor.probe_judge()
        assert len(server.requests) == 1 and server.requests[0]["max_tokens"] == 1
        assert row.status == "ok" and row.detail.startswith(f"http://127.0.0.1:{server.port} answered in ")
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    started = time.monotonic()
    row = doctor.probe_judge(timeout=3.0)
    assert time.monotonic() - started < 3.0
    assert row.status == "FAIL" and f"127.0.0.1:{port}" in row.detail and "Connect" in row.detail, row
    assert TEST_API_KEY not in json.dumps([row.detail, row.fix])


# ---------------------------------------------------------------------------------- the command


def _doctor_env(tmp_path: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in JUDGE_VARS and not k.startswith("LMMS_EVAL_PLUGINS_JUDGE") and k != "LMMS_EVAL_PLUGINS_DATA_ROOT"
    }
    return {**env, "LMMS_EVAL_PLUGINS_CACHE": str(tmp_path / "cache"), "HF_HUB_CACHE": str(tmp_path / "hf")}


def test_doctor_passes_in_this_venv(tmp_path):
    # its time is measured by bench/bench_doctor.py with the machine's load, not asserted here (issue 37)
    done = subprocess.run(
        [sys.executable, "-m", "lmms_eval_plugins.cli", "doctor"],
        capture_output=True,
        text=True,
        env=_doctor_env(tmp_path),
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    names = {line.split("  ")[0].strip() for line in done.stdout.splitlines()}
    assert {
        "python",
        "lmms-eval",
        "filelock",
        "transformers",
        "torch",
        "decord",
        "openai",
        "compatibility",
        "video decoder",
        "frame cache",
        "cuda",
        "errorradar data",
        "virectify data",
        "judge",
    } <= names
    assert "can run today: " in done.stdout and "doctor: the install works" in done.stdout


def test_doctor_fails_on_filelock_4_3_and_names_the_fix(tmp_path):
    shadow = shadow_filelock(tmp_path / "shadow")
    env = {
        **_doctor_env(tmp_path),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(shadow), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-m", "lmms_eval_plugins.cli", "doctor"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("filelock "))
    assert "FAIL" in lines[row] and "4.3.1" in lines[row] and "filelock._api" in lines[row]
    assert "fix: pip install 'filelock<4.3'" in lines[row + 1]
    assert "doctor: FAILED: filelock" in done.stdout
