"""ErrorRadar's aggregations: a scored item list in, one number (or breakdown) out.

Each is "the number per round, then its mean over rounds" (the paper's three-round protocol, §4.1);
``*_std`` is the sample standard deviation over rounds; counts are totals. spec.py names which
aggregation each metric uses. Pure functions of the items tasks.py builds (``gold``, ``pred``,
``correct``, ``question_type``, ``round``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lmms_eval_plugins.benchmark import Aggregation, Items
from lmms_eval_plugins.metrics import (
    accuracy,
    breakdown,
    confusion_matrix,
    distribution,
    macro_prf,
    mean_std_by_key,
    per_class_prf,
)
from lmms_eval_plugins.doc_fields import ROUND_FIELD, by_round, round_mean_std
from lmms_eval_plugins.stats import Sufficient

CATEGORIES = ("VIS", "CAL", "REAS", "KNOW", "MIS")  # the paper's column order (Tables 4-6)


def item_accuracy(items: Items) -> float:
    return accuracy([bool(i["correct"]) for i in items])


def _category_prf(items: Items, classes: Sequence[str] = CATEGORIES):
    return per_class_prf([i["gold"] for i in items], [i["pred"] for i in items], classes)


def macro(field: str) -> Aggregation:
    return lambda items: getattr(macro_prf(_category_prf(items)), field)


def per_class(field: str, code: str) -> Aggregation:
    # one class's numbers do not depend on the others: computing only its own keeps the bootstrap (errorbars.py) cheap
    return lambda items: getattr(_category_prf(items, (code,))[code], field)


def prf_columns(items: Items) -> np.ndarray:
    """Per item, for each round (in order) and class (``CATEGORIES``): (true positive, predicted as the
    class, gold is the class). Summed over any items, they give every per-class precision, recall and F1."""
    rounds = sorted({int(i.get(ROUND_FIELD, 0) or 0) for i in items})
    where = {r: k for k, r in enumerate(rounds)}
    n = len(items)
    out = np.zeros((n, len(rounds), len(CATEGORIES), 3))
    golds = np.array([i["gold"] for i in items] + [None], dtype=object)[:n]  # the None: never a 2-d array
    preds = np.array([i["pred"] for i in items] + [None], dtype=object)[:n]
    rows = np.arange(n)
    round_ix = np.fromiter((where[int(i.get(ROUND_FIELD, 0) or 0)] for i in items), dtype=np.int64, count=n)
    for c, code in enumerate(CATEGORIES):
        gold, pred = golds == code, preds == code
        out[rows, round_ix, c, 0] = gold & pred
        out[rows, round_ix, c, 1] = pred
        out[rows, round_ix, c, 2] = gold
    return out.reshape(n, -1)


def _divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0 (the convention of ``per_class_prf``)."""
    safe = np.where(denominator > 0, denominator, 1.0)
    return np.where(denominator > 0, numerator / safe, 0.0)


def prf_sufficient(field: str, code: str | None = None) -> Sufficient:
    """``per_class(field, code)`` (or ``macro(field)`` when ``code`` is None), averaged over rounds, as a
    function of :func:`prf_columns` sums: the same arithmetic as ``per_class_prf``. On a bootstrap
    resample, a class that the data holds (in gold or predictions) but the resample does not makes the
    metric undefined there (NaN): its precision and recall are 0/0, not a score of 0. So a run that is
    right on every item has standard error 0."""

    def value(sums: np.ndarray, full: np.ndarray) -> np.ndarray:
        t = sums.reshape(sums.shape[0], -1, len(CATEGORIES), 3)
        tp, n_pred, n_gold = t[..., 0], t[..., 1], t[..., 2]
        precision, recall = _divide(100.0 * tp, n_pred), _divide(100.0 * tp, n_gold)
        values = {
            "precision": precision,
            "recall": recall,
            "f1": _divide(2.0 * precision * recall, precision + recall),
        }[field]
        held = full.reshape(-1, len(CATEGORIES), 3)[..., 1:].sum(axis=-1) > 0
        values = np.where(held[None] & (n_pred + n_gold == 0), np.nan, values)
        per_round = values[..., CATEGORIES.index(code)] if code else values.mean(axis=2)
        return per_round.mean(axis=1)

    def support(per_unit: np.ndarray) -> np.ndarray:  # units holding or predicting the class, in any round
        counts = per_unit.reshape(per_unit.shape[0], -1, len(CATEGORIES), 3)[:, :, CATEGORIES.index(code), 1:]
        return counts.reshape(per_unit.shape[0], -1).sum(axis=1) > 0

    return Sufficient(prf_columns, value, support if code else None)


def parse_failures(items: Items) -> int:
    return sum(1 for i in items if i["pred"] is None)


def by_question_type(items: Items) -> dict[str, float]:
    return breakdown([100.0 * bool(i["correct"]) for i in items], [i["question_type"] or None for i in items])


def pred_distribution(items: Items) -> dict[str, float]:
    return distribution([i["pred"] for i in items], CATEGORIES)


def confusion(items: Items) -> dict[str, dict[str, int]]:
    return confusion_matrix([i["gold"] for i in items], [i["pred"] for i in items], CATEGORIES)


def round_mean(metric: Aggregation) -> Aggregation:
    return lambda items: round_mean_std(items, metric)[0]


def round_std(metric: Aggregation) -> Aggregation:
    return lambda items: round_mean_std(items, metric)[1]


def round_mean_by_key(metric: Aggregation) -> Aggregation:
    """A breakdown per round, then its per-key mean over rounds (one round: the breakdown itself, counts stay ints)."""

    def aggregate(items: Items) -> Any:
        rounds = by_round(items)
        return metric(items) if len(rounds) <= 1 else mean_std_by_key([metric(r) for r in rounds])[0]

    return aggregate


def round_std_by_key(metric: Aggregation) -> Aggregation:
    return lambda items: mean_std_by_key([metric(r) for r in by_round(items)])[1]
