"""The samples view's reading of a logged line, by hand (issue 39); the page itself: test_samples_view_browser.py."""

from __future__ import annotations

import json

from lmms_eval_plugins.report.samples_view import outcome_of, reply_of, write_samples_view
from lmms_eval_plugins.runs import discover_runs


def test_the_reply_and_an_attached_judge_outcome():
    assert reply_of({"filtered_resps": "B"}) == ("B", None)
    assert reply_of({"resps": [["raw"]], "filtered_resps": ["B"]}) == ("raw", None)
    attached = json.dumps({"text": "<answer>3</answer>", "judge": {"verdict": 1.0}})
    assert reply_of({"filtered_resps": [attached]}) == ("<answer>3</answer>", {"verdict": 1.0})
    assert reply_of({"filtered_resps": '{"not": "an attachment"}'}) == ('{"not": "an attachment"}', None)
    assert reply_of({}) == ("", None)


def test_each_outcome_by_hand():
    scored = {"unscored": {"unscored": None}}
    assert outcome_of({"unscored": {"unscored": "judge error: HTTP 500"}}, {"correct": True}) == (
        "unscored",
        "judge error: HTTP 500",
    )
    assert outcome_of(scored, {"skipped_media": "unreadable media", "correct": False}) == (
        "skipped",
        "unreadable media",
    )
    assert outcome_of(scored, {"pred": None, "parse_error": "no letter found"}) == ("unparseable", "no letter found")
    assert outcome_of(scored, {"pred": None}) == ("unparseable", "nothing read")
    assert outcome_of(scored, {"pred": "B", "correct": True}) == ("right", "")
    assert outcome_of(scored, {"pred": "B", "correct": False}) == ("wrong", "")
    assert outcome_of(scored, {"score": 0.0}) == ("wrong", "")
    assert outcome_of(scored, {"iou": 0.4}) == ("scored", "")
    assert outcome_of(scored, None) == ("scored", "")


def test_the_data_file_cannot_close_a_script_and_names_no_control_character(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "20261129_000000_results.json").write_text(
        json.dumps(
            {"results": {"errorradar_step_sample": {"alias": "x", "step_acc,none": 0.0}}, "config": {"model": "m"}}
        )
    )
    hostile = "</script><script>alert(1)</script>\x1b]0;title\x07 \u2028"
    line = {
        "doc_id": 0,
        "target": "3",
        "filtered_resps": hostile,
        "step_acc": {"pred": None, "parse_error": hostile},
        "input": hostile,
    }
    (run / "20261129_000000_samples_errorradar_step_sample.jsonl").write_text(json.dumps(line) + "\n")
    write_samples_view(discover_runs(run), tmp_path / "out", media=False)
    text = (tmp_path / "out" / "samples_data.js").read_text(encoding="utf-8")
    assert "<" not in text and "\x1b" not in text and "\u2028" not in text and text.isascii()
    data = json.loads(text[text.index("{") : text.rindex("}") + 1])
    (doc,) = data["docs"]
    assert doc["runs"][0]["reply"].startswith("</script><script>alert(1)</script>\\x1b]0;title")
    assert doc["runs"][0]["outcome"] == "unparseable" and doc["media"] == []


def test_a_metric_with_its_own_item_is_shown_beside_the_first():
    from lmms_eval_plugins.report.samples_view import _other_items

    first = {"video_id": "v1", "kind": "desc", "correct": True}
    chain = {"video_id": "v1", "kind": "desc", "chain": {"completed": False, "restarts": 1}}
    line = {
        "doc_id": 0,
        "doc": {"x": 1},
        "csr": first,
        "amcl": dict(first),
        "videos": chain,
        "unscored": {"unscored": None},
        "skipped": {"skipped_records": []},
    }
    assert _other_items(line, first) == [["videos.chain", '{"completed": false, "restarts": 1}']]
    assert _other_items({"csr": first}, first) == []
