"""Unscored samples (lmms_eval_plugins/outcome.py): a failed request is kept apart from a wrong answer."""

from __future__ import annotations

import pytest

from lmms_eval_plugins import outcome
from lmms_eval_plugins.testing.task_utils import load_task_utils

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
        assert aggregate([good[metric]]) is not None, metric
        assert aggregate([good[metric], bad[metric]]) is None, metric
    assert utils.agg_unscored([good["unscored"], bad["unscored"]]) == 1


def _first_doc(utils, benchmark, process):
    process_docs = {"process_results_step": "process_docs_step", "process_results_cate": "process_docs_cate",
                    "process_results_etc": "process_docs_etc"}.get(process, "process_docs_bu")
    source = {"benchmark": benchmark, "source": "sample", **({"frames": 4} if benchmark == "crossvid" else {})}
    return list(getattr(utils, process_docs)([source]))[0]
