"""ViRectify: parsing, metrics (by hand), aggregation layout, records, prompts and the reflection setting."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmms_eval_plugins.errors import DataError, MediaError
from lmms_eval_plugins.judges import JudgeOutcome
from lmms_eval_plugins import media
from lmms_eval_plugins.benchmarks.virectify.records import Gold
from lmms_eval_plugins.benchmarks.virectify.sample_data import make_virectify
from lmms_eval_plugins.benchmarks.virectify.spec import REFLECT_TEMPLATE, TEMPLATE
from lmms_eval_plugins.task_hooks import RUN_COUNTS
from testkit.doc_columns import json_text_columns
from testkit.task_utils import load_task_utils

vr = load_task_utils("virectify")
SAMPLE_ROW = {
    "benchmark": "virectify",
    "source": "sample",
    "num_frames": 32,
    "max_long_side": 448,
    "visual_mode": "interleaved",
}
REFLECT_ROW = {**SAMPLE_ROW, "hints": ["error_identify", "rationale"]}
# The metrics each task's items are scored under (the run-wide counts are the core's).
METRICS = tuple(m.name for m in TEMPLATE if m.name not in RUN_COUNTS)
REFLECT_METRICS = tuple(m.name for m in REFLECT_TEMPLATE if m.name not in RUN_COUNTS)


@pytest.fixture(scope="module")
def sample_docs():
    return list(vr.process_docs([SAMPLE_ROW]))


def verdict(value: float | None = 1.0, *, error: str | None = None, skipped: bool = False) -> dict:
    return JudgeOutcome("semantic_match", "1", "gpt-4o", verdict=value, error=error, skipped=skipped).to_dict()


def doc(
    labels=None,
    edges=None,
    stamps=None,
    *,
    domain="dynamic_perception",
    error_type="logical",
    source="gpt-4o-injection",
    answer="B",
    id_="d",
):
    labels = labels if labels is not None else {"1": "1", "2": "0", "3": "0", "4": "0"}
    edges = edges if edges is not None else [[2, 2], [2, 3], [3, 4]]
    stamps = stamps if stamps is not None else [[12.0, 20.0], [30.0, 35.0]]
    gold = vr.Gold({int(k): v for k, v in labels.items()}, {(s, t) for s, t in edges}, [tuple(iv) for iv in stamps])
    return vr.Record(
        **_RECORD, record_id=id_, domain=domain, error_type=error_type, solution_source=source, answer=answer, gold=gold
    ).columns()


# A doc's other fields, as process_docs writes them (scoring reads them through record_of).
_RECORD = {
    "video_path": "videos/clip.mp4",
    "source_video": "videos/clip.mp4",
    "source": "",
    "question": "Q?",
    "solution": ("Step 1: a", "Step 2: b", "Step 3: c", "Step 4: d"),
    "num_frames": 32,
    "max_long_side": 448,
    "visual_mode": "interleaved",
}


def reflect_doc(kind="rationale", *, id_="d", domain="dynamic_perception", answer="B"):
    return vr.Record(
        **_RECORD,
        record_id=id_,
        domain=domain,
        error_type="logical",
        solution_source="s",
        answer=answer,
        hint=vr.Hint(kind, "Rationale: look again.", "gold"),
    ).columns()


def response(
    identify="{'step1': ['1', ''], 'step2': ['0', 'x'], 'step3': ['0', 'y'], 'step4': ['0', 'z']}",
    graph="{'step2': ['step2'], 'step3': ['step2'], 'step4': ['step3']}",
    stamps="[00:12-00:20],[00:30-00:35]",
    answer="B",
) -> str:
    parts = []
    if identify is not None:
        parts.append(f"<error_identify>{identify}</error_identify>")
    if graph is not None:
        parts.append(f"<error_graph>{graph}</error_graph>")
    if stamps is not None:
        parts.append(f"<timestamps>{stamps}</timestamps>")
    if answer is not None:
        parts.append(
            f"<rationale>Because. <answer>The correct answer should be \\boxed{{{answer}}}</answer></rationale>"
        )
    return " ".join(parts)


def run(pairs, metrics=METRICS):
    """(doc, response text, judge outcome) triples -> {metric: aggregated value} through the task's hooks."""
    per_doc = [vr.process_results(d, [{"text": text, "judge": outcome}]) for d, text, outcome in pairs]
    return {m: getattr(vr, f"agg_{m}")([x[m] for x in per_doc]) for m in metrics}


# ------------------------------------------------------------------------------------------------ metrics by hand


def test_perfect_response_scores_one_everywhere():
    item, shown = vr.score_response(doc(), response())
    assert (item["acc_i"], item["iou"], item["graph_jaccard"], item["format_ok"]) == (1.0, 1.0, 1.0, True)
    assert item["missing"] == {} and shown["answer"] == "B"
    assert shown["edges"] == ["step2->step2", "step2->step3", "step3->step4"]


def test_step_accuracy_missing_steps_are_wrong_and_extra_steps_ignored():
    # gold 1,0,0,0; predicted step1 right, step2 right, step3 wrong, step4 missing, step9 extra -> 2/4
    text = response(identify="{'step1': ['1', ''], 'step2': ['0', 'x'], 'step3': ['1', ''], 'step9': ['0', 'extra']}")
    assert vr.score_response(doc(), text)[0]["acc_i"] == pytest.approx(0.5)


