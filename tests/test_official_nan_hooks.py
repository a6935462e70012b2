"""CrossVid's ``official_nan`` counts through the hooks lmms-eval calls: ``utils.agg_official_nan`` (FSA)
and ``utils.agg_ccqa_official_nan`` (CCQA), as the task folder's ``utils.py`` builds them from the spec
(lmms_eval_plugins/task_hooks.py), over hand-built items in the shape ``process_results`` returns."""

from __future__ import annotations

import math

import pytest

from lmms_eval_plugins import outcome, run_state
from lmms_eval_plugins.benchmarks.crossvid import spec
from lmms_eval_plugins.judges.base import JudgeOutcome
from lmms_eval_plugins.task_hooks import item_values
from testkit.task_utils import load_task_adapter

FAILED = "[LMMS_EVAL_REQUEST_FAILED after 5 retries] Connection error."
NAN = float("nan")


@pytest.fixture(scope="module")
def utils():
    adapter = load_task_adapter("crossvid")
    folder = spec.BENCHMARK.tasks_dir
    # the hooks the FSA and CCQA task YAMLs name for the metric
    assert "aggregation: !function utils.agg_official_nan" in (folder / "_fsa_template_yaml").read_text()
    assert "aggregation: !function utils.agg_ccqa_official_nan" in (folder / "_ccqa_template_yaml").read_text()
    return adapter


@pytest.fixture(autouse=True)
def fresh_run():
    run_state.begin_run()  # no media noted unreadable by an earlier test


def of(items: list[dict], metric: str) -> list:
    """Each item's entry under ``metric``: what lmms-eval hands that metric's aggregation."""
    return [item[metric] for item in items]


def fsa(n: int, strict: float, robust: float, reply: str = "1,3") -> dict:
    """process_results' return for one FSA reply: ``strict`` is the official IoU (NaN for a nan time)."""
    item = {"id": n, "task": "FSA", "video_group": "g", "score": robust, "strict": strict, "parse_error": None}
    doc = {"id": n, "video": f"fsa/{n}.mp4", outcome.SKIPPED_FIELD: []}
    return item_values(spec.FSA_TEMPLATE, item, [reply], doc=doc)


def test_fsa_official_nan_counts_the_nan_reply_and_score_strict_is_nan_as_officially(utils):
    items = [fsa(1, 1.0, 1.0), fsa(2, NAN, 0.0, "nan,3"), fsa(3, 0.25, 0.25)]
    assert utils.agg_official_nan(of(items, "official_nan")) == 1
    assert math.isnan(utils.agg_score_strict(of(items, "score_strict")))  # the official mean holds the NaN
    assert utils.agg_score(of(items, "score")) == pytest.approx(100 * (1.0 + 0.0 + 0.25) / 3)  # 41.67, by hand
    assert utils.agg_official_nan(of(items, "official_nan")[::2]) == 0  # no NaN reply: 0, not null


def test_fsa_official_nan_is_null_with_an_unscored_item_and_leaves_skipped_media_out(utils):
    items = [fsa(1, NAN, 0.0, "nan,3"), fsa(2, 1.0, 1.0, FAILED)]
    assert outcome.is_unscored(items[1]["official_nan"])
    assert utils.agg_official_nan([i["official_nan"] for i in items]) is None  # the guard: unknown, never a count
    # a NaN reply to a video the run could not decode (the model saw a placeholder) is in no count
    run_state.current_run().note_unreadable_media("fsa/2.mp4", None)
    items = [fsa(1, NAN, 0.0, "nan,3"), fsa(2, NAN, 0.0, "nan,3"), fsa(3, 1.0, 1.0)]
    assert outcome.is_media_skipped(items[1]["official_nan"])
    assert utils.agg_official_nan([i["official_nan"] for i in items]) == 1


def verdict(coverage, correctness) -> JudgeOutcome:
    """A strict (official) rubric verdict: the judge's lists kept as written, NaN spelled "NaN"."""
    return JudgeOutcome(
        "rubric",
        "1",
        "m",
        verdict=0.5,
        detail={"coverage": coverage, "correctness": correctness, "n_points": len(coverage), "reading": "official"},
    )


def ccqa(n: int, judged: JudgeOutcome, reply: str = "an answer") -> dict:
    """process_results_ccqa's return for one question."""
    item = {"id": n, "task": "CCQA", "video_group": "g", "judge": judged.to_dict(), "n_skipped": 0}
    doc = {"id": n, "video": f"ccqa/{n}.mp4", outcome.SKIPPED_FIELD: []}
    return item_values(spec.CCQA_TEMPLATE, item, [reply], doc=doc, judge=judged)


def test_ccqa_official_nan_counts_the_question_with_a_nan_point(utils):
    items = [ccqa(1, verdict([1, 0], [1, 1])), ccqa(2, verdict([1, "NaN"], [1, 1])), ccqa(3, verdict([0, 0], [0, 0]))]
    assert utils.agg_ccqa_official_nan(of(items, "official_nan")) == 1
    assert math.isnan(utils.agg_ccqa_score(of(items, "score")))  # the official micro-average adds the NaN
    # without question 2, by hand: (1+0+1+1 + 0) points over 2 x (2 + 2) = 3/8 = 37.5
    assert utils.agg_ccqa_score(of(items, "score")[::2]) == pytest.approx(37.5)
    assert utils.agg_ccqa_official_nan(of(items, "official_nan")[::2]) == 0


def test_ccqa_official_nan_is_null_when_the_model_request_failed_and_counts_past_a_judge_error(utils):
    failed = [ccqa(1, verdict([1, "NaN"], [1, 1])), ccqa(2, verdict([1, 0], [1, 0]), FAILED)]
    assert utils.agg_ccqa_official_nan([i["official_nan"] for i in failed]) is None  # the guard
    # a judge error leaves the judged metrics null but not this count: question 2 has no points to add
    errored = [ccqa(1, verdict([1, "NaN"], [1, 1])), ccqa(2, JudgeOutcome("rubric", "1", "m", error="timeout"))]
    assert utils.agg_ccqa_score([i["score"] for i in errored]) is None
    assert utils.agg_ccqa_official_nan([i["official_nan"] for i in errored]) == 1
