"""Unscored samples (lmms_eval_plugins/outcome.py): a failed request is kept apart from a wrong answer."""

from __future__ import annotations

import pytest

from lmms_eval_plugins import outcome
from testkit.task_utils import load_task_utils

FAILED = "[LMMS_EVAL_REQUEST_FAILED after 5 retries] Connection error."


@pytest.mark.parametrize(
    "reply, reason",
    [
        (FAILED, outcome.REQUEST_FAILED),
        ("  [LMMS_EVAL_REQUEST_FAILED after 1 retries] Error code: 500", outcome.REQUEST_FAILED),
        ("[LMMS_EVAL_BUDGET_EXCEEDED]", outcome.BUDGET_EXCEEDED),
        ("Error Step: Step 2", None),
        ("The server said [LMMS_EVAL_REQUEST_FAILED after 5 retries]", None),  # quoted inside an answer: an answer
        ("", None),
        (None, None),
    ],
)
def test_request_failure_reads_lmms_evals_markers_only_at_the_start(reply, reason):
    assert outcome.request_failure(reply) == reason


def test_first_failure_looks_into_nested_replies():
    assert outcome.first_failure(["A", ["B", FAILED]]) == outcome.REQUEST_FAILED
    assert outcome.first_failure(["A", "B"]) is None


def test_with_unscored_marks_every_item_once_and_adds_the_count_item():
    item = {"pred": None, "correct": False}
    out = outcome.with_unscored({"acc": item, "parse_fail": item, "n": 3}, [FAILED])
    assert out["acc"] == {"pred": None, "correct": False, "unscored": outcome.REQUEST_FAILED}
    assert out["acc"] is out["parse_fail"]  # a shared item stays shared (logged once)
    assert out["n"] == {"value": 3, "unscored": outcome.REQUEST_FAILED}
    assert out["unscored"] == {"unscored": outcome.REQUEST_FAILED}
    assert item == {"pred": None, "correct": False}  # the caller's item is not changed

    clean = outcome.with_unscored({"acc": item}, ["Error Step: Step 1"])
    assert clean == {"acc": item, "unscored": {"unscored": None}}


def test_guarded_aggregation_is_null_when_any_sample_is_unscored():
    mean = outcome.guard(lambda items: sum(i["v"] for i in items) / len(items))
    assert mean([{"v": 1}, {"v": 0}]) == 0.5
    assert mean([{"v": 1}, {"v": 0, "unscored": outcome.REQUEST_FAILED}]) is None
    assert outcome.guard(mean) is mean
    assert outcome.count_unscored([{"unscored": None}, {"unscored": "x"}, {"unscored": "y"}]) == 2


def test_guard_wraps_an_aggregation_but_not_the_count():
    guarded = outcome.guard(lambda items: len(items))
    assert guarded([{"unscored": "x"}]) is None and guarded([{"unscored": None}]) == 1
    assert outcome.guard(outcome.count_unscored) is outcome.count_unscored
    assert outcome.guard(outcome.count_unscored)([{"unscored": "x"}]) == 1


# Every benchmark: a failed request makes each metric of the task null and is counted, hand-checked on
# one scored and one failed sample per task.
@pytest.mark.parametrize(
    "benchmark, process, good_reply",
    [
        ("errorradar", "process_results_step", "Error Step: Step 1"),
        ("errorradar", "process_results_cate", "Error Category: Calculation Error"),
        ("mmerror", "process_results_etc", "A"),
        ("crossvid", "process_results", "A"),
    ],
)
def test_each_task_nulls_its_metrics_and_counts_the_failed_sample(benchmark, process, good_reply):
    utils = load_task_utils(benchmark)
    doc = _first_doc(utils, benchmark, process)
    good = getattr(utils, process)(doc, [good_reply])
    bad = getattr(utils, process)(doc, [FAILED])
    assert set(good) == set(bad) and "unscored" in good
    for metric in good:
        aggregate = getattr(utils, f"agg_{metric}", None) or getattr(
            utils, f"agg_{metric.replace(benchmark + '_', '')}", None
        )
        if aggregate is None or metric == "unscored":
            continue
        if metric in (outcome.SKIPPED_METRIC, outcome.SKIPPED_BY_REASON_METRIC):  # the run's, not the sample's
            assert aggregate([good[metric], bad[metric]]) is not None, metric
            continue
        assert aggregate([good[metric]]) is not None, metric
        assert aggregate([good[metric], bad[metric]]) is None, metric
    assert utils.agg_unscored([good["unscored"], bad["unscored"]]) == 1


