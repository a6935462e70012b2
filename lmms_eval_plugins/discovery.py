"""Make our tasks and models visible to a plain ``lmms-eval --tasks ...`` run.

lmms-eval 0.7.3 reads task folders only from its own ``tasks/`` and ``--include_path``; the
``LMMS_EVAL_PLUGINS`` variable is applied after the task index is built (see
docs/upstream/README.md). It does, however, load the ``lmms_eval.models`` entry-point group when
``lmms_eval.models`` is first imported, which happens before any ``TaskManager`` exists. Our entry
point (:func:`register`) therefore returns our model manifests and, as a side effect, appends our
task folder to every ``TaskManager``'s search path. lmms-eval indexes its own folder first and keeps
the first definition of a name, so a built-in task wins a name clash.

Set ``LMMS_EVAL_PLUGINS_NO_TASK_HOOK=1`` to switch the hook off (then use ``--include_path``).

Our breakdowns (by question type, confusion matrices, prediction distributions) are dict-valued
metrics: complete in the results JSON, but one such value widens every row of lmms-eval's console
table. The same entry point therefore wraps ``lmms_eval.utils.make_table`` (bound by lmms-eval's
``__main__`` only after the model registry loads) so the console shows ``{6 entries, see results
JSON}`` for a dict or list value. Only the display changes; ``LMMS_EVAL_PLUGINS_FULL_TABLE=1`` turns
this off.

It also installs :mod:`lmms_eval_plugins.lmms_eval_fixes` (frames sent by the API chat classes).
"""

from __future__ import annotations

import atexit
import copy
import functools
import json
import logging
import os
from pathlib import Path
from typing import Any

_PATCH_MARK = "_lmms_eval_plugins_patched"


def _model_manifests() -> list[Any]:
    from lmms_eval.models.registry_v2 import ModelManifest

    return [
        ModelManifest(model_id="oracle", simple_class_path="lmms_eval_plugins.models.oracle.Oracle",
                      chat_class_path="lmms_eval_plugins.models.oracle.OracleChat"),
        ModelManifest(model_id="random", simple_class_path="lmms_eval_plugins.models.random_baseline.RandomChoice",
                      chat_class_path="lmms_eval_plugins.models.random_baseline.RandomChoiceChat"),
        ModelManifest(model_id="replay", simple_class_path="lmms_eval_plugins.models.replay.Replay",
                      chat_class_path="lmms_eval_plugins.models.replay.ReplayChat"),
    ]


def plugin_task_dirs() -> list[str]:
    """Our task folder, then the task folder of every other installed benchmark that lies outside it
    (packages registered in the ``lmms_eval_plugins.benchmarks`` entry-point group)."""
    from lmms_eval_plugins import tasks_dir
    from lmms_eval_plugins.benchmark import ordered_benchmarks

    ours = tasks_dir()
    dirs = [str(ours)]
    for spec in ordered_benchmarks():
        folder = Path(spec.tasks_dir).resolve()
        if folder.is_dir() and ours not in folder.parents and folder != ours and str(folder) not in dirs:
            dirs.append(str(folder))
    return dirs


def with_plugin_tasks(include_path: str | list[str] | None) -> list[str]:
    """Return ``include_path`` as a list with the installed benchmarks' task folders appended (once)."""
    if include_path is None:
        paths: list[str] = []
    elif isinstance(include_path, str):
        paths = [include_path]
    else:
        paths = list(include_path)
    for folder in plugin_task_dirs():
        if not any(os.path.realpath(p) == os.path.realpath(folder) for p in paths):
            paths.append(folder)
    return paths


def install_task_hook() -> bool:
    """Patch ``TaskManager.initialize_tasks`` so our folder is always indexed. Idempotent."""
    if not _enabled("LMMS_EVAL_PLUGINS_NO_TASK_HOOK"):
        return False
    from lmms_eval.tasks import TaskManager

    original = TaskManager.initialize_tasks
    if getattr(original, _PATCH_MARK, False):
        return True

    def initialize_tasks(self, include_path=None, include_defaults=True):
        install_late_hooks()
        return original(self, include_path=with_plugin_tasks(include_path), include_defaults=include_defaults)

    setattr(initialize_tasks, _PATCH_MARK, True)
    initialize_tasks.__wrapped__ = original  # type: ignore[attr-defined]
    TaskManager.initialize_tasks = initialize_tasks
    return True


