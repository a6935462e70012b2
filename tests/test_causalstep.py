"""CausalStep: the chain replay (Algorithm 1), request expansion, prompts, scoring and aggregation.

Chains are written out by hand as (segment, kind, correct, chain length after, score after).
"""

from __future__ import annotations

import dataclasses
import filecmp
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from datasets import List, Value
from testkit.doc_columns import json_text_columns
from testkit.task_utils import load_task_utils

from lmms_eval_plugins import media
from lmms_eval_plugins.benchmarks.causalstep.chain_filter import (
    GroupAttachment,
    unpack_filtered,
)
from lmms_eval_plugins.benchmarks.causalstep.protocol import (
    CAUSAL_AFTER_CAUSAL,
    CAUSAL_AFTER_DESC,
    DESC,
    replay_chain,
)
from lmms_eval_plugins.benchmarks.causalstep.records import Request, Segment, record_of
from lmms_eval_plugins.benchmarks.causalstep.sample_data import make_causalstep
from lmms_eval_plugins.benchmarks.causalstep.spec import TEMPLATE
from lmms_eval_plugins.errors import DataError, MediaError
from lmms_eval_plugins.synthetic import decode_frame_index

cs = load_task_utils("causalstep")
CAD, CAC = CAUSAL_AFTER_DESC, CAUSAL_AFTER_CAUSAL
ISO = cs.ISOLATED
SAMPLE_SPEC = {"benchmark": "causalstep", "source": "sample"}


def table(n: int, wrong=()) -> dict[tuple[str, int], bool]:
    """Correctness of every question of an n-segment video: all right except ``wrong``."""
    keys = (
        [(DESC, i) for i in range(1, n + 1)] + [(CAD, i) for i in range(2, n + 1)] + [(CAC, i) for i in range(3, n + 1)]
    )
    return {k: k not in set(wrong) for k in keys}


def replay(n, wrong=(), restart="next"):
    t = table(n, wrong)
    return replay_chain(n, lambda kind, segment: t[(kind, segment)], restart)


def steps(r):
    return [(s.segment, s.kind, s.correct, s.chain_length, s.score) for s in r.steps]


# ------------------------------------------------------------------------------ replay, Algorithm 1


@pytest.mark.parametrize("restart", ["next", "same"])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 51])
def test_perfect_video_scores_n_n_plus_1_over_2(n, restart):
    r = replay(n, restart=restart)
    assert r.score == n * (n + 1) // 2 and r.longest_chain == n and r.restarts == 0 and r.completed
    assert [s.kind for s in r.steps] == [DESC] + [CAD] * (n >= 2) + [CAC] * max(n - 2, 0)


def test_wrong_causal_at_s3_of_5_restarts_at_the_next_segment():
    # desc1 ok (chain 1, +1 = 1), causal2 ok (chain 2, +2 = 3), causal3 WRONG (chain 0, score 3),
    # restart at desc4 ok (chain 1, +1 = 4), causal5 ok (chain 2, +2 = 6).
    r = replay(5, wrong=[(CAC, 3)])
    assert steps(r) == [
        (1, DESC, True, 1, 1),
        (2, CAD, True, 2, 3),
        (3, CAC, False, 0, 3),
        (4, DESC, True, 1, 4),
        (5, CAD, True, 2, 6),
    ]
    assert (r.score, r.longest_chain, r.restarts, r.completed) == (6, 2, 1, False)


def test_wrong_causal_at_s3_of_5_restarts_at_the_same_segment_under_the_prose_rule():
    # ... causal3 WRONG (chain 0, score 3), restart at desc3 ok (chain 1, +1 = 4), causal4 (after a
    # desc answer) ok (chain 2, +2 = 6), causal5 (after a causal answer) ok (chain 3, +3 = 9).
    r = replay(5, wrong=[(CAC, 3)], restart="same")
    assert steps(r) == [
        (1, DESC, True, 1, 1),
        (2, CAD, True, 2, 3),
        (3, CAC, False, 0, 3),
        (3, DESC, True, 1, 4),
        (4, CAD, True, 2, 6),
        (5, CAC, True, 3, 9),
    ]
    assert (r.score, r.longest_chain, r.restarts) == (9, 3, 1)


