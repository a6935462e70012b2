"""CrossVid: records, frame budgets, prompts, placeholders and boxes, scoring and averages, by hand."""

from __future__ import annotations

import math

import filecmp
import json
import shutil
from pathlib import Path

import pytest
from lmms_eval_plugins.judges.base import JudgeOutcome
from testkit.task_utils import load_task_utils

from lmms_eval_plugins.benchmarks.crossvid.records import (
    Box,
    ChoiceGold,
    CrossVidRecord,
    IntervalGold,
    LetterSetGold,
    ObjectRef,
    OrderGold,
    PointsGold,
)
from lmms_eval_plugins.benchmarks.crossvid.sample_data import make_crossvid
from lmms_eval_plugins.data import to_dataset
from lmms_eval_plugins.errors import DataError, MediaError
from lmms_eval_plugins.synthetic import make_frame_folder

cv = load_task_utils("crossvid")
SAMPLE = {"benchmark": "crossvid", "source": "sample", "frames": 16}


@pytest.fixture(autouse=True)
def _no_skip_env(monkeypatch):
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA", raising=False)
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_DATA_ROOT", raising=False)


def docs(task: str, **spec) -> list[dict]:
    """The task's docs as lmms-eval holds them: rows of a Hugging Face dataset (Arrow lists and structs)."""
    return list(to_dataset(cv.load_docs({**SAMPLE, **spec}, task), features=cv.row_features(task)))


def obj(name: str, view: str, boxes: dict) -> ObjectRef:
    """An object reference with boxes by frame position (None: no box there), as a test writes it."""
    return ObjectRef(
        placeholder="",
        name=name,
        view=view,
        ordinal=1,
        boxes=tuple((k, None if b is None else Box(**{c: float(v) for c, v in b.items()})) for k, b in boxes.items()),
    )


def doc_for(task: str, record_id: int = 0, **spec) -> dict:
    return next(d for d in docs(task, **spec) if d["id"] == str(record_id))


def scores(doc: dict, *responses: str) -> list[tuple[float, float]]:
    """(robust, strict) per response."""
    return [(i["robust"], i["strict"]) for i in (cv.score_response(doc, r) for r in responses)]


def aggregate(pairs: list[tuple[dict, str]]) -> dict[str, float]:
    """Run the task's real process_results + aggregation hooks over (doc, response) pairs."""
    per_doc = [cv.process_results(d, [r]) for d, r in pairs]
    names = per_doc[0].keys()
    return {m: getattr(cv, f"agg_{m}")([x[m] for x in per_doc]) for m in names}


# ----------------------------------------------------------------------------------------------- scoring


def test_bu_needs_the_exact_set_in_any_order():
    doc = doc_for("BU", 0)  # gold ["A", "C"], options A-D
    assert scores(doc, "AC", "CA", "A, C", "Answer: C and A") == [(1, 1), (1, 0), (1, 0), (1, 0)]
    # a superset or a subset is wrong in both modes
    assert scores(doc, "ACD", "A") == [(0, 0), (0, 0)]
    item = cv.score_response(doc, "I would say the first and the third")
    assert item["pred"] is None and item["parse_error"] and item["score"] == 0.0
    # gold written as a string ("BD") is compared as written by the strict mode
    assert scores(doc_for("BU", 1), "BD", "DB") == [(1, 1), (1, 0)]


def test_single_choice_robust_and_strict():
    doc = doc_for("NC", 0)  # gold "C", options "A. Video 1" .. "D. Video 4"
    got = scores(doc, "C", "C.", "(C)", "**C**", "Answer: C", "C. Video 3", "Video 3", "\\boxed{C}", "C\n")
    assert [r for r, _ in got] == [1.0] * 9
    assert [s for _, s in got] == [1.0] + [0.0] * 8  # the official check is output == answer
    # issue #17: the answer stated in prose, with an explanation after it, is read (robust mode only)
    assert scores(doc, "B", "The answer is C because of the hug") == [(0, 0), (1, 0)]
    assert cv.score_response(doc, "The answer is C because of the hug")["pred"] == "C"
    # two different answers stated: unparseable, never guessed
    assert cv.score_response(doc, "The answer is C. No wait, the answer is B.")["parse_error"]


def test_pss_order_tolerates_spaces_and_separators():
    doc = doc_for("PSS", 0)  # gold "2->4->1->3", four segments
    got = scores(
        doc,
        "2->4->1->3",
        "2 -> 4 -> 1 -> 3",
        "2, 4, 1, 3",
        "2→4→1→3",
        "Segment 2 -> Segment 4 -> Segment 1 -> Segment 3",
    )
    assert got == [(1, 1)] + [(1, 0)] * 4
    assert scores(doc, "4->2->1->3") == [(0, 0)]
    missing = cv.score_response(doc, "2->4->1")  # not a permutation of 1..4: unparseable
    assert missing["parse_error"] == "missing 3" and missing["robust"] == 0.0


def test_fsa_mean_iou_and_a_reversed_interval():
    doc = doc_for("FSA", 0)  # gold [2, 4.5]
    # [3, 5] vs [2, 4.5]: overlap 4.5 - 3 = 1.5, hull 5 - 2 = 3 -> 0.5
    assert scores(doc, "2,4.5", "3,5", " 3 , 5 ") == [(1, 1), (0.5, 0.5), (0.5, 0.5)]
    # brackets and units: robust reads them, the official float() split does not
    assert scores(doc, "[2s, 4.5s]", "From 3 to 5 seconds", "2-4.5") == [(1, 0), (0.5, 0), (1, 0)]
    # reversed: min(e) - max(s) is negative for any reversed prediction, so the official formula
    # gives 0; we do not swap it (the prompt asks for beginning, then ending) and count it
    item = cv.score_response(doc, "4.5,2")
    assert (item["robust"], item["strict"], item["reversed"]) == (0.0, 0.0, True)
    assert scores(doc, "6,8") == [(0, 0)]  # disjoint
    m = aggregate([(doc, "2,4.5"), (doc, "3,5"), (doc, "4.5,2"), (doc, "no idea")])
    assert m["score"] == pytest.approx(100 * (1 + 0.5 + 0 + 0) / 4)
    assert (m["reversed"], m["parse_fail"], m["skipped"]) == (1, 1, 0)


def test_fsa_default_reads_every_number_spelling_the_official_float_reads():
    # issue 37 case 10: the asked-for "s,e" form in spellings Python's float() reads. Before, the robust reader
    # gave 0 for "2e+00,4.5e+00" (no interval in "e+00"), [0, 9] for "3.0e+00,9.0e+00" and "no interval
    # found" for "+3,+5" and "3.,5.". Gold [2, 4.5]; [3, 5]: overlap 1.5, hull 3 -> 0.5; [3, 9]: 1.5 / 7
    doc = doc_for("FSA", 0)
    assert scores(doc, "2e+00,4.5e+00", "3.0e+00,5.0e+00", "+3,+5", "3.,5.", "+2.0,+4.5") == [
        (1, 1),
        (0.5, 0.5),
        (0.5, 0.5),
        (0.5, 0.5),
        (1, 1),
    ]
    assert scores(doc, "3.0e+00,9.0e+00") == [(pytest.approx(1.5 / 7), pytest.approx(1.5 / 7))]
    # default reads at least what official reads: on every reply official scores, default scores the same
    for reply in ("2,4.5", "3 ,5", " 3,  5", "1e0,2e0", "+0.5,+4", ".5,4.", "4.5,2", "nan,3", "inf,5"):
        item = cv.score_response(doc, reply)
        if cv.strict_interval(reply) is not None and math.isfinite(item["strict"]):
            assert item["robust"] == item["strict"], reply


def test_msr_moc_pi_pea_cc_are_letter_tasks():
    for task, gold in (("MSR", "B"), ("MOC", "C"), ("PI", "B"), ("PEA", "B"), ("CC", "B")):
        doc = doc_for(task, 0)
        assert scores(doc, gold, f"Answer: {gold}", "Z") == [(1, 1), (1, 0), (0, 0)], task
    assert scores(doc_for("MSR", 0), "B. obj_3", "obj_3") == [(1, 0), (1, 0)]  # options as the model saw them


