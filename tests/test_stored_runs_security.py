"""A stored run is data, never code (issue 27): hostile output folders through the real commands.

Every case runs ``lmms-eval-plugins score/report/compare/check-run`` in a subprocess on a copy of a stored
run (tests/data/report_runs/, no new lmms-eval run) and checks the exit status and the named error.
The signal cases start ``score`` for real and end it while its lmms-eval child is starting, so the
replay never runs to the end; about 40 s in all.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from lmms_eval_plugins.cli_run import OFFLINE_ENV

RUNS = Path(__file__).parent / "data" / "report_runs"
STEM = "20261122_143442"
RESULTS = f"{STEM}_results.json"
STEP = f"{STEM}_samples_errorradar_step_sample.jsonl"


def _copy_run(tmp_path: Path, name: str = "oracle") -> Path:
    folder = tmp_path / name
    shutil.copytree(RUNS / name, folder)
    return folder


def _edit_results(folder: Path, edit) -> Path:
    path = next(folder.glob("*_results.json"))
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return {
        **os.environ,
        **OFFLINE_ENV,
        "TMPDIR": str(tmp),
        "LMMS_EVAL_PLUGINS_CACHE": str(tmp_path / "cache"),
        "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(tmp_path / "cache" / "judge.sqlite3"),
    }


def _cli(tmp_path: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lmms_eval_plugins.cli", *args],
        env=_env(tmp_path),
        cwd=cwd or tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]


# ------------------------------------------------------------------------------ 1: no stored path is code


def test_a_stored_include_path_is_refused_and_its_code_never_runs(tmp_path):
    run = _copy_run(tmp_path)
    evil = run / "evil"  # shipped inside the output folder, named by a relative path
    evil.mkdir()
    marker = tmp_path / "PWNED"
    (evil / "utils.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\ndef hook(doc):\n    return doc\n")
    (evil / "errorradar_step_sample.yaml").write_text(
        "task: errorradar_step_sample\ndataset_path: json\nprocess_docs: !function utils.hook\n"
    )
    results = _edit_results(run, lambda d: d["config"]["resolved_cli_args"].update(include_path="evil"))
    before = _files(run)
    done = _cli(tmp_path, "score", str(run), "--tasks", "errorradar_step_sample", cwd=run)
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"{results}: config.resolved_cli_args.include_path names 'evil'" in done.stderr
    assert "--include_path DIR" in done.stderr  # the way to trust it explicitly
    assert not marker.exists() and _files(run) == before


def test_a_task_name_with_a_slash_is_a_named_error_everywhere(tmp_path):
    run = _copy_run(tmp_path)

    def rename(data):
        data["results"]["a/b"] = data["results"].pop("errorradar_step_sample")

    results = _edit_results(run, rename)
    for args, status in (
        (["score", str(run)], 2),
        (["report", str(run), "-o", str(tmp_path / "r"), "--no-plots"], 2),
        (["compare", str(run), str(RUNS / "random")], 2),
    ):
        done = _cli(tmp_path, *args)
        _no_traceback(done)
        assert done.returncode == status, (args, done.stderr[-2000:])
        assert str(results) in done.stderr and "results: task name 'a/b' is not a task name" in done.stderr, args


# ------------------------------------------------------------------------------ 9: one line per document


def test_a_doc_id_logged_twice_is_refused_by_score_and_compare(tmp_path):
    run = _copy_run(tmp_path)
    samples = run / STEP
    lines = samples.read_text(encoding="utf-8").splitlines(keepends=True)
    samples.write_text("".join(lines + [lines[0]]), encoding="utf-8")  # doc 0 again, last: it would win
    doc = json.loads(lines[0])["doc_id"]
    named = f"{samples}: line {len(lines) + 1}: doc_id {doc} is logged twice (lines 1 and {len(lines) + 1})"
    done = _cli(tmp_path, "score", str(run), "--tasks", "errorradar_step_sample")
    assert done.returncode == 2 and named in done.stderr, done.stderr[-2000:]
    done = _cli(tmp_path, "compare", str(run), str(RUNS / "random"))
    assert done.returncode == 2 and named in done.stderr, done.stderr[-2000:]


# ------------------------------------------------------------------------------ 10: bounded JSON


@pytest.mark.parametrize(
    "hostile, problem",
    [
        ("[" * 100_000 + "]" * 100_000, "nested more than 100 levels deep"),
        ("1" * 5000, "an integer of more than 4300 digits"),
        # issue 36: under Python's digit limit, but float() of it would crash
        ("1" * 400, "an integer of more than 308 digits"),
    ],
)
def test_deep_or_huge_json_in_a_results_file_is_a_named_error(tmp_path, hostile, problem):
    run = _copy_run(tmp_path)
    results = run / RESULTS
    text = results.read_text(encoding="utf-8")
    results.write_text(text.replace('"results": {', f'"hostile": {hostile}, "results": {{', 1), encoding="utf-8")
    for args, status in (
        (["score", str(run)], 2),
        (["report", str(run), "-o", str(tmp_path / "r"), "--no-plots"], 2),
        (["compare", str(run), str(RUNS / "random")], 2),
        (["check-run", str(run)], 1),
    ):
        done = _cli(tmp_path, *args)
        _no_traceback(done)
        assert done.returncode == status and str(results) in done.stderr + done.stdout, (args, done.stderr[-2000:])
        assert problem in done.stderr + done.stdout, args


def test_a_huge_integer_in_a_samples_line_names_the_file_and_line(tmp_path):
    run = _copy_run(tmp_path)
    samples = run / STEP
    lines = samples.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[1] = lines[1].replace('{"doc_id"', '{"n": ' + "9" * 5000 + ', "doc_id"', 1)
    samples.write_text("".join(lines), encoding="utf-8")
    done = _cli(tmp_path, "score", str(run), "--tasks", "errorradar_step_sample")
    _no_traceback(done)
    assert done.returncode == 2 and f"{samples}: line 2: an integer of more than 4300 digits" in done.stderr


# ------------------------------------------------------------------------------ 14, 15: signals and the lock


class _Score:
    """``lmms-eval-plugins score`` in the background, its stderr collected by a thread."""

    def __init__(self, tmp_path: Path, run: Path):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "lmms_eval_plugins.cli", "score", str(run), "--tasks", "errorradar_step_sample"],
            env=_env(tmp_path),
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.err: list[str] = []
        threading.Thread(target=lambda: self.err.extend(self.process.stderr), daemon=True).start()

    def wait_for(self, test, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while not test():
            assert self.process.poll() is None and time.monotonic() < end, "".join(self.err)[-3000:]
            time.sleep(0.1)

    def child(self) -> psutil.Process:
        """The lmms-eval child, once it has exec'd (just after the fork its command line is still empty)."""
        found: list[psutil.Process] = []

        def started() -> bool:
            for child in psutil.Process(self.process.pid).children():
                try:
                    if "lmms_eval" in " ".join(child.cmdline()):
                        found.append(child)
                except psutil.Error:
                    continue
            return bool(found)

        self.wait_for(started)
        return found[0]


