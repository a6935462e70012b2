"""ViRectify scoring: per-sample scores (step accuracy, key-time IoU, edge Jaccard, the judged share of
the corrected answer), the judge item, and the aggregations (the paper's Table 2 layout, the
reflection's accuracy per hint kind).

Pure functions of the docs (read through their typed record, ``records.record_of``) and the items tasks.py builds. Which field of an item holds which score is
spec.py's to say (:class:`ItemFields`, the metrics' ``item_score``): this module names no metric.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from lmms_eval_plugins.benchmark import Aggregation, Items
from lmms_eval_plugins.benchmarks.virectify.records import record_of
from lmms_eval_plugins.benchmarks.virectify.replies import (
    PARTS,
    _text,
    find_answer,
    parse_response,
)
from lmms_eval_plugins.judges import (
    JudgeItem,
    JudgeOutcome,
    aggregate_judged,
    judged_mean,
)
from lmms_eval_plugins.metrics import accuracy, jaccard, merge_intervals, union_iou
from lmms_eval_plugins.stats import Sufficient
from lmms_eval_plugins.parsing import strip_reasoning

TOTAL = "Total"
PARSED_FIELD = "parsed"  # what was read from the reply: logged once per sample (spec.py says under which metric)


class ItemFields(NamedTuple):
    """The fields of a scored item that hold its per-sample scores (fractions 0-1): the ones the
    metrics' aggregations, their ``item_score``, the report and lmms-eval's ``score_key`` read."""

    step_accuracy: str  # share of gold steps labelled right
    time_iou: str  # temporal IoU of the key timestamps
    edge_jaccard: str  # Jaccard of the error-propagation graphs' edges
    judged: str  # the judge's verdict on the corrected answer (None: a judge error)


# ----------------------------------------------------------------------------------------------- metrics


def step_accuracy(pred: Mapping[int, str] | None, gold: Mapping[int, str]) -> float:
    """Share (0-1) of gold steps whose predicted label equals the gold label; a missing step is wrong,
    extra predicted steps are ignored, no prediction at all scores 0."""
    if not pred or not gold:
        return 0.0
    return sum(1 for step, label in gold.items() if pred.get(step) == label) / len(gold)


def edge_jaccard(pred: set[tuple[int, int]] | None, gold: set[tuple[int, int]]) -> float:
    """Eq. 1's |E(G) ∩ E(Ĝ)| / |E(G) ∪ E(Ĝ)| (0-1); an unreadable graph scores 0, two empty graphs 1."""
    return 0.0 if pred is None else jaccard(pred, gold)


def timestamp_iou(pred: Sequence[tuple[float, float]] | None, gold: Sequence[tuple[float, float]]) -> float:
    """Temporal IoU (0-1) of the union of the predicted intervals and the union of the gold intervals."""
    return 0.0 if not pred else union_iou(pred, gold)


# ----------------------------------------------------------------------------------------------- judge and scoring


def judge_item(response: str, doc: Mapping[str, Any]) -> JudgeItem | None:
    """The boxed corrected answer against the reference; None (nothing to judge: scored 0) without one."""
    record = record_of(doc)
    answer, _ = find_answer(strip_reasoning(_text(response)))
    if answer is None:
        return None
    return JudgeItem(question=record.question, prediction=answer, reference=record.answer, item_id=record.record_id)