def test_strict_source_option_makes_score_the_official_comparison():
    robust, strict = doc_for("NC", 0), doc_for("NC", 0, strict=True)
    replies = ["C", "C.", "B"]
    m_robust = aggregate([(robust, r) for r in replies])
    m_strict = aggregate([(strict, r) for r in replies])
    assert m_robust["score"] == pytest.approx(200 / 3) and m_robust["score_strict"] == pytest.approx(100 / 3)
    assert m_strict["score"] == pytest.approx(100 / 3) and m_strict["score_strict"] == pytest.approx(100 / 3)


def test_questions_over_the_same_videos_are_one_error_bar_cluster():
    from lmms_eval_plugins.benchmark import get as get_benchmark
    from lmms_eval_plugins.errorbars import metric_stderr

    spec = get_benchmark("crossvid")
    base = doc_for("BU", 0)
    media = base["media"]
    rels = sorted({m["rel"] for m in media})
    assert cv.score_response(base, "AC")["video_group"] == " | ".join(rels)
    # the same clips listed in another order are the same group; other clips another group
    swapped = {**base, "id": "9", "media": media[::-1]}
    other = {**base, "id": "8", "media": [{**m, "rel": "other/" + m["rel"]} for m in media]}
    other2 = {**other, "id": "7"}
    items = [cv.score_response(d, r) for d, r in ((base, "AC"), (swapped, "AC"), (other, "B"), (other2, "B"))]
    assert items[0]["video_group"] == items[1]["video_group"] != items[2]["video_group"] == items[3]["video_group"]
    # scores 1, 1 | 0, 0: by hand, clt = var(ddof=1)/n = (1/3)/4, cross terms (1^2 + 1^2 - 4 x 0.25)/16 = 1/16,
    # SE = sqrt(1/12 + 1/16) = 38.19%; as four independent items it would be sqrt(1/3)/2 = 28.87%
    score = spec.task_metrics("crossvid_bu")["score"]
    assert metric_stderr(spec, score, cv.agg_score, items) == pytest.approx(100 * (1 / 12 + 1 / 16) ** 0.5)
    unclustered = [{k: v for k, v in i.items() if k != "video_group"} for i in items]
    assert metric_stderr(spec, score, cv.agg_score, unclustered) == pytest.approx(100 * (1 / 3) ** 0.5 / 2)


def test_ccqa_micro_average_per_question_mean_and_judge_errors(monkeypatch):
    def outcome(coverage, correctness):
        n = len(coverage)
        detail = {"coverage": coverage, "correctness": correctness}
        return JudgeOutcome(
            "rubric", "1", "gpt-4.1", verdict=(sum(coverage) + sum(correctness)) / (2 * n), detail=detail
        )

    doc = {"id": "0", "n_skipped": 0}
    judged = [outcome([1, 1], [1, 0]), outcome([1, 0, 0], [0, 0, 0])]  # 3 of 4 points, 1 of 6
    error = JudgeOutcome("rubric", "1", "gpt-4.1", error="HTTP 500 after 6 attempts")
    per_doc = [cv.process_results_ccqa(doc, [[{"text": "x", "judge": o.to_dict()}]]) for o in [*judged, error]]
    items = [d["score"] for d in per_doc[:2]]
    # official micro-average: (3 + 1) / (2 x (2 + 3))
    assert cv.agg_ccqa_score(items) == pytest.approx(40.0)
    assert cv.agg_ccqa_per_question_mean(items) == pytest.approx(100 * (3 / 4 + 1 / 6) / 2)
    # a question the judge could not score is unscored: the judged scores are null (never a silent 0,
    # never an exception that would lose the run), counted in judge_errors and unscored
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_MAX_ERROR_RATE", "0.05")
    assert cv.agg_ccqa_score([d["score"] for d in per_doc]) is None
    assert cv.agg_ccqa_per_question_mean([d["per_question_mean"] for d in per_doc]) is None
    assert cv.agg_judge_errors([d["judge_errors"] for d in per_doc]) == 1
    assert cv.agg_unscored([d["unscored"] for d in per_doc]) == 1
    # issue 37 case 4: strict mode follows the official scorer, which leaves a failed question out of its
    # sums and prints a number: (3 + 1) / (2 x 5) = 40.0 over the two judged, the failure counted
    strict = [
        cv.process_results_ccqa({**doc, "strict": True}, [[{"text": "x", "judge": o.to_dict()}]])
        for o in [*judged, error]
    ]
    assert cv.agg_ccqa_score([d["score"] for d in strict]) == pytest.approx(40.0)
    assert cv.agg_ccqa_per_question_mean([d["per_question_mean"] for d in strict]) == pytest.approx(
        100 * (3 / 4 + 1 / 6) / 2
    )
    assert (
        cv.agg_judge_errors([d["judge_errors"] for d in strict]) == 1
        and cv.agg_unscored([d["unscored"] for d in strict]) == 0
    )
    # a question no judge was asked about stays unscored in strict mode too (no judge configured)
    unasked = JudgeOutcome("rubric", "1", "gpt-4.1", error="not judged: no judge endpoint configured")
    none = [cv.process_results_ccqa({**doc, "strict": True}, [[{"text": "x", "judge": unasked.to_dict()}]])]
    assert cv.agg_ccqa_score([d["score"] for d in none]) is None and cv.agg_unscored([d["unscored"] for d in none]) == 1


@pytest.fixture()
def fresh_judge_runtime():
    from lmms_eval_plugins.judges.session import reset_runtimes

    reset_runtimes()
    yield
    reset_runtimes()  # also keeps the runtime's exit summary from logging after pytest closed its streams


def test_ccqa_oracle_reply_gets_full_marks_from_the_offline_rubric_judge(
    isolated_env, fresh_judge_runtime, monkeypatch
):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE", "offline")
    rows = docs("CCQA")
    flt = cv.JudgeFilter(judge="rubric", default_model="gpt-4.1", item_fn=cv.judge_item)
    assert flt.judge_name == "rubric_offline"
    replies = [[d["oracle_response"]] for d in rows] + [[""]]
    filtered = flt.apply(replies, rows + [rows[0]])
    items = [cv.process_results_ccqa(d, [f])["score"] for d, f in zip(rows + [rows[0]], filtered)]
    assert [i["judge"]["verdict"] for i in items] == [1.0, 1.0, 0.0]  # an empty reply: every point uncovered
    # 2 + 3 points fully given, 2 points of the empty reply not: 10 / 14
    assert cv.agg_ccqa_score(items) == pytest.approx(100 * 10 / 14)


# ----------------------------------------------------------------------------------------------- Table 2