def _first_doc(utils, benchmark, process):
    process_docs = {
        "process_results_step": "process_docs_step",
        "process_results_cate": "process_docs_cate",
        "process_results_etc": "process_docs_etc",
    }.get(process, "process_docs_bu")
    source = {"benchmark": benchmark, "source": "sample", **({"frames": 4} if benchmark == "crossvid" else {})}
    return list(getattr(utils, process_docs)([source]))[0]


# ----------------------------------------------------------------------------------------------- skipped records


def test_skipped_records_are_counted_by_reason_per_call(tmp_path, monkeypatch):
    from lmms_eval_plugins.data import keep_records_with_media
    from lmms_eval_plugins.errors import MediaError

    present = tmp_path / "broken.mp4"
    present.write_bytes(b"not a video")

    def check(record):
        if record == "gone":
            raise MediaError("video not found", record=record, path=str(tmp_path / "gone.mp4"))
        if record == "broken":
            raise MediaError("cannot decode", record=record, path=str(present))

    monkeypatch.setenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA", "1")
    kept = keep_records_with_media("bench", ["ok", "gone", "broken", "gone", "ok2"], check, skipped={"no label": 2})
    assert list(kept) == ["ok", "ok2"]
    assert kept.skipped == {"missing media": 2, "no label": 2, "unreadable media": 1}
    # a second call is its own count: no state is carried between runs
    assert keep_records_with_media("bench", ["ok"], check).skipped == {}
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA")
    with pytest.raises(MediaError, match="not found"):
        keep_records_with_media("bench", ["gone"], check)


def test_skipped_counts_travel_on_docs_to_the_aggregation():
    from lmms_eval_plugins.data import Kept, stamp_skipped

    records = Kept(["a", "b"])
    records.skipped = {"missing media": 3, "no label": 1}
    docs = stamp_skipped([{"id": 1}, {"id": 2}], records)
    items = [
        outcome.with_unscored({"acc": {"correct": True}}, ["A"], doc=docs[0]),
        outcome.with_unscored({"acc": {"correct": False}}, [FAILED], doc=docs[1]),
    ]
    skipped = [i["skipped"] for i in items]
    assert outcome.agg_skipped(skipped) == 4
    assert outcome.agg_skipped_by_reason([i["skipped_by_reason"] for i in items]) == {"missing media": 3, "no label": 1}
    # a failed request makes its metrics unscored, never the run's skipped counts
    assert outcome.is_unscored(items[1]["acc"]) and not outcome.is_unscored(items[1]["skipped"])
    assert outcome.guard(outcome.agg_skipped)(skipped) == 4
    # nothing skipped: 0 and an empty dict, never a missing metric
    none = stamp_skipped([{"id": 1}], Kept(["a"]))
    item = outcome.with_unscored({}, ["A"], doc=none[0])
    assert outcome.agg_skipped([item["skipped"]]) == 0 and outcome.agg_skipped_by_reason([item["skipped"]]) == {}


@pytest.mark.parametrize(
    "raw",
    [
        "not a list",
        '[{"reason": "missing media", "count": 3}]',
        [1, 2],
        [{"reason": "missing media", "count": "3"}],
        [{"reason": 3, "count": 3}],
        {"missing media": 3},
        None,
    ],
)
def test_a_malformed_skipped_stamp_counts_nothing(raw):
    assert outcome.agg_skipped([{outcome.SKIPPED_FIELD: raw}]) == 0


