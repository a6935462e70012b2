"""CrossVid scoring: reading replies (robust and official strict), the per-question item, and the
aggregations spec.py gives each metric (CCQA through the rubric judge's verdicts). The paper's
C/T/M/O averages: averages.py. Imports neither spec.py nor tasks.py (spec.py imports this)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from lmms_eval_plugins.benchmark import Items
from lmms_eval_plugins.benchmarks.crossvid.records import (
    _OPTION_LETTER,
    ChoiceGold,
    CrossVidRecord,
    IntervalGold,
    LetterSetGold,
    OrderGold,
    media_group,
    record_of,
)
from lmms_eval_plugins.benchmarks.crossvid.ccqa import (
    rubric_micro_average,
    rubric_official_nan_count,
    rubric_per_question_mean,
)
from lmms_eval_plugins.judges import JudgeItem
from lmms_eval_plugins.metrics import interval_iou
from lmms_eval_plugins.parsing import (
    Parsed,
    parse_interval,
    parse_letter_set,
    parse_option_letter,
    parse_order,
)


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


def official_fsa_iou(pred: tuple[float, float], gold: Sequence[float]) -> float:
    """The IoU ``eval/FSA.py`` (``interval_iou``) gives a ``strict_interval`` reading: the shared formula,
    except that a NaN end ("nan,3", which ``float()`` reads) gives NaN there, where the shared
    :func:`interval_iou` gives 0 (infinite ends give 0 in both)."""
    if any(math.isnan(v) for v in pred):
        return math.nan
    return interval_iou(pred, (float(gold[0]), float(gold[1])))


def official_nan_count(items: Sequence[Mapping[str, Any]]) -> int:
    """Items whose official (strict) value is NaN: while one is there the official FSA score is NaN,
    and so is ``score_strict``; reported beside it as ``official_nan``."""
    return sum(1 for i in items if isinstance(i.get("strict"), float) and math.isnan(i["strict"]))


def video_group(doc: Mapping[str, Any] | CrossVidRecord) -> str:
    """The videos (or frame folders) a question is asked over, order-free: questions on the same group
    are one cluster for error bars, as they share the clips the model saw."""
    media = doc.media if isinstance(doc, CrossVidRecord) else [media_group(m) for m in doc.get("media") or ()]
    return " | ".join(sorted({m.rel for m in media}))


def score_response(doc: Mapping[str, Any], response: Any) -> dict[str, Any]:
    """The per-question item every metric reads: ``robust`` and ``strict`` values in [0, 1], and
    ``score``, the one of them the task's ``strict`` option selects."""
    rec = record_of(doc)
    task, gold = rec.task, rec.gold
    if task == "CCQA":
        raise ValueError("CCQA replies are scored by the rubric judge (process_results_ccqa), not by score_response")
    text = response if isinstance(response, str) else ("" if response is None else str(response))
    item: dict[str, Any] = {
        "id": rec.id,
        "task": task,
        "video_group": video_group(rec),
        "pred": None,
        "gold": None,
        "parse_error": None,
        "n_skipped": rec.n_skipped,
        "official_drop": rec.official_drop or None,
        "n_official_dropped": rec.n_official_dropped,
    }
    if isinstance(gold, LetterSetGold):  # BU
        parsed = parse_letter_set(text, rec.letters, prose=True)
        item["gold"] = "".join(gold.letters)
        if parsed.ok:
            item["pred"] = "".join(sorted(parsed.value))
        robust = float(parsed.ok and sorted(parsed.value) == list(gold.letters))
        strict = float(text == gold.exact)
        item["parse_error"] = parsed.error
    elif isinstance(gold, OrderGold):  # PSS
        parsed = parse_order(text, len(rec.media))
        item["gold"] = "->".join(map(str, gold.order))
        if parsed.ok:
            item["pred"] = "->".join(map(str, parsed.value))
        robust = float(parsed.ok and list(parsed.value) == list(gold.order))
        strict = float(gold.exact is not None and text == gold.exact)
        item["parse_error"] = parsed.error
    elif isinstance(gold, IntervalGold):  # FSA
        official = strict_interval(text)
        # a reply in the asked-for "s,e" form is read as the official float() reads it: default mode reads at
        # least what the official code reads ("1.2e+01,2.0e+01", "+3,+9", "3.,9."); anything else, robustly
        parsed = (
            Parsed.success(official)
            if official is not None and all(map(math.isfinite, official))
            else parse_interval(text)
        )
        target = gold.interval
        item["gold"] = list(target)
        robust = 0.0
        if parsed.ok:
            item["pred"] = list(parsed.value)
            # no swap: a reversed interval scores 0, as the official formula gives it (see README)
            robust = interval_iou(parsed.value, target)
        strict = official_fsa_iou(official, target) if official is not None else 0.0
        item["reversed"] = bool(parsed.ok and parsed.value[1] < parsed.value[0])
        item["parse_error"] = parsed.error
    else:
        assert isinstance(gold, ChoiceGold)
        letter, error = parse_choice(text, rec.letters, rec.options)
        item["gold"], item["pred"], item["parse_error"] = gold.letter, letter, error
        robust = float(letter == gold.letter)
        strict = float(text == gold.exact)
    item["robust"], item["strict"] = robust, strict
    item["score"] = strict if rec.strict else robust
    return item