# The paper's Table 2, copied from its text: O.Avg, BU, NC, CC, PEA, C.Avg, PI, FSA, PSS, T.Avg,
# MSR, MOC, M.Avg, CCQA. 22 models plus the human row.
TABLE2 = {
    "Human": (89.2, 85.6, 92.3, 90.7, 83.9, 88.1, 91.6, 85.2, 89.9, 88.9, 93.2, 94.2, 93.7, 85.2),
    "GPT-4.1": (45.2, 46.2, 34.6, 58.5, 51.2, 47.6, 70.9, 8.6, 60.5, 46.7, 38.6, 38.2, 38.4, 44.6),
    "GPT-4o": (36.8, 38.2, 34.3, 50.7, 49.1, 43.1, 57.8, 9.1, 39.7, 35.5, 15.3, 39.4, 27.4, 34.2),
    "Doubao-1.5-VL-pro": (44.3, 51.2, 58.1, 69.5, 36.4, 53.8, 66.9, 4.6, 36.8, 36.1, 37.4, 32.0, 34.7, 50.1),
    "Gemini-2.5-Pro": (50.4, 54.2, 51.8, 68.7, 44.1, 54.7, 76.5, 13.4, 78.2, 56.0, 32.0, 25.3, 28.7, 59.8),
    "Kimi-VL-A3B-Thinking": (28.2, 29.4, 33.3, 36.8, 34.0, 33.4, 40.6, 3.8, 9.2, 17.9, 28.4, 36.9, 32.7, 29.2),
    "ERNIE-4.5-VL-A3B": (24.8, 12.6, 28.2, 24.2, 36.4, 25.4, 52.6, 4.0, 2.4, 19.7, 29.6, 35.3, 32.5, 22.5),
    "Qwen2.5-VL-7B": (18.3, 19.6, 19.0, 23.4, 15.0, 19.3, 58.6, 1.2, 0.3, 20.0, 11.8, 21.7, 16.8, 12.0),
    "InternVL3-8B": (25.6, 15.2, 22.8, 24.3, 42.1, 26.1, 56.2, 3.2, 1.5, 20.3, 34.0, 47.3, 40.7, 9.7),
    "LongVA-7B-DPO": (18.0, 16.2, 20.6, 18.2, 39.0, 23.5, 18.7, 2.1, 1.8, 7.5, 24.2, 28.4, 26.3, 10.7),
    "VideoLLaMA3-7B": (15.3, 14.7, 19.5, 22.2, 26.6, 20.8, 11.6, 5.1, 3.5, 6.7, 18.7, 20.8, 19.8, 9.8),
    "Qwen2.5-Omni-7B": (24.6, 27.5, 26.0, 32.7, 20.4, 26.7, 60.2, 0.4, 4.1, 21.6, 23.2, 36.0, 29.6, 15.3),
    "Phi-3.5-vision": (21.5, 18.3, 22.0, 21.8, 41.5, 25.9, 46.2, 1.2, 4.1, 17.2, 28.4, 26.7, 27.6, 4.3),
    "MiniCPM-O 2.6": (25.6, 20.3, 21.8, 20.1, 42.6, 26.2, 72.1, 2.9, 4.1, 26.4, 27.1, 35.7, 31.4, 9.0),
    "MiMo-7B": (28.3, 22.3, 30.6, 39.2, 32.8, 31.2, 54.6, 2.8, 11.6, 23.0, 25.8, 41.3, 33.6, 22.0),
    "Video-R1-7B": (21.6, 14.7, 23.0, 19.9, 16.3, 18.5, 77.3, 1.9, 1.5, 26.9, 19.4, 34.4, 26.9, 8.0),
    "GLM-4.1V-9B-Thinking": (35.1, 49.8, 39.9, 50.6, 38.6, 44.7, 50.2, 5.1, 14.1, 23.1, 36.7, 38.9, 37.8, 26.9),
    "Qwen2.5-VL-32B": (33.7, 31.4, 39.5, 48.6, 33.7, 38.3, 65.7, 5.1, 8.7, 26.5, 23.7, 39.6, 31.7, 41.2),
    "InternVL3-38B": (23.5, 15.9, 33.7, 33.6, 27.9, 27.8, 24.3, 4.5, 1.5, 10.1, 40.4, 36.8, 38.6, 16.2),
    "Qwen2.5-VL-72B": (34.4, 37.7, 38.5, 52.6, 39.6, 42.1, 61.8, 5.9, 20.0, 29.2, 20.9, 26.0, 23.5, 41.2),
    "InternVL3-78B": (25.8, 27.1, 29.4, 33.1, 42.7, 33.1, 37.5, 4.9, 4.4, 15.6, 22.9, 33.2, 28.1, 23.2),
    "LLaVA-Video-72B": (27.5, 26.5, 26.5, 34.0, 48.7, 33.9, 51.8, 3.2, 11.1, 22.0, 26.8, 29.0, 27.9, 17.8),
    "LLaVA-OV-72B": (27.5, 22.1, 23.3, 29.2, 37.0, 27.9, 74.1, 8.8, 5.0, 29.3, 25.9, 35.0, 30.5, 14.6),
}
COLUMNS = ("O.Avg", "BU", "NC", "CC", "PEA", "C.Avg", "PI", "FSA", "PSS", "T.Avg", "MSR", "MOC", "M.Avg", "CCQA")


def test_table2_has_22_models_and_the_human_row():
    assert len(TABLE2) == 23 and all(len(v) == len(COLUMNS) for v in TABLE2.values())


@pytest.mark.parametrize("model", list(TABLE2))
def test_table2_averages_follow_from_the_ten_task_columns(model):
    row = dict(zip(COLUMNS, TABLE2[model]))
    averages = cv.crossvid_averages({task: row[task] for task in cv.TASKS})
    for name in ("O.Avg", "C.Avg", "T.Avg", "M.Avg"):
        # task scores are printed to 0.1, so a re-derived mean can differ from the printed one by 0.05
        assert averages[name] == pytest.approx(row[name], abs=0.05 + 1e-9), (model, name, averages[name])


def test_lmms_eval_group_mean_gives_the_same_o_avg():
    from lmms_eval.api.metrics import aggregate_subtask_metrics

    row = dict(zip(COLUMNS, TABLE2["Gemini-2.5-Pro"]))
    task_scores = [row[t] for t in cv.TASKS]
    sizes = [100, 300, 250, 90, 400, 60, 120, 800, 700, 300]  # unequal sizes must not weigh (weight_by_size: false)
    assert aggregate_subtask_metrics(task_scores, sizes, False) == pytest.approx(cv.crossvid_averages(row)["O.Avg"])


def test_averages_accept_task_names_and_refuse_to_average_a_missing_task():
    scores_ = {f"crossvid_{t.lower()}_sample": 50.0 for t in cv.TASKS if t != "MOC"}
    averages = cv.crossvid_averages(scores_)
    assert averages["C.Avg"] == 50.0 and averages["T.Avg"] == 50.0
    assert averages["M.Avg"] != averages["M.Avg"] and averages["O.Avg"] != averages["O.Avg"]  # NaN


def test_group_yaml_averages_the_subgroups_unweighted():
    from lmms_eval_plugins.yaml_index import read_task_yamls

    config = next(e.config for e in read_task_yamls([cv.SAMPLE_DIR.parent], recursive=False) if e.name == "crossvid")
    subgroups = {g["group"]: g["task"] for g in config["task"] if isinstance(g, dict)}
    assert subgroups == {
        "crossvid_comparative": ["crossvid_bu", "crossvid_nc", "crossvid_cc", "crossvid_pea"],
        "crossvid_temporal": ["crossvid_pi", "crossvid_fsa", "crossvid_pss"],
        "crossvid_multiview": ["crossvid_msr", "crossvid_moc"],
    }
    for agg in [config, *[g for g in config["task"] if isinstance(g, dict)]]:
        # the index keeps the `!function` tag as text and imports nothing
        assert agg["aggregate_metric_list"] == [
            {"metric": "score", "aggregation": "!function utils.group_mean", "weight_by_size": False}
        ]
    text = (cv.SAMPLE_DIR.parent / "crossvid.yaml").read_text()
    assert text.count("aggregation: !function utils.group_mean") == 4
    # lmms-eval calls it as its own mean: (scores, sizes, weight_by_size); unweighted here
    assert cv.group_mean([50.0, 20.0, 80.0], [10, 1, 1], False) == 50.0
    assert cv.group_mean([50.0, 20.0, 80.0], [10, 1, 1], True) == (500 + 20 + 80) / 12
    assert cv.group_mean([50.0, None, 80.0], [1, 1, 1], False) is None  # a task with unscored samples
    assert cv.group_mean([2, 0, 3], [10, 1, 1], False) == 5  # `unscored` contains "score": counts are summed


