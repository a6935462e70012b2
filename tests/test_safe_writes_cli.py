"""Issue 36, cases 1, 2, 8a, 13a and 13b, through the real commands (``lmms-eval``, ``lmms-eval-plugins
score`` and ``judge-cache merge``) in subprocesses.  Each test fails on main 4e7803f:

1.  a link planted at the judge report's predictable temp name (``.judge_report.json.<pid>.tmp``) made
    lmms-eval write the report into the file it points at; one at the report itself was silently replaced;
    a link at ``score``'s lock in ``$TMPDIR`` (opened ``a+``, then truncated) emptied the file it points at;
2.  ``judge-cache merge --secret FOLDER`` (and the secret variable) chmodded a 0755 folder to 0600;
8a. a 4 KB cache whose ``verdicts`` is a view over a recursive CTE was fetched whole (gigabytes);
13a. a secret readable by others was chmodded, and the rows signed under it kept being trusted;
13b. the cache database was created 0644.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "judges"))  # judged_task.py

from judge_server import TEST_API_KEY, JudgeServer
from judged_task import write_judged_task
from lmms_eval_plugins.judges.cache import VerdictCache, load_secret

from lmms_eval_plugins.cli_run import OFFLINE_ENV, lmms_eval_command

pytestmark = pytest.mark.cli

OUTSIDE = "export SAFE=1  # a shell rc file the attacker wants to change\n"
RUNS = Path(__file__).parent / "data" / "report_runs"
LINK_FIX = "remove it; the plugin never writes through a link"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LMMS_EVAL_PLUGINS_JUDGE") and not k.startswith("OPENAI_")
    }
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {
        **env,
        **OFFLINE_ENV,
        "TMPDIR": str(tmp_path / "tmp"),
        "LMMS_EVAL_PLUGINS_CACHE": str(tmp_path / "cache"),
        "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(tmp_path / "cache" / "judge.sqlite3"),
        "LMMS_EVAL_PLUGINS_JUDGE_CACHE_SECRET": str(tmp_path / "secret" / "judge_cache.secret"),
        **extra,
    }


def _outside(tmp_path: Path) -> Path:
    path = tmp_path / "home" / ".bashrc"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(OUTSIDE)
    return path


# ------------------------------------------------------------------------------ 1: the judge report, through lmms-eval


def test_lmms_eval_never_writes_the_judge_report_through_a_link(tmp_path):
    outside = _outside(tmp_path)
    task_dir = write_judged_task(
        tmp_path / "tasks",
        "judged_links",
        [
            {
                "id": i,
                "question": f"Question {i}?",
                "answer": "A chef.",
                "points": ["chef"],
                "oracle_response": "A chef.",
            }
            for i in range(2)
        ],
        judge="rubric",
        metric="score",
        max_new_tokens=16,
    )
    out = tmp_path / "out"
    out.mkdir()
    report = out / "judge_report.json"
    report.symlink_to(outside)  # a link at the report itself
    with JudgeServer(lifetime=120) as server:
        env = _env(
            tmp_path,
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY=TEST_API_KEY,
            LMMS_EVAL_PLUGINS_JUDGE_REPORT=str(report),
        )
        command = lmms_eval_command(
            tasks="judged_links",
            model="oracle",
            model_args=None,
            output_dir=out,
            log_samples=True,
            include_path=str(task_dir),
            extra_args=(),
        )
        child = subprocess.Popen(command, env=env, cwd=out, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        # and one at the temp name the old code used (lmms-eval takes seconds to reach its judge calls)
        (out / f".judge_report.json.{child.pid}.tmp").symlink_to(outside)
        output, _ = child.communicate(timeout=300)
    assert child.returncode == 0, output[-6000:]
    assert outside.read_text() == OUTSIDE  # before: the accounting JSON
    assert report.is_symlink()
    assert f"{report} is a symbolic link" in output and LINK_FIX in output, output[-6000:]
    assert list(out.rglob("*_results.json")), "the results are still written"


# ------------------------------------------------------------------------------ 1: score's lock in $TMPDIR


def test_score_never_opens_its_lock_through_a_link(tmp_path):
    import shutil

    from lmms_eval_plugins.score import lock_path

    outside = _outside(tmp_path)
    run = tmp_path / "oracle"
    shutil.copytree(RUNS / "oracle", run)
    env = _env(tmp_path)
    lock = lock_path(run, env["TMPDIR"])
    lock.symlink_to(outside)
    score = subprocess.Popen(
        [sys.executable, "-m", "lmms_eval_plugins.cli", "score", str(run), "--tasks", "errorradar_step_sample"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    err: list[str] = []
    threading.Thread(target=lambda: err.extend(score.stderr), daemon=True).start()
    end = time.monotonic() + 60
    while "cannot lock" not in "".join(err) and outside.read_text() == OUTSIDE and score.poll() is None:
        assert time.monotonic() < end, "".join(err)[-3000:]
        time.sleep(0.1)
    time.sleep(0.3)
    score.terminate()
    score.wait(30)
    assert outside.read_text() == OUTSIDE  # before: emptied, then the pid of score
    text = "".join(err)
    assert f"cannot lock {lock}" in text and LINK_FIX in text, text[-3000:]


# ------------------------------------------------------------------------------ 2, 13a, 13b: the cache secret and mode


def _merge(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lmms_eval_plugins.cli", "judge-cache", "merge", *args],
        env=_env(tmp_path, **env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _signed_cache(path: Path, secret: bytes, n: int = 2, reply: str = "1") -> Path:
    cache = VerdictCache(path, secret=secret)
    for i in range(n):
        cache.put(
            f"{i:064x}",
            judge="semantic_match",
            version="1",
            model="m",
            endpoint="http://127.0.0.1/v1",
            score=1.0,
            detail={},
            reply=reply,
        )
    cache.close()
    return path


def test_a_secret_that_is_a_folder_is_a_named_error_that_changes_nothing(tmp_path):
    folder = tmp_path / "not_a_secret"
    folder.mkdir()
    folder.chmod(0o755)
    source = _signed_cache(tmp_path / "src.sqlite3", b"s" * 32)
    flag = _merge(tmp_path, str(source), "--into", str(tmp_path / "into.sqlite3"), "--secret", str(folder))
    var = _merge(
        tmp_path,
        str(source),
        "--into",
        str(tmp_path / "into.sqlite3"),
        LMMS_EVAL_PLUGINS_JUDGE_CACHE_SECRET=str(folder),
    )
    for done in (flag, var):
        assert done.returncode == 2, done.stderr
        assert (
            f"the judge cache secret {folder} is not a regular file" in done.stderr and "Traceback" not in done.stderr
        )
        assert "delete it" not in done.stderr
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755  # before: 0600


def test_a_secret_readable_by_others_is_replaced_and_its_rows_asked_again(tmp_path):
    secret_file = tmp_path / "secret" / "judge_cache.secret"
    old = load_secret(secret_file)
    source = _signed_cache(tmp_path / "src.sqlite3", old)
    secret_file.chmod(0o644)  # anyone could have read it, and signed rows with it
    into = tmp_path / "into.sqlite3"
    done = _merge(tmp_path, str(source), "--into", str(into))
    assert done.returncode == 0, done.stderr
    assert "merged 0 verdict(s)" in done.stdout and "dropped 2 whose HMAC" in done.stdout, (
        done.stdout
    )  # before: merged 2
    assert "made a new secret" in done.stderr and "asked again" in done.stderr, done.stderr
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600 and load_secret(secret_file) != old
    # 13b: the cache database and its -wal/-shm are private (before: 0644)
    for path in [into, *(Path(f"{into}{s}") for s in ("-wal", "-shm") if Path(f"{into}{s}").exists())]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    # another machine's secret readable by others: refused, not changed
    other = tmp_path / "other.secret"
    other.write_text("ab" * 32 + "\n")
    other.chmod(0o644)
    refused = _merge(tmp_path, str(source), "--into", str(into), "--secret", str(other))
    assert refused.returncode == 2 and "readable by other users" in refused.stderr, refused.stderr
    assert stat.S_IMODE(other.stat().st_mode) == 0o644


# ------------------------------------------------------------------------------ 8a: a hostile cache file to merge


def _merge_measured(tmp_path: Path, *args: str, **env: str) -> tuple[int, str, int]:
    """(exit status, output, peak RSS in bytes) of one merge, run under a 1.5 GB address-space limit so
    that the code before the fix fails here instead of exhausting the machine.  A small launcher starts
    it and reads its rusage: a child's peak RSS starts at its parent's size when forked (pytest's)."""
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, "judge-cache", "merge", *args],
        env=_env(tmp_path, **env),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    *lines, last = done.stdout.rstrip("\n").split("\n")
    assert last.startswith("PEAK_RSS="), done.stdout[-2000:] + done.stderr[-2000:]
    return done.returncode, "\n".join(lines) + done.stderr, int(last.removeprefix("PEAK_RSS="))