def _mean_percent(values: Sequence[float]) -> float:
    return 100.0 * sum(values) / len(values) if values else 0.0


# Aggregations: scored items in, one number out (spec.py names which metric uses which; the core
# makes each null when an item is unscored: lmms_eval_plugins/task_hooks.py).


def mean_score(items: Items) -> float:
    """The mean of ``score`` (robust, or official in strict mode), in percent."""
    return _mean_percent([float(i["score"]) for i in items])


def mean_strict(items: Items) -> float:
    """The mean of the official exact-string value ``strict``, in percent."""
    return _mean_percent([float(i["strict"]) for i in items])


def parse_failures(items: Items) -> int:
    return sum(1 for i in items if i.get("parse_error") is not None)


def official_drops(items: Items) -> int:
    """MSR/MOC/FSA records the official script drops (it crashes, retries, then skips them): an object
    annotated in none of its view's sampled frames, a placeholder only in an option, an FSA video with
    fewer frames than its frame slots. Kept and scored here by default, left out in strict mode; the
    same count either way."""
    return max((int(i.get("n_official_dropped") or 0) for i in items), default=0)


def reversed_intervals(items: Items) -> int:
    return sum(1 for i in items if i.get("reversed"))


# ----------------------------------------------------------------------------------------------- CCQA


def judge_item(response: str, doc: Mapping[str, Any]) -> JudgeItem:
    """What the rubric judge sees. An empty reply is still judged (all points uncovered), never dropped."""
    # strict: the judge's reply is read as the official scorer reads it (its first <score> block)
    return JudgeItem(
        question=doc["question"],
        prediction=response or "",
        reference=doc["answer_text"],
        scoring_points=list(doc["scoring_points"]),
        extra={"score_block": "first"} if doc.get("strict") else {},
    )


def ccqa_item(doc: Mapping[str, Any], outcome: Any) -> dict[str, Any]:
    """The per-question CCQA item: the judge's outcome (a ``JudgeOutcome``) as every CCQA metric reads it."""
    return {
        "id": doc["id"],
        "task": "CCQA",
        "video_group": video_group(doc),
        "judge": outcome.to_dict(),
        "n_skipped": int(doc.get("n_skipped") or 0),
    }


def ccqa_micro_score(items: Items) -> float | None:
    """The official CCQA score: (covered + correct points) / (2 x points), over the judged questions
    (a question without a verdict is unscored: this is null then, never a 0)."""
    return rubric_micro_average([i["judge"] for i in items])


def ccqa_per_question_mean(items: Items) -> float | None:
    return rubric_per_question_mean([i["judge"] for i in items])


def ccqa_official_nan(items: Items) -> int:
    """Judged questions whose official points are not a number: the official CCQA score is NaN while
    one is there (strict mode reads the judge's lists as the official scorer does)."""
    return rubric_official_nan_count([i["judge"] for i in items])


def judge_failures(items: Items) -> int:
    # imported here: judges.filter loads lmms-eval's Filter (and datasets, about a second), and spec.py,
    # which every lmms-eval-plugins command loads, imports this module
    from lmms_eval_plugins.judges import judged_mean

    return judged_mean([i["judge"] for i in items]).n_errors
