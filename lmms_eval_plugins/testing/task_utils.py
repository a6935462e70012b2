"""Import a task folder's ``utils.py`` by file path, the way lmms-eval's ``!function`` does."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from lmms_eval_plugins import tasks_dir


def load_task_utils(benchmark: str) -> ModuleType:
    path = tasks_dir() / benchmark / "utils.py"
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
