"""Standard errors, confidence intervals and paired differences for benchmark metrics (pure functions).

Two routes, chosen per metric by its spec (:class:`lmms_eval_plugins.benchmark.Metric`):

- a metric that is the mean of a per-item score (``Metric.item_score``): the analytic standard error
  of the mean, or Miller's clustered standard error when items share a unit ("Adding Error Bars to
  Evals", 2024, eq. 4; the same formula as lmms-eval's ``clustered_stderr``);
- any other metric (F1, macro averages, IoU, chain metrics): a seeded bootstrap of the metric's own
  aggregation over items, resampling whole clusters when items share a unit.

Both give the error in the units of the metric (a metric in percent has its error in percent). A
paired comparison of two runs uses only the items both scored and one method for every metric: a
seeded joint (cluster) bootstrap of the difference, whose percentile interval and p-value come from
the same resamples (:func:`percentile_test`), so the interval excludes 0 exactly when p < 0.05, and
whose resampled values are values the metric can take, so the interval stays inside its range.

One resampling engine serves all of it. The seeded resamples are drawn a block at a time
(:func:`resample_blocks`, the same draws as one resample at a time), and a metric that is a function
of sums of per-item statistics (:class:`Sufficient`: accuracies, precision, recall, F1 and their
macro averages, IoU means) is computed on every resample of a block at once, as one matrix product of
the resamples' multiplicities and the units' sums. Any other statistic falls back to running its
aggregation on each materialised resample (:func:`bootstrap_stderr`). The one interval method, for
the console's companion figures, the report and ``compare``, is the percentile interval of the
resampled values (:func:`percentile_interval`): each resampled value is one the metric can take, so
a percent interval stays inside [0, 100].
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from lmms_eval_plugins.settings import env_number

BOOTSTRAP_ENV = "LMMS_EVAL_PLUGINS_BOOTSTRAP_ITERS"
DEFAULT_ITERATIONS = 1000
SEED = 1234
Z95 = NormalDist().inv_cdf(0.975)


def bootstrap_iterations() -> int:
    """Bootstrap iterations: ``LMMS_EVAL_PLUGINS_BOOTSTRAP_ITERS`` (default 1000; 0 turns bootstrap errors off)."""
    return int(
        env_number(BOOTSTRAP_ENV, DEFAULT_ITERATIONS, whole=True, minimum=0, clamp=True)
    )  # BadSetting: a ValueError


def _finite(values: Sequence[Any]) -> np.ndarray:
    return np.asarray([float(v) for v in values], dtype=float)


def mean_stderr(values: Sequence[float]) -> float | None:
    """Standard error of the mean (sample standard deviation / sqrt(n)); None below two values."""
    x = _finite(values)
    if x.size < 2:
        return None
    return float(np.std(x, ddof=1) / math.sqrt(x.size))


def clustered_stderr(values: Sequence[float], clusters: Sequence[Hashable]) -> float | None:
    """Miller's clustered standard error of the mean: sqrt(sum_c (sum_{i in c} (x_i - mean))^2) / n,
    with the CLT term's ddof=1 correction as lmms-eval computes it. None below two clusters.

    Equals :func:`mean_stderr` up to the (n-1)/n factor when every item is its own cluster."""
    x = _finite(values)
    if x.size != len(clusters):
        raise ValueError("values and clusters differ in length")
    if x.size < 2 or len(set(clusters)) < 2:
        return None
    centred = x - x.mean()
    sums: dict[Hashable, float] = {}
    for value, cluster in zip(centred, clusters):
        sums[cluster] = sums.get(cluster, 0.0) + float(value)
    within = sum(s * s for s in sums.values()) - float(np.sum(centred * centred))  # the i != j cross terms
    clt = float(np.var(x, ddof=1) / x.size)
    return math.sqrt(max(clt + within / x.size**2, 0.0))


# A block of resamples holds at most this many (resample, unit) cells: 32 MB of float64 multiplicities.
BLOCK_CELLS = 4_000_000


@dataclass(frozen=True)
class Sufficient:
    """A metric as a function of additive per-item statistics: on any resample its value is
    ``value(S, full)``, where ``S`` (resamples x k) sums ``columns(items)`` (items x k) over the resample
    and ``full`` (k,) sums it over all items. ``value`` returns NaN where the metric is undefined on a
    resample (left out of the error bar, as :func:`bootstrap_stderr` leaves out a None). Metrics sharing
    one ``columns`` function (the same object) share its sums."""

    columns: Callable[[Sequence[Any]], np.ndarray]
    value: Callable[[np.ndarray, np.ndarray], np.ndarray]
    # which units (rows of per-unit sums) carry the statistic at all: a class's F1 learns nothing from a
    # unit that neither holds nor predicts the class. None: every unit. The paired test's MIN_UNITS counts these.
    support: Callable[[np.ndarray], np.ndarray] | None = None


def unit_index(n: int, clusters: Sequence[Hashable] | None) -> tuple[np.ndarray, int]:
    """The unit number of each item (clusters numbered in order of first appearance, as :func:`_groups`)
    and the number of units."""
    if clusters is None:
        return np.arange(n), n
    numbers: dict[Hashable, int] = {}
    index = np.fromiter((numbers.setdefault(c, len(numbers)) for c in clusters), dtype=np.int64, count=n)
    return index, len(numbers)


def unit_sums(columns: np.ndarray, index: np.ndarray, units: int) -> np.ndarray:
    """Per-unit sums of per-item rows (units x k)."""
    columns = np.asarray(columns, dtype=float).reshape(len(index), -1)
    if units == len(index) and np.array_equal(index, np.arange(units)):
        return columns
    out = np.zeros((units, columns.shape[1]))
    np.add.at(out, index, columns)
    return out


def resample_blocks(units: int, iterations: int, seed: int = SEED) -> Iterator[np.ndarray]:
    """The seeded resamples' unit numbers, a block of rows at a time (rows x units): the one way every
    bootstrap here draws them. A block is the same stream of draws as its rows drawn one by one."""
    rng = np.random.default_rng(seed)
    rows = max(1, min(iterations, BLOCK_CELLS // max(units, 1)))
    done = 0
    while done < iterations:
        count = min(rows, iterations - done)
        yield rng.integers(0, units, size=(count, units))
        done += count


def multiplicities(picks: np.ndarray) -> np.ndarray:
    """How often each unit is drawn in each resample of a block (rows x units, float for the product)."""
    rows, units = picks.shape
    flat = (np.arange(rows)[:, None] * units + picks).ravel()
    return np.bincount(flat, minlength=rows * units).reshape(rows, units).astype(float)


def sufficient_resamples(
    statistics: Sequence[tuple[Sufficient, Sequence[Any]]],
    *,
    clusters: Sequence[Hashable] | None,
    iterations: int,
    seed: int = SEED,
    cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] | None = None,
) -> list[np.ndarray]:
    """Each statistic's value on every seeded resample (NaN: undefined there), all over the same
    resamples of the same units; each statistic is paired with its own items (one per unit order).
    ``cache`` receives each (columns, items) pair's per-unit sums and total, keyed by their ids."""
    if not statistics:
        return []
    n = len(statistics[0][1])
    index, units = unit_index(n, clusters)
    cache = {} if cache is None else cache
    prepared = []
    for stat, items in statistics:
        if len(items) != n:
            raise ValueError("every statistic must be over the same items")
        key = (id(stat.columns), id(items))
        if key not in cache:
            per_unit = unit_sums(stat.columns(items), index, units)
            cache[key] = (per_unit, per_unit.sum(axis=0))
        prepared.append((stat, *cache[key]))
    blocks: list[list[np.ndarray]] = [[] for _ in prepared]
    if units and iterations > 0:
        for picks in resample_blocks(units, iterations, seed):
            weights = multiplicities(picks)
            products: dict[int, np.ndarray] = {}
            for out, (stat, per_unit, full) in zip(blocks, prepared):
                if id(per_unit) not in products:
                    products[id(per_unit)] = weights @ per_unit
                sums = products[id(per_unit)]
                out.append(np.asarray(stat.value(sums, full), dtype=float))
    return [np.concatenate(b) if b else np.empty(0) for b in blocks]