def test_task_yamls_and_hooks_follow_the_one_task_declaration():
    """averages.DIMENSIONS is the one list of tasks and dimensions: the group YAMLs, the ten task YAMLs,
    their process_docs hooks, the spec's roles and tasks.HOOKS all agree with it."""
    import re

    from lmms_eval_plugins.benchmark import get as get_benchmark
    from lmms_eval_plugins.benchmarks.crossvid import tasks as hooks_module
    from lmms_eval_plugins.benchmarks.crossvid.averages import DIMENSIONS, FREE_FORM
    from lmms_eval_plugins.yaml_index import read_task_yamls

    assert cv.TASKS == ("BU", "NC", "CC", "PEA", "PI", "FSA", "PSS", "MSR", "MOC", "CCQA")  # the paper's order
    folder = cv.SAMPLE_DIR.parent
    entries = {e.name: e for e in read_task_yamls([folder], recursive=False)}
    for suffix in ("", "_sample"):
        config = entries[f"crossvid{suffix}"].config
        groups = [g for g in config["task"] if isinstance(g, dict)]
        assert {g["group"]: g["task"] for g in groups} == {
            f"crossvid_{d.role}{suffix}": [f"crossvid_{t.lower()}{suffix}" for t in d.tasks] for d in DIMENSIONS
        }
        assert [d.column in g["group_alias"] for d, g in zip(DIMENSIONS, groups)] == [True] * len(DIMENSIONS)
        assert [t for t in config["task"] if not isinstance(t, dict)] == [f"crossvid_{FREE_FORM.lower()}{suffix}"]
        for task in cv.TASKS:
            process_docs = entries[f"crossvid_{task.lower()}{suffix}"].config["process_docs"]
            assert process_docs == f"!function utils.process_docs_{task.lower()}"
    assert {n for n, e in entries.items() if e.kind == "task"} == {
        f"crossvid_{t.lower()}{s}" for t in cv.TASKS for s in ("", "_sample")
    }
    spec = get_benchmark("crossvid")
    assert spec.roles == (*(t.lower() for t in cv.TASKS), "comparative", "temporal", "multiview")
    # HOOKS is exactly what the YAMLs call, less the aggregations the spec supplies
    named = {
        hook
        for path in folder.iterdir()
        if path.is_file() and "yaml" in path.name
        for hook in re.findall(r"!function utils\.(\w+)", path.read_text(encoding="utf-8"))
    }
    aggregations = {m.hook for metrics in spec.metric_lists.values() for m in metrics}
    assert set(hooks_module.HOOKS) == named - aggregations


def test_process_docs_hooks_read_the_sample_beside_their_utils_py(tmp_path):
    rows = cv.process_docs_pss([{**SAMPLE}])  # utils.py's hook: bound to the bundled sample
    assert [r["task"] for r in rows] == ["PSS", "PSS"] and [r["id"] for r in rows] == ["0", "1"]
    # the same hook of the task code, given another sample folder, reads that one (no module state)
    from lmms_eval_plugins.benchmarks.crossvid import tasks as hooks_module

    folder = tmp_path / "sample_data"
    shutil.copytree(cv.SAMPLE_DIR, folder)
    qa = folder / "QA" / "PSS.json"
    qa.write_text(json.dumps(json.loads(qa.read_text())[:1]))
    assert [r["id"] for r in hooks_module.process_docs_pss([{**SAMPLE}], sample_dir=folder)] == ["0"]
    assert hooks_module.process_docs_pss.__name__ == "process_docs_pss"


def test_report_rows_use_the_papers_average_rule():
    """One CrossVid average: the report's columns are averages.crossvid_averages, so a dimension (and
    O.Avg) with a task missing or unscored is left out, never a mean over fewer tasks."""
    from types import SimpleNamespace

    from lmms_eval_plugins.benchmarks.crossvid.report import crossvid_row
    from lmms_eval_plugins.report.document import Entry

    row = dict(zip(COLUMNS, TABLE2["GPT-4.1"]))

    def entry(scores):
        tasks = {
            t.lower(): SimpleNamespace(task=f"crossvid_{t.lower()}", metrics={"score": v}) for t, v in scores.items()
        }
        return Entry(run=None, variant="", tasks=tasks, label="m")

    values, incomplete, notes = crossvid_row(entry({t: row[t] for t in cv.TASKS}))
    expected = cv.crossvid_averages({t: row[t] for t in cv.TASKS})
    assert {k: values[k] for k in expected} == expected and incomplete == set() and notes == []
    assert values["C.Avg"] == pytest.approx((46.2 + 34.6 + 58.5 + 51.2) / 4)  # by hand
    without_moc = {t: row[t] for t in cv.TASKS if t != "MOC"}
    values, incomplete, _ = crossvid_row(entry(without_moc))
    assert incomplete == {"M.Avg", "O.Avg"} and "M.Avg" not in values and "O.Avg" not in values
    assert values["T.Avg"] == pytest.approx((70.9 + 8.6 + 60.5) / 3)
    unscored = {**{t: row[t] for t in cv.TASKS}, "FSA": None}  # a task whose score is null (unscored samples)
    values, incomplete, _ = crossvid_row(entry(unscored))
    assert incomplete == {"T.Avg", "O.Avg"} and values["C.Avg"] == pytest.approx(expected["C.Avg"])


@pytest.mark.parametrize("run_name", ["oracle", "random"])
def test_stored_runs_rescore_to_their_stored_numbers(run_name):
    """The stored real lmms-eval runs (tests/data/report_runs) re-scored in process: each logged reply
    through process_results and the spec's aggregations (as utils.py hands them to lmms-eval) gives
    every metric lmms-eval stored for it. CCQA replays the logged judge outcome."""
    run = Path(__file__).parent / "data" / "report_runs" / run_name
    (results,) = run.glob("*_results.json")
    stored_results = json.loads(results.read_text())["results"]
    from lmms_eval_plugins.benchmark import get as get_benchmark

    compared = 0
    for task in cv.TASKS:
        name = f"crossvid_{task.lower()}_sample"
        (samples,) = run.glob(f"*_samples_{name}.jsonl")
        rows = {d["id"]: d for d in docs(task)}
        per_doc = []
        for line in samples.read_text().splitlines():
            sample = json.loads(line)
            doc = rows[sample["score"]["id"]]
            if task == "CCQA":  # the logged filtered reply is cut short; the logged item holds the outcome in full
                per_doc.append(cv.process_results_ccqa(doc, [[{"text": "", "judge": sample["score"]["judge"]}]]))
            else:
                per_doc.append(cv.process_results(doc, [sample["filtered_resps"]]))
        metrics = get_benchmark("crossvid").task_metrics(name)
        for key, value in stored_results[name].items():
            metric = key.split(",")[0]
            if metric in metrics and not metric.endswith("_stderr"):
                got = getattr(cv, metrics[metric].hook)([d[metric] for d in per_doc])
                assert got == pytest.approx(value, abs=1e-9), (name, metric)
                compared += 1
    assert compared >= 40  # score, score_strict and the counts of all ten tasks


# ----------------------------------------------------------------------------------------------- frame budgets


def test_budget_splits_by_hand():
    assert cv.frame_budgets("PEA", 128, [5, 5, 5]) == [42, 42, 42]  # total // n, as the official scripts
    assert cv.frame_budgets("NC", 128, [1, 1, 1, 1]) == [32] * 4
    assert cv.frame_budgets("FSA", 129, [1, 1]) == [64, 64]
    assert cv.frame_budgets("PI", 128, [3.0, 1.0]) == [96, 32]
    # 10 frames over 3.5 s, 4 s, 4 s: quotas 3.04, 3.48, 3.48 -> floors 3, 3, 3; the spare frame goes to
    # the largest remainder, the earlier one on a tie (the official allocate_frames)
    assert cv.frame_budgets("PSS", 10, [3.5, 4.0, 4.0]) == [3, 4, 3]


def test_sampled_frames_per_label_follow_the_budget():
    counts = {}
    for task in ("PEA", "PI", "PSS", "MSR"):
        doc = doc_for(task, 0)
        counts[task] = [len(s.frames) for s in cv.sample_frames(doc)]
    assert counts["PEA"] == [5, 5, 5]  # 16 // 3, remainder unused
    # beginning [0, 3], ending [9, 12] s of a 12-s, 48-frame video at 4 fps: 8 frames each asked. The ending's
    # times 9, 9.43, ..., 12 s map to frames int(4 t) = 36, 37, 39, 41, 42, 44, 46, 48; frame 48 is past the
    # last frame (47) and dropped, as the official interval sampler drops it
    assert counts["PI"] == [8, 7]
    # four 3-s segments of the 12-s video, 4 frames each asked; segment 3 is [9, 12] s: frames 36, 40, 44, 48, and
    # 48 is past the last frame (47)
    assert counts["PSS"] == [4, 4, 3, 4]
    # 8 per view asked from folders of 6 frames: linspace(0, 5, 8) cast to int = 0, 0, 1, 2, 2, 3, 4, 5, repeats
    # kept as the official process_frames keeps them
    assert counts["MSR"] == [8, 8]