def score_response(doc: Mapping[str, Any], text: Any, fields: ItemFields) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the per-sample scores, what was parsed) for one response; scores are fractions 0-1."""
    record = record_of(doc)
    gold = record.required_gold()
    parsed = parse_response(text)
    missing = parsed["missing"]
    acc = step_accuracy(parsed["labels"], gold.labels)
    item = {
        "id": record.record_id,
        "domain": record.domain,
        "error_type": record.error_type,
        "solution_source": record.solution_source,
        "source_video": record.source_video,  # the cluster unit of error bars (None in items logged before it)
        fields.step_accuracy: acc,
        fields.time_iou: timestamp_iou(parsed["intervals"], gold.intervals),
        fields.edge_jaccard: edge_jaccard(parsed["edges"], gold.edges),
        "format_ok": not any(part in missing for part in PARTS),
        "missing": missing,
        "score": acc,  # what lmms-eval's own standard error and --baseline read (score_key)
    }
    shown = {
        "labels": None if parsed["labels"] is None else {f"step{k}": v for k, v in sorted(parsed["labels"].items())},
        "edges": None if parsed["edges"] is None else [f"step{s}->step{t}" for s, t in sorted(parsed["edges"])],
        "timestamps": None if parsed["intervals"] is None else merge_intervals(parsed["intervals"]),
        "answer": parsed["answer"],
    }
    return item, shown


def reflect_item(doc: Mapping[str, Any], text: str) -> dict[str, Any]:
    """One reflection sample before its verdict: the boxed answer read from the reply (None: none)."""
    record = record_of(doc)
    hint = record.required_hint()
    answer, _ = find_answer(strip_reasoning(text))
    return {
        "id": record.record_id,
        "source_video": record.source_video,
        "hint_kind": hint.kind,
        "hint_source": hint.source,
        "domain": record.domain,
        "answer": answer,
        "missing": {} if answer is not None else {"answer": "no \\boxed{} answer"},
    }


def with_verdict(item: Mapping[str, Any], outcome: JudgeOutcome, fields: ItemFields) -> dict[str, Any]:
    """``item`` with the judge's outcome and the sample's judged share (:func:`judged_value`)."""
    return {**item, "judge": outcome.to_dict(), fields.judged: judged_value(outcome)}


def judged_value(outcome: JudgeOutcome) -> float | None:
    """One sample's judged share, by ``judged_mean``'s rule: the verdict; 0 when there was nothing to
    judge (no boxed answer); None for a judge error (left out of the denominator)."""
    if outcome.skipped and outcome.error is None:
        return 0.0
    if outcome.error is not None or outcome.verdict is None:
        return None
    return float(outcome.verdict)


def without_parsed(item: Mapping[str, Any]) -> dict[str, Any]:
    """A metric's logged item without what was parsed (logged once, under one metric)."""
    return {k: v for k, v in item.items() if k != PARSED_FIELD}


# ----------------------------------------------------------------------------------------------- aggregations


def _mean_percent(values: Iterable[float]) -> float:
    values = list(values)
    return 100.0 * sum(values) / len(values) if values else 0.0


def percent_mean(field: str) -> Aggregation:
    """The mean of a per-sample fraction, in percent (0 without items)."""
    return lambda items: _mean_percent(i[field] for i in items)


def share_true(field: str) -> Aggregation:
    """The share (percent) of items whose ``field`` is true."""
    return lambda items: accuracy([bool(i[field]) for i in items])


def judged_percent(field: str) -> Callable[[Items], float | None]:
    """The judged accuracy of a group (judge errors left out), from the per-sample values in ``field``;
    None when nothing was judged."""

    def aggregate(items: Items) -> float | None:
        values = [i[field] for i in items if i[field] is not None]
        return 100.0 * sum(values) / len(values) if values else None

    return aggregate


def judged_accuracy(name: str) -> Aggregation:
    """The judged accuracy from the verdicts; only samples with a verdict reach it (a judge error makes
    the metric unscored: null, counted). ``name``: the metric, for the log line."""
    return lambda items: aggregate_judged([i["judge"] for i in items], metric=name, threshold=1.0)


def judge_errors(items: Items) -> int:
    return judged_mean([i["judge"] for i in items]).n_errors


def parse_failures(items: Items) -> dict[str, int]:
    """Per part of the output format (and the boxed answer): the replies missing it."""
    return {part: sum(1 for i in items if part in i["missing"]) for part in (*PARTS, "answer")}