_LAUNCHER = """
import os, subprocess, sys
limited = ("import resource, runpy, sys; resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20)); "
           "sys.argv[0] = 'lmms-eval-plugins'; runpy.run_module('lmms_eval_plugins.cli', run_name='__main__')")
child = subprocess.Popen([sys.executable, "-c", limited, *sys.argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
output = child.stdout.read()
_, status, usage = os.wait4(child.pid, 0)
sys.stdout.write(output.decode(errors="replace") + f"\\nPEAK_RSS={usage.ru_maxrss * 1024}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def _sqlite(path: Path, *statements: str) -> Path:
    """Make a SQLite file in a child process (writing some hostile schemas costs the writer memory)."""
    script = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); [c.execute(s) for s in sys.argv[2:]]; c.commit()"
    subprocess.run([sys.executable, "-c", script, str(path), *statements], check=True, timeout=60)
    return path


def _view_cache(path: Path) -> Path:
    return _sqlite(
        path,
        "CREATE VIEW verdicts AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000000) "
        "SELECT printf('%064d', i) AS key, 'semantic_match' AS judge, '1' AS judge_version, 'm' AS model, "
        "'' AS endpoint, 1.0 AS score, '{}' AS detail, hex(zeroblob(500)) AS reply, 0 AS tokens_in, 0 AS tokens_out, "
        "0.0 AS created, 'x' AS mac FROM n",
    )


def test_merging_a_small_hostile_cache_stays_small_and_names_what_it_refused(tmp_path):
    view = _view_cache(tmp_path / "view.sqlite3")
    assert view.stat().st_size <= 8192
    code, output, peak = _merge_measured(tmp_path, str(view), "--into", str(tmp_path / "into.sqlite3"))
    assert code == 2 and "is not a plain judge cache: it holds view 'verdicts'" in output, output[-3000:]
    assert "Traceback" not in output and peak < 500 << 20, (peak, output[-2000:])  # before: MemoryError at the limit
    # a generated column computes its value when read: refused the same way
    generated = _sqlite(
        tmp_path / "generated.sqlite3",
        "CREATE TABLE verdicts (key TEXT, judge TEXT, judge_version TEXT, model TEXT, endpoint TEXT, score REAL, "
        "detail TEXT, n INTEGER, reply TEXT GENERATED ALWAYS AS (hex(zeroblob(n))) VIRTUAL, tokens_in INTEGER, "
        "tokens_out INTEGER, created REAL, mac TEXT)",
        "INSERT INTO verdicts (key, n) VALUES ('k', 400000000)",
    )
    code, output, peak = _merge_measured(tmp_path, str(generated), "--into", str(tmp_path / "into.sqlite3"))
    assert code == 2 and "its column(s) reply are computed when read" in output, output[-3000:]
    assert peak < 500 << 20, peak


def test_a_row_over_the_size_cap_is_dropped_by_sql_and_counted(tmp_path):
    secret_file = tmp_path / "secret" / "judge_cache.secret"
    source = _signed_cache(tmp_path / "src.sqlite3", load_secret(secret_file), n=1)
    big = VerdictCache(source, secret=load_secret(secret_file))
    big.put(
        "f" * 64, judge="semantic_match", version="1", model="m", endpoint="", score=1.0, detail={}, reply="1" * 5000
    )
    big.close()
    code, output, _ = _merge_measured(
        tmp_path, str(source), "--into", str(tmp_path / "into.sqlite3"), LMMS_EVAL_PLUGINS_JUDGE_MAX_REPLY_BYTES="1000"
    )
    assert code == 0, output
    assert "merged 1 verdict(s)" in output and "dropped 1 with a column over the size cap" in output, output
