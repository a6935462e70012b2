"""Scale-out on the CPU: two processes (``accelerate launch``, gloo) give the metrics of one, and share
one judge cache safely.

The recipe (docs/scale-out.md): ``ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2
-m lmms_eval ...``. ``--cpu --num_processes 2`` is NOT it: accelerate then starts a single process.
lmms-eval shards the docs by rank (doc i goes to rank i mod N), gathers the per-doc metric items and
the logged samples to rank 0, and aggregates there; our protocol replays (MMErroR's two stages,
CausalStep's chains) and the judged aggregations therefore see every doc, whichever rank asked it.

The model is ``random`` (seeded per task and doc, so its answers do not depend on the rank); the
judge is the real LLM judge client against the loopback server of ``tests/judge_server.py``, with one
SQLite cache shared by both processes.
"""

from __future__ import annotations

import socket
import sqlite3
import sys
from pathlib import Path

import pytest
from judge_server import TEST_API_KEY, JudgeServer

from lmms_eval_plugins.tasks_command import task_names
from lmms_eval_plugins.cli_run import RunResult, run_lmms_eval

pytestmark = pytest.mark.cli

# Judged tasks first (the point of the shared cache), then the two replayed protocols.
WANTED = ("virectify_sample", "crossvid_ccqa_sample", "causalstep_sample", "mmerror_sample")
TASKS = [t for t in WANTED if t in task_names()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def accelerate_launcher(processes: int) -> list[str]:
    """``accelerate launch`` for N CPU processes; run_lmms_eval appends ``-m lmms_eval ...``."""
    accelerate = Path(sys.executable).with_name("accelerate")
    # --multi_gpu only selects accelerate's multi-process launcher (torch elastic); ACCELERATE_USE_CPU=1
    # in the environment makes each process's Accelerator use the CPU with the gloo backend.
    return [
        str(accelerate),
        "launch",
        "--multi_gpu",
        "--num_processes",
        str(processes),
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
    ]


def metrics(run: RunResult) -> dict[str, dict]:
    """Every task's metrics (stderr fields left out: 'N/A' for these aggregations)."""
    out = {}
    for task, values in run.results.get("results", {}).items():
        out[task] = {k: v for k, v in values.items() if "stderr" not in k}
    return out


def assert_same(a, b, where: str = "") -> None:
    """Equal up to float rounding: rank 0 aggregates the gathered items in rank order, not doc order."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), f"{where}: keys differ: {sorted(set(a) ^ set(b))}"
        for key in a:
            assert_same(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9, abs=1e-12, nan_ok=True), f"{where}: {a} != {b}"
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{where}: lengths differ"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def cache_rows(path: Path) -> dict[str, tuple]:
    with sqlite3.connect(path) as conn:
        return {row[0]: tuple(row[1:]) for row in conn.execute("SELECT key, judge, score, detail FROM verdicts")}


@pytest.fixture()
def judge_env(tmp_path, isolated_env):
    with JudgeServer(lifetime=1200) as server:
        yield (
            server,
            {
                "OPENAI_BASE_URL": server.base_url,
                "OPENAI_API_KEY": TEST_API_KEY,
                "LMMS_EVAL_PLUGINS_JUDGE": "llm",  # the LLM judge client, not the offline stand-in
                "ACCELERATE_USE_CPU": "1",
                "CUDA_VISIBLE_DEVICES": "",
                "OMP_NUM_THREADS": "1",
            },
        )


def test_two_processes_match_one_and_share_the_judge_cache(tmp_path, judge_env):
    from lmms_eval_plugins.models._base import DocAnsweringModel

    if not hasattr(DocAnsweringModel, "device"):
        pytest.fail(
            "DocAnsweringModel (oracle/random) has no `device`: lmms-eval's evaluator puts its per-rank "
            "request count on `lm.device` when WORLD_SIZE > 1 (see docs/scale-out.md); add the property"
        )
    assert TASKS, "no judged or replayed sample task found"
    server, env = judge_env
    model_args = "seed=3"
    cache_one, cache_two = tmp_path / "one" / "judge.sqlite3", tmp_path / "two" / "judge.sqlite3"

    one = run_lmms_eval(
        tasks=TASKS,
        model="random",
        model_args=model_args,
        output_dir=tmp_path / "out1",
        env={**env, "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(cache_one)},
        timeout=900,
    )
    asked_by_one = len(server.requests)
    two = run_lmms_eval(
        tasks=TASKS,
        model="random",
        model_args=model_args,
        output_dir=tmp_path / "out2",
        env={**env, "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(cache_two)},
        timeout=900,
        launcher=accelerate_launcher(2),
    )
    asked_by_two = len(server.requests) - asked_by_one

    # both runs completed every task, and two processes really ran
    assert one.results_path is not None, one.tail()
    assert two.results_path is not None, two.tail()
    assert "Running on rank 1" in two.output, "accelerate started only one process"
    assert set(metrics(one)) == set(metrics(two)), (sorted(set(metrics(one)) ^ set(metrics(two))), two.tail())
    assert set(TASKS) <= set(metrics(one)) | set(one.results.get("groups", {}))
    # identical metrics, leaf tasks and groups alike
    try:
        assert_same(metrics(two), metrics(one), "results")
        assert_same(two.results.get("groups", {}), one.results.get("groups", {}), "groups")
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}\n--- one process:\n{one.tail(3000)}\n--- two processes:\n{two.tail(3000)}"
        ) from None
    # rank 0 gathered every logged sample (lmms-eval gathers them with gather_object)
    for task in one.results["n-samples"]:  # leaf tasks
        n = one.results["n-samples"][task]["effective"]
        assert two.results["n-samples"][task]["effective"] == n
        assert (
            sorted(s["doc_id"] for s in two.samples(task))
            == sorted(s["doc_id"] for s in one.samples(task))
            == list(range(n))
        )

    # the shared cache: both processes wrote to one SQLite file, nothing lost, nothing failed
    judged = [t for t in TASKS if t in ("virectify_sample", "crossvid_ccqa_sample")]
    if judged:
        rows_one, rows_two = cache_rows(cache_one), cache_rows(cache_two)
        assert rows_one and rows_two == rows_one
        assert asked_by_two >= len(rows_two)  # every verdict came from a call (the ranks' items are disjoint docs)
        for task in judged:  # no judge call failed in either process
            errors = [v for k, v in metrics(two)[task].items() if k.split(",")[0].endswith("judge_errors")]
            assert errors and all(v == 0 for v in errors), (task, errors)
        assert "database is locked" not in two.output
        # each rank writes its judge accounting next to the results (lmms-eval's --output_path)
        assert {p.name for p in (tmp_path / "out2").glob("judge_report*.json")} >= {
            "judge_report.json",
            "judge_report.rank1.json",
        }

        # a second two-process run reads every verdict from the shared cache: no new call
        before = len(server.requests)
        again = run_lmms_eval(
            tasks=TASKS,
            model="random",
            model_args=model_args,
            output_dir=tmp_path / "out3",
            env={**env, "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(cache_two)},
            timeout=900,
            launcher=accelerate_launcher(2),
        )
        assert len(server.requests) == before, "cached verdicts were asked again"
        try:
            assert_same(metrics(again), metrics(one), "results")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- cached two-process run:\n{again.tail(4000)}") from None
        assert cache_rows(cache_two) == rows_one
