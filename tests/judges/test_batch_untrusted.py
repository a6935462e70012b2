"""Issue 36, the Batch API path: units against the loopback batch server, each failing on the code before it.

Case 4 (a copied or edited ``judge_batches.json`` is not trusted), 5 (each output line bound to its request),
6 (every API or file fault a named outcome, never a stuck state), 7-batch (the output download under a cap and
a deadline, within ``--batch-wait``), 12a (prices and settings that are not finite numbers), 15b (a compact
state, written only when it changed, under a size cap). The CLI tests are in ``test_batch_untrusted_cli.py``.
"""

from __future__ import annotations

import argparse
import json
import time

import pytest
from batch_server import BatchServer
from judge_server import TEST_API_KEY
from test_batch import batch_env, run_all  # noqa: F401 (batch_env: the shared client-making fixture)
from lmms_eval_plugins.judges import JudgeItem
from lmms_eval_plugins.judges.batch import (
    STATE_FILE,
    BatchClient,
    BatchSettings,
    BatchStateError,
    check_state,
    read_state,
    write_state,
)
from lmms_eval_plugins.judges.batch_requests import (
    BatchRequest,
    item_fields,
    read_output_line,
)
from lmms_eval_plugins.judges.cache import VerdictCache, verdict_key
from lmms_eval_plugins.judges.endpoint import Endpoint
from lmms_eval_plugins.judges.rubric import RubricJudge
from lmms_eval_plugins.judges.semantic_match import SemanticMatchJudge

DEEP = "[" * 100_000 + "]" * 100_000


def requests_for(n: int, base_url: str, *, rubric: bool = False) -> list[BatchRequest]:
    """n semantic-match requests (every third prediction wrong), then n rubric requests when asked."""
    out = []
    for judge in (SemanticMatchJudge(), *([RubricJudge()] if rubric else [])):
        for i in range(n):
            points = ("mentions A",) if judge.name != "semantic_match" else None
            item = JudgeItem(
                question=f"Question {i}?", prediction="B" if i % 3 == 0 else "A", reference="A", scoring_points=points
            )
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
                    key,
                    judge.name,
                    judge.version,
                    "gpt-4o",
                    base_url,
                    dict(judge.sampling),
                    messages,
                    item_fields(item),
                )
            )
    return out


def flip(rows):
    """Every binary verdict inverted (a forged batch of 'another user')."""
    for row in rows:
        message = row["response"]["body"]["choices"][0]["message"]
        message["content"] = {"0": "1", "1": "0"}.get(message["content"], message["content"])
    return rows


# ---- case 4: the state is bound to this user ------------------------------------------------------------


def test_a_copied_state_naming_another_users_batch_and_file_is_set_aside_and_never_used(batch_env, tmp_path):
    with BatchServer(lifetime=60) as server:
        client, cache, folder, logged = batch_env(server)
        requests = requests_for(6, server.base_url)
        # "another user": the same requests, batched and answered with every verdict flipped, state signed by another secret
        server.output_edit = flip
        other = BatchClient(
            Endpoint(server.base_url, TEST_API_KEY),
            VerdictCache(tmp_path / "other.sqlite3", secret=b"o" * 32),
            tmp_path,
            BatchSettings(poll_s=0.01),
            log=lambda _: None,
        )
        tmp_path.joinpath(STATE_FILE).unlink(missing_ok=True)
        forged = run_all(other, requests)
        assert forged.outcomes == {"batch_0": "completed"}
        server.output_edit = None
        copied = json.loads((tmp_path / STATE_FILE).read_text())
        copied["batches"][0]["ingested"] = False  # resume me
        copied["batches"].append({**copied["batches"][0], "batch_id": None, "file_id": "file-0"})
        del copied["batches"][1]["batch_id"]
        (folder / STATE_FILE).write_text(json.dumps(copied))
        downloads = dict(server.downloads)

        run = run_all(client, requests)
        assert run.resumed == [] and run.submitted == ["batch_1"]  # neither the batch nor the file id was used
        assert server.downloads.get("file-1") == downloads.get("file-1")  # the forged output was not read again
        assert len(server.batches) == 2 and server.batches["batch_1"]["input_file_id"] != "file-0"
        rows = cache.get_many(r.key for r in requests)
        assert [rows[r.key]["score"] for r in requests] == [0.0 if i % 3 == 0 else 1.0 for i in range(6)]
        aside = [p.name for p in folder.iterdir() if p.name.startswith(f"{STATE_FILE}.untrusted-")]
        assert len(aside) == 1 and run.state_set_aside == aside[0]
        assert any("judge batch state not trusted" in line and "did not record here" in line for line in logged), logged
        assert [e["batch_id"] for e in read_state(folder / STATE_FILE)["batches"]] == ["batch_1"]


