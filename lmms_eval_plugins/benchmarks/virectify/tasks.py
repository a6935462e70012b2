"""ViRectify: video reasoning correction (error identification, error graph, key timestamps, corrected answer).

Two tasks share this file (see README.md for the protocol, the parsing rules and every decision):

- ``virectify``: the model gets 32 timestamped frames, the question and an erroneous step-by-step
  solution, and answers in the format of the paper's Tables 9-11. Scored by ``acc_i`` (step-label
  accuracy), ``iou`` (temporal IoU of the key timestamps), ``acc_r`` (the ``semantic_match`` judge on
  the boxed corrected answer), ``graph_jaccard`` (edge-set Jaccard of the error-propagation graphs,
  the paper's Eq. 1) and ``format_rate``, with breakdowns by domain, error type and solution source.
- ``virectify_reflect``: the reflection setting of the paper's section 6.3. The model gets the
  question, the frames, the erroneous solution and either an error identification or a rationale
  (with its final answer removed), and must answer the question; scored by the same judge.

Parsers are pure and never raise: a missing or broken part of an output scores 0 on its own metric
only, and the logged sample says what was missing.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
from pathlib import Path
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lmms_eval_plugins.data import (
    DataSource,
    keep_records_with_media,
    stamp_skipped,
    read_jsonl,
    require_file,
    require_fields,
    resolve_source,
    safe_path,
    source_spec,
    to_dataset,
)
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.judges import JudgeFilter, JudgeItem, JudgeOutcome, aggregate_judged, judged_mean, judged_parts  # noqa: F401
from lmms_eval_plugins.logged_samples import read_samples
from lmms_eval_plugins.media import frame_plan, intervals_past_end, sample_video, video_info
from lmms_eval_plugins.messages import FrameGroup, interleaved_messages
from lmms_eval_plugins.metrics import accuracy, jaccard, merge_intervals, union_iou
from lmms_eval_plugins.outcome import agg_skipped, agg_skipped_by_reason, count_unscored, guard_aggregations, with_unscored  # noqa: F401 (agg_skipped*: hooks of the task YAMLs)
from lmms_eval_plugins.parsing import extract_boxed, extract_tag, parse_intervals, strip_reasoning, tag_runs_to_end
from lmms_eval_plugins.tasking import CHANCE_FIELD, ORACLE_FIELD

BENCHMARK = "virectify"
JSONL_NAME = "virectify.jsonl"
# The bundled sample data: set by the task folder's utils.py to the folder beside the YAMLs lmms-eval
# loaded (an installed or an exported task folder alike).
SAMPLE_DIR: Path | None = None
LOCAL_LAYOUT = (
    f"virectify/{JSONL_NAME} (one JSON record per line: id, video, domain, error_type, solution_source, question, "
    "answer, solution, error_identify, error_graph, timestamps, rationale; see the virectify task README) plus the "
    "videos under virectify/videos/ (the 'video' paths are relative to virectify/)"
)
HINTS_ENV = "LMMS_EVAL_PLUGINS_VIRECTIFY_HINTS"

DEFAULT_NUM_FRAMES = 32
DEFAULT_MAX_LONG_SIDE = 448
VISUAL_MODES = ("interleaved", "video")

# Data keys -> the names the paper prints (Table 2 columns, Figure 4 labels).
DOMAINS = {
    "dynamic_perception": "Dynamic Perception",
    "scientific_reasoning": "Scientific Reasoning",
    "embodied_decision": "Embodied Decision",
}
DOMAIN_ALIASES = {"situated_decision_making": "embodied_decision", "situated_decision": "embodied_decision",
                  "embodied_decision_making": "embodied_decision"}
ERROR_TYPES = {
    "logical": "Logical",
    "visual_perception": "Visual Perception",
    "question_misunderstanding": "Question Misunderstanding",
    "hallucination": "Hallucination",
}
ERROR_TYPE_ALIASES = {"logic": "logical", "reasoning": "logical", "perception": "visual_perception",
                      "misunderstanding": "question_misunderstanding"}
TOTAL = "Total"
PARTS = ("error_identify", "error_graph", "timestamps", "rationale")  # the four parts of the output format
HINT_KINDS = ("error_identify", "rationale")
REQUIRED_FIELDS = ("id", "video", "domain", "error_type", "question", "answer", "solution", "error_identify",
                   "error_graph", "timestamps", "rationale")


# ----------------------------------------------------------------------------------------------- prompts
# The paper's Table 11 instruction (the training and evaluation template), verbatim but for ASCII quotes
# and its typo "Ratioanale". The output format is the one of Tables 9 and 10 (error identification and
# rationale annotation), which the model's answer must follow; Table 11 in the paper's text ends before it.

INSTRUCTION = """You are an expert in reasoning analysis and video question answering. Given the following information:
- A video (represented by a set of timestamped frames),
- A question about the video,
- A solution for the question (with step-by-step reasoning),
Your task is to analyze the solution, detect reasoning errors step by step, and provide an overall correction using timestamp-aligned visual evidence from the video.
Guidelines:
1. Error identification:
- For each step in the solution (e.g., "step1", "step2"...), judge whether the reasoning is correct.
- If correct: Mark as '1' and leave the second element as an empty string.
- If incorrect: Mark as '0' and provide a brief and specific explanation of what is wrong in the step.
2. Error Propagation Graph:
- For each step with an error, list direct sources of errors in that step.
3. Timestamps:
- List merged timestamp ranges (e.g., [00:12-00:20]) for most critical video evidence clips that directly correct the reasoning errors.
4. Rationale:
- Use natural language to describe how the original reasoning went wrong, referencing the specific timestamps and what the visual content shows. State the correct final answer to the question."""

OUTPUT_FORMAT = (
    "Output Format:\n"
    "<error_identify>{ 'step1': ['1', ''], 'step2': ['0', 'error explanation'],} </error_identify> "
    "<error_graph>{ 'step1': ['step1'], 'step2': ['step1'], 'step3': ['step2'] }</error_graph> "
    "<timestamps>[00:00-00:08],[...]</timestamps> "
    "<rationale> rationale with video evidence <answer>The correct answer should be \\boxed{xxx}</answer> </rationale>"
)

# Section 6.3 gives no prompt; this one reuses the wording of Table 11 and the paper's description
# ("provide the error identification and rationale with video evidence (excluding the final answer) as
# input ..., prompting it to revise its reasoning and produce a corrected answer").
REFLECT_FEEDBACK = {
    "error_identify": ("An error identification for the solution (for each step, '1' if the step is correct, or "
                       "'0' and an explanation of what is wrong in the step),"),
    "rationale": ("A rationale with video evidence (the key timestamps and a description of how the original "
                  "reasoning went wrong),"),
}
REFLECT_INSTRUCTION = """You are an expert in reasoning analysis and video question answering. Given the following information:
- A video (represented by a set of timestamped frames),
- A question about the video,
- A solution for the question (with step-by-step reasoning) that contains reasoning errors,
- {feedback}
Your task is to revise the reasoning of the solution using the feedback and the visual evidence from the video, and state the correct final answer to the question."""
REFLECT_OUTPUT_FORMAT = ("Output Format:\nRevise the reasoning, then end with "
                         "<answer>The correct answer should be \\boxed{xxx}</answer>")
ANSWER_SENTENCE = "The correct answer should be \\boxed{{{answer}}}"


# ----------------------------------------------------------------------------------------------- text helpers

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
                         "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u201f": '"', "\u2033": '"'})
# "step1", "Step 1", "step_1", "STEP-1", or a bare "1" (keys and references inside a dict)
_STEP_REF = re.compile(r"\s*(?:step[\s_\-]*)?(\d{1,6})\s*", re.IGNORECASE)
_LABEL_WORDS = {"1": "1", "0": "0", "correct": "1", "incorrect": "0", "wrong": "0", "true": "1", "false": "0"}
# Regex fallback for dicts that neither JSON nor Python can read: `step<N>` <quote/space> `:` <[ ( quote> label
_LABEL_ENTRY = re.compile(
    r"(?<![A-Za-z])step[\s_\-]*(\d{1,6})[\s\"']*[:=][\s\[(\"']*(1|0|correct|incorrect|wrong|true|false)(?![\w]|\.\d)",
    re.IGNORECASE)
_GRAPH_ENTRY = re.compile(
    r"(?<![A-Za-z])step[\s_\-]*(\d{1,6})[\s\"']*[:=]\s*(?:[\[(]([^\[\]()]{0,4000})[\])]|[\"']([^\"'\n]{0,400})[\"'])",
    re.IGNORECASE)
_REF_IN_LIST = re.compile(r"(?:step[\s_\-]*)?(\d{1,6})(?!\d)", re.IGNORECASE)
_FENCE = re.compile(r"```[A-Za-z]*")
_MAX_LITERAL = 100_000  # longer dict texts go straight to the regex fallback


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - a broken __str__ must not crash scoring
        return ""


def step_number(value: Any) -> int | None:
    """1 for "step1", "Step 1", "step_1", "1" or 1; None for anything else."""
    if isinstance(value, str):
        m = _STEP_REF.fullmatch(value)
        return int(m.group(1)) if m else None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < 10**6 else None
    if isinstance(value, float) and value.is_integer() and 0 <= value < 10**6:
        return int(value)
    return None


def label_value(value: Any) -> str | None:
    """"1" (correct) / "0" (incorrect) from ["1", ""], "0", 0, True, "correct"...; None if unreadable."""
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)) and value in (0, 1):
        return str(int(value))
    if isinstance(value, str):
        return _LABEL_WORDS.get(value.strip().strip("'\"").strip().lower())
    return None


def literal_dict(text: str) -> dict | None:
    """The dict written in ``text``: JSON first, then a Python literal (single quotes, trailing commas).

    Curly quotes are made straight, code fences and anything outside the outermost braces are dropped.
    None when neither reads it as a dict.
    """
    t = _FENCE.sub("", _text(text).translate(_QUOTES))
    start, end = t.find("{"), t.rfind("}")
    if start < 0 or end < start or end - start > _MAX_LITERAL:
        return None
    chunk = t[start : end + 1]
    for load in (json.loads, ast.literal_eval):
        try:
            value = load(chunk)
        except Exception:  # noqa: BLE001, S112 - SyntaxError, ValueError, RecursionError, MemoryError: try the next reader
            continue
        if isinstance(value, dict):
            return value
    return None


def parse_step_labels(text: str) -> dict[int, str]:
    """Step number -> "1"/"0" from the content of ``<error_identify>``; {} when nothing is readable.

    A dict (JSON or Python literal) is read as such; otherwise ``step<N>: ['<label>'`` entries are picked
    out one by one (the first entry of a step wins, so an explanation that mentions another step's label
    cannot overwrite it).
    """
    labels: dict[int, str] = {}
    found = literal_dict(text)
    if found is not None:
        for key, value in found.items():
            step, label = step_number(key), label_value(value)
            if step is not None and label is not None:
                labels.setdefault(step, label)
        if labels:
            return labels
    for m in _LABEL_ENTRY.finditer(_text(text).translate(_QUOTES)):
        labels.setdefault(int(m.group(1)), _LABEL_WORDS[m.group(2).lower()])
    return labels


def _sources(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, (list, tuple, set, frozenset)):
        out = []
        for item in value:
            n = step_number(item)
            if n is not None:
                out.append(n)
        return out
    if isinstance(value, str):
        return [int(d) for d in _REF_IN_LIST.findall(value)]
    n = step_number(value)
    return [] if n is None else [n]


def graph_edges(graph: Mapping[Any, Any]) -> set[tuple[int, int]]:
    """The edge set of an error-propagation graph ``{"step3": ["step2"], ...}`` (the paper's E(G)).

    The graph maps each erroneous step (the key) to the direct sources of its error (the value), so
    every source s listed under key t is one directed edge (s, t), source -> affected step. A step
    listed as its own source (``"step2": ["step2"]``, an error that originates in that step) is the
    self-loop (2, 2), an edge like any other. Cycles are kept as they are; repeated sources count once;
    a key with no sources adds no edge; unreadable keys and references are ignored.
    """
    edges: set[tuple[int, int]] = set()
    for key, value in graph.items():
        target = step_number(key)
        if target is None:
            continue
        for source in _sources(value):
            edges.add((source, target))
    return edges


def parse_graph(text: str) -> set[tuple[int, int]] | None:
    """The edge set written in ``<error_graph>``; None when it holds no readable graph ("{}" is the empty graph)."""
    found = literal_dict(text)
    if found is not None:
        return graph_edges(found)
    cleaned = _text(text).translate(_QUOTES)
    graph: dict[int, list[int]] = {}
    for m in _GRAPH_ENTRY.finditer(cleaned):
        target = int(m.group(1))
        refs = [int(d) for d in _REF_IN_LIST.findall(m.group(2) if m.group(2) is not None else m.group(3))]
        graph.setdefault(target, []).extend(refs)
    if graph:
        return {(s, t) for t, sources in graph.items() for s in sources}
    return None


def clock(seconds: float) -> str:
    """12 -> "00:12", 62.5 -> "01:02.5", 3725 -> "1:02:05" (what the prompt's mm:ss format asks for)."""
    total = round(float(seconds), 3)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    secs = round(secs, 3)
    sec_text = f"{int(secs):02d}" if float(secs).is_integer() else f"{secs:06.3f}".rstrip("0")
    if hours:
        return f"{int(hours)}:{int(minutes):02d}:{sec_text}"
    return f"{int(minutes):02d}:{sec_text}"


def format_intervals(intervals: Iterable[Sequence[float]]) -> str:
    return ",".join(f"[{clock(s)}-{clock(e)}]" for s, e in intervals)


def frame_label(seconds: float) -> str:
    """The paper's frame tag "[1s]"; one decimal when the frame is not on a whole second ("[2.5s]")."""
    value = round(float(seconds), 1)
    return f"[{int(value)}s]" if value.is_integer() else f"[{value:.1f}s]"


_ANSWER_BLOCK = re.compile(r"<\s*answer\s*>.*?(?:<\s*/\s*answer\s*>|$)", re.IGNORECASE | re.DOTALL)
# "\s*(?::\s*)?$" matches what "\s*:?\s*$" does; the latter's two adjacent \s* runs backtrack
# quadratically on a long run of spaces that is not at the end.
_ANSWER_LEAD = re.compile(r"(?:the\s+)?(?:correct\s+|final\s+)?answer\s+(?:should\s+be|is)\s*(?::\s*)?$", re.IGNORECASE)


def _boxed_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of every outermost ``\\boxed{...}`` with balanced braces."""
    spans, i = [], 0
    while True:
        start = text.find("\\boxed{", i)
        if start < 0:
            return spans
        depth, j = 0, start + len("\\boxed")
        while j < len(text):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        if depth:
            return spans
        spans.append((start, j + 1))
        i = j + 1


def redact_answer(text: str) -> str:
    """A rationale without its final answer: ``<answer>`` blocks, and every ``\\boxed{}`` together with a
    "The correct answer should be" lead-in, are removed (section 6.3: "excluding the final answer")."""
    text = _ANSWER_BLOCK.sub("", _text(text))
    out, cursor = [], 0
    for start, end in _boxed_spans(text):
        before = text[cursor:start]
        lead = _ANSWER_LEAD.search(before)
        out.append(before[: lead.start()] if lead else before)
        cursor = end
    out.append(text[cursor:])
    text = re.sub(r"[ \t]{2,}", " ", "".join(out))
    text = re.sub(r"[ \t]+([.,;:!?])", r"\1", text)  # no space left before punctuation
    text = re.sub(r"([.!?])(?:[ \t]*[.])+", r"\1", text)  # nor a sentence ending twice
    return re.sub(r"[ \t]+\n", "\n", text).strip()


# ----------------------------------------------------------------------------------------------- response parsing

def find_answer(body: str, rationale: str | None = None) -> tuple[str | None, str]:
    """(boxed answer, where it was found): the ``<answer>`` tag, else ``<rationale>``, else anywhere.
    ``rationale``: the ``<rationale>`` content when the caller has it already."""
    for where in ("answer", "rationale"):
        content = rationale if where == "rationale" and rationale is not None else extract_tag(body, where)
        if content:
            boxed = extract_boxed(content)
            if boxed:
                return boxed, where
    boxed = extract_boxed(body)
    return (boxed, "anywhere") if boxed else (None, "")


def key_times(content: str, *, cut_off: bool = False) -> list[tuple[float, float]] | None:
    """The key-time intervals written in ``<timestamps>`` (None when there is none).

    Every form :func:`lmms_eval_plugins.parsing.parse_intervals` reads: ``[00:12-00:20]``,
    ``[00:12]-[00:20]``, ``[12s]-[20s]``, ``12-20s``, ``0:12–0:20``, "from 12 s to 20 s",
    ``[[12, 20], [31, 35]]``. When some are clock times, only those count (a note beside them such as
    "bounces 2-3 times" is no interval). ``cut_off``: the reply ended inside the tag, so a last piece
    that does not end with a closing bracket may be incomplete ("[00:31-00:3") and is dropped; the
    intervals before it count.
    """
    if cut_off and not content.rstrip().endswith(("]", ")")):
        ends = [content.rfind(c) for c in "]),;\n"]
        content = content[: max(ends) + 1] if max(ends) >= 0 else ""
    found = [iv for iv in parse_intervals(content, clock_first=True) if all(math.isfinite(x) for x in iv)]
    return found or None


def parse_response(text: Any) -> dict[str, Any]:
    """Read the four parts of a ViRectify answer. Never raises.

    Returns ``labels`` ({step: "0"/"1"} or None), ``edges`` (set of (source, target) or None),
    ``intervals`` (list of (start, end) seconds or None), ``answer`` (the boxed corrected answer or None)
    and ``missing`` ({part: reason} for each of the four format parts that is absent or unreadable,
    plus ``answer`` when there is no boxed answer at all).
    """
    body = strip_reasoning(_text(text))
    missing: dict[str, str] = {}

    labels: dict[int, str] | None = None
    content = extract_tag(body, "error_identify")
    if content is None:
        missing["error_identify"] = "no <error_identify> tag"
    else:
        labels = parse_step_labels(content) or None
        if labels is None:
            missing["error_identify"] = "no readable step label in <error_identify>"

    edges: set[tuple[int, int]] | None = None
    content = extract_tag(body, "error_graph")
    if content is None:
        missing["error_graph"] = "no <error_graph> tag"
    else:
        edges = parse_graph(content)
        if edges is None:
            missing["error_graph"] = "no readable graph in <error_graph>"

    intervals: list[tuple[float, float]] | None = None
    content = extract_tag(body, "timestamps")
    if content is None:
        missing["timestamps"] = "no <timestamps> tag"
    else:
        intervals = key_times(content, cut_off=tag_runs_to_end(body, "timestamps"))
        if intervals is None:
            missing["timestamps"] = "no readable interval in <timestamps>"

    rationale = extract_tag(body, "rationale")
    answer, where = find_answer(body, rationale)
    if answer is None:
        missing["answer"] = "no \\boxed{} answer"
    if rationale is None:
        missing["rationale"] = "no <rationale> tag"
    elif answer is None:
        missing["rationale"] = "no \\boxed{} answer in <rationale>"
    elif where == "anywhere":
        missing["rationale"] = "the \\boxed{} answer is outside <rationale> and <answer>"
    return {"labels": labels, "edges": edges, "intervals": intervals, "answer": answer, "missing": missing}


# ----------------------------------------------------------------------------------------------- metrics

def step_accuracy(pred: Mapping[int, str] | None, gold: Mapping[int, str]) -> float:
    """Share (0-1) of gold steps whose predicted label equals the gold label; a missing step is wrong,
    extra predicted steps are ignored, no prediction at all scores 0."""
    if not pred or not gold:
        return 0.0
    return sum(1 for step, label in gold.items() if pred.get(step) == label) / len(gold)


def graph_jaccard(pred: set[tuple[int, int]] | None, gold: set[tuple[int, int]]) -> float:
    """Eq. 1's |E(G) ∩ E(Ĝ)| / |E(G) ∪ E(Ĝ)| (0-1); an unreadable graph scores 0, two empty graphs 1."""
    return 0.0 if pred is None else jaccard(pred, gold)


def timestamp_iou(pred: Sequence[tuple[float, float]] | None, gold: Sequence[tuple[float, float]]) -> float:
    """Temporal IoU (0-1) of the union of the predicted intervals and the union of the gold intervals."""
    return 0.0 if not pred else union_iou(pred, gold)


# ----------------------------------------------------------------------------------------------- records

def _key(value: Any, known: Mapping[str, str], aliases: Mapping[str, str]) -> str | None:
    norm = re.sub(r"[\s\-]+", "_", _text(value).strip().lower())
    norm = norm.removesuffix("_error")
    for key, name in known.items():
        if norm in (key, name.lower().replace(" ", "_")):
            return key
    return aliases.get(norm)


def _gold_intervals(raw: Any) -> list[tuple[float, float]] | None:
    if isinstance(raw, str):
        return parse_intervals(raw) or None
    if not isinstance(raw, list) or not raw:
        return None
    out = []
    for item in raw:
        if (not isinstance(item, (list, tuple)) or len(item) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in item)
                or item[0] > item[1] or item[0] < 0):
            return None
        out.append((float(item[0]), float(item[1])))
    return out


def _solution_steps(raw: Any) -> list[str] | None:
    if isinstance(raw, str):
        raw = [line for line in raw.splitlines() if line.strip()]
    if not isinstance(raw, list) or not raw or not all(isinstance(s, str) and s.strip() for s in raw):
        return None
    steps = []
    for k, step in enumerate(raw, start=1):
        step = step.strip()
        steps.append(step if re.match(r"step\s*\d+", step, re.IGNORECASE) else f"Step {k}: {step}")
    return steps


def normalize_record(raw: Any, *, line: int, path: Path) -> dict[str, Any]:
    """Validate one record of virectify.jsonl (schema in BENCHMARKS.md and the README)."""
    record_id = _text(raw.get("id")).strip() if isinstance(raw, Mapping) else ""
    record_id = record_id or f"line {line}"
    require_fields(raw, REQUIRED_FIELDS, record_id=record_id, path=path)

    def bad(problem: str, fix: str) -> DataError:
        return DataError(problem, record=record_id, path=str(path), fix=fix)

    domain = _key(raw["domain"], DOMAINS, DOMAIN_ALIASES)
    if domain is None:
        raise bad(f"domain {raw['domain']!r} is none of {', '.join(DOMAINS)}", "use one of the three domain keys")
    error_type = _key(raw["error_type"], ERROR_TYPES, ERROR_TYPE_ALIASES)
    if error_type is None:
        raise bad(f"error_type {raw['error_type']!r} is none of {', '.join(ERROR_TYPES)}", "use one of the four error types")
    solution = _solution_steps(raw["solution"])
    if solution is None:
        raise bad("solution must be a non-empty list of step strings", 'give ["Step 1: ...", "Step 2: ..."]')
    if not isinstance(raw["error_identify"], Mapping) or not raw["error_identify"]:
        raise bad("error_identify must be a non-empty object", 'give {"step1": ["1", ""], "step2": ["0", "why"]}')
    labels: dict[int, str] = {}
    for key, value in raw["error_identify"].items():
        step, label = step_number(key), label_value(value)
        if step is None or label is None or not 1 <= step <= len(solution):
            raise bad(f"error_identify entry {key!r}: {value!r} is not a step of the solution with a '0'/'1' label",
                      f'keys are "step1".."step{len(solution)}", values ["1", ""] or ["0", "explanation"]')
        labels[step] = label
    if not isinstance(raw["error_graph"], Mapping):
        raise bad("error_graph must be an object", 'give {"step2": ["step2"], "step3": ["step2"]}')
    edges = graph_edges(raw["error_graph"])
    outside = sorted({step for edge in edges for step in edge if not 1 <= step <= len(solution)})
    if outside:
        raise bad(f"error_graph names step(s) {', '.join(map(str, outside))}, but the solution has {len(solution)} step(s)",
                  f'refer only to "step1".."step{len(solution)}"')
    intervals = _gold_intervals(raw["timestamps"])
    if intervals is None:
        raise bad(f"timestamps {raw['timestamps']!r} is not a non-empty list of [start, end] seconds",
                  "give [[12.0, 20.0], [31.0, 35.0]] (start <= end, seconds)")
    for name in ("question", "answer", "rationale"):
        if not isinstance(raw[name], str) or not raw[name].strip():
            raise bad(f"{name} is empty or not a string", f"fill in the {name}")
    return {
        "id": record_id,
        "video": raw["video"],
        "domain": domain,
        "error_type": error_type,
        "solution_source": _text(raw.get("solution_source")).strip() or "(unknown)",
        "source": _text(raw.get("source")).strip(),
        "question": raw["question"].strip(),
        "answer": raw["answer"].strip(),
        "solution": solution,
        "error_identify": dict(raw["error_identify"]),
        "error_graph": dict(raw["error_graph"]),
        "labels": labels,
        "edges": edges,
        "intervals": intervals,
        "rationale": raw["rationale"].strip(),
    }


def load_records(source: DataSource) -> list[dict[str, Any]]:
    assert source.root is not None  # no hub copy exists (resolve_source says so)
    path = source.root / JSONL_NAME
    if not path.is_file():
        raise DataError("the ViRectify records file is missing", path=str(path), fix=f"use this layout: {LOCAL_LAYOUT}")
    records = [normalize_record(raw, line=i + 1, path=path) for i, raw in enumerate(read_jsonl(path))]
    if not records:
        raise DataError("the ViRectify records file holds no record", path=str(path), fix="one JSON record per line")
    seen: set[str] = set()
    for record in records:
        if record["id"] in seen:
            raise DataError("duplicate id", record=record["id"], path=str(path), fix="give every record its own id")
        seen.add(record["id"])

    def check(record: dict[str, Any]) -> None:
        video = safe_path(source.root, record["video"], record=record["id"], field="video")
        require_file(video, record=record["id"], what="video",
                     fix=f"put the video there (layout: {LOCAL_LAYOUT}), or set "
                         "LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA=1 to skip such records")
        record["video_path"] = str(video)
        duration = video_info(video, record["id"]).duration  # a corrupt video is a (skippable) MediaError
        late = [record["intervals"][i] for i in intervals_past_end(record["intervals"], duration)]
        if late:
            raise DataError(f"timestamps {late} lie past the end of the video ({duration:.2f} s)", record=record["id"],
                            path=str(path), fix=f"correct the key-time intervals, or the 'video' file ({video})")

    return keep_records_with_media(BENCHMARK, records, check)


def _options(spec: Mapping[str, Any]) -> dict[str, Any]:
    num_frames = int(spec.get("num_frames", DEFAULT_NUM_FRAMES))
    side = spec.get("max_long_side", DEFAULT_MAX_LONG_SIDE)
    mode = spec.get("visual_mode", "interleaved")
    if num_frames < 1 or mode not in VISUAL_MODES:
        raise DataError(f"bad task options num_frames={num_frames!r}, visual_mode={mode!r}",
                        fix=f"num_frames >= 1 and visual_mode one of {', '.join(VISUAL_MODES)}")
    return {"num_frames": num_frames, "max_long_side": int(side) if side else 0, "visual_mode": mode}


def _load(dataset: Any) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], DataSource]:
    spec = source_spec(dataset)
    source = resolve_source(BENCHMARK, spec.get("source", "auto"), sample_dir=SAMPLE_DIR, hub_repo=None,
                            local_layout=LOCAL_LAYOUT)
    return load_records(source), _options(spec), spec, source


