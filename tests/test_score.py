"""`lmms-eval-plugins score`: a stored run re-scored without the model, through `--model replay`.

Fast tests: the replay model's reply extraction and document checks, and every bad input (exit 2,
nothing written). CLI tests (two runs, each scored once): a run whose model requests all failed stays
unscored (the replies are failures; only the model can fix that); an oracle run re-scored gives the
same metrics exactly, beside the untouched original, and a tampered prompt stops the replay.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from lmms_eval.api.instance import Instance

from lmms_eval_plugins import score
from lmms_eval_plugins.models.replay import (
    Replay,
    ReplayError,
    lmms_doc_hash,
    reply_text,
)
from lmms_eval_plugins.outcome import REQUEST_FAILED
from lmms_eval_plugins.cli_run import OFFLINE_ENV, run_lmms_eval

STEM = "20250101_000000"
NULL_HASH = lmms_doc_hash(None)  # what lmms-eval 0.7.3 logs for every sample (its requests carry no doc)


# ------------------------------------------------------------------------------------------ helpers


def _write_run(folder: Path, samples: dict[str, list[dict]], *, versions: dict | None = None) -> Path:
    """A minimal lmms-eval output: results JSON plus one samples JSONL per task."""
    folder.mkdir(parents=True, exist_ok=True)
    tasks = sorted(samples)
    results = {
        "results": {t: {"alias": t, "score,none": 1.0, "unscored,none": 0} for t in tasks},
        "group_subtasks": {t: [] for t in tasks},
        "configs": {t: {"task": t} for t in tasks},
        "versions": versions or {t: 0.1 for t in tasks},
        "config": {"model": "m", "model_args": "x=1"},
    }
    path = folder / f"{STEM}_results.json"
    path.write_text(json.dumps(results, indent=2))
    for task, records in samples.items():
        (folder / f"{STEM}_samples_{task}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _sample(doc_id: int, **fields) -> dict:
    return {"doc_id": doc_id, "target": "A", "doc_hash": NULL_HASH, "input": f"Q{doc_id}", **fields}


def _request(doc_id: int, task: str = "t", prompt: str | None = None, idx: int = 0) -> Instance:
    return Instance(
        request_type="generate_until",
        arguments=(prompt or f"Q{doc_id}", {}, None, doc_id, task, "test"),
        idx=idx,
        metadata={"task": task, "doc_id": doc_id, "repeats": 1},
    )


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _score(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``score.main`` in this process (lmms-eval still runs in its subprocess); (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp, redirect_stdout(out), redirect_stderr(err):
        for key, value in (env or {}).items():
            mp.setenv(key, value)
        mp.delenv("LMMS_EVAL_PLUGINS_DATA_ROOT", raising=False)
        status = score.main(argv)
    return status, out.getvalue(), err.getvalue()


# ------------------------------------------------------------------------------ reply extraction


@pytest.mark.parametrize(
    "stored, reply",
    [
        ("Error Step: Step 2", "Error Step: Step 2"),  # take_first: the reply itself
        (["B"], "B"),  # lmms-eval's list of generations
        ([["B"]], "B"),
        (['{"text": "judged reply", "judge": {"verdict": 1.0}}'], "judged reply"),  # our judge's attachment, str()-ed
        ({"text": "judged reply", "judge": {}}, "judged reply"),
        (["E", '{"group": "v1", "ref": "v1/S1", "result": null}'], "E"),  # replay filter: [text, attachment]
        (
            '{"text": "the model answered JSON"}',
            '{"text": "the model answered JSON"}',
        ),  # a bare string is never decoded
        (["{not json"], "{not json"),
        ([], None),
        (None, None),
    ],
)
def test_reply_text(stored, reply):
    assert reply_text(stored) == reply


def test_replay_answers_every_request_with_its_stored_reply(tmp_path):
    path = _write_run(
        tmp_path,
        {
            "t": [
                _sample(0, filtered_resps="plain"),
                _sample(1, filtered_resps=['{"text": "judged", "judge": {"verdict": 0.0}}']),
                _sample(2, resps="<think>hm</think> B", filtered_resps="B"),  # before the reasoning-tag stripping
                _sample(3, filtered_resps=["[LMMS_EVAL_REQUEST_FAILED after 1 retries] Connection error."]),
            ]
        },
    )
    model = Replay(samples=str(path))
    replies = model.generate_until([_request(2), _request(0), _request(3), _request(1)])
    assert replies == [
        "<think>hm</think> B",
        "plain",
        "[LMMS_EVAL_REQUEST_FAILED after 1 retries] Connection error.",
        "judged",
    ]


def test_replay_refuses_a_changed_prompt_naming_file_task_and_doc(tmp_path):
    path = _write_run(tmp_path, {"t": [_sample(0, filtered_resps="A"), _sample(1, filtered_resps="B")]})
    with pytest.raises(ReplayError) as info:
        Replay(samples=str(path)).generate_until([_request(0), _request(1, prompt="Q1 with a new question")])
    message = str(info.value)
    assert f"{STEM}_samples_t.jsonl" in message and "task 't' doc_id 1" in message and "prompt differs" in message
    assert "re-run the model" in message


def test_replay_checks_the_doc_hash_when_the_request_carries_the_doc(tmp_path):
    doc = {"question": "how many?", "answer": 3}
    path = _write_run(tmp_path, {"t": [_sample(0, filtered_resps="3", doc_hash=lmms_doc_hash(doc))]})
    same = _request(0)
    same.doc = dict(doc)
    assert Replay(samples=str(path)).generate_until([same]) == ["3"]
    changed = _request(0)
    changed.doc = {**doc, "answer": 4}
    with pytest.raises(ReplayError, match=r"samples_t\.jsonl: task 't' doc_id 0: the document differs .*doc_hash"):
        Replay(samples=str(path)).generate_until([changed])


def test_replay_refuses_a_document_the_run_did_not_log(tmp_path):
    path = _write_run(tmp_path, {"t": [_sample(0, filtered_resps="A")]})
    with pytest.raises(ReplayError, match=r"task 't' doc_id 1: no reply stored"):
        Replay(samples=str(path)).generate_until([_request(0), _request(1)])
    with pytest.raises(ReplayError, match=r"no logged samples for task 'other'.*--log_samples"):
        Replay(samples=str(path)).generate_until([_request(0, task="other")])


# ------------------------------------------------------------------------------------ bad input: exit 2


def test_missing_folder_and_folder_without_results(tmp_path):
    status, _, err = _score([str(tmp_path / "nope")])
    assert status == 2 and "nope: no such folder" in err
    (tmp_path / "empty").mkdir()
    status, _, err = _score([str(tmp_path / "empty")])
    assert status == 2 and "no *_results.json" in err and "--log_samples" in err
    assert _snapshot(tmp_path / "empty") == {}


def test_a_run_without_logged_samples(tmp_path):
    path = _write_run(tmp_path / "out" / "model", {"t": [_sample(0, filtered_resps="A")]})
    path.with_name(f"{STEM}_samples_t.jsonl").unlink()
    before = _snapshot(tmp_path)
    status, _, err = _score([str(tmp_path / "out")])
    assert (
        status == 2
        and str(path) in err
        and "the run logged no samples" in err
        and "re-run lmms-eval with --log_samples" in err
    )
    assert _snapshot(tmp_path) == before


def test_a_truncated_samples_line_is_named_with_its_file_and_line(tmp_path):
    path = _write_run(tmp_path, {"t": [_sample(0, filtered_resps="A"), _sample(1, filtered_resps="B")]})
    samples_file = path.with_name(f"{STEM}_samples_t.jsonl")
    samples_file.write_text(samples_file.read_text()[:-20])  # an interrupted write: the last line is cut
    before = _snapshot(tmp_path)
    status, _, err = _score([str(tmp_path)])
    assert status == 2 and f"{samples_file}: line 2: invalid JSON" in err and "cut short" in err
    assert _snapshot(tmp_path) == before


def test_unknown_task_and_results_that_are_not_json(tmp_path):
    path = _write_run(tmp_path, {"t": [_sample(0, filtered_resps="A")]})
    status, _, err = _score([str(tmp_path), "--tasks", "t,missing"])
    assert status == 2 and "task 'missing' is not in" in err
    path.write_text('{"results": {')
    status, _, err = _score([str(tmp_path)])
    assert status == 2 and f"{path}: not valid JSON" in err


def test_tasks_groups_and_results_selection(tmp_path):
    data = {
        "results": {"g": {}, "a": {}, "b": {}, "c": {}},
        "configs": {"a": {}, "b": {}, "c": {}},
        "group_subtasks": {"g": ["a", "b"], "a": [], "b": [], "c": []},
    }
    assert score.run_tasks(data, None, tmp_path) == ["a", "b", "c"]
    assert score.run_tasks(data, "g,c,a", tmp_path) == ["a", "b", "c"]
    old = _write_run(tmp_path / "one", {"t": [_sample(0, filtered_resps="A")]})
    newer = tmp_path / "two" / "20250202_000000_results.json"
    newer.parent.mkdir()
    newer.write_text(json.dumps({"results": {}, score.SCORE_KEY: {"rescored_from": old.name}}))
    assert score.find_results(tmp_path) == old  # a re-score is not the default source
    assert score.find_results(tmp_path, str(newer)) == newer
    assert score.find_results(old) == old


def test_a_changed_task_version_or_gold_answer_is_refused(tmp_path):
    original = _write_run(tmp_path / "run", {"t": [_sample(0, filtered_resps="A")]}, versions={"t": 0.1})
    new = _write_run(tmp_path / "new", {"t": [_sample(0, filtered_resps="A")]}, versions={"t": 0.2})
    with pytest.raises(score.ScoreInputError, match=r"task 't' was version 0.1 in the run and is version 0.2 now"):
        score.check_same_run(original, score.read_results(original), new, score.read_results(new), ["t"])
    new = _write_run(tmp_path / "gold", {"t": [_sample(0, filtered_resps="A", target="B")]})
    with pytest.raises(score.ScoreInputError, match=r"doc_id 0: the gold answer differs"):
        score.check_same_run(original, score.read_results(original), new, score.read_results(new), ["t"])


def test_options_of_the_run_that_the_replay_keeps():
    config = {
        "limit": 5.0,
        "resolved_cli_args": {
            "limit": 5.0,
            "offset": 0,
            "num_fewshot": None,
            "reasoning_tags": "none",
            "include_path": None,
            "process_with_media": True,
            "gen_kwargs": "t=0",
        },
    }
    assert score.forwarded_options(config) == [
        "--limit=5.0",
        "--offset=0",
        "--reasoning_tags=none",
        "--process_with_media",
    ]
    # a value starting with '-' stays one value: it cannot smuggle in another lmms-eval option
    hostile = {"resolved_cli_args": {"system_instruction": "--include_path=/x"}}
    assert score.forwarded_options(hostile) == ["--system_instruction=--include_path=/x"]


@pytest.mark.parametrize(
    "field, value",
    [
        ("limit", "5; rm"),
        ("offset", True),
        ("num_fewshot", [1]),
        ("reasoning_tags", {"a": 1}),
        ("system_instruction", "a\0b"),
    ],
)
def test_a_forwarded_option_of_the_wrong_type_is_named_tampering(tmp_path, field, value):
    with pytest.raises(
        score.ScoreInputError, match=rf"r.json: config.resolved_cli_args.{field} is .*edited or damaged"
    ):
        score.forwarded_options({"resolved_cli_args": {field: value}}, tmp_path / "r.json")


def test_include_path_comes_from_the_command_line_only(tmp_path):
    installed = [str(tmp_path / "ours")]
    stored = {"resolved_cli_args": {"include_path": str(tmp_path / "run" / "evil")}}
    with pytest.raises(
        score.ScoreInputError,
        match=r"r.json: config.resolved_cli_args.include_path names .*evil.*"
        r"--include_path DIR",
    ):
        score.include_options(stored, tmp_path / "r.json", None, lambda: installed)
    as_list = {"resolved_cli_args": {"include_path": [str(tmp_path / "ours"), "evil"]}}  # a --config file's list
    with pytest.raises(score.ScoreInputError, match="'evil'"):
        score.include_options(as_list, tmp_path / "r.json", None, lambda: installed)
    # an installed benchmark's folder is indexed anyway: nothing to forward, nothing to refuse
    assert (
        score.include_options({"resolved_cli_args": {"include_path": installed[0]}}, tmp_path, None, lambda: installed)
        == []
    )
    assert score.include_options({"resolved_cli_args": {"include_path": None}}, tmp_path, None, lambda: installed) == []
    # given by the user: used, whatever the run stored
    assert score.include_options(stored, tmp_path, "mine", lambda: installed) == [
        f"--include_path={Path('mine').resolve()}"
    ]
    command = score.replay_command(tmp_path / "r.json", ["t"], tmp_path / "o", stored, ["--include_path=/trusted"])
    assert [a for a in command if a.startswith("--include_path")] == ["--include_path=/trusted"]


# ------------------------------------------------------------------------------------------ CLI runs


def _dead_port() -> int:
    with socket.socket() as s:  # a port nothing listens on: every connection is refused
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp: Path) -> dict[str, str]:
    return {
        **OFFLINE_ENV,
        "LMMS_EVAL_PLUGINS_CACHE": str(tmp / "cache"),
        "HF_DATASETS_CACHE": str(tmp / "hf"),
        "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(tmp / "cache" / "judge.sqlite3"),
    }


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory):
    """A run whose model requests all failed, then `score` on it."""
    tmp = tmp_path_factory.mktemp("score-dead")
    args = f"model_version=served-model,base_url=http://127.0.0.1:{_dead_port()}/v1,api_key=k,max_retries=1,retry_backoff_s=0"
    run = run_lmms_eval(
        tasks=["errorradar_step_sample", "crossvid_bu_sample"],
        model="openai",
        model_args=args,
        output_dir=tmp / "out",
        env=_env(tmp),
    )
    assert run.results_path is not None, run.tail()
    status, out, err = _score([str(tmp / "out")], _env(tmp))
    return run, status, out, err


@pytest.fixture(scope="module")
def oracle_run(tmp_path_factory):
    """An oracle run, its files before `score`, and `score` on it."""
    tmp = tmp_path_factory.mktemp("score-oracle")
    run = run_lmms_eval(
        tasks=["errorradar_step_sample", "mmerror_etc_sample", "causalstep_sample"],
        model="oracle",
        output_dir=tmp / "out",
        env=_env(tmp),
    )
    assert run.results_path is not None, run.tail()
    before = _snapshot(tmp / "out")
    status, out, err = _score([str(tmp / "out")], _env(tmp))
    return tmp, run, before, status, out, err


def _rescored(run) -> tuple[Path, dict]:
    found = [p for p in run.results_path.parent.glob("*_results.json") if p != run.results_path]
    assert len(found) == 1, found
    return found[0], json.loads(found[0].read_text())


@pytest.mark.cli
def test_failed_model_requests_stay_unscored(failed_run):
    run, status, out, err = failed_run
    assert status == 1, err
    path, new = _rescored(run)
    for task in ("errorradar_step_sample", "crossvid_bu_sample"):
        n = len(run.samples(task))
        assert run.results["results"][task]["unscored,none"] == n > 0
        assert new["results"][task]["unscored,none"] == n, task  # the replay gave the failures back
        reasons = {
            json.loads(line)["unscored"]["unscored"]
            for line in path.with_name(path.name.replace("_results.json", f"_samples_{task}.jsonl"))
            .read_text()
            .splitlines()
        }
        assert reasons == {REQUEST_FAILED}
    assert "still unscored" in out and "failed model request" in out and "only the model can answer them" in out
    assert "|errorradar_step_sample" in out  # lmms-eval's table


@pytest.mark.cli
def test_rescoring_an_oracle_run_gives_the_same_metrics_beside_the_untouched_original(oracle_run, tmp_path):
    tmp, run, before, status, out, err = oracle_run
    assert status == 0, err + out
    path, new = _rescored(run)
    assert path.parent == run.results_path.parent
    for task, metrics in run.results["results"].items():
        assert new["results"][task] == metrics, task
    assert new["config"]["model"] == "oracle" and new["config"]["model_args"] == run.results["config"]["model_args"]
    assert new[score.SCORE_KEY]["rescored_from"] == run.results_path.name
    assert new[score.SCORE_KEY]["replay"]["model"] == "replay"
    after = _snapshot(tmp / "out")
    assert {k: after[k] for k in before} == before  # nothing of the run was touched
    assert {Path(k).name.split("_", 2)[2] for k in set(after) - set(before)} == {
        "results.json",
        "samples_errorradar_step_sample.jsonl",
        "samples_mmerror_etc_sample.jsonl",
        "samples_causalstep_sample.jsonl",
    }
    assert "every sample scored" in out and "|causalstep_sample" in out

    from lmms_eval_plugins import report

    assert report.main([str(tmp / "out"), "-o", str(tmp_path / "report"), "--no-plots", "--no-markdown"]) == 0
    assert "oracle" in (tmp_path / "report" / "report.html").read_text()


@pytest.mark.cli
def test_a_changed_prompt_stops_the_replay_and_writes_nothing(oracle_run, tmp_path):
    tmp, run, before, *_ = oracle_run
    copy = tmp_path / "run"
    copy.mkdir()
    for name in before:  # the run as lmms-eval wrote it
        shutil.copy(tmp / "out" / name, copy / Path(name).name)
    samples_file = copy / run.results_path.name.replace("_results.json", "_samples_errorradar_step_sample.jsonl")
    records = [json.loads(line) for line in samples_file.read_text().splitlines()]
    changed = records[3]["input"].replace("mathematics", "physics", 1)  # "the data changed"
    assert changed != records[3]["input"]
    records[3]["input"] = changed
    samples_file.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    files = _snapshot(copy)
    status, out, err = _score([str(copy)], _env(tmp))
    assert status == 2, err + out
    assert f"{samples_file}: task 'errorradar_step_sample' doc_id 3: the prompt differs" in err
    assert _snapshot(copy) == files


def test_rescored_results_hide_credential_like_model_args(tmp_path):
    """The new results JSON names the original model, never its keys (lmms-eval redacts only some names)."""
    for stored, shown in (
        ("pretrained=m,apikey=sk-1,base_url=http://u:pw@h/v1", "pretrained=m,apikey=***,base_url=http://***@h/v1"),
        ({"pretrained": "m", "hf_token": "t"}, {"pretrained": "m", "hf_token": "***"}),
    ):
        new: dict = {"config": {"model": "replay", "model_args": "samples=x"}}
        score.mark_rescored(new, {"config": {"model": "openai", "model_args": stored}}, tmp_path / "r_results.json", {})
        assert new["config"]["model_args"] == shown
        assert new["config"]["model"] == "openai"


OLD_FORMAT_RUN = Path(__file__).parent / "data" / "old_format_run"  # written before issue 41: every metric named


@pytest.mark.cli
def test_an_old_format_run_rescores_to_the_same_numbers_and_reads_as_the_new_format(tmp_path):
    """Issue 41: a samples line now holds each item once; a run logged before (the shared item under all 23
    metric names of a CATE line) still loads, re-scores to identical numbers, and reads the same."""
    from lmms_eval_plugins import compare, logged_samples, runs

    copy = tmp_path / "run"
    shutil.copytree(OLD_FORMAT_RUN, copy)
    stored = json.loads(next(copy.glob("*_results.json")).read_text())
    # score's own process (its replay is a child) reads each file in one streamed pass and never loads
    # lmms-eval, torch or a benchmark (issue 41: it imported every benchmark, and torch for one split)
    probe = (
        "import json, sys; from lmms_eval_plugins import score; code = score.main(sys.argv[1:]); "
        "print(json.dumps(sorted(m for m in sys.modules if m in ('torch', 'lmms_eval') or "
        "m.startswith('lmms_eval_plugins.benchmarks.')))); sys.exit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(copy)],
        env={**os.environ, **_env(tmp_path)},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
    new_path = next(
        p for p in copy.glob("*_results.json") if p.name != next(OLD_FORMAT_RUN.glob("*_results.json")).name
    )
    new = json.loads(new_path.read_text())
    assert new["results"] == stored["results"]
    for task in ("errorradar_cate_sample", "mmerror_etc_sample"):
        old_lines = logged_samples.read_samples(
            runs.samples_path(copy / next(OLD_FORMAT_RUN.glob("*_results.json")).name, task)
        )
        new_lines = logged_samples.read_samples(runs.samples_path(new_path, task))
        metrics = [m["metric"] for m in new["configs"][task]["metric_list"]]
        shared = [
            k for k in metrics if k in old_lines[0] and old_lines[0][k] == logged_samples.first_item(old_lines[0])
        ]
        assert len(shared) >= 11  # the old line repeated the item (23 times a CATE line); the new one holds it once
        assert all(sum(v == logged_samples.first_item(line) for v in line.values()) == 1 for line in new_lines)
        # the committed run's media paths were made relative, and lmms-eval 0.7.3's doc_hash is of null
        keep = lambda line: {k: v for k, v in line.items() if k not in ("doc_hash", "input_media")}  # noqa: E731
        assert [keep(logged_samples.lean(o)) for o in old_lines] == [keep(logged_samples.lean(n)) for n in new_lines], (
            task
        )
        assert [keep(o) for o in old_lines] == [keep(logged_samples.with_every_item(n, metrics)) for n in new_lines]
    # compare reads the two layouts alike: every paired difference of the old run and its re-score is 0
    old_only, new_only = tmp_path / "old", tmp_path / "new"
    for folder, stem in ((old_only, next(OLD_FORMAT_RUN.glob("*_results.json")).name), (new_only, new_path.name)):
        folder.mkdir()
        for path in copy.glob(stem.replace("_results.json", "_*")):
            shutil.copy(path, folder / path.name)
    (old_run,), (new_run,) = runs.discover_runs(old_only), runs.discover_runs(new_only)
    rows = compare.compare_runs(old_run, new_run, iterations=50)
    assert rows and all(row.diff == 0 for row in rows if row.diff is not None)
