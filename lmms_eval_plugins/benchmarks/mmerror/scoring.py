"""MMErroR's aggregations and the replay of EPD's two-stage protocol: scored items in, one number out.

ETC items are per sample. EPD items are per request (stage 1 and stage 2 of each sample) and are
replayed into per-sample outcomes first (:func:`replay_epd`; README.md says why that equals the
sequential protocol). spec.py names which aggregation each metric uses. Pure functions of the items
tasks.py builds (``question_id``, ``domain``, ``subdomain``, ``label``, ``gold``, ``pred``, ``correct``,
``parse_error``, ``official_pred``, ETC's ``official_correct``, EPD's ``stage``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from loguru import logger

from lmms_eval_plugins.benchmark import Aggregation, Items
from lmms_eval_plugins.benchmarks.mmerror.labels import (
    ABSENT,
    ALL_LABELS,
    ERROR_LABELS,
    NO_ERROR_LABEL,
    OFFICIAL_NOT_ASKED_FIELD,
    PRESENT,
    STAGE_PRESENCE,
    STAGE_TYPE,
)
from lmms_eval_plugins.benchmarks.mmerror.official import official_report
from lmms_eval_plugins.metrics import (
    accuracy,
    breakdown,
    confusion_matrix,
    distribution,
    macro_over_groups,
)
from lmms_eval_plugins.stats import Sufficient


def replay_epd(items: Items, *, official: bool = False) -> tuple[list[dict[str, Any]], int]:
    """Replay the sequential two-stage protocol on the per-request items of EPD (``official``: with the
    official parser's readings of both stages, ``official_pred``, as the official runner decides).

    Items are grouped by question_id (first-seen order). Per sample: stage 1 N -> ``E_NoError``;
    stage 1 P -> the stage-2 label (unparseable stage 2 -> unparseable sample); unparseable stage 1 ->
    unparseable sample (wrong), whatever stage 2 said. Returns (per-sample outcomes, number of samples
    left out because a stage's request is missing, e.g. an odd ``--limit``).
    """
    groups: dict[str, dict[str, Mapping[str, Any]]] = {}
    for item in items:
        stages = groups.setdefault(str(item["question_id"]), {})
        if item["stage"] in stages:
            raise ValueError(f"EPD: two {item['stage']} results for sample {item['question_id']}")
        stages[item["stage"]] = item
    outcomes, incomplete = [], 0
    for question_id, stages in groups.items():
        if STAGE_PRESENCE not in stages or STAGE_TYPE not in stages:
            incomplete += 1
            continue
        first, second = stages[STAGE_PRESENCE], stages[STAGE_TYPE]
        key = "official_pred" if official else "pred"
        decision = first.get(key)
        if decision == ABSENT:
            pred, error = NO_ERROR_LABEL, None
        elif decision == PRESENT:
            pred = second.get(key)
            error = (
                None
                if pred is not None
                else f"stage 2: {'official parser: unparsed' if official else second['parse_error']}"
            )
        else:
            pred, error = None, f"stage 1: {'official parser: unparsed' if official else first['parse_error']}"
        outcomes.append(
            {
                "question_id": question_id,
                "domain": first["domain"],
                "subdomain": first["subdomain"],
                "gold": first["label"],
                "pred": pred,
                "presence": decision,
                "correct": pred is not None and pred == first["label"],
                "parse_error": error,
            }
        )
    return outcomes, incomplete


def _is_epd(items: Items) -> bool:
    return bool(items) and "stage" in items[0]


def _outcomes(items: Items) -> list[Mapping[str, Any]]:
    """Per-sample outcomes: ETC items are already per sample; EPD items are replayed."""
    return replay_epd(items)[0] if _is_epd(items) else list(items)


def _accuracy_of(outcomes: Items) -> float:
    return accuracy([bool(o["correct"]) for o in outcomes])


def _classes(items: Items) -> tuple[str, ...]:
    return ALL_LABELS if _is_epd(items) else ERROR_LABELS


def sample_accuracy(items: Items) -> float:
    """Correct / all samples, in percent (strict: an unparseable answer is wrong)."""
    if _is_epd(items):
        outcomes, incomplete = replay_epd(items)
        if incomplete:
            logger.warning(
                f"[mmerror_epd] {incomplete} sample(s) left out: a stage's request is missing "
                "(use an even --limit: EPD asks 2 requests per sample)"
            )
        return _accuracy_of(outcomes)
    return _accuracy_of(items)


def unparsed_answers(items: Items) -> int:
    """Number of samples whose final answer could not be parsed (EPD: stage 1, or stage 2 after P)."""
    return sum(1 for o in _outcomes(items) if o["pred"] is None)


def accuracy_per(field: str) -> Aggregation:
    """Accuracy per value of an outcome's ``field`` (``domain``, ``subdomain``, ``gold``), in percent."""

    def aggregate(items: Items) -> dict[str, float]:
        outcomes = _outcomes(items)
        return breakdown([100.0 * bool(o["correct"]) for o in outcomes], [o[field] or None for o in outcomes])

    return aggregate


def domain_macro(items: Items) -> float:
    """Unweighted mean of the per-domain accuracies."""
    return macro_over_groups(accuracy_per("domain")(items))


def label_confusion(items: Items) -> dict[str, dict[str, int]]:
    outcomes = _outcomes(items)
    return confusion_matrix([o["gold"] for o in outcomes], [o["pred"] for o in outcomes], _classes(items))


def predicted_shares(items: Items) -> dict[str, float]:
    return distribution([o["pred"] for o in _outcomes(items)], _classes(items))


def answered_no_error(items: Items) -> float:
    """EPD: percent of samples whose stage-1 answer was N ("no error")."""
    return accuracy([o["presence"] == ABSENT for o in _outcomes(items)])


def false_alarms(items: Items) -> float | None:
    """EPD: percent of E_NoError samples whose stage-1 answer was P; None when there is no E_NoError sample."""
    clean = [o for o in _outcomes(items) if o["gold"] == NO_ERROR_LABEL]
    return accuracy([o["presence"] == PRESENT for o in clean]) if clean else None


def unparsed_presence(items: Items) -> int:
    """EPD: number of samples whose stage-1 answer could not be parsed."""
    return sum(1 for o in _outcomes(items) if o["presence"] is None)


# ------------------------------------------------------------------- the official report (official.py's parser)


def official_outcomes(items: Items) -> list[tuple[bool, bool]]:
    """(parsed, correct) per sample with the official parser (EPD: both stages replayed with it)."""
    if _is_epd(items):
        return [(o["pred"] is not None, bool(o["correct"])) for o in replay_epd(items, official=True)[0]]
    return [(i.get("official_pred") is not None, bool(i.get("official_correct"))) for i in items]


def official_not_asked(items: Items) -> int:
    """ETC: the E_NoError records the official runner counts but never asks (every ETC item carries the
    task's count; 0 for EPD and for runs stored before it was logged)."""
    if _is_epd(items):
        return 0
    return max((int(i.get(OFFICIAL_NOT_ASKED_FIELD) or 0) for i in items), default=0)


def official_read_accuracy(items: Items) -> float:
    """The official report's ``accuracy``: correct / samples the official parser read, in percent; 0.0
    when it read none, as the official report prints (``official_parse_fail`` says how many)."""
    return official_report(official_outcomes(items)).accuracy


def official_all_accuracy(items: Items) -> float:
    """The official report's ``strict_accuracy``: correct (official parser) / all samples in percent,
    ETC's unasked E_NoError records included in the denominator, as officially."""
    return official_report(official_outcomes(items), not_asked=official_not_asked(items)).strict_accuracy


def official_unparsed(items: Items) -> int:
    """The official report's dataset_total - scored_total: samples the official parser could not read (EPD:
    stage 1, or stage 2 after P), plus ETC's E_NoError records the official runner counts but never asks."""
    return sum(1 for ok, _ in official_outcomes(items) if not ok) + official_not_asked(items)


# ------------------------------------------------------------------- error bars: every resample at once (issue 40)

# Per item, the counts every non-mean metric is a function of (one per-sample outcome per row; EPD: on
# the row of the sample's first request, its other row zeros): samples, correct, stage 1 said N, gold is
# E_NoError, a false alarm (gold E_NoError, stage 1 said P), official parser read, official correct, ETC's
# unasked count (per sample, so the sum over a resample divided by its samples gives it back), then per
# domain (sorted): samples, correct.
_SAMPLES, _CORRECT, _ABSENT, _CLEAN, _ALARM, _OFF_READ, _OFF_RIGHT, _NOT_ASKED, _DOMAINS = range(9)


def outcome_columns(items: Items) -> np.ndarray:
    """The counts above, one row per item: summed over any resample of the items (a question's requests
    together, as the ``question_id`` clusters keep them), they give that resample's metrics."""
    epd = _is_epd(items)
    outcomes = replay_epd(items)[0] if epd else list(items)
    official = replay_epd(items, official=True)[0] if epd else None
    row_of: dict[str, int] = {}
    for k, item in enumerate(items):
        row_of.setdefault(str(item["question_id"]), k)
    domains = sorted({o["domain"] or "" for o in outcomes})
    where = {d: k for k, d in enumerate(domains)}
    out = np.zeros((len(items), _DOMAINS + 2 * len(domains)))
    not_asked = official_not_asked(items)
    for k, o in enumerate(outcomes):
        row = out[row_of[str(o["question_id"])]] if epd else out[k]
        correct = bool(o["correct"])
        if epd:
            parsed, right = official[k]["pred"] is not None, bool(official[k]["correct"])
        else:
            parsed, right = o.get("official_pred") is not None, bool(o.get("official_correct"))
        clean = o["gold"] == NO_ERROR_LABEL
        row[:_DOMAINS] = (
            1,
            correct,
            o.get("presence") == ABSENT,
            clean,
            clean and o.get("presence") == PRESENT,
            parsed,
            parsed and right,
            not_asked,
        )
        d = _DOMAINS + 2 * where[o["domain"] or ""]
        row[d : d + 2] = (1, correct)
    return out


def _percent(numerator: np.ndarray, denominator: np.ndarray, empty: float) -> np.ndarray:
    """100 numerator / denominator; ``empty`` where the denominator is 0."""
    safe = np.where(denominator > 0, denominator, 1.0)
    return np.where(denominator > 0, 100.0 * numerator / safe, empty)


def _official_strict(sums: np.ndarray, full: np.ndarray) -> np.ndarray:
    samples = sums[:, _SAMPLES]
    not_asked = np.where(samples > 0, sums[:, _NOT_ASKED] / np.where(samples > 0, samples, 1.0), 0.0)
    return _percent(sums[:, _OFF_RIGHT], samples + np.rint(not_asked), 0.0)


def _domain_macro(sums: np.ndarray, full: np.ndarray) -> np.ndarray:
    counts, right = sums[:, _DOMAINS::2], sums[:, _DOMAINS + 1 :: 2]
    present = counts > 0
    per_domain = np.where(present, 100.0 * right / np.where(present, counts, 1.0), 0.0)
    n = present.sum(axis=1)
    return np.where(n > 0, per_domain.sum(axis=1) / np.where(n > 0, n, 1), 0.0)


# each the same arithmetic as its aggregation above (the empty cases included: accuracy of no sample is 0.0,
# a false-alarm rate without an E_NoError sample is undefined)
SAMPLE_ACCURACY = Sufficient(outcome_columns, lambda s, f: _percent(s[:, _CORRECT], s[:, _SAMPLES], 0.0))
OFFICIAL_READ_ACCURACY = Sufficient(outcome_columns, lambda s, f: _percent(s[:, _OFF_RIGHT], s[:, _OFF_READ], 0.0))
OFFICIAL_ALL_ACCURACY = Sufficient(outcome_columns, _official_strict)
DOMAIN_MACRO = Sufficient(outcome_columns, _domain_macro)
NO_ERROR_RATE = Sufficient(outcome_columns, lambda s, f: _percent(s[:, _ABSENT], s[:, _SAMPLES], 0.0))
FALSE_ALARM_RATE = Sufficient(outcome_columns, lambda s, f: _percent(s[:, _ALARM], s[:, _CLEAN], np.nan))
