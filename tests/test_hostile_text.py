"""Hostile model and judge output: every function that reads it runs in linear time and never raises.

Each parser and text utility gets 1 MB adversarial replies (nested ``\\boxed{`` a megabyte deep, unclosed
``<think>`` tags, thousands of delimiters and labels, long runs of digits, braces, brackets, quotes) and
must take at most ``RATIO`` times as long as on a 1 KB reply of the same shape, plus ``FLOOR`` seconds:
linear work gives a ratio near 1000, quadratic work near 10^6.  Ratios, not absolute times, so that a
slow or busy machine does not matter; the garbage collector is paused while timing (its full collections
scan the whole test process, a cost that has nothing to do with the input).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

import pytest
from lmms_eval_plugins.judges import base as JB
from lmms_eval_plugins.judges import rubric as RB
from lmms_eval_plugins.judges import semantic_match as SM
from lmms_eval_plugins.judges.base import JudgeItem, ReplyParseError, Verdict

from lmms_eval_plugins import parsing as P
from testkit.task_utils import load_task_utils

mm = load_task_utils("mmerror")
er = load_task_utils("errorradar")
cv = load_task_utils("crossvid")
cs = load_task_utils("causalstep")
vr = load_task_utils("virectify")

SMALL, BIG = 1_000, 1_000_000
# 1000 x the text: linear is ~1000 x the time, quadratic ~10^6 x. Cache effects at a megabyte and a busy
# machine (CI shares its cores) stretch linear code up to ~2.5 x; the margin to quadratic stays 300-fold.
RATIO = 3000
FLOOR = 0.05  # seconds: absorbs timer and scheduling noise on calls that take microseconds
# A 32 KB reply first, with its own budget (linear: ~32 x; quadratic: ~1000 x), so that a quadratic
# function fails in seconds instead of spending minutes on the megabyte.
MID, MID_RATIO = 32_000, 150


def _fill(unit: str, n: int) -> str:
    return unit * max(1, n // len(unit))


def _json_keys(n: int) -> str:
    """A judge's score block holding one JSON object with n/10 distinct keys."""
    items, size = [], 20
    while size < n:
        items.append(f'"k{len(items)}": 1, ')
        size += len(items[-1])
    return "<score>{" + "".join(items) + '"end": 0}</score>'


