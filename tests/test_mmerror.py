"""MMErroR: prompts, answer parsing, records, and metrics (including the EPD replay) computed by hand."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import pytest

from lmms_eval_plugins.benchmarks.mmerror.records import Record
from lmms_eval_plugins.benchmarks.mmerror.spec import EPD_TEMPLATE, ETC_TEMPLATE
from lmms_eval_plugins.errors import DataError, MediaError
from lmms_eval_plugins.task_hooks import RUN_COUNTS
from testkit.doc_columns import json_text_columns
from testkit.task_utils import load_task_utils

mm = load_task_utils("mmerror")
A, B, C, D, E = (mm.LABELS[c] for c in "ABCDE")
# The metrics a doc's process_results scores (the spec's list less the run-wide counts).
ETC_METRICS = tuple(m.name for m in ETC_TEMPLATE if m.name not in RUN_COUNTS)
EPD_METRICS = tuple(m.name for m in EPD_TEMPLATE if m.name not in RUN_COUNTS)


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
    text = mm.prompt_text(_doc(B, question="What {x} is 2+2?", error_reason="Step 1: {y} 2+2=5."), stage)
    assert hashlib.sha256(text.encode()).hexdigest() == OFFICIAL_PROMPT_SHA256[stage]


def test_prompt_wording_and_letter_order():
    doc = _doc(B, question="Q?", error_reason="Step 1: r.")
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
    ("B", "B"),
    ("b", "B"),
    ("**B**", "B"),
    ("(B)", "B"),
    ("B.", "B"),
    ("B)", "B"),
    ("`B`", "B"),
    ("\\boxed{B}", "B"),
    ("$\\boxed{\\text{B}}$", "B"),
    ("<|begin_of_box|>C<|end_of_box|>", "C"),
    ("Answer: C", "C"),
    ("Final answer: D", "D"),
    ("Final Answer - C", "C"),
    ("Output: B", "B"),
    ("Let me look at step 2.\nB", "B"),
    ("B_Reasoning_Error", "B"),
    ("  D_Knowledge_Deployment_Error\n", "D"),
    ("<think>It could be A.\nA</think>\nC", "C"),  # a reasoning block never counts
    ("**Answer:** B", "B"),
    # robust beyond the official tolerance (the core rules found nothing; tests/data/answer_corpus/mmerror.jsonl)
    ("I think the answer is B", "B"),
    ("The answer is C.", "C"),
    ("Option D", "D"),
    ("Answer: (A)", "A"),
    ("Answer: the reasoning error", "B"),
    ("B_Reasoning_Error because step 2 is wrong", "B"),
    ("Reasoning Error", "B"),
    ("B: Reasoning error", "B"),
    ("A. A_Visual_Perception_Error", "A"),
    ("answer: b", "B"),
    ("\uff22", "B"),
    ("\\text{C}", "C"),
    ("I would choose option C.", "C"),
    ("It is a knowledge application error.", "D"),
    # still unparseable: no answer, two answers, or a letter outside the options
    ("A or B", None),
    ("A\nB", None),
    ("E", None),
    ("N", None),
    ("Answer: E", None),
    ("maybe C?", None),
    ("Not a visual perception error but a reasoning error", None),  # two names: not guessed
    ("the answer is a reasoning-heavy one", None),  # lowercase "a" is an article, not option A
    ("", None),
    ("   ", None),
    ("<think>B", None),  # unfinished thinking is no answer
    ("<think>The answer is B", None),
    (None, None),
    ("A" * 100_000, None),
]


@pytest.mark.parametrize("reply, letter", TYPE_CASES)
def test_type_parser(reply, letter):
    parsed = mm.parse_type(reply)
    assert parsed.value == letter, parsed
    assert parsed.ok == (letter is not None)


PRESENCE_CASES = [
    ("P", "P"),
    ("N", "N"),
    ("n", "N"),
    ("N.", "N"),
    ("**N**", "N"),
    ("(N)", "N"),
    ("\\boxed{P}", "P"),
    ("Answer: N", "N"),
    ("Output: P", "P"),
    ("<think>hmm, step 2?</think>N", "N"),
    ("No Error", "N"),
    ("no error.", "N"),
    ("Error Present", "P"),
    ("none", "N"),
    ("Error", "P"),
    # a reply that opens with a plain sentence saying so, and says nothing against it
    ("There is no error.", "N"),
    ("There is no error in the reasoning.", "N"),
    ("The reasoning is correct.", "N"),
    ("Yes, there is an error in step 3.", "P"),
    ("The reasoning contains an error.", "P"),
    ("No Error. Every step follows from the image.", "N"),
    ("Answer: Error Present", "P"),
    ("\uff2e", "N"),
    # decision: "no error" inside a longer or qualified reply is not read (the official parser would say N)
    ("The reasoning has no error present", None),
    ("No error in step 1, but step 3 misreads the axis.", None),
    ("There is no error in the arithmetic, but the chart is misread.", None),
    ("Y", None),
    ("PN", None),
    ("P or N", None),
    ("A", None),
    ("", None),
]


@pytest.mark.parametrize("reply, letter", PRESENCE_CASES)
def test_presence_parser(reply, letter):
    assert mm.parse_presence(reply).value == letter


@pytest.mark.parametrize(
    "spelling, letter",
    [
        ("A_Visual_Perception_Error", "A"),
        ("B_Reasoning_Error", "B"),
        ("C_Question_Comprehension_Error", "C"),
        ("D_Knowledge_Deployment_Error", "D"),
        ("D_Knowledge_Application_Error", "D"),
        ("Knowledge Deficiency Error", "D"),
        ("visual perception error", "A"),
        ("E_NoError", "E"),
        ("No Error", "E"),
        ("C", "C"),
        ("Spelling Error", None),
        ("", None),
        # read as the official loader does (issue 30): the first class in its order, or an opening letter
        ("Visual Reasoning Error", "A"),
        ("Reasoning about the question", "B"),
        ("b", "B"),
    ],
)
def test_gold_labels_are_read_by_keyword(spelling, letter):
    assert mm.label_letter(spelling) == letter


# ------------------------------------------------------------------------------------------ scoring


def _doc(label, domain="M", qid="q", subdomain="s", stage=None, question="Q?", error_reason="Step 1: r."):
    """A doc as the loader writes it (its typed record's columns)."""
    return Record(
        question_id=qid,
        question=question,
        correct_answer="4",
        error_reason=error_reason,
        label=label,
        label_raw=label,
        domain=domain,
        subdomain=subdomain,
        json_path="",
        image_path="",
        stage=stage,
    ).columns()


def run_etc(pairs):
    per_doc = [mm.process_results_etc(d, [r]) for d, r in pairs]
    return {m: getattr(mm, f"agg_{m}")([x[m] for x in per_doc]) for m in ETC_METRICS}


def run_epd(samples, order=None):
    """samples: (label, domain, stage-1 reply, stage-2 reply) -> aggregated EPD metrics."""
    per_doc = []
    for i, (label, domain, first, second) in enumerate(samples):
        per_doc.append(mm.process_results_epd(_doc(label, domain, f"q{i}", stage="presence"), [first]))
        per_doc.append(mm.process_results_epd(_doc(label, domain, f"q{i}", stage="type"), [second]))
    if order:
        per_doc = [per_doc[i] for i in order]
    return {m: getattr(mm, f"agg_{m}")([x[m] for x in per_doc]) for m in EPD_METRICS}


def test_etc_metrics_by_hand():
    pairs = [
        (_doc(A, "M"), "A"),  # right
        (_doc(A, "M"), "Answer: B"),  # wrong
        (_doc(B, "P"), "\\boxed{B}"),  # right
        (_doc(C, "P"), "maybe C?"),  # unparseable -> wrong, counted
        (_doc(D, "P"), "D"),  # right
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


@pytest.mark.parametrize(
    "template, process, doc",
    [
        (ETC_TEMPLATE, mm.process_results_etc, _doc(B)),
        (EPD_TEMPLATE, mm.process_results_epd, _doc(B, stage="presence")),
        (EPD_TEMPLATE, mm.process_results_epd, _doc(E, stage="type")),
    ],
)
def test_process_results_fills_exactly_the_spec_metric_list(template, process, doc):
    # the spec alone names the metrics: process_results adds none and leaves none out (the run-wide
    # skipped counts appear only on a doc that carries a skipped stamp)
    from lmms_eval_plugins.benchmark import with_run_counts  # the list as the spec holds it: counts appended

    got = process(doc, ["B"])
    assert set(got) == {m.name for m in with_run_counts(template)} - {"skipped", "skipped_by_reason"}


def test_a_metric_of_both_tasks_has_one_aggregation():
    # both YAMLs call the one hook utils.agg_<name>: an aggregation differing by task would be lost
    epd = {m.name: m.aggregate for m in EPD_TEMPLATE}
    shared = [m for m in ETC_TEMPLATE if m.name in epd]
    assert len(shared) == len(ETC_TEMPLATE)
    assert all(m.aggregate is epd[m.name] for m in shared), [m.name for m in shared if m.aggregate is not epd[m.name]]


def test_etc_item_carries_the_headline_zero_or_one_under_the_score_key():
    # the YAML's score_key (accuracy) and `score`: what lmms-eval's clustered error and --baseline read
    right, wrong = (mm.process_results_etc(_doc(B), [r])["accuracy"] for r in ("B", "C"))
    assert (right["accuracy"], right["score"], wrong["accuracy"], wrong["score"]) == (1.0, 1.0, 0.0, 0.0)


EPD_SAMPLES = [  # label, domain, stage-1 reply, stage-2 reply
    (A, "M", "P", "A"),  # q0 right
    (B, "M", "P", "C"),  # q1 wrong type
    (C, "X", "N", "C"),  # q2 says no error: predicts E_NoError, wrong (stage 2 is never consulted)
    (D, "X", "yes?", "D"),  # q3 stage 1 unparseable: wrong, whatever stage 2 says
    (E, "X", "N", "garbage"),  # q4 right; its stage 2 is never consulted, so not a parse failure
    (E, "M", "P", "B"),  # q5 false alarm: predicts B_Reasoning_Error, wrong
    (A, "M", "**P**", "hmm"),  # q6 stage 2 unparseable after P: wrong, counted
]


def test_epd_replay_by_hand():
    outcomes, incomplete = mm.replay_epd(
        [
            mm.process_results_epd(_doc(lab, dom, f"q{i}", stage=st), [r])["accuracy"]
            for i, (lab, dom, s1, s2) in enumerate(EPD_SAMPLES)
            for st, r in (("presence", s1), ("type", s2))
        ]
    )
    assert incomplete == 0
    assert [o["pred"] for o in outcomes] == [A, C, E, None, E, B, None]
    assert [o["correct"] for o in outcomes] == [True, False, False, False, True, False, False]
    assert outcomes[3]["parse_error"].startswith("stage 1:") and outcomes[6]["parse_error"].startswith("stage 2:")


def test_epd_metrics_by_hand_in_any_request_order():
    m = run_epd(EPD_SAMPLES, order=[13, 0, 5, 2, 1, 7, 3, 12, 4, 6, 9, 11, 8, 10])
    assert m["accuracy"] == pytest.approx(100 * 2 / 7)  # over all 7 SAMPLES, not the 14 requests
    assert m["parse_fail"] == 2 and m["presence_parse_fail"] == 1
    assert m["no_error_rate"] == pytest.approx(100 * 2 / 7)  # q2, q4
    assert m["false_alarm_rate"] == pytest.approx(50.0)  # E samples q4 (N), q5 (P)
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
    per_doc = [
        mm.process_results_epd(_doc(A, qid="q0", stage="presence"), ["P"]),
        mm.process_results_epd(_doc(A, qid="q0", stage="type"), ["A"]),
        mm.process_results_epd(_doc(B, qid="q1", stage="presence"), ["P"]),
    ]  # e.g. --limit 3
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
    assert {(d["stage"], d["oracle_response"]) for d in clean} == {
        ("presence", "N"),
        ("type", "A"),
    }  # stage 2 of a clean sample is never scored
    assert {d["oracle_response"] for d in epd if d["label"] != E and d["stage"] == "presence"} == {"P"}
    assert all(d["chance_responses"] == ["P", "N"] for d in epd if d["stage"] == "presence")


def test_docs_hold_no_json_text_and_read_back_as_typed_records():
    source = mm.resolve_source("mmerror", "sample", sample_dir=mm.SAMPLE_DIR, hub_repo=None, local_layout="")
    loaded = {r["question_id"]: r for r in mm.load_records(source)}
    for task in ("etc", "epd"):
        dataset = (mm.process_docs_etc if task == "etc" else mm.process_docs_epd)(
            [{"benchmark": "mmerror", "source": "sample"}]
        )
        assert json_text_columns(dataset) == {}, task  # plain strings and integers (issue 28)
        for d in dataset:
            record = mm.record_of(d)
            expected = (
                Record.of(loaded[d["question_id"]], official_not_asked=3)
                if task == "etc"
                else Record.of(loaded[d["question_id"]], stage=d["stage"])
            )
            assert isinstance(record, Record) and record == expected
    # the hooks read the doc through the record: a doc missing a field is a named error, not a KeyError
    doc = _doc(B)
    with pytest.raises(DataError, match="lacks the field.*image_path"):
        mm.score_etc({k: v for k, v in doc.items() if k != "image_path"}, "B")
    with pytest.raises(DataError, match="no stage"):
        mm.score_epd_stage(doc, "P")


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
    return {
        "question_id": "MMErroR_00001",
        "question": "Q?",
        "correct_answer": "1",
        "error_reason": "Step 1: r.",
        "label": "B_Reasoning_Error",
        "domain": "M",
        "subdomain": "s",
        **overrides,
    }


def _load(folder: Path):
    return mm.load_records(mm.resolve_source("mmerror", "sample", sample_dir=folder, hub_repo=None, local_layout=""))


@pytest.mark.parametrize(
    "record, message",
    [
        (_record(label="Spelling Error"), "matches none"),
        ({k: v for k, v in _record().items() if k != "error_reason"}, "missing field(s) error_reason"),
        (_record(question=["a", "list"]), "not a string"),
    ],
)
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
    records = _load(tmp_path)
    assert [r["question_id"] for r in records] == ["MMErroR_00002"] and records.skipped == {"missing media": 1}


def test_local_root_and_hub_read_the_same_layout(tmp_path, monkeypatch):
    shutil.copytree(mm.SAMPLE_DIR, tmp_path / "root" / "mmerror")
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path / "root"))
    local = mm.load_records(
        mm.resolve_source("mmerror", "auto", sample_dir=mm.SAMPLE_DIR, hub_repo=mm.HUB_REPO, local_layout="")
    )
    assert len(local) == 12

    monkeypatch.delenv("LMMS_EVAL_PLUGINS_DATA_ROOT")
    calls = []

    def fake_snapshot(repo, allow_patterns=None):
        calls.append((repo, allow_patterns))
        return tmp_path / "root" / "mmerror"

    monkeypatch.setattr(mm, "hub_snapshot", fake_snapshot)
    hub = mm.load_records(
        mm.resolve_source("mmerror", "auto", sample_dir=mm.SAMPLE_DIR, hub_repo=mm.HUB_REPO, local_layout="")
    )
    assert calls == [("s-u-do/mmerror-benchmark", ["data/jsons/*", "data/images/*"])]
    assert [r["question_id"] for r in hub] == [r["question_id"] for r in local]


