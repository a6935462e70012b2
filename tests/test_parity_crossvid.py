"""CrossVid strict mode against the official scorers (issue 30), on a corpus of replies.

``tests/data/parity/crossvid_official.jsonl``, one reply a line: ``task``, ``model_style``,
``reply`` (for CCQA the *judge's* reply), ``gold``, ``official``, ``official_source``, ``note``.
``official`` is what the official code (``chuntianli666/CrossVid``, ``eval/*.py``, the file and function
named in ``official_source``) gives that reply, found by running that code unmodified (outside this
repository; none of it is copied here):

- letter tasks, BU, PSS: whether the raw reply equals the gold string (``correct``);
- FSA: the IoU, ``"NaN"`` where the official one is NaN;
- CCQA: ``{"sum": sum(coverage + correctness), "points": len(coverage)}`` (``"NaN"``/``"Infinity"``
  for those sums), or null where the official ``update`` fails (not counted there: a judge error here).

Each reply is scored against the bundled sample doc 0 of its task (its gold is checked against ``gold``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from judge_server import TEST_API_KEY, JudgeServer, Reply, score_block

from lmms_eval_plugins.benchmarks.crossvid.scoring import official_nan_count
from lmms_eval_plugins.data import read_jsonl, to_dataset
from lmms_eval_plugins.judges import JudgeItem, JudgeOutcome
from lmms_eval_plugins.judges.base import ReplyParseError
from lmms_eval_plugins.judges.endpoint import Endpoint
from lmms_eval_plugins.judges.rubric import (
    RubricJudge,
    official_verdict,
    parse_rubric_reply,
)
from lmms_eval_plugins.benchmarks.crossvid.ccqa import rubric_micro_average, rubric_official_nan_count
from lmms_eval_plugins.judges.runtime import JudgeRuntime, RuntimeSettings
from lmms_eval_plugins.models.replay import RawReply
from testkit.task_utils import load_task_utils

cv = load_task_utils("crossvid")
CORPUS = Path(__file__).parent / "data" / "parity" / "crossvid_official.jsonl"
LINES = read_jsonl(CORPUS)
BY_TASK = {t: [line for line in LINES if line["task"] == t] for t in cv.TASKS}
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
# lmms-eval 0.7.3: the CLI's --reasoning_tags default (__main__.parse_eval_args), applied with
# api/reasoning.strip_reasoning_tags before process_results, then ConfigurableTask.process_results' .strip()
LMMS_EVAL_REASONING_TAGS = [["<think>", "</think>"], ["<analysis>", "</analysis>"]]
_DOCS: dict[str, dict] = {}


def doc(task: str) -> dict:
    if task not in _DOCS:
        rows = to_dataset(
            cv.load_docs({"benchmark": "crossvid", "source": "sample", "frames": 16}, task),
            features=cv.row_features(task),
        )
        _DOCS[task] = rows[0]  # as lmms-eval holds it: an Arrow row
    return _DOCS[task]


def number(value):
    return NON_FINITE[value] if isinstance(value, str) else value


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b)


def strict_item(line: dict, reply=None) -> dict:
    return cv.score_response({**doc(line["task"]), "strict": True}, line["reply"] if reply is None else reply)


def official_value(line: dict) -> float:
    return float(number(line["official"])) if line["task"] == "FSA" else float(line["official"])


def lmms_eval_gives(reply: str) -> str:
    """What a task's process_results receives from lmms-eval 0.7.3 for a generated reply."""
    from lmms_eval.api.reasoning import strip_reasoning_tags

    return strip_reasoning_tags(reply, LMMS_EVAL_REASONING_TAGS).strip()


def ccqa_verdict(reply: str):
    return official_verdict(*parse_rubric_reply(reply, 2, first_block=True))


EXACT = [line for line in LINES if line["task"] != "CCQA"]
CCQA = BY_TASK["CCQA"]


