"""Answer parsing, the shared base: the :class:`Parsed` outcome, text coercion, reasoning blocks,
markup and ``\\boxed{}`` removal, and tags. The parsers themselves are in the other ``parsing_*``
modules; import them all from :mod:`lmms_eval_plugins.parsing` (conventions there).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

T = TypeVar("T")

# Numbers longer than this are "out of range" rather than converted: Python refuses int() on
# strings over 4300 digits, and no step, segment or option index is that large anyway.
_MAX_INT_DIGITS = 9


@dataclass(frozen=True)
class Parsed(Generic[T]):
    """The outcome of parsing: exactly one of ``value`` and ``error`` is set."""

    value: T | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        # Enforced so that callers can rely on `ok` alone; only reachable by a programming error.
        if (self.value is None) == (self.error is None):
            raise ValueError("Parsed needs exactly one of value and error")

    @property
    def ok(self) -> bool:
        return self.error is None

    @classmethod
    def success(cls, value: T) -> Parsed[T]:
        return cls(value=value, error=None)

    @classmethod
    def failure(cls, reason: str) -> Parsed[T]:
        return cls(value=None, error=reason or "unparseable")


# --------------------------------------------------------------------------------------------
# Normalisation helpers


def _as_text(text: Any) -> str:
    """Coerce whatever a model class returned into a str (robustness: never raise)."""
    if text is None:
        return ""
    if isinstance(text, str):
        return text
    if isinstance(text, (bytes, bytearray)):
        return bytes(text).decode("utf-8", errors="replace")
    try:
        return str(text)
    except Exception:  # noqa: BLE001 -- a broken __str__ must not crash scoring
        return ""


# "(?:(/)\s*)?" rather than "/?\s*": two adjacent \s* runs would backtrack quadratically.
_THINK_TAG = re.compile(r"<\s*(?:(/)\s*)?(?:think|thinking)\s*>", re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """Remove ``<think>``/``<thinking>`` blocks and surrounding whitespace.

    - A complete block ``<think>...</think>`` is removed (case-insensitive, multiline).
    - A closing tag without an opening one (chat templates that pre-fill ``<think>``) discards
      everything before it, so only what follows the last orphan closing tag is kept.
    - An opening tag that is never closed drops everything after it (the model never finished
      thinking, so nothing after it is an answer).
    Written as one linear scan over the tags (a regex with ``.*?`` per opening tag would be
    quadratic on outputs full of unclosed tags).
    """
    text = _as_text(text)
    pieces: list[str] = []
    cursor = 0
    open_at: int | None = None
    for m in _THINK_TAG.finditer(text):
        closing = m.group(1) == "/"
        if not closing:
            if open_at is None:
                pieces.append(text[cursor : m.start()])
                open_at = m.start()
            # a nested opening tag inside a block changes nothing
        elif open_at is not None:
            open_at = None
            cursor = m.end()
        else:
            # orphan closing tag: everything so far was (pre-filled) reasoning
            pieces = []
            cursor = m.end()
    if open_at is None:
        pieces.append(text[cursor:])
    return "".join(pieces).strip()


# Commands whose braces are unwrapped by clean_markup; only boxed/fbox count as "an answer box".
_BRACE_CMD = re.compile(r"\\(boxed|fbox|textbf|text|mathbf|mathrm)\s*\{|(\{)|\}")  # lastindex: 1, 2, None
_BOX_CMDS = frozenset({"boxed", "fbox"})


class _BraceSpan(NamedTuple):  # a tuple: built once per span, so cheaper than a dataclass
    cmd: str  # "boxed", "fbox", "text", ...
    cmd_start: int  # index of the backslash
    content_start: int  # index after "{"
    close: int  # index of the matching "}"


def _brace_spans(text: str) -> list[_BraceSpan]:
    """All balanced ``\\cmd{...}`` spans in one linear pass (unbalanced ones are ignored)."""
    stack: list[tuple[str | None, int, int]] = []  # (cmd or None for a plain "{", cmd_start, content_start)
    spans: list[_BraceSpan] = []
    plain = (None, -1, -1)
    for m in _BRACE_CMD.finditer(text):  # one token per iteration: kept lean, replies may hold 10^5 of them
        kind = m.lastindex
        if kind is None:  # "}"
            if stack:
                cmd, cmd_start, content_start = stack.pop()
                if cmd is not None:
                    spans.append(_BraceSpan(cmd, cmd_start, content_start, m.start()))
        elif kind == 2:  # a plain "{"
            stack.append(plain)
        else:
            stack.append((m.group(1), *m.span()))
    spans.sort(key=lambda s: s.cmd_start)
    return spans


_BEGIN_END_BOX = re.compile(r"<\|\s*(?:begin|end)_of_box\s*\|>", re.IGNORECASE)
_HEADING = re.compile(r"(?m)^[ \t]*#{1,6}[ \t]+")
_EMPHASIS = re.compile(r"\*+|`+|~~|(?<![A-Za-z0-9])__+|__+(?![A-Za-z0-9])")


def clean_markup(text: str) -> str:
    """Remove presentation markup that hides an answer.

    Unwraps ``\\boxed{X}``, ``\\fbox{X}``, ``\\text{X}``, ``\\textbf{X}``, ``\\mathbf{X}``,
    ``\\mathrm{X}`` (balanced braces), drops ``$``, GLM's ``<|begin_of_box|>`` markers, markdown
    emphasis (``*``, ``**``, ``~~``, backticks, and ``__`` at word edges -- a single ``_`` inside
    a word is kept because label names such as ``B_Reasoning_Error`` use it) and heading marks.
    """
    return _strip_inline_markup(_unwrap(_as_text(text)).text)


class _Unwrapped(NamedTuple):
    text: str  # the input with the balanced commands' ``\\cmd{`` and ``}`` removed
    spans: list[_BraceSpan]  # those commands, by position
    drop: list[tuple[int, int]]  # the removed pieces, sorted


def _unwrap(text: str) -> _Unwrapped:
    """clean_markup's first step: unwrap the balanced ``\\boxed{X}``, ``\\text{X}``... commands."""
    if "\\" not in text:
        return _Unwrapped(text, [], [])
    spans = _brace_spans(text)
    if not spans:
        return _Unwrapped(text, spans, [])
    drop = _command_pieces(spans)
    return _Unwrapped(_drop_pieces(text, drop), spans, drop)


