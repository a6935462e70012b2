"""LLM judges (installed as ``lmms_eval_plugins.judges``).

Judges are found through the entry-point group ``lmms_eval_plugins.judges``; built-ins:
``semantic_match`` / ``semantic_match_offline`` (binary answer match, ViRectify) and
``rubric`` / ``rubric_offline`` (scoring points; the LLM judge sends the instructions its benchmark's
spec declares).  See docs/judges.md.

Only the judge types (``base``) and the registry load with the package. The runtime (HTTP client,
verdict cache, accounting), the endpoint settings, the session and the lmms-eval integration
(``JudgeFilter`` and the process_results/aggregation helpers) load on first use, so importing a
benchmark's spec does not load the judge runtime, and importing this package does not import lmms-eval.
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
from .registry import (
    ENTRY_POINT_GROUP,
    available_judges,
    load_judge,
    register_judge,
    resolve_judge_name,
    unregister_judge,
)

_LAZY = {
    "Endpoint": "endpoint",
    "endpoint_from_env": "endpoint",
    "JudgeRuntime": "runtime",
    "RuntimeSettings": "runtime",
    "JudgeSession": "session",
    "get_runtime": "session",
    "JudgeFilter": "filter",
    "JudgedScore": "verdicts",
    "JudgedResponse": "filter",
    "judged_parts": "verdicts",
    "judged_mean": "verdicts",
    "check_error_rate": "verdicts",
    "aggregate_judged": "verdicts",
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