def test_the_corpus_covers_every_task_and_names_the_official_code():
    assert len(LINES) >= 400 and len({line["id"] for line in LINES}) == len(LINES)
    assert {t: len(rows) >= 30 for t, rows in BY_TASK.items()} == dict.fromkeys(cv.TASKS, True)
    for line in LINES:
        assert line["official_source"].startswith(
            f"eval/{'score_CCQA' if line['task'] == 'CCQA' else line['task']}.py main().update"
        ), line["id"]
    for task in set(cv.TASKS) - {"CCQA"}:  # the rows' gold is the sample doc's
        gold = doc(task)["gold"]
        assert {json.dumps(line["gold"]) for line in BY_TASK[task]} == {
            json.dumps(gold.get("interval") or (gold["letters"] if task == "BU" else gold["exact"]))
        }
    # the official edge cases of issue 30 are in it
    notes = " | ".join(line["note"] for line in CCQA)
    for case in ("2/4", "3/4", "wrong length", "2.5/4", "1/4", "0/0", "NaN"):
        assert case in notes
    assert sum(line["official"] == "NaN" for line in BY_TASK["FSA"]) >= 5


@pytest.mark.parametrize("line", [pytest.param(line, id=line["id"]) for line in EXACT])
def test_strict_mode_gives_the_official_result_on_every_reply(line):
    item = strict_item(line)
    assert same(item["strict"], official_value(line)) and same(item["score"], item["strict"])


@pytest.mark.parametrize("line", [pytest.param(line, id=line["id"]) for line in CCQA])
def test_the_strict_ccqa_reading_adds_the_judges_lists_as_the_official_scorer(line):
    expected = line["official"]
    if expected is None:  # the official update fails: the result is not stored, the question not counted
        with pytest.raises(ReplyParseError):
            ccqa_verdict(line["reply"])
        return
    detail = ccqa_verdict(line["reply"]).detail
    assert detail["n_points"] == expected["points"]
    assert same(float(number(detail["official_sum"])), float(number(expected["sum"])))


@pytest.mark.parametrize("task", [t for t in cv.TASKS if t != "CCQA"])
def test_the_task_score_is_the_official_one_with_its_nan_count(task):
    items = [strict_item(line) for line in BY_TASK[task]]
    official = [official_value(line) for line in BY_TASK[task]]
    assert same(cv.agg_score_strict(items), 100.0 * sum(official) / len(official))
    finite = [(i, o) for i, o in zip(items, official) if not math.isnan(o)]
    assert cv.agg_score_strict([i for i, _ in finite]) == pytest.approx(100.0 * sum(o for _, o in finite) / len(finite))
    assert official_nan_count(items) == len(items) - len(finite)
    if task == "FSA":  # robust keeps 0 for a NaN reading (a parse failure) and is never NaN
        robust = [cv.score_response(doc(task), line["reply"]) for line in BY_TASK[task]]
        assert official_nan_count(items) == 7 and not math.isnan(cv.agg_score(robust))