@pytest.mark.parametrize("restart", ["next", "same"])
def test_wrong_first_descriptive_answer_moves_to_the_next_segment_under_both_rules(restart):
    # desc1 WRONG (chain 0, score 0) -> desc2 ok (chain 1, 1) -> causal3 ok (chain 2, +2 = 3).
    r = replay(3, wrong=[(DESC, 1)], restart=restart)
    assert steps(r) == [(1, DESC, False, 0, 0), (2, DESC, True, 1, 1), (3, CAD, True, 2, 3)]
    assert (r.score, r.longest_chain, r.restarts) == (3, 2, 1)


def test_wrong_causal_then_wrong_restart_desc_under_the_prose_rule():
    # N=4, causal2 and desc2 wrong.
    # next: desc1 ok (1, 1), causal2 WRONG (0, 1), desc3 ok (1, 2), causal4 ok (2, +2 = 4): 1 restart.
    # same: desc1 ok (1, 1), causal2 WRONG (0, 1), desc2 WRONG (0, 1) -> next segment, never desc2
    #       again: desc3 ok (1, 2), causal4 ok (2, 4): 2 restarts.
    wrong = [(CAD, 2), (DESC, 2)]
    assert steps(replay(4, wrong)) == [
        (1, DESC, True, 1, 1),
        (2, CAD, False, 0, 1),
        (3, DESC, True, 1, 2),
        (4, CAD, True, 2, 4),
    ]
    same = replay(4, wrong, restart="same")
    assert steps(same) == [
        (1, DESC, True, 1, 1),
        (2, CAD, False, 0, 1),
        (2, DESC, False, 0, 1),
        (3, DESC, True, 1, 2),
        (4, CAD, True, 2, 4),
    ]
    assert (same.score, same.longest_chain, same.restarts) == (4, 2, 2)


def test_a_wrong_answer_on_the_last_question_counts_as_a_restart():
    # next: desc1 ok (1, 1), causal2 WRONG -> past the end. same: desc2 is asked after it: ok (1, 2).
    assert (replay(2, [(CAD, 2)]).score, replay(2, [(CAD, 2)]).restarts) == (1, 1)
    same = replay(2, [(CAD, 2)], restart="same")
    assert steps(same) == [(1, DESC, True, 1, 1), (2, CAD, False, 0, 1), (2, DESC, True, 1, 2)]
    assert (same.restarts, same.longest_chain, same.completed) == (1, 1, False)


@pytest.mark.parametrize("restart", ["next", "same"])
def test_single_segment_video(restart):
    right, wrong = replay(1, restart=restart), replay(1, [(DESC, 1)], restart=restart)
    assert steps(right) == [(1, DESC, True, 1, 1)] and right.completed
    assert steps(wrong) == [(1, DESC, False, 0, 0)] and (wrong.restarts, wrong.longest_chain, wrong.score) == (1, 0, 0)


def test_all_wrong_asks_every_descriptive_question_once():
    r = replay(4, wrong=list(table(4)), restart="same")
    assert [(s.segment, s.kind) for s in r.steps] == [(i, DESC) for i in range(1, 5)]
    assert (r.score, r.longest_chain, r.restarts) == (0, 0, 4)


def test_replay_rejects_an_unknown_restart_rule():
    with pytest.raises(ValueError, match="restart"):
        replay_chain(3, lambda kind, segment: True, "previous")


# --------------------------------------------------------- property: replay == sequential Algorithm 1


class ScriptedModel:
    """Answers each question right or wrong from a fixed table, and records what it was asked."""

    def __init__(self, answers: dict[tuple[str, int], bool]):
        self.answers = answers
        self.asked: list[tuple[int, str]] = []

    def answer(self, kind: str, segment: int) -> bool:
        self.asked.append((segment, kind))
        return self.answers[(kind, segment)]