def test_graph_with_a_cycle_by_hand():
    # gold {2->2, 2->3}; predicted a cycle step2 <-> step3: {3->2, 2->3}. Intersection {2->3} (1),
    # union {2->2, 2->3, 3->2} (3) -> 1/3.
    gold = [[2, 2], [2, 3]]
    text = response(graph='{"step2": ["step3"], "step3": ["step2"]}')
    assert vr.score_response(doc(edges=gold), text)[0]["graph_jaccard"] == pytest.approx(1 / 3)


def test_edge_set_definition():
    # each source s listed under key t is the edge (s, t); self-loops count; repeats count once
    assert vr.graph_edges({"step2": ["step2"], "step3": ["step2", "Step 2", 2], "step4": []}) == {(2, 2), (2, 3)}
    assert vr.graph_edges({"step1": "step3, step2", "x": ["step1"]}) == {(3, 1), (2, 1)}
    assert vr.edge_jaccard(set(), set()) == 1.0  # two empty graphs are identical
    assert vr.edge_jaccard(set(), {(1, 1)}) == 0.0
    assert vr.edge_jaccard(None, set()) == 0.0  # unreadable graph: 0 even against an empty gold


def test_gold_annotation_reaches_scoring_as_written(sample_docs):
    # a doc carries the gold as Arrow-native lists of structs; the typed record read back is the loader's
    record = {"labels": {2: "0", 1: "1"}, "edges": {(2, 3), (2, 2)}, "intervals": [(12.0, 20.0), (30.5, 35.0)]}
    columns = vr.gold_columns(record)
    assert columns == {
        "gold_labels": [{"step": 1, "label": "1"}, {"step": 2, "label": "0"}],
        "gold_edges": [{"source": 2, "target": 2}, {"source": 2, "target": 3}],
        "gold_timestamps": [{"start": 12.0, "end": 20.0}, {"start": 30.5, "end": 35.0}],
    }
    assert vr.gold_of(columns) == ({1: "1", 2: "0"}, {(2, 2), (2, 3)}, [(12.0, 20.0), (30.5, 35.0)])
    # through a dataset row, as lmms-eval hands a doc back: exact floats, and an edgeless graph keeps its type
    odd = {"labels": {1: "0"}, "edges": set(), "intervals": [(0.1, 1 / 3)]}
    dataset = vr.to_dataset([{"id": "x", **vr.gold_columns(odd)}], vr.gold_features())
    assert vr.gold_of(dataset[0]) == ({1: "0"}, set(), [(0.1, 1 / 3)])
    assert dataset.features["gold_edges"] == vr.gold_features()["gold_edges"]
    records = {
        r["id"]: r
        for r in vr.load_records(
            vr.resolve_source("virectify", "sample", sample_dir=vr.SAMPLE_DIR, hub_repo=None, local_layout="")
        )
    }
    for d in sample_docs:
        r = records[d["id"]]
        assert vr.gold_of(d) == (r["labels"], r["edges"], [tuple(iv) for iv in r["intervals"]])


def test_docs_hold_no_json_text_and_the_gold_reads_back_typed():
    # the check itself: a JSON list or object held as text is found, other text is not
    assert json_text_columns([{"gold_edges": "[[2, 2]]", "hint": "[not json", "solution": ["Step 1: {x}"]}]) == {
        "gold_edges": "[[2, 2]]"
    }
    records = {
        r["id"]: r
        for r in vr.load_records(
            vr.resolve_source("virectify", "sample", sample_dir=vr.SAMPLE_DIR, hub_repo=None, local_layout="")
        )
    }
    for process in (vr.process_docs, vr.process_docs_reflect):
        dataset = process([SAMPLE_ROW])
        assert json_text_columns(dataset) == {}, process.__name__
    dataset = vr.process_docs([SAMPLE_ROW])
    assert {k: dataset.features[k] for k in vr.gold_features()} == vr.gold_features()
    for d in dataset:
        gold = vr.gold_of(d)
        assert isinstance(gold, Gold) and gold.labels == records[d["id"]]["labels"]
        assert gold.edges == records[d["id"]]["edges"] and gold.intervals == records[d["id"]]["intervals"]


# The doc columns, in order: stored runs, reports, `score` and export read them by these names.
RECORD_COLUMNS = [
    "id",
    "video_path",
    "source_video",
    "domain",
    "error_type",
    "solution_source",
    "source",
    "question",
    "answer",
    "solution",
    "num_frames",
    "max_long_side",
    "visual_mode",
]
PLUMBING = ["oracle_response", "chance_responses", "skipped_records"]


def test_a_doc_is_one_typed_record_written_once_and_read_back(sample_docs):
    records = {
        r["id"]: r
        for r in vr.load_records(
            vr.resolve_source("virectify", "sample", sample_dir=vr.SAMPLE_DIR, hub_repo=None, local_layout="")
        )
    }
    main, reflect = vr.process_docs([SAMPLE_ROW]), vr.process_docs_reflect([REFLECT_ROW])
    assert main.column_names == [*RECORD_COLUMNS, "gold_labels", "gold_edges", "gold_timestamps", *PLUMBING]
    assert reflect.column_names == [*RECORD_COLUMNS, "hint_kind", "hint", "hint_source", *PLUMBING]
    for d in main:
        record = vr.record_of(d)
        assert record.columns() == {k: d[k] for k in record.columns()}  # what the reader reads is what was written
        assert record.hint is None and record.gold == vr.gold_of(d)
        r = records[record.record_id]
        assert (record.source_video, record.solution, record.num_frames, record.max_long_side, record.visual_mode) == (
            r["video"],
            tuple(r["solution"]),
            32,
            448,
            "interleaved",
        )
    kinds = []
    for d in reflect:
        record = vr.record_of(d)
        assert record.columns() == {k: d[k] for k in record.columns()} and record.gold is None
        kinds.append(record.hint.kind)
        assert record.hint.source == "gold" and record.hint.text == d["hint"]
    assert kinds == ["error_identify", "rationale"] * 12


