"""``lmms-eval-plugins judge-agreement``: score a judge against human labels.

Binary judges (``semantic_match``): a JSONL file with one object per line holding ``question``,
``prediction``, ``reference`` and the human ``label`` (0/1 or true/false).

Rubric judges (``rubric``): ``question``, ``prediction``, ``reference``, ``scoring_points`` (list of
strings) and the human per-point ``coverage`` and ``correctness`` lists (0/1 or true/false).

Reports raw agreement and Cohen's kappa (for rubric judges: per point, for coverage and for
correctness), each with a percentile bootstrap confidence interval over samples (questions for
rubric judges), seeded so the interval is reproducible.  Samples the judge could not judge, and
verdicts that are no 0/1 labels (a strict reading's NaN), are excluded and counted.
Verdicts go through the judge runtime, so they are cached.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from lmms_eval_plugins.data import JsonlLineError, iter_jsonl
from lmms_eval_plugins.safe_files import write_atomic

from .base import JudgeConfigError, JudgeError, JudgeItem, LLMJudge
from .endpoint import resolve_endpoint, resolve_model
from .registry import load_judge_class, resolve_judge_name
from .runtime import RuntimeSettings, sampling_from_env
from .session import get_runtime

# ---- statistics (pure) -------------------------------------------------------------------------


def raw_agreement(a: Sequence[int], b: Sequence[int]) -> float:
    if len(a) != len(b):
        raise ValueError("the two label lists differ in length")
    if not a:
        return float("nan")
    return sum(1 for x, y in zip(a, b) if x == y) / len(a)


def cohen_kappa(a: Sequence[int], b: Sequence[int]) -> float:
    """Cohen's kappa for two raters' labels (any hashable categories).

    NaN when chance agreement is 1 (both raters always give the same single label): kappa is
    undefined there, as in scikit-learn.
    """
    if len(a) != len(b):
        raise ValueError("the two label lists differ in length")
    n = len(a)
    if n == 0:
        return float("nan")
    po = raw_agreement(a, b)
    categories = set(a) | set(b)
    pe = sum((sum(1 for x in a if x == c) / n) * (sum(1 for y in b if y == c) / n) for c in categories)
    if pe >= 1.0:
        return float("nan")
    return (po - pe) / (1.0 - pe)


def bootstrap_ci(
    units: Sequence[Any],
    statistic: Callable[[Sequence[Any]], float],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over resamples (with replacement) of ``units``.

    Resamples where the statistic is NaN are dropped; (NaN, NaN) if none is left.
    """
    if not units or n_resamples <= 0:
        return float("nan"), float("nan")
    rng = random.Random(seed)
    n = len(units)
    values = []
    for _ in range(n_resamples):
        sample = [units[rng.randrange(n)] for _ in range(n)]
        v = statistic(sample)
        if not math.isnan(v):
            values.append(v)
    if not values:
        return float("nan"), float("nan")
    values.sort()
    alpha = (1.0 - confidence) / 2.0

    def quantile(q: float) -> float:
        pos = q * (len(values) - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        return values[lo] + (values[hi] - values[lo]) * (pos - lo)

    return quantile(alpha), quantile(1.0 - alpha)


def _flag(value: Any, where: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    if isinstance(value, str) and value.strip().lower() in ("0", "1", "true", "false", "yes", "no"):
        return int(value.strip().lower() in ("1", "true", "yes"))
    raise ValueError(f"{where}: {value!r} is not a 0/1 label")


def binary_agreement(
    pairs: Sequence[tuple[int, int]], *, n_resamples: int, confidence: float, seed: int
) -> dict[str, Any]:
    """``pairs`` = (judge, human) per sample."""
    judge = [p[0] for p in pairs]
    human = [p[1] for p in pairs]

    def agree(sample: Sequence[tuple[int, int]]) -> float:
        return raw_agreement([s[0] for s in sample], [s[1] for s in sample])

    def kappa(sample: Sequence[tuple[int, int]]) -> float:
        return cohen_kappa([s[0] for s in sample], [s[1] for s in sample])

    return {
        "n": len(pairs),
        "agreement": agree(pairs),
        "agreement_ci": list(bootstrap_ci(pairs, agree, n_resamples=n_resamples, confidence=confidence, seed=seed)),
        "kappa": kappa(pairs),
        "kappa_ci": list(bootstrap_ci(pairs, kappa, n_resamples=n_resamples, confidence=confidence, seed=seed)),
        "judge_positive_rate": (sum(judge) / len(judge)) if judge else float("nan"),
        "human_positive_rate": (sum(human) / len(human)) if human else float("nan"),
        "confusion": {
            "judge1_human1": sum(1 for j, h in pairs if j == 1 and h == 1),
            "judge1_human0": sum(1 for j, h in pairs if j == 1 and h == 0),
            "judge0_human1": sum(1 for j, h in pairs if j == 0 and h == 1),
            "judge0_human0": sum(1 for j, h in pairs if j == 0 and h == 0),
        },
    }


def rubric_agreement(
    questions: Sequence[dict[str, list[int]]], *, n_resamples: int, confidence: float, seed: int
) -> dict[str, Any]:
    """``questions``: per question ``judge_coverage``, ``human_coverage``, ``judge_correctness``,
    ``human_correctness`` (equal-length 0/1 lists).  Bootstrap resamples questions."""

    def flat(sample: Sequence[dict[str, list[int]]], key: str) -> list[int]:
        return [v for q in sample for v in q[key]]

    def stat(kind: str, fn: Callable[[Sequence[int], Sequence[int]], float]) -> Callable[[Sequence[Any]], float]:
        return lambda sample: fn(flat(sample, f"judge_{kind}"), flat(sample, f"human_{kind}"))

    def micro(sample: Sequence[dict[str, list[int]]], who: str) -> float:
        points = sum(len(q[f"{who}_coverage"]) for q in sample)
        if not points:
            return float("nan")
        return 100.0 * sum(sum(q[f"{who}_coverage"]) + sum(q[f"{who}_correctness"]) for q in sample) / (2 * points)

    out: dict[str, Any] = {"n_questions": len(questions), "n_points": sum(len(q["human_coverage"]) for q in questions)}
    for kind in ("coverage", "correctness"):
        for label, fn in (("agreement", raw_agreement), ("kappa", cohen_kappa)):
            f = stat(kind, fn)
            out[f"{kind}_{label}"] = f(questions)
            out[f"{kind}_{label}_ci"] = list(
                bootstrap_ci(questions, f, n_resamples=n_resamples, confidence=confidence, seed=seed)
            )
    out["judge_micro_average"] = micro(questions, "judge")
    out["human_micro_average"] = micro(questions, "human")
    diff = lambda sample: micro(sample, "judge") - micro(sample, "human")
    out["micro_average_difference"] = diff(questions)
    out["micro_average_difference_ci"] = list(
        bootstrap_ci(questions, diff, n_resamples=n_resamples, confidence=confidence, seed=seed)
    )
    return out


def verdict_flags(values: Any, n_points: int) -> list[int] | None:
    """A rubric verdict's coverage or correctness list as 0/1 flags, one per scoring point, or None when
    it is not that: a verdict read as the official CCQA scorer reads it keeps what the judge wrote
    (``"NaN"``, ``0.5``, ``2``, a list of another length), which is no 0/1 label to agree with."""
    if not isinstance(values, (list, tuple)) or len(values) != n_points:
        return None
    flags = []
    for value in values:
        if isinstance(value, bool) or (isinstance(value, (int, float)) and value in (0, 1)):
            flags.append(int(value))
        else:
            return None
    return flags


def rubric_questions(
    rows: Sequence[tuple[Any, Any]], outcomes: Sequence[Any]
) -> tuple[list[dict[str, list[int]]], list[tuple[str, str]]]:
    """(questions for :func:`rubric_agreement`, [(item id, why excluded)]) from judged rows
    ((item, (coverage, correctness)) human labels) and their outcomes: a judge error, or a verdict whose
    lists are not one 0/1 flag per scoring point, is excluded and named."""
    questions, excluded = [], []
    for (item, (coverage, correctness)), outcome in zip(rows, outcomes):
        if not outcome.ok:
            excluded.append((item.item_id, outcome.error))
            continue
        detail = outcome.detail or {}
        judged = (
            verdict_flags(detail.get("coverage"), len(coverage)),
            verdict_flags(detail.get("correctness"), len(correctness)),
        )
        if judged[0] is None or judged[1] is None:
            why = (
                f"the verdict's lists are not one 0/1 flag per scoring point (coverage {detail.get('coverage')!r}, "
                f"correctness {detail.get('correctness')!r})"
            )
            excluded.append((item.item_id, why))
            continue
        questions.append(
            {
                "judge_coverage": judged[0],
                "judge_correctness": judged[1],
                "human_coverage": list(coverage),
                "human_correctness": list(correctness),
            }
        )
    return questions, excluded


def binary_pairs(
    rows: Sequence[tuple[Any, int]], outcomes: Sequence[Any]
) -> tuple[list[tuple[int, int]], list[tuple[str, str]]]:
    """((judge, human) per sample, [(item id, why excluded)]): a judge error or a verdict that is not a
    finite number is excluded and named."""
    pairs, excluded = [], []
    for (item, label), outcome in zip(rows, outcomes):
        if not outcome.ok:
            excluded.append((item.item_id, outcome.error))
        elif not isinstance(outcome.verdict, (int, float)) or not math.isfinite(outcome.verdict):
            excluded.append((item.item_id, f"the verdict {outcome.verdict!r} is not a number"))
        else:
            pairs.append((int(round(outcome.verdict)), label))
    return pairs, excluded


# ---- input -------------------------------------------------------------------------------------


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) per non-blank line, through the package's JSONL reader; a bad line is a
    ``ValueError`` naming ``path:line`` (the ``judge-agreement`` command prints it)."""
    try:
        yield from iter_jsonl(Path(path))
    except JsonlLineError as exc:
        where = f"{path}:{exc.line}"
        if exc.json_error is not None:
            raise ValueError(f"{where}: not JSON ({exc.json_error})") from None
        raise ValueError(f"{where}: each line must be a JSON object") from None


def load_labels(path: Path, kind: str) -> list[tuple[JudgeItem, Any]]:
    """(item, human label) per line; the label is 0/1 (binary) or (coverage, correctness) lists."""
    rows: list[tuple[JudgeItem, Any]] = []
    for lineno, rec in _records(path):
        where = f"{path}:{lineno}"
        missing = [k for k in ("prediction", "reference") if k not in rec]
        if kind == "rubric":
            missing += [k for k in ("scoring_points", "coverage", "correctness") if k not in rec]
        elif "label" not in rec:
            missing.append("label")
        if missing:
            raise ValueError(f"{where}: missing field(s) {missing}")
        item = JudgeItem(
            question=str(rec.get("question", "")),
            prediction=str(rec["prediction"]),
            reference=str(rec["reference"]),
            scoring_points=rec.get("scoring_points"),
            item_id=str(rec.get("id", lineno)),
        )
        if kind == "rubric":
            n = len(item.scoring_points or ())
            cov = [_flag(v, f"{where} coverage") for v in rec["coverage"]]
            cor = [_flag(v, f"{where} correctness") for v in rec["correctness"]]
            if len(cov) != n or len(cor) != n:
                raise ValueError(
                    f"{where}: coverage and correctness must each have {n} entries (one per scoring point)"
                )
            rows.append((item, (cov, cor)))
        else:
            rows.append((item, _flag(rec["label"], f"{where} label")))
    if not rows:
        raise ValueError(f"{path}: no records")
    return rows


# ---- command -----------------------------------------------------------------------------------


def _fmt(x: Any) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def _ci(ci: Sequence[float]) -> str:
    return f"[{_fmt(ci[0])}, {_fmt(ci[1])}]"


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lmms-eval-plugins judge-agreement", description=__doc__.split("\n\n")[0])
    p.add_argument("labels", type=Path, help="JSONL file of human labels")
    p.add_argument("--judge", default="semantic_match", help="judge entry-point name (default: semantic_match)")
    p.add_argument("--offline", action="store_true", help="use <judge>_offline (also: LMMS_EVAL_PLUGINS_JUDGE=offline)")
    p.add_argument("--model", default=None, help="judge model (default: $LMMS_EVAL_PLUGINS_JUDGE_MODEL, else gpt-4o)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--confidence", type=float, default=0.95, help="confidence level (default 0.95)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument(
        "--cache", default=None, help="verdict cache (default: $LMMS_EVAL_PLUGINS_JUDGE_CACHE or ~/.cache/...)"
    )
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="calls in flight (default: $LMMS_EVAL_PLUGINS_JUDGE_CONCURRENCY or 32)",
    )
    p.add_argument("--json", dest="json_out", type=Path, default=None, help="also write the results as JSON here")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        name = resolve_judge_name(args.judge, offline=True if args.offline else None)
        factory = load_judge_class(name)
        is_llm = isinstance(factory, type) and issubclass(factory, LLMJudge)
        judge = factory(sampling=sampling_from_env()) if is_llm else factory()
        rows = load_labels(args.labels, judge.kind)
        runtime = get_runtime(args.cache)
        endpoint = model = None
        if isinstance(judge, LLMJudge):
            endpoint = resolve_endpoint(name)
            model = args.model or resolve_model("gpt-4o")
        settings = RuntimeSettings.from_env(concurrency=args.concurrency)
    except (JudgeError, JudgeConfigError, ValueError, OSError) as exc:
        print(f"judge-agreement: {exc}", file=sys.stderr)
        return 2

    outcomes = runtime.judge_items(judge, [item for item, _ in rows], model=model, endpoint=endpoint, settings=settings)
    boot = {"n_resamples": args.bootstrap, "confidence": args.confidence, "seed": args.seed}
    if judge.kind == "rubric":
        questions, errors = rubric_questions(rows, outcomes)
        stats = rubric_agreement(questions, **boot)
    else:
        pairs, errors = binary_pairs(rows, outcomes)
        stats = binary_agreement(pairs, **boot)
    result = {
        "judge": judge.describe(),
        "model": model,
        "labels": str(args.labels),
        "n_records": len(rows),
        "n_judge_errors": len(errors),
        "judge_errors": [{"id": i, "error": e} for i, e in errors],
        "bootstrap": boot,
        **stats,
        "accounting": runtime.report()["by_model"],
    }
    level = int(round(args.confidence * 100))
    print(
        f"judge {judge.name}@{judge.version}"
        + (f" ({model})" if model else " (offline, lower fidelity)")
        + f" vs {args.labels}"
    )
    print(f"records {len(rows)}, judge errors {len(errors)} (excluded)")
    if judge.kind == "rubric":
        print(f"questions {stats['n_questions']}, scoring points {stats['n_points']}")
        print(f"| measure | agreement | {level}% CI | kappa | {level}% CI |\n|---|---|---|---|---|")
        for kind in ("coverage", "correctness"):
            print(
                f"| {kind} | {_fmt(stats[f'{kind}_agreement'])} | {_ci(stats[f'{kind}_agreement_ci'])} | {_fmt(stats[f'{kind}_kappa'])} | {_ci(stats[f'{kind}_kappa_ci'])} |"
            )
        print(
            f"micro-average: judge {_fmt(stats['judge_micro_average'])}, human {_fmt(stats['human_micro_average'])}, "
            f"difference {_fmt(stats['micro_average_difference'])} {_ci(stats['micro_average_difference_ci'])}"
        )
    else:
        print(f"| n | agreement | {level}% CI | kappa | {level}% CI |\n|---|---|---|---|---|")
        print(
            f"| {stats['n']} | {_fmt(stats['agreement'])} | {_ci(stats['agreement_ci'])} | {_fmt(stats['kappa'])} | {_ci(stats['kappa_ci'])} |"
        )
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        text = runtime.redact(json.dumps(_json_safe(result), indent=2))
        write_atomic(args.json_out, text + "\n")
        print(f"written {args.json_out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
