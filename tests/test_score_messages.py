"""`lmms-eval-plugins score`'s closing summary says each unscored reason once and in full (issue 29: the
missing-judge reason was cut at "Either set OPENAI_API_KEY (OpenAI)..."). CLI side: tests/test_cli_messages.py."""

from __future__ import annotations

import json

from lmms_eval_plugins import score
from lmms_eval_plugins.judges.endpoint import missing_endpoint_message


def _run(tmp_path, samples: dict[str, list[str]]):
    target = tmp_path / "model" / "20261125_120000_results.json"
    target.parent.mkdir(parents=True)
    new = {"results": {task: {"acc,none": None, "unscored,none": len(reasons)} for task, reasons in samples.items()}}
    target.write_text(json.dumps(new))
    for task, reasons in samples.items():
        lines = [json.dumps({"doc_id": i, "unscored": {"unscored": r}}) for i, r in enumerate(reasons)]
        score.samples_path(target, task).write_text("\n".join(lines) + "\n")
    return target, new


def test_each_reason_is_printed_once_in_full(tmp_path):
    why = f"not judged: {missing_endpoint_message('semantic_match')}"
    target, new = _run(tmp_path, {"a_sample": [why] * 3 + ["model request failed"], "b_sample": [why] * 2})
    status, lines = score.summary(tmp_path / "orig_results.json", target, ["a_sample", "b_sample"], new)
    assert status == 1
    assert lines[1] == "  a_sample: 4 unscored: 3 x reason 1; 1 x reason 2"
    assert lines[2] == "  b_sample: 2 unscored: 2 x reason 1"
    text = "\n".join(lines)
    assert " ".join(text.split()).count(" ".join(why.split())) == 1 and "..." not in text
    assert all(len(line) <= 100 for line in lines[3:-2])
    assert "  reason 2: model request failed" in lines


def test_more_than_five_reasons_are_counted_not_listed(tmp_path):
    reasons = [f"unparseable judge reply {i}" for i in range(7)]
    target, new = _run(tmp_path, {"a_sample": reasons})
    _, lines = score.summary(tmp_path / "orig_results.json", target, ["a_sample"], new)
    assert "  reason 5: unparseable judge reply 4" in lines and not any("reason 6:" in line for line in lines)
    assert "  (2 more reasons: each logged sample's `unscored` field says its own)" in lines
