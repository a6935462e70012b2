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

The parsers live in modules by kind, and this module is the one to import them from:
``parsing_markup`` (:class:`Parsed`, reasoning blocks, markup, boxes, tags), ``parsing_letters``
(option letters, letter sets), ``parsing_steps`` (steps, categories) and ``parsing_times``
(timestamps, intervals, orders).
"""

from __future__ import annotations

from lmms_eval_plugins.parsing_letters import parse_letter_set, parse_option_letter
from lmms_eval_plugins.parsing_markup import (
    Parsed,
    clean_markup,
    extract_boxed,
    extract_tag,
    strip_reasoning,
    tag_runs_to_end,
)
from lmms_eval_plugins.parsing_steps import match_category, parse_step
from lmms_eval_plugins.parsing_times import (
    parse_interval,
    parse_intervals,
    parse_order,
    parse_timestamp,
)

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
