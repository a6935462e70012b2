"""Judging through a Batch API (issue 31): the pure parts, and the client against the loopback batch server."""

from __future__ import annotations

import json
import os

import pytest
from batch_server import BatchServer, refused
from judge_server import TEST_API_KEY
from lmms_eval_plugins.judges import JudgeItem
from lmms_eval_plugins.judges.accounting import (
    Price,
    PriceTableError,
    cost_section,
    estimated_cost,
    read_prices,
)
from lmms_eval_plugins.judges.batch import (
    STATE_FILE,
    BatchClient,
    BatchRun,
    BatchSettings,
    BatchStateError,
    read_state,
    write_state,
)
from lmms_eval_plugins.judges.batch_requests import (
    BatchRequest,
    custom_id,
    item_fields,
    read_output_line,
    request_line,
    split_batches,
)
from lmms_eval_plugins.judges.cache import VerdictCache, verdict_key
from lmms_eval_plugins.judges.endpoint import Endpoint
from lmms_eval_plugins.judges.reply import cached_tokens
from lmms_eval_plugins.judges.semantic_match import SemanticMatchJudge


def requests_for(n: int, base_url: str, wrong_every: int = 3) -> list[BatchRequest]:
    judge = SemanticMatchJudge()
    out = []
    for i in range(n):
        item = JudgeItem(question=f"Question {i}?", prediction="B" if i % wrong_every == 0 else "A", reference="A")
        messages = judge.build_messages(item)
        key = verdict_key(
            judge=judge.name,
            version=judge.version,
            model="gpt-4o",
            endpoint=base_url,
            messages=messages,
            sampling=judge.sampling,
        )
        out.append(
            BatchRequest(
                key, judge.name, judge.version, "gpt-4o", base_url, dict(judge.sampling), messages, item_fields(item)
            )
        )
    return out


def expected_score(i: int, wrong_every: int = 3) -> float:
    return 0.0 if i % wrong_every == 0 else 1.0


# ---- pure parts ---------------------------------------------------------------------------------


def test_split_batches_respects_both_limits():
    assert split_batches([10] * 5, max_requests=2, max_bytes=1000) == [(0, 2), (2, 4), (4, 5)]
    assert split_batches([40, 40, 40, 10], max_requests=10, max_bytes=85) == [(0, 2), (2, 4)]
    assert split_batches([100, 5], max_requests=10, max_bytes=50) == [(0, 1), (1, 2)]  # an oversize line alone
    assert split_batches([], max_requests=1, max_bytes=1) == []
    with pytest.raises(ValueError):
        split_batches([1], max_requests=0, max_bytes=1)


def test_custom_ids_are_stable_and_lines_carry_the_sync_body():
    a, b = requests_for(2, "http://h/v1")
    assert a.custom_id == custom_id(a.key) == requests_for(1, "http://h/v1")[0].custom_id
    assert a.custom_id != b.custom_id
    line = json.loads(request_line(a))
    assert line == {
        "custom_id": a.custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "gpt-4o", "messages": a.messages, **a.sampling},
    }
    assert BatchRequest.from_json(a.to_json()) == a and a.judge_item().prediction == "B"


def test_output_lines_are_read_strictly():
    ok = read_output_line(json.dumps({"custom_id": "x", "response": {"status_code": 200, "body": {"choices": []}}}))
    assert (ok.status, ok.error) == (200, "")
    bad = read_output_line(json.dumps({"custom_id": "x", **refused("no")}))
    assert bad.status == 400 and bad.error == "HTTP 400: no"
    gone = read_output_line(
        json.dumps({"custom_id": "x", "response": None, "error": {"code": "batch_expired", "message": "m"}})
    )
    assert gone.status is None and gone.error.startswith("batch_expired")
    for text in ("[]", "{}", '{"custom_id": 3}'):
        with pytest.raises(ValueError):
            read_output_line(text)


