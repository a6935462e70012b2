"""lmms-eval's `!function utils.*` hooks for the virectify tasks, built from the benchmark's spec
(lmms_eval_plugins/task_hooks.py): edit lmms_eval_plugins.benchmarks.virectify, not this file."""

from pathlib import Path

from lmms_eval_plugins.benchmarks.virectify import tasks as _hooks
from lmms_eval_plugins.benchmarks.virectify.spec import BENCHMARK as _spec
from lmms_eval_plugins.task_hooks import task_hooks

globals().update(task_hooks(_spec, _hooks, Path(__file__).resolve().parent))