# ------------------------------------------------------------------------------------------ official parity

OFFICIAL_TYPE_CASES = [  # reply, the official normalize_label's letter (checked by running it, commit b5fc9f8)
    ("A\nAnswer: B", "A"),  # bare-letter lines come before Answer: lines
    ("Answer: A\nAnswer: B", None),  # Answer: lines must agree
    ("Answer: B\nFinal answer: B", "B"),
    ("[B]", None),
    ("b_reasoning_error", None),
    ("B_Reasoning_Error", "B"),
    ("Answer: b", "B"),
    ("(c).", "C"),
    ("**B**", "B"),
    ("$B$", "B"),
    ("\\boxed{B}", "B"),
    ("\\boxed{\\text{B}}", "B"),
    ("\\boxed{A} or \\boxed{B}", None),
    ("<think>A</think>B", None),  # tags removed, content kept: "AB"
    ("<think>\nA\n</think>\nA", "A"),
    ("<think>\nA\n</think>\nB", None),
    ("The answer is B.", None),
    ("Option B", None),
    ("Ｂ", None),
    ("", None),
    (None, None),
    ("B" + " " * 50_000 + "x", None),  # linear where the official regular expression backtracks
]


@pytest.mark.parametrize("reply, letter", OFFICIAL_TYPE_CASES)
def test_official_type_parser(reply, letter):
    assert mm.official_type(reply) == letter


