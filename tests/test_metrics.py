"""Hand-computed tests for lmms_eval_plugins.metrics (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmms_eval_plugins.metrics import (
    PRF,
    accuracy,
    breakdown,
    confusion_matrix,
    distribution,
    f1_score,
    interval_iou,
    jaccard,
    macro_over_groups,
    macro_prf,
    mean_std,
    merge_intervals,
    normalize_interval,
    per_class_prf,
    union_iou,
    union_length,
)

CLASSES = ["VIS", "CAL", "REAS", "KNOW", "MIS"]
GOLDS = ["VIS", "CAL", "CAL", "REAS", "MIS"]
PREDS = ["CAL", "CAL", None, "REAS", "VIS"]  # None = unparseable


def test_accuracy():
    assert accuracy([True, False, True, True]) == 75.0  # 3/4
    assert accuracy([]) == 0.0
    assert accuracy([False]) == 0.0
    # ErrorRadar example: matches at index 1 (CAL) and 3 (REAS) -> 2/5 = 40 %
    assert accuracy([g == p for g, p in zip(GOLDS, PREDS)]) == 40.0


def test_f1_score():
    assert f1_score(50.0, 100.0) == pytest.approx(200.0 / 3)  # 2*50*100/150 = 66.67
    assert f1_score(0.0, 0.0) == 0.0
    assert f1_score(0.0, 80.0) == 0.0  # 0/80
    assert f1_score(0.5, 0.5) == 0.5  # scale-free


def test_per_class_prf_hand_computed():
    got = per_class_prf(GOLDS, PREDS, CLASSES)
    # VIS: gold at 0 (pred CAL); predicted at 4 (gold MIS) -> tp 0, pred 1, gold 1 -> P 0, R 0
    assert got["VIS"] == PRF(0.0, 0.0, 0.0, 1)
    # CAL: tp 1 (idx 1); predicted at 0,1 -> P 1/2; gold at 1,2 (idx 2 unparseable) -> R 1/2
    #      F1 = 2*50*50/100 = 50
    assert got["CAL"] == PRF(50.0, 50.0, 50.0, 2)
    # REAS: tp 1, pred 1, gold 1 -> 100/100/100
    assert got["REAS"] == PRF(100.0, 100.0, 100.0, 1)
    # KNOW: never predicted (P 0), no gold (R 0) -> 0/0/0, support 0
    assert got["KNOW"] == PRF(0.0, 0.0, 0.0, 0)
    # MIS: never predicted (P 0), gold at 4 predicted VIS -> R 0
    assert got["MIS"] == PRF(0.0, 0.0, 0.0, 1)

    macro = macro_prf(got)
    # P = (0 + 50 + 100 + 0 + 0)/5 = 30; R likewise 30; F1 = (0+50+100+0+0)/5 = 30; support 5
    assert macro == PRF(30.0, 30.0, 30.0, 5)


def test_macro_f1_is_mean_of_f1s_not_f1_of_means():
    golds = ["A", "A", "B"]
    preds = ["A", "B", "B"]
    got = per_class_prf(golds, preds, ["A", "B"])
    # A: tp 1, pred 1, gold 2 -> P 100, R 50, F1 2*100*50/150 = 66.67
    # B: tp 1, pred 2, gold 1 -> P 50, R 100, F1 66.67
    assert got["A"].precision == 100.0 and got["A"].recall == 50.0
    assert got["B"].precision == 50.0 and got["B"].recall == 100.0
    macro = macro_prf(got)
    assert macro.precision == 75.0 and macro.recall == 75.0
    assert macro.f1 == pytest.approx(200.0 / 3)  # mean of 66.67 and 66.67
    assert f1_score(macro.precision, macro.recall) == 75.0  # what we do NOT report


def test_unknown_prediction_counts_like_unparseable():
    got = per_class_prf(["A", "B"], ["Z", "B"], ["A", "B"])
    # A: gold 1, predicted 0 -> R 0; "Z" counts toward no precision; B: 1/1, 1/1
    assert got["A"] == PRF(0.0, 0.0, 0.0, 1)
    assert got["B"] == PRF(100.0, 100.0, 100.0, 1)


def test_prf_empty_and_mismatch():
    assert per_class_prf([], [], CLASSES)["CAL"] == PRF(0.0, 0.0, 0.0, 0)
    assert macro_prf({}) == PRF(0.0, 0.0, 0.0, 0)
    with pytest.raises(ValueError):
        per_class_prf(["A"], [], ["A"])


def test_confusion_matrix():
    cm = confusion_matrix(GOLDS, PREDS, CLASSES)
    assert list(cm) == CLASSES
    assert list(cm["CAL"]) == CLASSES + ["unparseable"]
    assert cm["VIS"]["CAL"] == 1
    assert cm["CAL"]["CAL"] == 1 and cm["CAL"]["unparseable"] == 1
    assert cm["REAS"]["REAS"] == 1
    assert cm["MIS"]["VIS"] == 1
    assert sum(cm["KNOW"].values()) == 0
    assert sum(sum(r.values()) for r in cm.values()) == 5


def test_confusion_matrix_keeps_unknown_gold_rows():
    cm = confusion_matrix(["A", "Q"], ["A", "A"], ["A"], unparseable_label="??")
    assert cm == {"A": {"A": 1, "??": 0}, "Q": {"A": 1, "??": 0}}


def test_distribution():
    d = distribution(PREDS, CLASSES)
    # CAL 2/5, REAS 1/5, VIS 1/5, None 1/5
    assert d == {"VIS": 20.0, "CAL": 40.0, "REAS": 20.0, "KNOW": 0.0, "MIS": 0.0, "unparseable": 20.0}
    assert distribution([], ["A"]) == {"A": 0.0, "unparseable": 0.0}


def test_breakdown_and_macro_over_groups():
    b = breakdown([100.0, 0.0, 100.0, 100.0, 50.0], ["b", "a", None, "b", "  "])
    # a: 0; b: (100+100)/2 = 100; (none): None and blank -> (100+50)/2 = 75; keys sorted
    assert b == {"(none)": 75.0, "a": 0.0, "b": 100.0}
    assert list(b) == ["(none)", "a", "b"]
    assert macro_over_groups(b) == pytest.approx((75 + 0 + 100) / 3)
    assert breakdown([], []) == {}
    assert macro_over_groups({}) == 0.0
    assert breakdown([1.0], [None], missing_key="n/a") == {"n/a": 1.0}


@pytest.mark.parametrize(
    "pred, gold, expected",
    [
        ((10, 20), (10, 20), 1.0),  # identical
        ((0, 10), (20, 30), 0.0),  # disjoint: max(0, 10-20) = 0
        ((0, 10), (10, 20), 0.0),  # touching: 0 / 20
        ((12, 18), (10, 20), 0.6),  # nested: (18-12)/(20-10)
        ((0, 10), (5, 15), 1 / 3),  # partial: (10-5)/(15-0)
        ((5, 5), (5, 5), 0.0),  # zero-length: denominator 0 -> 0
        # reversed, used as given: s1=20, e1=10 vs (10, 20):
        #   inter = max(0, min(10,20) - max(20,10)) = max(0, -10) = 0; denom = 20 - 10 = 10 -> 0
        ((20, 10), (10, 20), 0.0),
        # reversed inside the gold: (18, 12) vs (10, 20): min(12,20)-max(18,10) = -6 -> 0
        ((18, 12), (10, 20), 0.0),
        ((float("nan"), 1), (0, 1), 0.0),
    ],
)
def test_interval_iou(pred, gold, expected):
    assert interval_iou(pred, gold) == pytest.approx(expected)


def test_normalize_interval():
    assert normalize_interval((20, 10)) == (10, 20)
    assert normalize_interval((1, 2)) == (1, 2)
    # normalising first forgives the reversal: (10,20) vs (10,20) = 1
    assert interval_iou(normalize_interval((20, 10)), (10, 20)) == 1.0


def test_merge_intervals_and_union_length():
    assert merge_intervals([(5, 8), (0, 3), (2, 4), (8, 9), (12, 10)]) == [(0, 4), (5, 9), (10, 12)]
    # lengths 4 + 4 + 2 = 10
    assert union_length([(5, 8), (0, 3), (2, 4), (8, 9), (12, 10)]) == 10
    assert merge_intervals([]) == []
    assert merge_intervals([(0, 10), (2, 3)]) == [(0, 10)]  # contained
    assert merge_intervals([(0, float("inf")), (1, 2)]) == [(1, 2)]  # non-finite dropped


def test_union_iou_overlapping_predictions():
    preds = [(0, 10), (5, 15), (30, 40)]  # union: [0,15] + [30,40] -> 25
    golds = [(10, 20), (35, 50)]  # union: 10 + 15 -> 25
    # intersection: [10,15] = 5 and [35,40] = 5 -> 10; union = 25 + 25 - 10 = 40 -> 0.25
    assert union_iou(preds, golds) == pytest.approx(0.25)
    assert union_iou(golds, preds) == pytest.approx(0.25)  # symmetric


def test_union_iou_edges():
    assert union_iou([], []) == 0.0  # nothing to ground
    assert union_iou([(0, 1)], []) == 0.0
    assert union_iou([], [(0, 1)]) == 0.0
    assert union_iou([(0, 10)], [(0, 10)]) == 1.0
    assert union_iou([(10, 0)], [(0, 10)]) == 1.0  # merge normalises reversed intervals
    # [12,20] + [31,35] vs [12,20]: inter 8, union 8 + 4 = 12
    assert union_iou([(12, 20), (31, 35)], [(12, 20)]) == pytest.approx(8 / 12)


def test_jaccard():
    pred = {("step2", "step2"), ("step3", "step2")}
    gold = {("step3", "step2"), ("step3", "step1")}
    assert jaccard(pred, gold) == pytest.approx(1 / 3)  # 1 shared / 3 distinct
    assert jaccard(set(), set()) == 1.0  # identical empty sets
    assert jaccard({1}, set()) == 0.0
    assert jaccard([1, 1, 2], [2, 1]) == 1.0


def test_mean_std():
    assert mean_std([]) == (0.0, 0.0)
    assert mean_std([42.0]) == (42.0, 0.0)
    # 40, 42, 44: mean 42; sample variance (4 + 0 + 4)/2 = 4 -> std 2
    assert mean_std([40.0, 42.0, 44.0]) == pytest.approx((42.0, 2.0))
    # 1..4: mean 2.5; (2.25 + 0.25 + 0.25 + 2.25)/3 = 5/3 -> std 1.29099
    m, s = mean_std([1, 2, 3, 4])
    assert m == 2.5 and s == pytest.approx(math.sqrt(5 / 3))


# --------------------------------------------------------------------------------------------
# properties

FINITE = st.floats(-1e6, 1e6, allow_nan=False)
IV = st.tuples(FINITE, FINITE)


@settings(max_examples=200, deadline=None)
@given(IV, IV)
def test_interval_iou_bounds_and_symmetry(a, b):
    v = interval_iou(a, b)
    assert 0.0 <= v <= 1.0
    assert v == pytest.approx(interval_iou(b, a))


@settings(max_examples=200, deadline=None)
@given(st.lists(IV, max_size=8), st.lists(IV, max_size=8))
def test_union_iou_bounds(p, g):
    v = union_iou(p, g)
    assert 0.0 <= v <= 1.0 + 1e-9
    merged = merge_intervals(p)
    assert all(s <= e for s, e in merged)
    assert all(merged[i][1] < merged[i + 1][0] for i in range(len(merged) - 1))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ABC"), st.sampled_from(["A", "B", "C", None]))))
def test_prf_bounds(pairs):
    golds = [g for g, _ in pairs]
    preds = [p for _, p in pairs]
    per = per_class_prf(golds, preds, ["A", "B", "C"])
    for v in per.values():
        assert 0 <= v.precision <= 100 and 0 <= v.recall <= 100 and 0 <= v.f1 <= 100
    assert sum(v.support for v in per.values()) == len(pairs)
    if pairs:
        assert sum(distribution(preds, ["A", "B", "C"]).values()) == pytest.approx(100.0)
