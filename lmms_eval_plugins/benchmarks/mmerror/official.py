"""MMErroR's official answer parsers, reproduced for parity (``official_accuracy`` and ``official_strict_accuracy``).

Behaviour of ``normalize_label(..., is_prediction=True)`` and ``normalize_presence_decision`` in
``mmerror_eval/labels.py`` of github.com/code-here-in/MMerroR-Evaluation (commit b5fc9f8), established by
reading and running them; written here from that behaviour. Their quirks are kept on purpose (a parity
parser that is "better" is no parity parser):

- only the ``<think>``/``</think>`` tags are removed, not the reasoning between them;
- letters are case-insensitive everywhere ("Answer: b" is B); brackets are only ``(`` ``)`` ("[B]" fails);
- rules in order: the whole reply; ``\\boxed{X}`` (every box must agree); bare-letter lines (all must
  agree); ``Answer:``/``Final answer:``/``Output:`` lines (all must agree); the exact, case-sensitive
  label name ("b_reasoning_error" fails); so "A\\nAnswer: B" is A and "Answer: A\\nAnswer: B" fails;
- stage 1 (P/N): the whole reply ``P``/``N`` (one trailing ``.!?:``), else any reply containing
  "no error" is N (checked first), containing "error present" is P, and exactly "none"/"error".

The official regular expressions backtrack quadratically on long whitespace runs; the scanners below
accept exactly the same strings in linear time (each optional piece of those patterns is a character
class disjoint from its neighbours, so a greedy left-to-right scan decides the same match).
The official runner also retries an unparseable reply up to 5 times: at temperature 0 a retry returns
the same reply, so one reply decides here.

Also reproduced: the gold-label reading of ``normalize_label(..., is_prediction=False)``
(:func:`official_gold_letter`) and the report arithmetic of ``compute_model_metrics`` in
``mmerror_eval/reporting.py`` (:func:`official_report`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_THINK_TAG = re.compile(r"</?think>", re.IGNORECASE)
_BOX_MARKER = re.compile(r"<\|\s*begin_of_box\s*\|>|<\|\s*end_of_box\s*\|>", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed", re.IGNORECASE)
_BOX_COMMANDS = ("\\mathbf", "\\mathrm", "\\text")  # tried in this order, case-insensitively
_ANSWER_LINE = re.compile(r"(?:final\s*answer|answer|output)\b\s*[:\-]?\s*(.+)", re.IGNORECASE)
_MARKS = frozenset("*_`~$")
_END_PUNCT = frozenset(".!?:")


def _skip(text: str, i: int, allowed: frozenset[str] | None) -> int:
    """Index after the run of ``allowed`` characters (whitespace when None) starting at ``i``."""
    n = len(text)
    while i < n and (text[i].isspace() if allowed is None else text[i] in allowed):
        i += 1
    return i


def _letter_at(text: str, i: int, letters: str) -> str | None:
    if i < len(text) and text[i].isascii() and text[i].upper() in letters:
        return text[i].upper()
    return None


def simple_letter(text: str, letters: str) -> str | None:
    """The whole text is one letter, case-insensitive, with optional ``*_`~$`` marks, ``( )`` and
    trailing ``.!?:`` (official ``match_simple``)."""
    i = _skip(text, _skip(text, 0, None), _MARKS)
    if text[i : i + 1] == "(":
        i += 1
    i = _skip(text, i, None)
    letter = _letter_at(text, i, letters)
    if letter is None:
        return None
    i = _skip(text, i + 1, None)
    if text[i : i + 1] == ")":
        i += 1
    i = _skip(text, _skip(text, _skip(text, i, _MARKS), _END_PUNCT), None)
    return letter if i == len(text) else None


def _box_at(text: str, i: int, letters: str) -> str | None:
    """The letter of ``\\boxed{X}`` / ``\\boxed{\\text{X}}`` whose ``\\boxed`` ends at ``i``, else None."""
    i = _skip(text, i, None)
    if text[i : i + 1] != "{":
        return None
    i = _skip(text, i + 1, None)
    for command in _BOX_COMMANDS:
        if text[i : i + len(command)].lower() == command:
            i += len(command)
            break
    i = _skip(text, i, None)
    if text[i : i + 1] == "{":
        i += 1
    i = _skip(text, i, None)
    letter = _letter_at(text, i, letters)
    if letter is None:
        return None
    i = _skip(text, i + 1, None)
    return letter if text[i : i + 1] == "}" else None  # "}" or "}}": either closes the official pattern


def boxed_letter(text: str, letters: str) -> str | None:
    """The letter of every ``\\boxed{}`` that holds one, when they all agree (official ``match_boxed``)."""
    found = {hit for m in _BOXED.finditer(text) if (hit := _box_at(text, m.end(), letters)) is not None}
    return found.pop() if len(found) == 1 else None


# The official runner (``_evaluate_record_etc``) takes an ETC reply holding this text as a failed request,
# whatever else it says (the provider's failure string, from VLMEvalKit); EPD's stages do not check it.
OFFICIAL_FAILURE_TEXT = "Failed to obtain answer via API"


def official_failure(reply: Any) -> bool:
    """An ETC reply the official runner counts as a failure: it holds :data:`OFFICIAL_FAILURE_TEXT`."""
    return isinstance(reply, str) and OFFICIAL_FAILURE_TEXT in reply


def official_letter(reply: Any, letters: str = "ABCD", names: dict[str, str] | None = None) -> str | None:
    """The official ``normalize_label`` on a model reply: a letter of ``letters`` or None (unparsed).
    ``names`` (letter -> label name) enables the last rule, the exact label name."""
    if reply is None:
        return None
    text = str(reply).strip()
    if not text:
        return None
    candidate = _BOX_MARKER.sub("", _THINK_TAG.sub("", text).strip()).strip()
    if not candidate:
        return None
    for rule in (simple_letter, boxed_letter):
        hit = rule(candidate, letters)
        if hit:
            return hit
    lines = [line.strip() for line in candidate.splitlines() if line.strip()]
    on_lines = {hit for line in lines if (hit := simple_letter(line, letters))}
    if len(on_lines) == 1:
        return on_lines.pop()
    answers = set()
    for line in lines:
        m = _ANSWER_LINE.match(line)
        if m:
            tail = m.group(1).strip()
            hit = simple_letter(tail, letters) or boxed_letter(tail, letters)
            if hit:
                answers.add(hit)
    if len(answers) == 1:
        return answers.pop()
    for letter, name in (names or {}).items():
        if text == name:  # the reply as given (think tags kept), case-sensitive
            return letter
    return None


def official_presence(reply: Any) -> str | None:
    """The official ``normalize_presence_decision``: "P", "N" or None."""
    if reply is None:
        return None
    text = str(reply).strip()
    if not text:
        return None
    letter = _letter_at(text, 0, "PN")
    if letter is not None:
        i = _skip(text, 1, None)
        if text[i : i + 1] in _END_PUNCT:
            i += 1
        if _skip(text, i, None) == len(text):
            return letter
    lowered = text.lower()
    if "no error" in lowered or lowered == "none":
        return "N"
    if "error present" in lowered or lowered == "error":
        return "P"
    return None


# ------------------------------------------------------------------------------------------- gold labels

# Tried in this order on the lower-cased label, as plain substrings (so "Visual Reasoning Error" is A).
_GOLD_WORDS = (
    ("A", ("visual", "perception")),
    ("B", ("reasoning",)),
    ("C", ("question", "comprehension")),
    ("D", ("knowledge",)),
)


def official_gold_letter(label: Any, letters: str = "ABCDE") -> str | None:
    """The official ``normalize_label(label, spec, is_prediction=False)`` on a gold label, as a letter.

    ``letters`` is the spec's option set: "ABCDE" for EPD (the only one that reads no-error labels),
    "ABCD" for ETC (there an ``E_NoError`` record has no gold and is a failed sample). In order: a
    letter opening the label as a word ("b", "D. knowledge"); with E, "noerror"/"no error" anywhere;
    then the first of visual/perception (A), reasoning (B), question/comprehension (C), knowledge (D)
    found anywhere; else None."""
    if label is None:
        return None
    lowered = str(label).strip().lower()
    opening = re.match(rf"\s*([{letters.lower()}])\b", lowered)
    if opening:
        return opening.group(1).upper()
    if "E" in letters and ("noerror" in lowered or "no error" in lowered):
        return "E"
    for letter, words in _GOLD_WORDS:
        if any(word in lowered for word in words):
            return letter
    return None


# ------------------------------------------------------------------------------------------- the report


@dataclass(frozen=True)
class OfficialReport:
    """The headline numbers of the official report (``compute_model_metrics``), accuracies in percent."""

    dataset_total: int  # every record the run loaded, asked or not
    scored_total: int  # samples whose reply the official parser read
    correct: int
    accuracy: float  # correct / scored_total; 0.0 when nothing was read (no NaN officially)
    strict_accuracy: float  # correct / dataset_total; 0.0 for an empty run


def official_report(outcomes: Sequence[tuple[bool, bool]], *, not_asked: int = 0) -> OfficialReport:
    """The official report over per-sample ``(parsed, correct)`` outcomes.

    ``not_asked``: records the official runner counts in ``dataset_total`` but fails before asking the
    model: in ETC every ``E_NoError`` record (its gold label has no ETC letter). Three right answers
    plus one ``E_NoError`` record: accuracy 100.0, strict_accuracy 75.0."""
    if not_asked < 0:
        raise ValueError(f"not_asked must be 0 or more, got {not_asked}")
    scored = sum(1 for parsed, _ in outcomes if parsed)
    correct = sum(1 for parsed, right in outcomes if parsed and right)
    total = len(outcomes) + not_asked
    return OfficialReport(
        dataset_total=total,
        scored_total=scored,
        correct=correct,
        accuracy=100.0 * correct / scored if scored else 0.0,
        strict_accuracy=100.0 * correct / total if total else 0.0,
    )