def algorithm_1(n: int, model: ScriptedModel, restart: str) -> tuple[int, int, int]:
    """The paper's Algorithm 1 transcribed line by line, asking the model in order.
    restart="same": after a wrong causal answer, stay at the same segment (the paper's prose)."""
    score = 0
    chain_length = 0
    longest = 0
    restarts = 0
    i = 1
    current_question_type = "desc"
    previous_type = None
    while i <= n:
        if current_question_type == "desc":
            if model.answer("desc", i):
                chain_length = chain_length + 1
                score = score + 1
                i = i + 1
                current_question_type = "causal"
                previous_type = "desc"
            else:
                chain_length = 0
                restarts = restarts + 1
                i = i + 1
                current_question_type = "desc"
            longest = max(longest, chain_length)
        if current_question_type == "causal":
            if i > n:
                break
            kind = "causal_after_desc" if previous_type == "desc" else "causal_after_causal"
            if model.answer(kind, i):
                chain_length = chain_length + 1
                score = score + chain_length
                i = i + 1
                current_question_type = "causal"
                previous_type = "causal"
            else:
                chain_length = 0
                restarts = restarts + 1
                if restart == "next":
                    i = i + 1
                current_question_type = "desc"
            longest = max(longest, chain_length)
    return score, longest, restarts


@st.composite
def videos(draw):
    n = draw(st.integers(min_value=0, max_value=12))
    keys = list(table(n))
    flags = draw(st.lists(st.booleans(), min_size=len(keys), max_size=len(keys)))
    return n, dict(zip(keys, flags)), draw(st.sampled_from(["next", "same"]))


@settings(max_examples=400, deadline=None)
@given(videos())
def test_replay_agrees_with_a_sequential_run_of_algorithm_1(video):
    n, answers, restart = video
    model = ScriptedModel(answers)
    score, longest, restarts = algorithm_1(n, model, restart)
    r = replay_chain(n, lambda kind, segment: answers[(kind, segment)], restart)
    assert [(s.segment, s.kind) for s in r.steps] == model.asked
    assert (r.score, r.longest_chain, r.restarts) == (score, longest, restarts)
    assert len(set(model.asked)) == len(model.asked)  # no question is asked twice
    assert len(model.asked) <= (n if restart == "next" else max(2 * n - 1, 0))
    assert r.score <= n * (n + 1) // 2


# ------------------------------------------------------------------------------ requests and shuffle


@pytest.fixture(scope="module")
def sample_docs() -> list[dict]:
    return list(cs.process_docs([SAMPLE_SPEC]))


@pytest.fixture(scope="module")
def sample_records() -> list[dict]:
    return json.loads((cs.SAMPLE_DIR / cs.JSON_NAME).read_text())


def test_stable_permutation_is_a_fixed_permutation():
    for n in range(1, 9):
        for key in ("a", "cs003", json.dumps(["x", 2, "causal", "Why?"])):
            order = cs.stable_permutation(key, n)
            assert sorted(order) == list(range(n)) and order == cs.stable_permutation(key, n)
    # pinned: the same letters on every run, machine and Python version
    assert cs.stable_permutation("cs003", 8) == cs.stable_permutation("cs003", 8)
    assert cs.stable_permutation("pinned", 8) == [5, 0, 7, 3, 1, 6, 4, 2]


@given(st.text(max_size=30), st.integers(min_value=1, max_value=8))
def test_stable_permutation_property(key, n):
    order = cs.stable_permutation(key, n)
    assert sorted(order) == list(range(n)) and cs.stable_permutation(key, n) == order


