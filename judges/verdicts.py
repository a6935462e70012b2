"""What a task's ``process_results`` and aggregations read of judged responses: the parts of a judged
response, the mean verdict with judge errors left out of the denominator, and the error-rate check.

Pure and light: a benchmark's scoring imports these without loading the judge runtime or lmms-eval
(the runtime's error-rate setting is read only when a sample has no verdict)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from loguru import logger

from lmms_eval_plugins.outcome import NOT_JUDGED

from .base import JudgeErrorRateExceeded, JudgeOutcome


def max_error_rate_from_env() -> float:
    from .runtime import max_error_rate_from_env as read

    return read()


def judged_parts(filtered_result: Any) -> tuple[str, JudgeOutcome]:
    """``(response_text, JudgeOutcome)`` from what ``process_results`` receives.

    Accepts the ``results`` list itself, its first element (this filter's list for the document) or
    the judged dict.  A plain string means the response never went through :class:`JudgeFilter`;
    that is reported as a judge error rather than a silent 0.
    """
    value = filtered_result
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    if isinstance(value, Mapping) and isinstance(value.get("judge"), Mapping):
        return str(value.get("text", "")), JudgeOutcome.of(value)
    text = value if isinstance(value, str) else ""
    return text, JudgeOutcome(
        name="?",
        version="?",
        model=None,
        error="response was not judged: the task's filter_list does not run JudgeFilter",
    )


_as_outcome = JudgeOutcome.of


@dataclass(frozen=True)
class JudgedScore:
    value_percent: float  # mean verdict over judged (and skipped) samples, x100; NaN if none
    n_judged: int  # samples in the denominator: verdicts plus skipped (nothing to judge, scored as wrong)
    n_errors: int  # judge errors: excluded from the denominator
    error_rate: float  # n_errors / (n_judged + n_errors)
    n_skipped: int = 0
    n_not_judged: int = 0  # no judge was asked (none configured, --predict_only): unscored, not judge errors

    @property
    def n_total(self) -> int:
        return self.n_judged + self.n_errors + self.n_not_judged

    @property
    def n_without_verdict(self) -> int:
        """Samples left unscored: judge errors and samples no judge was asked about."""
        return self.n_errors + self.n_not_judged


def judged_mean(outcomes: Iterable[Any], *, skipped_value: float = 0.0) -> JudgedScore:
    """Mean verdict in percent, judge errors excluded from the denominator.

    ``outcomes``: :class:`JudgeOutcome` objects, their ``to_dict()`` form, or filtered dicts;
    ``None`` counts as skipped.  Skipped samples (the model gave nothing to judge) score
    ``skipped_value``.
    """
    total = 0.0
    n_judged = n_errors = n_skipped = n_not_judged = 0
    for raw in outcomes:
        outcome = _as_outcome(raw)
        if outcome is None or (outcome.skipped and outcome.error is None):
            n_skipped += 1
            n_judged += 1
            total += skipped_value
        elif outcome.error is not None and str(outcome.error).startswith(NOT_JUDGED):
            n_not_judged += 1
        elif outcome.error is not None or outcome.verdict is None:
            n_errors += 1
        else:
            n_judged += 1
            total += float(outcome.verdict)
    n_all = n_judged + n_errors
    value = 100.0 * total / n_judged if n_judged else float("nan")
    return JudgedScore(value, n_judged, n_errors, (n_errors / n_all) if n_all else 0.0, n_skipped, n_not_judged)


def check_error_rate(n_errors: int, n_total: int, threshold: float | None = None, *, metric: str = "") -> float:
    """The judge-error rate; raises :class:`JudgeErrorRateExceeded` when it passes ``threshold``
    (default ``$LMMS_EVAL_PLUGINS_JUDGE_MAX_ERROR_RATE`` or 0.05).  Call it from the aggregation."""
    if threshold is None:
        threshold = max_error_rate_from_env()
    if n_total <= 0:
        return 0.0
    rate = n_errors / n_total
    if rate > threshold:
        what = f" for {metric}" if metric else ""
        raise JudgeErrorRateExceeded(
            f"judge error rate{what} is {rate:.1%} ({n_errors} of {n_total} samples could not be judged), above the "
            f"threshold {threshold:.1%} (LMMS_EVAL_PLUGINS_JUDGE_MAX_ERROR_RATE). The failed samples carry the reason in "
            "filtered_resps[0]['judge']['error'] of the logged samples, and the judge report counts calls and failures. "
            "Fix the judge endpoint and re-run (verdicts already judged come from the cache), or raise the threshold."
        )
    return rate


def aggregate_judged(
    outcomes: Iterable[Any], *, metric: str = "", threshold: float | None = None, skipped_value: float = 0.0
) -> float | None:
    """``judged_mean`` + a log line: the value (percent) for an aggregation.

    ``None`` (JSON null: unscored, finished later by ``lmms-eval-plugins score``) when any sample has no
    verdict; it never raises, because an exception in an aggregation ends lmms-eval's whole evaluation
    and loses every task's results and samples. Above ``threshold`` the judge errors are logged as an error.
    """
    score = judged_mean(outcomes, skipped_value=skipped_value)
    if score.n_without_verdict:
        limit = max_error_rate_from_env() if threshold is None else threshold
        log = logger.error if score.error_rate > limit else logger.warning
        why = ", ".join(
            part
            for count, part in (
                (score.n_errors, f"{score.n_errors} judge errors"),
                (score.n_not_judged, f"{score.n_not_judged} not judged (no judge in this run)"),
            )
            if count
        )
        log(
            f"{metric or 'judged metric'}: {score.n_without_verdict} of {score.n_total} samples have no verdict "
            f"({why}); the metric is null (unscored) until `lmms-eval-plugins score OUTPUT_PATH` judges them"
        )
        return None
    logger.info(
        f"{metric or 'judged metric'}: {score.value_percent:.2f} over {score.n_judged} samples "
        f"({score.n_errors} judge errors excluded, {score.n_skipped} with nothing to judge)"
    )
    return score.value_percent if not math.isnan(score.value_percent) else float("nan")