def test_an_edited_entry_is_refused_and_the_signed_ones_are_resumed(batch_env):
    with BatchServer(lifetime=60) as server:
        client, cache, folder, logged = batch_env(server, max_requests=3)
        requests = requests_for(6, server.base_url)
        server.hold = True
        first = run_all(client, requests, wait=0)
        assert first.submitted == ["batch_0", "batch_1"]
        data = json.loads((folder / STATE_FILE).read_text())
        data["batches"][1]["batch_id"] = "batch_0"  # point the second entry at the first batch
        (folder / STATE_FILE).write_text(json.dumps(data))
        server.hold = False
        again = run_all(client, requests)
        assert again.resumed == ["batch_0"] and again.submitted == ["batch_2"]  # the edited entry planned afresh
        assert again.verdicts == 6 and len(cache.get_many(r.key for r in requests)) == 6
        assert any("1 of 2 batch(es)" in line and "signature does not hold" in line for line in logged), logged


def test_unsigned_and_older_states_do_not_verify(batch_env, tmp_path):
    secret = b"s" * 32
    path = tmp_path / STATE_FILE
    path.write_text(json.dumps({"version": 1, "batches": [{"endpoint": "h", "custom_ids": [], "batch_id": "b"}]}))
    assert check_state(path, secret)[1].startswith("is a version-1 batch record")
    entry = {"endpoint": "h", "ids": "0" * 48, "batch_id": "batch_9"}
    path.write_text(json.dumps({"version": 2, "batches": [entry]}))
    state, problem = check_state(path, secret)
    assert state["batches"] == [] and "not signed" in problem
    write_state(path, {"version": 2, "batches": [dict(entry)]}, secret)
    assert check_state(path, secret) == ({"version": 2, "batches": [json.loads(path.read_text())["batches"][0]]}, None)
    assert "signature does not hold" in check_state(path, b"t" * 32)[1]
    with pytest.raises(BatchStateError, match="delete it"):
        read_state(path, b"t" * 32)


# ---- case 5: verdicts bound to their request --------------------------------------------------------------


def rotate(rows):
    """Each line relabelled with the next line's custom_id."""
    ids = [r["custom_id"] for r in rows]
    return [{**r, "custom_id": ids[(i + 1) % len(ids)]} for i, r in enumerate(rows)]


def test_relabelled_lines_are_caught_by_the_rubric_nonce_and_the_batch_is_not_trusted(batch_env):
    with BatchServer(lifetime=60, output_edit=rotate) as server:
        client, cache, _, _ = batch_env(server)
        requests = requests_for(4, server.base_url, rubric=True)
        run = run_all(client, requests)
        assert run.verdicts == 0 and cache.get_many(r.key for r in requests) == {}
        assert run.relabelled >= 2 and run.outcomes["batch_0"].startswith("not trusted:")
        assert sum("answers another request" in why for why in run.failures.values()) == run.relabelled


def test_duplicates_that_disagree_are_a_judge_error_and_unknown_lines_are_counted(batch_env):
    def edit(rows):
        first = json.loads(json.dumps(rows[0]))
        flip([first])  # the same request, the other verdict
        return [*rows, first, rows[1], {**rows[2], "custom_id": "lep-" + "f" * 48}, {**rows[2], "custom_id": "x" * 500}]

    with BatchServer(lifetime=60, output_edit=edit) as server:
        client, cache, folder, _ = batch_env(server)
        requests = requests_for(4, server.base_url)
        run = run_all(client, requests)
        assert (run.duplicate_lines, run.conflicting, run.unknown_lines) == (2, 1, 2)
        assert "conflicting lines" in run.failures[requests[0].custom_id]
        assert set(cache.get_many(r.key for r in requests)) == {r.key for r in requests[1:]}
        entry = read_state(folder / STATE_FILE)["batches"][0]
        assert (entry["duplicate_lines"], entry["unknown_lines"]) == (2, 2)
        totals = run.accounting.snapshot()["totals"]
        assert totals["batch_calls"] == 4 and totals["batch_failed"] == 1  # a duplicate is not a second call


# ---- case 6: named outcomes, never a stuck state ----------------------------------------------------------