def test_every_request_of_the_sample(sample_docs, sample_records):
    by_video: dict[str, list[dict]] = {}
    for d in sample_docs:
        by_video.setdefault(d["video_id"], []).append(d)
    assert {v: len(ds) for v, ds in by_video.items()} == {"cs001": 1, "cs002": 8, "cs003": 16, "cs004": 24}
    assert len({d["request_id"] for d in sample_docs}) == len(sample_docs)
    records = {r["video_id"]: r for r in sample_records}
    for d in sample_docs:
        segments = records[d["video_id"]]["segments"]
        i, kind = d["segment"], d["kind"]
        block = segments[i - 1]["desc" if kind == DESC else "causal"]
        # the gold letter points at the original correct option; options are a permutation
        assert d["options"][cs.LETTERS.index(d["gold"])] == block["options"][block["answer"]]
        assert sorted(d["options"]) == sorted(block["options"]) and d["question"] == block["question"]
        assert d["oracle_response"] == d["gold"] and d["chance_responses"] == list("ABCDEFGH")
        shown = [s["index"] for s in d["shown"]]
        if kind in (DESC, ISO):
            assert shown == [i] and d["prev_answer"] == ""
        else:
            prev = segments[i - 2]["desc" if kind == CAD else "causal"]
            assert shown == [i - 1, i] and i >= (2 if kind == CAD else 3)
            assert d["prev_question"] == prev["question"] and d["prev_answer"] == prev["options"][prev["answer"]]
    # the three requests of one causal question show the same letters
    for v, ds in by_video.items():
        for i in range(3, len(records[v]["segments"]) + 1):
            variants = [d for d in ds if d["segment"] == i and d["kind"] != DESC]
            assert len(variants) == 3 and len({tuple(d["options"]) for d in variants}) == 1


def test_shuffle_is_the_same_on_every_load(sample_docs):
    again = list(cs.process_docs([SAMPLE_SPEC]))
    assert [(d["options"], d["gold"]) for d in again] == [(d["options"], d["gold"]) for d in sample_docs]
    assert len({d["gold"] for d in sample_docs}) >= 5  # the gold letter moves around


def test_docs_hold_no_json_text_and_read_back_as_typed_requests(sample_records):
    dataset = cs.process_docs([SAMPLE_SPEC])
    assert json_text_columns(dataset) == {}  # no column carries JSON text (issue 28)
    assert dataset.features["shown"] == List(
        {"index": Value("int64"), "start": Value("float64"), "end": Value("float64")}
    )
    d = next(x for x in dataset if x["request_id"] == "cs003/S3/causal_after_causal")
    request = record_of(d)
    segments = next(r for r in sample_records if r["video_id"] == "cs003")["segments"]
    assert isinstance(request, Request) and request.shown == tuple(
        Segment(i, float(segments[i - 1]["start"]), float(segments[i - 1]["end"])) for i in (2, 3)
    )
    assert (request.segment, request.kind, request.options, request.gold) == (3, CAC, tuple(d["options"]), d["gold"])
    assert request.columns() == {
        k: v for k, v in d.items() if k in request.columns()
    }  # the loader's columns, unchanged
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.gold = "A"  # type: ignore[misc]
    with pytest.raises(DataError, match="cs003/S3/causal_after_causal"):
        record_of({k: v for k, v in d.items() if k != "shown"})


def test_source_row_sets_restart_and_frames():
    docs = list(cs.process_docs([{**SAMPLE_SPEC, "restart": "same", "frames_per_segment": 4, "max_long_side": 64}]))
    assert {(d["restart"], d["num_frames"], d["max_long_side"]) for d in docs} == {("same", 4, 64)}
    with pytest.raises(DataError, match="restart"):
        cs.process_docs([{**SAMPLE_SPEC, "restart": "previous"}])


# ------------------------------------------------------------------------------ prompts and frames


