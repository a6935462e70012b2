"""Hooks around an lmms-eval run (entries ``task-folders``, ``console-table``, ``evaluate-hook``,
``results-hook`` and ``error-bars`` of :data:`lmms_eval_plugins.compat.ENTRIES`).

Each installer is idempotent and is called by :func:`lmms_eval_plugins.compat.install` only after the
entry's check passed; each wrapper carries ``compat.MARK`` and ``__wrapped__`` (the original).

- ``task-folders``: lmms-eval 0.7.3 reads task folders only from its own ``tasks/`` and
  ``--include_path`` (docs/upstream/README.md), so every ``TaskManager`` gets our folders appended. It
  indexes its own folder first and keeps the first definition of a name: a built-in task wins a name
  clash. ``LMMS_EVAL_PLUGINS_NO_TASK_HOOK=1`` stops the appending (then use ``--include_path``).
  Building a ``TaskManager`` also installs the TASKS-phase entries (their modules import
  ``lmms_eval.models``, which is still being imported when our entry point runs) and rebinds the
  console table's name in the modules that imported it before we wrapped it.
- ``console-table``: our breakdowns are dict-valued metrics, complete in the results JSON; in the
  console they show as ``{6 entries, see results JSON}`` (``LMMS_EVAL_PLUGINS_FULL_TABLE=1``: in
  full); count and breakdown rows show no stderr; and a run with unscored samples ends with the judge
  failures by cause and host and the command that finishes them.
- ``evaluate-hook``: notes ``--predict_only`` for the judge runtime and ends a run stopped by a
  plugin error with a short block (``run_status``).
- ``results-hook``: software versions, the run's options, its 95% intervals and judge accounting go into the results JSON.
- ``error-bars``: ``<metric>_stderr`` of our tasks and their 95% intervals (:func:`lmms_eval_plugins.errorbars.fill_stderrs`).
- ``samples-writer``: our tasks' samples lines hold each per-sample item once (issue 41).
- ``clt-columns``: lmms-eval's ``_stderr_clt``/``_stderr_clustered`` of our tasks in each metric's units
  (:func:`lmms_eval_plugins.errorbars.fix_clt_columns`).
- ``task-names``: a requested task lmms-eval does not know gets one "did you mean" line after lmms-eval's
  own "Tasks not found" error, and the failure is recorded for ``check-run``.
"""

from __future__ import annotations

import atexit
import functools
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from lmms_eval_plugins.compat import MARK
from lmms_eval_plugins.safe_files import write_atomic

RESULTS_KEY = "lmms_eval_plugins_judges"
OPTIONS_KEY = "lmms_eval_plugins_options"  # the run's options as it decided them (run_state.RunState.options)
TASK_HOOK_OFF_ENV = "LMMS_EVAL_PLUGINS_NO_TASK_HOOK"
FULL_TABLE_ENV = "LMMS_EVAL_PLUGINS_FULL_TABLE"


def _switched_on(switch: str) -> bool:
    return os.environ.get(switch, "") not in ("", "0")


def _mark(wrapper: Any, original: Any) -> Any:
    setattr(wrapper, MARK, True)
    wrapper.__wrapped__ = original
    return wrapper


def install_task_hook() -> bool:
    """Patch ``TaskManager.initialize_tasks`` so the installed benchmarks' folders are always indexed
    (unless switched off when the manager is built; the TASKS-phase entries install either way)."""
    from lmms_eval.tasks import TaskManager

    original = TaskManager.initialize_tasks
    if getattr(original, MARK, False):
        return True

    def initialize_tasks(self, include_path=None, include_defaults=True):
        from lmms_eval_plugins import compat
        from lmms_eval_plugins.discovery import with_plugin_tasks

        compat.install_all(compat.TASKS)
        rebind_table_hook()
        if not _switched_on(TASK_HOOK_OFF_ENV):
            include_path = with_plugin_tasks(include_path)
        return original(self, include_path=include_path, include_defaults=include_defaults)

    TaskManager.initialize_tasks = _mark(initialize_tasks, original)
    return True


_final_block: list[str] = []  # the unscored block of this process's last results table


