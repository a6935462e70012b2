"""Calls of private lmms-eval helpers (entry ``model-args-split`` of :data:`lmms_eval_plugins.compat.ENTRIES`),
each with a fallback for when the helper is gone or changed."""

from __future__ import annotations

from lmms_eval_plugins import compat


def split_model_args(model_args: str) -> list[str]:
    """``model_args`` split into ``key=value`` pieces as lmms-eval splits ``--model_args`` (a comma inside
    quotes or braces does not split); at every comma when lmms-eval's helper is unavailable."""
    if compat.available("model-args-split"):
        from lmms_eval.utils import _smart_comma_split

        return list(_smart_comma_split(model_args))
    return model_args.split(",")