def test_prompt_of_a_chained_causal_question(sample_docs):
    d = next(x for x in sample_docs if x["request_id"] == "cs003/S3/causal_after_causal")
    messages = cs.doc_to_messages(d)
    content = messages[0]["content"]
    assert [c["type"] for c in content] == ["text", "video", "text", "video", "text"]
    assert content[0]["text"] == "Segment 2:" and content[2]["text"] == "Segment 3:"
    text = content[4]["text"]
    assert "explicit stepwise causal reasoning question" in text and "direct preceding segment (Segment 2)" in text
    assert f"Previous question: {d['prev_question']}\nPrevious answer: {d['prev_answer']}" in text
    assert (
        "A. " in text
        and "H. " in text
        and text.endswith("Answer with the option's letter from the given choices directly.")
    )
    # frames are sampled inside each segment's interval (frame i of the sample video shows the number i)
    for (start, end), video in zip([(s["start"], s["end"]) for s in d["shown"]], (content[1], content[3])):
        frames = video["url"]
        assert len(frames) == 8 and frames[0].size == (96, 72)
        numbers = [decode_frame_index(f) for f in frames]
        assert numbers == sorted(numbers) and start * 4 <= numbers[0] and numbers[-1] <= end * 4
    assert cs.doc_to_text(d).startswith("Segment 2: frames 1-8. Segment 3: frames 9-16.")
    assert len(cs.doc_to_visual(d)) == 16


def test_prompt_of_descriptive_and_isolated_questions(sample_docs):
    desc = next(x for x in sample_docs if x["request_id"] == "cs002/S2/desc")
    iso = next(x for x in sample_docs if x["request_id"] == "cs002/S2/causal_isolated")
    for d, phrase in (
        (desc, "descriptive understanding question about the observable content of Segment 2"),
        (iso, "Only the current segment is shown"),
    ):
        content = cs.doc_to_messages(d)[0]["content"]
        assert [c["type"] for c in content] == ["text", "video", "text"] and content[0]["text"] == "Segment 2:"
        assert phrase in content[2]["text"] and "Previous answer" not in content[2]["text"]


@pytest.mark.parametrize(
    "reply, letter",
    [
        ("C", "C"),
        ("c", "C"),
        ("Answer: C", "C"),
        ("\\boxed{C}", "C"),
        ("<think>A?</think>C", "C"),
        ("C. The boy builds a new castle", "C"),
        ("(C) the castle", "C"),
        ("The boy builds a new castle further up the beach.", "C"),  # the option's own text
        ("I am not sure", None),
        ("", None),
        ("Z", None),
    ],
)
def test_answer_parsing(sample_docs, reply, letter):
    d = next(x for x in sample_docs if x["request_id"] == "cs002/S3/desc")
    assert d["options"][2] == "The boy builds a new castle further up the beach."
    assert cs.parse_answer(d, reply)[0] == letter


# ------------------------------------------------------------------------------ scoring and aggregation


def fake_record(video_id: str, n: int, category: str) -> dict:
    def block(q):
        return {"question": q, "options": [f"{q} option {k}" for k in range(8)], "answer": (n + len(q)) % 8}

    segments = [
        {
            "start": float(i),
            "end": float(i + 1),
            "desc": block(f"{video_id} desc {i}"),
            "causal": block(f"{video_id} causal {i}") if i > 1 else None,
        }
        for i in range(1, n + 1)
    ]
    return {"video_id": video_id, "category": category, "video_path": "/nonexistent.mp4", "segments": segments}


def run_hooks(records, wrong=(), unparseable=(), restart="next"):
    """Every request answered through the real filter, process_results and aggregations."""
    docs = [d for r in records for d in cs.build_requests(r, restart=restart)]

    def reply(d):
        if d["request_id"] in unparseable:
            return "no idea"
        if d["request_id"] in wrong:
            return "A" if d["gold"] != "A" else "B"
        return d["gold"]

    filtered = cs.ChainReplayFilter().apply([[reply(d)] for d in docs], docs)
    per_doc = [cs.process_results(d, list(f)) for d, f in zip(docs, filtered)]
    scored = [m.name for m in TEMPLATE if m.name in per_doc[0]]  # these docs carry no load-time skipped counts
    return {m: getattr(cs, f"agg_{m}")([x[m] for x in per_doc]) for m in scored}, per_doc