def install_table_hook() -> bool:
    """Wrap lmms-eval's ``make_table``: shorten dict metrics, and end the run's output with the
    unscored-samples block. Only the display changes."""
    import lmms_eval.utils as lmms_utils

    from lmms_eval_plugins.console import display_values, unscored_block

    original = lmms_utils.make_table
    if getattr(original, MARK, False):
        return True
    compact = not _switched_on(FULL_TABLE_ENV)

    def make_table(result_dict, column: str = "results", sort_results: bool = False):
        table = original(display_values(result_dict, compact), column, sort_results)
        if column == "results":
            # printed when the process exits, so it is the last thing on the console, after every table
            block = unscored_block(result_dict, sys.argv)
            if block and not _final_block:
                atexit.register(lambda: _final_block and print(_final_block[0], flush=True))
            _final_block[:] = [block] if block else []
        return table

    lmms_utils.make_table = _mark(make_table, original)
    return True


def rebind_table_hook() -> None:
    """``lmms_eval.evaluator`` and lmms-eval's ``__main__`` imported ``make_table`` by name before our
    entry point ran: point those names at the wrapped function too."""
    import lmms_eval.utils as lmms_utils

    wrapped = lmms_utils.make_table
    original = getattr(wrapped, "__wrapped__", None) if getattr(wrapped, MARK, False) else None
    if original is None:
        return
    for name in ("lmms_eval.evaluator", "lmms_eval.__main__", "__main__"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "make_table", None) is original:
            module.make_table = wrapped


def _print_last(block: str) -> None:
    sys.stderr.flush()
    print(block, flush=True)


def install_evaluate_hook() -> bool:
    """Under ``--predict_only`` our judge filters make no calls (``lmms-eval-plugins score`` judges later);
    a plugin error that stops the evaluation ends the output with a short block (``run_status``).

    lmms-eval keeps filters in that mode but builds them inside ``simple_evaluate``, which is the
    first place that knows the flag; we note it there for the judge runtime.
    """
    import lmms_eval.evaluator as evaluator

    original = evaluator.simple_evaluate
    if getattr(original, MARK, False):
        return True

    @functools.wraps(original)
    def simple_evaluate(*args, **kwargs):
        from lmms_eval_plugins import run_state, run_status
        from lmms_eval_plugins.judges.accounting import lmms_eval_output_path
        from lmms_eval_plugins.judges.session import begin_run

        output_path = lmms_eval_output_path(sys.argv)  # the one read of the command line (compat layer)
        begin_run(deferred=bool(kwargs.get("predict_only")), output_path=output_path)  # this run's judging state
        # this run's other state: its options, decided once from its configuration, and media that failed to decode
        run_state.begin_run(strict=run_state.strict_from_run_config(kwargs.get("model_args")))
        tasks = _task_names(kwargs.get("tasks"))
        previous = _stop_on_ctrl_c(output_path) if _lmms_eval_command() else None
        try:
            unusable = run_status.output_path_error(output_path)  # known now, before the model loads
            if unusable is not None:
                raise unusable
            _check_tasks_before_the_model_loads(tasks)
            result = original(*args, **kwargs)
        except KeyboardInterrupt:
            # a program calling simple_evaluate: one block instead of a 100-line torch traceback; 130: the
            # shell's code for a Ctrl-C stop
            print(run_status.interrupted_block(output_path, sys.argv), file=sys.stderr, flush=True)
            raise SystemExit(130) from None
        except Exception as exc:
            error = run_status.plugin_error_in(exc) or _model_args_error(
                exc, kwargs.get("model"), kwargs.get("model_args")
            )
            if error is None:
                raise
            run_status.record_failure(output_path, error)
            block = run_status.stopped_block(error, output_path, tasks)
            atexit.register(_print_last, block)
            # lmms-eval prints the traceback of what reaches it: ours alone, not tenacity's RetryError chain
            raise error.with_traceback(None) from None
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        run_status.clear_failure(output_path)
        return result

    evaluator.simple_evaluate = _mark(simple_evaluate, original)
    return True


def _stop_on_ctrl_c(output_path: str | None) -> Any:
    """The ``lmms-eval`` command ends at a Ctrl-C, at once, with one block (exit status 130). A handler of our
    own, not KeyboardInterrupt: inside the judge's event loop asyncio turns SIGINT into a cancellation that waits
    for every call in flight, and interpreter exit joins threads still waiting on a judge or the model; the run
    hung until they answered. Verdicts already received are committed in the judge cache. Returns the handler
    it replaced (None off the main thread, where no handler can be set)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum: int, frame: Any) -> None:
        from lmms_eval_plugins import run_status

        print(run_status.interrupted_block(output_path, sys.argv), file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(130)

    return signal.signal(signal.SIGINT, stop)


def _lmms_eval_command() -> bool:
    """This process is the ``lmms-eval`` command (not a program calling ``simple_evaluate``)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return getattr(spec, "name", "") in ("lmms_eval.__main__", "lmms_eval") or Path(sys.argv[0]).name == "lmms-eval"


