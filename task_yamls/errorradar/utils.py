"""lmms-eval's `!function utils.*` hooks for the errorradar tasks, built from the benchmark's spec
(lmms_eval_plugins/task_hooks.py): edit lmms_eval_plugins.benchmarks.errorradar, not this file."""

from pathlib import Path

from lmms_eval_plugins.benchmarks.errorradar import tasks as _hooks
from lmms_eval_plugins.benchmarks.errorradar.spec import BENCHMARK as _spec
from lmms_eval_plugins.task_hooks import task_hooks

globals().update(task_hooks(_spec, _hooks, Path(__file__).resolve().parent))