OFFICIAL_PRESENCE_CASES = [
    ("P", "P"),
    ("n.", "N"),
    ("N!", "N"),
    ("**N**", None),
    ("There is no error in the reasoning.", "N"),
    ("No error in step 1, but step 3 misreads the axis.", "N"),
    ("error present", "P"),
    ("none", "N"),
    ("None.", None),
    ("Error", "P"),
    ("<think>hmm</think>N", None),
    ("Answer: N", None),
    ("", None),
]


@pytest.mark.parametrize("reply, letter", OFFICIAL_PRESENCE_CASES)
def test_official_presence_parser(reply, letter):
    assert mm.official_presence(reply) == letter


def test_etc_official_accuracies_by_hand():
    pairs = [
        (_doc(A, qid="q0"), "A"),  # both parsers: right
        (_doc(B, qid="q1"), "The answer is B."),  # robust right; official unparsed
        (_doc(A, qid="q2"), "A\nAnswer: B"),  # robust B (wrong); official A (right)
        (_doc(C, qid="q3"), "Answer: A\nAnswer: C"),  # robust C (last Answer: line); official unparsed
        (_doc(D, qid="q4"), "B"),  # both wrong
    ]
    m = run_etc(pairs)
    assert m["accuracy"] == pytest.approx(60.0) and m["parse_fail"] == 0  # q0, q1, q3 of 5
    assert m["official_parse_fail"] == 2  # q1, q3
    assert m["official_accuracy"] == pytest.approx(100 * 2 / 3)  # q0, q2 of the 3 parsed
    assert m["official_strict_accuracy"] == pytest.approx(40.0)  # q0, q2 of all 5
    item = mm.process_results_etc(_doc(A), ["A\nAnswer: B"])["accuracy"]
    assert item["official_pred"] == A and item["official_correct"] is True and item["pred"] == B


