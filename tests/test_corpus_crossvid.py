"""CrossVid answer-format corpus: replies as real VLMs write them, through the robust and the strict scoring.

``tests/data/answer_corpus/crossvid.jsonl``, one reply a line: ``task``, ``model_style``, ``reply``,
``robust`` (the answer the robust parser must read, or null where none may be read), ``strict`` (the
official scripts' result: for the letter, letter-set and order tasks whether the raw reply equals the
gold string; for FSA the pair of ``float()`` of ``reply.split(",")``, or null), ``note``. Each reply is
scored against the gold of the bundled sample doc 0 of its task (NC C, CC B, PEA B, PI B, MSR B, MOC C,
BU AC, PSS 2->4->1->3, FSA [2, 4.5]).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from testkit.task_utils import load_task_utils

from lmms_eval_plugins.data import read_jsonl, to_dataset
from lmms_eval_plugins.metrics import interval_iou

cv = load_task_utils("crossvid")
CORPUS = Path(__file__).parent / "data" / "answer_corpus" / "crossvid.jsonl"
LINES = read_jsonl(CORPUS)
FAMILIES = {"letter": {"NC", "CC", "PEA", "PI", "MSR", "MOC"}, "set": {"BU"}, "order": {"PSS"}, "interval": {"FSA"}}
_DOCS: dict[str, dict] = {}


def doc(task: str) -> dict:
    if task not in _DOCS:
        rows = to_dataset(
            cv.load_docs({"benchmark": "crossvid", "source": "sample", "frames": 16}, task),
            features=cv.row_features(task),
        )
        _DOCS[task] = rows[0]  # as lmms-eval holds it: an Arrow row
    return _DOCS[task]


def robust_ok(line: dict) -> bool:
    return cv.score_response(doc(line["task"]), line["reply"])["pred"] == line["robust"]


def test_the_corpus_is_big_enough_and_well_formed():
    assert len(LINES) >= 40
    assert len({line["id"] for line in LINES}) == len(LINES)
    tasks = {line["task"] for line in LINES}
    assert all(tasks & family for family in FAMILIES.values()) and tasks <= set(cv.TASKS)
    for line in LINES:
        assert {"id", "task", "model_style", "reply", "robust", "strict", "note"} <= set(line), line["id"]
    assert {"<think>" in line["reply"] for line in LINES} == {True, False}
    assert any(line["robust"] is None for line in LINES)  # cut-off and ambiguous replies are in it


@pytest.mark.parametrize("line", [pytest.param(line, id=line["id"]) for line in LINES])
def test_robust_reads_each_reply(line):
    item = cv.score_response(doc(line["task"]), line["reply"])
    assert item["pred"] == line["robust"]
    assert (item["parse_error"] is None) == (line["robust"] is not None)


@pytest.mark.parametrize("line", [pytest.param(line, id=line["id"]) for line in LINES])
def test_strict_gives_the_official_result_on_every_reply(line):
    d = doc(line["task"])
    item = cv.score_response({**doc(line["task"]), "strict": True}, line["reply"])
    if line["task"] == "FSA":
        official = cv.strict_interval(line["reply"])
        assert (list(official) if official is not None else None) == line["strict"]
        expected = interval_iou(tuple(line["strict"]), tuple(d["gold"]["interval"])) if line["strict"] else 0.0
        assert item["strict"] == item["score"] == pytest.approx(expected)
    else:
        assert item["strict"] == item["score"] == float(line["strict"])


def test_robust_reads_at_least_99_percent_of_the_forms_it_owns():
    wrong = [line["id"] for line in LINES if not robust_ok(line)]
    assert len(LINES) - len(wrong) >= 0.99 * len(LINES), wrong
