"""A judge outage never costs a model run (issue: durable outputs and `lmms-eval-plugins score`).

Through the real CLI with loopback judge servers, on a judged video task, a judged free-form task and
an unjudged task in one run:
- clean run (working judge): the reference numbers;
- outage by connection refused, and by HTTP 500 on every call: results and logged samples are on
  disk, the verdict-based metrics are null with counts, the other metrics and the unjudged task are
  as in the clean run, and the output ends with the judge failures by cause and host, each with its
  fix, and the command that finishes the run;
- `lmms-eval-plugins score` with the judge back: metrics identical to the clean run; a second
  `score` makes 0 judge calls;
- `--predict_only` with no judge configured: no judge calls; `score` then gives the clean numbers.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lmms_eval_plugins.cli_run import OFFLINE_ENV, run_lmms_eval

sys.path.insert(0, str(Path(__file__).resolve().parent))
from judge_server import TEST_API_KEY, JudgeServer, server_error  # noqa: E402

pytestmark = pytest.mark.cli

TASKS = ["crossvid_ccqa_sample", "virectify_sample", "errorradar_step_sample"]
VERDICT_METRICS = {
    "crossvid_ccqa_sample": {"score", "score_strict", "per_question_mean"},
    "virectify_sample": {"acc_r", "by_domain", "by_error_type", "by_solution_source"},
}
JUDGE_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_URL",
    "OPENAI_API_BASE",
    "LMMS_EVAL_PLUGINS_JUDGE",
    "LMMS_EVAL_PLUGINS_JUDGE_MODEL",
    "LMMS_EVAL_PLUGINS_JUDGE_REPORT",
)


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def _metrics(results: dict, task: str) -> dict:
    return {k.split(",")[0]: v for k, v in results["results"][task].items() if "_stderr" not in k and k != "alias"}


def _newest_results(folder: Path) -> dict:
    path = max(folder.rglob("*_results.json"), key=lambda p: p.stat().st_mtime_ns)
    return json.loads(path.read_text())


def _score(output: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "lmms_eval_plugins.cli", "score", str(output)],
        env=env,
        cwd=output,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )
    return done, time.monotonic() - started


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("outage")
    base = {k: v for k, v in os.environ.items() if k not in JUDGE_VARS}
    base.update(
        OFFLINE_ENV,
        LMMS_EVAL_PLUGINS_CACHE=str(tmp / "cache"),
        HF_DATASETS_CACHE=str(tmp / "hf"),
        OPENAI_API_KEY=TEST_API_KEY,
        LMMS_EVAL_PLUGINS_JUDGE_MAX_ATTEMPTS="2",
    )
    out: dict = {"seconds": {}, "tmp": tmp}

    def env(cache: str, url: str | None) -> dict[str, str]:
        e = {**base, "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(tmp / f"{cache}.sqlite3")}
        if url:
            e["OPENAI_BASE_URL"] = url
        return e

    def lmms_eval(name: str, e: dict[str, str], extra=()):
        started = time.monotonic()
        run = run_lmms_eval(tasks=TASKS, model="oracle", output_dir=tmp / name, env=e, extra_args=list(extra))
        out["seconds"][name] = time.monotonic() - started
        return run

    # run_lmms_eval merges os.environ under env: clear the judge variables there too
    saved = {k: os.environ.pop(k) for k in JUDGE_VARS if k in os.environ}
    try:
        with (
            JudgeServer(lifetime=1200) as judge,
            JudgeServer(behaviour=lambda r: server_error(500), lifetime=1200) as broken,
        ):
            out["clean"] = lmms_eval("clean", env("clean", judge.base_url))
            out["clean_calls"] = judge.n_requests
            dead = _dead_url()
            out["hosts"] = {"refused": dead.removesuffix("/v1"), "http500": broken.base_url.removesuffix("/v1")}
            out["refused"] = lmms_eval("refused", env("refused", dead))
            out["http500"] = lmms_eval("http500", env("http500", broken.base_url))
            out["http500_calls"] = broken.n_requests
            out["predict_only"] = lmms_eval("predict_only", env("predict_only", None), ["--predict_only"])

            for name in ("refused", "predict_only"):
                before = judge.n_requests
                done, seconds = _score(tmp / name, env(name, judge.base_url))
                out[f"score_{name}"] = (done, _newest_results(tmp / name), judge.n_requests - before)
                out["seconds"][f"score_{name}"] = seconds
            before = judge.n_requests
            again, seconds = _score(tmp / "refused", env("refused", judge.base_url))
            out["score_again"] = (again, judge.n_requests - before)
            out["seconds"]["score_again"] = seconds
    finally:
        os.environ.update(saved)
    print(
        "\njudge outage figures:",
        json.dumps(
            {
                "seconds": out["seconds"],
                "clean_calls": out["clean_calls"],
                "score_calls": {k: out[f"score_{k}"][2] for k in ("refused", "predict_only")},
                "score_again_calls": out["score_again"][1],
            },
            default=round,
        ),
    )
    return out


@pytest.mark.parametrize("outage", ["refused", "http500"])
def test_an_outage_keeps_every_result_and_sample(runs, outage):
    clean, run = runs["clean"], runs[outage]
    for task in TASKS:
        got, want = run.task_results(task), clean.task_results(task)
        judged = VERDICT_METRICS.get(task, set())
        n = len(run.samples(task))  # the samples are on disk
        assert got["unscored"] == (n if judged else 0), task
        for metric, value in want.items():
            if metric in judged:
                assert got[metric] is None, (task, metric)
            elif metric.endswith("_stderr") and metric.removesuffix("_stderr") in judged:
                assert got[metric] == "N/A", (task, metric)  # no error bar for a number that is not there
            elif metric not in ("unscored", "judge_errors", "acc_r_judge_errors"):
                assert got[metric] == value, (task, metric)  # the rest of the run is untouched
    assert "sample(s) are UNSCORED" in run.output and "lmms-eval-plugins score" in run.output


@pytest.mark.parametrize(
    "outage, cause, fix",
    [
        (
            "refused",
            "connection refused",
            "nothing listens there: start the judge server, or point OPENAI_BASE_URL at it",
        ),
        ("http500", "HTTP 500", "the judge server failed: see its log, then score again"),
    ],
)
def test_the_closing_block_names_the_failure_by_cause_and_host_with_its_fix(runs, outage, cause, fix):
    run = runs[outage]
    errors = sum(s["judge_errors"] for r in run.results["lmms_eval_plugins_judges"] for s in r["by_model"].values())
    assert errors >= sum(len(run.samples(t)) for t in VERDICT_METRICS)  # every judged sample failed
    block = run.output[run.output.rindex("sample(s) are UNSCORED") :]
    assert (
        f"Judge errors (samples), by cause:\n  {errors} x {cause} at {runs['hosts'][outage]}\n      fix: {fix}\n"
        in block
    )
    assert TEST_API_KEY not in run.output


def test_count_rows_show_no_stderr_in_the_console_table(runs):
    """lmms-eval printed a 0.0000 stderr for counts (unscored, judge_errors, parse_fail...)."""
    from lmms_eval_plugins.console import spec_unit

    run = runs["refused"]
    # lmms-eval computes a 0-1 CLT stderr for every metric of a task, counts included; since issue 37 the
    # clt-columns entry leaves N/A in the results for anything that is not a mean (the table's own fix stays)
    clt = [
        (t, k, v)
        for t in TASKS
        for k, v in run.task_results(t).items()
        if k.endswith(("_stderr_clt", "_stderr_clustered")) and spec_unit(t, k.rsplit("_stderr", 1)[0]) == "count"
    ]
    assert clt and all(v == "N/A" for *_, v in clt), clt
    counted = [r for r in _table_rows(run.output) if spec_unit(r["task"], r["Metric"]) in ("count", "dict")]
    assert {r["Metric"] for r in counted} >= {"unscored", "judge_errors"}
    shown = [(r["task"], r["Metric"], r.get(c)) for r in counted for c in ("Stderr", "Stderr_CLT", "Stderr_Clustered")]
    assert all(se in (None, "N/A") for _, _, se in shown), shown


def _table_rows(output: str) -> list[dict[str, str]]:
    """The rows of lmms-eval's results table (markdown), each cell by its column header; a row without a
    task name continues the task above."""
    rows, header, task = [], None, ""
    for line in output.splitlines():
        if not line.startswith("|"):
            header = None if not line.strip() else header
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if "Metric" in cells and "Stderr" in cells:
            header = cells
        elif header and len(cells) == len(header) and not set(line) <= set("|-: "):
            row = dict(zip(header, cells))
            task = row.get("Tasks") or task
            rows.append({**row, "task": task.lstrip(" -")})
    return rows


def test_http_500_calls_were_retried_then_gave_up(runs):
    assert runs["http500_calls"] >= 2 * sum(len(runs["clean"].samples(t)) for t in VERDICT_METRICS) - 2


@pytest.mark.parametrize("name", ["refused", "predict_only"])
def test_score_finishes_the_run_with_the_clean_numbers(runs, name):
    done, results, calls = runs[f"score_{name}"]
    assert done.returncode == 0, done.stdout[-6000:]
    assert calls == runs["clean_calls"]  # every verdict was missing: judged once each
    for task in TASKS:
        assert _metrics(results, task) == _metrics(runs["clean"].results, task), task


def test_predict_only_made_no_judge_calls_and_needed_no_endpoint(runs):
    run = runs["predict_only"]
    assert run.results_path is not None
    assert all(len(run.samples(t)) for t in TASKS)


def test_the_api_key_reaches_no_file_the_runs_wrote(runs):
    """Results, samples, judge reports, the verdict cache, the response caches: no form of the key."""
    import base64
    from urllib.parse import quote

    forms = {
        TEST_API_KEY.encode(),
        quote(TEST_API_KEY).encode(),
        base64.b64encode(TEST_API_KEY.encode()),
        base64.b64encode(f":{TEST_API_KEY}".encode()),
    }
    files = [p for p in runs["tmp"].rglob("*") if p.is_file()]
    assert len(files) > 20
    leaked = [str(p) for p in files for form in forms if form in p.read_bytes()]
    assert not leaked, leaked


def test_a_second_score_makes_no_judge_calls(runs):
    done, calls = runs["score_again"]
    assert done.returncode == 0 and calls == 0


def test_a_run_killed_while_judging_is_finished_with_no_repeated_calls(tmp_path):
    """Crash recovery: kill lmms-eval mid-judging, re-run the same command with --use_cache and the same
    judge cache: the model is not asked again and only the verdicts not yet cached are requested."""
    import signal
    import sqlite3

    from lmms_eval_plugins.cli_run import lmms_eval_command

    task, cache_db, response_cache = "virectify_sample", tmp_path / "judge.sqlite3", tmp_path / "responses"
    env = {k: v for k, v in os.environ.items() if k not in JUDGE_VARS}
    env.update(
        OFFLINE_ENV,
        LMMS_EVAL_PLUGINS_CACHE=str(tmp_path / "cache"),
        HF_DATASETS_CACHE=str(tmp_path / "hf"),
        LMMS_EVAL_PLUGINS_JUDGE_CACHE=str(cache_db),
        OPENAI_API_KEY=TEST_API_KEY,
        LMMS_EVAL_PLUGINS_JUDGE_CONCURRENCY="1",
        # lmms-eval keeps a run's responses under runs/<run id>/ and merges them into the shared cache
        # only when the run ends; a stable id lets the re-run read the killed run's responses
        LMMS_CACHE_RUN_ID="outage-test",
    )
    with JudgeServer(latency=0.4, lifetime=600) as judge:
        env["OPENAI_BASE_URL"] = judge.base_url
        command = lmms_eval_command(
            tasks=task,
            model="oracle",
            model_args=None,
            output_dir=tmp_path / "out",
            extra_args=["--use_cache", str(response_cache)],
        )
        (tmp_path / "out").mkdir()
        process = subprocess.Popen(
            command,
            env=env,
            cwd=tmp_path / "out",
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 300
        while judge.n_requests < 4 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(process.pid, signal.SIGKILL)  # a real kill, mid-judging
        process.wait(timeout=60)
        assert judge.n_requests >= 4, "the run ended before judging started"
        with sqlite3.connect(cache_db) as db:
            finished = db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0]
        calls_before = judge.n_requests
        assert 0 < finished < 12

        rerun = run_lmms_eval(
            tasks=task,
            model="oracle",
            output_dir=tmp_path / "out",
            env=env,
            extra_args=["--use_cache", str(response_cache)],
        )
        assert "all 12 requests served from cache" in rerun.output  # 0 repeated model calls
        assert judge.n_requests - calls_before == 12 - finished  # 0 repeated finished judge calls
    metrics = rerun.task_results(task)
    assert metrics["unscored"] == 0 and metrics["acc_r"] == 100.0


def test_ctrl_c_during_a_run_prints_one_block_and_how_to_keep_replies(tmp_path):
    # issue 37 case 16: Ctrl-C printed a 123-line torch traceback and said nothing of what was kept. The run is
    # stopped while the judge (a loopback server that never answers in time) holds it inside lmms-eval.
    from lmms_eval_plugins.cli_run import lmms_eval_command

    env = {k: v for k, v in os.environ.items() if k not in JUDGE_VARS}
    env.update(
        OFFLINE_ENV,
        LMMS_EVAL_PLUGINS_CACHE=str(tmp_path / "cache"),
        HF_DATASETS_CACHE=str(tmp_path / "hf"),
        OPENAI_API_KEY=TEST_API_KEY,
        LMMS_EVAL_PLUGINS_JUDGE_CACHE=str(tmp_path / "judge.sqlite3"),
    )
    with JudgeServer(latency=600, lifetime=900) as slow:
        env["OPENAI_BASE_URL"] = slow.base_url
        command = lmms_eval_command(
            tasks="virectify_sample", model="oracle", model_args=None, output_dir=tmp_path / "out"
        )
        proc = subprocess.Popen(
            command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            deadline = time.monotonic() + 600
            while not slow.requests and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.5)
            assert slow.requests, "the run never reached its judge"
            proc.send_signal(2)  # SIGINT, as Ctrl-C sends it
            output, _ = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, output[-3000:]
    assert "lmms-eval-plugins: the run was stopped (Ctrl-C)." in output
    flat = " ".join(output.split())
    assert "lmms-eval writes them only when every task is done" in flat and "--use_cache cache/" in flat
    assert "Traceback" not in output, output[-3000:]
    assert not list((tmp_path / "out").rglob("*_results.json"))