def test_frames_are_sampled_inside_intervals_and_resized_down_only():
    from lmms_eval_plugins.synthetic import decode_frame_index

    doc = doc_for("PI", 1)  # beginning [[0, 2], [3, 4.5]], ending [[8, 12]] at 4 fps
    begin, end = cv.sample_frames(doc)
    shown = [decode_frame_index(f) for f in begin.frames]
    assert all(0 <= i <= 8 or 12 <= i <= 18 for i in shown) and any(i >= 12 for i in shown)
    assert all(32 <= decode_frame_index(f) <= 47 for f in end.frames)
    assert begin.frames[0].size == (96, 72)  # smaller than 360: never enlarged
    view_a, view_b = cv.sample_frames(doc_for("MSR", 0))
    assert {f.size for f in view_a.frames + view_b.frames} == {(360, 270)}  # 400x300 -> 360 long side


@pytest.mark.parametrize("task", cv.TASKS)
def test_the_text_plan_matches_the_decoded_frames(task):
    for doc in docs(task):
        plan, sampled = cv.plan_frames(doc), cv.sample_frames(doc)
        assert [p[0] for p in plan] == [len(s.frames) for s in sampled]
        assert [p[2] for p in plan] == [s.indices for s in sampled]
        for p, s in zip(plan, sampled):
            assert p[1] == pytest.approx(s.timestamps)
            assert p[3] == s.source_size


# ----------------------------------------------------------------------------------------------- prompts


def test_messages_interleave_labels_and_frames_after_the_system_prompt():
    messages = cv.doc_to_messages(doc_for("BU", 0))
    assert messages[0] == {"role": "system", "content": [{"type": "text", "text": "You are a helpful video analyzer."}]}
    content = messages[1]["content"]
    assert [c["type"] for c in content] == ["text", "video", "text", "video", "text", "video", "text"]
    assert content[0]["text"].startswith("\nProvide you several videos and a multiple-choice question with 1-3 correct")
    assert content[0]["text"].endswith(
        "Options:\nA. Video 1\nB. Video 2\nC. Video 3\nD. None of the videos\n\nInput frames:\nVideo 1:\n"
    )
    assert content[2]["text"] == "Video 2:\n" and content[4]["text"] == "Video 3:\n"
    assert content[6]["text"] == "\n\nYour answer:\n"
    assert all(len(c["url"]) == 5 for c in content if c["type"] == "video")  # 16 // 3


def test_messages_convert_for_the_openai_and_vllm_chat_classes():
    from lmms_eval.protocol import ChatMessages

    chat = ChatMessages(messages=cv.doc_to_messages(doc_for("NC", 0)))  # validates the lmms-eval schema
    system, user = chat.to_openai_messages(video_kwargs={"nframes": 4})
    assert system == {"role": "system", "content": [{"type": "text", "text": "You are a helpful video analyzer."}]}
    kinds = [c["type"] if c["type"] == "image_url" else c["text"][-9:] for c in user["content"]]
    assert kinds == [
        "Video 1:\n",
        *["image_url"] * 4,
        "Video 2:\n",
        *["image_url"] * 4,
        "Video 3:\n",
        *["image_url"] * 4,
        "Video 4:\n",
        *["image_url"] * 4,
        " answer:\n",
    ]
    hf = chat.to_hf_messages()  # the Qwen2.5-VL chat class's path
    assert [c["type"] for c in hf[1]["content"]].count("video") == 4


@pytest.mark.parametrize(
    "task, labels",
    [
        ("PI", ["Beginning:\n", "Ending:\n"]),
        ("PSS", ["Segment 1:\n", "Segment 2:\n", "Segment 3:\n", "Segment 4:\n"]),
        ("FSA", ["Video 1:\n", "\nVideo 2:\n"]),
        ("CCQA", ["Video A:\n", "\nVideo B:\n"]),
        ("MOC", ["View A:\n", "\nView B:\n"]),
    ],
)
def test_each_task_labels_its_videos_as_the_official_scripts(task, labels):
    content = cv.doc_to_messages(doc_for(task, 0))[1]["content"]
    texts = [content[i]["text"] for i in range(len(content) - 1) if content[i + 1]["type"] == "video"]
    assert [t[-len(label) :] for t, label in zip(texts, labels)] == labels and len(texts) == len(labels)


def test_fsa_prompt_lists_the_sampled_timestamps_in_whole_seconds():
    doc = doc_for("FSA", 1)  # ref [0.5, 2.0]; 6-s videos at 4 fps, 8 frames each
    text = cv.build_messages(doc, cv.sample_frames(doc))[1]["content"][0]["text"]
    # 24 frames: linspace(0, 23, 8) = 0, 3.29, 6.57, 9.86, 13.14, 16.43, 19.71, 23 -> frames 0, 3, 6, 9, 13,
    # 16, 19, 23 at 4 fps: 0, 0.75, 1.5, 2.25, 3.25, 4, 4.75, 5.75 s, truncated
    assert "equivalent to the step shown between 0.5s and 2.0s in Video 1?" in text
    assert "Timestamps of frames sampled from Video 1 are: [0, 0, 1, 2, 3, 4, 4, 5].\n" in text
    assert "Timestamps of frames sampled from Video 2 are: [0, 0, 1, 2, 3, 4, 4, 5].\n" in text


def test_simple_model_text_says_which_frames_belong_to_which_label():
    text = cv.doc_to_text(doc_for("PSS", 1))
    assert text.startswith("You are a helpful video analyzer.\n\nProvide you 3 shuffled segments of a cooking video")
    # 16 frames over 3.5 s (two pieces: 2 s + 1.5 s), 4 s, 4 s: quotas 4.87, 5.57, 5.57 -> 4, 5, 5 plus the
    # two spare frames to the largest remainders (4.87, then the first 5.57): 5, 6, 5. Segment 2 is [8, 12] s of a
    # 12-s, 48-frame video: times 8, 8.8, ..., 12 s -> frames 32, 35, 38, 41, 44, 48, and 48 is past the end: 5 frames
    assert (
        "Input frames:\nSegment 1: frames 1-5\nSegment 2: frames 6-10\nSegment 3: frames 11-15\n\nYour answer:" in text
    )
    assert len(cv.doc_to_visual(doc_for("PSS", 1))) == 15


def test_pi_prompt_has_no_question_and_braces_in_data_stay_literal():
    raw = json.loads((cv.SAMPLE_DIR / "QA" / "NC.json").read_text())[0]
    raw["question"] = "Which {OPTIONS} clip {QUESTION} shows it?"
    doc = cv.normalize_record("NC", raw, index=0, path=Path("QA/NC.json"))
    before, _after = cv._halves(cv.record_of(doc), doc["fields"])
    assert "Question:\nWhich {OPTIONS} clip {QUESTION} shows it?\n\nOptions:\nA. Video 1\n" in before
    pi = cv.doc_to_messages(doc_for("PI", 0))[1]["content"][0]["text"]
    assert "Question:" not in pi and pi.startswith("\nProvide you the beginning and the ending of a movie clip")


# ----------------------------------------------------------------------------------------------- rows and records


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _holds_json(text: str) -> bool:
    try:
        return text[:1] in "[{" and isinstance(json.loads(text), (list, dict))
    except ValueError:
        return False


@pytest.mark.parametrize("task", cv.TASKS)
def test_rows_are_arrow_lists_and_structs_of_one_declared_schema_never_json_text(task):
    rows = getattr(cv, f"process_docs_{task.lower()}")([SAMPLE])  # the hook lmms-eval calls
    assert rows.features == cv.row_features(task)
    assert [s for row in rows for s in _strings(row) if _holds_json(s)] == []
    for row in rows:
        # lmms-eval writes each doc into the samples JSONL: it stays plain JSON
        assert json.loads(json.dumps(row, ensure_ascii=False)) == row
        record = cv.record_of(row)
        assert isinstance(record, CrossVidRecord) and (record.task, record.id) == (task, row["id"])
        assert [m.path for m in record.media] == [m["path"] for m in row["media"]]