def _gone(process: psutil.Process, timeout: float = 20) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def _scratch(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "tmp").glob("lmms-eval-plugins-score-*"))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_lmms_eval_child_and_removes_the_scratch_folder(tmp_path, sig):
    run = _copy_run(tmp_path)
    before = _files(run)
    score = _Score(tmp_path, run)
    child = score.child()
    assert "lmms_eval" in " ".join(child.cmdline()) and _scratch(tmp_path)
    score.process.send_signal(sig)
    assert score.process.wait(30) == 128 + sig
    assert _gone(child), "lmms-eval outlived score"
    assert _scratch(tmp_path) == []
    assert f"stopped by {sig.name}: lmms-eval ended, temporary files removed" in "".join(score.err)
    assert _files(run) == before


def test_sigkill_takes_the_child_along_and_the_next_score_removes_the_scratch_folder(tmp_path):
    run = _copy_run(tmp_path)
    score = _Score(tmp_path, run)
    child = score.child()
    score.process.kill()
    score.process.wait(30)
    assert _gone(child), "lmms-eval outlived a killed score"
    assert len(_scratch(tmp_path)) == 1  # nothing runs at SIGKILL ...
    done = _cli(tmp_path, "score", str(tmp_path / "no-such-run"))
    assert done.returncode == 2 and _scratch(tmp_path) == []  # ... so the next score removes it


def test_a_second_score_on_one_folder_waits_for_the_first(tmp_path):
    run = _copy_run(tmp_path)
    from lmms_eval_plugins.score import lock_path

    with lock_path(run, _env(tmp_path)["TMPDIR"]).open("a+") as lock:  # the first score, holding the folder
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.write("4242\n")
        lock.flush()
        score = _Score(tmp_path, run)
        score.wait_for(lambda: "another score is running on this folder (pid 4242), waiting" in "".join(score.err))
        time.sleep(1)
        assert psutil.Process(score.process.pid).children() == []  # no replay, so no judge call, while it waits
        score.process.terminate()
        assert score.process.wait(30) == 128 + signal.SIGTERM
    assert _scratch(tmp_path) == []


# ------------------------------------------------------------------------------ 10: data files, through lmms-eval


def _mmerror_record(question_id: str) -> dict[str, str]:
    return {
        "question_id": question_id,
        "question": "Q?",
        "correct_answer": "1",
        "error_reason": "Step 1: r.",
        "label": "B_Reasoning_Error",
        "domain": "M",
        "subdomain": "s",
    }


@pytest.mark.cli
@pytest.mark.parametrize(
    "record_text, named, where, crash",
    [
        (
            '{"question_id": "MMErroR_00001", "extra": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "JSON nested more than 100 levels deep",
            "MMErroR_00001.json",
            "RecursionError",
        ),
        (
            json.dumps(_mmerror_record("q" * 300)),
            "holds a name of 304 bytes; file systems allow 255",
            f"record: {'q' * 300}",
            "File name too long",
        ),  # the image name is the question_id
        # issue 36: a bidi override in an id (it shows as another id) is a named error, not a record
        (
            json.dumps(_mmerror_record("MMErroR_\u202e10000")),
            "holds the bidi control U+202E",
            "record:  MMErroR_\\u202e10000",
            "put the image there",
        ),  # before: loaded, then a missing image
    ],
)
def test_a_hostile_data_file_stops_lmms_eval_with_a_named_error(tmp_path, record_text, named, where, crash):
    from lmms_eval_plugins.cli_run import run_lmms_eval

    root = tmp_path / "data" / "mmerror" / "data"
    (root / "jsons").mkdir(parents=True)
    (root / "images").mkdir()
    (root / "jsons" / "MMErroR_00001.json").write_text(record_text, encoding="utf-8")
    env = {key: value for key, value in _env(tmp_path).items() if key not in os.environ or key == "TMPDIR"}
    run = run_lmms_eval(
        tasks=["mmerror_etc"],
        model="oracle",
        output_dir=tmp_path / "out",
        env={**env, "LMMS_EVAL_PLUGINS_DATA_ROOT": str(tmp_path / "data")},
    )
    assert run.results_path is None  # lmms-eval exits 0 either way: the results file tells
    assert named in run.output and where in run.output, run.tail()
    assert crash not in run.output, run.tail()