def test_the_skipped_stamp_is_arrow_native_and_read_without_json():
    from lmms_eval_plugins.data import Kept, stamp_skipped, to_dataset

    records = Kept(["a"])
    records.skipped = {"no label": 1, "missing media": 3}
    docs = to_dataset(stamp_skipped([{"id": 1}, {"id": 2}], records))
    # a list of {reason, count} structs in Arrow, by reason, read back as it was written
    import pyarrow as pa

    assert docs.data.schema.field(outcome.SKIPPED_FIELD).type == pa.list_(
        pa.struct([("reason", pa.string()), ("count", pa.int64())])
    )
    assert docs[1][outcome.SKIPPED_FIELD] == [
        {"reason": "missing media", "count": 3},
        {"reason": "no label", "count": 1},
    ]
    assert outcome.agg_skipped_by_reason([{outcome.SKIPPED_FIELD: docs[0][outcome.SKIPPED_FIELD]}]) == {
        "missing media": 3,
        "no label": 1,
    }
    # nothing skipped: an empty list (Arrow infers list<null> from it) that reads back as no counts
    empty = to_dataset(stamp_skipped([{"id": 1}], Kept(["a"])))
    assert empty[0][outcome.SKIPPED_FIELD] == []
    assert outcome.stamped_counts(empty[0][outcome.SKIPPED_FIELD]) == {}
    # by hand: a zero count is left out, a repeated reason adds up
    assert outcome.stamped_counts(
        [{"reason": "a", "count": 0}, {"reason": "b", "count": 2}, {"reason": "b", "count": 1}]
    ) == {"b": 3}


# --------------------------------------------------------------------------- media noted unreadable: the run's state


def test_unreadable_media_belongs_to_the_run_that_noted_it(tmp_path):
    from lmms_eval_plugins import run_state

    bad = str(tmp_path / "clip.mp4")
    doc = {"id": "r1", "video": bad, outcome.SKIPPED_FIELD: []}
    first = run_state.begin_run()
    first.note_unreadable_media(bad, "r1")
    assert run_state.current_run() is first and outcome.unreadable_media_of(doc) == f"r1|{bad}"
    assert outcome.is_media_skipped(outcome.with_unscored({"acc": {"correct": True}}, ["A"], doc=doc)["acc"])
    # the next run starts clean: the same doc is scored there
    second = run_state.begin_run()
    assert second is not first and run_state.current_run() is second
    assert outcome.unreadable_media_of(doc) is None
    assert not outcome.is_media_skipped(outcome.with_unscored({"acc": {"correct": True}}, ["A"], doc=doc)["acc"])
    # the matching itself is pure: given the notes, the current run is not read
    assert outcome.unreadable_media_of(doc, first.unreadable_media()) == f"r1|{bad}"
    assert outcome.unreadable_media_of(doc, {bad: {"r2"}}) is None  # noted for another record
    assert outcome.unreadable_media_of(doc, {bad: {None}}) == f"|{bad}"  # noted for any record


def test_outside_a_run_the_first_use_starts_one(monkeypatch):
    from lmms_eval_plugins import run_state

    monkeypatch.setattr(run_state, "_current", run_state._Current())
    state = run_state.current_run()
    assert isinstance(state, run_state.RunState) and run_state.current_run() is state
    assert state.unreadable_media() == {}


def test_mmerror_counts_unlabelled_and_missing_media_records_apart(tmp_path, monkeypatch):
    import json
    import shutil

    mm = load_task_utils("mmerror")

    base = {"question": "Q?", "correct_answer": "1", "error_reason": "Step 1: r.", "domain": "M", "subdomain": "s"}
    records = [
        {**base, "question_id": "MMErroR_00001", "label": "B_Reasoning_Error"},
        {**base, "question_id": "MMErroR_00002", "label": ""},
        {**base, "question_id": "MMErroR_00003", "label": "A_Visual_Perception_Error"},
        {**base, "question_id": "MMErroR_00004", "label": "B_Reasoning_Error"},
    ]
    (tmp_path / "data" / "jsons").mkdir(parents=True)
    (tmp_path / "data" / "images").mkdir()
    png = next((mm.SAMPLE_DIR / "data" / "images").glob("*.png"))
    for record in records:
        (tmp_path / "data" / "jsons" / f"{record['question_id']}.json").write_text(json.dumps(record))
        if record["question_id"] != "MMErroR_00003":
            shutil.copy(png, tmp_path / "data" / "images" / f"{record['question_id']}.png")
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA", "1")
    kept = mm.load_records(mm.resolve_source("mmerror", "sample", sample_dir=tmp_path, hub_repo=None, local_layout=""))
    assert [r["question_id"] for r in kept] == ["MMErroR_00001", "MMErroR_00004"]
    assert kept.skipped == {"missing media": 1, "no label": 1}