def test_metrics_by_hand():
    # A: 3 segments, perfect: score 6, chain 3, 0 restarts.
    # B: 5 segments, causal3 (after a causal answer) wrong: score 6, chain 2, 1 restart (see above).
    # C: 1 segment, desc wrong: score 0, chain 0, 1 restart.
    # desc questions: A 3/3, B 5/5, C 0/1 -> 8/9. isolated: A 2/2, B 3/4 (S5 unparseable) -> 5/6.
    records = [fake_record("A", 3, "cat1"), fake_record("B", 5, "cat2"), fake_record("C", 1, "cat2")]
    metrics, _ = run_hooks(
        records, wrong={"B/S3/causal_after_causal", "C/S1/desc"}, unparseable={"B/S5/causal_isolated"}
    )
    assert metrics["csr"] == pytest.approx(100 / 3)
    assert metrics["amcl"] == pytest.approx((3 + 2 + 0) / 3) and metrics["mcl"] == 3
    assert metrics["rf"] == pytest.approx(2 / 3)
    assert metrics["ws"] == pytest.approx((6 + 6 + 0) / 3) and metrics["ws_max"] == pytest.approx((6 + 15 + 1) / 3)
    assert metrics["dua"] == pytest.approx(100 * 8 / 9) and metrics["icra"] == pytest.approx(100 * 5 / 6)
    assert metrics["parse_fail"] == 1 and metrics["videos"] == 3 and metrics["incomplete_videos"] == 0
    assert metrics["by_category"]["cat1"]["ws"] == 6 and metrics["by_category"]["cat1"]["csr"] == 100
    assert metrics["by_category"]["cat2"]["ws"] == 3 and metrics["by_category"]["cat2"]["rf"] == 1
    assert metrics["by_category"]["cat2"]["icra"] == pytest.approx(75.0)


def test_metrics_under_the_prose_restart_rule():
    # B under "same": ... causal3 wrong, desc3 ok, causal4 ok, causal5 ok: score 9, chain 3.
    metrics, _ = run_hooks([fake_record("B", 5, "x")], wrong={"B/S3/causal_after_causal"}, restart="same")
    assert (metrics["ws"], metrics["amcl"], metrics["rf"], metrics["csr"]) == (9, 3, 1, 0)


def test_logged_chain_sits_on_the_first_doc_and_matches_the_metrics():
    _, per_doc = run_hooks([fake_record("B", 5, "x")], wrong={"B/S3/causal_after_causal"})
    holders = [x["videos"] for x in per_doc if x["videos"]["chain"] is not None]
    assert len(holders) == 1 and holders[0]["request_id"] == "B/S1/desc"
    chain = holders[0]["chain"]
    assert [s["request_id"] for s in chain["steps"]] == [
        "B/S1/desc",
        "B/S2/causal_after_desc",
        "B/S3/causal_after_causal",
        "B/S4/desc",
        "B/S5/causal_after_desc",
    ]
    assert [(s["correct"], s["chain_length"], s["score"]) for s in chain["steps"]] == [
        (True, 1, 1),
        (True, 2, 3),
        (False, 0, 3),
        (True, 1, 4),
        (True, 2, 6),
    ]
    assert {x["videos"]["chain_on"] for x in per_doc} == {"B/S1/desc"}
    json.dumps([x["videos"] for x in per_doc])  # JSON-serialisable for the sample log


def test_incomplete_video_is_left_out_and_counted():
    records = [fake_record("A", 3, "c"), fake_record("B", 3, "c")]
    docs = [d for r in records for d in cs.build_requests(r)]
    items = [cs.score_request(d, d["gold"]) for d in docs if d["request_id"] != "B/S3/causal_after_causal"]
    assert cs.agg_videos(items) == 1 and cs.agg_incomplete_videos(items) == 1 and cs.agg_ws(items) == 6
    assert cs.video_chain([i for i in items if i["video_id"] == "B"])["missing"] == "B/S3/causal_after_causal"