def test_cached_tokens_from_usage():
    assert cached_tokens({"usage": {"prompt_tokens_details": {"cached_tokens": 1024}}}) == 1024
    assert cached_tokens({"usage": {"prompt_tokens": 5}}) == 0
    assert cached_tokens({"usage": {"prompt_tokens_details": {"cached_tokens": -3}}}) == 0


def test_estimated_cost_by_hand():
    price = Price(input=2.0, cached_input=0.5, output=8.0, batch_factor=0.5)
    # sync: 1M in (250k cached), 100k out: 0.75*2 + 0.25*0.5 + 0.1*8 = 2.425
    sync = {"tokens_in": 1_000_000, "cached_tokens": 250_000, "tokens_out": 100_000}
    assert estimated_cost(sync, price) == pytest.approx(2.425)
    # the same all through a batch: half
    batch = {**sync, "batch_tokens_in": 1_000_000, "batch_cached_tokens": 250_000, "batch_tokens_out": 100_000}
    assert estimated_cost(batch, price) == pytest.approx(1.2125)
    section = cost_section({"gpt-4o": sync, "other": {"tokens_in": 5}}, {"gpt-4o": price}, "p.json")
    assert section["total"] == pytest.approx(2.425) and section["models_without_price"] == ["other"]


def test_price_table_errors_name_the_file_model_and_field(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"gpt-4o": {"input": 2.5, "cached_input": 1.25, "output": 10, "batch_factor": 0.5}}))
    assert read_prices(path)["gpt-4o"].batch_factor == 0.5
    path.write_text(json.dumps({"gpt-4o": {"input": "2.5", "cached_input": 1, "output": 1}}))
    with pytest.raises(PriceTableError, match=r"prices.json: 'gpt-4o' field 'input' is '2.5'"):
        read_prices(path)
    path.write_text(json.dumps({"gpt-4o": {"input": 1, "cached_input": 1, "output": 1, "discount": 1}}))
    with pytest.raises(PriceTableError, match="unknown field"):
        read_prices(path)


# ---- the client against the loopback batch server -------------------------------------------------


@pytest.fixture
def batch_env(tmp_path):
    def make(server: BatchServer, **settings):
        endpoint = Endpoint(server.base_url, TEST_API_KEY)
        cache = VerdictCache(tmp_path / "cache.sqlite3")
        folder = tmp_path / "run"
        folder.mkdir(exist_ok=True)
        logged: list[str] = []
        client = BatchClient(endpoint, cache, folder, BatchSettings(poll_s=0.01, **settings), log=logged.append)
        return client, cache, folder, logged

    return make


def run_all(client, requests, wait=None):
    run = BatchRun()
    state = client.submit(requests, run)
    client.collect(requests, state, run, wait)
    return run


def test_batches_split_poll_and_ingest_every_verdict(batch_env):
    with BatchServer(lifetime=60, max_requests=4, min_cached_tokens=64) as server:
        client, cache, folder, logged = batch_env(server, max_requests=4)
        requests = requests_for(10, server.base_url)
        run = run_all(client, requests)
        assert len(server.batches) == 3 and server.sync_calls == 0
        assert run.outcomes == {"batch_0": "completed", "batch_1": "completed", "batch_2": "completed"}
        rows = cache.get_many(r.key for r in requests)
        assert [rows[r.key]["score"] for r in requests] == [expected_score(i) for i in range(10)]
        assert any("3/3 final, 10/10 requests done" in line for line in logged), logged
        stats = run.accounting.snapshot()["totals"]
        assert stats["batch_calls"] == 10 and stats["calls"] == 0 and stats["cached_tokens"] > 0
        assert stats["tokens_in"] > stats["cached_tokens"] == stats["batch_cached_tokens"]
        state = read_state(folder / STATE_FILE)
        assert [e["batch_id"] for e in state["batches"]] == ["batch_0", "batch_1", "batch_2"]
        assert TEST_API_KEY not in (folder / STATE_FILE).read_text()
        # nothing pending any more: a second run submits nothing
        assert run_all(client, []).submitted == []