def _enabled(switch: str) -> bool:
    return os.environ.get(switch, "") in ("", "0")


def compact_container_values(result_dict: dict[str, Any]) -> dict[str, Any]:
    """A copy of lmms-eval's results dict with dict/list metric values shortened for display."""
    compact = copy.deepcopy(result_dict)
    for column in ("results", "groups"):
        for metrics in compact.get(column, {}).values():
            for key, value in list(metrics.items()):
                if isinstance(value, (dict, list)) and value:
                    metrics[key] = f"{{{len(value)} entries, see results JSON}}"
    return compact


def unscored_counts(result_dict: dict[str, Any]) -> dict[str, int]:
    """Tasks of an lmms-eval results dict with unscored samples: task -> count (filters summed)."""
    counts: dict[str, int] = {}
    groups = {name for name, members in (result_dict.get("group_subtasks") or {}).items() if members}
    for task, metrics in (result_dict.get("results") or {}).items():
        if not isinstance(metrics, dict):
            continue
        n = sum(v for k, v in metrics.items() if k.split(",")[0] == "unscored" and isinstance(v, int) and not isinstance(v, bool))
        if n and task not in groups:
            counts[task] = n
    return counts


def unscored_block(result_dict: dict[str, Any], argv: list[str]) -> str:
    """The error block that ends a run with unscored samples ('' when there are none)."""
    counts = unscored_counts(result_dict)
    if not counts:
        return ""
    total = sum(counts.values())
    from lmms_eval_plugins.judges.runtime import lmms_eval_output_path

    output_path = (lmms_eval_output_path(argv) or "OUTPUT_PATH").rstrip("/")
    kept = "--log_samples" in argv or "--predict_only" in argv
    bar = "=" * 100
    lines = [bar, f"lmms-eval-plugins: {total} sample(s) are UNSCORED; their metrics are null (never counted as wrong):"]
    lines += [f"  {task}: {n}" for task, n in sorted(counts.items())]
    lines.append("The reason is in each logged sample (`unscored`). Judge failures and --predict_only runs are finished, "
                 "without the model, by:")
    lines.append(f"    lmms-eval-plugins score {output_path}" if kept else
                 "    (none here: this run did not log samples; pass --log_samples so `lmms-eval-plugins score` can finish them)")
    lines.append("Failed model requests need the model: run the same command again (with --use_cache DIR only they are asked again).")
    lines.append(bar)
    return "\n" + "\n".join(lines)


_final_block: list[str] = []  # the unscored block of this process's last results table


def install_table_hook() -> bool:
    """Wrap lmms-eval's ``make_table``: shorten dict metrics, and end the run's output with the
    unscored-samples block. Only the display changes."""
    import sys

    import lmms_eval.utils as lmms_utils

    original = lmms_utils.make_table
    if getattr(original, _PATCH_MARK, False):
        return True
    compact = _enabled("LMMS_EVAL_PLUGINS_FULL_TABLE")

    def make_table(result_dict, column: str = "results", sort_results: bool = False):
        table = original(compact_container_values(result_dict) if compact else result_dict, column, sort_results)
        if column == "results":
            # printed when the process exits, so it is the last thing on the console, after every table
            block = unscored_block(result_dict, sys.argv)
            if block and not _final_block:
                atexit.register(lambda: _final_block and print(_final_block[0], flush=True))
            _final_block[:] = [block] if block else []
        return table

    setattr(make_table, _PATCH_MARK, True)
    make_table.__wrapped__ = original  # type: ignore[attr-defined]
    lmms_utils.make_table = make_table
    return True


def _print_last(block: str) -> None:
    import sys

    sys.stderr.flush()
    print(block, flush=True)