def _task_names(tasks: Any) -> list[str]:
    """The task names lmms-eval passes ``simple_evaluate`` (a list, or one comma-separated string)."""
    if isinstance(tasks, str):
        tasks = tasks.split(",")
    return [t.strip() for t in tasks or () if isinstance(t, str) and t.strip()]


def _check_tasks_before_the_model_loads(tasks: list[str]) -> None:
    """lmms-eval loads the model, then each task's data in turn, and stops at the first that fails: the
    user fixed one blocker per start (issue 37). Raise every blocker of every requested task at once
    (:class:`run_status.RunBlockedError`), before the model loads; say a missing judge as a warning."""
    from lmms_eval_plugins import doctor, run_status

    try:
        blockers, warnings = doctor.run_blockers(tasks)
    except Exception as exc:  # the check is a courtesy: the tasks' own loading still names what fails
        logging.getLogger(__name__).debug(f"checking the tasks before the model loads failed: {exc!r}")
        return
    if blockers:
        raise run_status.RunBlockedError(
            [(b.name, b.detail, b.fix) for b in blockers], [(w.name, w.detail, w.fix) for w in warnings]
        )
    for w in warnings:
        logging.getLogger(__name__).warning(f"lmms-eval-plugins: {w.name}: {w.detail} (fix: {w.fix})")


def _model_args_error(exc: BaseException, model: Any, model_args: Any) -> Any:
    """lmms-eval's model classes refuse a key they do not take with ``AssertionError: Unexpected kwargs``
    (a 23-line traceback): the same error our own models give, naming the key, the closest one and the
    class's keys (issue 37). None for any other error."""
    if not (
        isinstance(exc, AssertionError)
        and str(exc).startswith("Unexpected kwargs")
        and isinstance(model, str)
        and isinstance(model_args, str)
    ):
        return None
    try:
        from lmms_eval.models import get_model
        from lmms_eval.utils import simple_parse_args_string

        from lmms_eval_plugins.models._base import model_arg_names, unknown_model_args

        cls = get_model(model)
        known = set(model_arg_names(cls))
        unknown = sorted(k for k in simple_parse_args_string(model_args) if k not in known)
        if not unknown:
            return None
        return unknown_model_args(cls, unknown, name=model)
    except Exception:  # naming the key is a courtesy: lmms-eval's own error stands
        return None


def install_results_hook() -> bool:
    """Keep the software versions (``lmms_eval_plugins_versions``) and each run's judge accounting with its
    results: in the results JSON (``lmms_eval_plugins_judges``) and as ``judge_report_<run date>.json``
    beside it (the live ``judge_report.json`` is overwritten by the next run)."""
    from lmms_eval.loggers.evaluation_tracker import EvaluationTracker

    original = EvaluationTracker.save_results_aggregated
    if getattr(original, MARK, False):
        return True

    @functools.wraps(original)
    def save_results_aggregated(self, results=None, samples=None, datetime_str=None, *args, **kwargs):
        from lmms_eval_plugins import provenance, run_state
        from lmms_eval_plugins.judges.session import accounting_reports

        if isinstance(results, dict):
            results[provenance.RESULTS_KEY] = provenance.software_versions()
            results[OPTIONS_KEY] = run_state.current_run().options()
            results[run_state.INTERVALS_KEY] = run_state.current_run().intervals()
        reports = accounting_reports()
        if reports and isinstance(results, dict):
            results[RESULTS_KEY] = reports
            try:
                folder = Path(self.output_path or Path.cwd()) / self.general_config_tracker.model_name_sanitized
                folder.mkdir(parents=True, exist_ok=True)
                for i, report in enumerate(reports):
                    suffix = f".{i}" if i else ""
                    write_atomic(
                        folder / f"judge_report_{datetime_str}{suffix}.json",
                        json.dumps(report, indent=2, sort_keys=True) + "\n",
                    )
            except (OSError, AttributeError, TypeError) as exc:  # the results themselves must still be saved
                logging.getLogger(__name__).warning(f"judge accounting not written beside the results: {exc}")
        return original(self, results, samples, datetime_str, *args, **kwargs)

    EvaluationTracker.save_results_aggregated = _mark(save_results_aggregated, original)
    return True


