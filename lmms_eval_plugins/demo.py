"""``lmms-eval-plugins demo``: the README's main command.

Runs the bundled sample tasks through the real ``lmms-eval`` CLI, in one process (a ``--config`` list),
with three models: the tiny randomly initialised Qwen2.5-VL (the real ``qwen2_5_vl`` class and a
real forward pass on the CPU), ``oracle`` (every answer right: each metric's maximum) and ``random``
(the seeded chance baseline). It prints one table, headline metric per task, the three models side
by side. The tiny model's weights are random, so its numbers sit near the random row, far below the
oracle's: that is the expected result, and it shows that data, prompts, model, parsing and scoring
work end to end. A few documents per task (``--limit``) and short replies (``TINY_MODEL_GEN_KWARGS``)
keep it under a minute on a laptop CPU. When lmms-eval fails (a model without results, a task without
a result, a non-zero exit; lmms-eval itself exits 0 on most failures), the demo prints the cause (the
end of the log's last traceback, or the plugin's error block) and the fix first, no success text,
and exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lmms_eval_plugins.cli_run import OFFLINE_ENV
from lmms_eval_plugins.data import cache_dir
from lmms_eval_plugins.doctor import HINT, fixes_for_log, installed_versions
from lmms_eval_plugins.runs import RESULTS_SUFFIX, RunInputError, read_results
from lmms_eval_plugins.safe_files import open_append, write_atomic
from lmms_eval_plugins.tasks_command import sample_tasks

# The tiny model's weights are random: it rarely stops by itself, so its replies are capped. The
# README's tiny-model CLI line uses the same setting.
TINY_MODEL_GEN_KWARGS = "max_new_tokens=16"
DEFAULT_LIMIT = 2
# The offline judges keep the demo free of API keys and endpoints.
JUDGE_ENV = {"LMMS_EVAL_PLUGINS_JUDGE": "offline"}
ROW_NOTE = {"oracle": "every answer right: the maximum", "random": "seeded chance baseline"}


def headline(task: str, metrics: Mapping[str, Any]) -> tuple[str, Any]:
    """(metric name, value) of the task's headline: the first percent metric of its spec present in ``metrics``."""
    from lmms_eval_plugins.benchmark import benchmark_of_task
    from lmms_eval_plugins.runs import task_metrics

    spec = benchmark_of_task(task)
    names = [m.name for m in spec.task_metrics(task).values() if m.unit == "%"] if spec else []
    values = task_metrics(metrics)
    for name in names:
        if name in values:
            return name, values[name]
    return "", None


def judge_note(judges: Mapping[str, str]) -> str:
    """The console line naming the judge that scored each judged task of the table (task -> judge); "" for none."""
    by_judge: dict[str, list[str]] = {}
    for task, judge in sorted(judges.items()):
        by_judge.setdefault(judge, []).append(task)
    if not by_judge:
        return ""
    env = ", ".join(f"{k}={v}" for k, v in JUDGE_ENV.items())
    parts = "; ".join(f"{judge} scored {', '.join(tasks)}" for judge, tasks in sorted(by_judge.items()))
    return (
        f"Judged rows: {parts} (offline judges, {env}: deterministic, no endpoint, lower fidelity than the "
        'LLM judges a real run uses; see the README\'s "LLM judges").'
    )


def metric_legend(lines: Sequence[str]) -> str:
    """One line naming what each headline metric of the table means (its paper name, else its spec's
    description), e.g. "csr: CSR; acc_i: Acc_i"; "" when the table has none."""
    from lmms_eval_plugins.benchmark import benchmark_of_task

    meanings: dict[str, list[str]] = {}
    for line in lines[2:]:
        cells = line.split()
        spec = benchmark_of_task(cells[0]) if len(cells) >= 2 else None
        metric = spec.task_metrics(cells[0]).get(cells[1]) if spec else None
        if metric is not None:
            meaning = metric.description or metric.paper_name
            text = f"{metric.paper_name} ({meaning})" if metric.paper_name and metric.description else meaning
            if text and text not in meanings.setdefault(cells[1], []):
                meanings[cells[1]].append(text)  # one name, two meanings (MMErroR's ETC and EPD accuracy)
    parts = [f"{name} = {' / '.join(texts)}" for name, texts in meanings.items() if texts]
    return "Metrics: " + "; ".join(parts) if parts else ""


