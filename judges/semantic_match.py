"""``semantic_match``: binary answer-correctness judge (ViRectify's ``acc_r``), and its offline twin.

The LLM judge sends the instructions of the benchmark that uses it as the system message (its spec's
``judge_prompt``, :func:`~lmms_eval_plugins.judges.registry.declared_prompt`; ViRectify: the paper's
Table 5 prompt) and the question, ground truth and prediction as delimited data; the verdict is 1
when the predicted answer matches the ground truth semantically and answers the question, else 0.

``semantic_match_offline`` is a deterministic, lower-fidelity stand-in: normalised answer matching
(exact text after normalisation, option letters, numbers).  It does not understand paraphrases.
"""

from __future__ import annotations

import re
import string
import unicodedata
from typing import Any, ClassVar

from .base import (
    JudgeItem,
    LLMJudge,
    OfflineJudge,
    ReplyParseError,
    Verdict,
    data_block,
    strip_think,
)
from .registry import declared_prompt

# The whole verdict, as the Table 5 prompt asks ("Only output 0 or 1"): after the reasoning blocks and
# the surrounding whitespace are removed, the reply is the digit 0 or 1, optionally followed by one
# period, optionally wrapped in one pair of ** (markdown bold) or ` (code); the period may sit inside
# or outside the wrapper.  Nothing else: no words, no second digit, no other wrapper, no full-width
# digits.  Accepted: 1  1.  **1**  **1.**  **1**.  `1`  `1.`  `1`.  (and the same with 0).
_BINARY_REPLY = re.compile(r"([01])\.?|\*\*([01])\.?\*\*|`([01])\.?`|\*\*([01])\*\*\.|`([01])`\.")


def parse_binary_reply(reply: str) -> int:
    """The judge's verdict, 0 or 1: the reply (its ``<think>`` blocks and surrounding whitespace
    removed) must be exactly one of the formats of ``_BINARY_REPLY``; anything else, e.g. a verdict in
    prose, "Score: 1", "1/1", or a reply quoting the judged answer, raises :class:`ReplyParseError`
    (the runtime re-asks, then records a judge error).  Never a guess."""
    text = strip_think(reply).strip()
    match = _BINARY_REPLY.fullmatch(text)
    if match is None:
        shown = " ".join(text.split())[:80]
        if not shown:
            raise ReplyParseError("the reply is empty; expected exactly 0 or 1")
        raise ReplyParseError(f"the reply must be exactly 0 or 1, got {shown!r}")
    return int(next(g for g in match.groups() if g is not None))


class SemanticMatchJudge(LLMJudge):
    name: ClassVar[str] = "semantic_match"
    version: ClassVar[str] = "1"
    kind: ClassVar[str] = "binary"
    description: ClassVar[str] = (
        "1 if the predicted answer matches the ground truth semantically and answers the question (the prompt its benchmark declares, see docs/judges.md), else 0"
    )
    default_sampling: ClassVar[dict[str, Any]] = {"temperature": 0.0, "max_tokens": 16}

    def __init__(self, sampling=None, system_prompt: str | None = None) -> None:
        super().__init__(sampling)
        # the instructions are the benchmark's (its spec's judge_prompt), told by the task that uses the
        # judge; read when first needed, so a judge that only parses replies (batch ingest) looks up nothing
        self._system_prompt = system_prompt

    @property
    def system_prompt(self) -> str:
        """The instructions this judge applies: told, else what the installed benchmarks using it declare."""
        if self._system_prompt is None:
            self._system_prompt = declared_prompt(self.name)
        return self._system_prompt

    def validate_item(self, item: JudgeItem) -> None:
        if not item.reference.strip():
            raise ValueError("semantic_match needs a non-empty reference (ground truth) answer")

    def build_messages(self, item: JudgeItem) -> list[dict[str, str]]:
        user = data_block(
            [
                ("QUESTION", item.question),
                ("GROUND_TRUTH_ANSWER", item.reference),
                ("PREDICTED_ANSWER", strip_think(item.prediction)),
            ]
        )
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": user}]

    def parse_reply(self, reply: str, item: JudgeItem) -> Verdict:
        value = parse_binary_reply(reply)
        return Verdict(score=float(value), detail={"reply": strip_think(reply)[:200]})

    def reask_message(self, item: JudgeItem, error: str) -> str:
        return f"Your reply could not be read ({error}). Reply with the single character 1 or 0 and nothing else."

    def empty_verdict(self, item: JudgeItem) -> Verdict:
        return Verdict(score=0.0, detail={"empty_prediction": True})