def test_a_resumed_run_polls_the_recorded_batches_and_creates_none(batch_env):
    with BatchServer(lifetime=60) as server:
        client, cache, folder, _ = batch_env(server)
        requests = requests_for(4, server.base_url)
        server.hold = True
        first = run_all(client, requests, wait=0.05)
        assert first.submitted == ["batch_0"] and first.waiting == ["batch_0"] and not first.done
        server.hold = False
        second = run_all(client, requests)  # the same pending requests: the recorded batch is resumed
        assert second.submitted == [] and second.resumed == ["batch_0"] and len(server.batches) == 1
        assert second.verdicts == 4


def test_a_batch_created_before_its_record_is_found_by_its_file(batch_env):
    with BatchServer(lifetime=60) as server:
        client, cache, folder, _ = batch_env(server)
        requests = requests_for(3, server.base_url)
        run = run_all(client, requests, wait=0)
        state = read_state(folder / STATE_FILE)
        del state["batches"][0]["batch_id"]  # the kill came after the create, before its record
        write_state(folder / STATE_FILE, state)  # as this machine would have recorded it (signed)
        again = run_all(client, requests)
        assert run.submitted == ["batch_0"] and again.submitted == [] and len(server.batches) == 1
        assert again.verdicts == 3


@pytest.mark.parametrize("fate", ["expired", "cancelled", "failed"])
def test_expired_cancelled_and_failed_batches_keep_what_they_returned(batch_env, fate):
    with BatchServer(lifetime=60, fate=lambda n: fate) as server:
        client, cache, folder, _ = batch_env(server)
        requests = requests_for(6, server.base_url)
        run = run_all(client, requests)
        assert run.outcomes == {"batch_0": fate}
        returned = 0 if fate == "failed" else 3
        assert run.verdicts == returned and len(run.failures) == 6 - returned
        assert all(fate in why for why in run.failures.values())
        assert len(cache.get_many(r.key for r in requests)) == returned
        entry = read_state(folder / STATE_FILE)["batches"][0]
        assert entry["outcome"].startswith(fate) and entry["verdicts"] == returned
        # the next run submits only what has no verdict
        server.fate = lambda n: "completed"
        assert run_all(client, requests[returned:]).verdicts == 6 - returned


def test_refused_failed_and_unparseable_lines_stay_without_verdict(batch_env):
    ids = {}

    def fault(cid, body):
        return refused() if cid == ids["refused"] else None

    def behaviour(request):
        from judge_server import unparseable

        return unparseable() if "Question 2?" in json.dumps(request.body) else None

    with BatchServer(lifetime=60, line_fault=fault, behaviour=behaviour) as server:
        client, cache, folder, _ = batch_env(server)
        requests = requests_for(4, server.base_url)
        ids["refused"] = requests[1].custom_id
        run = run_all(client, requests)
        assert run.outcomes == {"batch_0": "completed"} and run.verdicts == 2
        assert run.failures[requests[1].custom_id].startswith("HTTP 400")
        assert run.failures[requests[2].custom_id].startswith("unparseable reply")
        assert set(cache.get_many(r.key for r in requests)) == {requests[0].key, requests[3].key}
        assert run.accounting.snapshot()["totals"]["batch_failed"] == 2


def test_a_damaged_state_file_is_set_aside_with_a_named_warning_and_its_requests_planned_afresh(batch_env):
    # issue 36: a damaged state no longer stops every later run; it is kept under another name, never deleted
    with BatchServer(lifetime=60) as server:
        client, _, folder, logged = batch_env(server)
        (folder / STATE_FILE).write_text("{not json")
        with pytest.raises(BatchStateError, match=f"{STATE_FILE} is not readable JSON.*delete"):
            read_state(folder / STATE_FILE)
        run = run_all(client, requests_for(1, server.base_url))
        assert run.submitted == ["batch_0"] and run.verdicts == 1
        aside = [p for p in folder.iterdir() if p.name.startswith(f"{STATE_FILE}.untrusted-")]
        assert len(aside) == 1 and aside[0].read_text() == "{not json"
        assert any(line.startswith("judge batch state not trusted:") and aside[0].name in line for line in logged), (
            logged
        )
        assert run.state_set_aside == aside[0].name