def table_judges(lines: Sequence[str]) -> dict[str, str]:
    """task -> the judge that scored it in this demo, for the judged tasks among the table's rows."""
    from lmms_eval_plugins.benchmark import ordered_benchmarks
    from lmms_eval_plugins.judges.registry import resolve_judge_name
    from lmms_eval_plugins.yaml_index import judged_tasks

    rows = {line.split()[0] for line in lines[2:] if line.strip()}
    judged = judged_tasks([b.tasks_dir for b in ordered_benchmarks()])
    return {task: resolve_judge_name(judge, env=JUDGE_ENV) for task, judge in judged.items() if task in rows}


def _fmt(value: Any) -> str:
    if value is None:
        return "N/A"
    if isinstance(value, (int, float)):
        return f"{value:.1f}"
    return str(value)


def results_by_model(folder: Path) -> dict[str, dict[str, Any]]:
    """lmms-eval model name -> the newest results JSON under ``folder`` written for it."""
    out: dict[str, tuple[float, dict[str, Any]]] = {}
    for path in folder.rglob(f"*{RESULTS_SUFFIX}"):
        try:
            data = read_results(path)  # the bounded reader: a damaged or hostile file is skipped, not parsed
        except RunInputError:
            continue
        model = str((data.get("config") or {}).get("model") or "")
        mtime = path.stat().st_mtime
        if model and (model not in out or out[model][0] < mtime):
            out[model] = (mtime, data)
    return {model: data for model, (_, data) in out.items()}


