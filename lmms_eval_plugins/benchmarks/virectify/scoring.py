"""ViRectify scoring: per-sample scores (acc_i, iou, graph_jaccard, the judged acc_r), the judge item,
and the aggregations (the paper's Table 2 layout, the reflection's acc_r per hint kind)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lmms_eval_plugins.benchmarks.virectify.records import DOMAINS, ERROR_TYPES
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
    judged_parts,
)
from lmms_eval_plugins.metrics import accuracy, jaccard, merge_intervals, union_iou
from lmms_eval_plugins.outcome import count_unscored, guard_aggregations, with_unscored
from lmms_eval_plugins.parsing import strip_reasoning

TOTAL = "Total"


# ----------------------------------------------------------------------------------------------- metrics

def step_accuracy(pred: Mapping[int, str] | None, gold: Mapping[int, str]) -> float:
    """Share (0-1) of gold steps whose predicted label equals the gold label; a missing step is wrong,
    extra predicted steps are ignored, no prediction at all scores 0."""
    if not pred or not gold:
        return 0.0
    return sum(1 for step, label in gold.items() if pred.get(step) == label) / len(gold)


def graph_jaccard(pred: set[tuple[int, int]] | None, gold: set[tuple[int, int]]) -> float:
    """Eq. 1's |E(G) ∩ E(Ĝ)| / |E(G) ∪ E(Ĝ)| (0-1); an unreadable graph scores 0, two empty graphs 1."""
    return 0.0 if pred is None else jaccard(pred, gold)


def timestamp_iou(pred: Sequence[tuple[float, float]] | None, gold: Sequence[tuple[float, float]]) -> float:
    """Temporal IoU (0-1) of the union of the predicted intervals and the union of the gold intervals."""
    return 0.0 if not pred else union_iou(pred, gold)


# ----------------------------------------------------------------------------------------------- judge and scoring

def judge_item(response: str, doc: Mapping[str, Any]) -> JudgeItem | None:
    """The boxed corrected answer against the reference; None (nothing to judge: scored 0) without one."""
    answer, _ = find_answer(strip_reasoning(_text(response)))
    if answer is None:
        return None
    return JudgeItem(question=doc["question"], prediction=answer, reference=doc["answer"], item_id=doc["id"])


METRICS = ("acc_i", "iou", "acc_r", "graph_jaccard", "format_rate", "acc_r_judge_errors", "parse_fail",
           "by_domain", "by_error_type", "by_solution_source")
REFLECT_METRICS = ("acc_r", "acc_r_error_identify", "acc_r_rationale", "acc_r_judge_errors", "answer_parse_fail")
# Computed from judge verdicts: null while a sample's verdict is missing (the others stay).
JUDGED_METRICS = ("acc_r", "by_domain", "by_error_type", "by_solution_source")
REFLECT_JUDGED_METRICS = ("acc_r", "acc_r_error_identify", "acc_r_rationale")


