"""Answer parsing: option letters ("B", "(B)", "Answer: B", prose) and letter sets ("A, C").

Import from :mod:`lmms_eval_plugins.parsing` (the conventions are there).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from lmms_eval_plugins.parsing_markup import (
    Parsed,
    _as_text,
    _join_sorted,
    _prepare,
    _strip_inline_markup,
    _unwrap,
    _unwrapped_boxes,
)

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
_CONNECT = (
    r"(?: ?(?:is|was|would be|should be|must be|will be|=|:|-|–|—|then|therefore|clearly|likely|probably|definitely))"
)
# (pattern, words of which the lowercased text must hold one for the pattern to match): the check
# skips a pattern's scan, the costly part on long replies, when it cannot match.
_PROSE_STATEMENTS: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    # "The answer is B", "Answer: (B)", "the correct option is C", "My final answer would be option D"
    (
        re.compile(
            r"(?<![A-Za-z])(?i:(?:answer(?: to (?:the|this) (?:question|problem))?|答案"
            r"|(?:correct|right|best|final|most likely|most plausible|most appropriate|most reasonable) (?:option|choice|one))"
            + _CONNECT
            + r"{0,3} ?(?:(?:option|choice|letter) ?)?)"
            + _LETTER
        ),
        ("answer", "答案", "option", "choice", "one"),
    ),
    # "I choose B", "I would select option C", "pick (D)"
    (
        re.compile(r"(?<![A-Za-z])(?i:(?:choose|select|pick|go with) (?:(?:option|choice|answer) ?)?)" + _LETTER),
        ("choose", "select", "pick", "go with"),
    ),
    # "Therefore, B." -- the letter must end the sentence
    (
        re.compile(
            r"(?<![A-Za-z])(?i:(?:so|therefore|thus|hence),? (?:(?:option|choice) )?)" + _LETTER + r"(?=[.!]? |[.!]?$)"
        ),
        ("so", "therefore", "thus", "hence"),
    ),
    # "B is correct", "Option C is the best answer", "(D) would be the right choice"
    (
        re.compile(
            r"(?<![A-Za-z0-9])(?:(?i:option|choice) ?)?"
            + _LETTER
            + r"(?= (?i:is|would be|seems to be|appears to be) (?i:the )?(?i:correct|right|best|most likely|most plausible|answer))"
        ),
        ("correct", "right", "best", "most", "answer"),
    ),
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
_STATED_SET = re.compile(
    r"(?i:(?:the )?(?:correct |final |right )?(?:answer|option|choice)s? (?:is|are|would be)|i (?:choose|pick|select|would choose))"
    r" ?:? ?([^\n]{1,80})$"
)


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