def test_the_ccqa_score_is_the_official_micro_average_with_its_nan_count():
    accepted = [line for line in CCQA if line["official"] is not None]
    outcomes = [
        JudgeOutcome("rubric", "1", "m", verdict=v.score, detail=v.detail)
        for v in (ccqa_verdict(line["reply"]) for line in accepted)
    ]
    finite = [(o, line) for o, line in zip(outcomes, accepted) if isinstance(line["official"]["sum"], (int, float))]
    # official: sum(score) / sum(2 * len(coverage)) over the stored results
    expected = (
        100.0
        * sum(line["official"]["sum"] for _, line in finite)
        / sum(2 * line["official"]["points"] for _, line in finite)
    )
    assert rubric_micro_average([o for o, _ in finite]) == pytest.approx(expected)
    assert rubric_micro_average(outcomes) != rubric_micro_average(outcomes)  # NaN, as the official score
    assert rubric_official_nan_count(outcomes) == len(outcomes) - len(finite) == 4
    assert rubric_official_nan_count([o for o, _ in finite]) == 0
    # the cases, by hand: 2/4, 3/4, 2.5/4, 1/4, and [] adds 0 of 0 to another question's 2/4
    for body, percent in [
        ('{"coverage": [1.0, 0.0], "correctness": [1.0, 0.0]}', 50.0),
        ('{"coverage": [2, 0], "correctness": [1, 0]}', 75.0),
        ('{"coverage": [0.5, 1], "correctness": [1, 0]}', 62.5),
        ('{"coverage": [true, -1], "correctness": [1, 0]}', 25.0),
    ]:
        assert rubric_micro_average([ccqa_verdict(f"<score>{body}</score>").detail]) == percent
    empty = ccqa_verdict('<score>{"coverage": [], "correctness": []}</score>').detail
    assert rubric_micro_average([empty]) != rubric_micro_average(
        [empty]
    )  # 0/0 alone: NaN (official: ZeroDivisionError)
    assert (
        rubric_micro_average([empty, ccqa_verdict('<score>{"coverage": [1, 0], "correctness": [1, 0]}</score>').detail])
        == 50.0
    )


def test_the_task_hooks_give_the_official_ccqa_score_in_strict_mode():
    """process_results_ccqa + agg_ccqa_score (lmms-eval's hooks) on strict verdicts: 3/4 and 2.5/4 -> 5.5/8."""

    def per_doc(reply):
        v = ccqa_verdict(reply)
        outcome = JudgeOutcome("rubric", "1", "judge-model", verdict=v.score, detail=v.detail)
        return cv.process_results_ccqa({"id": "0", "n_skipped": 0}, [[{"text": "x", "judge": outcome.to_dict()}]])

    docs = [
        per_doc('<score>{"coverage": [2, 0], "correctness": [1, 0]}</score>'),
        per_doc('<score>{"coverage": [0.5, 1], "correctness": [1, 0]}</score>'),
    ]
    assert cv.agg_ccqa_score([d["score"] for d in docs]) == pytest.approx(100 * 5.5 / 8)
    assert cv.agg_judge_errors([d["judge_errors"] for d in docs]) == 0
    nan = per_doc('<score>{"coverage": [NaN, 1], "correctness": [1, 0]}</score>')
    assert math.isnan(cv.agg_ccqa_score([d["score"] for d in [*docs, nan]]))  # the official value, no exception


def test_the_default_reading_still_refuses_what_strict_mode_adds():
    for body in (
        '{"coverage": [1.0, 0.0], "correctness": [1.0, 0.0]}',
        '{"coverage": [2, 0], "correctness": [1, 0]}',
        '{"coverage": [true, true, true], "correctness": [true, true, true]}',
        '{"coverage": [], "correctness": []}',
        '{"coverage": [NaN, 1], "correctness": [1, 0]}',
    ):
        with pytest.raises(ReplyParseError):
            parse_rubric_reply(f"<score>{body}</score>", 2)
    # and a verdict's detail stays strict JSON (what the judge cache and the logged samples store)
    detail = ccqa_verdict('<score>{"coverage": [NaN, Infinity], "correctness": [-Infinity, 1]}</score>').detail
    assert json.loads(json.dumps(detail, allow_nan=False)) == detail
    assert detail["coverage"] == ["NaN", "Infinity"] and detail["official_sum"] == "NaN"


