"""Standard errors and paired differences, against values computed by hand from the definitions."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmms_eval_plugins import errorbars, stats
from lmms_eval_plugins.benchmark import Benchmark, Metric, get


def test_mean_stderr_by_hand():
    # mean 0.5; sample variance (4 x 0.25) / 3 = 1/3; SE = sqrt(1/3) / sqrt(4)
    assert stats.mean_stderr([0, 1, 1, 0]) == pytest.approx(math.sqrt(1 / 3) / 2)
    assert stats.mean_stderr([1]) is None


def test_clustered_stderr_by_hand_and_against_lmms_eval():
    from lmms_eval.api.metrics import clustered_stderr as lmms_clustered

    values, clusters = [1, 1, 0, 0], ["a", "a", "b", "b"]
    # deviations +-0.5; cluster sums 1 and -1: cross terms 2 - 1 = 1; CLT term (1/3)/4
    expected = math.sqrt(1 / 12 + 1 / 16)
    assert stats.clustered_stderr(values, clusters) == pytest.approx(expected)
    assert stats.clustered_stderr(values, clusters) == pytest.approx(lmms_clustered(values, clusters))
    # one item per cluster: no cross terms, the plain standard error
    assert stats.clustered_stderr(values, [1, 2, 3, 4]) == pytest.approx(stats.mean_stderr(values))
    assert stats.clustered_stderr(values, ["a"] * 4) is None


def test_bootstrap_is_seeded_and_close_to_the_analytic_error():
    rng = np.random.default_rng(0)
    values = list(rng.integers(0, 2, size=300).astype(float))
    mean = lambda xs: 100.0 * sum(xs) / len(xs)  # noqa: E731  (a metric in percent)
    first = stats.bootstrap_stderr(mean, values, iterations=2000)
    assert first == stats.bootstrap_stderr(mean, values, iterations=2000)  # same seed, same number
    analytic = 100.0 * stats.mean_stderr(values) * math.sqrt(299 / 300)
    assert first == pytest.approx(analytic, rel=0.1)
    assert stats.bootstrap_stderr(mean, values, iterations=0) is None
    assert stats.bootstrap_stderr(mean, values[:1], iterations=100) is None


def test_cluster_bootstrap_resamples_whole_clusters():
    # two clusters of identical items: every resample is all-0, all-1 or half: the spread is cluster-level
    values = [0.0] * 5 + [1.0] * 5
    clusters = ["a"] * 5 + ["b"] * 5
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    se = stats.bootstrap_stderr(mean, values, clusters=clusters, iterations=4000)
    # resampled means are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4: SD = sqrt(1/8)
    assert se == pytest.approx(math.sqrt(1 / 8), rel=0.05)


def test_bootstrap_iterations_from_the_environment(monkeypatch):
    monkeypatch.setenv(stats.BOOTSTRAP_ENV, "250")
    assert stats.bootstrap_iterations() == 250
    monkeypatch.setenv(stats.BOOTSTRAP_ENV, "many")
    with pytest.raises(ValueError, match="LMMS_EVAL_PLUGINS_BOOTSTRAP_ITERS='many'"):
        stats.bootstrap_iterations()


def test_percentile_test_by_hand_at_the_boundary():
    # 40 resamples: m = 39 // 40 = 0, so the interval is [min, max]; all above 0: p = 0
    assert stats.percentile_test(list(range(1, 41))) == (1.0, 40.0, 0.0)
    # one resample at 0 of 40: p = 2 * 1 / 40 = 0.05, not below 0.05, and the interval reaches 0
    low, high, p = stats.percentile_test([0, *range(1, 40)])
    assert (low, high, p) == (0.0, 39.0, 0.05)
    # 41 resamples: m = 40 // 40 = 1, the interval is [d_(2), d_(40)]; one at -1: p = 2 / 41 < 0.05
    low, high, p = stats.percentile_test([-1, *range(1, 41)])
    assert (low, high) == (1.0, 39.0) and p == pytest.approx(2 / 41) and p < 0.05
    # 1000 resamples: m = 24, the 25th and the 976th values; 24 of them below 0: p = 0.048
    low, high, p = stats.percentile_test([-1.0] * 24 + [2.0] * 976)
    assert (low, high, p) == (2.0, 2.0, 0.048)
    low, high, p = stats.percentile_test([-1.0] * 25 + [2.0] * 975)
    assert (low, high, p) == (-1.0, 2.0, 0.05)
    assert stats.percentile_test([0.0] * 10) == (0.0, 0.0, 1.0)  # all equal: p = 1, capped
    assert stats.percentile_test([1e-12, -1e-12] * 5) == (0.0, 0.0, 1.0)  # rounding noise is a tie
    with pytest.raises(ValueError):
        stats.percentile_test([])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.integers(-3, 3).map(float), st.floats(-100, 100)), min_size=1, max_size=120))
def test_the_interval_excludes_0_exactly_when_p_is_below_005(diffs):
    low, high, p = stats.percentile_test(diffs)
    assert low <= high and 0.0 <= p <= 1.0
    assert (low > 0 or high < 0) == (p < 0.05)
    assert min(diffs) - 1e-9 <= low and high <= max(diffs) + 1e-9  # inside the resampled values


def test_paired_mean_by_hand():
    # 8 independent items, B right where A is wrong on 4: diff 50 points. A resampled mean of the
    # differences is 100 X / 8 with X ~ Binomial(8, 1/2): P(X = 0) = 1/256, P(X <= 1) = 9/256 > 2.5%,
    # so the interval is [12.5, 87.5] and p = 2 P(X = 0) = 2/256.
    result = stats.paired_mean([0] * 8, [1, 1, 1, 1, 0, 0, 0, 0], scale=100.0, iterations=4000)
    assert (result.a, result.b, result.diff, result.n, result.units) == (0.0, 50.0, 50.0, 8, 8)
    assert (result.ci_low, result.ci_high) == (12.5, 87.5)
    assert result.p_value == pytest.approx(2 / 256, abs=0.004)
    assert result.significant and result.method == "paired bootstrap" and result.resamples == 4000
    # the same items as 6 clusters of 2, 3 clusters differing: X ~ Binomial(6, 1/2) clusters,
    # P(X = 0) = 1/64, P(X <= 1) = 7/64: interval [100/6, 500/6], p = 2/64 = 0.031
    clusters = [c for c in range(6) for _ in (0, 1)]
    clustered = stats.paired_mean([0] * 12, [1] * 6 + [0] * 6, clusters=clusters, scale=100.0, iterations=4000)
    assert clustered.diff == 50.0 and clustered.units == 6 and clustered.method == "paired cluster bootstrap"
    assert clustered.ci_low == pytest.approx(100 / 6) and clustered.ci_high == pytest.approx(500 / 6)
    assert clustered.p_value == pytest.approx(2 / 64, abs=0.012)
    same = stats.paired_mean([1, 0, 1, 1, 0, 1], [1, 0, 1, 1, 0, 1], iterations=200)
    assert (same.diff, same.ci_low, same.ci_high, same.p_value, same.significant) == (0.0, 0.0, 0.0, 1.0, False)


def test_too_few_units_or_items_give_no_interval_and_say_why():
    few = stats.paired_mean([0, 0, 1, 1], [1, 1, 1, 1], scale=100.0, iterations=200)
    assert few.diff == 50.0 and (few.ci_low, few.ci_high, few.p_value) == (None, None, None)
    assert few.note.startswith("4 independent unit(s): no interval below 6")
    # eight items, but four clusters: the clusters count
    paired = stats.paired_mean([0] * 8, [1] * 8, clusters=[0, 0, 1, 1, 2, 2, 3, 3], iterations=200)
    assert paired.ci_low is None and paired.note.startswith("4 independent unit(s)")
    empty = stats.paired_bootstrap(len, [], [], iterations=50)
    assert (empty.diff, empty.n, empty.note) == (None, 0, "no item scored in both runs")
    undefined = stats.paired_bootstrap(lambda xs: None, list(range(8)), list(range(8)), iterations=50)
    assert undefined.diff is None and undefined.note == "the metric has no number in run A and B"
    off = stats.paired_mean([0] * 8, [1] * 8, iterations=0)
    assert off.diff == 1.0 and off.ci_low is None and off.note == "bootstrap iterations set to 0"


def test_the_mean_shortcut_equals_the_bootstrap_of_the_mean():
    rng = np.random.default_rng(3)
    a, b = list(rng.random(30)), list(rng.random(30))
    clusters = [i // 3 for i in range(30)]
    mean = lambda xs: 100.0 * sum(xs) / len(xs)  # noqa: E731
    for c in (None, clusters):
        fast = stats.paired_mean(a, b, clusters=c, scale=100.0, iterations=300)
        slow = stats.paired_bootstrap(mean, a, b, clusters=c, iterations=300)
        assert fast.diff == pytest.approx(slow.diff) and fast.p_value == slow.p_value
        assert (fast.ci_low, fast.ci_high) == pytest.approx((slow.ci_low, slow.ci_high))


def test_paired_bootstrap_of_a_ratio_metric():
    # F1-like statistic: not a mean of items. B is right where A is wrong on 40 of 60 items.
    a = [{"tp": int(i < 20)} for i in range(60)]
    b = [{"tp": int(i < 60)} for i in range(60)]
    share = lambda items: 100.0 * sum(i["tp"] for i in items) / len(items)  # noqa: E731
    result = stats.paired_bootstrap(share, a, b, iterations=1000)
    assert result.diff == pytest.approx(100 - 100 * 20 / 60)
    assert result.significant and result.p_value == 0.0 and result.ci_low > 0 and result.ci_high <= 100.0
    assert result.n == 60 and result.method == "paired bootstrap"


def _f1(items):
    """A bounded ratio (percent) undefined without positives: the shape of the per-class F1s."""
    tp = sum(1 for i in items if i["gold"] and i["pred"])
    fp = sum(1 for i in items if not i["gold"] and i["pred"])
    fn = sum(1 for i in items if i["gold"] and not i["pred"])
    return None if tp + fp + fn == 0 else 100.0 * 2 * tp / (2 * tp + fp + fn)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans(), st.integers(0, 9)), min_size=0, max_size=40),
    st.booleans(),
)
def test_paired_intervals_stay_in_range_and_agree_with_p(rows, mean_metric):
    a = [{"gold": g, "pred": pa} for g, pa, _, _ in rows]
    b = [{"gold": g, "pred": pb} for g, _, pb, _ in rows]
    clusters = [c for *_, c in rows]
    if mean_metric:
        result = stats.paired_mean(
            [float(x["pred"]) for x in a], [float(x["pred"]) for x in b], clusters=clusters, scale=100.0, iterations=80
        )
    else:
        result = stats.paired_bootstrap(_f1, a, b, clusters=clusters, iterations=80)
    have = [result.ci_low is not None, result.ci_high is not None, result.p_value is not None]
    assert all(have) or (not any(have) and result.note)  # all from one method, or none and why
    if all(have):
        assert -100.0 <= result.ci_low <= result.ci_high <= 100.0
        assert result.significant == (result.p_value < 0.05)
        assert result.units >= stats.MIN_UNITS


def test_minimum_detectable_effect():
    assert stats.minimum_detectable_effect(1.0) == pytest.approx(1.959964 + 0.841621, abs=1e-5)
    assert stats.minimum_detectable_effect(None) is None


# ------------------------------------------------------------------ errorbars: the lmms-eval hook


def _task_output(task_name, metrics, items_by_metric, aggregations):
    return SimpleNamespace(
        task_name=task_name,
        task=SimpleNamespace(aggregation=lambda: aggregations),
        sample_metrics={(name, "none"): items for name, items in items_by_metric.items()},
        agg_metrics={
            **{f"{name},none": value for name, value in metrics.items()},
            **{f"{name}_stderr,none": "N/A" for name in metrics},
        },
    )


def test_fill_stderrs_uses_the_spec_analytic_clustered_and_leaves_counts_alone():
    # three rounds of two records: record q1 right every time, q2 right once
    items = [
        {"question_id": q, "correct": c, "round": r}
        for r, (c1, c2) in enumerate([(True, False), (True, True), (True, False)])
        for q, c in (("q1", c1), ("q2", c2))
    ]
    agg = {
        "step_acc": lambda xs: 100.0 * sum(x["correct"] for x in xs) / len(xs),
        "step_parse_fail": lambda xs: 0,
        "step_acc_std": lambda xs: 0.0,
    }
    out = _task_output(
        "errorradar_step_3rounds",
        {"step_acc": agg["step_acc"](items), "step_parse_fail": 0, "step_acc_std": 0.0},
        {"step_acc": items, "step_parse_fail": items, "step_acc_std": items},
        agg,
    )
    errorbars.fill_stderrs(out, bootstrap_iters=100)
    scores = [float(i["correct"]) for i in items]
    expected = 100 * stats.clustered_stderr(scores, [i["question_id"] for i in items])
    assert out.agg_metrics["step_acc_stderr,none"] == pytest.approx(expected)
    assert out.agg_metrics["step_parse_fail_stderr,none"] == "N/A"  # a count has no error bar
    assert out.agg_metrics["step_acc_std_stderr,none"] == "N/A"


def test_fill_stderrs_bootstraps_a_metric_that_is_not_a_mean_and_skips_unscored_and_foreign_tasks():
    spec = get("errorradar")
    items = [{"question_id": f"q{i}", "correct": i % 3 == 0} for i in range(30)]
    f1 = lambda xs: 100.0 * sum(x["correct"] for x in xs) / (len(xs) + 1)  # noqa: E731  (a ratio, not a mean)
    out = _task_output(
        "errorradar_cate",
        {"cate_macro_f1": f1(items), "cate_acc": None},
        {"cate_macro_f1": items, "cate_acc": items},
        {"cate_macro_f1": f1, "cate_acc": f1},
    )
    errorbars.fill_stderrs(out, bootstrap_iters=100)
    assert out.agg_metrics["cate_macro_f1_stderr,none"] == pytest.approx(
        stats.bootstrap_stderr(f1, items, clusters=errorbars.clusters_of(spec, items))
    )
    assert out.agg_metrics["cate_acc_stderr,none"] == "N/A"  # the metric is null (unscored): no error bar
    off = _task_output("errorradar_cate", {"cate_macro_f1": 1.0}, {"cate_macro_f1": items}, {"cate_macro_f1": f1})
    errorbars.fill_stderrs(off, bootstrap_iters=0)  # lmms-eval's --bootstrap_iters 0: bootstrap off
    assert off.agg_metrics["cate_macro_f1_stderr,none"] == "N/A"
    foreign = _task_output("mmmu_val", {"cate_macro_f1": 1.0}, {"cate_macro_f1": items}, {"cate_macro_f1": f1})
    errorbars.fill_stderrs(foreign, bootstrap_iters=100)
    assert foreign.agg_metrics["cate_macro_f1_stderr,none"] == "N/A"


def test_a_failing_aggregation_costs_only_its_error_bar(caplog):
    def boom(xs):
        raise ZeroDivisionError("x")

    items = [{"question_id": "a", "correct": True}, {"question_id": "b", "correct": False}]
    out = _task_output("errorradar_cate", {"cate_macro_f1": 50.0}, {"cate_macro_f1": items}, {"cate_macro_f1": boom})
    spec = Benchmark("t", "T", "", get("errorradar").tasks_dir, {"x": (Metric("cate_macro_f1", True),)})
    assert errorbars.metric_stderr(spec, Metric("n", False, unit="count"), boom, items) is None
    errorbars.fill_stderrs(out, bootstrap_iters=100)
    assert out.agg_metrics["cate_macro_f1,none"] == 50.0 and out.agg_metrics["cate_macro_f1_stderr,none"] == "N/A"


# ------------------------------------------------------------------ coverage simulation (seconds)


def _coverage(make_sample, stderr, truth, reps=1500, seed=11):
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        values, clusters = make_sample(rng)
        se = stderr(values, clusters)
        mean = float(np.mean(values))
        hits += abs(mean - truth) <= stats.Z95 * se
    return hits / reps


def test_the_95_percent_interval_covers_the_truth_for_a_plain_accuracy():
    def sample(rng):
        return rng.random(400) < 0.7, None

    coverage = _coverage(sample, lambda v, c: stats.mean_stderr(v), 0.7)
    assert 0.93 <= coverage <= 0.97


def test_the_clustered_interval_covers_the_truth_where_the_plain_one_does_not():
    # 80 videos of 5 questions; each video has its own difficulty (a shared random effect)
    def sample(rng):
        difficulty = np.clip(rng.normal(0.6, 0.2, size=80), 0, 1)
        values = (rng.random((80, 5)) < difficulty[:, None]).ravel()
        return values, np.repeat(np.arange(80), 5)

    truth = float(np.mean(np.clip(np.random.default_rng(0).normal(0.6, 0.2, size=2_000_000), 0, 1)))
    clustered = _coverage(sample, stats.clustered_stderr, truth)
    plain = _coverage(sample, lambda v, c: stats.mean_stderr(v), truth)
    assert 0.93 <= clustered <= 0.97
    assert plain < 0.90  # ignoring the clusters overstates the precision
