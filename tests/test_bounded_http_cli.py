"""Issue 36 cases 7, 11 and 12b through the real CLI: every exchange is bounded in bytes and time, API
calls follow no redirect, and the judge's numeric settings refuse nan and inf.

* ``lmms-eval-plugins doctor --judge``, three runs at once: a judge sending a 200 MB reply (unannounced,
  written lazily as it is read), a judge trickling its reply a byte every 50 ms, and
  ``LMMS_EVAL_PLUGINS_JUDGE_TIMEOUT=nan`` (also the memory baseline: every other check runs as usual).
  Each doctor runs under a fresh wrapper that reports its peak RSS (``getrusage(RUSAGE_CHILDREN)``). The
  probe's redirect is tested in process (``test_bounded_http.py``), the CLI's in the run below.
* ``lmms-eval`` on a judged task (the sync judge of a run): doc 0 honest, docs 1-4 200 MB replies, doc 5
  a redirect to a second judge that would answer.

On main 4e7803f: the 200 MB probe used ~2.4 GB and said "ok"; the trickling probe ran for ~100 s; doc 5
was re-sent to the second server, which judged it; ``nan`` was accepted; the run read each 200 MB reply whole (peak RSS ~1.8 GB above the run's own).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent / "judges"))  # judged_task.py

from judge_server import JudgeServer, canned_content
from judged_task import write_judged_task
from test_bounded_http import MB, HostileServer, answer, completion, huge_completion, redirect_to, trickle

from lmms_eval_plugins.cli_run import run_lmms_eval

pytestmark = pytest.mark.cli

KEY = "sk-test-SECRET-bounded-0123456789"
WRAPPER = """import os, resource, subprocess, sys
code = subprocess.run([sys.executable, *sys.argv[1:]]).returncode
with open(os.environ["PEAK_RSS_FILE"], "w") as out:
    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024))
