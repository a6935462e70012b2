"""Parity with MMErroR's official evaluation code (repository code-here-in/MMerroR-Evaluation, commit b5fc9f8).

tests/data/parity/mmerror_official.jsonl holds what the official code returned, run unmodified outside
this repository (none of its code is copied here); ``source`` on each row names the official file and
function; tests/data/parity/make_mmerror_official.py regenerates it from a checkout of the official
code. Three kinds of row:
- ``reply``: ``family`` etc / epd_type (``normalize_label(reply, build_label_spec("etc"),
  is_prediction=True)``, as a letter) or epd_presence (``normalize_presence_decision``) -> ``official``.
  The replies: the answer corpus (tests/data/answer_corpus/mmerror.jsonl), every letter in 70 wrappings
  (markdown, boxes, answer lines, think tags, full-width forms, two answers), label names, stage-1
  words, and seeded random strings of the pieces the parsers look for.
- ``gold_label``: ``normalize_label(label, spec, is_prediction=False)`` with the ETC and the EPD spec.
- ``report``: a small run, ``samples`` = [gold letter, reply (ETC) or stage-1 and stage-2 replies (EPD),
  domain], through the official runner (a provider returning those replies, no retries: at temperature
  0 a retry returns the same reply) and ``compute_model_metrics`` (fractions, not percent).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from loguru import logger

from lmms_eval_plugins.benchmarks.mmerror.official import (
    OfficialReport,
    official_gold_letter,
    official_report,
)
from lmms_eval_plugins.data import read_jsonl
from lmms_eval_plugins.errors import DataError
from testkit.task_utils import load_task_utils

mm = load_task_utils("mmerror")
DATA = Path(__file__).parent / "data" / "parity" / "mmerror_official.jsonl"
ROWS = read_jsonl(DATA)
REPLIES = [r for r in ROWS if r["kind"] == "reply"]
GOLD = [r for r in ROWS if r["kind"] == "gold_label"]
RUNS = [r for r in ROWS if r["kind"] == "report"]
SOURCES = {
    "reply": ("mmerror_eval/labels.py:normalize_label", "mmerror_eval/labels.py:normalize_presence_decision"),
    "gold_label": ("mmerror_eval/labels.py:normalize_label",),
    "report": (
        "mmerror_eval/runner.py:_evaluate_record_etc, mmerror_eval/reporting.py:compute_model_metrics",
        "mmerror_eval/runner.py:_evaluate_record_epd, mmerror_eval/reporting.py:compute_model_metrics",
    ),
}


def test_the_parity_data_is_large_and_names_its_official_source():
    assert len({r["id"] for r in ROWS}) == len(ROWS)
    counts = Counter(r["family"] for r in REPLIES)
    assert sum(counts.values()) >= 400 and min(counts.values()) >= 100, counts
    assert len(GOLD) >= 40 and Counter(r["task"] for r in RUNS) == Counter(etc=16, epd=14)
    for r in ROWS:
        assert r["source"] in SOURCES[r["kind"]], r["id"]
    presence = SOURCES["reply"][1]
    assert all((r["source"] == presence) == (r["family"] == "epd_presence") for r in REPLIES)
    # the parsers' outcomes are all represented: read, unread, each letter
    assert {r["official"] for r in REPLIES} == {None, *"ABCDPN"}


def _our_reading(row: dict) -> str | None:
    return (mm.official_presence if row["family"] == "epd_presence" else mm.official_type)(row["reply"])


@pytest.mark.parametrize("family", ["etc", "epd_type", "epd_presence"])
def test_the_official_parsers_agree_with_the_official_code_on_every_reply(family):
    rows = [r for r in REPLIES if r["family"] == family]
    wrong = [
        f"{r['id']}: {r['reply']!r} -> {_our_reading(r)}, official {r['official']}"
        for r in rows
        if _our_reading(r) != r["official"]
    ]
    assert not wrong, "\n".join(wrong)


def test_gold_labels_are_read_as_the_official_code_reads_them():
    wrong = [
        r["id"]
        for r in GOLD
        if (official_gold_letter(r["label"], "ABCD"), official_gold_letter(r["label"]))
        != (r["official_etc"], r["official_epd"])
    ]
    assert not wrong
    by_label = {r["label"]: r["official_epd"] for r in GOLD}  # the issue's three spellings
    assert (by_label["Visual Reasoning Error"], by_label["Reasoning about the question"], by_label["b"]) == (
        "A",
        "B",
        "B",
    )
    # loading uses the EPD reading (the one that knows E); a label the official code reads as no class is refused
    assert all(mm.label_letter(r["label"]) == r["official_epd"] for r in GOLD)


def _record(question_id: str, label: str) -> dict:
    return {
        "question_id": question_id,
        "question": "Q?",
        "correct_answer": "1",
        "error_reason": "Step 1: r.",
        "label": label,
        "domain": "M",
        "subdomain": "s",
    }


def _loaded(question_id: str, label: str) -> dict:
    """A record as the loader hands it to etc_docs/epd_docs (with its label's spelling and its files)."""
    return {
        **_record(question_id, label),
        "label_raw": label,
        "json_path": f"{question_id}.json",
        "image_path": f"{question_id}.png",
    }


def test_the_official_spellings_load_and_a_label_naming_two_classes_is_logged(tmp_path):
    import json
    import shutil

    folder = tmp_path / "mmerror"
    (folder / "data" / "jsons").mkdir(parents=True)
    (folder / "data" / "images").mkdir(parents=True)
    png = next((mm.SAMPLE_DIR / "data" / "images").glob("*.png"))
    labels = ["Visual Reasoning Error", "Reasoning about the question", "b", "E_NoError"]
    for i, label in enumerate(labels, 1):
        qid = f"MMErroR_{i:05d}"
        (folder / "data" / "jsons" / f"{qid}.json").write_text(json.dumps(_record(qid, label)), encoding="utf-8")
        shutil.copy(png, folder / "data" / "images" / f"{qid}.png")
    messages: list[str] = []
    sink = logger.add(lambda m: messages.append(str(m)), level="WARNING")
    try:
        records = mm.load_records(
            mm.resolve_source("mmerror", "sample", sample_dir=folder, hub_repo=None, local_layout="")
        )
    finally:
        logger.remove(sink)
    assert [r["label"] for r in records] == [mm.LABELS[c] for c in "ABBE"]
    assert [r["label_raw"] for r in records] == labels
    [warning] = [m for m in messages if "name several classes" in m]
    assert "MMErroR_00001.json 'Visual Reasoning Error' -> A_Visual_Perception_Error" in warning
    assert "MMErroR_00002.json 'Reasoning about the question' -> B_Reasoning_Error" in warning
    assert "MMErroR_00003" not in warning  # "b" names one class
    # ETC asks the three erroneous records and carries the left-out E_NoError count for the official denominator
    docs = mm.etc_docs(records)
    assert len(docs) == 3 and {d[mm.OFFICIAL_NOT_ASKED_FIELD] for d in docs} == {1}


def test_official_report_by_hand():
    # the issue's case: three right answers plus one E_NoError record, which the official ETC never asks
    assert official_report([(True, True)] * 3, not_asked=1) == OfficialReport(4, 3, 3, 100.0, 75.0)
    # nothing parsed: the official report says 0.0 (it never divides by zero), not NaN
    assert official_report([(False, False)] * 2) == OfficialReport(2, 0, 0, 0.0, 0.0)
    assert official_report([]) == OfficialReport(0, 0, 0, 0.0, 0.0)
    # 1 right, 1 wrong, 1 unread, 1 not asked: 1/2 read, 1/4 all
    assert official_report([(True, True), (True, False), (False, False)], not_asked=1) == OfficialReport(
        4, 2, 1, 50.0, 25.0
    )
    assert official_report([(False, True)]).correct == 0  # an unread reply is never right
    with pytest.raises(ValueError, match="not_asked"):
        official_report([], not_asked=-1)


def _records(samples: list[list[str]]) -> list[dict]:
    return [{**_loaded(f"q{i}", mm.LABELS[s[0]]), "domain": s[-1]} for i, s in enumerate(samples)]


def _etc_run(samples: list[list[str]]) -> tuple[list[dict], int]:
    """The per-sample items of ETC through the task's own hooks, and the official not-asked count."""
    docs = mm.etc_docs(_records(samples))
    replies = {f"q{i}": s[1] for i, s in enumerate(samples)}
    items = [mm.process_results_etc(d, [replies[d["question_id"]]])["official_strict_accuracy"] for d in docs]
    return items, docs[0][mm.OFFICIAL_NOT_ASKED_FIELD]


def _epd_items(samples: list[list[str]]) -> list[dict]:
    docs = mm.epd_docs(_records(samples))
    replies = {
        (f"q{i}", stage): reply for i, s in enumerate(samples) for stage, reply in zip(("presence", "type"), s[1:3])
    }
    return [
        mm.process_results_epd(d, [replies[(d["question_id"], d["stage"])]])["official_strict_accuracy"] for d in docs
    ]


def _ours(run: dict) -> OfficialReport:
    if run["task"] == "etc":
        items, not_asked = _etc_run(run["samples"])
        return official_report(
            [(i["official_pred"] is not None, bool(i["official_correct"])) for i in items], not_asked=not_asked
        )
    outcomes, incomplete = mm.replay_epd(_epd_items(run["samples"]), official=True)
    assert incomplete == 0
    return official_report([(o["pred"] is not None, bool(o["correct"])) for o in outcomes])


def _official(run: dict) -> OfficialReport:
    o = run["official"]
    return OfficialReport(
        o["dataset_total"], o["scored_total"], o["correct"], 100 * o["accuracy"], 100 * o["strict_accuracy"]
    )


@pytest.mark.parametrize("run", RUNS, ids=[r["id"] for r in RUNS])
def test_each_official_run_is_reproduced(run):
    if run["task"] == "etc" and all(s[0] == "E" for s in run["samples"]):
        # decision: ETC with only E_NoError records has nothing to ask and is refused by name (the official
        # report prints 0.0 for it)
        assert run["official"]["scored_total"] == 0
        with pytest.raises(DataError, match="ETC has nothing to ask"):
            _etc_run(run["samples"])
        return
    ours, official = _ours(run), _official(run)
    assert ours.dataset_total == official.dataset_total and ours.scored_total == official.scored_total
    assert ours.correct == official.correct
    assert ours.accuracy == pytest.approx(official.accuracy) and ours.strict_accuracy == pytest.approx(
        official.strict_accuracy
    )


def test_the_runs_cover_the_issue_cases():
    first = _official(RUNS[0])
    assert RUNS[0]["samples"][3][0] == "E" and (first.accuracy, first.strict_accuracy) == (100.0, 75.0)
    assert any(r["official"]["scored_total"] == 0 < r["official"]["dataset_total"] for r in RUNS if r["task"] == "etc")
    assert any(r["official"]["scored_total"] == 0 < r["official"]["dataset_total"] for r in RUNS if r["task"] == "epd")


def test_the_task_aggregations_give_the_official_numbers():
    wrong = []
    for run in RUNS:
        if run["task"] == "etc" and all(s[0] == "E" for s in run["samples"]):
            continue
        items = _etc_run(run["samples"])[0] if run["task"] == "etc" else _epd_items(run["samples"])
        official = _official(run)
        got = (mm.agg_official_accuracy(items), mm.agg_official_strict_accuracy(items))
        if got != pytest.approx((official.accuracy, official.strict_accuracy)):
            wrong.append(f"{run['id']}: {got} vs {official.accuracy, official.strict_accuracy}")
    assert not wrong, "\n".join(wrong)
