"""A benchmark's task code as the tests use it: its folder's ``utils.py`` imported by file path (the
way lmms-eval's ``!function`` does, which also points the code at the bundled sample data), and its
implementation module returned, internals included."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

from lmms_eval_plugins.benchmark import get


def load_task_adapter(benchmark: str) -> ModuleType:
    """The task folder's ``utils.py`` itself (what the YAMLs' ``!function utils.X`` resolve against)."""
    path = get(benchmark).tasks_dir / "utils.py"
    name = f"lmms_eval_plugins_task_utils_{benchmark}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_task_utils(benchmark: str) -> ModuleType:
    """``lmms_eval_plugins.benchmarks.<benchmark>.tasks``, after its adapter has run."""
    load_task_adapter(benchmark)
    return importlib.import_module(f"lmms_eval_plugins.benchmarks.{benchmark}.tasks")