def test_filter_attachment_is_dropped_when_responses_are_misaligned():
    docs = cs.build_requests(fake_record("A", 3, "c"))
    filtered = cs.ChainReplayFilter().apply([[d["gold"]] for d in docs], docs)
    text, attachment = unpack_filtered([filtered[0]], doc=docs[0], id_field="request_id")
    assert text == docs[0]["gold"] and attachment["result"]["score"] == 6
    # as after --offset 1: the response of doc 1 was filtered against doc 0
    assert unpack_filtered(filtered[0], doc=docs[1], id_field="request_id")[1] is None
    assert isinstance(filtered[0][1], GroupAttachment) and filtered[0][1].strip() is filtered[0][1]
    assert json.loads(str(filtered[0][1]))["result_on"] == "A/S1/desc"


def test_filter_attaches_nothing_across_data_parallel_ranks(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    docs = cs.build_requests(fake_record("A", 2, "c"))
    filtered = cs.ChainReplayFilter().apply([[d["gold"]] for d in docs], docs)
    assert all(f[1]["result"] is None for f in filtered) and [f[0] for f in filtered] == [d["gold"] for d in docs]


def test_process_results_without_the_filter_still_scores():
    d = cs.build_requests(fake_record("A", 1, "c"))[0]
    out = cs.process_results(d, [d["gold"]])
    assert out["csr"]["correct"] is True and out["videos"]["chain"] is None


def test_the_chain_is_logged_on_one_metric_and_failed_requests_leave_every_metric_unscored():
    _, per_doc = run_hooks([fake_record("A", 3, "c")])
    logging_chain = {name for name, item in per_doc[0].items() if isinstance(item, dict) and "chain" in item}
    assert logging_chain == {"videos"}  # spec.py: the other metrics get the request's own fields
    assert per_doc[0]["csr"] == {k: v for k, v in per_doc[0]["videos"].items() if k not in ("chain", "chain_on")}
    d = cs.build_requests(fake_record("A", 1, "c"))[0]
    out = cs.process_results(d, ["[LMMS_EVAL_REQUEST_FAILED: timeout]"])
    assert all(out[m.name]["unscored"] for m in TEMPLATE if m.name in out and m.name != "unscored")
    assert cs.agg_ws([out["ws"]]) is None and cs.agg_unscored([out["unscored"]]) == 1


def test_chain_lengths_restarts_and_scores_are_numbers_with_error_bars_not_percentages():
    from lmms_eval_plugins import errorbars
    from lmms_eval_plugins.report import fmt

    units = {m.name: m.unit for m in TEMPLATE}
    assert {n for n, u in units.items() if u == "number"} == {"amcl", "mcl", "rf", "ws", "ws_max"}
    assert {n for n, u in units.items() if u == "%"} == {"csr", "dua", "icra"}
    headline = [m for m in TEMPLATE if errorbars.has_error_bar(m)]
    assert [m.name for m in headline] == ["csr", "amcl", "mcl", "rf", "ws", "ws_max", "dua", "icra"]
    # printed as under the old "%" unit: two decimals for a mean, an int as it is
    assert (fmt(2.0, "number"), fmt(6.666666, "number"), fmt(7, "number")) == ("2.00", "6.67", "7")


def test_the_spec_and_its_aggregations_load_without_lmms_eval():
    import subprocess
    import sys

    code = (
        "import sys; import lmms_eval_plugins.benchmarks.causalstep.spec; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'lmms_eval'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stderr[-2000:]


# ------------------------------------------------------------------------------ data


def test_auto_source_without_data_says_the_data_is_not_public(monkeypatch):
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_DATA_ROOT", raising=False)
    with pytest.raises(DataError) as info:
        cs.process_docs([{"benchmark": "causalstep", "source": "auto"}])
    message = str(info.value)
    assert "not public yet" in message and "LMMS_EVAL_PLUGINS_DATA_ROOT" in message
    assert (
        "causalstep/causalstep.json" in message and "causalstep/videos/" in message and "causalstep_sample" in message
    )


def test_local_data_root(tmp_path, monkeypatch):
    shutil.copytree(cs.SAMPLE_DIR, tmp_path / "causalstep")
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path))
    docs = list(cs.process_docs([{"benchmark": "causalstep", "source": "auto"}]))
    assert len(docs) == 49 and docs[0]["video_path"].startswith(str(tmp_path.resolve()))


