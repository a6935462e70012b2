"""ErrorRadar's aggregations: a scored item list in, one number (or breakdown) out.

Each is "the number per round, then its mean over rounds" (the paper's three-round protocol, §4.1);
``*_std`` is the sample standard deviation over rounds; counts are totals. spec.py names which
aggregation each metric uses. Pure functions of the items tasks.py builds (``gold``, ``pred``,
``correct``, ``question_type``, ``round``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lmms_eval_plugins.benchmark import Aggregation, Items
from lmms_eval_plugins.metrics import (accuracy, breakdown, confusion_matrix, distribution, macro_prf, mean_std_by_key,
                                       per_class_prf)
from lmms_eval_plugins.doc_fields import by_round, round_mean_std

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