def spread(values: np.ndarray, iterations: int) -> tuple[float, float, float] | None:
    """(standard error, 95% low, 95% high) of resampled values, NaN left out: their sample standard
    deviation and :func:`percentile_interval`. None when fewer than half the resamples gave a number,
    as :func:`bootstrap_stderr`."""
    defined = values[np.isfinite(values)]
    if defined.size < max(2, iterations // 2):
        return None
    low, high = percentile_interval(defined)
    return float(np.std(defined, ddof=1)), low, high


def percentile_interval(values: Sequence[float]) -> tuple[float, float]:
    """The 95% percentile interval of resampled values: with B values sorted and m = (B - 1) // 40,
    [v_(m+1), v_(B-m)] (the interval of :func:`percentile_test`)."""
    v = np.sort(np.asarray(values, dtype=float))
    if v.size == 0:
        raise ValueError("percentile_interval needs at least one value")
    m = (int(v.size) - 1) // 40
    return float(v[m]), float(v[v.size - 1 - m])


def mean_sufficient(field: str, scale: float = 1.0) -> Sufficient:
    """The mean of a per-item score (x ``scale``), as a :class:`Sufficient`: columns (score, 1)."""

    def columns(items: Sequence[Any]) -> np.ndarray:
        return np.array([[float(i[field]), 1.0] for i in items]).reshape(len(items), 2)

    def value(sums: np.ndarray, full: np.ndarray) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return scale * sums[:, 0] / sums[:, 1]

    return Sufficient(columns, value)


def _groups(n: int, clusters: Sequence[Hashable] | None) -> list[np.ndarray]:
    """Index arrays resampled as units: one per cluster, or one per item."""
    if clusters is None:
        return [np.array([i]) for i in range(n)]
    order: dict[Hashable, list[int]] = {}
    for i, c in enumerate(clusters):
        order.setdefault(c, []).append(i)
    return [np.array(ix) for ix in order.values()]


def _picks(units: int, iterations: int, seed: int) -> Iterator[np.ndarray]:
    """The resampled unit numbers, one array per bootstrap resample: the rows of :func:`resample_blocks`
    (one way of drawing the seeded resamples)."""
    for block in resample_blocks(units, iterations, seed):
        yield from block


def _resamples(n: int, clusters: Sequence[Hashable] | None, iterations: int, seed: int):
    """Index arrays of bootstrap resamples, each with the copy number of every index (0: first copy)."""
    groups = _groups(n, clusters)
    for picks in _picks(len(groups), iterations, seed):
        seen: dict[int, int] = {}
        copies = []
        for p in picks:
            copies.append(np.full(len(groups[p]), seen.get(int(p), 0)))
            seen[int(p)] = seen.get(int(p), 0) + 1
        yield np.concatenate([groups[p] for p in picks]), np.concatenate(copies)


def _take(items: Sequence[Any], index: np.ndarray, copies: np.ndarray | None, relabel: str | None) -> list[Any]:
    """The resampled items. With ``relabel`` (the cluster field), the k-th copy of a cluster gets
    ``"<id>#k"`` there, so an aggregation that keys items by that id sees copies as distinct units."""
    if relabel is None or copies is None:
        return [items[i] for i in index]
    out = []
    for i, k in zip(index, copies):
        item = items[i]
        if k and isinstance(item, dict) and relabel in item:
            item = {**item, relabel: f"{item[relabel]}#{k}"}
        out.append(item)
    return out


def _stat(
    statistic: Callable[[list[Any]], Any],
    items: Sequence[Any],
    index: np.ndarray,
    copies: np.ndarray | None = None,
    relabel: str | None = None,
) -> float | None:
    value = statistic(_take(items, index, copies, relabel))
    return (
        float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        else None
    )


def bootstrap_values(
    statistic: Callable[[list[Any]], Any],
    items: Sequence[Any],
    *,
    clusters: Sequence[Hashable] | None = None,
    iterations: int | None = None,
    seed: int = SEED,
    relabel: str | None = None,
) -> np.ndarray:
    """``statistic`` on each seeded bootstrap resample of ``items`` (whole clusters when given;
    ``relabel``: see :func:`_take`), NaN where it is undefined; empty below two units. The generic
    fallback for a statistic that is not :class:`Sufficient`: one aggregation per resample."""
    iterations = bootstrap_iterations() if iterations is None else iterations
    units = len(_groups(len(items), clusters))
    if iterations <= 0 or units < 2:
        return np.empty(0)
    values = (
        _stat(statistic, items, ix, copies, relabel)
        for ix, copies in _resamples(len(items), clusters, iterations, seed)
    )
    return np.fromiter((math.nan if v is None else v for v in values), dtype=float, count=iterations)


def bootstrap_stderr(
    statistic: Callable[[list[Any]], Any],
    items: Sequence[Any],
    *,
    clusters: Sequence[Hashable] | None = None,
    iterations: int | None = None,
    seed: int = SEED,
    relabel: str | None = None,
) -> float | None:
    """Standard deviation of ``statistic`` over bootstrap resamples of ``items`` (whole clusters when
    given; ``relabel``: see :func:`_take`). Resamples where the statistic is undefined are left out;
    None with fewer than two units or when fewer than half the resamples gave a number."""
    iterations = bootstrap_iterations() if iterations is None else iterations
    result = spread(
        bootstrap_values(statistic, items, clusters=clusters, iterations=iterations, seed=seed, relabel=relabel),
        iterations,
    )
    return None if result is None else result[0]


# Fewer independent units than this and no interval is given: no exact paired test can reach p < 0.05
# (the smallest two-sided sign-flip p-value with k units is 2 / 2**k, 0.0625 at k = 5), while a
# bootstrap over so few units would still call every same-signed difference significant.
MIN_UNITS = 6
TIE = 1e-9  # resampled differences this close to 0 (rounding noise of a sum) count as 0


@dataclass(frozen=True)
class Paired:
    """B - A on the items both runs scored, in the metric's units. ``ci_low``/``ci_high``/``p_value``
    all come from ``method`` (None together, with ``note`` saying why)."""

    a: float | None
    b: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    n: int
    method: str
    units: int = 0  # independent units resampled (clusters, else items)
    resamples: int = 0  # bootstrap resamples the interval and p-value come from
    note: str = ""

    @property
    def significant(self) -> bool:
        """The 95% CI excludes 0; by construction (:func:`percentile_test`) the same as p < 0.05."""
        return self.ci_low is not None and self.ci_high is not None and (self.ci_low > 0 or self.ci_high < 0)


def percentile_test(diffs: Sequence[float]) -> tuple[float, float, float]:
    """95% percentile interval and two-sided p-value of bootstrap differences, from the same values.

    With the B differences sorted, d_(1) <= ... <= d_(B), and m = (B - 1) // 40 (the largest integer
    below B / 40): the interval is [d_(m+1), d_(B-m)] and p = min(1, 2 min(#{d <= 0}, #{d >= 0}) / B).
    Why they always agree: d_(m+1) > 0 exactly when at most m differences are <= 0, that is when
    #{d <= 0} < B / 40, that is when 2 #{d <= 0} / B < 0.05; likewise d_(B-m) < 0 with #{d >= 0}.
    So the interval excludes 0 if and only if p < 0.05. A difference within ``TIE`` of 0 counts as 0."""
    d = np.sort(np.asarray(diffs, dtype=float))
    if d.size == 0 or not np.all(np.isfinite(d)):
        raise ValueError("percentile_test needs at least one finite difference")
    d = np.where(np.abs(d) <= TIE, 0.0, d)
    at_most_0, at_least_0 = int(np.sum(d <= 0)), int(np.sum(d >= 0))
    low, high = percentile_interval(d)
    return low, high, min(1.0, 2 * min(at_most_0, at_least_0) / int(d.size))


def _method(clusters: Sequence[Hashable] | None) -> str:
    return "paired cluster bootstrap" if clusters is not None else "paired bootstrap"


def _few_units(units: int) -> str:
    return (
        f"{units} independent unit(s): no interval below {MIN_UNITS} (no exact paired test reaches p < 0.05 "
        f"with fewer; a bootstrap over so few would overstate it)"
    )


def _tested(
    a: float | None,
    b: float | None,
    n: int,
    clusters: Sequence[Hashable] | None,
    units: int,
    iterations: int,
    diffs: Sequence[float],
) -> Paired:
    """The Paired of an observed difference and its bootstrap differences (see :func:`percentile_test`)."""
    diff = None if a is None or b is None else b - a
    method = _method(clusters)
    if diff is None:
        sides = " and ".join(side for side, value in (("A", a), ("B", b)) if value is None)
        return Paired(a, b, None, None, None, None, n, method, units, 0, f"the metric has no number in run {sides}")
    if iterations <= 0:
        return Paired(a, b, diff, None, None, None, n, method, units, 0, "bootstrap iterations set to 0")
    if units < MIN_UNITS:
        return Paired(a, b, diff, None, None, None, n, method, units, 0, _few_units(units))
    if len(diffs) < max(2, iterations // 2):
        return Paired(
            a,
            b,
            diff,
            None,
            None,
            None,
            n,
            method,
            units,
            len(diffs),
            f"the metric is undefined on {iterations - len(diffs)} of {iterations} resamples",
        )
    low, high, p = percentile_test(diffs)
    return Paired(a, b, diff, low, high, p, n, method, units, len(diffs))


def paired_mean(
    a: Sequence[float],
    b: Sequence[float],
    *,
    clusters: Sequence[Hashable] | None = None,
    scale: float = 1.0,
    iterations: int | None = None,
    seed: int = SEED,
) -> Paired:
    """Paired difference of two means over the same items, mean(b - a) * scale, tested by a seeded
    bootstrap of the items (whole clusters when given): :func:`percentile_test` of the resampled means
    of the differences. The same resamples, and so the same numbers, as :func:`paired_bootstrap` with
    the mean as its statistic, computed at once. Scores in [0, 1] give resampled differences in
    [-scale, scale]: the interval never leaves the metric's range."""
    x, y = _finite(a), _finite(b)
    if x.size != y.size:
        raise ValueError("paired runs must score the same items")
    n = int(x.size)
    iterations = bootstrap_iterations() if iterations is None else iterations
    if n == 0:
        return Paired(None, None, None, None, None, None, 0, _method(clusters), 0, 0, "no item scored in both runs")
    groups = _groups(n, clusters)
    a_mean, b_mean = float(x.mean()) * scale, float(y.mean()) * scale
    diffs: np.ndarray = np.empty(0)
    if iterations > 0 and len(groups) >= MIN_UNITS:
        d = y - x
        sums = np.array([d[g].sum() for g in groups])
        sizes = np.array([float(len(g)) for g in groups])
        counts = (np.bincount(picks, minlength=len(groups)) for picks in _picks(len(groups), iterations, seed))
        diffs = np.array([c @ sums / (c @ sizes) for c in counts]) * scale  # one resample in memory at a time
    return _tested(a_mean, b_mean, n, clusters, len(groups), iterations, diffs)


def sufficient_value(stat: Sufficient, items: Sequence[Any]) -> float | None:
    """The statistic over all ``items`` (None where undefined): the same number as the metric's aggregation."""
    full = np.asarray(stat.columns(items), dtype=float).reshape(len(items), -1).sum(axis=0)
    value = float(np.asarray(stat.value(full[None, :], full), dtype=float)[0])
    return value if math.isfinite(value) else None


def paired_sufficient(
    stat: Sufficient,
    a_items: Sequence[Any],
    b_items: Sequence[Any],
    *,
    clusters: Sequence[Hashable] | None = None,
    iterations: int | None = None,
    seed: int = SEED,
) -> Paired:
    """:func:`paired_bootstrap` of a :class:`Sufficient` statistic, every resample at once: the same
    resamples, the same rule (a resample where either side is undefined is left out)."""
    return paired_sufficients([(stat, a_items, b_items)], clusters=clusters, iterations=iterations, seed=seed)[0]


def paired_sufficients(
    entries: Sequence[tuple[Sufficient, Sequence[Any], Sequence[Any]]],
    *,
    clusters: Sequence[Hashable] | None = None,
    iterations: int | None = None,
    seed: int = SEED,
) -> list[Paired]:
    """:func:`paired_sufficient` of several statistics over the same paired items, all from one set of
    resamples (one multiplicity matrix per block; columns computed once per function and side)."""
    if not entries:
        return []
    n = len(entries[0][1])
    if any(len(a) != n or len(b) != n for _, a, b in entries):
        raise ValueError("paired runs must score the same items")
    iterations = bootstrap_iterations() if iterations is None else iterations
    if n == 0:
        return [
            Paired(None, None, None, None, None, None, 0, _method(clusters), 0, 0, "no item scored in both runs")
            for _ in entries
        ]
    cache: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    flat = [pair for stat, a, b in entries for pair in ((stat, a), (stat, b))]
    resampled = sufficient_resamples(flat, clusters=clusters, iterations=iterations, seed=seed, cache=cache)
    out = []
    for k, (stat, a_items, b_items) in enumerate(entries):
        (a_units, a_full), (b_units, b_full) = (
            cache[(id(stat.columns), id(a_items))],
            cache[(id(stat.columns), id(b_items))],
        )
        a_value, b_value = (
            _finite_or_none(stat.value(a_full[None, :], a_full)),
            _finite_or_none(stat.value(b_full[None, :], b_full)),
        )
        units = len(a_units)
        if stat.support is not None:  # the units that carry the statistic in either run
            units = int(np.count_nonzero(stat.support(a_units) | stat.support(b_units)))
        ra, rb = resampled[2 * k], resampled[2 * k + 1]
        both = np.isfinite(ra) & np.isfinite(rb)
        diffs = (rb - ra)[both] if a_value is not None and b_value is not None and units >= MIN_UNITS else np.empty(0)
        out.append(_tested(a_value, b_value, n, clusters, units, iterations, diffs))
    return out


def _finite_or_none(values: Any) -> float | None:
    value = float(np.asarray(values, dtype=float).reshape(-1)[0])
    return value if math.isfinite(value) else None


def paired_bootstrap(
    statistic: Callable[[list[Any]], Any],
    a_items: Sequence[Any],
    b_items: Sequence[Any],
    *,
    clusters: Sequence[Hashable] | None = None,
    iterations: int | None = None,
    seed: int = SEED,
    relabel: str | None = None,
) -> Paired:
    """Difference statistic(B) - statistic(A) over the same items, resampled jointly (whole clusters
    when given; ``relabel``: see :func:`_take`): :func:`percentile_test` of the resampled differences.
    Resamples where either side is undefined are left out. Each resampled value is a value the
    metric can take, so the interval stays inside the metric's range."""
    if len(a_items) != len(b_items):
        raise ValueError("paired runs must score the same items")
    n = len(a_items)
    iterations = bootstrap_iterations() if iterations is None else iterations
    if n == 0:
        return Paired(None, None, None, None, None, None, 0, _method(clusters), 0, 0, "no item scored in both runs")
    a_value = _stat(statistic, a_items, np.arange(n))
    b_value = _stat(statistic, b_items, np.arange(n))
    units = len(_groups(n, clusters))
    diffs = []
    if a_value is not None and b_value is not None and iterations > 0 and units >= MIN_UNITS:
        for ix, copies in _resamples(n, clusters, iterations, seed):
            da, db = _stat(statistic, a_items, ix, copies, relabel), _stat(statistic, b_items, ix, copies, relabel)
            if da is not None and db is not None:
                diffs.append(db - da)
    return _tested(a_value, b_value, n, clusters, units, iterations, diffs)


def minimum_detectable_effect(stderr: float | None, *, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The smallest true difference a two-sided test at ``alpha`` detects with probability ``power``,
    given the standard error of the difference: (z_{1-alpha/2} + z_{power}) * SE."""
    if stderr is None:
        return None
    dist = NormalDist()
    return (dist.inv_cdf(1 - alpha / 2) + dist.inv_cdf(power)) * stderr
