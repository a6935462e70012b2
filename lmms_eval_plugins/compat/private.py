"""Calls of private lmms-eval helpers (entry ``model-args-split`` of :data:`lmms_eval_plugins.compat.ENTRIES`),
each with a fallback for when the helper is gone or changed."""

from __future__ import annotations

import sys

from lmms_eval_plugins import compat


def split_model_args(model_args: str) -> list[str]:
    """``model_args`` split into ``key=value`` pieces as lmms-eval splits ``--model_args`` (a comma inside
    quotes or brackets does not split); by :func:`split_outside_brackets` when lmms-eval's helper is unavailable."""
    if compat.available("model-args-split"):
        from lmms_eval.utils import _smart_comma_split

        return list(_smart_comma_split(model_args))
    return split_outside_brackets(model_args)


def split_model_args_without_loading(model_args: str) -> list[str]:
    """:func:`split_model_args` where lmms-eval's helper is already loaded, else :func:`split_outside_brackets`:
    for readers of stored runs (``report``, ``compare``), whose one use of lmms-eval would be this split,
    and importing ``lmms_eval.utils`` imports torch (about 600 MB and 4 s)."""
    if "lmms_eval.utils" in sys.modules:
        return split_model_args(model_args)
    return split_outside_brackets(model_args)


def split_outside_brackets(text: str) -> list[str]:
    """``a=1,b="x,y",c={d:1,e:2}`` split at the commas outside quotes and brackets (lmms-eval's rule)."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]