@pytest.mark.parametrize(
    "edit, named",
    [
        (lambda d: d.pop("video_path"), "lacks the field 'video_path'"),
        (lambda d: d.pop("gold_labels"), "lacks gold_labels (a virectify doc) or hint_kind"),
        (lambda d: d.update(num_frames="many"), "num_frames 'many' is not a whole number >= 1"),
        (lambda d: d.update(max_long_side=-1), "max_long_side -1"),
        (lambda d: d.update(solution="Step 1: a"), "solution is not a list of step texts"),
        (lambda d: d.update(question=None), "question is NoneType, not text"),
        (lambda d: d.update(domain="cooking"), "domain 'cooking' is none of dynamic_perception"),
        (lambda d: d.update(visual_mode="gif"), "visual_mode 'gif' is none of interleaved, video"),
        (lambda d: d.update(gold_labels=[{"step": 1, "label": "yes"}]), "a label other than '0' or '1'"),
        (lambda d: d.update(gold_timestamps=[{"start": "soon", "end": 2.0}]), "could not convert string to float"),
        (lambda d: d.update(hint_kind="answer", hint="h", hint_source="gold"), "hint_kind 'answer' is none of"),
    ],
)
def test_a_doc_missing_or_garbling_a_field_is_a_data_error_naming_the_record(edit, named):
    bad = doc(id_="vr-007")
    edit(bad)
    with pytest.raises(DataError, match="vr-007") as raised:
        vr.record_of(bad)
    assert named in str(raised.value) and "process_docs" in str(raised.value)
    # every reader goes through record_of: scoring, the judge item and the prompt name the record alike
    for read in (
        lambda: vr.score_response(bad, response()),
        lambda: vr.judge_item(response(), bad),
        lambda: vr.prompt_text(bad),
    ):
        with pytest.raises(DataError, match="vr-007"):
            read()


def test_a_doc_of_one_task_scored_by_the_other_is_a_data_error():
    with pytest.raises(DataError, match="virectify_reflect doc reached the scoring of virectify") as raised:
        vr.process_results(reflect_doc(id_="r-1"), [{"text": response(), "judge": verdict()}])
    assert "r-1" in str(raised.value)
    with pytest.raises(DataError, match="virectify doc reached the scoring of virectify_reflect"):
        vr.process_results_reflect(doc(id_="m-1"), [{"text": response(), "judge": verdict()}])
    with pytest.raises(ValueError, match="either the gold"):  # a record carries exactly one of the two
        vr.Record(
            **_RECORD, record_id="x", domain="dynamic_perception", error_type="logical", solution_source="s", answer="B"
        )


def test_overlapping_predicted_intervals_by_hand():
    # predicted [10,20] and [15,25] merge to [10,25] (15 s); gold [12,20] + [30,35] (13 s);
    # intersection [12,20] = 8 s; union 15 + 13 - 8 = 20 s -> IoU 0.4
    text = response(stamps="[00:10-00:20], [00:15-00:25]")
    assert vr.score_response(doc(), text)[0]["iou"] == pytest.approx(0.4)


def test_output_without_timestamps_scores_zero_iou_only_and_says_why():
    item, _ = vr.score_response(doc(), response(stamps=None))
    assert item["iou"] == 0.0 and item["acc_i"] == 1.0 and item["graph_jaccard"] == 1.0
    assert item["missing"] == {"timestamps": "no <timestamps> tag"} and item["format_ok"] is False


@pytest.mark.parametrize(
    "stamps, iou",
    [
        ("[00:12-00:20],[00:30-00:35]", 1.0),
        ("[0:00:12-0:00:20], [0:00:30-0:00:35]", 1.0),  # hh:mm:ss
        ("[12-20], [30-35]", 1.0),  # seconds
        ("[12s-20s],[30s-35s]", 1.0),
        ("[00:20-00:12],[00:35-00:30]", 1.0),  # reversed ends are normalised
        ("[00:12-00:20]", 8 / 13),
        ("[01:00-01:10]", 0.0),
    ],
)
def test_timestamp_formats(stamps, iou):
    assert vr.score_response(doc(), response(stamps=stamps))[0]["iou"] == pytest.approx(iou)


