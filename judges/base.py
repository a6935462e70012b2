"""Judge objects, the items they judge, their outcomes, and the text hygiene shared by all judges.

A judge is a named, versioned object: it builds the request (prompt messages and sampling
parameters) for one :class:`JudgeItem`, parses the judge model's reply into a :class:`Verdict`, and
says what a verdict means.  Offline judges compute the verdict locally and make no request.

Nothing here does I/O (a judge's instructions come from its benchmark's spec).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from lmms_eval_plugins.errors import PluginError

# --------------------------------------------------------------------------------------------------
# Errors


class JudgeError(PluginError):
    """Base class for judge errors that reach the user."""


class JudgeConfigError(JudgeError, ValueError):
    """The judge cannot run as configured (no endpoint, unknown judge name, bad setting)."""


class UnknownJudgeError(JudgeConfigError, LookupError):
    """No judge of that name is registered in the ``lmms_eval_plugins.judges`` entry-point group."""


class JudgeErrorRateExceeded(JudgeError, RuntimeError):
    """Too many samples could not be judged: the metric would not be trustworthy."""


class ReplyParseError(ValueError):
    """The judge model's reply does not hold a readable verdict (the runtime re-asks, bounded)."""


# --------------------------------------------------------------------------------------------------
# Data


@dataclass(frozen=True)
class JudgeItem:
    """What a judge needs to judge one response.

    ``semantic_match`` reads ``question``, ``prediction``, ``reference``; ``rubric`` also reads
    ``scoring_points``.  ``prediction`` is the judged (untrusted) text.  ``item_id`` is only for
    messages and logs; it is not part of the request, so it does not affect the cache.
    """

    question: str = ""
    prediction: str = ""
    reference: str = ""
    scoring_points: tuple[str, ...] | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    item_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("question", "prediction", "reference"):
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, "")
            elif not isinstance(value, str):
                object.__setattr__(self, name, str(value))
        if self.scoring_points is not None:
            if isinstance(self.scoring_points, str):
                raise TypeError("JudgeItem.scoring_points must be a list of strings, not one string")
            object.__setattr__(self, "scoring_points", tuple(str(p) for p in self.scoring_points))


@dataclass(frozen=True)
class Verdict:
    """A parsed verdict: ``score`` in [0, 1] and a JSON-serialisable ``detail``."""

    score: float
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class JudgeOutcome:
    """The result of judging one sample.

    Exactly one of these holds: ``error`` is set (a judge error: excluded from the metric's
    denominator, counted); ``skipped`` is true (nothing to judge, e.g. the model gave no parseable
    answer: the model's fault, scored as wrong by the aggregation helpers); or ``verdict`` is set.
    """

    name: str
    version: str
    model: str | None
    verdict: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    cached: bool = False
    skipped: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and not self.skipped and self.verdict is not None

    @property
    def is_error(self) -> bool:
        return self.error is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "model": self.model,
            "verdict": self.verdict,
            "detail": dict(self.detail),
            "error": self.error,
            "cached": self.cached,
            "skipped": self.skipped,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JudgeOutcome:
        return cls(
            name=str(data.get("name", "?")),
            version=str(data.get("version", "?")),
            model=data.get("model"),
            verdict=data.get("verdict"),
            detail=dict(data.get("detail") or {}),
            error=data.get("error"),
            cached=bool(data.get("cached", False)),
            skipped=bool(data.get("skipped", False)),
        )

    @classmethod
    def of(cls, value: Any) -> JudgeOutcome | None:
        """The one reader of a verdict, whatever carried it: the outcome itself, its ``to_dict()`` form
        (a logged item), or a judged response ``{"text": ..., "judge": {...}}``; ``None`` stays None."""
        if value is None or isinstance(value, JudgeOutcome):
            return value
        if isinstance(value, Mapping):
            judge = value.get("judge")
            return cls.from_dict(judge if isinstance(judge, Mapping) else value)
        raise TypeError(f"expected a JudgeOutcome or its dict, got {type(value).__name__}")


# --------------------------------------------------------------------------------------------------
# Text hygiene