def answer_parse_failures(items: Items) -> int:
    return sum(1 for i in items if i["answer"] is None)


def table(*, group_by: str, names: Mapping[str, str] | None, columns: Mapping[str, Aggregation]) -> Aggregation:
    """The paper's Table 2 layout: per group of the item field ``group_by`` (named by ``names``, in their order; else
    sorted) and in total, each of ``columns`` and n. An empty group has None in every column."""

    def aggregate(items: Items) -> dict[str, dict[str, Any]]:
        groups: dict[str, list[Mapping[str, Any]]] = {}
        if names:
            for key in names:
                groups[names[key]] = []
        for item in items:
            key = item[group_by]
            groups.setdefault(names.get(key, key) if names else key, []).append(item)
        if not names:
            groups = dict(sorted(groups.items()))
        groups[TOTAL] = list(items)
        return {
            name: {**{c: (agg(group) if group else None) for c, agg in columns.items()}, "n": len(group)}
            for name, group in groups.items()
        }

    return aggregate


def hint_accuracy(*, kind: str, field: str) -> Aggregation:
    """The judged accuracy (percent) of the reflection samples given a hint of ``kind``; NaN without any."""

    def aggregate(items: Items) -> float:
        chosen = [i for i in items if i["hint_kind"] == kind]
        value = judged_percent(field)(chosen) if chosen else None
        return math.nan if value is None else value

    return aggregate


# ------------------------------------------------------------------- error bars: every resample at once (issue 40)

HINT_KINDS = ("error_identify", "rationale")


def judged_columns(field: str) -> Callable[[Items], np.ndarray]:
    """The per-item counts of the judged metrics whose per-sample verdict is in ``field`` (the spec makes one
    per field and hands it to each metric, so the metrics sharing it share its sums): the verdict counted (skipped: 0) and counted at all,
    no verdict (a judge error, not judged), then per hint kind (``HINT_KINDS``): a verdict of that kind, its value."""

    def columns(items: Items) -> np.ndarray:
        out = np.zeros((len(items), 3 + 2 * len(HINT_KINDS)))
        for k, item in enumerate(items):
            score = judged_mean([item["judge"]])
            out[k, :3] = (
                score.value_percent / 100.0 if score.n_judged else 0.0,
                score.n_judged,
                score.n_without_verdict,
            )
            kind, value = item.get("hint_kind"), item.get(field)
            if kind in HINT_KINDS and value is not None:
                out[k, 3 + 2 * HINT_KINDS.index(kind) : 5 + 2 * HINT_KINDS.index(kind)] = (1, float(value))
        return out

    return columns


def _judged_value(sums: np.ndarray, full: np.ndarray) -> np.ndarray:
    """``judged_accuracy``: undefined (null) with a sample without a verdict or with none judged."""
    total, judged, without = sums[:, 0], sums[:, 1], sums[:, 2]
    return np.where((without == 0) & (judged > 0), 100.0 * total / np.where(judged > 0, judged, 1.0), np.nan)


def _hint_value(kind: str):
    column = 3 + 2 * HINT_KINDS.index(kind)

    def value(sums: np.ndarray, full: np.ndarray) -> np.ndarray:  # ``hint_accuracy``: NaN without any
        n = sums[:, column]
        return np.where(n > 0, 100.0 * sums[:, column + 1] / np.where(n > 0, n, 1.0), np.nan)

    return value


def judged_accuracy_counts(columns: Callable[[Items], np.ndarray]) -> Sufficient:
    """``judged_accuracy`` from ``judged_columns(field)``, every resample at once."""
    return Sufficient(columns, _judged_value)


def hint_accuracy_counts(*, kind: str, columns: Callable[[Items], np.ndarray]) -> Sufficient:
    """``hint_accuracy(kind=..., field=...)`` from ``judged_columns(field)``, every resample at once."""
    return Sufficient(columns, _hint_value(kind))