def test_aggregation_by_hand_and_breakdown_layout():
    d1 = doc(domain="dynamic_perception", error_type="logical", source="gpt-4o-injection", id_="a")
    d2 = doc(domain="scientific_reasoning", error_type="hallucination", source="Qwen2.5-VL-7B", id_="b")
    d3 = doc(domain="scientific_reasoning", error_type="logical", source="Qwen2.5-VL-7B", id_="c")
    pairs = [
        (d1, response(), verdict(1.0)),  # acc_i 1, iou 1, graph 1, right
        (d2, response(stamps=None, graph=None), verdict(0.0)),  # acc_i 1, iou 0, graph 0, wrong
        (
            d3,
            response(identify="{'step1': ['0', 'x']}", answer=None),
            verdict(None, skipped=True),
        ),  # acc_i 0, no answer
    ]
    m = run(pairs)
    assert m["acc_i"] == pytest.approx(100 * 2 / 3)
    assert m["iou"] == pytest.approx(100 * 2 / 3)
    assert m["graph_jaccard"] == pytest.approx(100 * 2 / 3)
    assert m["acc_r"] == pytest.approx(100 / 3)  # the missing boxed answer is the model's failure: 0, not an error
    assert m["format_rate"] == pytest.approx(100 / 3)
    assert m["acc_r_judge_errors"] == 0
    assert m["parse_fail"] == {"error_identify": 0, "error_graph": 1, "timestamps": 1, "rationale": 1, "answer": 1}
    assert list(m["by_domain"]) == ["Dynamic Perception", "Scientific Reasoning", "Embodied Decision", "Total"]
    assert m["by_domain"]["Dynamic Perception"] == {"acc_i": 100.0, "iou": 100.0, "acc_r": 100.0, "n": 1}
    assert m["by_domain"]["Scientific Reasoning"] == {"acc_i": 50.0, "iou": 50.0, "acc_r": 0.0, "n": 2}
    assert m["by_domain"]["Embodied Decision"] == {"acc_i": None, "iou": None, "acc_r": None, "n": 0}
    assert m["by_domain"]["Total"]["acc_r"] == pytest.approx(100 / 3) and m["by_domain"]["Total"]["n"] == 3
    assert list(m["by_error_type"]) == [
        "Logical",
        "Visual Perception",
        "Question Misunderstanding",
        "Hallucination",
        "Total",
    ]
    assert m["by_error_type"]["Logical"]["acc_i"] == 50.0 and m["by_error_type"]["Hallucination"]["n"] == 1
    assert list(m["by_solution_source"]) == ["Qwen2.5-VL-7B", "gpt-4o-injection", "Total"]


def test_a_judge_error_makes_acc_r_unscored_and_never_raises(monkeypatch):
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_JUDGE_MAX_ERROR_RATE", raising=False)
    outcomes = [verdict(1.0)] * 15 + [verdict(0.0)] * 4
    pairs = [(doc(id_=str(i)), response(), o) for i, o in enumerate(outcomes)]
    clean = run(pairs, ("acc_r", "acc_i", "acc_r_judge_errors", "by_domain", "unscored"))
    assert clean["acc_r"] == pytest.approx(100 * 15 / 19) and clean["unscored"] == 0
    # two judge errors in 21 (10%, above the old 5% threshold): no exception, whatever the rate
    m = run(
        pairs
        + [
            (doc(id_="x"), response(), verdict(None, error="HTTP 500")),
            (doc(id_="y"), response(), verdict(None, error="timeout")),
        ],
        ("acc_r", "acc_i", "iou", "acc_r_judge_errors", "by_domain", "unscored"),
    )
    assert m["acc_r"] is None and m["by_domain"] is None  # the verdict-based metrics wait for `score`
    assert m["acc_i"] == clean["acc_i"] and m["iou"] is not None  # the others do not need the judge
    assert m["unscored"] == 2 and m["acc_r_judge_errors"] == 2


def test_unjudged_response_is_a_judge_error_not_a_zero():
    out = vr.process_results(doc(), [response()])  # a plain string: the filter did not run
    assert out["acc_r"]["judge"]["error"] and out["acc_i"]["acc_i"] == 1.0


def test_what_was_parsed_is_logged_once_under_format_rate():
    out = vr.process_results(doc(), [{"text": response(stamps=None), "judge": verdict()}])
    assert [m for m, item in out.items() if "parsed" in item] == ["format_rate"]
    assert out["format_rate"]["parsed"]["timestamps"] is None and out["format_rate"]["parsed"]["answer"] == "B"
    assert out["acc_i"]["missing"] == out["format_rate"]["missing"] == {"timestamps": "no <timestamps> tag"}


def test_metrics_live_in_the_spec_alone():
    # every metric brings its aggregation (the run-wide counts are the core's), and utils.py is the generated one
    from lmms_eval_plugins.benchmarks.virectify import tasks
    from lmms_eval_plugins.task_hooks import utils_source

    assert all(m.aggregate is not None or m.name in RUN_COUNTS for m in (*TEMPLATE, *REFLECT_TEMPLATE))
    assert (vr.SAMPLE_DIR.parent / "utils.py").read_text() == utils_source(
        "virectify", "lmms_eval_plugins.benchmarks.virectify"
    )
    assert not any(name.startswith("agg_") or name in METRICS for name in vars(tasks))