def test_record_of_gives_each_gold_shape_typed_by_hand():
    assert cv.record_of(doc_for("BU", 0)).gold == LetterSetGold(("A", "C"), "AC")
    assert cv.record_of(doc_for("NC", 0)).gold == ChoiceGold("C", "C")
    assert cv.record_of(doc_for("FSA", 0)).gold == IntervalGold((2.0, 4.5), (1.0, 3.0))
    assert cv.record_of(doc_for("PSS", 0)).gold == OrderGold((2, 4, 1, 3), "2->4->1->3")
    ccqa = cv.record_of(doc_for("CCQA", 0)).gold
    assert isinstance(ccqa, PointsGold) and ccqa.scoring_points == (
        "Video A dices the onion finely",
        "Video B slices the onion into thick rings",
    )
    pi = cv.record_of(doc_for("PI", 0))
    assert [g.label for g in pi.media] == ["Beginning", "Ending"] and all(g.intervals for g in pi.media)
    msr = cv.record_of(doc_for("MSR", 0))  # {B1} is track 3 of view B: boxes at frames 1 and 4 (sample_data.py)
    assert msr.objects[0].name == "obj_1" and msr.objects[0].track == "3"
    assert msr.objects[0].box_at(1) == Box(140.5, 110.0, 181.9, 150.2) and msr.objects[0].box_at(0) is None
    assert cv.record_of(msr) is msr


def test_fsa_reference_times_are_printed_as_the_record_writes_them():
    raw = {"id": 1, "video A": "a.mp4", "video B": "b.mp4", "ref_segment": [1, 3.0], "answer": [2, 4]}
    doc = cv.normalize_record("FSA", raw, index=0, path=Path("QA/FSA.json"))
    before, _after = cv._halves(cv.record_of(doc), {**doc["fields"], "TIME1": "", "TIME2": ""})
    assert "shown between 1s and 3.0s in Video 1" in before


def test_a_box_that_is_not_four_numbers_is_named_at_load(tmp_path):
    box_file = tmp_path / "7.json"
    box_file.write_text(json.dumps([{"id": 3, "bbox": {"1": {"xtl": 1, "ytl": 2, "xbr": 3}, "2": None}}]))
    doc = {
        "record": "CrossVid MSR id 0",
        "bbox_path": [{"view": "A", "path": str(box_file)}],
        "objects": [{"placeholder": "A1", "name": "obj_1", "view": "A", "ordinal": 1, "track": 3}],
    }
    with pytest.raises(DataError, match=r"a box of track 3 \({A1}\) of CrossVid MSR id 0 is not"):
        cv.attach_boxes([doc])


# ----------------------------------------------------------------------------------------------- MSR / MOC


def test_placeholders_from_question_and_options_get_names_in_order_of_appearance():
    question, options, refs = cv.resolve_placeholders(
        "In view B, which object is closer to {B1}?", ["A. {A2}", "B. {B2}", "C. {B1} again", "D. {x}"]
    )
    assert question == "In view B, which object is closer to obj_1?"
    assert options == ["A. obj_2", "B. obj_3", "C. obj_1 again", "D. {x}"]  # {x} is no placeholder
    assert [(r["placeholder"], r["name"], r["view"], r["ordinal"]) for r in refs] == [
        ("B1", "obj_1", "B", 1),
        ("A2", "obj_2", "A", 2),
        ("B2", "obj_3", "B", 2),
    ]


def test_msr_placeholder_only_in_an_option_gets_its_box_scaled_by_hand():
    doc = doc_for("MSR", 0)  # objects [3, 5]: {B1} -> track 3 in view B, {A2}/{B2} -> track 5 in views A/B
    text = cv.build_messages(doc, cv.sample_frames(doc))[1]["content"][0]["text"]
    assert "Question:\nIn view B, which object is closer to obj_1?\n\nOptions:\nA. obj_2\nB. obj_3\n" in text
    # frames are 400x300 -> 360x270: scale 0.9, truncated. View A track 5, position 0: (240.5, 90.7, 281.9, 130.9);
    # view B track 3 is first annotated at position 1, the 3rd of positions 0, 0, 1, ...: (140.5, 110, 181.9, 150.2);
    # view B track 5 at position 0: (191.4, 159.99, 232.8, 200.19)
    assert (
        "Objects information:\n"
        "obj_2 appears in 1st frame of view A with bbox [216, 81, 253, 117]\n"
        "obj_1 appears in 3rd frame of view B with bbox [126, 99, 163, 135]\n"
        "obj_3 appears in 1st frame of view B with bbox [172, 143, 209, 180]\n\n"
    ) in text
    assert cv.doc_to_text(doc).count("obj_3 appears in 1st frame of view B with bbox [172, 143, 209, 180]") == 1


def test_moc_object_never_visible_in_the_sampled_frames_is_said_so():
    doc = doc_for("MOC", 1)
    text = cv.doc_to_text(doc)
    assert "obj_1 does not appear in the sampled frames of view A\n" in text
    # position 3 is the 6th of the sampled positions 0, 0, 1, 2, 2, 3, 4, 5
    assert "obj_2 appears in 6th frame of view B with bbox [306, 189, 343, 225]" in text


def test_boxes_are_looked_up_by_sampled_position_with_a_small_budget(tmp_path):
    folder = make_frame_folder(tmp_path / "f", num_frames=6, width=720, height=480, start_number=1)
    files = cv.frame_files(folder)
    positions = cv.uniform_indices(len(files), 3)
    assert positions == [1, 3, 5]  # bin centres of 6 frames in 3 bins
    refs = [
        obj(
            "obj_1",
            "A",
            {"0": {"xtl": 10, "ytl": 10, "xbr": 20, "ybr": 20}, "3": {"xtl": 100, "ytl": 50.5, "xbr": 719, "ybr": 479}},
        ),
        obj("obj_2", "A", {"2": {"xtl": 1, "ytl": 1, "xbr": 2, "ybr": 2}}),
    ]
    scale = cv.box_scale((720, 480), 360)
    assert scale == 0.5
    # obj_1: position 0 is not sampled; position 3 is the 2nd sampled frame. obj_2: position 2 is never sampled.
    assert cv.object_lines(refs, {"A": positions}, {"A": scale}) == [
        "obj_1 appears in 2nd frame of view A with bbox [50, 25, 359, 239]",
        "obj_2 does not appear in the sampled frames of view A",
    ]
    assert [cv.ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111)] == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "12th",
        "13th",
        "21st",
        "22nd",
        "23rd",
        "101st",
        "111th",
    ]


# ----------------------------------------------------------------------------------------------- records and media


def _local_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "data" / "crossvid"
    shutil.copytree(cv.SAMPLE_DIR, folder)
    return folder


def test_local_data_root_is_read(tmp_path, monkeypatch):
    folder = _local_copy(tmp_path)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path / "data"))
    rows = cv.load_docs({"benchmark": "crossvid", "source": "auto"}, "CC")
    assert len(rows) == 2 and rows[0]["budget"] == 128 and rows[0]["max_long_side"] == 360
    assert all(m["path"].startswith(str(folder.resolve())) for m in rows[0]["media"])


def test_missing_video_names_the_record_and_the_file(tmp_path, monkeypatch):
    folder = _local_copy(tmp_path)
    (folder / "videos" / "behavior" / "bh1.mp4").unlink()
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path / "data"))
    with pytest.raises(MediaError) as info:
        cv.load_docs({"benchmark": "crossvid", "source": "auto"}, "BU")
    message = str(info.value)
    assert "video for Video 1 not found" in message and "record: CrossVid BU id 0" in message
    assert str(folder.resolve() / "videos" / "behavior" / "bh1.mp4") in message
    assert "LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA=1" in message and "Charades" in message


def test_missing_uav_media_name_the_record_and_the_file(tmp_path, monkeypatch):
    folder = _local_copy(tmp_path)
    (folder / "uav" / "bbox" / "2" / "9.json").unlink()
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path / "data"))
    with pytest.raises(MediaError, match=r"bounding-box file of view B not found \| record: CrossVid MOC id 0"):
        cv.load_docs({"benchmark": "crossvid", "source": "auto"}, "MOC")
    shutil.rmtree(folder / "uav" / "frames" / "1" / "7-1")
    with pytest.raises(MediaError, match="UAV frame folder for View A not found .* record: CrossVid MSR id 0"):
        cv.load_docs({"benchmark": "crossvid", "source": "auto"}, "MSR")


