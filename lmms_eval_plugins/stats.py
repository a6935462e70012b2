"""Standard errors, confidence intervals and paired differences for benchmark metrics (pure functions).

Two routes, chosen per metric by its spec (:class:`lmms_eval_plugins.benchmark.Metric`):

- a metric that is the mean of a per-item score (``Metric.item_score``): the analytic standard error
  of the mean, or Miller's clustered standard error when items share a unit ("Adding Error Bars to
  Evals", 2024, eq. 4; the same formula as lmms-eval's ``clustered_stderr``);
- any other metric (F1, macro averages, IoU, chain metrics): a seeded bootstrap of the metric's own
  aggregation over items, resampling whole clusters when items share a unit.

Both give the error in the units of the metric (a metric in percent has its error in percent). A
paired comparison of two runs uses only the items both scored: the mean of per-item differences with
its (clustered) standard error, or a joint bootstrap of the difference of the aggregations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
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
    return int(env_number(BOOTSTRAP_ENV, DEFAULT_ITERATIONS, whole=True, minimum=0, clamp=True))  # BadSetting: a ValueError


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


def _groups(n: int, clusters: Sequence[Hashable] | None) -> list[np.ndarray]:
    """Index arrays resampled as units: one per cluster, or one per item."""
    if clusters is None:
        return [np.array([i]) for i in range(n)]
    order: dict[Hashable, list[int]] = {}
    for i, c in enumerate(clusters):
        order.setdefault(c, []).append(i)
    return [np.array(ix) for ix in order.values()]


def _resamples(n: int, clusters: Sequence[Hashable] | None, iterations: int, seed: int):
    """Index arrays of bootstrap resamples, each with the copy number of every index (0: first copy)."""
    groups = _groups(n, clusters)
    rng = np.random.default_rng(seed)
    for _ in range(iterations):
        picks = rng.integers(0, len(groups), size=len(groups))
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


def _stat(statistic: Callable[[list[Any]], Any], items: Sequence[Any], index: np.ndarray,
          copies: np.ndarray | None = None, relabel: str | None = None) -> float | None:
    value = statistic(_take(items, index, copies, relabel))
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def bootstrap_stderr(statistic: Callable[[list[Any]], Any], items: Sequence[Any], *,
                     clusters: Sequence[Hashable] | None = None, iterations: int | None = None,
                     seed: int = SEED, relabel: str | None = None) -> float | None:
    """Standard deviation of ``statistic`` over bootstrap resamples of ``items`` (whole clusters when
    given; ``relabel``: see :func:`_take`). Resamples where the statistic is undefined are left out;
    None with fewer than two units or when fewer than half the resamples gave a number."""
    iterations = bootstrap_iterations() if iterations is None else iterations
    units = len(_groups(len(items), clusters))
    if iterations <= 0 or units < 2:
        return None
    values = [v for ix, copies in _resamples(len(items), clusters, iterations, seed)
              if (v := _stat(statistic, items, ix, copies, relabel)) is not None]
    if len(values) < max(2, iterations // 2):
        return None
    return float(np.std(values, ddof=1))


@dataclass(frozen=True)
class Paired:
    """B - A on the items both runs scored, in the metric's units."""

    a: float | None
    b: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    n: int
    method: str

    @property
    def significant(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None and (self.ci_low > 0 or self.ci_high < 0)


def _two_sided_p(z: float) -> float:
    return float(2 * (1 - NormalDist().cdf(abs(z))))


def paired_mean(a: Sequence[float], b: Sequence[float], *, clusters: Sequence[Hashable] | None = None,
                scale: float = 1.0) -> Paired:
    """Paired difference of two means over the same items: mean(b - a) * scale, its 95% CI and a
    two-sided p-value from the normal approximation with the (clustered) standard error."""
    x, y = _finite(a), _finite(b)
    if x.size != y.size:
        raise ValueError("paired runs must score the same items")
    n = int(x.size)
    if n == 0:
        return Paired(None, None, None, None, None, None, 0, "paired mean")
    d = y - x
    se = clustered_stderr(d, clusters) if clusters is not None else mean_stderr(d)
    diff = float(d.mean()) * scale
    a_mean, b_mean = float(x.mean()) * scale, float(y.mean()) * scale
    if se is None:
        return Paired(a_mean, b_mean, diff, None, None, None, n, "paired mean")
    se *= scale
    if se == 0:
        p = 1.0 if diff == 0 else 0.0
        return Paired(a_mean, b_mean, diff, diff, diff, p, n, "paired mean")
    return Paired(a_mean, b_mean, diff, diff - Z95 * se, diff + Z95 * se, _two_sided_p(diff / se), n,
                  "paired mean" + (", clustered" if clusters is not None else ""))


def paired_bootstrap(statistic: Callable[[list[Any]], Any], a_items: Sequence[Any], b_items: Sequence[Any], *,
                     clusters: Sequence[Hashable] | None = None, iterations: int | None = None,
                     seed: int = SEED, relabel: str | None = None) -> Paired:
    """Difference statistic(B) - statistic(A) over the same items, resampled jointly (whole clusters
    when given): percentile 95% CI, and a two-sided p-value from the bootstrap distribution's
    standard error (normal approximation)."""
    if len(a_items) != len(b_items):
        raise ValueError("paired runs must score the same items")
    n = len(a_items)
    a_value = _stat(statistic, a_items, np.arange(n)) if n else None
    b_value = _stat(statistic, b_items, np.arange(n)) if n else None
    diff = None if a_value is None or b_value is None else b_value - a_value
    iterations = bootstrap_iterations() if iterations is None else iterations
    method = "paired bootstrap" + (", clustered" if clusters is not None else "")
    if diff is None or iterations <= 0 or len(_groups(n, clusters)) < 2:
        return Paired(a_value, b_value, diff, None, None, None, n, method)
    diffs = []
    for ix, copies in _resamples(n, clusters, iterations, seed):
        da, db = _stat(statistic, a_items, ix, copies, relabel), _stat(statistic, b_items, ix, copies, relabel)
        if da is not None and db is not None:
            diffs.append(db - da)
    if len(diffs) < max(2, iterations // 2):
        return Paired(a_value, b_value, diff, None, None, None, n, method)
    low, high = (float(v) for v in np.percentile(diffs, [2.5, 97.5]))
    se = float(np.std(diffs, ddof=1))
    p = (1.0 if diff == 0 else 0.0) if se == 0 else _two_sided_p(diff / se)
    return Paired(a_value, b_value, diff, low, high, p, n, method)


def minimum_detectable_effect(stderr: float | None, *, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """The smallest true difference a two-sided test at ``alpha`` detects with probability ``power``,
    given the standard error of the difference: (z_{1-alpha/2} + z_{power}) * SE."""
    if stderr is None:
        return None
    dist = NormalDist()
    return (dist.inv_cdf(1 - alpha / 2) + dist.inv_cdf(power)) * stderr


def ci95(value: float | None, stderr: float | None) -> tuple[float, float] | None:
    if value is None or stderr is None:
        return None
    return value - Z95 * stderr, value + Z95 * stderr
