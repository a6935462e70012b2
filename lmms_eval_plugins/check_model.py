"""``lmms-eval-plugins check-model``: run every ``*_sample`` task with a model and report what breaks.

For a model team before a real run: does the model class complete each benchmark's requests, can the
task's parser read its replies (format compliance), what does a typical unreadable reply look like,
and what shape of request (images, videos, frames, interleaving) does each task send?

How each column is computed:

- **completed**: the task has an entry in lmms-eval's results JSON (lmms-eval exits 0 even when a
  task fails) and none of its model requests failed. All tasks run in one lmms-eval process (the
  model loads once); if some have no results, each of those is run again alone, so one crashing task
  cannot hide the others, and the last exception line of its log is reported. lmms-eval's API
  classes do not raise on a failed request: they reply ``[LMMS_EVAL_REQUEST_FAILED after N retries]
  <error>`` (or ``[LMMS_EVAL_BUDGET_EXCEEDED]``); such a reply in a logged sample
  (:func:`lmms_eval_plugins.outcome.request_failure`) makes the task not completed ("N of M model
  requests failed: <first error>"), and it is left out of the format compliance.
- **format compliance**: from the logged samples (``--log_samples``): the share of requests whose
  reply the task could read. Our tasks log a per-request item with ``parse_error`` (None when the
  reply was read); ViRectify logs ``format_ok`` and the ``missing`` parts of its tagged format; for
  free-form judged answers (CrossVid CCQA) a reply counts when the judge found something to judge in it (not ``judge.skipped``).
  A task that logs none of these falls back to its ``*_parse_fail`` metric over the number of requests.
- **typical failure**: the most common ``parse_error`` (its count) with one raw reply that caused it.
- **request shapes**: computed in this process, not from the model: the task's YAML is loaded with
  lmms-eval's own loader (``lmms_eval.utils.load_yaml_config``), its ``process_docs`` is run on its
  source file and its ``doc_to_messages`` is called on the same docs lmms-eval sends (the first
  ``--limit``). Chat model classes receive exactly these messages; simple classes get
  ``doc_to_visual`` and ``doc_to_text`` of the same docs (same media, the text with ``<image>``
  placeholders). Known pitfalls of lmms-eval's built-in classes are flagged: frames of one video with
  different sizes, an empty frame list, and a later video with fewer frames than the first
  (``qwen2_5_vl`` probes only the first video).
- **sent (observed)**: what the model class actually sent, for API classes only (``--model openai``,
  ``async_openai``, and any class given ``base_url=``): a loopback recording proxy
  (:mod:`lmms_eval_plugins.recording_proxy`) sits in front of the endpoint for the length of the
  check (the ``base_url=`` model arg is rewritten to it; without one, the ``OPENAI_API_BASE`` the
  class falls back to), forwards every request and reply unchanged, and keeps a summary of each
  chat-completions body (never headers, so never the API key). Reported: requests, ``image_url``
  items per request, frames per video (runs of consecutive ``image_url`` items between text parts),
  image sizes as received; each body is matched to its doc by its text parts and compared with what
  the doc intended (frame counts, padding, resizing). Local classes: "not observable" (no guessing).

Output: a Markdown table on stdout, details below it, ``--json OUT`` for machines. Exit code 0 only
if every task completed.

This module runs the check and renders it; the columns are computed in ``check_model_tasks`` (task
selection, request shapes), ``check_model_observed`` (what was sent) and ``check_model_compliance``
(completed, format compliance, typical failure).

    lmms-eval-plugins check-model --model qwen2_5_vl --model_args pretrained=Qwen/Qwen2.5-VL-7B-Instruct
    lmms-eval-plugins check-model --model my_model --tasks errorradar,crossvid_bu_sample --limit 4 --json report.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lmms_eval_plugins.check_model_compliance import (
    TaskReport,
    _short,
    compliance_from_metrics,
    compliance_from_samples,
    failed_reply,
    last_exception,
)
from lmms_eval_plugins.check_model_observed import (
    ObservePlan,
    attribute_records,
    display_model_args,
    lmms_eval_dotenv,
    observe_plan,
    observed_summary,
    replace_model_arg,
)
from lmms_eval_plugins.check_model_tasks import request_shapes, select_tasks, task_index
from lmms_eval_plugins.console import emit
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.runs import task_metrics
from lmms_eval_plugins.safe_files import write_atomic
from lmms_eval_plugins.safe_text import (
    Redactor,
    credential_values,
    md_code,
    md_for_terminal,
    md_text,
    redact_url,
)

# ------------------------------------------------------------------------------------------------ running


def _metrics(results: Mapping[str, Any], task: str) -> dict[str, Any]:
    """The task's metrics as every other command reads them (:func:`runs.task_metrics`: the ``none``
    filter preferred, no stderr companions)."""
    raw = (results.get("results") or {}).get(task)
    return task_metrics(raw) if isinstance(raw, Mapping) else {}


def _headline(metrics: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def run_tasks(
    tasks: Sequence[str],
    *,
    model: str,
    model_args: str | None,
    output_dir: Path,
    limit: int | None,
    extra_args: Sequence[str],
    env: Mapping[str, str],
    timeout: float,
):
    from lmms_eval_plugins.cli_run import run_lmms_eval

    args = list(extra_args)
    if limit is not None:
        args += ["--limit", str(limit)]
    return run_lmms_eval(
        tasks=list(tasks),
        model=model,
        model_args=model_args,
        output_dir=output_dir,
        env=env,
        extra_args=args,
        timeout=timeout,
    )


def check_model(
    *,
    model: str,
    model_args: str | None,
    tasks: Sequence[str],
    limit: int | None = None,
    output_dir: Path,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 3600,
    retry_missing: bool = True,
    shapes: bool = True,
    observe: bool = True,
) -> list[TaskReport]:
    """Run ``tasks`` with the model and build one :class:`TaskReport` per task.

    ``observe``: for API model classes, record what the class sends through a loopback proxy in front
    of its endpoint (:mod:`lmms_eval_plugins.recording_proxy`); the proxy stops before this returns.
    """
    import os

    from lmms_eval_plugins.recording_proxy import RecordingProxy, sanitise_url

    index = task_index()
    env = dict(env or {})
    plan = (
        observe_plan(model, model_args, {**lmms_eval_dotenv(), **os.environ, **env})
        if observe
        else ObservePlan(reason="not observed (--no-observe)")
    )
    proxy = RecordingProxy(plan.upstream, trust_env=plan.trust_env) if plan.upstream else None
    run_args, run_env = model_args, dict(env)
    runs: dict[str, Any] = {}
    labels: dict[str, str] = {}
    try:
        if proxy is not None:
            proxy.start()
            if plan.via == "base_url":
                run_args = replace_model_arg(model_args, "base_url", proxy.base_url)
            else:
                run_env["OPENAI_API_BASE"] = proxy.base_url
            no_proxy = ",".join(
                v for v in (os.environ.get("NO_PROXY") or os.environ.get("no_proxy"), "127.0.0.1", "localhost") if v
            )
            run_env.update({"NO_PROXY": no_proxy, "no_proxy": no_proxy})  # the class reaches the proxy directly

        def run(names: Sequence[str], label: str):
            if proxy is not None:
                proxy.label = label
            return run_tasks(
                names,
                model=model,
                model_args=run_args,
                output_dir=output_dir / label,
                limit=limit,
                extra_args=extra_args,
                env=run_env,
                timeout=timeout,
            )

        first = run(tasks, "all")
        runs = {task: first for task in tasks}
        labels = {task: "all" for task in tasks}
        missing = [t for t in tasks if t not in first.results.get("results", {})]
        if retry_missing and missing and len(tasks) > 1:
            for task in missing:  # alone, so one crashing task cannot hide the others
                runs[task], labels[task] = run([task], task), task
    finally:
        if proxy is not None:
            proxy.stop()

    shape_list = (
        {task: request_shapes(index[task], limit, model) for task in tasks} if shapes or proxy is not None else {}
    )
    observed: dict[str, dict[str, Any]] = {}
    if proxy is not None:
        endpoint = sanitise_url(plan.upstream or "")
        for label in sorted(set(labels.values())):
            in_run = [t for t in tasks if labels[t] == label]
            by_task = attribute_records(proxy.records_for(label), {t: shape_list[t].intents for t in in_run})
            for task in in_run:
                observed[task] = observed_summary(by_task[task], shape_list[task].intents, endpoint=endpoint)
            if by_task[None]:
                for task in in_run:  # bodies that matched no task of a run are shown with each task of that run
                    observed[task]["differences"].append(
                        f"{len(by_task[None])} request(s) in this lmms-eval run matched no doc of any task"
                    )
    reports = []
    for task in tasks:
        entry = index[task]
        task_run = runs[task]
        completed = task in task_run.results.get("results", {})
        report = TaskReport(task, entry.benchmark, completed)
        if not completed:
            report.error = last_exception(task_run.output) or (
                "lmms-eval wrote no results file" if task_run.results_path is None else "no results for this task"
            )
        else:
            report.metrics = _headline(_metrics(task_run.results, task))
            n_requests = int((task_run.results.get("n-samples", {}).get(task) or {}).get("effective", 0))
            metric_names = list(_metrics(task_run.results, task))
            stats = None
            samples: list[dict[str, Any]] | None = None
            try:
                samples = task_run.samples(task)
                stats = compliance_from_samples(samples, metric_names)
            except (FileNotFoundError, AssertionError, DataError, json.JSONDecodeError):  # none logged, or malformed
                pass
            if samples is not None:
                failures = [f for f in map(failed_reply, samples) if f]
                report.failed_requests, total = len(failures), len(samples)
                first_failure = failures[0] if failures else ""
            else:  # no logged samples: the tasks' ``unscored`` metric counts the failed requests
                unscored = report.metrics.get("unscored")
                report.failed_requests = int(unscored) if isinstance(unscored, (int, float)) else 0
                total, first_failure = n_requests, "(from the unscored metric; no logged samples to show the error)"
            if stats is None:
                stats = compliance_from_metrics(report.metrics, n_requests - report.failed_requests)
            report.requests = stats["requests"] + report.failed_requests if stats else n_requests
            if stats:
                report.parsed, report.compliance = stats["parsed"], stats["compliance"]
                report.failures = stats.get("failures", {})
                report.typical_failure = stats.get("typical_failure")
                report.compliance_source = stats["source"]
            if report.failed_requests:  # lmms-eval finished, but the model never answered these
                report.completed = False
                report.error = (
                    f"{report.failed_requests} of {total} model requests failed: {_short(first_failure, 300)}"
                )
        if shapes:
            report.shapes = shape_list[task].summary()
        report.observed = observed.get(task) or {"observable": False, "reason": plan.reason or "not observed"}
        reports.append(report)
    return reports


# ------------------------------------------------------------------------------------------------ output


def _cell(text: Any) -> str:
    return md_text(text)  # task names, errors and replies are untrusted: no raw HTML in the Markdown


def _observed_cell(observed: Mapping[str, Any]) -> str:
    if not observed.get("observable"):
        return "not observable"
    sizes = list(observed.get("image_sizes") or {})
    text = (
        f"{observed['requests']} req, images/req {observed['images_per_request']}, frames/video "
        f"{observed['frames_per_video']}, sizes {', '.join(sizes[:3]) or '-'}{', ...' if len(sizes) > 3 else ''}"
    )
    return text + ("; **differs** (notes)" if observed.get("differences") else "")


def secrets_of(model_args: str | None) -> Redactor:
    """Replaces the credentials given in ``--model_args`` (in every encoded form) wherever the model class or
    its server echoed them: error lines, replies, observed endpoints."""
    return Redactor(credential_values(model_args or ""))


def markdown(reports: Sequence[TaskReport], *, model: str, model_args: str | None) -> str:
    return secrets_of(model_args)(_markdown(reports, model=model, model_args=model_args))


def _markdown(reports: Sequence[TaskReport], *, model: str, model_args: str | None) -> str:
    shown_args = display_model_args(model_args)
    lines = [
        f"## check-model: {md_code(model)}" + (f" ({md_code(shown_args)})" if shown_args else ""),
        "",
        "| task | completed | format compliance | typical failure (count): example output | requests | images/req | videos/req | frames/video | frames/req | interleaved | sent (observed) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        s = r.shapes or {}
        answered = r.requests - r.failed_requests
        compliance = "n/a" if r.compliance is None else f"{r.compliance:.1f}% ({r.parsed}/{answered})"
        if not r.completed:
            failure = f"**{'requests failed' if r.failed_requests else 'run failed'}**: {_cell(r.error)}"
        elif r.typical_failure:
            t = r.typical_failure
            failure = f"{_cell(t['parse_error'])} ({t['count']}): {md_code(t['example_output'])}"
        else:
            failure = "-"
        interleaved = f"{s.get('interleaved_requests', 0)}/{s.get('requests', 0)}" if s else ""
        lines.append(
            f"| {_cell(r.task)} | {'yes' if r.completed else '**NO**'} | {compliance} | {failure} | {r.requests} | "
            f"{s.get('images', '')} | {s.get('videos', '')} | {s.get('frames_per_video', '')} | "
            f"{s.get('frames_per_request', '')} | {interleaved} | {_cell(_observed_cell(r.observed or {}))} |"
        )
    notes = []
    for r in reports:
        s = r.shapes or {}
        if s.get("error"):
            notes.append(f"- {_cell(r.task)}: request shapes not computed: {_cell(s['error'])}")
        for issue in s.get("issues", []):
            notes.append(f"- {_cell(r.task)}: {_cell(issue)}")
        if s.get("video_files"):
            notes.append(
                f"- {_cell(r.task)}: {s['video_files']} video(s) sent as file paths (the model class decodes them)"
            )
        for difference in (r.observed or {}).get("differences", []):
            notes.append(f"- {_cell(r.task)}: sent differs from intended: {_cell(difference)}")
    observed = [r.observed for r in reports if (r.observed or {}).get("observable")]
    if observed:
        sent = (
            f"Sent: what the model class sent to {_cell(redact_url(str(observed[0]['endpoint'])))}, recorded by a loopback proxy "
            "(image_url items per request, runs of consecutive images between text parts per video, image sizes as received)."
        )
    else:
        reason = next((r.observed.get("reason") for r in reports if r.observed), "") or "not observable"
        sent = f"Sent: {_cell(reason)}."
    done = sum(r.completed for r in reports)
    lines += [
        "",
        f"{done}/{len(reports)} tasks completed (a task with a failed model request is not). Compliance: share "
        "of answered requests whose reply the task's parser could read (unreadable replies are scored wrong). Shapes: "
        'from the task\'s doc_to_messages on the same docs; frames are PIL images in `{"type": "video", "url": [...]}`. '
        + sent,
    ]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lmms-eval-plugins check-model",
        description="Run every *_sample task of lmms-eval-plugins with a model and report, per task, whether it completed, "
        "the share of replies the task's parser could read, the typical unreadable reply, and the request shapes.",
    )
    parser.add_argument(
        "--model",
        required=True,
        help="lmms-eval model name (built-in, or registered via the lmms_eval.models entry point)",
    )
    parser.add_argument(
        "--model_args", default=None, help="as for lmms-eval, e.g. pretrained=...,device=cpu,device_map=cpu"
    )
    parser.add_argument(
        "--tasks",
        default=None,
        help="comma-separated sample tasks, sample groups or benchmark names (default: every *_sample task)",
    )
    parser.add_argument("--limit", type=int, default=None, help="at most this many docs per task")
    parser.add_argument("--json", dest="json_out", default=None, metavar="OUT", help="also write the report as JSON")
    parser.add_argument(
        "--output_path", default=None, help="where lmms-eval writes its results (default: a temporary folder)"
    )
    parser.add_argument("--gen_kwargs", default=None, help="passed to lmms-eval, e.g. max_new_tokens=256")
    parser.add_argument(
        "--judge",
        choices=("offline", "llm"),
        default="offline",
        help="judge for judged tasks: offline (default, no endpoint needed) or llm (needs OPENAI_* settings)",
    )
    parser.add_argument("--no-shapes", action="store_true", help="skip computing request shapes")
    parser.add_argument(
        "--no-observe",
        action="store_true",
        help="do not put the recording proxy in front of an API model class's endpoint",
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per lmms-eval run")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    tasks = select_tasks(args.tasks, task_index())
    extra = ["--gen_kwargs", args.gen_kwargs] if args.gen_kwargs else []
    env = {"LMMS_EVAL_PLUGINS_JUDGE": args.judge}  # "offline" or "llm", both understood by the judges
    emit(f"check-model: {len(tasks)} task(s) with --model {args.model}: {', '.join(tasks)}", file=sys.stderr)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="check-model-") as tmp:
        output_dir = Path(args.output_path) if args.output_path else Path(tmp)
        reports = check_model(
            model=args.model,
            model_args=args.model_args,
            tasks=tasks,
            limit=args.limit,
            output_dir=output_dir,
            extra_args=extra,
            env=env,
            timeout=args.timeout,
            shapes=not args.no_shapes,
            observe=not args.no_observe,
        )
    emit(md_for_terminal(markdown(reports, model=args.model, model_args=args.model_args)))  # no &lt; on a terminal
    ok = all(r.completed for r in reports)
    if args.json_out:
        payload = {
            "model": args.model,
            "model_args": display_model_args(args.model_args),
            "limit": args.limit,
            "all_completed": ok,
            "seconds": round(time.perf_counter() - start, 1),
            "tasks": [asdict(r) for r in reports],
        }
        text = secrets_of(args.model_args)(json.dumps(payload, indent=2, default=str))
        write_atomic(Path(args.json_out), text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
