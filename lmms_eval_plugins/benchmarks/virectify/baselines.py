"""ViRectify baselines: the oracle reply (the gold annotation) and the chance replies, for both tasks."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from lmms_eval_plugins.benchmarks.virectify.prompts import (
    ANSWER_SENTENCE,
    format_intervals,
)
from lmms_eval_plugins.benchmarks.virectify.records import Record
from lmms_eval_plugins.benchmarks.virectify.replies import redact_answer


def oracle_response(record: Mapping[str, Any]) -> str:
    """The gold annotation in the output format (what a perfect model answers). ``record``: a loaded record
    (:func:`~lmms_eval_plugins.benchmarks.virectify.records.normalize_record`), as the step explanations
    and the rationale it needs are not part of a doc."""
    return (
        f"<error_identify>{json.dumps(record['error_identify'], ensure_ascii=False)}</error_identify> "
        f"<error_graph>{json.dumps(record['error_graph'], ensure_ascii=False)}</error_graph> "
        f"<timestamps>{format_intervals(record['intervals'])}</timestamps> "
        f"<rationale>{redact_answer(record['rationale'])} "
        f"<answer>{ANSWER_SENTENCE.format(answer=record['answer'])}</answer></rationale>"
    )


def reflect_oracle_response(record: Record) -> str:
    """What a perfect model answers in the reflection task: the reference answer, in its output format."""
    return f"<answer>{ANSWER_SENTENCE.format(answer=record.answer)}</answer>"


def reflect_chance_responses() -> list[str]:
    """The replies a chance answerer picks from in the reflection task: one letter each."""
    return [f"<answer>{ANSWER_SENTENCE.format(answer=c)}</answer>" for c in "ABCD"]


def chance_responses(n_steps: int) -> list[str]:
    """Replies a chance answerer picks from: four label patterns that ignore the video and the gold."""
    patterns = [
        ["1"] * n_steps,
        ["0"] * n_steps,
        [str((k + 1) % 2) for k in range(n_steps)],
        [str(k % 2) for k in range(n_steps)],
    ]
    out = []
    for letter, pattern in zip("ABCD", patterns):
        identify = {f"step{k}": [label, "" if label == "1" else "wrong"] for k, label in enumerate(pattern, start=1)}
        wrong = [f"step{k}" for k, label in enumerate(pattern, start=1) if label == "0"]
        graph = {step: [wrong[max(0, i - 1)]] for i, step in enumerate(wrong)}
        out.append(
            f"<error_identify>{json.dumps(identify)}</error_identify> <error_graph>{json.dumps(graph)}</error_graph> "
            f"<timestamps>[00:00-00:05]</timestamps> <rationale>A guess. "
            f"<answer>{ANSWER_SENTENCE.format(answer=letter)}</answer></rationale>"
        )
    return out
