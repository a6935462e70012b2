"""``lmms-eval-plugins score --batch`` end to end (issue 31's own test), through the real CLI in a subprocess
and the loopback batch server, on the stored oracle run's ``virectify_sample`` and ``crossvid_ccqa_sample``:

- synchronous scoring gives the reference results (and its accounting, with a price table, a cost);
- ``--dry-run`` counts the pending verdicts and calls nothing;
- ``--batch`` killed (SIGKILL) after submitting; ``--batch --batch-wait 0`` then creates no second batch
  and exits 3 with the command that collects later; that command gives results identical to the
  synchronous ones with 0 synchronous judge calls, and its accounting shows cached and uncached input tokens.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from batch_server import BatchServer
from judge_server import TEST_API_KEY, Reply, data_fields

from lmms_eval_plugins.cli_run import OFFLINE_ENV, run_lmms_eval

pytestmark = pytest.mark.cli

TASKS = ("virectify_sample", "crossvid_ccqa_sample")
PRICES = {
    "gpt-4o": {"input": 2.5, "cached_input": 1.25, "output": 10.0, "batch_factor": 0.5},
    "gpt-4.1": {"input": 2.0, "cached_input": 0.5, "output": 8.0, "batch_factor": 0.5},
}


def mixed(request):
    """Half the binary verdicts wrong (by a hash of the request: the same for a sync call and a batch line)."""
    if "SCORING_POINTS" in data_fields(request.body):
        return None
    digest = hashlib.sha256(json.dumps(request.body.get("messages"), sort_keys=True).encode()).digest()
    return Reply(content="0") if digest[0] % 2 else None


def state_file(folder: Path) -> Path | None:
    return next(folder.rglob("judge_batches.json"), None)


def score_cmd(folder: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "lmms_eval_plugins.cli", "score", str(folder), "--tasks", ",".join(TASKS), *extra]


def rescored(folder: Path) -> dict:
    found = [p for p in folder.rglob("*_results.json") if "lmms_eval_plugins_score" in p.read_text()]
    assert len(found) == 1, found
    return json.loads(found[0].read_text())


def metrics(results: dict) -> dict:
    return {t: {k: v for k, v in results["results"][t].items() if k != "alias"} for t in TASKS}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batch-cli")
    prices = tmp / "prices.json"
    prices.write_text(json.dumps(PRICES))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LMMS_EVAL_PLUGINS_JUDGE"))}
    out: dict = {"seconds": {}, "tmp": tmp}
    with BatchServer(behaviour=mixed, lifetime=900, min_cached_tokens=64) as server:

        def env(name: str) -> dict[str, str]:
            return {
                **base,
                **OFFLINE_ENV,
                "LMMS_EVAL_PLUGINS_CACHE": str(tmp / "cache"),
                "HF_DATASETS_CACHE": str(tmp / "hf"),
                "OPENAI_BASE_URL": server.base_url,
                "OPENAI_API_KEY": TEST_API_KEY,
                "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(tmp / f"{name}.sqlite3"),
                "LMMS_EVAL_PLUGINS_JUDGE_BATCH_POLL": "0.2",
            }

        def score(name: str, folder: Path, *extra: str) -> subprocess.CompletedProcess:
            started = time.monotonic()
            done = subprocess.run(
                score_cmd(folder, *extra),
                check=False,
                env=env(folder.name),
                cwd=tmp,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=600,
            )
            out["seconds"][name] = time.monotonic() - started
            return done

        started = time.monotonic()
        run = run_lmms_eval(
            tasks=list(TASKS), model="oracle", output_dir=tmp / "run", env=env("run"), extra_args=["--predict_only"]
        )
        assert run.results_path is not None, run.tail()
        out["seconds"]["predict_only"] = time.monotonic() - started
        sync_folder, batch_folder = tmp / "sync", tmp / "batch"
        shutil.copytree(tmp / "run", sync_folder)
        shutil.copytree(tmp / "run", batch_folder)
        out["sync"] = score("sync", sync_folder, "--prices", str(prices))
        out["sync_calls"] = server.sync_calls
        out["dry"] = score("dry", batch_folder, "--batch", "--dry-run", "--prices", str(prices))
        out["after_dry"] = (server.sync_calls, len(server.batches))
        out["files"] = {
            name: sorted(str(p.relative_to(tmp / name)) for p in (tmp / name).rglob("*")) for name in ("run", "batch")
        }

        server.hold = True  # the batch stays in progress: score polls until it is killed
        started = time.monotonic()
        killed = subprocess.Popen(
            score_cmd(batch_folder, "--batch"),
            env=env("batch"),
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        while time.monotonic() - started < 300 and not (
            (state := state_file(batch_folder)) and "batch_id" in state.read_text()
        ):
            time.sleep(0.2)
        time.sleep(0.5)
        killed.send_signal(signal.SIGKILL)
        out["killed_output"] = killed.communicate(timeout=60)[0]
        out["seconds"]["killed"] = time.monotonic() - started
        out["batches_after_kill"] = len(server.batches)
        out["wait0"] = score("wait0", batch_folder, "--batch", "--batch-wait", "0", "--prices", str(prices))
        out["batches_after_wait0"] = len(server.batches)
        server.hold = False
        command = [
            line.strip()
            for line in out["wait0"].stdout.splitlines()
            if line.strip().startswith("lmms-eval-plugins score")
        ]
        out["later_command"] = command
        argv = shlex.split(command[-1])[1:] if command else ["score", str(batch_folder), "--batch"]
        started = time.monotonic()
        out["batch"] = subprocess.run(
            [sys.executable, "-m", "lmms_eval_plugins.cli", *argv],
            check=False,
            env=env("batch"),
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=600,
        )
        out["seconds"]["batch"] = time.monotonic() - started
        out["sync_calls_total"], out["batches"] = server.sync_calls, len(server.batches)
        out["sync_folder"], out["batch_folder"] = sync_folder, batch_folder
    print("seconds:", out["seconds"])
    return out


def test_dry_run_counts_and_calls_nothing(runs):
    dry = runs["dry"]
    assert dry.returncode == 0, dry.stdout[-3000:]
    assert (
        "verdict request(s) not in the judge cache would be sent through the Batch API; nothing was called"
        in dry.stdout
    )
    assert "input tokens (characters/4)" in dry.stdout and "estimated cost at most" in dry.stdout
    assert runs["after_dry"] == (runs["sync_calls"], 0)  # no call, no batch
    assert runs["files"]["batch"] == runs["files"]["run"]  # nothing written


def test_a_kill_after_submission_creates_no_second_batch(runs):
    assert runs["batches_after_kill"] == 1, runs["killed_output"][-3000:]
    wait0 = runs["wait0"]
    assert wait0.returncode == 3, wait0.stdout[-3000:]
    assert "resuming batch(es) batch_0 of an earlier score" in wait0.stdout
    # issue 40.4: the resume reuses the requests the killed score recorded, without a collecting replay
    assert "finding the verdicts not in the judge cache" in runs["killed_output"]
    for resumed in (wait0, runs["batch"]):
        assert "verdict request(s) an earlier score recorded" in resumed.stdout, resumed.stdout[-3000:]
        assert "no collecting replay" in resumed.stdout
        assert "finding the verdicts not in the judge cache" not in resumed.stdout
    assert runs["batches_after_wait0"] == 1 and runs["batches"] == 1
    assert runs["later_command"] and "--batch-wait" not in runs["later_command"][-1]


def test_batch_scoring_equals_sync_scoring_with_no_sync_call(runs):
    sync, batch = runs["sync"], runs["batch"]
    assert sync.returncode == 0, sync.stdout[-3000:]
    assert batch.returncode == 0, batch.stdout[-3000:]
    assert runs["sync_calls"] > 0 and runs["sync_calls_total"] == runs["sync_calls"]  # the batch path made none
    sync_results, batch_results = rescored(runs["sync_folder"]), rescored(runs["batch_folder"])
    assert metrics(batch_results) == metrics(sync_results)
    acc_r = sync_results["results"]["virectify_sample"]["acc_r,none"]
    assert 0 < acc_r < 100  # the server's mixed verdicts: a comparison that can fail


def test_accounting_shows_cached_and_uncached_tokens_and_cost(runs):
    batch_results, sync_results = rescored(runs["batch_folder"]), rescored(runs["sync_folder"])
    totals = batch_results["lmms_eval_plugins_judges"][0]["totals"]
    assert totals["calls"] == 0 and totals["batch_calls"] == runs["sync_calls"]
    stats = batch_results["lmms_eval_plugins_judges"][0]["by_model"]["gpt-4o"]  # ViRectify's judge model
    assert 0 < stats["cached_tokens"] < stats["tokens_in"] and stats["batch_cached_tokens"] == stats["cached_tokens"]
    sync_stats = sync_results["lmms_eval_plugins_judges"][0]["by_model"]["gpt-4o"]
    assert (
        sync_stats["batch_calls"] == 0
        and sync_results["lmms_eval_plugins_judges"][0]["totals"]["calls"] == runs["sync_calls"]
    )
    report = next(
        json.loads(p.read_text())
        for p in runs["batch_folder"].rglob("judge_report_*.json")
        if "batches" in p.read_text()
    )
    assert report["totals"]["batch_calls"] == totals["batch_calls"]
    assert report["batches"]["outcomes"] == {"batch_0": "completed"}
    # the same tokens at the batch factor cost half: the batch run's estimate is below the sync one's
    batch_cost = batch_results["lmms_eval_plugins_judges"][0]["estimated_cost"]["total"]
    assert 0 < batch_cost < sync_results["lmms_eval_plugins_judges"][0]["estimated_cost"]["total"]
    line = next(x for x in runs["batch"].stdout.splitlines() if x.strip().startswith("judge gpt-4o:"))
    assert f"0 sync call(s), {stats['batch_calls']} batch call(s)" in line and "cached," in line and "uncached" in line
    assert "estimated judge cost" in runs["batch"].stdout and "no price for" not in runs["batch"].stdout
    for path in runs["batch_folder"].rglob("*"):
        assert TEST_API_KEY not in path.read_text(errors="replace"), path