def _write(folder: Path, records) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / cs.JSON_NAME).write_text(json.dumps(records))
    return folder


def _good_record():
    return json.loads((cs.SAMPLE_DIR / cs.JSON_NAME).read_text())[1]  # cs002, 3 segments


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda r: r["segments"][0].update(causal=r["segments"][1]["causal"]), "segment 1 has a causal question"),
        (lambda r: r["segments"][2].update(causal=None), "segment 3 has no causal question"),
        (lambda r: r["segments"][1]["desc"].update(answer=8), "answer 8"),
        (lambda r: r["segments"][1]["causal"].update(options=["only one"]), "options must be a list"),
        (lambda r: r["segments"][1].update(end=1.0), "start/end"),
        (lambda r: r.update(video="../../etc/passwd"), "escapes"),
        # cs002's video lasts 9.0 s
        (lambda r: r["segments"][2].update(end=10.5), "segment 3 (5.5-10.5 s) lies past the end of the video (9.00 s)"),
        (
            lambda r: r["segments"].append({**r["segments"][2], "start": 9.0, "end": 9.5}),
            "segment 4 (9-9.5 s) lies past the end",
        ),
    ],
)
def test_malformed_records_name_the_record_and_the_fix(tmp_path, edit, message):
    record = _good_record()
    edit(record)
    folder = _write(tmp_path / "causalstep", [record])
    shutil.copytree(cs.SAMPLE_DIR / "videos", folder / "videos")
    source = cs.resolve_source("causalstep", "sample", sample_dir=folder, hub_repo=None, local_layout="")
    with pytest.raises(DataError) as info:
        cs.load_records(source)
    assert message in str(info.value) and "cs002" in str(info.value) and "fix:" in str(info.value)


def test_a_segment_may_end_within_a_second_of_the_video_end(tmp_path):
    record = _good_record()
    record["segments"][2]["end"] = 9.0 + media.END_TOLERANCE_S  # rounded annotations: accepted
    folder = _write(tmp_path / "causalstep", [record])
    shutil.copytree(cs.SAMPLE_DIR / "videos", folder / "videos")
    source = cs.resolve_source("causalstep", "sample", sample_dir=folder, hub_repo=None, local_layout="")
    assert [r["video_id"] for r in cs.load_records(source)] == ["cs002"]


def test_missing_video_is_an_error_naming_the_record_or_skipped(tmp_path, monkeypatch):
    folder = _write(
        tmp_path / "causalstep", [_good_record(), {**_good_record(), "video_id": "gone", "video": "videos/gone.mp4"}]
    )
    shutil.copytree(cs.SAMPLE_DIR / "videos", folder / "videos")
    source = cs.resolve_source("causalstep", "sample", sample_dir=folder, hub_repo=None, local_layout="")
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA", raising=False)
    with pytest.raises(MediaError) as info:
        cs.load_records(source)
    assert "gone" in str(info.value) and "gone.mp4" in str(info.value)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA", "1")
    assert [r["video_id"] for r in cs.load_records(source)] == ["cs002"]


def test_sample_covers_one_to_many_segments_and_two_categories(sample_records):
    assert sorted(len(r["segments"]) for r in sample_records) == [1, 3, 5, 7]
    assert len({r["category"] for r in sample_records}) == 2
    assert sum(p.stat().st_size for p in cs.SAMPLE_DIR.rglob("*") if p.is_file()) < 300_000


def test_sample_data_regenerates_byte_for_byte(tmp_path):
    make_causalstep(tmp_path)
    cmp = filecmp.dircmp(tmp_path, cs.SAMPLE_DIR)
    assert cmp.left_only == cmp.right_only == cmp.diff_files == []
    for name in ("videos",):
        sub = filecmp.dircmp(tmp_path / name, cs.SAMPLE_DIR / name)
        assert (
            sub.left_only == sub.right_only == []
            and not filecmp.cmpfiles(tmp_path / name, cs.SAMPLE_DIR / name, sub.common_files, shallow=False)[1]
        )
