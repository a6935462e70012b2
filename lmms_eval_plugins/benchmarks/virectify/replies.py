"""ViRectify replies: reading the four parts of a model's answer, and the boxed corrected answer.

Parsers are pure and never raise: a missing or broken part of an output scores 0 on its own metric
only, and the logged sample says what was missing.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from lmms_eval_plugins.parsing import (
    extract_boxed,
    extract_tag,
    parse_intervals,
    strip_reasoning,
    tag_runs_to_end,
)

PARTS = ("error_identify", "error_graph", "timestamps", "rationale")  # the four parts of the output format


# ----------------------------------------------------------------------------------------------- text helpers

_QUOTES = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
    }
)
# "step1", "Step 1", "step_1", "STEP-1", or a bare "1" (keys and references inside a dict)
_STEP_REF = re.compile(r"\s*(?:step[\s_\-]*)?(\d{1,6})\s*", re.IGNORECASE)
_LABEL_WORDS = {"1": "1", "0": "0", "correct": "1", "incorrect": "0", "wrong": "0", "true": "1", "false": "0"}
# Regex fallback for dicts that neither JSON nor Python can read: `step<N>` <quote/space> `:` <[ ( quote> label
_LABEL_ENTRY = re.compile(
    r"(?<![A-Za-z])step[\s_\-]*(\d{1,6})[\s\"']*[:=][\s\[(\"']*(1|0|correct|incorrect|wrong|true|false)(?![\w]|\.\d)",
    re.IGNORECASE,
)
_GRAPH_ENTRY = re.compile(
    r"(?<![A-Za-z])step[\s_\-]*(\d{1,6})[\s\"']*[:=]\s*(?:[\[(]([^\[\]()]{0,4000})[\])]|[\"']([^\"'\n]{0,400})[\"'])",
    re.IGNORECASE,
)
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
    """ "1" (correct) / "0" (incorrect) from ["1", ""], "0", 0, True, "correct"...; None if unreadable."""
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


_ANSWER_BLOCK = re.compile(r"<\s*answer\s*>.*?(?:<\s*/\s*answer\s*>|$)", re.IGNORECASE | re.DOTALL)
_BLANK_RUN = re.compile(r"[ \t]{2,}")
_BLANK_BEFORE_PUNCTUATION = re.compile(r"[ \t]+([.,;:!?])")
_SENTENCE_ENDING_TWICE = re.compile(r"([.!?])(?:[ \t]*[.])+")
_BLANK_BEFORE_NEWLINE = re.compile(r"[ \t]+\n")
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
    text = _BLANK_RUN.sub(" ", "".join(out))
    text = _BLANK_BEFORE_PUNCTUATION.sub(r"\1", text)  # no space left before punctuation
    text = _SENTENCE_ENDING_TWICE.sub(r"\1", text)  # nor a sentence ending twice
    return _BLANK_BEFORE_NEWLINE.sub("\n", text).strip()


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
    ``[[12, 20], [31, 35]]``. When some are clock times, only those written as times count (clock times, or
    with a unit: "[24s]-[30s]"); a note beside them such as "bounces 2-3 times" is no interval. ``cut_off``: the reply ended inside the tag, so a last piece
    that does not end with a closing bracket may be incomplete ("[00:31-00:3") and is dropped; the
    intervals before it count.
    """
    if cut_off and not content.rstrip().endswith(("]", ")")):
        ends = [content.rfind(c) for c in "]),;\n"]
        content = content[: max(ends) + 1] if max(ends) >= 0 else ""
    found = [iv for iv in parse_intervals(content, clock_first=True) if all(math.isfinite(x) for x in iv)]
    return found or None


def _read_part(body: str, tag: str, what: str, read: Callable[[str], Any], missing: dict[str, str]) -> Any:
    """One tagged part of a reply, read by ``read`` (None when unreadable); why it is absent goes to ``missing``."""
    content = extract_tag(body, tag)
    if content is None:
        missing[tag] = f"no <{tag}> tag"
        return None
    value = read(content)
    if value is None:
        missing[tag] = f"no readable {what} in <{tag}>"
    return value


def parse_response(text: Any) -> dict[str, Any]:
    """Read the four parts of a ViRectify answer. Never raises.

    Returns ``labels`` ({step: "0"/"1"} or None), ``edges`` (set of (source, target) or None),
    ``intervals`` (list of (start, end) seconds or None), ``answer`` (the boxed corrected answer or None)
    and ``missing`` ({part: reason} for each of the four format parts that is absent or unreadable,
    plus ``answer`` when there is no boxed answer at all).
    """
    body = strip_reasoning(_text(text))
    missing: dict[str, str] = {}

    labels = _read_part(body, "error_identify", "step label", lambda c: parse_step_labels(c) or None, missing)
    edges = _read_part(body, "error_graph", "graph", parse_graph, missing)
    intervals = _read_part(
        body, "timestamps", "interval", lambda c: key_times(c, cut_off=tag_runs_to_end(body, "timestamps")), missing
    )

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