def test_missing_media_can_be_skipped_and_are_reported(tmp_path, monkeypatch):
    folder = _local_copy(tmp_path)
    (folder / "videos" / "behavior" / "bh1.mp4").unlink()
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path / "data"))
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA", "1")
    rows = cv.load_docs({"benchmark": "crossvid", "source": "auto"}, "BU")
    assert [r["id"] for r in rows] == ["1"] and rows[0]["n_skipped"] == 1
    assert aggregate([(rows[0], "BD")])["skipped"] == 1


@pytest.mark.parametrize(
    "task, field, value, message",
    [
        ("NC", "answer", "E", "not one of the option letters ABCD"),
        ("BU", "answer", ["A", "A"], "distinct option letters"),
        ("PSS", "answer", "1->2->2->4", "not an order of the 4 segments (repeats 2; missing 3)"),
        ("FSA", "answer", [3], "must be [start, end]"),
        ("PI", "ending", "end", "'ending' must be [start, end]"),
        ("MSR", "objects", [{"id": 3}], "refers to object 2, but the record lists 1 object"),
    ],
)
def test_malformed_records_name_the_record(task, field, value, message):
    raw = json.loads((cv.SAMPLE_DIR / "QA" / f"{task}.json").read_text())[0]
    with pytest.raises(DataError) as info:
        cv.normalize_record(task, {**raw, field: value}, index=0, path=Path(f"QA/{task}.json"))
    assert message in str(info.value) and f"CrossVid {task} id 0" in str(info.value)


def test_paths_may_not_escape_the_benchmark_folder(tmp_path):
    raw = json.loads((cv.SAMPLE_DIR / "QA" / "CC.json").read_text())[0]
    doc = cv.normalize_record("CC", {**raw, "videos": ["../../../etc/passwd"] * 4}, index=0, path=Path("QA/CC.json"))
    with pytest.raises(DataError, match="escapes the benchmark folder"):
        cv.attach_paths(doc, tmp_path)


def test_source_options_are_checked():
    with pytest.raises(DataError, match="'frames'"):
        cv.load_docs({**SAMPLE, "frames": 0}, "NC")
    with pytest.raises(DataError, match="'strict'"):
        cv.load_docs({**SAMPLE, "strict": "yes"}, "NC")


def test_oracle_and_chance_replies():
    assert doc_for("BU", 0)["oracle_response"] == "AC" and doc_for("FSA", 1)["oracle_response"] == "3.25,5.5"
    assert len(doc_for("BU", 0)["chance_responses"]) == 4 + 6 + 4  # sets of 1-3 of A-D
    assert len(doc_for("PSS", 0)["chance_responses"]) == 24 and "2->4->1->3" in doc_for("PSS", 0)["chance_responses"]
    assert doc_for("FSA", 0)["chance_responses"] == ["1,3"]  # the reference segment's own timestamps
    assert doc_for("MSR", 0)["chance_responses"] == ["A", "B", "C", "D"]


# ----------------------------------------------------------------------------------------------- sample data


def test_sample_covers_every_task_and_stays_small():
    assert sorted(p.stem for p in (cv.SAMPLE_DIR / "QA").glob("*.json")) == sorted(cv.TASKS)
    assert sum(p.stat().st_size for p in cv.SAMPLE_DIR.rglob("*") if p.is_file()) < 2_000_000


def test_sample_data_regenerates_byte_for_byte(tmp_path):
    make_crossvid(tmp_path)

    def differences(a: Path, b: Path) -> list[str]:
        cmp = filecmp.dircmp(a, b)
        _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
        found = [str(a / n) for n in cmp.left_only + cmp.right_only + mismatch + errors]
        return found + [d for sub in cmp.common_dirs for d in differences(a / sub, b / sub)]

    assert differences(tmp_path, cv.SAMPLE_DIR) == []


def test_a_budget_below_one_frame_per_video_names_the_record():
    doc = doc_for("NC", 0, frames=3)  # 3 // 4 = 0 frames a video
    for build in (cv.doc_to_messages, cv.doc_to_text):
        with pytest.raises(MediaError, match="no frame could be sampled for Video 1 .* record: CrossVid NC id 0"):
            build(doc)


def test_strict_env_makes_score_the_official_exact_string_score(monkeypatch):
    # `lmms-eval-plugins score --strict` sets LMMS_EVAL_PLUGINS_STRICT=1 for the replayed run
    assert cv._options({})["strict"] is False
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_STRICT", "1")
    assert cv._options({})["strict"] is True
    doc = doc_for("PI", 0)  # gold B, as in the letter-task test above
    assert doc["strict"] is True
    item = cv.score_response(doc, "Answer: B")  # robust reads it, the official exact-string check does not
    assert (item["robust"], item["strict"], item["score"]) == (1.0, 0.0, 0.0)


def test_duplicate_question_ids_in_a_task_file_are_a_data_error(tmp_path, monkeypatch):
    folder = _local_copy(tmp_path)
    qa = folder / "QA" / "BU.json"
    records = json.loads(qa.read_text(encoding="utf-8"))
    records[1]["id"] = records[0]["id"]
    qa.write_text(json.dumps(records), encoding="utf-8")
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path / "data"))
    with pytest.raises(DataError) as info:
        cv.load_docs({"benchmark": "crossvid", "source": "auto"}, "BU")
    message = str(info.value)
    assert f"id {str(records[0]['id'])!r} is used twice (record 0 and record 1)" in message and str(qa) in message


# ----------------------------------------------------------------------------------------------- official parity


def test_official_allocation_by_hand():
    # quotas 10 * 3/6, 10 * 2/6, 10 * 1/6 = 5, 3.33, 1.67 -> floors 5, 3, 1; the spare frame to .67
    assert cv.official_allocation([3.0, 2.0, 1.0], 10) == [5, 3, 2]
    assert cv.official_allocation([3.5, 4.0, 4.0], 10) == [3, 4, 3]  # a tie: the earlier group
    assert cv.official_allocation([0.1, 9.9], 4) == [0, 4]  # quotas .04, 3.96: no frame promised
    assert cv.official_allocation([0.0, 0.0], 4) == [0, 0]
    # the official rule leaves the short group without a frame; the centre rule gives it one from the largest
    assert cv.frame_budgets("PSS", 4, [0.1, 9.9]) == [0, 4]
    assert cv.frame_budgets("PSS", 4, [0.1, 9.9], "centre") == [1, 3]
    assert cv.frame_budgets("PI", 128, [3.0, 1.0]) == [96, 32]
    assert cv.frame_budgets("BU", 128, [1.0, 1.0, 1.0]) == [42, 42, 42]


def test_the_centre_rule_stays_behind_the_source_option():
    doc = doc_for("FSA", 1, index_rule="centre")  # bin centres of 24 frames in 8 bins: 1, 4, 7, ..., 22
    text = cv.build_messages(doc, cv.sample_frames(doc))[1]["content"][0]["text"]
    assert "Timestamps of frames sampled from Video 1 are: [0, 1, 1, 2, 3, 4, 4, 5].\n" in text
    assert [len(s.frames) for s in cv.sample_frames(doc_for("PI", 0, index_rule="centre"))] == [8, 8]
    with pytest.raises(DataError, match="'index_rule' must be one of centre, linspace"):
        cv._options({"index_rule": "middle"})


@pytest.mark.parametrize("task", ["PI", "PSS", "PEA", "MOC"])
def test_both_rules_plan_exactly_the_decoded_frames(task):
    for doc in docs(task, index_rule="centre") + docs(task):
        plan, sampled = cv.plan_frames(doc), cv.sample_frames(doc)
        assert [p[2] for p in plan] == [s.indices for s in sampled]


def test_pea_intervals_follow_the_official_time_linspace():
    from lmms_eval_plugins.synthetic import decode_frame_index

    doc = doc_for("PEA", 0)
    groups = doc["media"]
    for group, sampled in zip(groups, cv.sample_frames(doc)):
        ((start, end),) = group["intervals"]
        # 5 frames over [start, end] s at 4 fps: times start + j (end - start) / 4, frame int(4 t)
        expected = sorted({int((start + j * (end - start) / 4) * 4) for j in range(5)} - {32})  # 8-s videos: 32 frames
        assert sampled.indices == expected == [decode_frame_index(f) for f in sampled.frames]