# ---- inside the replay: collecting and cache-only ----------------------------------------------------


def test_the_collecting_replay_calls_nothing_and_the_cache_only_one_leaves_misses_unscored(
    server, tmp_path, monkeypatch, fast
):
    from lmms_eval_plugins.judges.batch_requests import (
        COLLECTED,
        ENV_CACHE_ONLY,
        ENV_COLLECT,
        read_collected,
    )
    from lmms_eval_plugins.judges.runtime import JudgeRuntime

    judge, endpoint = SemanticMatchJudge(), Endpoint(server.base_url, TEST_API_KEY)
    made = [JudgeItem(question=f"Q{i}?", prediction="A", reference="A") for i in range(3)]
    runtime = JudgeRuntime(tmp_path / "c.sqlite3")
    collected = tmp_path / "collected.jsonl"
    monkeypatch.setenv(ENV_COLLECT, str(collected))
    outcomes = runtime.judge_items(judge, [*made, made[0]], model="gpt-4o", endpoint=endpoint, settings=fast)
    assert server.n_requests == 0 and all(o.error == COLLECTED for o in outcomes)
    pending = read_collected(collected)
    assert len(pending) == 3 and pending[0].judge_item().question == "Q0?"  # the duplicate is asked once
    monkeypatch.delenv(ENV_COLLECT)
    monkeypatch.setenv(ENV_CACHE_ONLY, "not judged: no batch verdict")
    runtime = JudgeRuntime(tmp_path / "c.sqlite3")  # the collecting replay's process (and counts) are thrown away
    outcomes = runtime.judge_items(judge, made, model="gpt-4o", endpoint=endpoint, settings=fast)
    assert server.n_requests == 0 and [o.error for o in outcomes] == ["not judged: no batch verdict"] * 3
    assert runtime.accounting.snapshot()["totals"]["judge_errors"] == 3


def test_the_shared_part_of_each_prompt_comes_before_the_per_request_nonce():
    from lmms_eval_plugins.judges.rubric import RubricJudge

    judge = RubricJudge()
    a, b = (
        judge.build_messages(JudgeItem(question=f"Q{i}", prediction=f"P{i}", reference="R", scoring_points=("x",)))
        for i in range(2)
    )
    assert a[0] == b[0]  # the system message (the instructions) is shared
    text = "\n".join(m["content"] for m in a)
    nonce = text.rsplit("<score-", 1)[1][:12]
    assert text.index(nonce) > len(os.path.commonprefix([text, "\n".join(m["content"] for m in b)]))


# ---- score's batch helpers (pure) ----------------------------------------------------------------------


