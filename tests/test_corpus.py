"""The answer-format corpus: replies written the way real VLMs answer each benchmark's prompt, each with
the parse we expect (tests/data/answer_corpus/<family>.jsonl, one JSON object a line:
``{"id", "family", "model_style", "reply", "expected", "note"}``). The replies are hand-written after
the prompts and output formats of the papers (ErrorRadar Figures 19-20, ViRectify Tables 9-11, the
CausalStep prompt of task_yamls/causalstep/README.md) and the habits of each model family (bare
letters, prose, markdown, boxes, full-width characters, ``<think>`` blocks, replies cut off by the
token limit); they are not logged model outputs. ``note`` says what each one exercises.

This file runs the CausalStep, ViRectify and ErrorRadar corpora through the benchmark's own parser and
requires at least 99% of each to parse as expected; a failure lists every reply that did not. (The
CrossVid and MMErroR corpora have their own tests.)

What ``expected`` holds, per family:
- causalstep: ``{"letter": "B" | null}`` -- ``parse_answer`` on a question whose eight options are
  ``CAUSALSTEP_OPTIONS`` below (replies may repeat an option's text);
- virectify: ``{"intervals": [[s, e], ...] | null, "answer": str | null}`` -- the key times and the boxed
  answer of ``parse_response``;
- errorradar: ``{"step": int | null}`` (``score_step``, a record of 8 steps) or
  ``{"category": "CAL" | ... | null}`` (``score_category``).
null means "unparseable": the reply is scored wrong and counted, as a parse failure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lmms_eval_plugins.benchmarks.causalstep import tasks as cs
from lmms_eval_plugins.benchmarks.errorradar import tasks as er
from lmms_eval_plugins.benchmarks.virectify import tasks as vr
from lmms_eval_plugins.data import read_jsonl

CORPUS_DIR = Path(__file__).parent / "data" / "answer_corpus"
FIELDS = {"id", "family", "model_style", "reply", "expected", "note"}
MIN_REPLIES = 40
MIN_CORRECT = 0.99

CAUSALSTEP_OPTIONS = [
    "The man turns off the stove.",
    "The man pours the pasta into a colander.",
    "A woman enters the kitchen carrying groceries.",
    "The man adds salt to the boiling water.",
    "The pot boils over onto the stove.",
    "The man tastes the sauce with a spoon.",
    "The dog knocks a bowl off the counter.",
    "The man washes his hands at the sink.",
]
# Whole docs, as the loaders write them (each benchmark reads a doc through its typed record).
_CS_DOC = {
    cs.ID_FIELD: "corpus/S1/desc",
    "video_id": "corpus",
    "category": "",
    "video_path": "",
    "n_segments": 1,
    "segment": 1,
    "kind": "desc",
    "shown": [{"index": 1, "start": 0.0, "end": 1.0}],
    "question": "Q?",
    "options": CAUSALSTEP_OPTIONS,
    "gold": "A",
    "prev_question": "",
    "prev_answer": "",
    "restart": "next",
    "num_frames": 8,
    "max_long_side": 0,
}
_ER_DOC = {
    "question_id": "corpus",
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
}


def _causalstep(reply: str, expected: dict[str, Any]) -> dict[str, Any]:
    return {"letter": cs.parse_answer(_CS_DOC, reply)[0]}


def _virectify(reply: str, expected: dict[str, Any]) -> dict[str, Any]:
    parsed = vr.parse_response(reply)
    intervals = parsed["intervals"]
    return {"intervals": None if intervals is None else [list(iv) for iv in intervals], "answer": parsed["answer"]}


def _errorradar(reply: str, expected: dict[str, Any]) -> dict[str, Any]:
    if "step" in expected:
        return {"step": er.score_step(_ER_DOC, reply)["pred"]}
    return {"category": er.score_category(_ER_DOC, reply)["pred"]}


PARSERS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {
    "causalstep": _causalstep,
    "virectify": _virectify,
    "errorradar": _errorradar,
}
EXPECTED_KEYS = {
    "causalstep": [{"letter"}],
    "virectify": [{"intervals", "answer"}],
    "errorradar": [{"step"}, {"category"}],
}


def _files() -> list[Path]:
    return sorted(p for p in CORPUS_DIR.glob("*.jsonl") if p.stem in PARSERS)


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, float) or isinstance(got, float):
        return (
            isinstance(got, (int, float)) and isinstance(want, (int, float)) and math.isclose(got, want, abs_tol=1e-6)
        )
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want))
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(_same(got[k], want[k]) for k in want)
    return got == want


def test_every_family_has_its_corpus():
    assert {p.stem for p in _files()} == set(PARSERS)


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.stem)
def test_corpus_lines_are_well_formed(path):
    rows = read_jsonl(path)
    assert len(rows) >= MIN_REPLIES, f"{path.name}: {len(rows)} replies, at least {MIN_REPLIES} wanted"
    ids = [r.get("id") for r in rows]
    assert len(set(ids)) == len(ids), "ids repeat"
    for row in rows:
        assert set(row) == FIELDS, (row.get("id"), set(row) ^ FIELDS)
        assert row["family"] == path.stem, row["id"]
        assert isinstance(row["reply"], str) and isinstance(row["model_style"], str) and row["model_style"], row["id"]
        assert isinstance(row["expected"], dict) and set(row["expected"]) in EXPECTED_KEYS[path.stem], row["id"]
    # the corpus covers unparseable replies too (cut off, ambiguous), not only happy ones
    assert any(v is None for r in rows for v in r["expected"].values())


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.stem)
def test_corpus_parses_as_expected(path):
    rows = read_jsonl(path)
    parse = PARSERS[path.stem]
    failures = []
    for row in rows:
        got = parse(row["reply"], row["expected"])
        if not _same(got, row["expected"]):
            failures.append(
                f"{row['id']} ({row['model_style']}): expected {row['expected']}, got {got}"
                f"\n    reply: {row['reply'][:160]!r}\n    note: {row['note']}"
            )
    correct = 1 - len(failures) / len(rows)
    assert correct >= MIN_CORRECT, (
        f"{path.name}: {correct:.1%} of {len(rows)} replies parsed as expected "
        f"(at least {MIN_CORRECT:.0%} wanted); failures:\n" + "\n".join(failures)
    )


def test_the_comparison_can_fail():
    assert not _same({"intervals": [[12.0, 20.0]]}, {"intervals": [[12, 21]]})
    assert not _same({"letter": None}, {"letter": "B"})
    assert _same({"intervals": [[12.0, 20.0]], "answer": "B"}, {"intervals": [[12, 20]], "answer": "B"})