def test_lmms_eval_strips_replies_before_process_results_and_score_strict_keeps_them_raw():
    """Through lmms-eval, a reply loses its surrounding whitespace and its <think> block before scoring:
    the rows that differ from official then are exactly those. A RawReply (what the replay model gives
    in strict mode) keeps its whitespace, so only the <think> rows still differ."""

    def differs(reply_as_given) -> list[str]:
        return [
            line["id"]
            for line in EXACT
            if not same(strict_item(line, reply_as_given(line["reply"]))["strict"], official_value(line))
        ]

    tagged = {line["id"] for line in EXACT if "<think>" in line["reply"] or "</think>" in line["reply"]}
    spaced = {line["id"] for line in EXACT if line["reply"] != line["reply"].strip()}
    through_lmms_eval, raw = set(differs(lmms_eval_gives)), set(differs(lambda r: lmms_eval_gives(RawReply(r))))
    assert through_lmms_eval <= tagged | spaced and raw <= tagged and not raw & (spaced - tagged)
    assert (len(EXACT), len(through_lmms_eval), len(raw)) == (388, 70, 21)  # the figures of the task README
    assert RawReply(" B\n").strip() == " B\n" and lmms_eval_gives(" B\n") == "B"


# ----------------------------------------------------------------------------------------------- think-only replies

THINK_ONLY = "<think>Pondering which video shows what.</think>"


def ccqa_judge_item(prediction: str, strict: bool) -> JudgeItem:
    return cv.judge_item(prediction, {**doc("CCQA"), "strict": strict})


def test_a_think_only_reply_goes_to_the_judge_as_it_is_in_strict_mode_only():
    judge = RubricJudge()
    strict, default = ccqa_judge_item(THINK_ONLY, True), ccqa_judge_item(THINK_ONLY, False)
    assert not judge.nothing_to_judge(strict) and judge.nothing_to_judge(default)
    assert judge.nothing_to_judge(ccqa_judge_item("  ", True))  # nothing at all: 0 without a call in both modes
    assert THINK_ONLY in judge.build_messages(strict)[1]["content"]  # official: the reply as it is
    assert "Pondering" not in judge.build_messages(ccqa_judge_item(THINK_ONLY + "x", False))[1]["content"]