_THINK_BLOCK = re.compile(r"<\s*(think|thinking)\s*>.*?<\s*/\s*\1\s*>", re.IGNORECASE | re.DOTALL)
_THINK_OPEN = re.compile(r"<\s*(think|thinking)\s*>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"<\s*/\s*(think|thinking)\s*>", re.IGNORECASE)
_THINK_TAG = re.compile(r"<\s*(/\s*)?(think|thinking)\s*>", re.IGNORECASE)  # an opening or a closing tag
# Two tag names pair up when _THINK_BLOCK's backreference \1 accepts one for the other (case-insensitively).
_SAME_NAME = re.compile(r"(think|thinking)\x00\1", re.IGNORECASE)


def _remove_think_blocks(text: str) -> str:
    """``_THINK_BLOCK.sub("", text)`` in linear time.

    The regex scans left to right: at each opening tag it looks ahead for the first closing tag of the
    same name and removes the block, or, when there is none, moves on -- a search to the end for every
    unclosed opening tag, quadratic on replies full of them.  Here the tags are found once, and a
    backward pass gives each opening tag its first later closing tag of the same name.
    """
    tags = list(_THINK_TAG.finditer(text))
    if not tags:
        return text
    reps: list[str] = []  # one name of each class of names that pair up
    rep_of: dict[str, str] = {}

    def name_class(name: str) -> str:
        rep = rep_of.get(name)
        if rep is None:
            rep = next((r for r in reps if _SAME_NAME.fullmatch(f"{r}\x00{name}")), None)
            if rep is None:
                reps.append(name)
                rep = name
            rep_of[name] = rep
        return rep

    close_of: list[int | None] = [None] * len(tags)  # opening tag -> index of its closing tag
    next_close: dict[str, int] = {}
    for i in range(len(tags) - 1, -1, -1):
        m = tags[i]
        if m.group(1) is not None:
            next_close[name_class(m.group(2))] = i
        else:
            close_of[i] = next_close.get(name_class(m.group(2)))
    out: list[str] = []
    cursor = 0
    for i, m in enumerate(tags):
        close = close_of[i]
        if close is None or m.start() < cursor:  # a closing tag, no closing tag, or inside a removed block
            continue
        out.append(text[cursor : m.start()])
        cursor = tags[close].end()
    out.append(text[cursor:])
    return "".join(out)


def strip_think(text: str | None) -> str:
    """Remove ``<think>...</think>`` (and ``<thinking>``) reasoning blocks.

    An unclosed ``<think>`` drops everything after it (the answer never came); a stray closing tag
    with no opening one (some chat templates put the opening tag in the prompt) drops everything
    before it.
    """
    if not text:
        return ""
    text = _remove_think_blocks(text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text.strip()


# Characters that read as "<" or ">" to a person or a model: ASCII, the NFKC-compatible small and
# fullwidth forms, and look-alikes from other blocks (quotation marks, brackets, ornaments, arrows,
# relations, triangles).  "≪" and "⋘" read as two or three of them.
_OPENING_LIKE = "<﹤＜〈‹«〈⟨《❮❬⟪˂ᐸ❰⧼⦑⋖≺◁⊲⊰⧀◀◅⯇⏴⦉⟬⦓⦕⸦"
_CLOSING_LIKE = ">﹥＞〉›»〉⟩》❯❭⟫˃ᐳ❱⧽⦒⋗≻▷⊳⊱⧁▶▻⯈⏵⦊⟭⦔⦖⸧"
_ANGLE_LIKE = set(_OPENING_LIKE + _CLOSING_LIKE)
_MULTI_ANGLE = str.maketrans(
    {"≪": "<<", "≫": ">>", "⋘": "<<<", "⋙": ">>>", "⪡": "<<", "⪢": ">>", "⫷": "<<<", "⫸": ">>>"}
)
# What may sit between the brackets of a delimiter and still leave it readable as one: spaces, and
# characters that show nothing of their own (combining and enclosing marks, format characters,
# blank-looking fillers such as the braille blank and the Hangul fillers).
_FILLERS = frozenset("\u2800\u3164\u115f\u1160\uffa0")
_GLUE_CATEGORIES = frozenset(("Mn", "Me", "Cf", "Zs"))
_MARKS = frozenset(("Mn", "Me"))


def _is_glue(ch: str) -> bool:
    return ch.isspace() or ch in _FILLERS or unicodedata.category(ch) in _GLUE_CATEGORIES


DELIM_OPEN = "<<<BEGIN {name}>>>"
DELIM_CLOSE = "<<<END {name}>>>"


def neutralise(text: str | None) -> str:
    """Make ``text`` safe to place inside a delimited data block.

    Our delimiters are ``<<<BEGIN NAME>>>`` / ``<<<END NAME>>>``.  Invisible format characters
    (zero-width spaces, direction marks) are removed, and every run of two or more angle-bracket-like
    characters (ASCII, fullwidth, guillemets, mathematical angle brackets, ornaments, relations,
    triangles; separated by nothing, spaces, combining or enclosing marks or blank fillers) becomes one
    ASCII bracket of the same direction as its first character; marks drawn on a bracket are dropped.  The result
    cannot contain ``<<`` or ``>>``, so it can neither close a data block nor open a fake one.
    """
    if not text:
        return ""
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf").translate(_MULTI_ANGLE)
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:  # one pass: each character is looked at a bounded number of times
        ch = text[i]
        if ch not in _ANGLE_LIKE:
            out.append(ch)
            i += 1
            continue
        brackets, j, end = 1, i + 1, i + 1
        while j < n and (text[j] in _ANGLE_LIKE or _is_glue(text[j])):
            if text[j] in _ANGLE_LIKE:
                brackets, end = brackets + 1, j + 1
            j += 1
        # a run of two or more becomes one ASCII bracket facing as its first; marks drawn on the
        # last bracket go with it
        while end < n and unicodedata.category(text[end]) in _MARKS:
            end += 1
        out.append(("<" if ch in _OPENING_LIKE else ">") if brackets >= 2 else ch)
        i = end
    return "".join(out)


def data_block(fields: Sequence[tuple[str, str]]) -> str:
    """Render named data fields, each neutralised and delimited."""
    parts = []
    for name, value in fields:
        parts.append(DELIM_OPEN.format(name=name))
        parts.append(neutralise(value))
        parts.append(DELIM_CLOSE.format(name=name))
    return "\n".join(parts)


NONCE_HEX = 12  # 48 bits


def verdict_nonce(item: JudgeItem) -> str:
    """The per-request nonce of the verdict tags (``<score-NONCE>``): hex of a SHA-256 over the item.

    Derived from the request's content, not drawn at random, so that the request (and its cache key)
    is reproducible and a cached reply re-parses; the judged text cannot hold its own request's
    nonce, since that would need a fixed point of SHA-256.  Parsers also refuse a verdict block
    that occurs in the judged text (:func:`quoted_from`)."""
    payload = [item.question, item.reference, list(item.scoring_points or ()), item.prediction]
    digest = hashlib.sha256(json.dumps(payload, ensure_ascii=False).encode("utf-8")).hexdigest()
    return digest[:NONCE_HEX]


def quoted_from(block: str, item: JudgeItem) -> bool:
    """The verdict block ``block`` also occurs in the judged text: the judge may be quoting it."""
    block = block.strip()
    return bool(block) and (block in item.prediction or block in strip_think(item.prediction))


# --------------------------------------------------------------------------------------------------
# Judges


class Judge(ABC):
    """Base of all judges.  Subclasses set the class attributes below."""

    name: ClassVar[str] = ""
    version: ClassVar[str] = ""
    kind: ClassVar[str] = "binary"  # "binary" (verdict 0/1) or "rubric" (verdict in [0, 1])
    offline: ClassVar[bool] = False
    fidelity: ClassVar[str] = "llm"  # offline judges say how they fall short of the LLM judge
    description: ClassVar[str] = ""

    def validate_item(self, item: JudgeItem) -> None:
        """Raise ``ValueError`` when the item lacks what this judge needs."""

    @abstractmethod
    def empty_verdict(self, item: JudgeItem) -> Verdict:
        """Verdict for an empty prediction (after ``<think>`` stripping): wrong, without a call."""

    def nothing_to_judge(self, item: JudgeItem) -> bool:
        """The prediction is empty after ``<think>`` stripping: :meth:`empty_verdict`, no call."""
        return not strip_think(item.prediction)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "kind": self.kind,
            "offline": self.offline,
            "fidelity": self.fidelity,
        }


class LLMJudge(Judge):
    """A judge that asks a model through an OpenAI-compatible chat-completions endpoint."""

    #: sampling parameters sent with every request (part of the cache key)
    default_sampling: ClassVar[dict[str, Any]] = {"temperature": 0.0}
    #: how many times an unparseable reply is answered with a corrective follow-up
    max_reask: ClassVar[int] = 2

    def __init__(self, sampling: Mapping[str, Any] | None = None) -> None:
        # overrides win; an override of None removes a default (e.g. temperature for reasoning models)
        merged = {**self.default_sampling, **dict(sampling or {})}
        self.sampling = {k: v for k, v in merged.items() if v is not None}

    @abstractmethod
    def build_messages(self, item: JudgeItem) -> list[dict[str, str]]:
        """Chat messages: instructions in the system message, the data in a delimited block."""

    @abstractmethod
    def parse_reply(self, reply: str, item: JudgeItem) -> Verdict:
        """Read the final verdict from the reply; raise :class:`ReplyParseError` if there is none."""

    def reask_message(self, item: JudgeItem, error: str) -> str:
        """The user turn sent after an unparseable reply."""
        return f"Your reply could not be read ({error}). Answer again, following the required output format exactly."


class OfflineJudge(Judge):
    """A deterministic judge computed locally (no endpoint).  Lower fidelity than its LLM twin."""

    offline: ClassVar[bool] = True
    fidelity: ClassVar[str] = "offline (lower fidelity)"

    @abstractmethod
    def judge(self, item: JudgeItem) -> Verdict:
        """The verdict for one item."""
