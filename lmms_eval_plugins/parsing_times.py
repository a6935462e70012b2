"""Answer parsing: timestamps, time intervals ("[00:12-00:20]") and segment orders ("4->1->3->2").

Import from :mod:`lmms_eval_plugins.parsing` (the conventions are there).
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from lmms_eval_plugins.parsing_markup import (
    _MAX_INT_DIGITS,
    Parsed,
    _as_text,
    _prepare,
    clean_markup,
)

# --------------------------------------------------------------------------------------------
# Timestamps and intervals

# every spelling Python's float() reads of a plain number (what the official scripts call): "12", "12.5",
# ".5", "3.", "+12.5", "1.2e+01" (a leading "-" is the range's dash, never a sign)
_NUM = r"(?:\+?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
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
_UNIT_AFTER_NUMBER = re.compile(r"\d\s*(?:seconds?|secs?|s)\b", re.IGNORECASE)


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
    end: int


def _interval_matches(text: str) -> list[_IntervalMatch]:
    out: list[_IntervalMatch] = []
    for m in _INTERVAL.finditer(text):
        first = 1 if m.group(1) is not None else 3  # the "between ... and ..." alternative
        a_text, b_text = m.group(first), m.group(first + 1)
        a, b = _time_to_seconds(a_text), _time_to_seconds(b_text)
        if a is not None and b is not None:
            out.append(_IntervalMatch(m.start(), (a, b), ":" in a_text and ":" in b_text, m.end()))
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

    ``clock_first``: when some interval has both ends as clock times ("00:12-00:20"), only intervals
    written as times count (clock times, or an end with a unit: "[24s]-[30s]" beside "[00:28]-[00:36]"),
    so that a bare number range in a note beside them ("bounces 2-3 times") is not read as seconds.
    """
    cleaned = clean_markup(_as_text(text))
    found = _interval_matches(cleaned)
    if clock_first and any(f.clock for f in found):
        # written as a time: clock times, or an end with a unit ("[24s]-[30s]", "40-45 sec")
        found = [f for f in found if f.clock or _UNIT_AFTER_NUMBER.search(cleaned, f.start, f.end)]
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