# ------------------------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    "identify, labels",
    [
        ('{"step1": ["1", ""], "step2": ["0", "bad"]}', {1: "1", 2: "0"}),
        ("{'step1': ['1', ''], 'step2': ['0', 'bad'],}", {1: "1", 2: "0"}),  # Python quotes, trailing comma
        (
            "{ \u2018step1\u2019: [\u20191\u2019, \u201d], \u2018step2\u2019: [\u20190\u2019, \u2019bad\u2019],}",
            {1: "1", 2: "0"},
        ),  # curly quotes
        ("{'Step 1': ['1', ''], 'Step 2': ['0', 'x']}", {1: "1", 2: "0"}),
        ('{"step_1": [1, ""], "STEP-2": [0, "x"]}', {1: "1", 2: "0"}),
        ('```json\n{"step1": ["1", ""]}\n```', {1: "1"}),
        (
            "{'step1': ['1', ''], 'step2': ['0', 'it's wrong: step1: 1 apple']",
            {1: "1", 2: "0"},
        ),  # broken: regex, first wins
        ("step1: correct\nstep2: incorrect because ...", {1: "1", 2: "0"}),
        ('{"step1": "1", "step2": "0"}', {1: "1", 2: "0"}),
        ("nothing here", {}),
    ],
)
def test_step_label_parsing(identify, labels):
    assert vr.parse_step_labels(identify) == labels


@pytest.mark.parametrize(
    "graph, edges",
    [
        ('{"step2": ["step2"], "step3": ["step2"]}', {(2, 2), (2, 3)}),
        ("{'Step 2': ['Step 2'], 'Step 3': ['Step 2', 'Step 1'],}", {(2, 2), (2, 3), (1, 3)}),
        ("{}", set()),
        ("step2: [step2] step3: [step2, step1] and then {", {(2, 2), (2, 3), (1, 3)}),
        ("no graph", None),
        ("", None),
    ],
)
def test_graph_parsing(graph, edges):
    assert vr.parse_graph(graph) == edges


def test_missing_tags_and_reasoning_blocks():
    parsed = vr.parse_response("<think><error_identify>{'step1': ['1', '']}</error_identify></think>The end.")
    assert parsed["labels"] is None and set(parsed["missing"]) == {
        "error_identify",
        "error_graph",
        "timestamps",
        "rationale",
        "answer",
    }
    # a missing closing tag runs to the next tag
    parsed = vr.parse_response(
        "<error_identify>{'step1': ['1', '']} <error_graph>{} <timestamps>[00:01-00:02] "
        "<rationale>x <answer>The correct answer should be \\boxed{C}</answer>"
    )
    assert parsed["labels"] == {1: "1"} and parsed["edges"] == set() and parsed["intervals"] == [(1.0, 2.0)]
    assert parsed["answer"] == "C" and parsed["missing"] == {}


@pytest.mark.parametrize(
    "text, answer, rationale_ok",
    [
        ("<rationale>x <answer>The correct answer should be \\boxed{B}</answer></rationale>", "B", True),
        ("<rationale>x. The correct answer should be \\boxed{4 cm}</rationale>", "4 cm", True),
        ("<rationale>x</rationale> \\boxed{7}", "7", False),  # found, but outside the rationale
        ("<rationale>The correct answer should be B</rationale>", None, False),  # no box: nothing to judge
    ],
)
def test_answer_extraction(text, answer, rationale_ok):
    parsed = vr.parse_response(text)
    assert parsed["answer"] == answer and ("rationale" not in parsed["missing"]) is rationale_ok
    item = vr.judge_item(text, doc())
    assert (item is None) is (answer is None)
    if item is not None:
        assert item.prediction == answer and item.reference == "B" and item.question == "Q?"


_TAGGY = st.text(
    alphabet=st.one_of(st.sampled_from(list("<>/{}[](),:'\"\u2019 -_.0123456789sStep\\boxed\n")), st.characters()),
    max_size=400,
)
_PIECES = st.lists(
    st.sampled_from(
        [
            "<error_identify>",
            "</error_identify>",
            "<error_graph>",
            "</error_graph>",
            "<timestamps>",
            "</timestamps>",
            "<rationale>",
            "</rationale>",
            "<answer>",
            "</answer>",
            "<think>",
            "</think>",
            "{",
            "}",
            "[",
            "]",
            "'step1'",
            "step 2",
            ": ['0', ''],",
            "\\boxed{",
            "00:12-00:20",
            "[1:00:00-9e9]",
            "'",
            '"',
            ",",
            "step999999999999",
            "9" * 5000,
            "(" * 50,
            "{'a': " * 30,
        ]
    )
    | _TAGGY,
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_PIECES)
def test_parsers_never_raise(text):
    parsed = vr.parse_response(text)
    assert set(parsed["missing"]) <= {*vr.PARTS, "answer"}
    vr.parse_step_labels(text)
    vr.parse_graph(text)
    vr.redact_answer(text)
    vr.judge_item(text, doc())
    item, _ = vr.score_response(doc(), text)
    assert all(0.0 <= item[k] <= 1.0 for k in ("acc_i", "iou", "graph_jaccard"))
    vr.process_results(doc(), [{"text": text, "judge": verdict(1.0)}])
    vr.process_results_reflect(reflect_doc(), [{"text": text, "judge": verdict()}])


@settings(max_examples=100, deadline=None)
@given(
    value=st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=30),
        st.lists(st.one_of(st.integers(), st.text(max_size=10)), max_size=4),
    )
)
def test_value_readers_never_raise(value):
    vr.step_number(value)
    vr.label_value(value)
    vr.graph_edges({"step1": value, value if isinstance(value, (str, int)) else "k": value})


def test_long_output_parses_quickly():
    import time

    text = response() + "x" * 100_000 + "<error_identify>" + "step1: [" * 5000
    start = time.perf_counter()
    vr.parse_response(text)
    assert time.perf_counter() - start < 2.0


