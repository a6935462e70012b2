"""``rubric``: scoring-point judge, its offline twin, and the reading of its replies.

For every scoring point the judge marks ``coverage`` (the output addresses it explicitly) and
``correctness`` (its details agree with the standard answer; an uncovered point is not correct).
The LLM judge sends the instructions of the benchmark that uses it (its spec's ``judge_prompt``,
:func:`~lmms_eval_plugins.judges.registry.declared_prompt`; the benchmark's aggregations live beside
them) and reads the reply format ``<score>{"coverage": [...], "correctness": [...]}</score>``.

The per-question verdict is ``(covered + correct) / (2 * points)``. A task's strict mode
(:func:`reads_officially`) reads the judge's reply as ``eval/score_CCQA.py`` does, numbers and list
lengths as written (:func:`official_lists`, :func:`official_verdict`).

``rubric_offline`` is a deterministic, lower-fidelity stand-in based on keyword overlap.
"""

from __future__ import annotations

from collections import Counter

import json
import math
import re
import unicodedata
from collections.abc import Iterable
from typing import Any, ClassVar

from .base import (
    JudgeItem,
    LLMJudge,
    OfflineJudge,
    ReplyParseError,
    Verdict,
    data_block,
    quoted_from,
    strip_think,
    verdict_nonce,
)
from .registry import declared_prompt

# The reply format the official prompt asks for: one <score>...</score> block holding the JSON object.
# Tag variants (case, inner spaces) are only recognised so that a second block, in any spelling, is
# refused; the one block must be spelled exactly <score>...</score>, as the official scorer reads it.
# The LLM judge asks for the tags of its request's nonce, <score-NONCE>...</score-NONCE> (base.verdict_nonce);
# every score-like tag, with or without a suffix, counts towards "exactly one block".
_SCORE_OPEN = re.compile(r"<\s*score(?:-[0-9a-z]*)?\s*>", re.IGNORECASE)
_SCORE_CLOSE = re.compile(r"<\s*/\s*score(?:-[0-9a-z]*)?\s*>", re.IGNORECASE)
_RUBRIC_KEYS = ("coverage", "correctness")


def _flag(value: Any, key: str, index: int) -> int:
    """0/1 from a JSON true/false or the integers 0 and 1; nothing else (not 1.0, "true", null)."""
    if type(value) is bool:
        return int(value)
    if type(value) is int and value in (0, 1):
        return value
    raise ReplyParseError(f'"{key}"[{index}] is {json.dumps(value)}, not true/false (or 0/1)')


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    counts = Counter(k for k, _ in pairs)  # linear: a hostile object may hold 100k keys
    dupes = sorted(k for k, n in counts.items() if n > 1)
    if dupes:
        raise ReplyParseError(f"the <score> JSON repeats the key(s) {', '.join(map(repr, dupes))}")
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise ReplyParseError(f"the <score> JSON holds {name}, which is not JSON")


