"""CrossVid scoring: reading replies (robust and official strict), the per-question item, the
aggregations (CCQA through the rubric judge's verdicts), and the paper's C/T/M/O averages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lmms_eval_plugins.benchmarks.crossvid.records import _OPTION_LETTER, from_row
from lmms_eval_plugins.judges import (
    JudgeItem,
    judged_mean,
    rubric_micro_average,
    rubric_per_question_mean,
)
from lmms_eval_plugins.judges.filter import judged_parts
from lmms_eval_plugins.metrics import interval_iou
from lmms_eval_plugins.outcome import count_unscored, guard_aggregations, with_unscored
from lmms_eval_plugins.parsing import (
    parse_interval,
    parse_letter_set,
    parse_option_letter,
    parse_order,
)

TASKS = ("BU", "NC", "CC", "PEA", "PI", "FSA", "PSS", "MSR", "MOC", "CCQA")
DIMENSIONS = {"C.Avg": ("BU", "NC", "CC", "PEA"), "T.Avg": ("PI", "FSA", "PSS"), "M.Avg": ("MSR", "MOC")}


def _task_code(name: str) -> str:
    code = str(name).strip()
    code = code[len("crossvid_"):] if code.lower().startswith("crossvid_") else code
    code = code[: -len("_sample")] if code.lower().endswith("_sample") else code
    return code.upper()


def crossvid_averages(task_scores: Mapping[str, float]) -> dict[str, float]:
    """The paper's Table 2 averages from per-task scores (percent).

    Keys may be task codes ("BU") or task names ("crossvid_bu", "crossvid_bu_sample").
    C.Avg = mean(BU, NC, CC, PEA), T.Avg = mean(PI, FSA, PSS), M.Avg = mean(MSR, MOC),
    O.Avg = unweighted mean of the ten task scores (not of the dimension averages). An average
    with a task missing is NaN rather than a mean over fewer tasks.
    """
    scores = {_task_code(k): float(v) for k, v in task_scores.items()}

    def mean(codes: Sequence[str]) -> float:
        if any(c not in scores for c in codes):
            return float("nan")
        return sum(scores[c] for c in codes) / len(codes)

    out = {name: mean(codes) for name, codes in DIMENSIONS.items()}
    out["O.Avg"] = mean(TASKS)
    return out


# ----------------------------------------------------------------------------------------------- scoring

def parse_choice(response: str, letters: str, options: Sequence[str]) -> tuple[str | None, str | None]:
    """(letter, None) or (None, why): a bare letter, ``Answer: X``, ``\\boxed{X}``, the exact text of
    one option (with or without its letter), or a reply starting with a letter and a separator
    ("B. The man ...")."""
    full = dict(zip(letters, options))
    parsed = parse_option_letter(response, letters, names=full)
    if parsed.ok:
        return parsed.value, None
    bare = {letter: _OPTION_LETTER.sub("", text, count=1).strip() for letter, text in full.items()}
    again = parse_option_letter(response, letters, names=bare)
    if again.ok:
        return again.value, None
    # what models write around the letter: "The answer is B.", "Option B", "B. The man ...", full-width letters
    prose = parse_option_letter(response, letters, names=bare, prose=True)
    if prose.ok:
        return prose.value, None
    return None, parsed.error


def strict_interval(response: str) -> tuple[float, float] | None:
    """The official FSA reading: ``output.split(",")`` into exactly two ``float()``s, else None."""
    parts = str(response).split(",")
    if len(parts) != 2:
        return None
    try:
        return float(parts[0]), float(parts[1])
    except ValueError:
        return None


def video_group(doc: Mapping[str, Any]) -> str:
    """The videos (or frame folders) a question is asked over, order-free: questions on the same group
    are one cluster for error bars, as they share the clips the model saw."""
    media = doc.get("media") or []
    return " | ".join(sorted({str(m.get("rel")) for m in media if isinstance(m, Mapping)}))


def score_response(doc: Mapping[str, Any], response: Any) -> dict[str, Any]:
    """The per-question item every metric reads: ``robust`` and ``strict`` values in [0, 1], and
    ``score``, the one of them the task's ``strict`` option selects."""
    doc = from_row(doc)
    task, gold = doc["task"], doc["gold"]
    if task == "CCQA":
        raise ValueError("CCQA replies are scored by the rubric judge (process_results_ccqa), not by score_response")
    text = response if isinstance(response, str) else ("" if response is None else str(response))
    item: dict[str, Any] = {"id": doc["id"], "task": task, "video_group": video_group(doc),
                            "pred": None, "gold": None, "parse_error": None,
                            "n_skipped": int(doc.get("n_skipped") or 0),
                            "official_drop": doc.get("official_drop") or None,
                            "n_official_dropped": int(doc.get("n_official_dropped") or 0)}
    if task == "BU":
        parsed = parse_letter_set(text, doc["letters"], prose=True)
        item["gold"] = "".join(gold["letters"])
        if parsed.ok:
            item["pred"] = "".join(sorted(parsed.value))
        robust = float(parsed.ok and sorted(parsed.value) == gold["letters"])
        strict = float(text == gold["exact"])
        item["parse_error"] = parsed.error
    elif task == "PSS":
        parsed = parse_order(text, len(doc["media"]))
        item["gold"] = "->".join(map(str, gold["order"]))
        if parsed.ok:
            item["pred"] = "->".join(map(str, parsed.value))
        robust = float(parsed.ok and list(parsed.value) == gold["order"])
        strict = float(text == gold["exact"])
        item["parse_error"] = parsed.error
    elif task == "FSA":
        parsed = parse_interval(text)
        target = tuple(gold["interval"])
        item["gold"] = list(target)
        robust = 0.0
        if parsed.ok:
            item["pred"] = list(parsed.value)
            # no swap: a reversed interval scores 0, as the official formula gives it (see README)
            robust = interval_iou(parsed.value, target)
        official = strict_interval(text)
        strict = interval_iou(official, target) if official is not None else 0.0
        item["reversed"] = bool(parsed.ok and parsed.value[1] < parsed.value[0])
        item["parse_error"] = parsed.error
    else:
        letter, error = parse_choice(text, doc["letters"], doc["options"])
        item["gold"], item["pred"], item["parse_error"] = gold["letter"], letter, error
        robust = float(letter == gold["letter"])
        strict = float(text == gold["exact"])
    item["robust"], item["strict"] = robust, strict
    item["score"] = strict if doc.get("strict") else robust
    return item