def _common_fields(record: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": record["id"], "video_path": record["video_path"], "source_video": record["video"], "domain": record["domain"],
        "error_type": record["error_type"], "solution_source": record["solution_source"], "source": record["source"],
        "question": record["question"], "answer": record["answer"], "solution": record["solution"], **options,
    }


def oracle_response(record: Mapping[str, Any]) -> str:
    """The gold annotation in the output format (what a perfect model answers)."""
    return (f"<error_identify>{json.dumps(record['error_identify'], ensure_ascii=False)}</error_identify> "
            f"<error_graph>{json.dumps(record['error_graph'], ensure_ascii=False)}</error_graph> "
            f"<timestamps>{format_intervals(record['intervals'])}</timestamps> "
            f"<rationale>{redact_answer(record['rationale'])} "
            f"<answer>{ANSWER_SENTENCE.format(answer=record['answer'])}</answer></rationale>")


def chance_responses(n_steps: int) -> list[str]:
    """Replies a chance answerer picks from: four label patterns that ignore the video and the gold."""
    patterns = [["1"] * n_steps, ["0"] * n_steps, [str((k + 1) % 2) for k in range(n_steps)],
                [str(k % 2) for k in range(n_steps)]]
    out = []
    for letter, pattern in zip("ABCD", patterns):
        identify = {f"step{k}": [label, "" if label == "1" else "wrong"] for k, label in enumerate(pattern, start=1)}
        wrong = [f"step{k}" for k, label in enumerate(pattern, start=1) if label == "0"]
        graph = {step: [wrong[max(0, i - 1)]] for i, step in enumerate(wrong)}
        out.append(f"<error_identify>{json.dumps(identify)}</error_identify> <error_graph>{json.dumps(graph)}</error_graph> "
                   f"<timestamps>[00:00-00:05]</timestamps> <rationale>A guess. "
                   f"<answer>{ANSWER_SENTENCE.format(answer=letter)}</answer></rationale>")
    return out