# ------------------------------------------------------------------------------------------------ records and prompts


def test_items_from_one_source_video_are_one_error_bar_cluster(sample_docs):
    from lmms_eval_plugins.benchmark import get as get_benchmark
    from lmms_eval_plugins.errorbars import clusters_of

    spec = get_benchmark("virectify")
    records = {
        json.loads(line)["id"]: json.loads(line)["video"]
        for line in (vr.SAMPLE_DIR / "virectify.jsonl").read_text().splitlines()
    }
    items = [vr.score_response(d, "")[0] for d in sample_docs]
    assert [i["source_video"] for i in items] == [records[d["id"]] for d in sample_docs]
    clusters = clusters_of(spec, items)
    assert clusters is not None and len(set(clusters)) < len(items)  # the sample reuses clips
    reflect = list(vr.process_docs_reflect([REFLECT_ROW]))
    per_hint = [vr.process_results_reflect(d, [{"text": "", "judge": verdict()}])["acc_r"] for d in reflect]
    assert {i["source_video"] for i in per_hint} <= set(records.values()) and clusters_of(spec, per_hint) is not None
    # a run logged before items named their video: independent items, never a crash
    assert clusters_of(spec, [{**i, "source_video": None} for i in items]) is None


def test_sample_covers_every_domain_and_error_type_and_is_small(sample_docs):
    assert len(sample_docs) == 12
    assert {(d["domain"], d["error_type"]) for d in sample_docs} == {(a, b) for a in vr.DOMAINS for b in vr.ERROR_TYPES}
    assert len({d["solution_source"] for d in sample_docs}) >= 3
    assert sum(p.stat().st_size for p in vr.SAMPLE_DIR.rglob("*") if p.is_file()) < 1_000_000


def test_sample_data_regenerates_byte_for_byte(tmp_path):
    make_virectify(tmp_path)
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    shipped = sorted(p.relative_to(vr.SAMPLE_DIR) for p in vr.SAMPLE_DIR.rglob("*") if p.is_file())
    assert made == shipped
    for rel in made:
        assert (tmp_path / rel).read_bytes() == (vr.SAMPLE_DIR / rel).read_bytes(), rel


def test_oracle_response_of_every_sample_record_scores_full_marks(sample_docs):
    for d in sample_docs:
        item, shown = vr.score_response(d, d["oracle_response"])
        assert (item["acc_i"], item["iou"], item["graph_jaccard"], item["format_ok"]) == (1.0, 1.0, 1.0, True), d["id"]
        assert shown["answer"] == d["answer"]
        assert "\\boxed" not in d["oracle_response"].split("<answer>")[0]  # the gold rationale lost its own answer
    # the random model's replies are in the format too
    assert all(vr.parse_response(r)["missing"] == {} for d in sample_docs for r in d["chance_responses"])


def test_prompt_interleaves_timestamped_frames_then_the_table_11_instruction(sample_docs):
    d = sample_docs[0]
    content = vr.doc_to_messages(d)[0]["content"]
    frames = content[:-1]
    assert len(frames) == 2 * 32
    assert [c["type"] for c in frames[:4]] == ["text", "image", "text", "image"]
    labels = [c["text"] for c in frames[::2]]
    assert labels == [vr.frame_label(t) for t in vr.frame_times(d)]
    assert labels[:3] == ["[0s]", "[0.2s]", "[0.8s]"]  # 10 s at 4 fps: frames 0, 1, 3 (bin centres of 40 frames)
    text = content[-1]["text"]
    assert text.startswith("You are an expert in reasoning analysis and video question answering.")
    assert "Question: How many times does the ball bounce" in text and "Step 4: So the ball bounces 2 times." in text
    assert text.endswith("<answer>The correct answer should be \\boxed{xxx}</answer> </rationale>")
    assert text.index("Question:") < text.index("Solution:") < text.index("Output Format:")
    simple = vr.doc_to_text(d)
    assert simple.count("<image>") == 32 and simple.startswith("[0s]<image>[0.2s]<image>") and simple.endswith(text)
    assert len(vr.doc_to_visual(d)) == 32


def test_video_mode_and_frame_options():
    d = next(iter(vr.process_docs([{**SAMPLE_ROW, "num_frames": 8, "max_long_side": 64, "visual_mode": "video"}])))
    content = vr.doc_to_messages(d)[0]["content"]
    assert [c["type"] for c in content] == ["text", "video", "text"]
    assert len(content[1]["url"]) == 8 and content[1]["url"][0].size == (64, 48)
    assert content[0]["text"].startswith("The video's frames, sampled at [0.5s], ")
    with pytest.raises(DataError):
        vr.process_docs([{**SAMPLE_ROW, "visual_mode": "gif"}])


def test_frame_labels_and_clock():
    assert [vr.frame_label(t) for t in (0, 1, 2.5, 12.04)] == ["[0s]", "[1s]", "[2.5s]", "[12s]"]
    assert [vr.clock(t) for t in (0, 12, 62.5, 599, 3725)] == ["00:00", "00:12", "01:02.5", "09:59", "1:02:05"]
    assert vr.format_intervals([(12, 20), (31, 35.5)]) == "[00:12-00:20],[00:31-00:35.5]"