sys.exit(code)
"""
TRICKLE_BYTES = 2000  # 100 s at a byte per 50 ms: what the probe waited for before


def _env(tmp_path: Path, base_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LMMS_EVAL_PLUGINS_JUDGE", "OPENAI_"))}
    env.update(
        {
            "OPENAI_BASE_URL": base_url,
            "OPENAI_API_KEY": KEY,
            "LMMS_EVAL_PLUGINS_CACHE": str(tmp_path / "cache"),
            "HF_HUB_CACHE": str(tmp_path / "hf"),
            "PEAK_RSS_FILE": str(tmp_path / "peak_rss"),
            **extra,
        }
    )
    env.pop("LMMS_EVAL_PLUGINS_DATA_ROOT", None)
    return env


def _wrapper(tmp_path: Path) -> Path:
    path = tmp_path / "peak_rss_wrapper.py"
    path.write_text(WRAPPER)
    return path


@pytest.fixture(scope="module")
def doctors(tmp_path_factory):
    """name -> (the 'judge answers' row, peak RSS in bytes, exit status, output): three doctors at once."""
    with (
        HostileServer(lambda h: None, lifetime=150) as huge,
        HostileServer(lambda h: None, lifetime=150) as slow,
        HostileServer(lambda h: None, lifetime=150) as fine,
    ):
        huge.behaviour = huge_completion(huge, 200 * MB, announced=False)
        slow.behaviour = trickle(slow, completion("x" * TRICKLE_BYTES))
        fine.behaviour = answer(fine, completion("OK"))
        cases = {
            "huge": (huge, {}),
            "trickle": (slow, {"LMMS_EVAL_PLUGINS_JUDGE_TIMEOUT": "0.5", "LMMS_EVAL_PLUGINS_JUDGE_DEADLINE": "2"}),
            "nan": (fine, {"LMMS_EVAL_PLUGINS_JUDGE_TIMEOUT": "nan"}),
        }
        running = {}
        for name, (server, extra) in cases.items():
            folder = tmp_path_factory.mktemp(f"doctor-{name}")
            command = [
                sys.executable,
                str(_wrapper(folder)),
                "-m",
                "lmms_eval_plugins.cli",
                "doctor",
                "--judge",
                "--json",
            ]
            running[name] = (
                folder,
                subprocess.Popen(
                    command,
                    env=_env(folder, server.url + "/v1", **extra),
                    cwd=folder,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                ),
            )
        out = {}
        for name, (folder, process) in running.items():
            try:
                stdout, stderr = process.communicate(timeout=100)
            except subprocess.TimeoutExpired:  # that case's test fails; the others still run
                process.kill()
                out[name] = (None, 0, None, "")
                continue
            rows = {c["name"]: c for c in json.loads(stdout)["checks"]}
            out[name] = (
                rows["judge answers"],
                int((folder / "peak_rss").read_text()),
                process.returncode,
                stdout + stderr,
            )
        yield out


def test_doctor_refuses_a_200_mb_judge_reply_in_little_memory(doctors):
    row, peak, status, output = doctors["huge"]
    baseline = doctors["nan"][1]  # the same doctor, reading no reply
    assert row["status"] == "FAIL" and "BodyTooLarge" in row["detail"] and "over the cap of" in row["detail"], row
    assert status == 1
    assert peak < baseline + 250 * MB, (peak // MB, baseline // MB)  # before: ~2.4 GB more, and "ok"
    assert KEY not in output


def test_doctor_stops_a_trickling_judge_at_its_deadline(doctors):
    row, _, status, _ = doctors["trickle"]
    assert row is not None, "doctor against a trickling judge ran past 100 s (its judge deadline is 2 s)"
    assert row["status"] == "FAIL" and "within the 2 s deadline" in row["detail"], row
    took = float(re.search(r"did not answer in ([0-9.]+) s", row["detail"]).group(1))
    assert 1.9 <= took < 3.0 and status == 1, took  # before: ~100 s, then "ok"


def test_doctor_refuses_a_judge_timeout_of_nan(doctors):
    row, _, status, _ = doctors["nan"]
    assert row["status"] == "FAIL" and "LMMS_EVAL_PLUGINS_JUDGE_TIMEOUT='nan' is not a finite number" in row["detail"]
    assert status == 1  # before: nan was never read, and elsewhere accepted


# ---- the judge of a run --------------------------------------------------------------------------------

TASK = "judged_bounded"
HUGE_DOCS = (1, 2, 3, 4)
REDIRECT_DOC = 5
POINTS = ["chef slices onions", "water boils"]
DOCS = [
    {
        "id": i,
        "question": f"Question {i}?",
        "answer": "A chef and a pot.",
        "points": POINTS,
        "oracle_response": "The chef slices onions while the water boils.",
    }
    for i in range(6)
]


def test_a_run_reads_no_judge_reply_past_its_cap_and_follows_no_redirect(tmp_path):
    task_dir = write_judged_task(tmp_path / "tasks", TASK, DOCS, judge="rubric", metric="score", max_new_tokens=64)
    out = tmp_path / "out"
    with JudgeServer(lifetime=150) as second, HostileServer(lambda h: None, lifetime=150) as judge:
        big = huge_completion(judge, 200 * MB, announced=False)
        hop = redirect_to(judge, second.base_url + "/chat/completions")

        def behave(h: BaseHTTPRequestHandler) -> None:
            body = json.loads(h.body)
            n = int(re.search(r"Question (\d+)\?", json.dumps(body)).group(1))
            if n in HUGE_DOCS:
                return big(h)
            if n == REDIRECT_DOC:
                return hop(h)
            return answer(judge, completion(canned_content(body)))(h)

        judge.behaviour = behave
        env = _env(
            tmp_path,
            judge.url + "/v1",
            LMMS_EVAL_PLUGINS_JUDGE_MAX_ATTEMPTS="1",
            LMMS_EVAL_PLUGINS_JUDGE_REPORT=str(out) + "/",
        )
        run = run_lmms_eval(
            tasks=TASK,
            model="oracle",
            output_dir=out,
            include_path=str(task_dir),
            env=env,
            timeout=300,
            launcher=[sys.executable, str(_wrapper(tmp_path))],
        )
        assert run.results_path is not None, run.output[-12000:]
        by_doc = {s["doc_id"]: s["score"] for s in run.samples(TASK)}
        peak = int((tmp_path / "peak_rss").read_text())
        assert by_doc[0]["verdict"] == 1.0 and by_doc[0]["error"] is None
        for n in HUGE_DOCS:  # before: each 200 MB read whole, then refused by its text's length
            assert by_doc[n]["verdict"] is None and re.search(
                r"the judge reply is more than \d+ bytes, over LMMS_EVAL_PLUGINS_JUDGE_MAX_REPLY_BYTES=65536",
                by_doc[n]["error"],
            ), by_doc[n]
        assert judge.sent < 50 * MB, judge.sent  # the server wrote little more than its socket buffers took
        assert peak < 2048 * MB, peak // MB  # before: ~1.8 GB more than the run's own
        # 5: refused, naming the hosts only; the second judge got nothing (before: it judged doc 5)
        assert (
            by_doc[REDIRECT_DOC]["verdict"] is None
            and "answered HTTP 307, a redirect to 127.0.0.1:" in by_doc[REDIRECT_DOC]["error"]
        ), by_doc[REDIRECT_DOC]
        assert second.requests == []
        assert KEY not in run.output
