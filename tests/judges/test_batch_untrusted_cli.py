"""Issue 36, the Batch API path through the real ``lmms-eval-plugins score --batch`` (a subprocess) and the
loopback batch server, on one stored oracle run of ``virectify_sample`` (semantic-match and rubric verdicts),
copied for each scenario. Each test fails on the code before issue 36:

- case 4: a copied ``judge_batches.json`` (the old, unsigned format) naming another user's batch, whose
  verdicts are all flipped, and another user's input file: the old code resumed and ingested the batch
  and created a billed batch from the file; now the file is set aside and the run's requests are batched afresh;
- cases 5 and 6, in the same run's own new batch: duplicated conflicting lines, unknown lines and a line nested
  100,000 deep: the old code ended in a RecursionError traceback (and let the first duplicate win); now the
  conflicting request is a judge error, the others are kept, and the counts are in the summary and the report
  (relabelled rubric lines are caught by their verdict nonce: ``test_batch_untrusted.py``);
- case 7-batch: a trickled output file under ``--batch-wait 5`` (the old code waited for all of it);
- case 12a: ``--batch-wait nan``, ``..._BATCH_POLL=inf``, prices of 1e308 and a price file 100,000 levels deep.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from batch_server import BatchServer
from judge_server import TEST_API_KEY

from lmms_eval_plugins.cli_run import OFFLINE_ENV, run_lmms_eval

pytestmark = pytest.mark.cli

TASK = "virectify_sample"
DEEP = "[" * 100_000 + "]" * 100_000


def flip(rows):
    for row in rows:
        message = row["response"]["body"]["choices"][0]["message"]
        message["content"] = {"0": "1", "1": "0"}.get(message["content"], message["content"])
    return rows


def mangle(rows):
    """A conflicting duplicate of the first line, an exact duplicate of the second, two unknown lines, a deep one."""
    other = flip([json.loads(json.dumps(rows[0]))])[0]
    return [
        *rows,
        other,
        rows[1],
        {**rows[1], "custom_id": "lep-" + "e" * 48},
        {**rows[1], "custom_id": "forged"},
        DEEP,
    ]


def results_of(folder: Path) -> dict:
    found = [p for p in folder.rglob("*_results.json") if "lmms_eval_plugins_score" in p.read_text()]
    assert len(found) == 1, found
    return json.loads(found[0].read_text())


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batch-untrusted")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LMMS_EVAL_PLUGINS_JUDGE"))}
    out: dict = {"seconds": {}}
    with BatchServer(lifetime=900, min_cached_tokens=64) as server:

        def env(name: str, **extra: str) -> dict[str, str]:
            return {
                **base,
                **OFFLINE_ENV,
                "LMMS_EVAL_PLUGINS_CACHE": str(tmp / "cache"),
                "HF_DATASETS_CACHE": str(tmp / "hf"),
                "OPENAI_BASE_URL": server.base_url,
                "OPENAI_API_KEY": TEST_API_KEY,
                "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(tmp / f"{name}.sqlite3"),
                "LMMS_EVAL_PLUGINS_JUDGE_CACHE_SECRET": str(tmp / f"{name}.secret"),
                "LMMS_EVAL_PLUGINS_JUDGE_BATCH_POLL": "0.2",
                **extra,
            }

        def score(name: str, folder: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "lmms_eval_plugins.cli", "score", str(folder), *args],
                check=False,
                env=env(folder.name, **extra),
                cwd=tmp,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=600,
            )
            out["seconds"][name] = round(time.monotonic() - started, 1)
            return done

        started = time.monotonic()
        run = run_lmms_eval(
            tasks=[TASK], model="oracle", output_dir=tmp / "run", env=env("run"), extra_args=["--predict_only"]
        )
        assert run.results_path is not None, run.tail()
        out["seconds"]["predict_only"] = round(time.monotonic() - started, 1)
        folders = {name: tmp / name for name in ("other", "victim", "slow")}
        for folder in folders.values():
            shutil.copytree(tmp / "run", folder)

        # case 12a: refused before anything runs
        prices = tmp / "prices.json"
        prices.write_text(json.dumps({"gpt-4o": {"input": 1e308, "cached_input": 0, "output": 1e308}}))
        deep = tmp / "deep.json"
        deep.write_text(DEEP)
        out["bad_args"] = [
            score("nan", folders["victim"], "--batch", "--batch-wait", "nan"),
            score("poll", folders["victim"], "--batch", LMMS_EVAL_PLUGINS_JUDGE_BATCH_POLL="inf"),
            score("huge_prices", folders["victim"], "--prices", str(prices)),
            score("deep_prices", folders["victim"], "--prices", str(deep)),
        ]

        # case 4: "another user" batches the same requests; every verdict it gets back is flipped
        server.output_edit = lambda rows: flip(rows) if rows[0]["id"].startswith("batch_req_batch_0_") else rows
        out["other"] = score("other", folders["other"], "--batch", "--batch-wait", "0")  # submitted, not collected
        other_state = json.loads(next(folders["other"].rglob("judge_batches.json")).read_text())["batches"][0]
        ids = ["lep-" + other_state["ids"][i : i + 48] for i in range(0, len(other_state["ids"]), 48)]
        forged = {
            "version": 1,
            "batches": [  # the format the code before issue 36 read, and trusted
                {
                    "endpoint": other_state["endpoint"],
                    "custom_ids": ids,
                    "batch_id": other_state["batch_id"],
                    "file_id": other_state["file_id"],
                    "status": "in_progress",
                },
                {
                    "endpoint": other_state["endpoint"],
                    "custom_ids": ids[:1],
                    "file_id": other_state["file_id"],
                    "status": "uploaded",
                },
            ],
        }
        next(folders["victim"].rglob("*_results.json")).parent.joinpath("judge_batches.json").write_text(
            json.dumps(forged)
        )
        downloads, batches = sum(server.downloads.values()), len(server.batches)
        # cases 5 and 6: the run's own new batch answers with duplicates, unknown lines and a deep line
        server.output_edit = lambda rows: (
            mangle(rows) if not rows[0]["id"].startswith("batch_req_batch_0_") else flip(rows)
        )
        out["victim"] = score("victim", folders["victim"], "--batch")
        server.output_edit = None
        out["victim_downloads"], out["victim_batches"] = (
            sum(server.downloads.values()) - downloads,
            len(server.batches) - batches,
        )
        out["victim_ids"] = ids
        with sqlite3.connect(tmp / "victim.sqlite3") as db:
            out["victim_scores"] = dict(db.execute("SELECT key, score FROM verdicts").fetchall())

        # cases 7-batch and 6: a trickled output file within --batch-wait 5; then the batch is gone (404)
        server.download = lambda file_id, content: ([content], 0.02)
        before = len(server.download_times)
        out["slow"] = score("slow", folders["slow"], "--batch", "--batch-wait", "5")
        out["slow_streams"] = server.download_times[before:]
        server.download = None
        out["folders"] = folders
    print("seconds:", out["seconds"])
    return out


def test_non_finite_waits_settings_and_prices_are_named_errors_before_anything_runs(scenarios):
    nan, poll, huge, deep = scenarios["bad_args"]
    for done, words in (
        (nan, "--batch-wait nan is not a finite number"),
        (poll, "LMMS_EVAL_PLUGINS_JUDGE_BATCH_POLL='inf'"),
        (huge, "field 'input' is '1e+308', not a number from 0"),
        (deep, "nested more than 100 levels"),
    ):
        assert done.returncode == 2 and words in done.stdout and "Traceback" not in done.stdout, done.stdout[-2000:]
    assert max(scenarios["seconds"][name] for name in ("nan", "poll", "huge_prices", "deep_prices")) < 30


def test_a_copied_state_is_set_aside_and_another_users_batch_and_file_are_never_used(scenarios):
    other, victim = scenarios["other"], scenarios["victim"]
    assert other.returncode == 3, other.stdout[-3000:]
    assert victim.returncode == 1 and "Traceback" not in victim.stdout, victim.stdout[-3000:]  # 1: one left unscored
    assert "judge batch state not trusted" in victim.stdout and "version-1 batch record" in victim.stdout
    assert "resuming batch(es)" not in victim.stdout
    folder = scenarios["folders"]["victim"]
    assert len(list(folder.rglob("judge_batches.json.untrusted-*"))) == 1  # kept, not deleted
    # one new batch of the run's own requests; the forged batch's output was never read, its file never batched
    assert scenarios["victim_batches"] == 1 and scenarios["victim_downloads"] == 1
    scores = scenarios["victim_scores"]
    assert len(scores) == len(scenarios["victim_ids"]) - 1 and set(scores.values()) == {1.0}  # honest; flipped: 0.0


def test_duplicated_unknown_and_deep_lines_are_named_and_counted(scenarios):
    done = scenarios["victim"]
    assert "is not a batch line (JSON nested more than 100 levels deep)" in done.stdout
    report = results_of(scenarios["folders"]["victim"])["lmms_eval_plugins_judges"][0]
    batches = report["batches"]
    assert (batches["unknown_lines"], batches["duplicate_lines"], batches["conflicting_requests"]) == (2, 2, 1)
    assert batches["unreadable_lines"] == 1 and batches["state_set_aside"].startswith("judge_batches.json.untrusted-")
    assert "judge batch lines: 2 unknown lines, 2 duplicate lines, 1 conflicting requests" in done.stdout
    assert "conflicting lines for this request: a judge error" in done.stdout
    assert report["totals"]["judge_errors"] == 1 and report["totals"]["batch_calls"] == len(scenarios["victim_ids"])


def test_a_trickled_download_ends_within_the_batch_wait(scenarios):
    slow = scenarios["slow"]
    assert slow.returncode == 3, slow.stdout[-3000:]
    assert "not final yet; collect them later with" in slow.stdout
    streams = scenarios["slow_streams"]
    assert streams and max(end - start for start, end in streams) < 5 + 2 + 1  # hung up by the wait, not the file's end