def test_placeholders_are_named_as_the_official_script_names_them():
    # the i-th placeholder of the question is obj_i; a repeated one keeps its last number
    question, options, refs = cv.resolve_placeholders("Is {A1} left of {B1}, and is {A1} moving?", ["A. {B2}", "B. no"])
    assert question == "Is obj_3 left of obj_2, and is obj_3 moving?" and options == ["A. obj_4", "B. no"]
    assert [(r["placeholder"], r["name"]) for r in refs] == [("A1", "obj_3"), ("B1", "obj_2"), ("B2", "obj_4")]
    assert [cv.official_ordinal(n) for n in (1, 2, 3, 4, 11, 21, 22, 23)] == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "21th",
        "22th",
        "23th",
    ]


@pytest.mark.parametrize(
    "question, options, problem",
    [
        (
            "Which is closer to {B1}?",
            ["A. {A2}", "B. {B1}"],
            "placeholder {A2} appears in option 1 but not in the question",
        ),
        ("Which is closer to {B1}?", ["A. {B1}", "B. none"], None),
        ("Which is closer to {C1}?", ["A. x"], "the question's {C1} is not a placeholder {A1}..{B5}"),
        ("Which is closer to {B1}?", ["A. {}"], "option 1 does not format (IndexError"),
        ("Which is closer to {B1}?", ["A. {{literal}}"], None),
    ],
)
def test_official_text_problems(question, options, problem):
    found = cv.official_text_problem(question, options)
    assert (found is None) if problem is None else found.startswith(problem)


def test_records_the_official_script_drops_are_kept_and_counted_or_dropped_in_strict_mode():
    msr, moc = docs("MSR"), docs("MOC")
    # MSR 0: {A2} and {B2} only in the options; MOC 1: {A1} (track 4) is boxed in no sampled frame of view A
    assert [d["official_drop"] for d in msr] == ["placeholder {A2} appears in option 1 but not in the question", ""]
    assert [d["official_drop"] for d in moc] == ["", "obj_1 annotated in none of the sampled frames of its view"]
    assert "obj_1 does not appear in the sampled frames of view A" in cv.doc_to_text(moc[1])
    kept = aggregate([(d, d["oracle_response"]) for d in msr])
    assert (
        kept["official_dropped"] == 1
        and kept["score"] == 100.0
        and "official_dropped" not in aggregate([(d, d["oracle_response"]) for d in docs("PI")])
    )
    strict = docs("MSR", strict=True)
    assert [d["id"] for d in strict] == ["1"] and [d["id"] for d in docs("MOC", strict=True)] == ["0"]
    assert aggregate([(d, d["oracle_response"]) for d in strict])["official_dropped"] == 1
    item = cv.score_response(msr[0], "B")
    assert item["official_drop"].startswith("placeholder {A2}") and item["n_official_dropped"] == 1


def test_an_object_is_absent_only_when_no_sampled_position_has_its_box():
    refs = [
        obj("obj_1", "A", {"3": {"xtl": 1, "ytl": 1, "xbr": 2, "ybr": 2}}),
        obj("obj_2", "B", {"3": None, "4": {"xtl": 1, "ytl": 1, "xbr": 2, "ybr": 2}}),
    ]
    assert cv.absent_objects(refs, {"A": [0, 3], "B": [0, 3]}) == ["obj_2"]  # a null box is no box
    assert cv.absent_objects(refs, {"A": [0, 2], "B": [4]}) == ["obj_1"]


# ----------------------------------------------------------------------------------------------- CCQA strict

TWO_BLOCKS = (
    '<score>{"coverage": [true, false], "correctness": [true, false]}</score>\n'
    'On reflection: <score>{"coverage": [true, true], "correctness": [true, true]}</score>'
)


def test_ccqa_strict_mode_reads_the_first_score_block_as_the_official_scorer():
    from lmms_eval_plugins.judges.base import ReplyParseError
    from lmms_eval_plugins.judges.rubric import RubricJudge, parse_rubric_reply

    default_doc, strict_doc = doc_for("CCQA", 0), doc_for("CCQA", 0, strict=True)
    n = len(default_doc["scoring_points"])
    assert cv.judge_item("x", default_doc).extra == {} and cv.judge_item("x", strict_doc).extra == {
        "score_block": "first"
    }
    judge = RubricJudge()
    reply = TWO_BLOCKS.replace("true, false]", ", ".join(["true"] + ["false"] * (n - 1)) + "]").replace(
        "true, true]", ", ".join(["true"] * n) + "]"
    )
    with pytest.raises(ReplyParseError, match="exactly one"):
        judge.parse_reply(reply, cv.judge_item("x", default_doc))  # the default refuses to choose
    verdict = judge.parse_reply(reply, cv.judge_item("x", strict_doc))
    assert verdict.detail["coverage"] == [1] + [0] * (n - 1) and verdict.score == pytest.approx(2 / (2 * n))
    assert parse_rubric_reply(TWO_BLOCKS, 2, first_block=True) == ([1, 0], [1, 0])
    # the first block is not JSON (single quotes): the official json.loads fails, even with a good second block
    lenient = "<score>{'coverage': [true, true], 'correctness': [true, true]}</score>" + TWO_BLOCKS
    with pytest.raises(ReplyParseError, match="not JSON"):
        parse_rubric_reply(lenient, 2, first_block=True)
    with pytest.raises(ReplyParseError):
        parse_rubric_reply(lenient, 2)
    trailing = '<score>{"coverage": [true, true], "correctness": [true, false],}</score>'
    with pytest.raises(ReplyParseError, match="not JSON"):
        parse_rubric_reply(trailing, 2, first_block=True)
    # extra keys are ignored there; the tags must be lowercase, as the official regular expression
    extra = '<score>{"coverage": [false, true], "correctness": [false, true], "notes": "ok"}</score>'
    assert parse_rubric_reply(extra, 2, first_block=True) == ([0, 1], [0, 1])
    with pytest.raises(ReplyParseError, match="no <score>"):
        parse_rubric_reply(extra.replace("score>", "SCORE>"), 2, first_block=True)
    with pytest.raises(ReplyParseError, match="no <score>"):  # opening tags without a closing one
        parse_rubric_reply("<score>" * 100_000, 2, first_block=True)


def test_a_stray_non_image_file_the_official_script_samples_drops_the_record_in_strict_mode(tmp_path):
    # issue 37 case 5: the official MSR/MOC code samples sorted(os.listdir(folder)); a stray file sorting last
    # is at the last sampled position (linspace always takes it), cv2.imread fails, and the record is dropped.
    # Default mode keeps and scores it (only image files are frames); strict mode drops and counts it.
    folder = tmp_path / "crossvid"
    shutil.copytree(cv.SAMPLE_DIR, folder)

    def load(**spec) -> list[dict]:
        return list(
            to_dataset(cv.load_docs({**SAMPLE, **spec}, "MSR", sample_dir=folder), features=cv.row_features("MSR"))
        )

    assert [d["official_drop"] == "" for d in load()] == [False, True]  # MSR 0: its placeholder (above)
    view_a = load()[1]["media"][0]["rel"]
    (folder / view_a / "zz_notes.txt").write_text("not a frame\n", encoding="utf-8")
    default = load()
    assert (
        default[1]["official_drop"] == "zz_notes.txt in view A is no image, at a position the official script samples"
    )
    assert {d["n_official_dropped"] for d in default} == {2} and [d["id"] for d in default] == ["0", "1"]
    assert aggregate([(d, d["oracle_response"]) for d in default])["score"] == 100.0  # kept and scored by default
    assert load(strict=True) == []  # both dropped, as the official script drops them


def test_one_process_docs_hook_per_task_each_bound_by_name():
    # the hooks are written out one per task (utils.py binds each by name: "go to definition" works)
    from lmms_eval_plugins.benchmarks.crossvid import tasks
    from lmms_eval_plugins.benchmarks.crossvid.averages import TASKS

    assert list(tasks.PROCESS_DOCS) == [f"process_docs_{t.lower()}" for t in TASKS]
    assert all(getattr(tasks, name) is hook for name, hook in tasks.PROCESS_DOCS.items())
    assert all(hook.__name__ == name for name, hook in tasks.PROCESS_DOCS.items())
