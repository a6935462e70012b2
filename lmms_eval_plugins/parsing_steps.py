"""Answer parsing: labelled step numbers ("Error Step: 3") and categories matched by keyword.

Import from :mod:`lmms_eval_plugins.parsing` (the conventions are there).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from lmms_eval_plugins.parsing_letters import _NAME_STRIP
from lmms_eval_plugins.parsing_markup import (
    _MAX_INT_DIGITS,
    Parsed,
    _prepare,
    _strip_inline_markup,
    _unwrap,
    _unwrapped_boxes,
    clean_markup,
)

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
