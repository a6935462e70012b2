"""Unscored samples (lmms_eval_plugins/outcome.py): a failed request is kept apart from a wrong answer."""

from __future__ import annotations

import pytest

from lmms_eval_plugins import outcome
from testkit.task_utils import load_task_utils

FAILED = "[LMMS_EVAL_REQUEST_FAILED after 5 retries] Connection error."


@pytest.mark.parametrize("reply, reason", [
    (FAILED, outcome.REQUEST_FAILED),
    ("  [LMMS_EVAL_REQUEST_FAILED after 1 retries] Error code: 500", outcome.REQUEST_FAILED),
    ("[LMMS_EVAL_BUDGET_EXCEEDED]", outcome.BUDGET_EXCEEDED),
    ("Error Step: Step 2", None),
    ("The server said [LMMS_EVAL_REQUEST_FAILED after 5 retries]", None),  # quoted inside an answer: an answer
    ("", None),
    (None, None),
])
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


def test_guard_aggregations_wraps_every_agg_but_the_count():
    namespace = {"agg_a": lambda items: len(items), "agg_unscored": outcome.count_unscored, "helper": len}
    outcome.guard_aggregations(namespace)
    assert namespace["agg_a"]([{"unscored": "x"}]) is None
    assert namespace["agg_unscored"]([{"unscored": "x"}]) == 1
    assert namespace["helper"] is len


# Every benchmark: a failed request makes each metric of the task null and is counted, hand-checked on
# one scored and one failed sample per task.
@pytest.mark.parametrize("benchmark, process, good_reply", [
    ("errorradar", "process_results_step", "Error Step: Step 1"),
    ("errorradar", "process_results_cate", "Error Category: Calculation Error"),
    ("mmerror", "process_results_etc", "A"),
    ("crossvid", "process_results", "A"),
])
def test_each_task_nulls_its_metrics_and_counts_the_failed_sample(benchmark, process, good_reply):
    utils = load_task_utils(benchmark)
    doc = _first_doc(utils, benchmark, process)
    good = getattr(utils, process)(doc, [good_reply])
    bad = getattr(utils, process)(doc, [FAILED])
    assert set(good) == set(bad) and "unscored" in good
    for metric in good:
        aggregate = getattr(utils, f"agg_{metric}", None) or getattr(utils, f"agg_{metric.replace(benchmark + '_', '')}", None)
        if aggregate is None or metric == "unscored":
            continue
        if metric in (outcome.SKIPPED_METRIC, outcome.SKIPPED_BY_REASON_METRIC):  # the run's, not the sample's
            assert aggregate([good[metric], bad[metric]]) is not None, metric
            continue
        assert aggregate([good[metric]]) is not None, metric
        assert aggregate([good[metric], bad[metric]]) is None, metric
    assert utils.agg_unscored([good["unscored"], bad["unscored"]]) == 1


def _first_doc(utils, benchmark, process):
    process_docs = {"process_results_step": "process_docs_step", "process_results_cate": "process_docs_cate",
                    "process_results_etc": "process_docs_etc"}.get(process, "process_docs_bu")
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
    items = [outcome.with_unscored({"acc": {"correct": True}}, ["A"], doc=docs[0]),
             outcome.with_unscored({"acc": {"correct": False}}, [FAILED], doc=docs[1])]
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


@pytest.mark.parametrize("raw", ["not json", "[1, 2]", '{"missing media": "3"}', None])
def test_a_malformed_skipped_stamp_counts_nothing(raw):
    assert outcome.agg_skipped([{outcome.SKIPPED_FIELD: raw}]) == 0


def test_mmerror_counts_unlabelled_and_missing_media_records_apart(tmp_path, monkeypatch):
    import json
    import shutil

    mm = load_task_utils("mmerror")

    base = {"question": "Q?", "correct_answer": "1", "error_reason": "Step 1: r.", "domain": "M", "subdomain": "s"}
    records = [{**base, "question_id": "MMErroR_00001", "label": "B_Reasoning_Error"},
               {**base, "question_id": "MMErroR_00002", "label": ""},
               {**base, "question_id": "MMErroR_00003", "label": "A_Visual_Perception_Error"},
               {**base, "question_id": "MMErroR_00004", "label": "B_Reasoning_Error"}]
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