def _command_pieces(spans: list[_BraceSpan]) -> list[tuple[int, int]]:
    """(start, end) of the pieces that unwrapping removes: each span's ``\\cmd{`` and its ``}``, sorted.
    They never overlap: each is one token of _BRACE_CMD, and a token opens or closes one span at most."""
    drop = [(s.cmd_start, s.content_start) for s in spans]
    drop += [(s.close, s.close + 1) for s in spans]
    drop.sort()
    return drop


def _drop_pieces(text: str, drop: list[tuple[int, int]]) -> str:
    kept = [text[end:start] for (_, end), (start, _) in zip([(0, 0), *drop], drop)]
    kept.append(text[drop[-1][1] :] if drop else text)
    return "".join(kept)


def _strip_inline_markup(text: str) -> str:
    """clean_markup's steps after unwrapping commands: box markers, ``$``, headings, emphasis."""
    text = _BEGIN_END_BOX.sub("", text)
    text = text.replace("$", "")
    text = _HEADING.sub("", text)
    text = _EMPHASIS.sub("", text)
    return text


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) with balanced braces, stripped.

    "Last" is by position among outermost boxes; a box nested in a box belongs to its outer one.
    Unbalanced boxes are ignored. ``None`` when there is none.
    """
    text = _as_text(text)
    if "\\" not in text:
        return None
    boxes = [s for s in _brace_spans(text) if s.cmd in _BOX_CMDS]
    if not boxes:
        return None
    last = _outermost(boxes)[-1]
    return text[last.content_start : last.close].strip()


def _outermost(boxes: list[_BraceSpan]) -> list[_BraceSpan]:
    """Outermost spans, in order (balanced spans sorted by start are properly nested)."""
    out: list[_BraceSpan] = []
    reach = -1
    for s in boxes:
        if s.cmd_start > reach:
            out.append(s)
            reach = s.close
    return out


# The box rules of parse_option_letter and parse_letter_set read a box only when its content, with its
# LaTeX commands unwrapped, is at most this long: a bare letter is at most 64 characters and a letter
# list at most 1000 (_bare_letter, _letter_run), so a longer box is prose. The bound keeps the work
# linear: without it, each of 10^5 nested boxes would be cleaned in full (quadratic time).
_MAX_ANSWER_BOX = 1000


def _unwrapped_boxes(unwrapped: _Unwrapped, limit: int = _MAX_ANSWER_BOX) -> Iterator[str]:
    """The content of every boxed/fbox span with its commands unwrapped (clean_markup's first step),
    last box by position first (what ``clean_markup(content)`` starts from, computed without cleaning
    each content again). Boxes longer than ``limit`` once unwrapped are skipped, and a content equal to
    one already given is not given again (same content, same answer: nested boxes such as
    ``\\boxed{\\boxed{B}}`` repeat it).

    ``unwrapped`` is the whole text unwrapped once (:func:`_unwrap`); it is sliced: the balanced spans
    inside a box's content are exactly the spans that unwrapping the content on its own finds, so the
    slice equals unwrapping the content.
    """
    boxes = [s for s in unwrapped.spans if s.cmd in _BOX_CMDS]
    if not boxes:
        return
    text = unwrapped.text
    at: dict[int, int] = {}  # start of a removed piece -> its index in the unwrapped text
    removed = 0
    for a, b in unwrapped.drop:
        at[a] = a - removed
        removed += b - a
    last = (-1, -1)
    given: set[str] = set()
    for s in reversed(boxes):
        where = (at[s.cmd_start], at[s.close])  # the content starts where the box's "\\boxed{" was
        if where == last or where[1] - where[0] > limit:  # the same stretch as the box just given
            continue
        last = where
        content = text[where[0] : where[1]]
        if content in given:
            continue
        if len(given) >= 4096:  # bounds the memory; a repeat is then only checked again
            given.clear()
        given.add(content)
        yield content


def _prepare(text: Any) -> tuple[str, str | None]:
    """(reasoning-stripped text, failure reason or None)."""
    raw = _as_text(text)
    if not raw.strip():
        return "", "empty output"
    body = strip_reasoning(raw)
    if not body:
        return "", "empty output after removing reasoning"
    return body, None


def _join_sorted(items: Sequence[Any]) -> str:
    return ", ".join(str(x) for x in sorted(items))


# --------------------------------------------------------------------------------------------
# Tags

_ANY_TAG = re.compile(r"<\s*(?:/\s*)?[A-Za-z_][\w\-]*\s*>")


def extract_tag(text: str, tag: str) -> str | None:
    """Stripped content of the last ``<tag>...</tag>`` (case-insensitive), or None.

    Tolerance for a missing closing tag: the content runs to the next tag of any name (e.g. the
    following ``<rationale>``) or, when the tag is the last thing, to the end of the output.
    Reasoning blocks are not removed here: call strip_reasoning first where that matters.
    """
    found = _last_tag(_as_text(text), tag)
    return found[0] if found else None


def tag_runs_to_end(text: str, tag: str) -> bool:
    """True when the last ``<tag>`` is neither closed nor followed by another tag, so that
    ``extract_tag`` took its content to the end of the output: the reply stopped inside it (a token
    limit), and its last piece may be cut."""
    found = _last_tag(_as_text(text), tag)
    return found is not None and found[1]


def _last_tag(text: str, tag: str) -> tuple[str, bool] | None:
    """(stripped content, ran to the end of ``text``) of the last ``<tag>``, or None."""
    name = re.escape(_as_text(tag).strip())
    if not name:
        return None
    last = None
    for last in re.finditer(rf"<\s*{name}(?:\s[^<>]{{0,200}})?>", text, re.IGNORECASE):
        pass
    if last is None:
        return None
    close = re.compile(rf"<\s*/\s*{name}\s*>", re.IGNORECASE).search(text, last.end())
    if close is not None:
        return text[last.end() : close.start()].strip(), False
    nxt = _ANY_TAG.search(text, last.end())
    if nxt is not None:
        return text[last.end() : nxt.start()].strip(), False
    return text[last.end() :].strip(), True
