"""Error bars that mean what they say (issue 37, items 1-3; issue 40, item 1).

A metric that is not a plain mean (a per-class F1, a macro average) gets the standard deviation and the
percentile interval of a seeded (cluster) bootstrap of the statistic itself; where the spec gives the
metric as sums of per-item counts (``Metric.sufficient``) every resample is computed at once. These
tests pin: the counts give the aggregation's own number; the fast route gives the generic route's
numbers wherever the generic number is right; a metric at its bound has error 0; the interval method.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lmms_eval_plugins import errorbars, stats
from lmms_eval_plugins.benchmark import ordered_benchmarks
from lmms_eval_plugins.benchmarks.errorradar.scoring import CATEGORIES
from lmms_eval_plugins.benchmarks.errorradar.spec import BENCHMARK as ERRORRADAR
from lmms_eval_plugins.benchmarks.errorradar.spec import CATE_TEMPLATE, ERRORRADAR_CATE_3ROUNDS

HEADLINE = [m for m in (*CATE_TEMPLATE, *ERRORRADAR_CATE_3ROUNDS) if errorbars.has_error_bar(m)]


def _items(golds: list[str], preds: list[str | None], rounds: int) -> list[dict]:
    """ErrorRadar CATE items: record q asked ``rounds`` times, the same prediction each round."""
    return [
        {"gold": g, "pred": p, "correct": p == g, "question_type": "t", "round": r, "question_id": f"q{q}"}
        for r in range(rounds)
        for q, (g, p) in enumerate(zip(golds, preds))
    ]


records = st.integers(min_value=2, max_value=25).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from(CATEGORIES), min_size=n, max_size=n),
        st.lists(st.sampled_from((*CATEGORIES, None)), min_size=n, max_size=n),
    )
)


@settings(max_examples=60, deadline=None)
@given(records, st.integers(min_value=1, max_value=3))
def test_the_counts_give_the_aggregations_own_number(record, rounds):
    items = _items(*record, rounds)
    for metric in HEADLINE:
        if metric.sufficient is not None:
            assert stats.sufficient_value(metric.sufficient, items) == pytest.approx(metric.aggregate(items), abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(CATEGORIES), min_size=2, max_size=30), st.integers(min_value=1, max_value=3), st.booleans()
)
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
                assert bar is not None and (bar.stderr, bar.low, bar.high) == (0.0, bound, bound), (
                    spec.name,
                    metric.name,
                )


def test_where_no_resample_is_undefined_the_fast_route_is_the_generic_routes_number():
    rng = np.random.default_rng(5)
    golds = list(rng.choice(CATEGORIES, 400))
    preds = [g if rng.random() < 0.5 else str(rng.choice(CATEGORIES)) for g in golds]
    items = _items(golds, preds, 1)
    for metric in HEADLINE[:19]:
        clusters = errorbars.clusters_of(ERRORRADAR, items)
        generic = stats.bootstrap_values(
            metric.aggregate, items, clusters=clusters, iterations=120, relabel="question_id"
        )
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


# ------------------------------------------------------------------ MMErroR: ratios and a domain macro at once


def _mmerror_items(draws: list[tuple[int, int, int, int, int]], epd: bool) -> list[dict]:
    """One question per draw (domain, gold, stage-1 reading, stage-2 / ETC reading, official agrees):
    EPD's two requests per question, or one ETC item (with three unasked E_NoError records)."""
    from lmms_eval_plugins.benchmarks.mmerror import labels

    golds = (*labels.ERROR_LABELS, labels.NO_ERROR_LABEL)
    out = []
    for q, (domain, gold, first, second, agree) in enumerate(draws):
        base = {
            "question_id": f"q{q}",
            "domain": ("Math", "Physics", "", "Code")[domain],
            "subdomain": "s",
            "label": golds[gold],
            "parse_error": "unreadable",
        }
        if epd:
            decision = (labels.ABSENT, labels.PRESENT, None)[first]
            typed = (*labels.ERROR_LABELS, None)[second]
            out.append(
                {**base, "stage": labels.STAGE_PRESENCE, "pred": decision, "official_pred": decision if agree else None}
            )
            out.append({**base, "stage": labels.STAGE_TYPE, "pred": typed, "official_pred": typed if agree else None})
        else:
            gold_etc = labels.ERROR_LABELS[gold % 4]
            pred = (*labels.ERROR_LABELS, None)[second]
            out.append(
                {
                    **base,
                    "label": gold_etc,
                    "gold": gold_etc,
                    "pred": pred,
                    "correct": pred == gold_etc,
                    "official_pred": pred if agree else None,
                    "official_correct": agree and pred == gold_etc,
                    labels.OFFICIAL_NOT_ASKED_FIELD: 3,
                }
            )
    return out


mm_draws = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 4), st.integers(0, 2), st.integers(0, 4), st.integers(0, 1)),
    min_size=2,
    max_size=25,
)


@settings(max_examples=40, deadline=None)
@given(mm_draws, st.booleans())
def test_mmerror_counts_give_the_aggregations_and_the_generic_routes_numbers(draws, epd):
    from lmms_eval_plugins.benchmarks.mmerror.spec import BENCHMARK as MMERROR

    items = _mmerror_items(draws, epd)
    task = "mmerror_epd" if epd else "mmerror_etc"
    clusters = errorbars.clusters_of(MMERROR, items)
    fast_metrics = [m for m in MMERROR.task_metrics(task).values() if m.sufficient is not None and not m.item_score]
    assert len(fast_metrics) == (6 if epd else 3)
    for metric in fast_metrics:
        expected = metric.aggregate(items)
        assert stats.sufficient_value(metric.sufficient, items) == (
            None if expected is None else pytest.approx(expected, abs=1e-9)
        ), metric.name
        generic = stats.bootstrap_values(
            metric.aggregate, items, clusters=clusters, iterations=60, relabel="question_id"
        )
        (fast,) = stats.sufficient_resamples([(metric.sufficient, items)], clusters=clusters, iterations=60)
        generic = np.array([np.nan if v is None else v for v in generic], dtype=float)
        assert np.allclose(fast, generic, rtol=0, atol=1e-9, equal_nan=True), metric.name


