"""MMErroR: prompts, answer parsing, records, and metrics (including the EPD replay) computed by hand."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from lmms_eval_plugins.data import SKIPPED
from lmms_eval_plugins.errors import DataError, MediaError
from lmms_eval_plugins.testing.task_utils import load_task_utils

mm = load_task_utils("mmerror")
A, B, C, D, E = (mm.LABELS[c] for c in "ABCDE")


# ------------------------------------------------------------------------------------------ prompts

# sha256 of the prompts the official code renders (mmerror_eval/prompts.py render_prompt /
# render_presence_prompt with prompts/*.prompt.txt, repository code-here-in/MMerroR-Evaluation at
# b5fc9f8) for question "What {x} is 2+2?" and reasoning "Step 1: {y} 2+2=5.". Stage 2 uses the
# runner's task_mode "epd-type" and its stage-2 instruction.
OFFICIAL_PROMPT_SHA256 = {
    "etc": "3c1833cb5abd77c21a85dd172609e7fbc8a9780198fbdc86b271b024cbd79bec",
    "presence": "9c9fd55b458520f8be1d6433d39102bee50f598ff104e74d7d4fa4f5366134fc",
    "type": "7bb132d58b1f98ac1b817177d92903d2325949015d3f65c61504d9b19ad0f210",
}


@pytest.mark.parametrize("stage", sorted(OFFICIAL_PROMPT_SHA256))
def test_prompts_are_the_official_renders_byte_for_byte(stage):
    text = mm.prompt_text({"question": "What {x} is 2+2?", "error_reason": "Step 1: {y} 2+2=5."}, stage)
    assert hashlib.sha256(text.encode()).hexdigest() == OFFICIAL_PROMPT_SHA256[stage]


def test_prompt_wording_and_letter_order():
    doc = {"question": "Q?", "error_reason": "Step 1: r."}
    etc, presence, typ = (mm.prompt_text(doc, s) for s in ("etc", "presence", "type"))
    assert "guaranteed to contain exactly one error" in etc and "B. B_Reasoning_Error" in etc
    assert "D. D_Knowledge_Deployment_Error\n   The image and question are understood" in etc
    assert "E_NoError" not in etc + typ
    assert "P. Error Present" in presence and "N. No Error" in presence and "^[PN]$" in presence
    assert "an error has already been determined to be present" in typ and "Task mode: EPD-TYPE" in typ
    assert "Question: Q?\nReasoning: Step 1: r.\n" in typ


def test_chat_message_puts_the_image_first():
    doc = next(d for d in _sample_docs("epd") if d["stage"] == "type")
    content = mm.doc_to_messages_epd(doc)[0]["content"]
    assert [c["type"] for c in content] == ["image", "text"]
    assert content[0]["url"].size == (112, 84)
    assert content[1]["text"].startswith("You are running stage 2") and content[1]["text"] == mm.doc_to_text_epd(doc)


# ------------------------------------------------------------------------------------------ parsing

TYPE_CASES = [  # reply, letter (None = unparseable)
    # the official tolerance
    ("B", "B"), ("b", "B"), ("**B**", "B"), ("(B)", "B"), ("B.", "B"), ("B)", "B"), ("`B`", "B"),
    ("\\boxed{B}", "B"), ("$\\boxed{\\text{B}}$", "B"), ("<|begin_of_box|>C<|end_of_box|>", "C"),
    ("Answer: C", "C"), ("Final answer: D", "D"), ("Final Answer - C", "C"), ("Output: B", "B"),
    ("Let me look at step 2.\nB", "B"), ("B_Reasoning_Error", "B"), ("  D_Knowledge_Deployment_Error\n", "D"),
    ("<think>It could be A.\nA</think>\nC", "C"),  # a reasoning block never counts
    ("**Answer:** B", "B"),
    # nothing looser
    ("I think the answer is B", None), ("A or B", None), ("A\nB", None), ("E", None), ("N", None),
    ("Answer: the reasoning error", None), ("B_Reasoning_Error because step 2 is wrong", None),
    ("Reasoning Error", None), ("B: Reasoning error", None), ("A. A_Visual_Perception_Error", None),
    ("", None), ("   ", None), ("<think>B", None),  # unfinished thinking is no answer
    ("answer: b", None),  # lowercase only as the whole reply
    (None, None), ("A" * 100_000, None),
]


@pytest.mark.parametrize("reply, letter", TYPE_CASES)
def test_type_parser(reply, letter):
    parsed = mm.parse_type(reply)
    assert parsed.value == letter, parsed
    assert parsed.ok == (letter is not None)


PRESENCE_CASES = [
    ("P", "P"), ("N", "N"), ("n", "N"), ("N.", "N"), ("**N**", "N"), ("(N)", "N"), ("\\boxed{P}", "P"),
    ("Answer: N", "N"), ("Output: P", "P"), ("<think>hmm, step 2?</think>N", "N"),
    ("No Error", "N"), ("no error.", "N"), ("Error Present", "P"), ("none", "N"), ("Error", "P"),
    # decision: "no error" inside a longer reply is not read (the official parser would say N)
    ("There is no error.", None), ("The reasoning has no error present", None),
    ("Y", None), ("PN", None), ("P or N", None), ("A", None), ("", None),
]


@pytest.mark.parametrize("reply, letter", PRESENCE_CASES)
def test_presence_parser(reply, letter):
    assert mm.parse_presence(reply).value == letter


@pytest.mark.parametrize("spelling, letter", [
    ("A_Visual_Perception_Error", "A"), ("B_Reasoning_Error", "B"), ("C_Question_Comprehension_Error", "C"),
    ("D_Knowledge_Deployment_Error", "D"), ("D_Knowledge_Application_Error", "D"), ("Knowledge Deficiency Error", "D"),
    ("visual perception error", "A"), ("E_NoError", "E"), ("No Error", "E"), ("C", "C"),
    ("Spelling Error", None), ("Visual Reasoning Error", None), ("", None),
])
def test_gold_labels_are_read_by_keyword(spelling, letter):
    assert mm.label_letter(spelling) == letter


# ------------------------------------------------------------------------------------------ scoring

def _doc(label, domain="M", qid="q", subdomain="s", stage=None):
    doc = {"question_id": qid, "label": label, "domain": domain, "subdomain": subdomain}
    return {**doc, "stage": stage} if stage else doc


def run_etc(pairs):
    per_doc = [mm.process_results_etc(d, [r]) for d, r in pairs]
    return {m: getattr(mm, f"agg_{m}")([x[m] for x in per_doc]) for m in mm.ETC_METRICS}


def run_epd(samples, order=None):
    """samples: (label, domain, stage-1 reply, stage-2 reply) -> aggregated EPD metrics."""
    per_doc = []
    for i, (label, domain, first, second) in enumerate(samples):
        per_doc.append(mm.process_results_epd(_doc(label, domain, f"q{i}", stage="presence"), [first]))
        per_doc.append(mm.process_results_epd(_doc(label, domain, f"q{i}", stage="type"), [second]))
    if order:
        per_doc = [per_doc[i] for i in order]
    return {m: getattr(mm, f"agg_{m}")([x[m] for x in per_doc]) for m in mm.EPD_METRICS}


def test_etc_metrics_by_hand():
    pairs = [
        (_doc(A, "M"), "A"),           # right
        (_doc(A, "M"), "Answer: B"),   # wrong
        (_doc(B, "P"), "\\boxed{B}"),  # right
        (_doc(C, "P"), "maybe C?"),    # unparseable -> wrong, counted
        (_doc(D, "P"), "D"),           # right
    ]
    m = run_etc(pairs)
    assert m["accuracy"] == pytest.approx(60.0)
    assert m["parse_fail"] == 1
    assert m["accuracy_by_domain"] == {"M": 50.0, "P": pytest.approx(200 / 3)}
    assert m["accuracy_domain_macro"] == pytest.approx((50 + 200 / 3) / 2)  # not the pooled 60
    assert m["accuracy_by_label"] == {A: 50.0, B: 100.0, C: 0.0, D: 100.0}
    assert m["confusion"][A] == {A: 1, B: 1, C: 0, D: 0, "unparseable": 0}
    assert m["confusion"][C]["unparseable"] == 1 and E not in m["confusion"]
    assert m["pred_distribution"] == {A: 20.0, B: 40.0, C: 0.0, D: 20.0, "unparseable": 20.0}


def test_etc_logged_item_carries_gold_pred_and_reason():
    item = mm.process_results_etc(_doc(B), ["no idea"])["accuracy"]
    assert item["gold"] == B and item["pred"] is None and item["correct"] is False and item["parse_error"]
    assert mm.process_results_etc(_doc(B), [])["accuracy"]["parse_error"] == "empty output"


EPD_SAMPLES = [  # label, domain, stage-1 reply, stage-2 reply
    (A, "M", "P", "A"),        # q0 right
    (B, "M", "P", "C"),        # q1 wrong type
    (C, "X", "N", "C"),        # q2 says no error: predicts E_NoError, wrong (stage 2 is never consulted)
    (D, "X", "yes?", "D"),     # q3 stage 1 unparseable: wrong, whatever stage 2 says
    (E, "X", "N", "garbage"),  # q4 right; its stage 2 is never consulted, so not a parse failure
    (E, "M", "P", "B"),        # q5 false alarm: predicts B_Reasoning_Error, wrong
    (A, "M", "**P**", "hmm"),  # q6 stage 2 unparseable after P: wrong, counted
]


def test_epd_replay_by_hand():
    outcomes, incomplete = mm.replay_epd(
        [mm.process_results_epd(_doc(lab, dom, f"q{i}", stage=st), [r])["accuracy"]
         for i, (lab, dom, s1, s2) in enumerate(EPD_SAMPLES) for st, r in (("presence", s1), ("type", s2))])
    assert incomplete == 0
    assert [o["pred"] for o in outcomes] == [A, C, E, None, E, B, None]
    assert [o["correct"] for o in outcomes] == [True, False, False, False, True, False, False]
    assert outcomes[3]["parse_error"].startswith("stage 1:") and outcomes[6]["parse_error"].startswith("stage 2:")


def test_epd_metrics_by_hand_in_any_request_order():
    m = run_epd(EPD_SAMPLES, order=[13, 0, 5, 2, 1, 7, 3, 12, 4, 6, 9, 11, 8, 10])
    assert m["accuracy"] == pytest.approx(100 * 2 / 7)  # over all 7 SAMPLES, not the 14 requests
    assert m["parse_fail"] == 2 and m["presence_parse_fail"] == 1
    assert m["no_error_rate"] == pytest.approx(100 * 2 / 7)  # q2, q4
    assert m["false_alarm_rate"] == pytest.approx(50.0)      # E samples q4 (N), q5 (P)
    assert m["accuracy_by_domain"] == {"M": 25.0, "X": pytest.approx(100 / 3)}  # M: q0 of q0,q1,q5,q6
    assert m["accuracy_domain_macro"] == pytest.approx((25 + 100 / 3) / 2)
    assert m["accuracy_by_label"] == {A: 50.0, B: 0.0, C: 0.0, D: 0.0, E: 50.0}
    assert m["confusion"][C][E] == 1 and m["confusion"][E][B] == 1 and m["confusion"][D]["unparseable"] == 1
    assert m["pred_distribution"]["unparseable"] == pytest.approx(100 * 2 / 7)


def test_false_alarm_rate_is_absent_without_no_error_samples():
    m = run_epd([(A, "M", "P", "A"), (B, "M", "N", "B")])
    assert m["false_alarm_rate"] is None
    assert m["accuracy"] == 50.0 and m["no_error_rate"] == 50.0
    assert mm.agg_false_alarm_rate([]) is None and mm.agg_accuracy([]) == 0.0


def test_false_alarm_counts_only_a_parsed_P():
    # an unparseable stage 1 on a clean chain is wrong (and counted) but is not a false alarm
    m = run_epd([(E, "M", "P", "A"), (E, "M", "???", "A"), (E, "M", "N", "")])
    assert m["false_alarm_rate"] == pytest.approx(100 / 3) and m["accuracy"] == pytest.approx(100 / 3)
    assert m["presence_parse_fail"] == 1


def test_epd_sample_with_a_missing_stage_is_left_out():
    per_doc = [mm.process_results_epd(_doc(A, qid="q0", stage="presence"), ["P"]),
               mm.process_results_epd(_doc(A, qid="q0", stage="type"), ["A"]),
               mm.process_results_epd(_doc(B, qid="q1", stage="presence"), ["P"])]  # e.g. --limit 3
    items = [x["accuracy"] for x in per_doc]
    assert mm.replay_epd(items)[1] == 1
    assert mm.agg_accuracy(items) == 100.0


def test_epd_duplicate_stage_is_a_programming_error():
    item = mm.process_results_epd(_doc(A, stage="presence"), ["P"])["accuracy"]
    with pytest.raises(ValueError, match="two presence results"):
        mm.replay_epd([item, item])


# ------------------------------------------------------------------------------------------ records

def _sample_docs(task):
    process = mm.process_docs_etc if task == "etc" else mm.process_docs_epd
    return list(process([{"benchmark": "mmerror", "source": "sample"}]))


def test_sample_data_covers_labels_domains_and_no_error():
    source = mm.resolve_source("mmerror", "sample", sample_dir=mm.SAMPLE_DIR, hub_repo=None, local_layout="")
    records = mm.load_records(source)
    assert len(records) == 12  # the aggregate MMErroR_all.json is not a record
    assert {r["label"] for r in records} == set(mm.ALL_LABELS)
    assert sum(r["label"] == E for r in records) == 3 and len({r["domain"] for r in records}) >= 3
    assert any(r["label_raw"] == "D_Knowledge_Application_Error" and r["label"] == D for r in records)
    assert any(r["correct_answer"] == "？" for r in records)
    assert {Path(r["image_path"]).suffix for r in records} == {".png", ".jpg"}


def test_docs_per_task():
    etc, epd = _sample_docs("etc"), _sample_docs("epd")
    assert len(etc) == 9 and all(d["label"] != E for d in etc)
    assert all(mm.LABELS[d["oracle_response"]] == d["label"] for d in etc)
    assert [d["oracle_response"] for d in etc[:3]] == ["A", "A", "A"] and etc[0]["chance_responses"] == list("ABCD")
    assert len(epd) == 24 and [d["stage"] for d in epd[:4]] == ["presence", "type", "presence", "type"]
    assert epd[0]["question_id"] == epd[1]["question_id"]  # a sample's two requests are adjacent
    clean = [d for d in epd if d["label"] == E]
    assert {(d["stage"], d["oracle_response"]) for d in clean} == {("presence", "N"), ("type", "A")}  # stage 2 of a clean sample is never scored
    assert {d["oracle_response"] for d in epd if d["label"] != E and d["stage"] == "presence"} == {"P"}
    assert all(d["chance_responses"] == ["P", "N"] for d in epd if d["stage"] == "presence")


def _write(folder: Path, records: list[dict], images: bool = True) -> Path:
    (folder / "data" / "jsons").mkdir(parents=True, exist_ok=True)
    (folder / "data" / "images").mkdir(parents=True, exist_ok=True)
    png = next((mm.SAMPLE_DIR / "data" / "images").glob("*.png"))
    for i, record in enumerate(records, start=1):
        name = f"MMErroR_{i:05d}.json"
        (folder / "data" / "jsons" / name).write_text(json.dumps(record), encoding="utf-8")
        if images and isinstance(record, dict) and record.get("question_id"):
            shutil.copy(png, folder / "data" / "images" / f"{record['question_id']}.png")
    return folder


def _record(**overrides):
    return {"question_id": "MMErroR_00001", "question": "Q?", "correct_answer": "1", "error_reason": "Step 1: r.",
            "label": "B_Reasoning_Error", "domain": "M", "subdomain": "s", **overrides}


def _load(folder: Path):
    return mm.load_records(mm.resolve_source("mmerror", "sample", sample_dir=folder, hub_repo=None, local_layout=""))


@pytest.mark.parametrize("record, message", [
    (_record(label="Spelling Error"), "matches none"),
    ({k: v for k, v in _record().items() if k != "error_reason"}, "missing field(s) error_reason"),
    (_record(question=["a", "list"]), "not a string"),
])
def test_malformed_records_name_record_and_file(tmp_path, record, message):
    _write(tmp_path, [record])
    with pytest.raises(DataError) as info:
        _load(tmp_path)
    text = str(info.value)
    assert message in text and "MMErroR_00001" in text and "MMErroR_00001.json" in text and "fix:" in text


def test_a_file_that_is_not_one_object_names_the_file(tmp_path):
    _write(tmp_path, [[_record()]])
    with pytest.raises(DataError, match="one JSON object.*MMErroR_00001.json"):
        _load(tmp_path)


def test_duplicate_question_ids_are_refused(tmp_path):
    _write(tmp_path, [_record(), _record()])
    with pytest.raises(DataError, match="used twice"):
        _load(tmp_path)


def test_records_without_a_label_are_skipped_like_the_official_loader(tmp_path):
    _write(tmp_path, [_record(), _record(question_id="MMErroR_00002", label="")])
    assert [r["question_id"] for r in _load(tmp_path)] == ["MMErroR_00001"]


def test_empty_folder_says_which_layout(tmp_path):
    (tmp_path / "data" / "jsons").mkdir(parents=True)
    (tmp_path / "data" / "jsons" / "MMErroR_all.json").write_text("[]")
    with pytest.raises(DataError, match="no MMErroR_\\*.json record files.*data/jsons/MMErroR_<id>.json"):
        _load(tmp_path)


def test_missing_image_is_an_error_naming_the_record(tmp_path, monkeypatch):
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA", raising=False)
    _write(tmp_path, [_record()], images=False)
    with pytest.raises(MediaError) as info:
        _load(tmp_path)
    assert "MMErroR_00001" in str(info.value) and "data/images" in str(info.value)


def test_missing_images_can_be_skipped_and_are_counted(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA", "1")
    _write(tmp_path, [_record(), _record(question_id="MMErroR_00002")])
    (tmp_path / "data" / "images" / "MMErroR_00001.png").unlink()
    assert [r["question_id"] for r in _load(tmp_path)] == ["MMErroR_00002"] and SKIPPED["mmerror"] == 1


def test_local_root_and_hub_read_the_same_layout(tmp_path, monkeypatch):
    shutil.copytree(mm.SAMPLE_DIR, tmp_path / "root" / "mmerror")
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path / "root"))
    local = mm.load_records(mm.resolve_source("mmerror", "auto", sample_dir=mm.SAMPLE_DIR, hub_repo=mm.HUB_REPO,
                                              local_layout=""))
    assert len(local) == 12

    monkeypatch.delenv("LMMS_EVAL_PLUGINS_DATA_ROOT")
    calls = []

    def fake_snapshot(repo, allow_patterns=None):
        calls.append((repo, allow_patterns))
        return tmp_path / "root" / "mmerror"

    monkeypatch.setattr(mm, "hub_snapshot", fake_snapshot)
    hub = mm.load_records(mm.resolve_source("mmerror", "auto", sample_dir=mm.SAMPLE_DIR, hub_repo=mm.HUB_REPO,
                                            local_layout=""))
    assert calls == [("s-u-do/mmerror-benchmark", ["data/jsons/*", "data/images/*"])]
    assert [r["question_id"] for r in hub] == [r["question_id"] for r in local]
