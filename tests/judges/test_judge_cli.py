"""A judged task through the real ``lmms-eval`` CLI (subprocess) and the loopback judge server."""

from __future__ import annotations

import json

import pytest
from judged_task import write_judged_task
from judge_server import TEST_API_KEY

from lmms_eval_plugins.cli_run import run_lmms_eval

pytestmark = pytest.mark.cli

TASK = "judged_demo"
DOCS = [
    {"id": i, "question": f"Question {i}?", "answer": "A", "oracle_response": "A" if i % 3 else "B"} for i in range(6)
]
EXPECTED = 100.0 * sum(1 for d in DOCS if d["oracle_response"] == d["answer"]) / len(DOCS)


def write_task(folder):
    return write_judged_task(folder, TASK, DOCS, judge="semantic_match", metric="acc_r", max_new_tokens=16)


def test_judged_task_end_to_end(tmp_path, server, monkeypatch):
    task_dir = write_task(tmp_path / "tasks")
    out = tmp_path / "out"
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_REPORT", str(out) + "/")

    # no endpoint: an error before inference says how to fix it; the model still runs, the results and
    # samples are written, and the judged metric is null (unscored), never 0
    run = run_lmms_eval(tasks=TASK, model="oracle", output_dir=out, include_path=str(task_dir), timeout=600)
    assert run.results_path is not None, run.output[-12000:]
    assert "OPENAI_BASE_URL" in run.output and "LMMS_EVAL_PLUGINS_JUDGE=offline" in run.output
    assert run.output.index("OPENAI_BASE_URL") < run.output.index("Running generate_until requests")
    assert run.results["results"][TASK]["acc_r,none"] is None
    assert run.results["results"][TASK]["judge_errors,none"] == len(DOCS)
    assert all(
        json.loads(s["filtered_resps"][0])["judge"]["error"].startswith("not judged: ") for s in run.samples(TASK)
    )
    assert server.n_requests == 0

    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    # lmms-eval's model classes' variable, pointing elsewhere: the judge does not read it
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:9/v1")
    run = run_lmms_eval(tasks=TASK, model="oracle", output_dir=out, include_path=str(task_dir), timeout=600)
    assert run.results_path is not None, run.output[-12000:]
    # one line on the console says where the judge goes (host only), before inference starts
    host = server.base_url.removesuffix("/v1")
    announced = f"lmms-eval-plugins judge: semantic_match v1 -> model gpt-4o at {host} (from OPENAI_BASE_URL)"
    assert run.output.count(announced) == 1, run.output[-12000:]
    assert run.output.index(announced) < run.output.index("Running generate_until requests")
    assert TEST_API_KEY not in run.output
    metrics = run.results["results"][TASK]
    assert metrics["acc_r,none"] == pytest.approx(EXPECTED)
    assert metrics["judge_errors,none"] == 0
    assert server.n_requests == len(DOCS)
    assert {b["model"] for b in server.requests} == {"gpt-4o"}
    samples = run.samples(TASK)
    by_doc = {s["doc_id"]: s for s in samples}
    for doc in DOCS:
        sample = by_doc[doc["id"]]
        # lmms-eval's logger str()s filtered responses: ours turn into JSON
        judged = json.loads(sample["filtered_resps"][0])
        right = doc["oracle_response"] == doc["answer"]
        assert judged["text"] == doc["oracle_response"] and judged["judge"]["verdict"] == float(right)
        assert sample["acc_r"]["verdict"] == float(right) and sample["acc_r"]["error"] is None
    report = json.loads((out / "judge_report.json").read_text())
    assert report["by_model"]["gpt-4o"]["calls"] == len(DOCS)

    # a re-run takes every verdict from the cache
    run = run_lmms_eval(tasks=TASK, model="oracle", output_dir=out, include_path=str(task_dir), timeout=600)
    assert run.results["results"][TASK]["acc_r,none"] == pytest.approx(EXPECTED)
    assert server.n_requests == len(DOCS)
    # the key is nowhere in what the runs wrote
    for path in out.rglob("*"):
        if path.is_file():
            assert TEST_API_KEY not in path.read_text(errors="replace"), path