RANDOM_RUN = Path(__file__).parent / "data" / "report_runs" / "random"  # a seeded random model's sample tasks


# ErrorRadar's counts correct the generic route where a resample lacks a class (issue 37): tested above
@pytest.mark.parametrize(
    "samples",
    sorted(p for p in RANDOM_RUN.glob("*_samples_*.jsonl") if "errorradar" not in p.name),
    ids=lambda p: p.name.split("_samples_")[1][:-6],
)
def test_every_fast_metric_of_a_stored_run_gives_the_generic_routes_numbers(samples):
    """Issue 40: each benchmark's counts (MMErroR's ratios and domain macro, CausalStep's chain means,
    ViRectify's judged accuracies...) give its aggregation's number and, resample by resample, the generic
    route's numbers on a real run's items."""
    from lmms_eval_plugins.benchmark import benchmark_of_task
    from lmms_eval_plugins.logged_samples import first_item, read_samples

    task = samples.name.split("_samples_")[1][:-6]
    spec = benchmark_of_task(task)
    items = [first_item(line) for line in read_samples(samples)]
    clusters = errorbars.clusters_of(spec, items)
    for metric in spec.task_metrics(task).values():
        if metric.sufficient is None or metric.item_score or not errorbars.has_error_bar(metric):
            continue
        with errorbars.quiet():
            expected = metric.aggregate(items)
            generic = stats.bootstrap_values(
                metric.aggregate,
                items,
                clusters=clusters,
                iterations=80,
                relabel=spec.cluster_key if clusters is not None else None,
            )
        value = stats.sufficient_value(metric.sufficient, items)
        assert (value is None and (expected is None or expected != expected)) or value == pytest.approx(
            expected, abs=1e-9
        ), metric.name
        (fast,) = stats.sufficient_resamples([(metric.sufficient, items)], clusters=clusters, iterations=80)
        generic = np.array([np.nan if v is None else v for v in generic], dtype=float)
        assert np.allclose(fast, generic, rtol=0, atol=1e-9, equal_nan=True), (task, metric.name)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(("error_identify", "rationale", None)), st.integers(0, 4)),
        min_size=2,
        max_size=30,
    )
)
def test_virectify_judged_counts_give_the_generic_routes_numbers(draws):
    """Verdict 1 or 0, nothing to judge (skipped: counts 0), or a judge error (the metric is null)."""
    from lmms_eval_plugins.benchmarks.virectify.spec import BENCHMARK as VIRECTIFY

    def outcome(kind: int) -> dict:
        return {
            "name": "semantic_match",
            "version": "1",
            "model": "m",
            "verdict": (1.0, 0.0, None, None)[kind],
            "detail": {},
            "error": "HTTP 500" if kind == 3 else None,
            "cached": False,
            "skipped": kind == 2,
        }

    items = [
        {
            "id": f"r{k}",
            "source_video": f"v{video}",
            "hint_kind": hint,
            "judge": outcome(kind),
            "acc_r": (1.0, 0.0, 0.0, None)[kind],
        }
        for k, (kind, hint, video) in enumerate(draws)
    ]
    clusters = errorbars.clusters_of(VIRECTIFY, items)
    assume(len(set(clusters)) >= 2)  # one video: no bootstrap at all
    for metric in VIRECTIFY.task_metrics("virectify_reflect").values():
        if metric.sufficient is None:
            continue
        with errorbars.quiet():
            expected = metric.aggregate(items)
            generic = stats.bootstrap_values(
                metric.aggregate, items, clusters=clusters, iterations=60, relabel="source_video"
            )
        value = stats.sufficient_value(metric.sufficient, items)
        assert value == (None if expected is None or expected != expected else pytest.approx(expected, abs=1e-9))
        (fast,) = stats.sufficient_resamples([(metric.sufficient, items)], clusters=clusters, iterations=60)
        generic = np.array([np.nan if v is None else v for v in generic], dtype=float)
        assert np.allclose(fast, generic, rtol=0, atol=1e-9, equal_nan=True), metric.name


def test_causalstep_longest_run_from_its_length_counts_by_hand():
    """MCL, a maximum, from the count of chains per longest-run length: resample sums of (complete chains'
    longest-run one-hot columns) hold a length exactly when a chain of that length is in the resample."""
    import numpy as np

    from lmms_eval_plugins.benchmarks.causalstep import scoring

    longest = scoring.LONGEST_RUN.value
    base = scoring._LENGTHS
    sums = np.zeros((4, base + 4))
    sums[0, base + 3] = sums[0, base + 0] = 1  # chains with runs 3 and 0: MCL 3
    sums[1, base + 2] = 2  # two chains of run 2: MCL 2
    sums[2, base + 0] = 5  # five chains, none right: MCL 0
    # row 3: no complete chain at all: 0, as max(..., default=0)
    assert longest(sums, sums.sum(axis=0)).tolist() == [3.0, 2.0, 0.0, 0.0]