def test_dry_run_lines_count_requests_tokens_and_cost(tmp_path):
    from lmms_eval_plugins.score_batch import dry_run_lines

    prices = tmp_path / "p.json"
    prices.write_text(json.dumps({"gpt-4o": {"input": 1_000_000, "cached_input": 0, "output": 0, "batch_factor": 0.5}}))
    pending = requests_for(2, "http://h/v1")
    chars = sum(len(m["content"]) for r in pending for m in r.messages)
    expected_in = sum((sum(len(m["content"]) for m in r.messages) + 3) // 4 for r in pending)
    lines = dry_run_lines(pending, str(prices), batch=True)
    assert lines[0].startswith("lmms-eval-plugins score --dry-run: 2 verdict request(s)") and chars > 0
    assert f"about {expected_in} input tokens" in "\n".join(lines)
    # 1 per token at input, half through the batch: exactly expected_in / 2
    assert lines[-1].startswith(f"  estimated cost at most {expected_in / 2:.4f}")


def test_the_collect_later_command_drops_only_the_wait():
    from lmms_eval_plugins.score_batch import collect_later_command

    assert (
        collect_later_command(["out dir", "--batch", "--batch-wait", "0", "--tasks", "a"])
        == "lmms-eval-plugins score 'out dir' --batch --tasks a"
    )
    assert collect_later_command(["o", "--batch-wait=5", "--batch"]) == "lmms-eval-plugins score o --batch"


def test_batch_options_are_checked_before_anything_runs(tmp_path):
    import argparse

    from lmms_eval_plugins.score_batch import check_arguments

    def args(**kw):
        return argparse.Namespace(
            **{"batch": False, "batch_wait": None, "batch_fallback": "none", "prices": None, **kw}
        )

    assert check_arguments(args(batch=True, batch_wait=0)) is None
    assert "go with --batch" in check_arguments(args(batch_wait=5))
    assert "go with --batch" in check_arguments(args(batch_fallback="sync"))
    assert ">= 0" in check_arguments(args(batch=True, batch_wait=-1))
    (tmp_path / "p.json").write_text("[]")
    assert "p.json" in check_arguments(args(prices=str(tmp_path / "p.json")))


def test_merge_adds_batch_counts_to_the_replays_accounting(tmp_path):
    from lmms_eval_plugins.score_batch import merge_accounting

    run = BatchRun()
    run.accounting.bump(
        SemanticMatchJudge(),
        "gpt-4o",
        batch_calls=2,
        tokens_in=100,
        cached_tokens=40,
        batch_tokens_in=100,
        batch_cached_tokens=40,
        tokens_out=2,
        batch_tokens_out=2,
    )
    run.outcomes = {"batch_0": "expired"}
    replay = {
        "by_model": {"gpt-4o": {"verdicts": 2, "cache_hits": 2, "calls": 0}},
        "by_judge": {},
        "totals": {"verdicts": 2},
    }
    report_file = tmp_path / "judge_report.json"
    report_file.write_text(json.dumps(replay))
    new = {"lmms_eval_plugins_judges": [json.loads(json.dumps(replay))]}
    merge_accounting(run, new, report_file)
    for report in (new["lmms_eval_plugins_judges"][0], json.loads(report_file.read_text())):
        row = report["by_model"]["gpt-4o"]
        assert (row["verdicts"], row["cache_hits"], row["batch_calls"], row["cached_tokens"], row["tokens_in"]) == (
            2,
            2,
            2,
            40,
            100,
        )
        assert report["totals"]["batch_calls"] == 2 and report["batches"]["outcomes"] == {"batch_0": "expired"}


def test_ctrl_c_while_polling_leaves_the_batches_recorded_and_says_how_to_resume(tmp_path, monkeypatch, capsys):
    import argparse

    from lmms_eval_plugins.judges import batch as batch_module
    from lmms_eval_plugins.judges.batch_requests import ENV_COLLECT, collect
    from lmms_eval_plugins.score_batch import prepare

    with BatchServer(lifetime=60) as server:
        server.hold = True
        folder = tmp_path / "run"
        folder.mkdir()
        env = {
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": TEST_API_KEY,
            "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(tmp_path / "c.sqlite3"),
        }

        def replay(replay_env, out):  # the collecting replay, as the judge runtime would fill it
            collect(replay_env[ENV_COLLECT], requests_for(3, server.base_url))
            return 0, "", out / "x_results.json"

        def interrupt(_seconds):
            raise KeyboardInterrupt

        monkeypatch.setattr(batch_module.time, "sleep", interrupt)
        args = argparse.Namespace(batch=True, dry_run=False, batch_wait=None, batch_fallback="none", prices=None)
        with pytest.raises(KeyboardInterrupt):
            prepare(args, ["run", "--batch"], folder / "x_results.json", env, tmp_path, replay)
        assert "the batches keep running at the provider" in capsys.readouterr().err
        assert [e["batch_id"] for e in read_state(folder / STATE_FILE)["batches"]] == ["batch_0"]


# ---------------------------------------------------------------- issue 40.4: a resume reuses the recorded requests


def _stored_run(folder):
    folder.mkdir(exist_ok=True)
    (folder / "20261129_000000_results.json").write_text("{}")
    (folder / "20261129_000000_samples_virectify_sample.jsonl").write_text("{}\n")
    return folder / "20261129_000000_results.json"


def test_the_run_key_ignores_how_long_one_waits_and_follows_what_is_asked(tmp_path):
    from lmms_eval_plugins.score_batch import run_key

    results = _stored_run(tmp_path / "run")
    env = {"LMMS_EVAL_PLUGINS_JUDGE": "llm", "OPENAI_API_KEY": "sk-1", "HOME": "/h"}
    key = run_key(["run", "--batch", "--batch-wait", "0", "--prices", "p.json"], env, results)
    assert key == run_key(["run", "--batch"], env, results)
    assert key == run_key(["run", "--batch", "--batch-wait=5", "-v"], {**env, "OPENAI_API_KEY": "sk-2"}, results)
    assert key == run_key(["run", "--batch"], {**env, "HOME": "/other"}, results)
    assert key == run_key(["run", "--batch"], {**env, "LMMS_EVAL_PLUGINS_JUDGE_PRICES": "/p.json"}, results)
    assert key != run_key(["run", "--batch", "--judge-model", "m2"], env, results)
    assert key != run_key(["run", "--batch"], {**env, "LMMS_EVAL_PLUGINS_JUDGE_MODEL": "m2"}, results)
    samples = results.parent / "20261129_000000_samples_virectify_sample.jsonl"
    samples.write_text('{"doc_id": 1}\n')  # the stored run changed
    assert key != run_key(["run", "--batch"], env, results)


def test_recorded_requests_are_reused_only_with_their_hash_and_run_key(tmp_path, batch_env):
    from lmms_eval_plugins.judges.batch_requests import collect
    from lmms_eval_plugins.score_batch import RECORDED_FILE, record_requests, recorded_requests

    with BatchServer(lifetime=60) as server:
        client, cache, folder, _ = batch_env(server)
        requests = requests_for(4, server.base_url)
        collect(tmp_path / "collected.jsonl", requests)
        sha = record_requests(list(reversed(requests)), folder)
        assert record_requests(requests, folder) == sha  # the same requests, in any order: the same bytes
        assert oct((folder / RECORDED_FILE).stat().st_mode & 0o777) == "0o600"
        server.hold = True
        run = BatchRun()
        state = client.submit(requests, run, provenance={"requests_sha256": sha, "run_key": "k1"})
        client.collect(requests, state, run, 0.05)
        state = read_state(folder / STATE_FILE)  # signed with the two fields
        host = client.endpoint.display
        scratch = tmp_path / "scratch"
        scratch.mkdir()
        reused = recorded_requests(folder, state, host, "k1", scratch)
        assert reused is not None and reused[1] == sha
        assert sorted(r.key for r in reused[0]) == sorted(r.key for r in requests)
        assert recorded_requests(folder, state, host, "k2", scratch) is None  # another run or options
        assert recorded_requests(folder, state, "elsewhere", "k1", scratch) is None  # no open batch there
        text = (folder / RECORDED_FILE).read_text()
        (folder / RECORDED_FILE).write_text(text.replace(requests[0].key, "0" * len(requests[0].key)))
        assert recorded_requests(folder, state, host, "k1", scratch) is None  # edited: collected again
        (folder / RECORDED_FILE).unlink()
        (folder / RECORDED_FILE).symlink_to(tmp_path / "collected.jsonl")
        assert recorded_requests(folder, state, host, "k1", scratch) is None  # never through a link
        (folder / RECORDED_FILE).unlink()
        (folder / RECORDED_FILE).write_text(text)
        assert recorded_requests(folder, state, host, "k1", scratch) is not None
        server.hold = False
        done = BatchRun()
        client.collect(requests, client.submit(requests, done), done, None)
        assert done.verdicts == 4
        assert recorded_requests(folder, read_state(folder / STATE_FILE), host, "k1", scratch) is None  # all final