def test_the_official_runners_failure_string_is_a_failed_etc_reply():
    # issue 37 case 7: mmerror_eval/runner.py takes an ETC reply holding "Failed to obtain answer via API" as
    # a failure even when a letter parses; the official numbers do the same (robust still reads the letter)
    pairs = [
        (_doc(A, qid="q0"), "A"),  # right
        (_doc(B, qid="q1"), "B. Failed to obtain answer via API."),  # official: a failure, not B
        (_doc(C, qid="q2"), "Failed to obtain answer via API. "),  # official: a failure
    ]
    m = run_etc(pairs)
    assert m["official_parse_fail"] == 2 and m["official_accuracy"] == pytest.approx(100.0)  # q0 of the 1 read
    assert m["official_strict_accuracy"] == pytest.approx(100 / 3)
    assert m["accuracy"] == pytest.approx(200 / 3)  # robust reads q1's B


def test_epd_official_accuracies_replay_both_stages_with_the_official_parser():
    samples = [  # label, domain, stage 1, stage 2
        (A, "M", "P", "A"),  # right in both
        (E, "M", "There is no error in the reasoning.", "A"),  # official N -> E_NoError, right; robust N too
        (C, "M", "No error in step 1, but step 3 is wrong.", "C"),  # official N (wrong); robust unparsed
        (B, "M", "**P**", "B"),  # official stage 1 unparsed; robust right
        (D, "M", "P", "[D]"),  # official stage 2 unparsed; robust right
        (A, "M", "P", "A\nAnswer: C"),  # official A (right); robust C (wrong)
    ]
    m = run_epd(samples)
    assert m["accuracy"] == pytest.approx(100 * 4 / 6) and m["parse_fail"] == 1
    assert m["official_parse_fail"] == 2
    assert m["official_accuracy"] == pytest.approx(100 * 3 / 4)  # q0, q1, q5 of the 4 parsed
    assert m["official_strict_accuracy"] == pytest.approx(50.0)  # q0, q1, q5 of 6
    # the robust numbers are those of the replay without the official parser
    outcomes, _ = mm.replay_epd(
        [
            x["accuracy"]
            for x in (
                mm.process_results_epd(_doc(lab, dom, f"q{i}", stage=st), [r])
                for i, (lab, dom, s1, s2) in enumerate(samples)
                for st, r in (("presence", s1), ("type", s2))
            )
        ],
        official=True,
    )
    assert [o["pred"] for o in outcomes] == [A, E, E, None, None, A]
    assert outcomes[3]["parse_error"].startswith("stage 1:") and outcomes[4]["parse_error"].startswith("stage 2:")


