"""ErrorRadar's category parser reads the common synonyms of its five categories (issue 30), chosen from
the paper's category definitions and listed in task_yamls/errorradar/README.md ("Category synonyms")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lmms_eval_plugins.benchmarks.errorradar import tasks as er

README = Path(__file__).resolve().parents[1] / "task_yamls" / "errorradar" / "README.md"
DOC = {
    "question_id": "q",
    "study_level": "",
    "question_type": "",
    "content": "",
    "answer": "",
    "user_answer": "",
    "user_answer_steps": "",
    "n_steps": 8,
    "gold_step": 1,
    "gold_category": "CAL",
    "content_image": "",
    "image_path": "",
    "round": 0,
}  # a whole doc, as the loader writes it (scoring reads it through its typed record)


def category(reply: str) -> str | None:
    return er.score_category(DOC, reply)["pred"]


@pytest.mark.parametrize(
    "reply, code",
    [
        ("Error Category: Logical Error", "REAS"),
        ("Error Category: logic error", "REAS"),
        ("Error Category: Illogical step", "REAS"),
        ("Error Category: Inference Error", "REAS"),
        ("Error Category: Computational Error", "CAL"),
        ("Error Category: Arithmetic mistake", "CAL"),
        ("Error Category: Miscalculation", "CAL"),
        ("Error Category: Unit-conversion error", "CAL"),
        ("Error Category: Conceptual Error", "KNOW"),
        ("Error Category: Misconception", "KNOW"),
        ("Error Category: Perceptual Error", "VIS"),
        ("Error Category: Misunderstanding of the question", "MIS"),
        ("Error Category: misunderstood the question", "MIS"),
        ("Error Category: Question Comprehension Error", "MIS"),
        ("Error Category: Misreading of the question", "MIS"),
        # a longer phrase holding another class's keyword wins over it
        ("Error Category: Visual Misinterpretation", "VIS"),
        ("Error Category: Conceptual misunderstanding", "KNOW"),
        # two classes side by side, or no synonym: not guessed
        ("Error Category: Logical Error or Calculation Error", None),
        ("Error Category: misinterpretation of the figure (visual)", None),
        ("Error Category: Formula Error", None),
        ("Error Category: Misreading", None),
        ("Error Category: Careless Error", None),
        # a synonym is read only as a word start: "biological" holds "logic" but names nothing
        ("Error Category: Biological fact", None),
    ],
)
def test_synonyms_by_hand(reply, code):
    assert category(reply) == code


def test_the_five_names_and_the_data_spellings_still_name_one_class_each():
    for code, name in er.CATEGORY_NAMES.items():
        assert category(f"Error Category: {name}") == code
        assert er.category_code(name) == code
    assert er.category_code("Misinterpretation of the Qns") == "MIS"  # the paper's table spelling


def test_the_readme_lists_every_keyword():
    table = README.read_text(encoding="utf-8").split("### Category synonyms", 1)[1].split("\n\n## ", 1)[0]
    rows = {
        line.split("|")[1].strip(): line
        for line in table.splitlines()
        if re.match(r"\| (VIS|CAL|REAS|KNOW|MIS) \|", line)
    }
    assert set(rows) == set(er.CATEGORIES)
    for code, keywords in er.CATEGORY_KEYWORDS.items():
        # the README writes an optional ending in brackets: `misunderstand(ing)`, `misreading (of) the question`
        found = re.findall(r"`([^`]+)`", rows[code])
        written = {re.sub(r"\(([^)]*)\)", r"\1", k) for k in found} | {re.sub(r"\s*\([^)]*\)", "", k) for k in found}
        assert set(keywords) <= written, (code, set(keywords) - written)