# --------------------------------------------------------------------------------------------------
# Offline: normalised answer matching

_ARTICLES = {"a", "an", "the"}
_PUNCT = str.maketrans({c: " " for c in string.punctuation if c not in "-."})
_ANSWER_IS = re.compile(r"(?:final answer|correct answer|answer)\s*(?:should be|would be|is|:)\s*(.+)", re.IGNORECASE)
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (nested braces allowed), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i = start + len("\\boxed{")
    depth = 1
    out = []
    while i < len(text):
        ch = text[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return "".join(out)
        out.append(ch)
        i += 1
    return None


def extract_final_answer(text: str) -> str:
    """The final answer in a free-form prediction: last ``\\boxed{}``, else after "answer is", else all."""
    text = strip_think(text)
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    matches = list(_ANSWER_IS.finditer(text))
    if matches:
        tail = matches[-1].group(1)
        return re.split(r"(?<=[^0-9])\.\s|\n", tail, maxsplit=1)[0]
    return text


def normalise_answer(text: str) -> str:
    text = unicodedata.normalize("NFKC", text or "").lower()
    text = re.sub(r"\\text\{([^{}]*)\}", r"\1", text).replace("$", " ")
    text = text.translate(_PUNCT)
    words = [w.strip(".") for w in text.split()]
    return " ".join(w for w in words if w and w not in _ARTICLES)


_LETTER = re.compile(r"^\(?([A-Za-z])\)?(?:[.):](?:\s+(.*))?)?$", re.DOTALL)


def _option_letter(raw: str) -> tuple[str | None, str]:
    """("b", "rest of the option text") for "B", "(B)", "B.", "B) 3 cups"; (None, raw) otherwise."""
    m = _LETTER.match(raw.strip())
    if not m:
        return None, raw
    return m.group(1).lower(), m.group(2) or ""


def match_answers(prediction: str, reference: str) -> tuple[int, str]:
    """(1 or 0, method) for normalised answer matching."""
    cand_raw = extract_final_answer(prediction)
    ref_raw = extract_final_answer(reference)
    ref_letter, ref_rest = _option_letter(ref_raw)
    if ref_letter is not None:
        cand_letter, _ = _option_letter(cand_raw)
        if cand_letter is not None:
            return (1 if cand_letter == ref_letter else 0), "option"
        if ref_rest and normalise_answer(cand_raw) and normalise_answer(cand_raw) == normalise_answer(ref_rest):
            return 1, "option_text"
        return 0, "option"
    cand, ref = normalise_answer(cand_raw), normalise_answer(ref_raw)
    if not cand or not ref:
        return 0, "empty"
    if cand == ref:
        return 1, "exact"
    if _NUMBER.match(cand) and _NUMBER.match(ref):
        a, b = float(cand), float(ref)
        return (1 if abs(a - b) <= 1e-6 * max(1.0, abs(b)) else 0), "numeric"
    return 0, "exact"


class OfflineSemanticMatchJudge(OfflineJudge):
    name: ClassVar[str] = "semantic_match_offline"
    version: ClassVar[str] = "1"
    kind: ClassVar[str] = "binary"
    fidelity: ClassVar[str] = "offline (lower fidelity): normalised answer matching, no paraphrase understanding"
    description: ClassVar[str] = (
        "deterministic stand-in for semantic_match: 1 if the final answer equals the reference after normalisation"
    )

    def validate_item(self, item: JudgeItem) -> None:
        if not item.reference.strip():
            raise ValueError("semantic_match_offline needs a non-empty reference (ground truth) answer")

    def judge(self, item: JudgeItem) -> Verdict:
        value, method = match_answers(item.prediction, item.reference)
        return Verdict(score=float(value), detail={"method": method, "fidelity": "offline"})

    def empty_verdict(self, item: JudgeItem) -> Verdict:
        return Verdict(score=0.0, detail={"empty_prediction": True})