METRICS = ("score", "score_strict", "parse_fail", "skipped")
FSA_METRICS = (*METRICS, "reversed")
UAV_METRICS = (*METRICS, "official_dropped")  # MSR/MOC
CCQA_METRICS = ("score", "score_strict", "per_question_mean", "judge_errors", "skipped")
CCQA_JUDGED_METRICS = ("score", "score_strict", "per_question_mean")  # null while a verdict is missing


def process_results(doc, results):
    response = results[0] if results else ""
    item = score_response(doc, response)
    names = {"FSA": FSA_METRICS, "MSR": UAV_METRICS, "MOC": UAV_METRICS}.get(item["task"], METRICS)
    return with_unscored(dict.fromkeys(names, item), [response], doc=doc)


def _mean_percent(values: Sequence[float]) -> float:
    return 100.0 * sum(values) / len(values) if values else 0.0


def agg_score(items):
    return _mean_percent([float(i["score"]) for i in items])


def agg_score_strict(items):
    return _mean_percent([float(i["strict"]) for i in items])


def agg_parse_fail(items):
    return sum(1 for i in items if i.get("parse_error") is not None)


def agg_official_dropped(items):
    """MSR/MOC records the official script drops (it crashes, retries, then skips them): an object
    annotated in none of its view's sampled frames, or a placeholder only in an option. Kept and
    scored here by default, left out in strict mode; the same count either way."""
    return max((int(i.get("n_official_dropped") or 0) for i in items), default=0)


def agg_reversed(items):
    return sum(1 for i in items if i.get("reversed"))


# ----------------------------------------------------------------------------------------------- CCQA

def judge_item(response: str, doc: Mapping[str, Any]) -> JudgeItem:
    """What the rubric judge sees. An empty reply is still judged (all points uncovered), never dropped."""
    # strict: the judge's reply is read as the official scorer reads it (its first <score> block)
    return JudgeItem(question=doc["question"], prediction=response or "", reference=doc["answer_text"],
                     scoring_points=list(doc["scoring_points"]),
                     extra={"score_block": "first"} if doc.get("strict") else {})


def process_results_ccqa(doc, results):
    text, outcome = judged_parts(results)
    item = {"id": doc["id"], "task": "CCQA", "video_group": video_group(from_row(doc)), "judge": outcome.to_dict(),
            "n_skipped": int(doc.get("n_skipped") or 0)}
    return with_unscored(dict.fromkeys(CCQA_METRICS, item), [text], judge=outcome, judged=CCQA_JUDGED_METRICS,
                         doc=doc)


def agg_ccqa_score(items):
    """The official CCQA score: (covered + correct points) / (2 x points), over the judged questions
    (a question without a verdict is unscored: this is null then, never a 0)."""
    return rubric_micro_average([i["judge"] for i in items])


def agg_ccqa_per_question_mean(items):
    return rubric_per_question_mean([i["judge"] for i in items])


def agg_judge_errors(items):
    return judged_mean([i["judge"] for i in items]).n_errors


# A failed model request is unscored, not wrong (lmms_eval_plugins/outcome.py): every metric is null then.
agg_unscored = count_unscored
guard_aggregations(globals())
