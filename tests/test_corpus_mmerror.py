"""MMErroR's answer-format corpus: how real VLMs answer its three prompts, through both parsers.

tests/data/answer_corpus/mmerror.jsonl, one reply a line: ``family`` (``etc``: ETC's A-D; ``epd_presence``:
EPD stage 1, P/N; ``epd_type``: EPD stage 2, A-D), ``model_style``, ``reply``, ``answer`` (what a careful
reader takes the reply to answer; null when it gives none: cut off, hedged, outside the options),
``robust`` (what our parser must return), ``official`` (what the official ``normalize_label`` /
``normalize_presence_decision`` returned when run on the reply, repository code-here-in/MMerroR-Evaluation
at b5fc9f8) and ``note``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from lmms_eval_plugins.data import read_jsonl
from testkit.task_utils import load_task_utils

mm = load_task_utils("mmerror")
CORPUS = Path(__file__).parent / "data" / "answer_corpus" / "mmerror.jsonl"
ROWS = read_jsonl(CORPUS)
FAMILIES = ("etc", "epd_presence", "epd_type")
OPTIONS = {"etc": "ABCD", "epd_presence": "PN", "epd_type": "ABCD"}


def robust(row: dict) -> str | None:
    parse = mm.parse_presence if row["family"] == "epd_presence" else mm.parse_type
    return parse(row["reply"]).value


def official(row: dict) -> str | None:
    return (mm.official_presence if row["family"] == "epd_presence" else mm.official_type)(row["reply"])


def test_corpus_shape():
    assert len({r["id"] for r in ROWS}) == len(ROWS)
    counts = Counter(r["family"] for r in ROWS)
    assert set(counts) == set(FAMILIES) and min(counts.values()) >= 40, counts
    for r in ROWS:
        assert set(r) == {"id", "family", "model_style", "reply", "answer", "robust", "official", "note"}, r["id"]
        for key in ("answer", "robust", "official"):
            assert r[key] is None or r[key] in OPTIONS[r["family"]], (r["id"], key)
    styles = {r["model_style"] for r in ROWS}
    assert {"qwen2.5-vl", "internvl", "llava", "gpt-4o", "gemini", "qwen3-vl-thinking"} <= styles
    replies = [r["reply"] for r in ROWS]
    for form in (
        "<think>",
        "The answer is",
        "Option",
        "(B)",
        "**",
        "\\text{",
        "\uff22",
        "\\boxed{",
        "B_Reasoning_Error",
    ):
        assert any(form in reply for reply in replies), form
    assert sum("cut off" in r["note"] for r in ROWS) >= 6  # replies stopped by the token limit


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_robust_parser_gives_the_expected_value(row):
    assert robust(row) == row["robust"], row["note"]


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_official_parser_gives_the_official_result(row):
    assert official(row) == row["official"], row["note"]


def test_robust_parser_reads_99_percent_of_determinable_replies_and_never_guesses():
    determinable = [r for r in ROWS if r["answer"] is not None]
    right = sum(robust(r) == r["answer"] for r in determinable)
    assert right / len(determinable) >= 0.99, f"{right}/{len(determinable)}"
    # a reply it reads is read right, and a reply with no answer is never given one
    assert all(robust(r) in (None, r["answer"]) for r in ROWS)
    assert all(r["robust"] in (None, r["answer"]) for r in ROWS)


def test_the_official_parser_reads_fewer_replies_than_the_robust_one():
    # the reason both numbers are reported: on realistic replies the official parser leaves many unread
    determinable = [r for r in ROWS if r["answer"] is not None]
    official_right = sum(official(r) == r["answer"] for r in determinable)
    robust_right = sum(robust(r) == r["answer"] for r in determinable)
    assert official_right < robust_right