def test_a_deeply_nested_line_is_skipped_and_the_other_verdicts_are_kept(batch_env):
    with BatchServer(lifetime=60, output_edit=lambda rows: [rows[0], DEEP, *rows[1:]]) as server:
        client, cache, _, logged = batch_env(server)
        requests = requests_for(3, server.base_url)
        run = run_all(client, requests)
        assert run.verdicts == 3 and run.unreadable_lines == 1
        assert any("output file id line 2 is" in line for line in logged), logged
    with pytest.raises(ValueError, match="nested more than"):
        read_output_line(DEEP)


@pytest.mark.parametrize("fault", ["404", "types", "deep"])
def test_a_poll_that_fails_closes_the_batch_with_a_named_outcome_and_the_next_run_submits_again(batch_env, fault):
    answers = {
        "404": (404, b'{"error": {"message": "No batch found with id batch_0."}}'),
        "types": (200, json.dumps({"id": "batch_0", "status": ["completed"], "output_file_id": 7}).encode()),
        "deep": (200, DEEP.encode()),
    }
    with BatchServer(lifetime=60) as server:
        client, cache, folder, logged = batch_env(server)
        requests = requests_for(3, server.base_url)
        server.retrieve_fault = lambda batch_id, public: answers[fault] if batch_id == "batch_0" else None
        run = run_all(client, requests)
        final = run.outcomes["batch_0"]
        assert final.startswith("failed: could not be polled") and "submitted again" in final
        assert {"404": "HTTP 404", "types": "not one of", "deep": "unreadable reply"}[fault] in final
        assert len(run.failures) == 3 and read_state(folder / STATE_FILE)["batches"][0]["ingested"] is True
        again = run_all(client, requests)  # not stuck: planned afresh
        assert again.submitted == ["batch_1"] and again.verdicts == 3


def test_a_recorded_file_id_the_endpoint_does_not_know_is_uploaded_again(batch_env):
    with BatchServer(lifetime=60) as server:
        client, cache, folder, logged = batch_env(server)
        requests = requests_for(2, server.base_url)
        write_state(
            folder / STATE_FILE,
            {
                "version": 2,
                "batches": [
                    {
                        "endpoint": client.endpoint.display,
                        "ids": "".join(r.custom_id[4:] for r in requests),
                        "lines": 2,
                        "bytes": 1,
                        "status": "uploaded",
                        "file_id": "file-404",
                    }
                ],
            },
        )
        run = run_all(client, requests)
        assert run.submitted == ["batch_0"] and run.verdicts == 2
        assert any("file-404 was refused" in line and "HTTP 404" in line for line in logged), logged


def test_an_unreachable_endpoint_keeps_the_batch_for_the_next_run(batch_env):
    with BatchServer(lifetime=60) as server:
        client, cache, folder, logged = batch_env(server)
        requests = requests_for(2, server.base_url)
        server.retrieve_fault = lambda batch_id, public: (503, b'{"error": {"message": "busy"}}')
        run = run_all(client, requests)
        assert (
            run.waiting == ["batch_0"] and "HTTP 503" in run.notes[-1] and "run the same command again" in run.notes[-1]
        )
        server.retrieve_fault = None
        assert run_all(client, requests).resumed == ["batch_0"]


# ---- case 7-batch: the download under a cap and a deadline ---------------------------------------------------


def test_an_endless_output_file_stops_at_the_cap_and_keeps_what_was_read(batch_env):
    def endless(file_id, content):
        return (c for c in [content, *([b"x" * 65536] * 10_000)]), 0.0  # 655 MB if it were read to the end

    with BatchServer(lifetime=60, download=endless) as server:
        client, cache, _, logged = batch_env(server, max_output_bytes=1_000_000, max_reply_bytes=1024)
        requests = requests_for(3, server.base_url)
        run = run_all(client, requests)
        assert run.verdicts == 3 and run.outcomes["batch_0"].startswith(
            "failed: its output file id could not be read whole"
        )
        assert "LMMS_EVAL_PLUGINS_JUDGE_BATCH_MAX_OUTPUT_BYTES" in run.outcomes["batch_0"]
        assert len(run.failures) == 0 and run.unreadable_lines == 0  # the endless tail is no line: dropped as it came


def test_a_trickled_output_file_ends_within_the_batch_wait(batch_env):
    with BatchServer(lifetime=60, download=lambda file_id, content: ([content], 0.05)) as server:
        client, cache, _, _ = batch_env(server)
        requests = requests_for(3, server.base_url)
        started = time.monotonic()
        run = run_all(client, requests, wait=1.0)
        assert (
            run.waiting == ["batch_0"] and time.monotonic() - started < 1.0 + 2.0 + 1.5
        )  # the wait, one exchange floor
        assert run.verdicts == 0  # nothing half-read is stored: read whole by the next run


