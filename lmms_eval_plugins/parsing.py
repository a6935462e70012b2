"""Answer parsing shared by all benchmarks.

Every parser is pure, accepts any ``str`` (also ``None`` or other objects, which are coerced) and
never raises: a failure is a :class:`Parsed` carrying a short human reason, so a task can score it
as wrong and count it (``*_parse_fail``) instead of crashing or silently dropping the sample.

Shared conventions:
- Reasoning blocks (``<think>...</think>``) are removed first (:func:`strip_reasoning`), so an
  answer a model considered while thinking never counts.
- Markdown emphasis, ``$...$`` and ``\\boxed{}`` wrappers are removed (:func:`clean_markup`).
- An ``Answer:`` / ``Final answer:`` label, when present, wins over the rest of the text.
- Several disagreeing candidates are a failure ("ambiguous: ..."), never a guess.
- Regexes are written so that no pattern backtracks quadratically, and nested structures (boxes,
  tags) are read in one pass: every parser is linear in the output's length (a 1 MB output of
  nested boxes or unclosed tags parses in about a second at most; tests/test_hostile_text.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

__all__ = [
    "Parsed",
    "clean_markup",
    "extract_boxed",
    "extract_tag",
    "match_category",
    "parse_interval",
    "parse_intervals",
    "parse_letter_set",
    "parse_option_letter",
    "parse_order",
    "parse_step",
    "parse_timestamp",
    "strip_reasoning",
    "tag_runs_to_end",
]

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
# Option letters


# A bare letter possibly in brackets and followed by end punctuation: "B", "(B)", "[B]", "B)",
# "B.", "{B}:" -- the shape accepted by MMErroR's official `match_simple` (plus square/curly
# brackets). Markdown/`$`/boxed are removed beforehand by clean_markup.
_BARE_LETTER = re.compile(r"[\s_]*[(\[{]?\s*([A-Za-z])\s*[)\]}]?[\s_]*[.:!?]*\s*")

# "Answer: B", "Final answer - B", "Final Answer B" at the start of a line (the official parser's
# label forms, minus its "Output:" label).
_ANSWER_LINE = re.compile(r"^\s*(?:final\s*answer|answer)\b\s*[:：\-]?\s*(.*)$", re.IGNORECASE)


def _bare_letter(s: str, letters: str, *, allow_lower: bool) -> str | None:
    # A bare answer is short; the guard also keeps the adjacent whitespace runs of the regex
    # from backtracking quadratically on long lines.
    if len(s) > 64:
        return None
    m = _BARE_LETTER.fullmatch(s)
    if not m:
        return None
    ch = m.group(1)
    if ch in letters:
        return ch
    if allow_lower and ch.islower() and ch.upper() in letters:
        return ch.upper()
    return None


_NAME_STRIP = " \t\r\n.:!?;,\"'()[]{}"


def parse_option_letter(
    text: str, letters: str = "ABCD", *, names: Mapping[str, str] | None = None, prose: bool = False
) -> Parsed[str]:
    """One option letter: a strict core modelled on, but not identical to, MMErroR's official parser
    (the exact official behaviour is ``benchmarks/mmerror/official.py``).

    Rules, in priority order, on the reasoning-stripped, markup-cleaned output:
    1. the whole output is a bare letter (``B``, ``**B**``, ``(B)``, ``[B]``, ``B)``, ``B.``,
       ``\\boxed{B}``); only here may the letter be lowercase (``b``);
    2. the LAST ``Answer:``/``Final answer:`` line (label at line start, colon optional) whose
       value is such a letter;
    3. the LAST ``\\boxed{X}`` whose content is a single allowed letter (a box holding over 1000
       characters once its LaTeX commands are unwrapped is prose and not read: _MAX_ANSWER_BOX);
    4. lines that are a bare letter: all must agree, else "ambiguous";
    5. with ``names`` (letter -> label name, e.g. ``{"B": "B_Reasoning_Error"}``), the entire
       output equals one name (case-insensitive, ignoring markup and surrounding punctuation).
    Letters must be uppercase and in ``letters`` outside rule 1. Prose such as "I think the
    answer is B" is unparseable by default.

    ``prose=True`` reads the answers real models write (:func:`_prose_letter`): full-width letters
    and brackets count as ASCII, ``<answer>`` tags are dropped, and when rules 1-5 find nothing,
    an answer stated in prose ("The answer is B.", "The correct answer is (C) since ..."), a line
    that starts with a letter ("B. because ...") or "Option B" decides; two different letters at
    the same level are "ambiguous", never a guess.
    """
    if prose:
        text = _as_text(text).translate(_FULLWIDTH)
        text = _ANSWER_TAG.sub("\n", text)
    body, err = _prepare(text)
    if err:
        return Parsed.failure(err)
    unwrapped = _unwrap(body)
    cleaned = _strip_inline_markup(unwrapped.text).strip()  # clean_markup(body), unwrapping once

    # (1) the whole output
    hit = _bare_letter(cleaned, letters, allow_lower=True)
    if hit:
        return Parsed.success(hit)
    if _bare_letter(cleaned, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", allow_lower=True):
        return Parsed.failure(f"letter {cleaned.strip(_NAME_STRIP)} not among {', '.join(letters)}")

    lines = [ln.strip() for ln in cleaned.splitlines() if ln.strip()]

    # (2) Answer: lines -- the last one that carries a letter
    for ln in reversed(lines):
        m = _ANSWER_LINE.match(ln)
        if m:
            hit = _bare_letter(m.group(1), letters, allow_lower=False)
            if hit:
                return Parsed.success(hit)

    # (3) boxed anywhere -- the last box holding a letter
    for content in _unwrapped_boxes(unwrapped):
        hit = _bare_letter(_strip_inline_markup(content).strip(), letters, allow_lower=False)
        if hit:
            return Parsed.success(hit)

    # (4) bare-letter lines
    found = {h for h in (_bare_letter(ln, letters, allow_lower=False) for ln in lines) if h}
    if len(found) == 1:
        return Parsed.success(found.pop())
    if len(found) > 1:
        return Parsed.failure(f"ambiguous: several letters ({_join_sorted(found)})")

    # (5) an exact label name
    if names:
        whole = cleaned.strip(_NAME_STRIP).casefold()
        for letter, name in names.items():
            if letter in letters and whole == str(name).strip(_NAME_STRIP).casefold():
                return Parsed.success(letter)

    # (6) prose
    if prose:
        found_prose = _prose_letter(cleaned, lines, letters)
        if found_prose is not None:
            return found_prose

    return Parsed.failure("no option letter found")


# Full-width ASCII (U+FF01-U+FF5E: "Ｂ", "（", "："), the ideographic space and CJK lenticular
# brackets, as ASCII: models answering in (or trained on) Chinese write them.
_FULLWIDTH = {**{0xFF01 + i: 0x21 + i for i in range(94)}, 0x3000: 0x20, 0x3010: 0x5B, 0x3011: 0x5D}
_ANSWER_TAG = re.compile(r"<\s{0,8}/?\s{0,8}answer\s{0,8}>", re.IGNORECASE)
_SPACE_RUN = re.compile(r"\s+")

# The prose patterns run on the text with every whitespace run made one space, so each pattern
# below uses only bounded repetitions: every match attempt is O(1) and a scan is linear.
_LETTER = r"[(\[]? ?([A-Z]) ?[)\]]?(?![A-Za-z0-9])"
_CONNECT = r"(?: ?(?:is|was|would be|should be|must be|will be|=|:|-|–|—|then|therefore|clearly|likely|probably|definitely))"
# (pattern, words of which the lowercased text must hold one for the pattern to match): the check
# skips a pattern's scan, the costly part on long replies, when it cannot match.
_PROSE_STATEMENTS: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    # "The answer is B", "Answer: (B)", "the correct option is C", "My final answer would be option D"
    (re.compile(
        r"(?<![A-Za-z])(?i:(?:answer(?: to (?:the|this) (?:question|problem))?|答案"
        r"|(?:correct|right|best|final|most likely|most plausible|most appropriate|most reasonable) (?:option|choice|one))"
        + _CONNECT + r"{0,3} ?(?:(?:option|choice|letter) ?)?)" + _LETTER
    ), ("answer", "答案", "option", "choice", "one")),
    # "I choose B", "I would select option C", "pick (D)"
    (re.compile(r"(?<![A-Za-z])(?i:(?:choose|select|pick|go with) (?:(?:option|choice|answer) ?)?)" + _LETTER),
     ("choose", "select", "pick", "go with")),
    # "Therefore, B." -- the letter must end the sentence
    (re.compile(r"(?<![A-Za-z])(?i:(?:so|therefore|thus|hence),? (?:(?:option|choice) )?)" + _LETTER + r"(?=[.!]? |[.!]?$)"),
     ("so", "therefore", "thus", "hence")),
    # "B is correct", "Option C is the best answer", "(D) would be the right choice"
    (re.compile(
        r"(?<![A-Za-z0-9])(?:(?i:option|choice) ?)?" + _LETTER
        + r"(?= (?i:is|would be|seems to be|appears to be) (?i:the )?(?i:correct|right|best|most likely|most plausible|answer))"
    ), ("correct", "right", "best", "most", "answer")),
]
_OPTION_MENTION = re.compile(r"(?<![A-Za-z])(?i:option|choice|选项) ?" + _LETTER)
# After a letter: "B or C", "B, C", "B and C" hedge between two letters
_HEDGE = re.compile(r" ?(?:,|/|or\b|and\b) ?(?:(?i:option|choice) ?)?[(\[]?([A-Z])[)\]]?(?![A-Za-z0-9])")
# After "A"/"I" (English words as well as letters): a lowercase word that is not a connector makes
# it the article or pronoun ("A man is cooking", "I think"), never an answer.
_WORD_AFTER = re.compile(r" (?!(?:because|since|as|is|was|which|seems|appears|would)\b)[a-z]")
# A line that starts with a letter: "B.", "B) the", "(B) The", "B: ...", "B - ...", "- B. ..."
_LEADING_LABEL = re.compile(r"(?:[-•>] ?)?(?:[(\[] ?([A-Z]) ?[)\]]|([A-Z])(?:[)\]]| ?[.:：)]| ?[-–—](?= |$)))(?= |$)")
_LEADING_BARE = re.compile(r"(?:[-•>] ?)?([A-Z]) (?=[A-Z\"“(]|(?:because|since|as|is)\b)")


def _letters_of(rx: re.Pattern[str], flat: str, letters: str) -> set[str]:
    """Allowed letters asserted by ``rx`` in ``flat``; a hedge ("B or C") adds its second letter, so
    the caller sees an ambiguity."""
    out: set[str] = set()
    for m in rx.finditer(flat):
        ch = m.group(1)
        if ch not in letters:
            continue
        hedge = _HEDGE.match(flat, m.end())
        if hedge:
            out.update((ch, hedge.group(1)))
        elif not (ch in "AI" and _WORD_AFTER.match(flat, m.end())):
            out.add(ch)
    return out


def _decide(found: set[str]) -> Parsed[str] | None:
    if not found:
        return None
    if len(found) == 1:
        return Parsed.success(next(iter(found)))
    return Parsed.failure(f"ambiguous: several letters ({_join_sorted(found)})")


def _prose_letter(cleaned: str, lines: list[str], letters: str) -> Parsed[str] | None:
    """parse_option_letter's prose rule (``prose=True``), in three levels; the first level that finds
    a letter decides, and two different letters in it are a failure:
    1. statements: "the answer is B", "Answer: (B) ...", "the correct option is B", "I choose B",
       "Therefore, B.", "B is correct";
    2. lines that start with a letter and a separator: "B. The man ...", "(B) because", "B: ...";
    3. mentions "Option B" / "choice B".
    "A" and "I" followed by a lowercase word are English words, not letters ("A man is ...").
    """
    flat = _SPACE_RUN.sub(" ", cleaned)
    folded = flat.lower()
    stated: set[str] = set()
    for rx, words in _PROSE_STATEMENTS:
        if any(w in folded for w in words):
            stated |= _letters_of(rx, flat, letters)
    decided = _decide(stated)
    if decided is not None:
        return decided
    led: set[str] = set()
    for ln in lines:
        ln = _SPACE_RUN.sub(" ", ln[:200])  # only the start of a line matters
        m = _LEADING_LABEL.match(ln) or _LEADING_BARE.match(ln)
        if m:
            ch = m.group(1) or m.group(2)
            if ch in letters:
                led.add(ch)
    decided = _decide(led)
    if decided is not None:
        return decided
    if not any(w in folded for w in ("option", "choice", "选项")):
        return None
    return _decide(_letters_of(_OPTION_MENTION, flat, letters))


_SET_SEPARATORS = re.compile(r"[\s,;/&+()\[\]{}.:'\"]+|\band\b", re.IGNORECASE)


def _letter_run(s: str, letters: str) -> frozenset[str] | None:
    """Letters of a string made only of allowed uppercase letters and separators, else None."""
    if len(s) > 1000:  # an answer list is short; long text is prose
        return None
    compact = _SET_SEPARATORS.sub("", s)
    if compact and all(ch in letters for ch in compact):
        return frozenset(compact)
    return None


# "The answer is AC.", "The correct answers are A and C", "I choose A, C": the letters to the end of the line
_STATED_SET = re.compile(r"(?i:(?:the )?(?:correct |final |right )?(?:answer|option|choice)s? (?:is|are|would be)|i (?:choose|pick|select|would choose))"
                         r" ?:? ?([^\n]{1,80})$")


def parse_letter_set(text: str, letters: str = "ABCDEFGH", *, prose: bool = False) -> Parsed[frozenset[str]]:
    """A set of option letters for multi-answer questions (CrossVid BU).

    Candidate text: the last ``Answer:`` line carrying letters, else the last box (of at most 1000
    characters once unwrapped: _MAX_ANSWER_BOX), else the whole output. The candidate must consist
    only of uppercase allowed letters and separators
    (spaces, commas, ``and``, ``/``, ``&``, ``+``, brackets, periods): "AC", "A, C", "A and C",
    "(A)(C)", "C A". Any other word makes it prose and a failure (strictness). Order and
    repetition do not matter. An empty set is a failure.

    ``prose=True``: full-width letters count as ASCII, and when nothing else is found, the last line
    stating the answer ("The answer is AC.", "The correct answers are A and C") decides.
    """
    if prose:
        text = _as_text(text).translate(_FULLWIDTH)
    body, err = _prepare(text)
    if err:
        return Parsed.failure(err)
    unwrapped = _unwrap(body)
    cleaned = _strip_inline_markup(unwrapped.text).strip()  # clean_markup(body), unwrapping once
    lines = [ln.strip() for ln in cleaned.splitlines() if ln.strip()]
    for ln in reversed(lines):
        m = _ANSWER_LINE.match(ln)
        if m:
            got = _letter_run(m.group(1), letters)
            if got:
                return Parsed.success(got)
    for content in _unwrapped_boxes(unwrapped):
        got = _letter_run(_strip_inline_markup(content), letters)
        if got:
            return Parsed.success(got)
    got = _letter_run(cleaned, letters)
    if got:
        return Parsed.success(got)
    if prose:
        for ln in reversed(lines):
            m = _STATED_SET.search(_SPACE_RUN.sub(" ", ln[-200:]))
            got = _letter_run(m.group(1).rstrip(".!"), letters) if m else None
            if got:
                return Parsed.success(got)
    return Parsed.failure("no option letters found")


# --------------------------------------------------------------------------------------------
# Steps and categories


def _label_pattern(label: str) -> str:
    """Regex for a label such as "Error Step": words joined by any space/underscore/hyphen run."""
    words = [re.escape(w) for w in label.split()]
    return r"[\s_\-]*".join(words) if words else re.escape(label)


def _after_last_label(text: str, label: str) -> str | None:
    """Value of the last ``label:`` (see _all_label_values); None when the label does not occur."""
    values = _all_label_values(text, label)
    return values[-1] if values else None


def _all_label_values(text: str, label: str) -> list[str]:
    """Values of every ``label:`` occurrence, in order: the rest of the label's line, or the next
    non-empty line when the line ends at the colon ("" when there is none)."""
    if not label.strip():  # an empty label would match every colon
        return []
    pat = re.compile(_label_pattern(label) + r"[ \t]*[:：]", re.IGNORECASE)
    values: list[str] = []
    matches = list(pat.finditer(text))
    for i, m in enumerate(matches):
        # A value ends at the next label and is short: bounding it keeps the total work linear.
        stop = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        rest = text[m.end() : min(stop, m.end() + 2000)]
        first, _, tail = rest.partition("\n")
        if first.strip():
            values.append(first.strip())
        else:
            values.append(next((ln.strip() for ln in tail.splitlines() if ln.strip()), ""))
    return values


_STEP_MENTION = re.compile(r"(?<![A-Za-z])step\s*(?:[#:\-]\s*)?(\d+)(?![\d.]\d)", re.IGNORECASE)
_BARE_NUMBER = re.compile(r"\s*[(\[]?\s*#?(\d+)\s*[)\]]?\s*[.:]?\s*")
_BOXED_STEP = re.compile(r"\s{0,8}(?:step\s{0,8}[#:\-]?\s{0,8})?(\d+)\s{0,8}", re.IGNORECASE)


def _check_step(digits: str, max_step: int | None) -> Parsed[int]:
    if len(digits) > _MAX_INT_DIGITS:
        return Parsed.failure("step number too large")
    n = int(digits)
    if n < 1 or (max_step is not None and n > max_step):
        bound = f"1..{max_step}" if max_step is not None else "1.."
        return Parsed.failure(f"step {n} out of range {bound}")
    return Parsed.success(n)


def _distinct_in_order(values: Sequence[str]) -> list[str]:
    seen: dict[str, None] = {}
    for v in values:
        seen.setdefault(v.lstrip("0") or "0", None)
    return list(seen)


def parse_step(text: str, *, label: str = "Error Step", max_step: int | None = None) -> Parsed[int]:
    """A 1-based step number, for ErrorRadar's ``Error Step: Step X``.

    - With ``label:`` lines, the last one whose value holds a number decides: its value may be
      "Step 3", "step3", "Step #3" or a bare "3" (digits only; "Step three" is not read). Several
      different steps inside that one value are ambiguous.
    - Else the last ``\\boxed{}`` holding only a step ("3", "Step 3"): "The first wrong step is \\boxed{3}".
    - Without a usable label, the output's step mentions ("Step N") must all name the same step;
      different numbers are "ambiguous". An output that is only a number ("3", "(3)") is read too.
    - A number outside ``1..max_step`` (or below 1) is a failure "step N out of range".
    """
    body, err = _prepare(text)
    if err:
        return Parsed.failure(err)
    unwrapped = _unwrap(body)
    cleaned = _strip_inline_markup(unwrapped.text)  # clean_markup(body), unwrapping once

    for value in reversed(_all_label_values(cleaned, label)):
        steps = _distinct_in_order(_STEP_MENTION.findall(value))
        if len(steps) > 1:
            return Parsed.failure(f"ambiguous: several steps ({', '.join(steps)})")
        if steps:
            return _check_step(steps[0], max_step)
        m = re.match(r"[(\[]?\s*#?(\d+)(?![\d.]\d)", value)
        if m:
            return _check_step(m.group(1), max_step)

    for content in _unwrapped_boxes(unwrapped, limit=64):
        m = _BOXED_STEP.fullmatch(_strip_inline_markup(content))
        if m:
            return _check_step(m.group(1), max_step)

    steps = _distinct_in_order(_STEP_MENTION.findall(cleaned))
    if len(steps) > 1:
        return Parsed.failure(f"ambiguous: several steps ({', '.join(steps)})")
    if steps:
        return _check_step(steps[0], max_step)
    m = _BARE_NUMBER.fullmatch(cleaned) if len(cleaned) <= 64 else None
    if m:
        return _check_step(m.group(1), max_step)
    return Parsed.failure("no step found")


def _keyword_pattern(keyword: str) -> str | None:
    words = [re.escape(w) for w in keyword.split()]
    if not words:
        return None
    # Left word boundary only, so a stem matches its inflections ("misinterpret" ->
    # "misinterpretation"); "_" counts as a boundary so label names like "D_Knowledge_..." match.
    return r"(?<![A-Za-z0-9])" + r"[\s_\-]+".join(words)


def _may_occur(keyword: str, folded: str | None) -> bool:
    """False only when the keyword surely has no match in the text: ``folded`` is the text lowercased
    when it is ASCII (then IGNORECASE is plain ASCII case folding), else None (no quick answer)."""
    words = keyword.split()
    if folded is None or not words or not words[0].isascii():
        return True
    return words[0].lower() in folded


def match_category(
    text: str,
    keywords: Mapping[str, Sequence[str]],
    *,
    label: str | None = None,
) -> Parsed[str]:
    """Classify an output into one category code by keywords (case-insensitive).

    Rule:
    - Scope: with ``label`` (e.g. "Error Category") and a ``label:`` in the output, only the
      value of the LAST such label is read (the rest of its line, or the next non-empty line when
      the line ends at the colon); otherwise the whole reasoning-stripped output.
    - A keyword matches at a word start (so stems match inflections), with any run of spaces,
      underscores or hyphens between its words.
    - The code itself (e.g. "CAL") counts as a mention when it appears as a whole word, case-
      sensitively; a one-character code (e.g. "A") counts only when it is the entire scoped text,
      so the English article "A" never votes.
    - A match lying inside a longer match of another category is ignored (the longer, more
      specific phrase wins); matches of the same category never conflict ("Visual Perception
      Error" hits "visual" and "perception", both VIS).
    - Exactly one category mentioned -> that code; several -> "ambiguous"; none -> failure.
    """
    body, err = _prepare(text)
    if err:
        return Parsed.failure(err)
    scope = clean_markup(body)
    if label:
        value = _after_last_label(scope, label)
        if value is not None:
            scope = value
            if not scope:
                return Parsed.failure(f"empty value after '{label}:'")

    spans: list[tuple[int, int, str]] = []
    folded = scope.lower() if scope.isascii() else None
    for code, kws in keywords.items():
        code = str(code)
        # a keyword whose first word is not in the text cannot match: its regex pass is skipped
        pats = [p for p in (_keyword_pattern(str(k)) for k in kws if _may_occur(str(k), folded)) if p]
        if pats:
            rx = re.compile("|".join(f"(?:{p})" for p in pats), re.IGNORECASE)
            spans.extend((m.start(), m.end(), code) for m in rx.finditer(scope) if m.end() > m.start())
        if len(code) >= 2:
            if code in scope:  # the case-sensitive regex below needs the code itself
                rx = re.compile(r"(?<![A-Za-z0-9])" + re.escape(code) + r"(?![A-Za-z0-9])")
                spans.extend((m.start(), m.end(), code) for m in rx.finditer(scope))
        elif code and scope.strip(_NAME_STRIP) == code:
            spans.append((0, len(scope), code))

    # Containment filter: sweep by start (longer first); a span inside the farthest-reaching earlier
    # span is dropped when that span is strictly longer and of another category (identical spans
    # of two categories both count, which makes the output ambiguous).
    spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
    hits: dict[str, None] = {}
    reach_start, reach_end, reach_cat = -1, -1, ""
    for start, end, code in spans:
        contained = end <= reach_end and reach_cat != code and reach_end - reach_start > end - start
        if not contained:
            hits.setdefault(code, None)
        if end > reach_end:
            reach_start, reach_end, reach_cat = start, end, code

    if len(hits) == 1:
        return Parsed.success(next(iter(hits)))
    if len(hits) > 1:
        order = {c: i for i, c in enumerate(keywords)}
        names = sorted(hits, key=lambda c: order.get(c, len(order)))
        return Parsed.failure(f"ambiguous: several categories ({', '.join(names)})")
    return Parsed.failure("no category keyword found")


# --------------------------------------------------------------------------------------------
# Timestamps and intervals

_NUM = r"(?:\d+(?:\.\d+)?|\.\d+)"
_CLOCK = r"(?:\d+(?::\d{1,2}){1,2}(?:\.\d+)?)"
_TIME = rf"(?:{_CLOCK}|{_NUM})"
_UNIT = r"(?:\s*(?:seconds?|secs?|s)\b)?"
_DASH = r"(?:-|–|—|~|\bto\b|\buntil\b|\btill\b)"
_SEP = rf"\s*(?:,|{_DASH})\s*"
# "[12s]-[20s]", "[00:12] to [00:20]": each end in its own brackets (not with a comma: "[12s], [20s]"
# lists two moments, not one interval)
_BRACKETED_SEP = rf"\s*[\])]\s*{_DASH}\s*(?:[\[(]\s*)?"  # "(?:[(]\s*)?", not "[(]?\s*": see _THINK_TAG
_INTERVAL = re.compile(
    rf"(?<![\w.:])({_TIME}){_UNIT}(?:{_SEP}|{_BRACKETED_SEP})({_TIME}){_UNIT}(?![\w:])"
    rf"|\bbetween\s+({_TIME}){_UNIT}\s+and\s+({_TIME}){_UNIT}(?![\w:])",
    re.IGNORECASE,
)
_TIMESTAMP = re.compile(rf"[\[(]?\s*({_TIME})\s*(?:seconds?|secs?|s)?\s*[\])]?", re.IGNORECASE)
_ANSWER_LABEL = re.compile(r"\banswer\s*[:：]", re.IGNORECASE)


def _time_to_seconds(token: str) -> float | None:
    """'12.5' -> 12.5, '01:02' -> 62, '1:00:05.5' -> 3605.5; None if malformed or not finite."""
    parts = token.split(":")
    if len(parts) > 3:
        return None
    try:
        values = [float(p) for p in parts]
    except ValueError:
        return None
    # minutes and seconds after a colon must be below 60, else it is no clock time
    if any(v >= 60 for v in values[1:]):
        return None
    total = 0.0
    for v in values:
        total = total * 60 + v
    return total if math.isfinite(total) else None


def parse_timestamp(text: str) -> float | None:
    """Seconds from "mm:ss", "hh:mm:ss", "m:ss.s", "12.5", "12.5s", "12 sec", "[12s]"; else None."""
    t = _as_text(text).strip()
    if len(t) > 200:
        return None
    m = _TIMESTAMP.fullmatch(t)
    return _time_to_seconds(m.group(1)) if m else None


class _IntervalMatch(NamedTuple):
    start: int
    interval: tuple[float, float]
    clock: bool  # both ends written as clock times ("00:12")


def _interval_matches(text: str) -> list[_IntervalMatch]:
    out: list[_IntervalMatch] = []
    for m in _INTERVAL.finditer(text):
        first = 1 if m.group(1) is not None else 3  # the "between ... and ..." alternative
        a_text, b_text = m.group(first), m.group(first + 1)
        a, b = _time_to_seconds(a_text), _time_to_seconds(b_text)
        if a is not None and b is not None:
            out.append(_IntervalMatch(m.start(), (a, b), ":" in a_text and ":" in b_text))
    return out


def parse_interval(text: str) -> Parsed[tuple[float, float]]:
    """One time interval in seconds, values AS WRITTEN (a reversed interval stays reversed).

    Accepts "[12.5, 20]", "(12.5,20)", "12.5 - 20", "12.5s to 20s", "12.5 seconds - 20 seconds",
    "00:12-00:20", "[00:01:02-00:01:10]", "0:12–0:20", "12-20s", "from 12 s to 20 s",
    "between 12 and 20 seconds", and each end in its own brackets: "[12s]-[20s]", "[00:12]-[00:20]"
    (dashes: -, –, —, ~, "to", "until"). Choice among several: the first interval after the last
    ``Answer:`` label when there is one, else the last interval in the output.
    """
    body, err = _prepare(text)
    if err:
        return Parsed.failure(err)
    cleaned = clean_markup(body)
    found = _interval_matches(cleaned)
    if not found:
        return Parsed.failure("no interval found")
    label = None
    for label in _ANSWER_LABEL.finditer(cleaned):
        pass
    if label is not None:
        after = [f.interval for f in found if f.start >= label.end()]
        if after:
            return Parsed.success(after[0])
    return Parsed.success(found[-1].interval)


def parse_intervals(text: str, *, clock_first: bool = False) -> list[tuple[float, float]]:
    """Every interval in the text, in order, values as written (e.g. ViRectify's
    ``[mm:ss-mm:ss],[mm:ss-mm:ss]``); the forms of :func:`parse_interval`, brackets optional.

    ``clock_first``: when some interval has both ends as clock times ("00:12-00:20"), only those
    count, so that a number range in a note beside them ("bounces 2-3 times") is not read as seconds.
    """
    found = _interval_matches(clean_markup(_as_text(text)))
    if clock_first and any(f.clock for f in found):
        found = [f for f in found if f.clock]
    return [f.interval for f in found]


# --------------------------------------------------------------------------------------------
# Orders

_ARROW = r"(?:-+>|=+>|→|⟶|➔|>)"
_ORDER = re.compile(
    rf"(?<![\w.])(?:segment\s*)?\d+(?:\s*(?:{_ARROW}|,)\s*(?:segment\s*)?\d+)+(?!\d)",
    re.IGNORECASE,
)
_ARROW_RX = re.compile(_ARROW)


def parse_order(text: str, n: int | None = None) -> Parsed[tuple[int, ...]]:
    """An order of items such as "4->1->3->2" (also "4 -> 1", "4→1", "4, 1, 3, 2", "4 > 1",
    "Segment 4 -> Segment 1").

    Choice: after the last ``Answer:`` label the first sequence there, else the last sequence in
    the output; in both cases an arrow-separated sequence is preferred over a comma list (comma
    lists also occur in prose). With ``n`` the order must be a permutation of 1..n; the failure
    says why ("repeats 2; missing 3").
    """
    body, err = _prepare(text)
    if err:
        return Parsed.failure(err)
    cleaned = clean_markup(body)
    seqs = [(m.start(), m.group(0)) for m in _ORDER.finditer(cleaned)]
    if not seqs:
        return Parsed.failure("no order found")

    def pick(cands: list[tuple[int, str]], first: bool) -> str:
        arrows = [c for c in cands if _ARROW_RX.search(c[1])]
        pool = arrows or cands
        return (pool[0] if first else pool[-1])[1]

    label = None
    for label in _ANSWER_LABEL.finditer(cleaned):
        pass
    after = [s for s in seqs if label is not None and s[0] >= label.end()]
    chosen = pick(after, first=True) if after else pick(seqs, first=False)

    digits = re.findall(r"\d+", chosen)
    if any(len(d) > _MAX_INT_DIGITS for d in digits):
        return Parsed.failure("number too large in order")
    order = tuple(int(d) for d in digits)
    if n is not None:
        problems: list[str] = []
        seen: set[int] = set()
        repeats: list[int] = []
        for x in order:
            if x in seen and x not in repeats:
                repeats.append(x)
            seen.add(x)
        if repeats:
            problems.append("repeats " + ", ".join(map(str, repeats)))
        extra = sorted(x for x in seen if not 1 <= x <= n)
        if extra:
            problems.append("unexpected " + ", ".join(map(str, extra)))
        missing = [x for x in range(1, n + 1) if x not in seen]
        if missing:
            problems.append("missing " + ", ".join(map(str, missing)))
        if problems:
            return Parsed.failure("; ".join(problems))
    return Parsed.success(order)


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