def test_the_evaluate_hook_starts_a_fresh_run_state_per_run(monkeypatch):
    import lmms_eval.evaluator as evaluator

    from lmms_eval_plugins import run_state
    from lmms_eval_plugins.compat.patches import install_evaluate_hook
    from lmms_eval_plugins.judges import session

    seen = []
    monkeypatch.setattr(
        evaluator,
        "simple_evaluate",
        lambda **kwargs: seen.append((run_state.current_run(), session.judging_deferred())),
    )
    monkeypatch.setattr("sys.argv", ["lmms-eval"])  # no --output_path: nothing written
    stale = run_state.current_run()
    stale.note_unreadable_media("a.mp4", "r1")
    assert install_evaluate_hook()
    try:
        evaluator.simple_evaluate(predict_only=True)
        evaluator.simple_evaluate()
    finally:
        session.end_session()
    (first, deferred), (second, judged) = seen
    assert first is not stale and second is not first and (deferred, judged) == (True, False)
    assert first.unreadable_media() == {} and second.unreadable_media() == {}


# --------------------------------------------------------------------------- the run's options: strict, decided once


@pytest.mark.parametrize(
    "model_args, env, expected",
    [
        ("samples=run.json,strict=true", {}, True),
        ("samples=run.json, strict = 1", {}, True),
        ({"samples": "run.json", "strict": "yes"}, {}, True),
        ("samples=run.json,strict=false", {}, False),
        ("samples=run.json", {}, False),
        ("samples=run.json", {"LMMS_EVAL_PLUGINS_STRICT": "1"}, True),
        (None, {"LMMS_EVAL_PLUGINS_STRICT": "0"}, False),
        ("pretrained=a,strictly=1", {}, False),  # another option's name is not `strict`
    ],
)
def test_strict_comes_from_the_run_configuration(model_args, env, expected):
    from lmms_eval_plugins import run_state

    assert run_state.strict_from_run_config(model_args, env) is expected


def test_strict_is_decided_once_per_run_and_recorded(monkeypatch):
    from lmms_eval_plugins import run_state

    monkeypatch.delenv("LMMS_EVAL_PLUGINS_STRICT", raising=False)
    state = run_state.begin_run(strict=True)
    assert run_state.strict_mode() is True and state.options() == {"strict": True}
    state = run_state.begin_run(strict=False)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_STRICT", "1")  # too late: the run decided when it started
    assert run_state.strict_mode() is False and state.options() == {"strict": False}
    monkeypatch.setattr(run_state, "_current", run_state._Current())  # outside a run: the environment, when asked
    assert run_state.strict_mode() is True
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_STRICT", "0")
    assert run_state.strict_mode() is False


def test_the_evaluate_hook_takes_strict_from_the_model_args(monkeypatch):
    import lmms_eval.evaluator as evaluator

    from lmms_eval_plugins import run_state
    from lmms_eval_plugins.compat.patches import install_evaluate_hook
    from lmms_eval_plugins.judges import session

    seen = []
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_STRICT", raising=False)
    monkeypatch.setattr(evaluator, "simple_evaluate", lambda **kwargs: seen.append(run_state.strict_mode()))
    monkeypatch.setattr("sys.argv", ["lmms-eval"])
    assert install_evaluate_hook()
    try:
        evaluator.simple_evaluate(model_args="samples=r.json,strict=true")
        evaluator.simple_evaluate(model_args="samples=r.json")
    finally:
        session.end_session()
    assert seen == [True, False]