def score_response(doc: Mapping[str, Any], text: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the per-sample scores, what was parsed) for one response; scores are fractions 0-1."""
    parsed = parse_response(text)
    gold_labels = {int(k): v for k, v in json.loads(doc["gold_labels"]).items()}
    gold_edges = {(int(s), int(t)) for s, t in json.loads(doc["gold_edges"])}
    gold_intervals = [tuple(iv) for iv in json.loads(doc["gold_timestamps"])]
    missing = parsed["missing"]
    item = {
        "id": doc["id"], "domain": doc["domain"], "error_type": doc["error_type"],
        "solution_source": doc["solution_source"],
        "source_video": doc.get("source_video"),  # the cluster unit of error bars (None in runs logged before it)
        "acc_i": step_accuracy(parsed["labels"], gold_labels),
        "iou": timestamp_iou(parsed["intervals"], gold_intervals),
        "graph_jaccard": graph_jaccard(parsed["edges"], gold_edges),
        "format_ok": not any(part in missing for part in PARTS),
        "missing": missing,
    }
    item["score"] = item["acc_i"]  # what lmms-eval's own standard error and --baseline read (score_key)
    shown = {
        "labels": None if parsed["labels"] is None else {f"step{k}": v for k, v in sorted(parsed["labels"].items())},
        "edges": None if parsed["edges"] is None else [f"step{s}->step{t}" for s, t in sorted(parsed["edges"])],
        "timestamps": None if parsed["intervals"] is None else merge_intervals(parsed["intervals"]),
        "answer": parsed["answer"],
    }
    return item, shown


def process_results(doc, results):
    text, outcome = judged_parts(results)
    item, shown = score_response(doc, text)
    item["judge"] = outcome.to_dict()
    item["acc_r"] = judged_value(outcome)
    out = {metric: item for metric in METRICS}
    out["format_rate"] = {**item, "parsed": shown}  # the logged sample shows what was read once
    return with_unscored(out, [text], judge=outcome, judged=JUDGED_METRICS, doc=doc)


def process_results_reflect(doc, results):
    text, outcome = judged_parts(results)
    answer, _ = find_answer(strip_reasoning(text))
    item = {"id": doc["id"], "source_video": doc.get("source_video"), "hint_kind": doc["hint_kind"],
            "hint_source": doc["hint_source"], "domain": doc["domain"],
            "answer": answer, "missing": {} if answer is not None else {"answer": "no \\boxed{} answer"},
            "judge": outcome.to_dict(), "acc_r": judged_value(outcome)}
    return with_unscored(dict.fromkeys(REFLECT_METRICS, item), [text], judge=outcome, judged=REFLECT_JUDGED_METRICS,
                         doc=doc)


def judged_value(outcome: JudgeOutcome) -> float | None:
    """One sample's share of acc_r, by ``judged_mean``'s rule: the verdict; 0 when there was nothing to
    judge (no boxed answer); None for a judge error (left out of the denominator)."""
    if outcome.skipped and outcome.error is None:
        return 0.0
    if outcome.error is not None or outcome.verdict is None:
        return None
    return float(outcome.verdict)


def _mean_percent(values: Iterable[float]) -> float:
    values = list(values)
    return 100.0 * sum(values) / len(values) if values else 0.0


def _judged_percent(items: Sequence[Mapping[str, Any]]) -> float | None:
    """acc_r of a group (judge errors left out), from the per-sample values; None when nothing was judged."""
    values = [i["acc_r"] for i in items if i["acc_r"] is not None]
    return 100.0 * sum(values) / len(values) if values else None


def agg_acc_i(items):
    return _mean_percent(i["acc_i"] for i in items)


def agg_iou(items):
    return _mean_percent(i["iou"] for i in items)


def agg_graph_jaccard(items):
    return _mean_percent(i["graph_jaccard"] for i in items)


def agg_format_rate(items):
    return accuracy([bool(i["format_ok"]) for i in items])


def agg_acc_r(items):
    """Only samples with a verdict reach this (a judge error makes acc_r unscored: null, counted)."""
    return aggregate_judged([i["judge"] for i in items], metric="acc_r", threshold=1.0)


def agg_acc_r_judge_errors(items):
    return judged_mean([i["judge"] for i in items]).n_errors


def agg_parse_fail(items):
    return {part: sum(1 for i in items if part in i["missing"]) for part in (*PARTS, "answer")}


def _table(items: Sequence[Mapping[str, Any]], field: str, names: Mapping[str, str] | None) -> dict[str, dict[str, Any]]:
    """The paper's Table 2 layout: per group and in total, acc_i, iou and acc_r in percent, and n."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    if names:
        for key in names:
            groups[names[key]] = []
    for item in items:
        key = item[field]
        groups.setdefault(names.get(key, key) if names else key, []).append(item)
    if not names:
        groups = dict(sorted(groups.items()))
    groups[TOTAL] = list(items)

    def row(group: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        if not group:
            return {"acc_i": None, "iou": None, "acc_r": None, "n": 0}
        return {"acc_i": agg_acc_i(group), "iou": agg_iou(group), "acc_r": _judged_percent(group), "n": len(group)}

    return {name: row(group) for name, group in groups.items()}


def agg_by_domain(items):
    return _table(items, "domain", DOMAINS)


def agg_by_error_type(items):
    return _table(items, "error_type", ERROR_TYPES)


def agg_by_solution_source(items):
    return _table(items, "solution_source", None)


def _acc_r_of(kind: str):
    def agg(items):
        chosen = [i for i in items if i["hint_kind"] == kind]
        value = _judged_percent(chosen) if chosen else None
        return float("nan") if value is None else value
    return agg


agg_acc_r_error_identify = _acc_r_of("error_identify")
agg_acc_r_rationale = _acc_r_of("rationale")


def agg_answer_parse_fail(items):
    return sum(1 for i in items if i["answer"] is None)


# A failed model request is unscored, not wrong (lmms_eval_plugins/outcome.py): every metric is null then.
agg_unscored = count_unscored
guard_aggregations(globals())