def install_predict_only_hook() -> bool:
    """Under ``--predict_only`` our judge filters make no calls (``lmms-eval-plugins score`` judges later);
    a plugin error that stops the evaluation ends the output with a short block (``run_status``).

    lmms-eval keeps filters in that mode but builds them inside ``simple_evaluate``, which is the
    first place that knows the flag; we note it there for the judge runtime.
    """
    import lmms_eval.evaluator as evaluator

    original = evaluator.simple_evaluate
    if getattr(original, _PATCH_MARK, False):
        return True

    @functools.wraps(original)
    def simple_evaluate(*args, **kwargs):
        import sys

        from lmms_eval_plugins import run_status
        from lmms_eval_plugins.judges.runtime import lmms_eval_output_path, set_judging_deferred

        set_judging_deferred(bool(kwargs.get("predict_only")))
        output_path = lmms_eval_output_path(sys.argv)
        try:
            result = original(*args, **kwargs)
        except Exception as exc:
            error = run_status.plugin_error_in(exc)
            if error is None:
                raise
            run_status.record_failure(output_path, error)
            block = run_status.stopped_block(error, output_path)
            atexit.register(_print_last, block)
            # lmms-eval prints the traceback of what reaches it: ours alone, not tenacity's RetryError chain
            raise error.with_traceback(None) from None
        run_status.clear_failure(output_path)
        return result

    setattr(simple_evaluate, _PATCH_MARK, True)
    evaluator.simple_evaluate = simple_evaluate
    return True


RESULTS_KEY = "lmms_eval_plugins_judges"


def install_results_hook() -> bool:
    """Keep the software versions (``lmms_eval_plugins_versions``) and each run's judge accounting with its
    results: in the results JSON (``lmms_eval_plugins_judges``)
    and as ``judge_report_<run date>.json`` beside it (the live ``judge_report.json`` is overwritten by
    the next run)."""
    from lmms_eval.loggers.evaluation_tracker import EvaluationTracker

    original = EvaluationTracker.save_results_aggregated
    if getattr(original, _PATCH_MARK, False):
        return True

    @functools.wraps(original)
    def save_results_aggregated(self, results=None, samples=None, datetime_str=None, *args, **kwargs):
        from lmms_eval_plugins import provenance
        from lmms_eval_plugins.judges.runtime import accounting_reports

        if isinstance(results, dict):
            results[provenance.RESULTS_KEY] = provenance.software_versions()
        reports = accounting_reports()
        if reports and isinstance(results, dict):
            results[RESULTS_KEY] = reports
            try:
                folder = Path(self.output_path or Path.cwd()) / self.general_config_tracker.model_name_sanitized
                folder.mkdir(parents=True, exist_ok=True)
                for i, report in enumerate(reports):
                    suffix = f".{i}" if i else ""
                    (folder / f"judge_report_{datetime_str}{suffix}.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
            except (OSError, AttributeError, TypeError) as exc:  # the results themselves must still be saved
                logging.getLogger(__name__).warning(f"judge accounting not written beside the results: {exc}")
        return original(self, results, samples, datetime_str, *args, **kwargs)

    setattr(save_results_aggregated, _PATCH_MARK, True)
    EvaluationTracker.save_results_aggregated = save_results_aggregated
    return True


def register() -> list[Any]:
    """Entry point of the ``lmms_eval.models`` group: our models, plus the task-folder and table hooks."""
    install_task_hook()
    install_table_hook()
    from lmms_eval_plugins import lmms_eval_fixes

    lmms_eval_fixes.install()
    return _model_manifests()


def install_late_hooks() -> None:
    """Hooks on modules that import ``lmms_eval.models`` themselves: installing them from ``register``
    (which runs while ``lmms_eval.models`` is being imported) would be a circular import, so the task
    hook installs them when the first ``TaskManager`` is built, before any evaluation starts."""
    from lmms_eval_plugins.errorbars import install_stderr_hook
    from lmms_eval_plugins.lmms_eval_fixes import install_model_hook

    install_model_hook()
    install_predict_only_hook()
    install_results_hook()
    install_stderr_hook()
    rebind_table_hook()


def rebind_table_hook() -> None:
    """``lmms_eval.evaluator`` and lmms-eval's ``__main__`` imported ``make_table`` by name before our
    entry point ran: point those names at the wrapped function too."""
    import sys

    import lmms_eval.utils as lmms_utils

    wrapped = lmms_utils.make_table
    original = getattr(wrapped, "__wrapped__", None)
    if original is None:
        return
    for name in ("lmms_eval.evaluator", "lmms_eval.__main__", "__main__"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "make_table", None) is original:
            module.make_table = wrapped