def test_official_accuracy_is_0_when_nothing_parsed_as_the_official_report_prints():
    # issue 30: the official report prints accuracy 0.0 when its parser read nothing (not NaN);
    # official_parse_fail says why, and official_strict_accuracy is 0
    m = run_etc([(_doc(A, qid="q0"), "The answer is A."), (_doc(B, qid="q1"), "[B]")])
    assert m["official_accuracy"] == 0.0 and m["official_strict_accuracy"] == 0.0 and m["official_parse_fail"] == 2
    assert m["accuracy"] == 100.0  # the robust parser reads both
    assert mm.agg_official_accuracy([]) == 0.0 and mm.agg_official_strict_accuracy([]) == 0.0
    epd = run_epd([(A, "M", "**P**", "A")])
    assert epd["official_accuracy"] == 0.0 and epd["official_parse_fail"] == 1


def test_etc_official_strict_accuracy_counts_the_unasked_no_error_records():
    # the case: three right answers plus one E_NoError record, which ETC never asks:
    # official strict_accuracy 3/4 = 75.0, accuracy 3/3 = 100.0
    docs = [{**_doc(label, qid=f"q{i}"), "official_not_asked": 1} for i, label in enumerate((A, B, C))]
    m = run_etc([(d, d["label"][0]) for d in docs])
    assert m["official_strict_accuracy"] == 75.0 and m["official_accuracy"] == 100.0 and m["accuracy"] == 100.0
    # issue 37 case 6: official_parse_fail is the official dataset_total - scored_total = 4 - 3 = 1 (was 0)
    assert m["official_parse_fail"] == 1
    unread = run_etc([(docs[0], "A"), (docs[1], "[B]"), (docs[2], "The answer is C.")])  # 2 unread + 1 unasked
    assert unread["official_parse_fail"] == 3 and unread["official_strict_accuracy"] == 25.0
    # a run stored before the count was logged reads as none left out
    old = [
        {
            k: v
            for k, v in mm.process_results_etc(d, [d["label"][0]])["official_strict_accuracy"].items()
            if k != "official_not_asked"
        }
        for d in docs
    ]
    assert mm.agg_official_strict_accuracy(old) == 100.0