def install_samples_writer() -> bool:
    """Our tasks' samples lines hold each item once (``logged_samples.without_repeated_items``): lmms-eval
    logged the item shared by every metric once per metric, 54-61% of a samples file (issue 41)."""
    from lmms_eval.loggers.evaluation_tracker import EvaluationTracker as tracker

    original = tracker.save_results_samples
    if getattr(original, MARK, False):
        return True

    @functools.wraps(original)
    def save_results_samples(self, task_name, samples, *args, **kwargs):
        from lmms_eval_plugins.benchmark import benchmark_of_task
        from lmms_eval_plugins.logged_samples import without_repeated_items

        spec = benchmark_of_task(task_name) if isinstance(task_name, str) else None
        if spec is not None and isinstance(samples, list):
            metrics = frozenset(spec.task_metrics(task_name))
            samples = [without_repeated_items(s, metrics) if isinstance(s, dict) else s for s in samples]
        return original(self, task_name, samples, *args, **kwargs)

    tracker.save_results_samples = _mark(save_results_samples, original)
    return True


def install_stderr_hook() -> bool:
    """Wrap ``TaskOutput.calculate_aggregate_metric`` so our tasks' error bars fill in."""
    from lmms_eval.evaluator_utils import TaskOutput

    original = TaskOutput.calculate_aggregate_metric
    if getattr(original, MARK, False):
        return True

    def calculate_aggregate_metric(self, bootstrap_iters=100000):
        from lmms_eval_plugins.errorbars import fill_stderrs

        original(self, bootstrap_iters=bootstrap_iters)
        fill_stderrs(self, bootstrap_iters)

    TaskOutput.calculate_aggregate_metric = _mark(calculate_aggregate_metric, original)
    return True


def install_clt_hook() -> bool:
    """Wrap ``TaskOutput.calculate_clt_aggregate_metric`` so our tasks' CLT columns are in each metric's units."""
    from lmms_eval.evaluator_utils import TaskOutput

    original = TaskOutput.calculate_clt_aggregate_metric
    if getattr(original, MARK, False):
        return True

    def calculate_clt_aggregate_metric(self):
        from lmms_eval_plugins.errorbars import fix_clt_columns

        original(self)
        fix_clt_columns(self)

    TaskOutput.calculate_clt_aggregate_metric = _mark(calculate_clt_aggregate_metric, original)
    return True


def install_task_names_hook() -> bool:
    """Wrap ``TaskManager.match_tasks``: lmms-eval's CLI raises "Tasks not found" for a name it does not
    know, with no suggestion and before any hook of ours runs. The wrapper returns the same matches; for
    the missing names it prints the closest task names last and records the failure in --output_path."""
    from lmms_eval.tasks import TaskManager

    original = TaskManager.match_tasks
    if getattr(original, MARK, False):
        return True

    def match_tasks(self, task_list):
        matched = original(self, task_list)
        try:
            names = [task_list] if isinstance(task_list, str) else list(task_list)
            # as lmms-eval's CLI counts them missing: no wildcard, no YAML file path
            missing = [
                t for t in names if isinstance(t, str) and t not in matched and "*" not in t and not os.path.isfile(t)
            ]
            if missing:
                _note_unknown_tasks(missing, list(self.all_tasks))
        except Exception:  # noqa: BLE001 - a hint must never change what lmms-eval does
            pass
        return matched

    TaskManager.match_tasks = _mark(match_tasks, original)
    return True


def _note_unknown_tasks(missing: list[str], known: list[str]) -> None:
    from lmms_eval_plugins import run_status
    from lmms_eval_plugins.judges.accounting import lmms_eval_output_path

    error = run_status.TaskNotFound(missing, known)
    run_status.record_failure(lmms_eval_output_path(sys.argv), error)
    hints = [
        f"did you mean {' or '.join(run_status.closest_tasks(t, known))} (not {t})?"
        for t in missing
        if run_status.closest_tasks(t, known)
    ]
    if hints:  # after lmms-eval's traceback and "Tasks not found", as the last line of the output
        atexit.register(_print_last, f"lmms-eval-plugins: {'; '.join(hints)}")