def test_the_runtime_asks_the_judge_about_a_think_only_reply_in_strict_mode(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_CACHE_SECRET", str(tmp_path / "secret"))
    settings = RuntimeSettings(concurrency=2, timeout=2.0, max_attempts=2, retry_base=0.01, retry_max=0.05)

    def behaviour(req):  # a NaN verdict for the reply asking for one
        nan = "NaN please" in req.fields.get("MODEL_OUTPUT", "")
        return Reply(
            content=score_block(
                req.body, {"coverage": [math.nan if nan else True, False], "correctness": [True, False]}
            )
        )

    items = [ccqa_judge_item(THINK_ONLY, True), ccqa_judge_item(THINK_ONLY, False), ccqa_judge_item("NaN please", True)]
    with JudgeServer(lifetime=30, behaviour=behaviour) as server:
        endpoint = Endpoint(server.base_url, TEST_API_KEY)
        outs = JudgeRuntime(tmp_path / "cache.sqlite3").judge_items(
            RubricJudge(), items, model="judge-model", endpoint=endpoint, settings=settings
        )
        assert server.n_requests == 2  # the strict items only
        again = JudgeRuntime(tmp_path / "cache.sqlite3").judge_items(
            RubricJudge(), items, model="judge-model", endpoint=endpoint, settings=settings
        )
        assert server.n_requests == 2 and again[2].cached  # a NaN verdict is cached and read back as it is
    assert outs[0].detail["reading"] == "official" and rubric_micro_average([outs[0]]) == 50.0
    assert outs[1].detail.get("empty_prediction") and rubric_micro_average([outs[1]]) == 0.0
    assert again[2].detail["coverage"] == ["NaN", 0] and rubric_official_nan_count(again) == 1


# ----------------------------------------------------------------------------------------------- score --strict


def _logged_run(folder: Path, reply: str) -> Path:
    """A minimal logged run of one task and one document (what `score` replays)."""
    from lmms_eval_plugins.models.replay import lmms_doc_hash

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "20250101_000000_results.json"
    path.write_text(json.dumps({"results": {"t": {"alias": "t"}}, "config": {"model": "m"}}))
    sample = {"doc_id": 0, "target": "C", "doc_hash": lmms_doc_hash(None), "input": "Q0", "filtered_resps": reply}
    (folder / "20250101_000000_samples_t.jsonl").write_text(json.dumps(sample) + "\n")
    return path


def test_the_replay_model_gives_the_logged_reply_raw_in_strict_mode(tmp_path, monkeypatch):
    """lmms-eval strips every reply (ConfigurableTask.process_results); in strict mode the replayed reply keeps
    its whitespace through those strip() calls, so `score --strict` scores it as the official code would."""
    from lmms_eval.api.instance import Instance

    from lmms_eval_plugins.models.replay import Replay

    request = Instance(
        request_type="generate_until",
        arguments=("Q0", {}, None, 0, "t", "test"),
        idx=0,
        metadata={"task": "t", "doc_id": 0, "repeats": 1},
    )
    model = Replay(samples=str(_logged_run(tmp_path, " C\n")))
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_STRICT", raising=False)
    assert [r.strip() for r in model.generate_until([request])] == ["C"]
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_STRICT", "1")
    (reply,) = model.generate_until([request])
    assert isinstance(reply, RawReply) and reply.strip() == lmms_eval_gives(reply) == " C\n"
    item = cv.score_response({**doc("NC"), "strict": True}, reply.strip())  # gold C: 0 officially, 0 here
    assert (item["robust"], item["strict"]) == (1.0, 0.0)


@pytest.mark.cli
def test_score_strict_scores_the_logged_reply_with_its_whitespace(tmp_path):
    """Through the real CLI, on a copy of the stored oracle run's crossvid_nc_sample (gold C, A) with doc 0's
    logged reply changed to " C\\n": a run gave it 1 (lmms-eval strips it), the official script 0."""
    import os
    import subprocess
    import sys

    from lmms_eval_plugins.cli_run import OFFLINE_ENV

    stored = Path(__file__).parent / "data" / "report_runs" / "oracle"
    results = next(stored.glob("*_results.json"))
    samples = results.with_name(results.name.replace("_results.json", "_samples_crossvid_nc_sample.jsonl"))
    run = tmp_path / "run"
    run.mkdir()
    (run / results.name).write_bytes(results.read_bytes())
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    assert [line["filtered_resps"] for line in lines] == ["C", "A"] and "resps" not in lines[0]
    lines[0]["filtered_resps"] = " C\n"  # logged so by lmms-eval when its filters saw " C\n"
    (run / samples.name).write_text("".join(json.dumps(line) + "\n" for line in lines))
    env = {k: v for k, v in os.environ.items() if k != "LMMS_EVAL_PLUGINS_DATA_ROOT"}
    env.update(OFFLINE_ENV, LMMS_EVAL_PLUGINS_CACHE=str(tmp_path / "cache"), HF_DATASETS_CACHE=str(tmp_path / "hf"))
    done = subprocess.run(
        [sys.executable, "-m", "lmms_eval_plugins.cli", "score", str(run), "--strict", "--tasks", "crossvid_nc_sample"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )
    new = [p for p in run.glob("*_results.json") if p.name != results.name]
    assert len(new) == 1, done.stdout[-3000:]
    rescored_results = json.loads(new[0].read_text())
    metrics = rescored_results["results"]["crossvid_nc_sample"]
    assert (metrics["score,none"], metrics["score_strict,none"]) == (50.0, 50.0), done.stdout[-3000:]
    assert rescored_results["lmms_eval_plugins_options"] == {"strict": True}  # the run decided it, and says so
    rescored = new[0].with_name(new[0].name.replace("_results.json", "_samples_crossvid_nc_sample.jsonl"))
    items = {json.loads(line)["doc_id"]: json.loads(line)["score"] for line in rescored.read_text().splitlines()}
    assert (items[0]["robust"], items[0]["strict"], items[1]["strict"]) == (1.0, 0.0, 1.0)
