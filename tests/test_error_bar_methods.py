"""Error bars that mean what they say (issue 37, items 1-3; issue 40, item 1).

A metric that is not a plain mean (a per-class F1, a macro average) gets the standard deviation and the
percentile interval of a seeded (cluster) bootstrap of the statistic itself; where the spec gives the
metric as sums of per-item counts (``Metric.sufficient``) every resample is computed at once. These
tests pin: the counts give the aggregation's own number; the fast route gives the generic route's
numbers wherever the generic number is right; a metric at its bound has error 0; the interval method.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmms_eval_plugins import errorbars, stats
from lmms_eval_plugins.benchmark import ordered_benchmarks
from lmms_eval_plugins.benchmarks.errorradar.scoring import CATEGORIES
from lmms_eval_plugins.benchmarks.errorradar.spec import BENCHMARK as ERRORRADAR
from lmms_eval_plugins.benchmarks.errorradar.spec import CATE_TEMPLATE, ERRORRADAR_CATE_3ROUNDS

HEADLINE = [m for m in (*CATE_TEMPLATE, *ERRORRADAR_CATE_3ROUNDS) if errorbars.has_error_bar(m)]


def _items(golds: list[str], preds: list[str | None], rounds: int) -> list[dict]:
    """ErrorRadar CATE items: record q asked ``rounds`` times, the same prediction each round."""
    return [{"gold": g, "pred": p, "correct": p == g, "question_type": "t", "round": r, "question_id": f"q{q}"}
            for r in range(rounds) for q, (g, p) in enumerate(zip(golds, preds))]


records = st.integers(min_value=2, max_value=25).flatmap(
    lambda n: st.tuples(st.lists(st.sampled_from(CATEGORIES), min_size=n, max_size=n),
                        st.lists(st.sampled_from((*CATEGORIES, None)), min_size=n, max_size=n)))


@settings(max_examples=60, deadline=None)
@given(records, st.integers(min_value=1, max_value=3))
def test_the_counts_give_the_aggregations_own_number(record, rounds):
    items = _items(*record, rounds)
    for metric in HEADLINE:
        if metric.sufficient is not None:
            assert stats.sufficient_value(metric.sufficient, items) == pytest.approx(metric.aggregate(items), abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(CATEGORIES), min_size=2, max_size=30), st.integers(min_value=1, max_value=3),
       st.booleans())
def test_a_metric_at_its_bound_has_error_bar_zero(golds, rounds, right):
    # all right: every headline metric is 100; all unparseable: every one is 0. Either way no resample can
    # move it, so the standard error is 0 and the interval is the point (was: cate_f1_cal 100 ± 32.04)
    items = _items(golds, list(golds) if right else [None] * len(golds), rounds)
    template = CATE_TEMPLATE if rounds == 1 else ERRORRADAR_CATE_3ROUNDS
    wanted = [(m, m.aggregate, items) for m in template if errorbars.has_error_bar(m)]
    for (metric, aggregate, _), bar in zip(wanted, errorbars.error_bars(ERRORRADAR, wanted, iterations=200)):
        value = aggregate(items)
        # a class the data never holds stays 0 in a macro average (macro F1 of an all-VIS oracle is 20): still
        # the same number on every resample, so still error 0
        assert value in (0.0, 100.0) or metric.name.startswith("cate_macro"), metric.name
        if bar is not None:
            assert bar.stderr == 0.0 and bar.low == bar.high == pytest.approx(value), metric.name


def test_every_mean_metric_at_its_bound_has_error_bar_zero():
    for spec in ordered_benchmarks():
        for metric in {m.name: m for ms in spec.metric_lists.values() for m in ms if m.item_score}.values():
            for score in (0.0, 1.0):
                items = [{metric.item_score: score, spec.cluster_key or "id": f"u{i % 7}"} for i in range(21)]
                (bar,) = errorbars.error_bars(spec, [(metric, None, items)], iterations=100)
                bound = score * errorbars.SCALE[metric.unit]
                assert bar is not None and (bar.stderr, bar.low, bar.high) == (0.0, bound, bound), (spec.name, metric.name)


def test_where_no_resample_is_undefined_the_fast_route_is_the_generic_routes_number():
    rng = np.random.default_rng(5)
    golds = list(rng.choice(CATEGORIES, 400))
    preds = [g if rng.random() < 0.5 else str(rng.choice(CATEGORIES)) for g in golds]
    items = _items(golds, preds, 1)
    for metric in HEADLINE[:19]:
        clusters = errorbars.clusters_of(ERRORRADAR, items)
        generic = stats.bootstrap_values(metric.aggregate, items, clusters=clusters, iterations=120, relabel="question_id")
        (bar,) = errorbars.error_bars(ERRORRADAR, [(metric, metric.aggregate, items)], iterations=120)
        if metric.sufficient is not None:
            (fast,) = stats.sufficient_resamples([(metric.sufficient, items)], clusters=clusters, iterations=120)
            assert np.allclose(fast, generic, rtol=0, atol=1e-9), metric.name  # the same resamples, the same values
        low, high = stats.percentile_interval(generic)
        assert (bar.low, bar.high) == pytest.approx((low, high), abs=1e-9), metric.name


def test_a_block_of_resamples_is_the_same_draws_as_one_at_a_time():
    one_by_one = np.stack(list(stats._picks(13, 50, stats.SEED)))
    blocks = np.concatenate(list(stats.resample_blocks(13, 50)))
    assert np.array_equal(one_by_one, blocks)
    counts = stats.multiplicities(blocks[:3])
    assert counts.shape == (3, 13) and np.array_equal(counts[1], np.bincount(blocks[1], minlength=13))


def test_the_percentile_interval_by_hand():
    # 1000 values 1..1000: m = (1000 - 1) // 40 = 24, so the 25th and the 976th
    assert stats.percentile_interval(np.arange(1, 1001)) == (25.0, 976.0)
    # 40 values: m = 0, the extremes
    assert stats.percentile_interval(np.arange(40.0)) == (0.0, 39.0)
    # the paired test's interval is this one (one interval method)
    assert stats.percentile_test(np.arange(1, 1001))[:2] == (25.0, 976.0)


def test_a_class_absent_from_a_resample_leaves_it_undefined_not_zero():
    # record q0 holds the only CAL; every other is VIS, all predicted right. A resample without q0 has no
    # CAL at all: CAL F1 is 0/0 there (NaN, left out), so the error bar is 0, not the spread of 100s and 0s
    items = _items(["CAL"] + ["VIS"] * 9, ["CAL"] + ["VIS"] * 9, 1)
    f1_cal = next(m for m in CATE_TEMPLATE if m.name == "cate_f1_cal")
    (values,) = stats.sufficient_resamples([(f1_cal.sufficient, items)], clusters=None, iterations=400)
    absent = np.isnan(values)
    assert 0 < absent.sum() < 400 and set(values[~absent]) == {100.0}
    assert errorbars.error_bars(ERRORRADAR, [(f1_cal, f1_cal.aggregate, items)], iterations=400)[0].stderr == 0.0


def test_every_headline_metric_says_how_its_error_bar_is_computed():
    for spec in ordered_benchmarks():
        for metrics in spec.metric_lists.values():
            for m in metrics:
                if errorbars.has_error_bar(m):
                    method = m.error_bar_method
                    assert ("mean of a per-item score" in method) == bool(m.item_score)
                    assert ("every resample at once" in method) == (m.sufficient is not None and not m.item_score)