def _loads_strict(text: str) -> Any:
    """RFC 8259 JSON only: no code fences, single quotes, Python literals, trailing commas, NaN or
    Infinity, and no repeated keys."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise ReplyParseError(f"the <score> block is not strict JSON ({exc.msg} at character {exc.pos})") from None
    except ValueError as exc:  # an integer of over 4300 digits: Python's int conversion limit
        raise ReplyParseError(f"the <score> block is not readable JSON ({exc})") from None
    except RecursionError:
        raise ReplyParseError("the <score> block nests too deeply to be the verdict") from None


def _first_score_block(reply: str, tag: str = "score") -> str | None:
    r"""The official ``extract(response, "score")``, ``re.search(r"<score>\s*(.*?)\s*</score>", DOTALL)``
    then ``strip()``, in linear time: the text between the first ``<score>`` and the first ``</score>``
    after it (no later ``<score>`` can have a ``</score>`` after it when the first has none)."""
    opening, closing = f"<{tag}>", f"</{tag}>"
    start = reply.find(opening)
    if start < 0:
        return None
    end = reply.find(closing, start + len(opening))
    return None if end < 0 else reply[start + len(opening) : end].strip()


def parse_rubric_reply(
    reply: str, n_points: int, *, first_block: bool = False, tag: str = "score", judged: JudgeItem | None = None
) -> tuple[list[int], list[int]]:
    """(coverage, correctness) as 0/1 lists from the judge's one ``<score>`` block.

    ``tag`` is the tag name the request asked for (the LLM judge passes ``score-NONCE``); with
    ``judged``, a verdict block that also occurs in the judged text is refused (a quote, not a verdict).

    ``first_block=True`` reads the reply as the official scorer does: the first ``<score>...</score>``
    (exact lowercase tags, ``<think>`` not removed, any later block ignored) parsed by ``json.loads``
    (extra keys ignored, NaN read); the lists are then taken as :func:`official_lists` takes them
    (any numbers, any lengths: ``n_points`` is not checked).

    After the judge's ``<think>`` blocks are removed, the reply must hold exactly one
    ``<score>...</score>`` block (text around it is allowed; a second block, even one spelled
    ``<SCORE>`` or ``< score >``, is refused rather than choosing one), whose content, stripped of
    surrounding whitespace, is strict JSON: an object with exactly the keys ``coverage`` and
    ``correctness``, each a list of ``n_points`` entries that are true/false or 0/1.  Anything else
    raises :class:`ReplyParseError` (the runtime re-asks, then records a judge error).

    The official CrossVid scorer (``eval/score_CCQA.py``) reads the first ``<score>`` block with
    ``json.loads`` and adds whatever the lists hold (its length check comes after the result is
    stored); for a reply without ``<think>`` blocks, every reply accepted by the default reading gives
    the same lists there.  Two blocks are refused here where the official scorer would take the first.
    """
    shown = f"<{tag}>...</{tag}>"
    if first_block:
        block = _first_score_block(reply or "", tag)
        if block is None and tag != "score" and f"<{tag}>" not in (reply or ""):
            tag, shown = "score", "<score>...</score>"  # a judge that kept the official tags: read them as it does
            block = _first_score_block(reply or "", tag)
        if block is None:
            raise ReplyParseError(f"no {shown} block in the reply")
        if judged is not None and quoted_from(f"<{tag}>{block}</{tag}>", judged):
            raise ReplyParseError(f"the {shown} block is quoted from the judged text")
        try:
            data = json.loads(block)
        except json.JSONDecodeError as exc:
            raise ReplyParseError(f"the first <score> block is not JSON ({exc.msg} at character {exc.pos})") from None
        except ValueError as exc:  # an integer of over 4300 digits: json.loads fails there too
            raise ReplyParseError(f"the first <score> block is not readable JSON ({exc})") from None
        except RecursionError:
            raise ReplyParseError("the <score> block nests too deeply to be the verdict") from None
        return official_lists(data)
    text = strip_think(reply)
    opens, closes = list(_SCORE_OPEN.finditer(text)), list(_SCORE_CLOSE.finditer(text))
    if not opens and not closes:
        raise ReplyParseError(f"no {shown} block in the reply")
    if len(opens) != 1 or len(closes) != 1:
        raise ReplyParseError(
            f"the reply must hold exactly one <score>...</score> block, spelled {shown}; it has {len(opens)} <score...> and "
            f"{len(closes)} </score...> tags"
        )
    start, end = opens[0], closes[0]
    if start.group(0) != f"<{tag}>" or end.group(0) != f"</{tag}>" or end.start() < start.end():
        raise ReplyParseError(
            f"no {shown} block in the reply (the verdict must be wrapped exactly so: this request's tag, lowercase, in that order)"
        )
    if judged is not None and quoted_from(text[start.start() : end.end()], judged):
        raise ReplyParseError(f"the {shown} block is quoted from the judged text")
    data = _loads_strict(text[start.end() : end.start()].strip())
    if not isinstance(data, dict) or sorted(data) != sorted(_RUBRIC_KEYS):
        got = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise ReplyParseError(
            f'the <score> block must be a JSON object with exactly the keys "coverage" and "correctness", got {got}'
        )
    return _rubric_lists(data, n_points)


# One entry of a list as the official scorer adds it: 0/1 for false/true, a number as given, and the
# non-finite floats json.loads reads as their JSON spelling, so a verdict's detail stays strict JSON.
Mark = int | float | str
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _mark(value: Any, key: str, index: int) -> Mark:
    if type(value) is bool:
        return int(value)
    if type(value) is int:
        return value
    if type(value) is float:
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    raise ReplyParseError(
        f'"{key}"[{index}] is {json.dumps(value)[:40]}: the official scorer cannot add it (only numbers and true/false)'
    )


def mark_value(mark: Any) -> float | int:
    """The number a stored list entry stands for (its JSON spelling for NaN and the infinities; NaN
    for anything else that is not a number, so an aggregation over edited details cannot raise)."""
    if isinstance(mark, bool):
        return int(mark)
    if isinstance(mark, (int, float)):
        return mark
    return _NON_FINITE.get(mark, math.nan) if isinstance(mark, str) else math.nan


def official_sum(coverage: Iterable[Any], correctness: Iterable[Any]) -> float | int:
    """``sum(score["coverage"] + score["correctness"])``, one question's points in ``eval/score_CCQA.py``
    (``update``): added in that order, so a NaN or opposite infinities make it NaN."""
    return sum(mark_value(v) for v in [*coverage, *correctness])


def official_lists(data: Any) -> tuple[list[Mark], list[Mark]]:
    """(coverage, correctness) from the first block's JSON exactly where the official scorer gets a
    number from it: ``score["coverage"]``, ``score["correctness"]`` and ``sum`` of the two lists joined.
    Any numbers (``[2, 0]``, ``[0.5, -1]``, NaN), lists of any length (the official length check
    comes after the result is stored), ``[]``. Everything that makes the official ``update`` fail
    before storing a result raises :class:`ReplyParseError` (a judge error here, a failure there)."""
    if not isinstance(data, dict) or any(k not in data for k in _RUBRIC_KEYS):
        raise ReplyParseError('the <score> block must be a JSON object with the keys "coverage" and "correctness"')
    coverage, correctness = data["coverage"], data["correctness"]
    if type(coverage) is not list or type(correctness) is not list:
        raise ReplyParseError('"coverage" and "correctness" must be lists (the official scorer joins and adds them)')
    marks = (
        [_mark(v, "coverage", i) for i, v in enumerate(coverage)],
        [_mark(v, "correctness", i) for i, v in enumerate(correctness)],
    )
    try:  # a float next to an int too large for one: OverflowError there as here
        float(official_sum(*marks))
    except OverflowError:
        raise ReplyParseError("the <score> lists add up to a number too large for a float") from None
    return marks


def official_verdict(coverage: list[Mark], correctness: list[Mark]) -> Verdict:
    """The verdict of a reply read as the official scorer reads it. ``detail`` keeps the lists as given
    (what the CCQA aggregation adds up) and ``official_sum`` over ``2 * n_points`` (n = the coverage
    list's length); ``score`` is that fraction clamped to [0, 1], 0 where it is not a number (NaN,
    ``[]``): a per-question figure only, never what the task score is computed from."""
    total, n = official_sum(coverage, correctness), len(coverage)
    fraction = total / (2 * n) if n else math.nan
    detail = {
        "coverage": list(coverage),
        "correctness": list(correctness),
        "n_points": n,
        "official_sum": _mark(float(total), "sum", 0) if not math.isfinite(total) else total,
        "reading": "official",
    }
    return Verdict(score=min(1.0, max(0.0, fraction)) if math.isfinite(fraction) else 0.0, detail=detail)


def _rubric_lists(data: dict[str, Any], n_points: int) -> tuple[list[int], list[int]]:
    coverage, correctness = data["coverage"], data["correctness"]
    if not isinstance(coverage, list) or not isinstance(correctness, list):
        raise ReplyParseError('"coverage" and "correctness" must be lists')
    if len(coverage) != n_points or len(correctness) != n_points:
        raise ReplyParseError(
            f"expected {n_points} entries in each list (one per scoring point), got "
            f"{len(coverage)} coverage and {len(correctness)} correctness"
        )
    return (
        [_flag(v, "coverage", i) for i, v in enumerate(coverage)],
        [_flag(v, "correctness", i) for i, v in enumerate(correctness)],
    )


def rubric_verdict(coverage: list[int], correctness: list[int], **extra: Any) -> Verdict:
    n = len(coverage)
    covered, correct = sum(coverage), sum(correctness)
    detail = {
        "coverage": list(coverage),
        "correctness": list(correctness),
        "n_points": n,
        "covered": covered,
        "correct": correct,
        # the official scorer counts these as given; we report them (the prompt says they should not exist)
        "correct_but_uncovered": sum(1 for c, k in zip(coverage, correctness) if k and not c),
        **extra,
    }
    return Verdict(score=(covered + correct) / (2 * n) if n else 0.0, detail=detail)


def reads_officially(item: JudgeItem) -> bool:
    """A task's strict mode (``extra={"score_block": "first"}``): the model's reply goes to the judge as
    it is, ``<think>`` and all, and the judge's reply is read as ``eval/score_CCQA.py`` reads it."""
    return (item.extra or {}).get("score_block") == "first"