def _spec_metric(task_yaml, name):
    from lmms_eval_plugins.benchmarks.mmerror.spec import BENCHMARK

    return next(m for m in BENCHMARK.metric_lists[task_yaml] if m.name == name)


def test_official_accuracy_error_bar_is_a_bootstrap():
    from lmms_eval_plugins import errorbars
    from lmms_eval_plugins.benchmarks.mmerror.spec import BENCHMARK

    metric = _spec_metric("_etc_template_yaml", "official_accuracy")
    assert metric.item_score == "" and errorbars.has_error_bar(metric)  # a ratio: never the mean-of-items formula
    # 40 parsed (half right) and 40 unparsed: the bootstrap of correct/parsed, about 100*sqrt(.25/40) = 7.9
    replies = [(_doc(A, qid=f"q{i}"), "A" if i % 2 else "B") for i in range(40)]
    replies += [(_doc(A, qid=f"u{i}"), "[A]") for i in range(40)]
    items = [mm.process_results_etc(d, [r])["official_accuracy"] for d, r in replies]
    se = errorbars.metric_stderr(BENCHMARK, metric, mm.agg_official_accuracy, items, iterations=400)
    assert se == pytest.approx(100 * math.sqrt(0.25 / 40), rel=0.2)
    # nothing parsed: every resample is the official 0.0, so no spread
    unparsed = [mm.process_results_etc(_doc(A, qid=f"u{i}"), ["[A]"])["official_accuracy"] for i in range(20)]
    assert errorbars.metric_stderr(BENCHMARK, metric, mm.agg_official_accuracy, unparsed, iterations=200) in (None, 0.0)


def test_official_strict_accuracy_error_bar():
    from lmms_eval_plugins import errorbars
    from lmms_eval_plugins.benchmarks.mmerror.spec import BENCHMARK

    etc = _spec_metric("_etc_template_yaml", "official_strict_accuracy")
    # ETC: not a mean of items (the unasked E_NoError records join the denominator): a bootstrap
    assert etc.item_score == "" and errorbars.has_error_bar(etc)
    items = [
        mm.process_results_etc(_doc(A, qid=f"q{i}"), ["A" if i % 4 == 0 else "[A]"])["official_strict_accuracy"]
        for i in range(40)
    ]
    se = errorbars.metric_stderr(BENCHMARK, etc, mm.agg_official_strict_accuracy, items, iterations=400)
    assert se == pytest.approx(100 * math.sqrt(0.25 * 0.75 / 40), rel=0.25)
    assert _spec_metric("_epd_template_yaml", "official_strict_accuracy").item_score == ""  # EPD: replayed, bootstrap


def test_official_metrics_are_null_while_a_request_failed():
    failed = "[LMMS_EVAL_REQUEST_FAILED after 5 retries] Connection error."
    m = run_etc([(_doc(A, qid="q0"), "A"), (_doc(B, qid="q1"), failed)])
    assert m["official_accuracy"] is None and m["official_strict_accuracy"] is None and m["official_parse_fail"] is None
    epd = run_epd([(A, "M", "P", "A"), (B, "M", failed, "B")])
    assert epd["official_accuracy"] is None and epd["official_strict_accuracy"] is None