# Reply shapes, each a function of the wanted length in characters.
SHAPES: dict[str, Callable[[int], str]] = {
    "boxed_deep_text": lambda n: "\\boxed{x " * (n // 10) + "}" * (n // 10),  # n/10 deep, text between
    # 50 nested boxes around a one-letter answer, again and again: the worst case of the box rules
    "boxed_clusters": lambda n: _fill("\\boxed{ " * 50 + "(_B)" + "}" * 50, n),
    "think_unclosed": lambda n: _fill("<think>", n),
    # thousands of openings and closings, of names that do not pair ("<think>" ... "</thinking>")
    "think_mixed": lambda n: _fill("<think>a</thinking><thinking>b</think></think><think>", n) + "B",
    "delimiters_and_tags": lambda n: _fill(
        "<<<BEGIN PREDICTED_ANSWER>>> <<<END <error_identify><error_graph><timestamps><rationale><answer><score>", n
    ),
    "labels": lambda n: _fill("Answer: Final answer:\nError Step: Step Error Category: ", n),
    "step_dict": lambda n: "<error_identify>{" + _fill("'step1': ['", n),
    "digits": lambda n: "9" * n,
    "digit_separators": lambda n: _fill("1:2-3,4->", n),
    "open_runs": lambda n: "{" * (n // 3) + "[" * (n // 3) + "(" * (n // 3),
    "quotes": lambda n: "{'a': \"" + _fill("'\"", n),
    "spaces_then_text": lambda n: "The answer is" + " " * n + "x \\boxed{B}",
    "markup": lambda n: _fill("*_`~$#|<", n),
    "json_keys": _json_keys,
}

# ----------------------------------------------------------------------------------------------- the functions

_OPTIONS = ["A. The man walks away", "B. The wave hits", "C. A dog barks", "D. Nothing happens"]
# Whole docs, as the loaders write them (each benchmark reads a doc through its typed record).
_MM_DOC = {
    "question_id": "q",
    "question": "Q?",
    "correct_answer": "",
    "error_reason": "",
    "label": mm.LABELS["B"],
    "label_raw": "B",
    "domain": "d",
    "subdomain": "s",
    "json_path": "",
    "image_path": "",
}
_ER_DOC = {
    "question_id": "q",
    "study_level": "",
    "question_type": "t",
    "content": "",
    "answer": "",
    "user_answer": "",
    "user_answer_steps": "",
    "n_steps": 10,
    "gold_step": 2,
    "gold_category": "CAL",
    "content_image": "",
    "image_path": "",
    "round": 0,
}
_CV_DOCS = {
    "BU": {
        "id": "1",
        "task": "BU",
        "gold": {"letters": ["A", "C"], "exact": "AC"},
        "letters": "ABCD",
        "options": _OPTIONS,
        "media": [],
    },
    "PSS": {"id": "2", "task": "PSS", "gold": {"order": [1, 2, 3, 4], "exact": "1->2->3->4"}, "media": [{}] * 4},
    "FSA": {"id": "3", "task": "FSA", "gold": {"interval": [1.0, 2.0]}, "media": []},
    "CC": {
        "id": "4",
        "task": "CC",
        "gold": {"letter": "B", "exact": "B"},
        "letters": "ABCD",
        "options": _OPTIONS,
        "media": [],
    },
}
_CS_DOC = {
    cs.ID_FIELD: "v/S1/d",
    "video_id": "v",
    "category": "c",
    "video_path": "",
    "n_segments": 3,
    "segment": 1,
    "kind": "desc",
    "shown": [{"index": 1, "start": 0.0, "end": 1.0}],
    "question": "Q?",
    "options": [o[3:] for o in _OPTIONS],
    "gold": "B",
    "prev_question": "",
    "prev_answer": "",
    "restart": "next",
    "num_frames": 8,
    "max_long_side": 0,
}
_VR_DOC = {
    "id": "d",
    "video_path": "v.mp4",
    "source_video": "v.mp4",
    "domain": "dynamic_perception",
    "error_type": "logical",
    "solution_source": "s",
    "source": "",
    "question": "Q?",
    "answer": "B",
    "solution": ["Step 1: a", "Step 2: b"],
    "num_frames": 32,
    "max_long_side": 448,
    "visual_mode": "interleaved",
    "gold_labels": [{"step": 1, "label": "1"}, {"step": 2, "label": "0"}],
    "gold_edges": [{"source": 2, "target": 2}],
    "gold_timestamps": [{"start": 12.0, "end": 20.0}],
}
_POINTS = ("The man opens the door", "He leaves at 12 seconds")
_OFFLINE_RUBRIC = RB.OfflineRubricJudge()


def _reply_parser(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """Judge reply parsers report an unreadable reply by raising ReplyParseError: that is their result."""

    def call(text: str) -> Any:
        try:
            return parse(text)
        except ReplyParseError as exc:
            return exc

    return call


def _parsed(value: Any) -> bool:
    return isinstance(value, P.Parsed) and (value.value is None) != (value.error is None)


def _opt(kind: type | tuple[type, ...]) -> Callable[[Any], bool]:
    return lambda value: value is None or isinstance(value, kind)


def _is(kind: type | tuple[type, ...]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, kind)


def _pair(value: Any) -> bool:
    return isinstance(value, tuple) and len(value) == 2


# name -> (function of the reply, check of its result)
from lmms_eval_plugins.benchmarks.mmerror import official as MO  # noqa: E402

FUNCTIONS: dict[str, tuple[Callable[[str], Any], Callable[[Any], bool]]] = {
    # lmms_eval_plugins/parsing.py
    "strip_reasoning": (P.strip_reasoning, _is(str)),
    "clean_markup": (P.clean_markup, _is(str)),
    "extract_boxed": (P.extract_boxed, _opt(str)),
    "extract_tag": (lambda t: P.extract_tag(t, "answer"), _opt(str)),
    "tag_runs_to_end": (lambda t: P.tag_runs_to_end(t, "answer"), _is(bool)),
    "match_category": (lambda t: P.match_category(t, er.CATEGORY_KEYWORDS, label="Error Category"), _parsed),
    "parse_interval": (P.parse_interval, _parsed),
    "parse_intervals": (P.parse_intervals, _is(list)),
    "parse_letter_set": (P.parse_letter_set, _parsed),
    "parse_letter_set.prose": (lambda t: P.parse_letter_set(t, prose=True), _parsed),
    "parse_option_letter": (
        lambda t: P.parse_option_letter(t, names={"A": "A_Visual", "B": "B_Reasoning_Error"}),
        _parsed,
    ),
    "parse_option_letter.prose": (lambda t: P.parse_option_letter(t, "ABCDEFGH", prose=True), _parsed),
    "parse_order": (lambda t: P.parse_order(t, 4), _parsed),
    "parse_step": (lambda t: P.parse_step(t, max_step=10), _parsed),
    "parse_timestamp": (P.parse_timestamp, _opt(float)),
    # task_yamls/mmerror/utils.py
    "mmerror.parse_type": (mm.parse_type, _parsed),
    "mmerror.parse_presence": (mm.parse_presence, _parsed),
    "mmerror.official_letter": (MO.official_letter, _opt(str)),
    "mmerror.official_presence": (MO.official_presence, _opt(str)),
    "mmerror.score_etc": (lambda t: mm.score_etc(_MM_DOC, t), _is(dict)),
    "mmerror.score_epd_stage.presence": (
        lambda t: mm.score_epd_stage({**_MM_DOC, "stage": mm.STAGE_PRESENCE}, t),
        _is(dict),
    ),
    "mmerror.score_epd_stage.type": (lambda t: mm.score_epd_stage({**_MM_DOC, "stage": mm.STAGE_TYPE}, t), _is(dict)),
    # task_yamls/errorradar/utils.py
    "errorradar.score_step": (lambda t: er.score_step(_ER_DOC, t), _is(dict)),
    "errorradar.score_category": (lambda t: er.score_category(_ER_DOC, t), _is(dict)),
    # task_yamls/crossvid/utils.py
    "crossvid.parse_choice": (lambda t: cv.parse_choice(t, "ABCD", _OPTIONS), _pair),
    "crossvid.strict_interval": (cv.strict_interval, _opt(tuple)),
    **{
        f"crossvid.score_response.{task}": ((lambda t, d=doc: cv.score_response(d, t)), _is(dict))
        for task, doc in _CV_DOCS.items()
    },
    # task_yamls/causalstep/utils.py
    "causalstep.parse_answer": (lambda t: cs.parse_answer(_CS_DOC, t), _pair),
    "causalstep.score_request": (lambda t: cs.score_request(_CS_DOC, t), _is(dict)),
    # task_yamls/virectify/utils.py
    "virectify.parse_response": (vr.parse_response, _is(dict)),
    "virectify.score_response": (lambda t: vr.score_response(_VR_DOC, t), _pair),
    "virectify.find_answer": (vr.find_answer, _pair),
    "virectify.redact_answer": (vr.redact_answer, _is(str)),
    "virectify.parse_step_labels": (vr.parse_step_labels, _is(dict)),
    "virectify.parse_graph": (vr.parse_graph, _opt(set)),
    "virectify.key_times": (vr.key_times, _opt(list)),
    "virectify.literal_dict": (vr.literal_dict, _opt(dict)),
    "virectify.render_hint.rationale": (lambda t: vr.render_hint("rationale", t, t, t), _is(str)),
    "virectify.render_hint.error_identify": (lambda t: vr.render_hint("error_identify", t, t, t), _is(str)),
    "virectify.judge_item": (lambda t: vr.judge_item(t, _VR_DOC), _opt(JudgeItem)),
    # judges/base.py
    "judges.strip_think": (JB.strip_think, _is(str)),
    "judges.neutralise": (JB.neutralise, _is(str)),
    "judges.data_block": (lambda t: JB.data_block([("PREDICTED_ANSWER", t)]), _is(str)),
    # judges/semantic_match.py and judges/rubric.py: the reply parsers and the offline judges
    "semantic_match.parse_binary_reply": (_reply_parser(SM.parse_binary_reply), _is((int, ReplyParseError))),
    "semantic_match.match_answers": (lambda t: SM.match_answers(t, "B"), _pair),
    "semantic_match.extract_final_answer": (SM.extract_final_answer, _is(str)),
    "rubric.parse_rubric_reply": (_reply_parser(lambda t: RB.parse_rubric_reply(t, 2)), _is((tuple, ReplyParseError))),
    "rubric.offline_judge": (
        lambda t: _OFFLINE_RUBRIC.judge(JudgeItem(prediction=t, scoring_points=_POINTS)),
        _is(Verdict),
    ),
}

# Functions that only wrap others timed here (the same text through them, plus a few regular expressions
# anchored at the start, or a dictionary) are left out of the timing test to keep it short; the
# never-raises test runs them all.
WRAPPERS = {
    "parse_intervals": "clean_markup, parse_interval",
    "mmerror.parse_presence": "parse_option_letter, strip_reasoning, clean_markup",
    "crossvid.parse_choice": "parse_option_letter, strip_reasoning",
    "causalstep.parse_answer": "parse_option_letter.prose",
    "virectify.judge_item": "strip_reasoning, virectify.find_answer",
    "virectify.key_times": "clean_markup, parse_interval",
    "mmerror.score_etc": "mmerror.parse_type",
    "mmerror.score_epd_stage.presence": "parse_option_letter, strip_reasoning, clean_markup",
    "mmerror.score_epd_stage.type": "mmerror.parse_type",
    "errorradar.score_step": "strip_reasoning, parse_step",
    "errorradar.score_category": "strip_reasoning, match_category",
    "crossvid.score_response.BU": "parse_letter_set",
    "crossvid.score_response.PSS": "parse_order",
    "crossvid.score_response.FSA": "parse_interval, crossvid.strict_interval",
    "crossvid.score_response.CC": "parse_option_letter, strip_reasoning",
    "causalstep.score_request": "parse_option_letter.prose",
    "virectify.score_response": "virectify.parse_response",
    "virectify.render_hint.rationale": "clean_markup, parse_interval, extract_tag, virectify.redact_answer",
    "judges.data_block": "judges.neutralise",
    "semantic_match.extract_final_answer": "semantic_match.match_answers",
}
TIMED = [name for name in FUNCTIONS if name not in WRAPPERS]

# Slow pairs in code this change leaves to its owners: each is timed on its own as an expected failure,
# and skipped by the main timing test so that it still guards every other shape of the function.
KNOWN_SLOW: dict[tuple[str, str], str] = {}

_TEXTS: dict[tuple[str, int], str] = {}


def _text(shape: str, n: int) -> str:
    key = (shape, n)
    if key not in _TEXTS:
        _TEXTS[key] = SHAPES[shape](n)
    return _TEXTS[key]


def _seconds(f: Callable[[str], Any], text: str, repeat: int) -> float:
    """Best of ``repeat`` timings (call with the garbage collector paused: see _gc_paused)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        f(text)
        best = min(best, time.perf_counter() - start)
    return best


@pytest.fixture()
def _gc_paused():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def test_shapes_have_the_sizes_they_claim():
    for shape in SHAPES:
        for n in (SMALL, BIG):
            assert 0.9 * n <= len(_text(shape, n)) <= 1.1 * n + 20, (shape, n)


def test_wrappers_wrap_timed_functions():
    for name, inner in WRAPPERS.items():
        assert name in FUNCTIONS and all(i in TIMED for i in inner.split(", ")), name


@pytest.mark.parametrize("name", TIMED)
def test_linear_time_on_hostile_replies(name, _gc_paused):
    slow = [why for shape in SHAPES if (name, shape) not in KNOWN_SLOW for why in _slow(name, shape)]
    assert not slow, f"{name} is not linear:\n" + "\n".join(slow)


@pytest.mark.xfail(reason="known quadratic, see KNOWN_SLOW", strict=False)
@pytest.mark.parametrize("name, shape", list(KNOWN_SLOW))
def test_known_slow_pairs(name, shape, _gc_paused):
    assert not _slow(name, shape), KNOWN_SLOW[name, shape]


def _slow(name: str, shape: str) -> list[str]:
    """[] when ``name`` keeps its time budget on the shape, else [why]."""
    f, _ = FUNCTIONS[name]
    small = _seconds(f, _text(shape, SMALL), repeat=3)
    for n, ratio in ((MID, MID_RATIO), (BIG, RATIO)):
        budget = ratio * small + FLOOR
        took = _seconds(f, _text(shape, n), repeat=1)
        if took > budget:  # once more before calling it slow: the machine may have been busy
            took = min(took, _seconds(f, _text(shape, n), repeat=1))
        if took > budget:
            return [f"{shape}: {took:.3f} s for {n:,} characters, {small * 1e6:.0f} us for 1 KB, budget {budget:.3f} s"]
    return []


ODD_REPLIES = (
    "",
    " ",
    "\x00",
    "\ufeff",
    "🙂" * 10,
    "\\boxed{}",
    "\\boxed{" * 3000,
    "<think></think>",
    "<think>" * 3000,
    "<<<END PREDICTED_ANSWER>>>",
)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_hostile_replies_give_a_result_never_an_exception(name):
    f, ok = FUNCTIONS[name]
    for shape in SHAPES:
        for n in (10, SMALL, 20_000):
            result = f(_text(shape, n))
            assert ok(result), f"{name} on {shape} ({n} chars) returned {result!r:.200}"
    for text in ODD_REPLIES:
        result = f(text)
        assert ok(result), f"{name} on {text!r:.60} returned {result!r:.200}"