def table(runs: Mapping[str, Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> list[str]:
    """Rows: leaf tasks; columns: (model name, heading). Missing results show as 'no result'."""
    leaves: list[str] = []
    for run in runs.values():
        groups = {g for g, members in (run.get("group_subtasks") or {}).items() if members}
        for task in run.get("results") or {}:
            if task not in groups and task not in leaves:
                leaves.append(task)
    leaves.sort()
    header = ["task", "metric", *(heading for _, heading in columns)]
    rows = []
    for task in leaves:
        name = ""
        cells = []
        for model, _ in columns:
            metrics = (runs.get(model, {}).get("results") or {}).get(task)
            if metrics is None:
                cells.append("no result")
                continue
            metric, value = headline(task, metrics)
            name = name or metric
            cells.append(_fmt(value))
        rows.append([task, name or "-", *cells])
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: "  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
STOPPED = "lmms-eval-plugins: the run stopped:"  # run_status.stopped_block's title line


def log_excerpt(text: str, n: int = 10) -> list[str]:
    """The cause in an lmms-eval log: the plugin's error block when there is one, else the last ``n``
    lines of the last traceback (ending with its exception line), else the log's last ``n`` lines."""
    lines = [_ANSI.sub("", line).rstrip() for line in text.splitlines()]
    blocks = [i for i, line in enumerate(lines) if line.startswith(STOPPED)]
    if blocks:
        end = next((j for j in range(blocks[-1] + 1, len(lines)) if lines[j].startswith("====")), len(lines))
        return lines[blocks[-1] : end]
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if starts:
        end = next(
            (j for j in range(starts[-1] + 1, len(lines)) if lines[j] and not lines[j].startswith(" ")), len(lines) - 1
        )
        frames = [line for line in lines[starts[-1] : end + 1] if line.strip(" ^~")]  # no caret lines
        return frames[-n:]
    return [line for line in lines if line.strip()][-n:]


def failure_report(
    missing: Sequence[str], returncode: int, excerpt: Sequence[str], fixes: Sequence[str], log_path: Path | str
) -> list[str]:
    """What a failed demo prints first: what failed, the cause from the log, the fix, the doctor hint."""
    what = f"lmms-eval wrote no results for {', '.join(missing)}" if missing else "some tasks have no result"
    lines = [
        f"lmms-eval-plugins demo: FAILED: {what} (lmms-eval exit status {returncode}).",
        f"cause (from the lmms-eval log, {log_path}):",
        *(f"    {line}" for line in excerpt),
    ]
    lines += [f"fix: {fix}" for fix in fixes]
    return [*lines, HINT]


def main(argv: list[str]) -> int:
    from lmms_eval_plugins.tiny_qwen import build_tiny_qwen2_5_vl, lmms_eval_model_args

    parser = argparse.ArgumentParser(prog="lmms-eval-plugins demo", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks",
        default=",".join(sample_tasks()),
        help="comma-separated tasks (default: every sample task or group, variants such as *_sample_restart_same included)",
    )
    parser.add_argument(
        "--limit", type=int, default=DEFAULT_LIMIT, help=f"documents per task (default {DEFAULT_LIMIT}; 0: all)"
    )
    parser.add_argument("--model", default="qwen2_5_vl", help="lmms-eval model name (default: the tiny Qwen2.5-VL)")
    parser.add_argument("--model_args", default=None, help="default: the tiny Qwen2.5-VL built on the fly")
    parser.add_argument(
        "--no-baselines", action="store_true", help="run only --model, without the oracle and random rows"
    )
    parser.add_argument("--output_path", default="out/demo")
    args = parser.parse_args(argv)

    started = time.monotonic()
    model_args, gen_kwargs = args.model_args, None
    if model_args is None and args.model == "qwen2_5_vl":
        model_args = lmms_eval_model_args(build_tiny_qwen2_5_vl(cache_dir("tiny-qwen2_5_vl")))
        gen_kwargs = TINY_MODEL_GEN_KWARGS
    output = Path(args.output_path).resolve()
    output.mkdir(parents=True, exist_ok=True)
    common: dict[str, Any] = {"tasks": args.tasks, "output_path": str(output), "batch_size": 1}
    if args.limit:
        common["limit"] = args.limit
    # one folder per model, as a user would run them: report, compare and check-run see the runs apart
    configs = [
        {
            **common,
            "output_path": str(output / re.sub(r"[^A-Za-z0-9_.-]", "_", args.model)),
            "model": args.model,
            **({"model_args": model_args} if model_args else {}),
            **({"gen_kwargs": gen_kwargs} if gen_kwargs else {}),
        }
    ]
    if not args.no_baselines:
        configs += [
            {**common, "output_path": str(output / "oracle"), "model": "oracle"},
            {**common, "output_path": str(output / "random"), "model": "random", "model_args": "seed=0"},
        ]
    config_path = output / "demo_config.json"  # JSON is YAML: lmms-eval's --config reads it
    write_atomic(config_path, json.dumps(configs, indent=2))
    log_path = output / "demo.log"
    models = [c["model"] for c in configs]
    print(
        f"lmms-eval-plugins demo: {', '.join(models)} on {args.tasks} "
        f"({'all documents' if not args.limit else f'{args.limit} documents per task'}), in one lmms-eval process; "
        f"log: {log_path}",
        flush=True,
    )
    env = {**os.environ, **OFFLINE_ENV, **JUDGE_ENV}
    with open_append(log_path, mode=0o644) as log:  # never through a link; emptied, then followed live
        log.truncate(0)
        done = subprocess.run(
            [sys.executable, "-m", "lmms_eval", "--config", str(config_path)],
            env=env,
            cwd=output,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=False,
        )
    runs = results_by_model(output)
    tiny = args.model_args is None and args.model == "qwen2_5_vl"
    columns = [(args.model, "tiny Qwen2.5-VL" if tiny else "this model"), *((m, m) for m in models[1:])]
    lines = table(runs, columns)
    missing = [m for m in models if m not in runs]
    if missing or done.returncode != 0 or len(lines) <= 2 or any("no result" in line for line in lines[2:]):
        # the cause and the fix come first; no success text, and a table only when it has rows
        text = log_path.read_text(encoding="utf-8", errors="replace")
        from lmms_eval_plugins.tested_versions import KNOWN_BAD

        fixes = fixes_for_log(text, installed_versions({kb.package for kb in KNOWN_BAD}), KNOWN_BAD)
        sys.stdout.flush()
        print(
            "\n".join(failure_report(missing, done.returncode, log_excerpt(text), fixes, log_path)),
            file=sys.stderr,
            flush=True,
        )
        if len(lines) > 2:
            print("\n".join(["", "partial results:", *lines]), flush=True)
        return 1
    print("\n".join(lines))
    legend = metric_legend(lines)
    if legend:
        print(legend)
    note = judge_note(table_judges(lines))
    if note:
        print(note)
    print(
        f"\n{time.monotonic() - started:.0f} s. Percent, headline metric per task. oracle: {ROW_NOTE['oracle']}; "
        f"random: {ROW_NOTE['random']}."
        if not args.no_baselines
        else ""
    )
    if tiny:
        print(
            "The tiny Qwen2.5-VL has random weights: its replies are noise, so it scores near the random row "
            "(often lower: noise is mostly unparseable, and unparseable counts as wrong). Real weights: see the README."
        )
    print(f"Results under {output}; the full lmms-eval log is {log_path}.")
    return 0