def test_auto_source_without_data_says_the_data_is_not_public(monkeypatch):
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_DATA_ROOT", raising=False)
    with pytest.raises(DataError) as info:
        vr.process_docs([{"benchmark": "virectify", "source": "auto"}])
    message = str(info.value)
    assert "not public yet" in message and "LMMS_EVAL_PLUGINS_DATA_ROOT" in message
    assert "virectify/virectify.jsonl" in message and "virectify/videos/" in message and "virectify_sample" in message


def test_local_data_root(tmp_path, monkeypatch):
    shutil.copytree(vr.SAMPLE_DIR, tmp_path / "virectify")
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path))
    docs = list(vr.process_docs([{"benchmark": "virectify", "source": "auto"}]))
    assert len(docs) == 12 and docs[0]["video_path"].startswith(str(tmp_path.resolve()))
    assert docs[0]["num_frames"] == 32  # the default


def _records():
    return [json.loads(line) for line in (vr.SAMPLE_DIR / vr.JSONL_NAME).read_text().splitlines()]


def _load(folder: Path, records):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / vr.JSONL_NAME).write_text("\n".join(json.dumps(r) for r in records) + "\n")
    if not (folder / "videos").exists():
        shutil.copytree(vr.SAMPLE_DIR / "videos", folder / "videos")
    return vr.load_records(vr.resolve_source("virectify", "sample", sample_dir=folder, hub_repo=None, local_layout=""))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: r.update(domain="cooking"), "domain 'cooking'"),
        (lambda r: r.update(error_type="typo"), "error_type 'typo'"),
        (lambda r: r["error_identify"].update(step9=["0", "x"]), "error_identify entry 'step9'"),
        (lambda r: r["error_identify"].update(step1=["maybe", ""]), "error_identify entry 'step1'"),
        (lambda r: r.update(timestamps=[[20, 12]]), "timestamps"),
        (lambda r: r.update(solution=[]), "solution must be"),
        (lambda r: r.pop("answer"), "missing field(s) answer"),
        (lambda r: r.update(video="../../etc/passwd"), "escapes"),
        # the first sample record: 4 solution steps, a 10.0 s video
        (
            lambda r: r["error_graph"].update(step4=["step7"]),
            "error_graph names step(s) 7, but the solution has 4 step(s)",
        ),
        (lambda r: r["error_graph"].update(step9=["step2"]), "error_graph names step(s) 9"),
        (
            lambda r: r.update(timestamps=[[1.0, 4.0], [8.0, 11.5]]),
            "timestamps [(8.0, 11.5)] lie past the end of the video (10.00 s)",
        ),
        (lambda r: r.update(timestamps=[[10.0, 10.5]]), "lie past the end of the video"),
    ],
)
def test_malformed_records_name_the_record_and_the_fix(tmp_path, edit, message):
    record = _records()[0]
    edit(record)
    with pytest.raises(DataError) as info:
        _load(tmp_path / "virectify", [record])
    assert message in str(info.value) and "vr-000001" in str(info.value) and "fix:" in str(info.value)


def test_record_spellings_are_normalised(tmp_path):
    record = {
        **_records()[0],
        "domain": "Situated Decision-Making",
        "error_type": "Visual Perception Error",
        "solution": ["It drops.", "It bounces twice."],
        "error_identify": {"Step 1": ["1", ""], "step_2": [0, "x"]},
        "error_graph": {"step2": ["step2"]},
        "timestamps": "[00:01-00:04]",
    }
    (loaded,) = _load(tmp_path / "virectify", [record])
    assert loaded["domain"] == "embodied_decision" and loaded["error_type"] == "visual_perception"
    assert loaded["solution"] == ["Step 1: It drops.", "Step 2: It bounces twice."]
    assert loaded["labels"] == {1: "1", 2: "0"} and loaded["intervals"] == [(1.0, 4.0)]


def test_key_times_may_end_within_a_second_of_the_video_end(tmp_path):
    record = {**_records()[0], "timestamps": [[8.0, 10.0 + media.END_TOLERANCE_S]]}
    (loaded,) = _load(tmp_path / "virectify", [record])
    assert loaded["intervals"] == [(8.0, 11.0)]


def test_missing_video_is_an_error_naming_the_record_or_skipped(tmp_path, monkeypatch):
    records = _records()[:2]
    records[1]["video"] = "videos/gone.mp4"
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA", raising=False)
    with pytest.raises(MediaError) as info:
        _load(tmp_path / "virectify", records)
    assert "vr-000002" in str(info.value) and "gone.mp4" in str(info.value)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA", "1")
    assert [r["id"] for r in _load(tmp_path / "virectify", records)] == ["vr-000001"]


def test_duplicate_ids_are_refused(tmp_path):
    record = _records()[0]
    with pytest.raises(DataError, match="duplicate id"):
        _load(tmp_path / "virectify", [record, record])


# ------------------------------------------------------------------------------------------------ reflection (section 6.3)