def _require_points(item: JudgeItem, who: str) -> None:
    if not item.scoring_points:
        raise ValueError(f"{who} needs a non-empty list of scoring_points")


class RubricJudge(LLMJudge):
    name: ClassVar[str] = "rubric"
    version: ClassVar[str] = "1"
    kind: ClassVar[str] = "rubric"
    description: ClassVar[str] = (
        "per scoring point coverage and correctness (the scoring prompt its benchmark declares)"
    )
    # the official scorer's sampling parameters (eval/score_CCQA.py)
    default_sampling: ClassVar[dict[str, Any]] = {"temperature": 0.0, "top_p": 0.95, "max_tokens": 8192}

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
        _require_points(item, "rubric")

    def build_messages(self, item: JudgeItem) -> list[dict[str, str]]:
        points = "\n".join(f"{i}. {p}" for i, p in enumerate(item.scoring_points or (), start=1))
        user = data_block(
            [
                ("QUESTION", item.question),
                ("STANDARD_ANSWER", item.reference),
                ("SCORING_POINTS", points),
                # the official scorer sends the reply as it is; the default sends what is left after <think>
                ("MODEL_OUTPUT", item.prediction if reads_officially(item) else strip_think(item.prediction)),
            ]
        )
        user += f"\n\nNumber of scoring points: {len(item.scoring_points or ())}."
        # per-item content last, so the static system message stays a cacheable prefix
        tag = self.score_tag(item)
        user += f"\nWrap the json output within <{tag}></{tag}> tags (in place of <score></score>)."
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": user}]

    def parse_reply(self, reply: str, item: JudgeItem) -> Verdict:
        # extra {"score_block": "first"}: a task's strict mode reads the reply as the official scorer
        official = reads_officially(item)
        coverage, correctness = parse_rubric_reply(
            reply, len(item.scoring_points or ()), first_block=official, tag=self.score_tag(item), judged=item
        )
        return official_verdict(coverage, correctness) if official else rubric_verdict(coverage, correctness)

    def nothing_to_judge(self, item: JudgeItem) -> bool:
        # strict: a reply that is only <think>...</think> is judged, as the official scorer judges it
        return not item.prediction.strip() if reads_officially(item) else super().nothing_to_judge(item)

    @staticmethod
    def score_tag(item: JudgeItem) -> str:
        """The verdict tag name of this item's request: ``score-NONCE``."""
        return f"score-{verdict_nonce(item)}"

    def reask_message(self, item: JudgeItem, error: str) -> str:
        n = len(item.scoring_points or ())
        tag = self.score_tag(item)
        return (
            f"Your reply could not be read ({error}). Reply again with only "
            f'<{tag}>{{"coverage": [...], "correctness": [...]}}</{tag}>, each list holding exactly {n} '
            "true/false values, one per scoring point in order."
        )

    def empty_verdict(self, item: JudgeItem) -> Verdict:
        n = len(item.scoring_points or ())
        return rubric_verdict([0] * n, [0] * n, empty_prediction=True)