def process_docs(dataset: Any):
    records, options, _, _ = _load(dataset)
    docs = []
    for r in records:
        docs.append({
            **_common_fields(r, options),
            "gold_labels": json.dumps({str(k): v for k, v in sorted(r["labels"].items())}),
            "gold_edges": json.dumps(sorted(r["edges"])),
            "gold_timestamps": json.dumps(r["intervals"]),
            ORACLE_FIELD: oracle_response(r),
            CHANCE_FIELD: chance_responses(len(r["solution"])),
        })
    return to_dataset(stamp_skipped(docs, records))


# ----------------------------------------------------------------------------------------------- reflection hints

def _hints_path(spec: Mapping[str, Any], source: DataSource) -> Path | None:
    env = os.environ.get(HINTS_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    if spec.get("hints_file"):
        assert source.root is not None
        return safe_path(source.root, str(spec["hints_file"]), record="source row", field="hints_file")
    return None


def _identify_text(value: Any) -> str:
    if isinstance(value, Mapping):
        return json.dumps(dict(value), ensure_ascii=False)
    text = _text(value).strip()
    inner = extract_tag(text, "error_identify")
    return inner if inner is not None else text


def render_hint(kind: str, error_identify: Any, rationale: Any, timestamps: Any) -> str:
    """The feedback shown in the reflection prompt. The rationale loses its final answer (``redact_answer``)."""
    if kind == "error_identify":
        return f"Error identification:\n{_identify_text(error_identify)}"
    lines = []
    if isinstance(timestamps, str) and timestamps.strip():
        intervals = parse_intervals(timestamps)
        lines.append(f"Key timestamps: {format_intervals(intervals) if intervals else timestamps.strip()}")
    elif isinstance(timestamps, list) and timestamps:
        intervals = _gold_intervals(timestamps)
        if intervals:
            lines.append(f"Key timestamps: {format_intervals(intervals)}")
    text = _text(rationale).strip()
    inner = extract_tag(text, "rationale")
    lines.append(f"Rationale: {redact_answer(inner if inner is not None else text)}")
    return "\n".join(lines)


def load_hints(path: Path, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """id -> {error_identify, rationale, timestamps} from a hints JSONL; every record needs an entry."""
    if not path.is_file():
        raise DataError("the reflection hints file is missing", path=str(path),
                        fix=f"point {HINTS_ENV} at a JSONL of {{\"id\", \"error_identify\", \"rationale\"}} (see the README)")
    hints: dict[str, dict[str, Any]] = {}
    for number, row in enumerate(read_jsonl(path), start=1):
        key = _text(row.get("id")).strip()
        if not key:
            raise DataError(f"line {number} has no id", path=str(path), fix="every line needs the record's id")
        hints[key] = row
    missing = [i for i in ids if i not in hints]
    if missing:
        raise DataError(f"{len(missing)} record(s) have no hint, e.g. {', '.join(missing[:5])}", path=str(path),
                        fix="give one line per record (an empty string is a valid, empty hint)")
    return hints


def process_docs_reflect(dataset: Any):
    records, options, spec, source = _load(dataset)
    kinds = list(spec.get("hints", HINT_KINDS))
    if not kinds or any(k not in HINT_KINDS for k in kinds):
        raise DataError(f"bad task option hints={kinds!r}", fix=f"a list drawn from {', '.join(HINT_KINDS)}")
    path = _hints_path(spec, source)
    provided = load_hints(path, [r["id"] for r in records]) if path is not None else None
    docs = []
    for r in records:
        given = provided[r["id"]] if provided is not None else None
        for kind in kinds:
            if given is None:
                hint = render_hint(kind, r["error_identify"], r["rationale"], r["intervals"])
            else:
                hint = render_hint(kind, given.get("error_identify"), given.get("rationale"), given.get("timestamps"))
            docs.append({
                **_common_fields(r, options), "hint_kind": kind, "hint": hint,
                "hint_source": "gold" if given is None else str(path),
                ORACLE_FIELD: f"<answer>{ANSWER_SENTENCE.format(answer=r['answer'])}</answer>",
                CHANCE_FIELD: [f"<answer>{ANSWER_SENTENCE.format(answer=c)}</answer>" for c in "ABCD"],
            })
    return to_dataset(stamp_skipped(docs, records))


def _logged_text(row: Mapping[str, Any]) -> str:
    """The model output of one logged sample: ``resps`` when present, else ``filtered_resps`` (where
    lmms-eval 0.7.3 stores the JudgeFilter's ``{"text", "judge"}`` dict as a JSON string)."""
    for field in ("resps", "filtered_resps"):
        value = row.get(field)
        while isinstance(value, list) and value:
            value = value[0]
        if isinstance(value, str) and value.startswith("{"):
            try:
                value = json.loads(value)
            except ValueError:
                pass
        if isinstance(value, Mapping):
            value = value.get("text")
        if isinstance(value, str):
            return value
    return ""


def _logged_id(row: Mapping[str, Any]) -> str | None:
    doc = row.get("doc")
    if isinstance(doc, Mapping) and doc.get("id"):
        return str(doc["id"])
    for metric in METRICS:  # every metric item of a virectify sample carries the record id
        item = row.get(metric)
        if isinstance(item, Mapping) and item.get("id"):
            return str(item["id"])
    return None


def hints_from_samples(samples_path: str | Path, out_path: str | Path) -> int:
    """Write a hints JSONL from the logged samples of a ``virectify`` run (``--log_samples``): the
    ``<error_identify>``, ``<timestamps>`` and ``<rationale>`` of each model output become one line.
    Returns the number of lines written."""
    lines = []
    for row in read_samples(Path(samples_path)):
        record_id = _logged_id(row)
        if record_id is None:
            raise DataError("a logged sample names no record id", path=str(samples_path),
                            fix="use the samples file of a virectify run (lmms-eval --log_samples)")
        body = strip_reasoning(_logged_text(row))
        lines.append(json.dumps({"id": record_id, "error_identify": extract_tag(body, "error_identify") or "",
                                 "timestamps": extract_tag(body, "timestamps") or "",
                                 "rationale": extract_tag(body, "rationale") or ""}, ensure_ascii=False))
    Path(out_path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


# ----------------------------------------------------------------------------------------------- prompts and visuals

def frame_times(doc: Mapping[str, Any]) -> list[float]:
    """Timestamps (s) of the frames ``doc_to_visual`` samples, from the video's frame count and rate only."""
    info = video_info(doc["video_path"], record_id=doc["id"])
    return [i / info.fps for i in frame_plan(info.num_frames, info.fps, int(doc["num_frames"]), None)]


def _frames(doc: Mapping[str, Any]):
    return sample_video(doc["video_path"], int(doc["num_frames"]), max_long_side=int(doc["max_long_side"]) or None,
                        record_id=doc["id"])


def _solution_text(doc: Mapping[str, Any]) -> str:
    return "\n".join(doc["solution"])


def prompt_text(doc: Mapping[str, Any]) -> str:
    """Everything after the frames: instruction, question, solution (and hint), output format."""
    parts = [f"Question: {doc['question']}", f"Solution:\n{_solution_text(doc)}"]
    if doc.get("hint_kind"):
        intro = REFLECT_INSTRUCTION.format(feedback=REFLECT_FEEDBACK[doc["hint_kind"]])
        return "\n\n".join([intro, *parts, doc["hint"], REFLECT_OUTPUT_FORMAT])
    return "\n\n".join([INSTRUCTION, *parts, OUTPUT_FORMAT])


def doc_to_visual(doc: Mapping[str, Any]) -> list:
    return _frames(doc).frames


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    # Simple model classes get the frames from doc_to_visual and "<image>" at each frame's slot.
    stamps = "".join(f"{frame_label(t)}<image>" for t in frame_times(doc))
    return f"{stamps}\n{prompt_text(doc)}"


def doc_to_messages(doc, lmms_eval_specific_kwargs=None):
    sampled = _frames(doc)
    if doc["visual_mode"] == "video":
        labels = ", ".join(frame_label(t) for t in sampled.timestamps)
        return interleaved_messages(f"The video's frames, sampled at {labels}:", [FrameGroup("", sampled.frames)],
                                    prompt_text(doc))
    # the paper's "[1s]<image>[2s]<image>...": each frame an image after its time
    groups = [FrameGroup(frame_label(t), [frame], kind="image") for t, frame in zip(sampled.timestamps, sampled.frames)]
    return interleaved_messages("", groups, prompt_text(doc))


# ----------------------------------------------------------------------------------------------- judge and scoring

def judge_item(response: str, doc: Mapping[str, Any]) -> JudgeItem | None:
    """The boxed corrected answer against the reference; None (nothing to judge: scored 0) without one."""
    answer, _ = find_answer(strip_reasoning(_text(response)))
    if answer is None:
        return None
    return JudgeItem(question=doc["question"], prediction=answer, reference=doc["answer"], item_id=doc["id"])


METRICS = ("acc_i", "iou", "acc_r", "graph_jaccard", "format_rate", "acc_r_judge_errors", "parse_fail",
           "by_domain", "by_error_type", "by_solution_source")
REFLECT_METRICS = ("acc_r", "acc_r_error_identify", "acc_r_rationale", "acc_r_judge_errors", "answer_parse_fail")
# Computed from judge verdicts: null while a sample's verdict is missing (the others stay).
JUDGED_METRICS = ("acc_r", "by_domain", "by_error_type", "by_solution_source")
REFLECT_JUDGED_METRICS = ("acc_r", "acc_r_error_identify", "acc_r_rationale")


def score_response(doc: Mapping[str, Any], text: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the per-sample scores, what was parsed) for one response; scores are fractions 0-1."""
    parsed = parse_response(text)
    gold_labels = {int(k): v for k, v in json.loads(doc["gold_labels"]).items()}
    gold_edges = {(int(s), int(t)) for s, t in json.loads(doc["gold_edges"])}
    gold_intervals = [tuple(iv) for iv in json.loads(doc["gold_timestamps"])]
    missing = parsed["missing"]
    item = {
        "id": doc["id"], "domain": doc["domain"], "error_type": doc["error_type"],
        "solution_source": doc["solution_source"],
        "source_video": doc.get("source_video"),  # the cluster unit of error bars (None in runs logged before it)
        "acc_i": step_accuracy(parsed["labels"], gold_labels),
        "iou": timestamp_iou(parsed["intervals"], gold_intervals),
        "graph_jaccard": graph_jaccard(parsed["edges"], gold_edges),
        "format_ok": not any(part in missing for part in PARTS),
        "missing": missing,
    }
    item["score"] = item["acc_i"]  # what lmms-eval's own standard error and --baseline read (score_key)
    shown = {
        "labels": None if parsed["labels"] is None else {f"step{k}": v for k, v in sorted(parsed["labels"].items())},
        "edges": None if parsed["edges"] is None else [f"step{s}->step{t}" for s, t in sorted(parsed["edges"])],
        "timestamps": None if parsed["intervals"] is None else merge_intervals(parsed["intervals"]),
        "answer": parsed["answer"],
    }
    return item, shown


def process_results(doc, results):
    text, outcome = judged_parts(results)
    item, shown = score_response(doc, text)
    item["judge"] = outcome.to_dict()
    item["acc_r"] = judged_value(outcome)
    out = {metric: item for metric in METRICS}
    out["format_rate"] = {**item, "parsed": shown}  # the logged sample shows what was read once
    return with_unscored(out, [text], judge=outcome, judged=JUDGED_METRICS, doc=doc)


def process_results_reflect(doc, results):
    text, outcome = judged_parts(results)
    answer, _ = find_answer(strip_reasoning(text))
    item = {"id": doc["id"], "source_video": doc.get("source_video"), "hint_kind": doc["hint_kind"],
            "hint_source": doc["hint_source"], "domain": doc["domain"],
            "answer": answer, "missing": {} if answer is not None else {"answer": "no \\boxed{} answer"},
            "judge": outcome.to_dict(), "acc_r": judged_value(outcome)}
    return with_unscored(dict.fromkeys(REFLECT_METRICS, item), [text], judge=outcome, judged=REFLECT_JUDGED_METRICS,
                         doc=doc)


def judged_value(outcome: JudgeOutcome) -> float | None:
    """One sample's share of acc_r, by ``judged_mean``'s rule: the verdict; 0 when there was nothing to
    judge (no boxed answer); None for a judge error (left out of the denominator)."""
    if outcome.skipped and outcome.error is None:
        return 0.0
    if outcome.error is not None or outcome.verdict is None:
        return None
    return float(outcome.verdict)


def _mean_percent(values: Iterable[float]) -> float:
    values = list(values)
    return 100.0 * sum(values) / len(values) if values else 0.0


def _judged_percent(items: Sequence[Mapping[str, Any]]) -> float | None:
    """acc_r of a group (judge errors left out), from the per-sample values; None when nothing was judged."""
    values = [i["acc_r"] for i in items if i["acc_r"] is not None]
    return 100.0 * sum(values) / len(values) if values else None


def agg_acc_i(items):
    return _mean_percent(i["acc_i"] for i in items)


def agg_iou(items):
    return _mean_percent(i["iou"] for i in items)


def agg_graph_jaccard(items):
    return _mean_percent(i["graph_jaccard"] for i in items)


def agg_format_rate(items):
    return accuracy([bool(i["format_ok"]) for i in items])


def agg_acc_r(items):
    """Only samples with a verdict reach this (a judge error makes acc_r unscored: null, counted)."""
    return aggregate_judged([i["judge"] for i in items], metric="acc_r", threshold=1.0)


def agg_acc_r_judge_errors(items):
    return judged_mean([i["judge"] for i in items]).n_errors


def agg_parse_fail(items):
    return {part: sum(1 for i in items if part in i["missing"]) for part in (*PARTS, "answer")}


def _table(items: Sequence[Mapping[str, Any]], field: str, names: Mapping[str, str] | None) -> dict[str, dict[str, Any]]:
    """The paper's Table 2 layout: per group and in total, acc_i, iou and acc_r in percent, and n."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    if names:
        for key in names:
            groups[names[key]] = []
    for item in items:
        key = item[field]
        groups.setdefault(names.get(key, key) if names else key, []).append(item)
    if not names:
        groups = dict(sorted(groups.items()))
    groups[TOTAL] = list(items)

    def row(group: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        if not group:
            return {"acc_i": None, "iou": None, "acc_r": None, "n": 0}
        return {"acc_i": agg_acc_i(group), "iou": agg_iou(group), "acc_r": _judged_percent(group), "n": len(group)}

    return {name: row(group) for name, group in groups.items()}


def agg_by_domain(items):
    return _table(items, "domain", DOMAINS)


def agg_by_error_type(items):
    return _table(items, "error_type", ERROR_TYPES)


def agg_by_solution_source(items):
    return _table(items, "solution_source", None)


def _acc_r_of(kind: str):
    def agg(items):
        chosen = [i for i in items if i["hint_kind"] == kind]
        value = _judged_percent(chosen) if chosen else None
        return float("nan") if value is None else value
    return agg


agg_acc_r_error_identify = _acc_r_of("error_identify")
agg_acc_r_rationale = _acc_r_of("rationale")


def agg_answer_parse_fail(items):
    return sum(1 for i in items if i["answer"] is None)


# A failed model request is unscored, not wrong (lmms_eval_plugins/outcome.py): every metric is null then.
agg_unscored = count_unscored
guard_aggregations(globals())