# ---- case 12a: prices and settings that are not finite numbers ---------------------------------------------


def test_extreme_or_deep_prices_and_non_finite_settings_are_named_errors(tmp_path, monkeypatch):
    from lmms_eval_plugins.judges.accounting import (
        PriceTableError,
        cost_section,
        read_prices,
    )
    from lmms_eval_plugins.judges.base import JudgeConfigError

    from lmms_eval_plugins.score_batch import check_arguments

    path = tmp_path / "p.json"
    path.write_text(json.dumps({"m": {"input": 1e308, "cached_input": 0, "output": 1e308, "batch_factor": 1e308}}))
    with pytest.raises(PriceTableError, match=r"'m' field 'input' is '1e\+308', not a number from 0 to 1e\+09"):
        read_prices(path)
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(PriceTableError, match="nested more than"):
        read_prices(path)
    path.write_text(json.dumps({"m": {"input": 1e9, "cached_input": 1e9, "output": 1e9, "batch_factor": 100}}))
    section = cost_section({"m": {"tokens_in": 10**30, "tokens_out": 10**30}}, read_prices(path), "p.json")
    json.dumps(section, allow_nan=False)  # finite, whatever the counts
    args = argparse.Namespace(batch=True, batch_wait=float("nan"), batch_fallback="none", prices=None)
    assert "not a finite number" in check_arguments(args)
    args.batch_wait = float("inf")
    assert "not a finite number" in check_arguments(args)
    args.batch_wait = None
    for value in ("nan", "inf", "-1"):
        monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_BATCH_POLL", value)
        with pytest.raises(JudgeConfigError, match="LMMS_EVAL_PLUGINS_JUDGE_BATCH_POLL"):
            BatchSettings.from_env()
        assert "LMMS_EVAL_PLUGINS_JUDGE_BATCH_POLL" in check_arguments(args)


# ---- case 15b: a compact state, written when it changed, under a cap ---------------------------------------


def test_the_state_is_compact_written_only_when_it_changed_and_capped(batch_env, monkeypatch):
    from lmms_eval_plugins import safe_files

    writes: list[str] = []
    real = safe_files.write_atomic
    monkeypatch.setattr(
        safe_files, "write_atomic", lambda path, data, **kw: (writes.append(str(path)), real(path, data, **kw))[1]
    )
    with BatchServer(lifetime=60) as server:
        client, cache, folder, logged = batch_env(server)
        requests = requests_for(40, server.base_url)
        server.hold = True
        run_all(client, requests, wait=1.0)  # many polls, one status (a wide window: the machine may be loaded)
        assert server.polls >= 3 and len(writes) <= 4, (server.polls, writes)  # recorded, uploaded, created (+1 poll)
        text = (folder / STATE_FILE).read_text()
        assert "\n" not in text.rstrip("\n") and "lep-" not in text  # no indent; ids as one string of hex
        assert len(text) < 40 * 48 + 1000
        server.hold = False
        (folder / STATE_FILE).write_text(text + " " * 5000)
        client.settings = BatchSettings(poll_s=0.01, max_state_bytes=4096)
        run = run_all(client, requests)
        assert "over the cap of 4,096" in run.notes[0] and run.submitted == ["batch_1"]


def test_a_bad_cache_secret_is_a_named_error_before_anything_is_submitted(tmp_path, monkeypatch, capsys):
    from lmms_eval_plugins.judges.batch_requests import ENV_COLLECT, collect
    from lmms_eval_plugins.score_batch import prepare

    secret = tmp_path / "bad.secret"
    secret.write_text("not hex at all\n")
    secret.chmod(0o600)
    with BatchServer(lifetime=60) as server:
        folder = tmp_path / "run"
        folder.mkdir()
        env = {
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": TEST_API_KEY,
            "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(tmp_path / "c.sqlite3"),
        }
        monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_CACHE_SECRET", str(secret))

        def replay(replay_env, out):
            collect(replay_env[ENV_COLLECT], requests_for(2, server.base_url))
            return 0, "", out / "x_results.json"

        args = argparse.Namespace(batch=True, dry_run=False, batch_wait=None, batch_fallback="none", prices=None)
        assert prepare(args, ["run", "--batch"], folder / "x_results.json", env, tmp_path, replay) == (2, None)
        err = capsys.readouterr().err
        assert "error: the judge cache secret" in err and "does not hold a secret" in err and "Traceback" not in err
        assert server.batches == {} and not (folder / STATE_FILE).exists()
