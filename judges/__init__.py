"""LLM judges (installed as ``lmms_eval_plugins.judges``).

Judges are found through the entry-point group ``lmms_eval_plugins.judges``; built-ins:
``semantic_match`` / ``semantic_match_offline`` (binary answer match, ViRectify) and
``rubric`` / ``rubric_offline`` (scoring points; the LLM judge sends the instructions its benchmark's
spec declares).  See docs/judges.md.

The lmms-eval integration (``JudgeFilter`` and the process_results/aggregation helpers) is loaded
lazily, so importing this package does not import lmms-eval.
"""

from __future__ import annotations

from typing import Any

from .base import (
    Judge,
    JudgeConfigError,
    JudgeError,
    JudgeErrorRateExceeded,
    JudgeItem,
    JudgeOutcome,
    LLMJudge,
    OfflineJudge,
    ReplyParseError,
    UnknownJudgeError,
    Verdict,
    neutralise,
    strip_think,
)
from .endpoint import Endpoint, endpoint_from_env
from .registry import (
    ENTRY_POINT_GROUP,
    available_judges,
    load_judge,
    register_judge,
    resolve_judge_name,
    unregister_judge,
)
from .runtime import JudgeRuntime, RuntimeSettings
from .session import JudgeSession, get_runtime

_LAZY = {
    "JudgeFilter": "filter",
    "JudgedScore": "filter",
    "JudgedResponse": "filter",
    "judged_parts": "filter",
    "judged_mean": "filter",
    "check_error_rate": "filter",
    "aggregate_judged": "filter",
    "default_item_fn": "filter",
}

__all__ = [
    "ENTRY_POINT_GROUP",
    "Endpoint",
    "Judge",
    "JudgeConfigError",
    "JudgeError",
    "JudgeErrorRateExceeded",
    "JudgeFilter",
    "JudgeItem",
    "JudgeOutcome",
    "JudgeRuntime",
    "JudgedResponse",
    "JudgedScore",
    "LLMJudge",
    "OfflineJudge",
    "ReplyParseError",
    "RuntimeSettings",
    "UnknownJudgeError",
    "Verdict",
    "aggregate_judged",
    "available_judges",
    "check_error_rate",
    "default_item_fn",
    "endpoint_from_env",
    "get_runtime",
    "JudgeSession",
    "judged_mean",
    "judged_parts",
    "load_judge",
    "neutralise",
    "register_judge",
    "resolve_judge_name",
    "strip_think",
    "unregister_judge",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