# --------------------------------------------------------------------------------------------------
# Offline: keyword matching

_STOP = set(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "than",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "without",
        "into",
        "onto",
        "over",
        "under",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "done",
        "has",
        "have",
        "had",
        "having",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "which",
        "who",
        "whom",
        "whose",
        "what",
        "when",
        "where",
        "why",
        "how",
        "as",
        "not",
        "no",
        "nor",
        "so",
        "such",
        "very",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "also",
        "both",
        "each",
        "either",
        "neither",
        "all",
        "any",
        "some",
        "more",
        "most",
        "other",
        "video",
        "videos",
        "person",
        "people",
        "they",
        "them",
        "their",
        "he",
        "she",
        "his",
        "her",
        "him",
        "we",
        "our",
        "you",
        "your",
        "i",
        "me",
        "my",
        "one",
        "two",
    ]
)


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _words(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text or "").lower()
    return re.findall(r"[a-z]+|\d+(?:\.\d+)?", text)


def keywords(text: str) -> set[str]:
    return {_stem(w) for w in _words(text) if (w[0].isdigit() or (len(w) >= 3 and w not in _STOP))}


class OfflineRubricJudge(OfflineJudge):
    name: ClassVar[str] = "rubric_offline"
    version: ClassVar[str] = "1"
    kind: ClassVar[str] = "rubric"
    fidelity: ClassVar[str] = (
        "offline (lower fidelity): a point is covered when most of its keywords occur in the output, "
        "correct when nearly all do and every number in it occurs; no paraphrase understanding"
    )
    description: ClassVar[str] = "deterministic keyword-overlap stand-in for the rubric judge"
    cover_threshold: ClassVar[float] = 0.6
    correct_threshold: ClassVar[float] = 0.8

    def validate_item(self, item: JudgeItem) -> None:
        _require_points(item, "rubric_offline")

    def judge(self, item: JudgeItem) -> Verdict:
        output = {_stem(w) for w in _words(strip_think(item.prediction))}
        coverage, correctness = [], []
        for point in item.scoring_points or ():
            keys = keywords(point)
            if not keys:
                coverage.append(0)
                correctness.append(0)
                continue
            share = len(keys & output) / len(keys)
            numbers = {k for k in keys if k[0].isdigit()}
            covered = int(share >= self.cover_threshold)
            coverage.append(covered)
            correctness.append(int(covered and share >= self.correct_threshold and numbers <= output))
        return rubric_verdict(coverage, correctness, fidelity="offline")

    def empty_verdict(self, item: JudgeItem) -> Verdict:
        n = len(item.scoring_points or ())
        return rubric_verdict([0] * n, [0] * n, empty_prediction=True)
