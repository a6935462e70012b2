"""Metric helpers shared by all benchmarks.

Conventions:
- Scores the papers print as percentages are PERCENT (0-100 floats): accuracy, P/R/F1,
  distribution shares. Overlap measures (interval IoU, union IoU, Jaccard) are FRACTIONS (0-1),
  because they are averaged per sample first; the task multiplies the final mean by 100.
- Empty inputs give 0.0 (or an empty dict) and never divide by zero.
- Functions are pure; a length mismatch between parallel sequences is a programming error and
  raises ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "PRF",
    "accuracy",
    "breakdown",
    "confusion_matrix",
    "distribution",
    "f1_score",
    "interval_iou",
    "jaccard",
    "macro_over_groups",
    "macro_prf",
    "mean_std",
    "merge_intervals",
    "normalize_interval",
    "per_class_prf",
    "union_iou",
    "union_length",
]

Interval = tuple[float, float]


def _same_length(a: Sequence[object], b: Sequence[object], what: str) -> None:
    if len(a) != len(b):
        raise ValueError(f"{what}: sequences differ in length ({len(a)} vs {len(b)})")


def accuracy(flags: Sequence[bool]) -> float:
    """Percent of true flags; 0.0 for no flags."""
    n = len(flags)
    return 100.0 * sum(1 for f in flags if f) / n if n else 0.0


@dataclass(frozen=True)
class PRF:
    """Precision, recall and F1 in PERCENT (0-100); ``support`` = number of gold samples."""

    precision: float
    recall: float
    f1: float
    support: int


def f1_score(precision: float, recall: float) -> float:
    """Harmonic mean 2PR/(P+R), in the scale of its inputs; 0.0 when P+R == 0."""
    total = precision + recall
    return 2.0 * precision * recall / total if total > 0 else 0.0


def per_class_prf(
    golds: Sequence[str],
    preds: Sequence[str | None],
    classes: Sequence[str],
) -> dict[str, PRF]:
    """Per-class precision/recall/F1 in percent.

    - A ``None`` prediction (unparseable) -- or any label outside ``classes`` -- counts against
      the recall of its gold class and toward no class's precision.
    - Precision of a class that is never predicted is 0; recall of a class with no gold samples
      is 0 (there is nothing to recall, and 0 keeps the macro mean from flattering a model).
    - F1 of a class with P+R = 0 is 0.
    """
    _same_length(golds, preds, "per_class_prf")
    out: dict[str, PRF] = {}
    for c in classes:
        tp = sum(1 for g, p in zip(golds, preds) if g == c and p == c)
        n_pred = sum(1 for p in preds if p == c)
        n_gold = sum(1 for g in golds if g == c)
        p_ = 100.0 * tp / n_pred if n_pred else 0.0
        r_ = 100.0 * tp / n_gold if n_gold else 0.0
        out[c] = PRF(p_, r_, f1_score(p_, r_), n_gold)
    return out


def macro_prf(per_class: Mapping[str, PRF]) -> PRF:
    """Unweighted means of the per-class P, R and F1; support is the total support.

    Macro F1 is the mean of per-class F1s (as in the ErrorRadar paper's tables), NOT the F1 of
    macro P and macro R.
    """
    vals = list(per_class.values())
    if not vals:
        return PRF(0.0, 0.0, 0.0, 0)
    n = len(vals)
    return PRF(
        sum(v.precision for v in vals) / n,
        sum(v.recall for v in vals) / n,
        sum(v.f1 for v in vals) / n,
        sum(v.support for v in vals),
    )


def confusion_matrix(
    golds: Sequence[str],
    preds: Sequence[str | None],
    classes: Sequence[str],
    unparseable_label: str = "unparseable",
) -> dict[str, dict[str, int]]:
    """Counts ``matrix[gold][pred]``.

    Rows: every class, then any gold label outside ``classes`` (appended in order of first
    appearance so nothing is dropped). Columns: every class, then ``unparseable_label``, which
    collects ``None`` and any prediction outside ``classes``.
    """
    _same_length(golds, preds, "confusion_matrix")
    known = set(classes)
    cols = list(classes) + [unparseable_label]
    rows = list(classes) + [g for g in dict.fromkeys(golds) if g not in known]
    matrix = {r: {c: 0 for c in cols} for r in rows}
    for g, p in zip(golds, preds):
        matrix[g][p if p in known else unparseable_label] += 1
    return matrix


def distribution(
    preds: Sequence[str | None],
    classes: Sequence[str],
    unparseable_label: str = "unparseable",
) -> dict[str, float]:
    """Percent share of each predicted class, plus ``unparseable_label`` (None or unknown label).

    Shares sum to 100 for a non-empty input; all 0.0 for an empty one.
    """
    counts = {c: 0 for c in list(classes) + [unparseable_label]}
    known = set(classes)
    for p in preds:
        counts[p if p in known else unparseable_label] += 1
    n = len(preds)
    return {k: (100.0 * v / n if n else 0.0) for k, v in counts.items()}


def breakdown(
    values: Sequence[float],
    keys: Sequence[str | None],
    *,
    missing_key: str = "(none)",
) -> dict[str, float]:
    """Mean of ``values`` per key, keys sorted.

    The function only averages: callers pass values already in the scale they want to report
    (e.g. 100.0/0.0 per sample to get a percent accuracy per group). A ``None`` or blank key
    (ErrorRadar's blank ``question_type``) is grouped under ``missing_key``.
    """
    _same_length(values, keys, "breakdown")
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for v, k in zip(values, keys):
        key = missing_key if k is None or not str(k).strip() else str(k)
        sums[key] = sums.get(key, 0.0) + float(v)
        counts[key] = counts.get(key, 0) + 1
    return {k: sums[k] / counts[k] for k in sorted(sums)}


def macro_over_groups(breakdown: Mapping[str, float]) -> float:
    """Unweighted mean of group means (e.g. MMErroR's macro average over domains); 0.0 if empty."""
    vals = list(breakdown.values())
    return sum(vals) / len(vals) if vals else 0.0


# --------------------------------------------------------------------------------------------
# Intervals (fractions 0-1)


def _finite(*xs: float) -> bool:
    return all(isinstance(x, (int, float)) and math.isfinite(x) for x in xs)


def interval_iou(pred: Interval, gold: Interval) -> float:
    """Temporal IoU as a fraction, exactly CrossVid's formula on the intervals AS GIVEN:

    ``max(0, min(e1, e2) - max(s1, s2)) / (max(e1, e2) - min(s1, s2))``, 0.0 when the
    denominator is <= 0 or a value is not finite. A reversed interval (end < start) is not
    normalised: against its mirror image it scores 0 (see the tests); callers who want to
    forgive reversal apply normalize_interval first.
    """
    (s1, e1), (s2, e2) = pred, gold
    if not _finite(s1, e1, s2, e2):
        return 0.0
    denom = max(e1, e2) - min(s1, s2)
    if denom <= 0:
        return 0.0
    return max(0.0, min(e1, e2) - max(s1, s2)) / denom


def normalize_interval(iv: Interval) -> Interval:
    """``(min, max)`` of the two ends."""
    a, b = iv
    return (a, b) if a <= b else (b, a)


def merge_intervals(intervals: Iterable[Interval]) -> list[Interval]:
    """Union as sorted disjoint intervals: reversed ones normalised, overlapping or touching
    ones merged, intervals with a non-finite end dropped."""
    ivs = sorted(normalize_interval((float(a), float(b))) for a, b in intervals if _finite(a, b))
    merged: list[Interval] = []
    for s, e in ivs:
        if merged and s <= merged[-1][1]:
            if e > merged[-1][1]:
                merged[-1] = (merged[-1][0], e)
        else:
            merged.append((s, e))
    return merged


def union_length(intervals: Iterable[Interval]) -> float:
    """Total length covered by the intervals (overlaps counted once)."""
    return sum(e - s for s, e in merge_intervals(intervals))


def _intersection_length(a: list[Interval], b: list[Interval]) -> float:
    """Overlap of two sorted disjoint interval lists (two-pointer sweep)."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def union_iou(preds: Iterable[Interval], golds: Iterable[Interval]) -> float:
    """|union(P) ∩ union(G)| / |union(P) ∪ union(G)| as a fraction (ViRectify's ``iou``).

    Both sets empty (or of zero total length) gives 0.0: there is nothing grounded to reward.
    """
    p = merge_intervals(preds)
    g = merge_intervals(golds)
    inter = _intersection_length(p, g)
    union = sum(e - s for s, e in p) + sum(e - s for s, e in g) - inter
    return inter / union if union > 0 else 0.0


def jaccard(a: Iterable[Hashable], b: Iterable[Hashable]) -> float:
    """|A ∩ B| / |A ∪ B| as a fraction; two empty sets are identical and give 1.0."""
    sa, sb = set(a), set(b)
    union = sa | sb
    return len(sa & sb) / len(union) if union else 1.0


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and SAMPLE standard deviation (ddof=1), as reported for the paper's three rounds.

    One value gives std 0.0; no values give (0.0, 0.0).
    """
    n = len(values)
    if n == 0:
        return 0.0, 0.0
    mean = sum(values) / n
    if n == 1:
        return float(mean), 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return float(mean), math.sqrt(var)


def mean_std_by_key(values: Sequence[Mapping[str, object]]) -> tuple[dict[str, object], dict[str, object]]:
    """Per-key :func:`mean_std` of dicts of numbers (nested dicts recursed): a breakdown averaged
    over repeated rounds, with its spread in a dict of the same shape.

    A key is averaged over the dicts that hold it (keys in order of first appearance); ``None``
    values are left out, a key with no number gives ``None``. No dicts give ``({}, {})``.
    """
    keys = list(dict.fromkeys(k for d in values for k in d))
    means: dict[str, object] = {}
    stds: dict[str, object] = {}
    for key in keys:
        present = [d[key] for d in values if key in d and d[key] is not None]
        if present and all(isinstance(v, Mapping) for v in present):
            means[key], stds[key] = mean_std_by_key(present)  # type: ignore[arg-type]
        elif present:
            means[key], stds[key] = mean_std([float(v) for v in present])  # type: ignore[arg-type]
        else:
            means[key] = stds[key] = None
    return means, stds