def test_reflection_docs_hold_gold_hints_without_the_answer(monkeypatch):
    monkeypatch.delenv(vr.HINTS_ENV, raising=False)
    docs = list(vr.process_docs_reflect([REFLECT_ROW]))
    assert len(docs) == 24 and [d["hint_kind"] for d in docs[:2]] == ["error_identify", "rationale"]
    identify, rationale = docs[0], docs[1]
    assert identify["hint"].startswith('Error identification:\n{"step1": ["1", ""], "step2": ["0", "The ball touches')
    assert rationale["hint"].startswith("Key timestamps: [00:01-00:04],[00:05-00:07]\nRationale: At 00:01-00:04")
    assert all("boxed" not in d["hint"] and "correct answer should be" not in d["hint"] for d in docs)
    text = vr.prompt_text(rationale)
    assert "A rationale with video evidence" in text and "Step 4: So the ball bounces 2 times." in text
    assert text.endswith("<answer>The correct answer should be \\boxed{xxx}</answer>")
    assert {d["hint_source"] for d in docs} == {"gold"}


def test_reflection_scoring_by_hand():
    docs = [
        reflect_doc(kind, id_=str(i))
        for i, kind in enumerate(["error_identify", "error_identify", "rationale", "rationale"])
    ]
    texts = [
        "<answer>The correct answer should be \\boxed{B}</answer>",
        "I think A.",
        "so \\boxed{B}",
        "<answer>\\boxed{C}</answer>",
    ]
    outcomes = [verdict(1.0), verdict(None, skipped=True), verdict(1.0), verdict(0.0)]
    per_doc = [vr.process_results_reflect(d, [{"text": t, "judge": o}]) for d, t, o in zip(docs, texts, outcomes)]
    m = {k: getattr(vr, f"agg_{k}")([x[k] for x in per_doc]) for k in REFLECT_METRICS}
    assert m == {
        "acc_r": 50.0,
        "acc_r_error_identify": 50.0,
        "acc_r_rationale": 50.0,
        "acc_r_judge_errors": 0,
        "answer_parse_fail": 1,
    }
    assert per_doc[1]["acc_r"]["missing"] == {"answer": "no \\boxed{} answer"}


def test_model_generated_hints_from_a_file(tmp_path, monkeypatch):
    ids = [r["id"] for r in _records()]
    rows = [
        {
            "id": i,
            "error_identify": {"step1": ["0", "model says"]},
            "rationale": "<rationale>Look at 00:02. "
            "<answer>The correct answer should be \\boxed{Z}</answer></rationale>",
            "timestamps": "[00:02-00:03]",
        }
        for i in ids
    ]
    rows[1] = {"id": ids[1], "error_identify": "<error_identify>{'step1': ['1', '']}</error_identify>", "rationale": ""}
    path = tmp_path / "hints.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    monkeypatch.setenv(vr.HINTS_ENV, str(path))
    docs = list(vr.process_docs_reflect([REFLECT_ROW]))
    assert docs[0]["hint"] == 'Error identification:\n{"step1": ["0", "model says"]}'
    assert docs[1]["hint"] == "Key timestamps: [00:02-00:03]\nRationale: Look at 00:02."
    assert docs[2]["hint"] == "Error identification:\n{'step1': ['1', '']}" and docs[3]["hint"] == "Rationale: "
    assert docs[0]["hint_source"] == str(path)
    path.write_text("\n".join(json.dumps(r) for r in rows[1:]) + "\n")
    with pytest.raises(DataError, match="1 record\\(s\\) have no hint, e.g. vr-000001"):
        vr.process_docs_reflect([REFLECT_ROW])


def test_hints_from_logged_samples_round_trip(tmp_path, sample_docs, monkeypatch):
    samples = tmp_path / "samples.jsonl"
    # lmms-eval 0.7.3 logs no doc and no raw response: the id is in the metric items, the text in filtered_resps
    samples.write_text(
        "\n".join(
            json.dumps(
                {
                    "doc_id": i,
                    "filtered_resps": [json.dumps({"text": d["oracle_response"], "judge": {}})],
                    "acc_i": {"id": d["id"]},
                }
            )
            for i, d in enumerate(sample_docs)
        )
        + "\n"
    )
    assert vr.hints_from_samples(samples, tmp_path / "hints.jsonl") == 12
    monkeypatch.setenv(vr.HINTS_ENV, str(tmp_path / "hints.jsonl"))
    from_file = list(vr.process_docs_reflect([REFLECT_ROW]))
    monkeypatch.delenv(vr.HINTS_ENV)
    gold = list(vr.process_docs_reflect([REFLECT_ROW]))
    assert [d["hint"] for d in from_file] == [d["hint"] for d in gold]  # the oracle's output gives the gold hints


@settings(max_examples=50, deadline=None)
@given(kinds=st.lists(st.sampled_from(["right", "wrong", "error", "skipped"]), max_size=30))
def test_group_acc_r_follows_judged_mean(kinds):
    from lmms_eval_plugins.judges import judged_mean

    make = {
        "right": lambda: verdict(1.0),
        "wrong": lambda: verdict(0.0),
        "error": lambda: verdict(None, error="HTTP 500"),
        "skipped": lambda: verdict(None, skipped=True),
    }
    items = [
        vr.process_results(doc(id_=str(i)), [{"text": response(), "judge": make[k]()}])["by_domain"]
        for i, k in enumerate(kinds)
    ]
    if "error" in kinds:  # a sample without its verdict: unscored, the table waits for `score`
        assert vr.agg_by_domain(items) is None
        return
    expected = judged_mean([i["judge"] for i in items]).value_percent
    got = vr.agg_by_domain(items)["Total"]["acc_r"] if items else None
    assert (got is None and (not items or math.isnan(expected))) or got == pytest.approx(expected)
