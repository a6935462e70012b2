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


class TaskCode(ModuleType):
    """A benchmark's implementation module seen through its task folder's ``utils.py``: the hooks the
    YAMLs call (aggregations from the spec, ``process_docs_*`` bound to the sample data, ``SAMPLE_DIR``)
    come from ``utils.py``, everything else from the module. Setting an attribute sets it on the
    module, so ``monkeypatch.setattr`` reaches the code that reads it."""

    def __init__(self, adapter: ModuleType, module: ModuleType) -> None:
        super().__init__(module.__name__, module.__doc__)
        object.__setattr__(self, "_adapter", adapter)
        object.__setattr__(self, "_module", module)
        object.__setattr__(self, "_saved", {})

    def __getattr__(self, name: str):
        adapter = object.__getattribute__(self, "_adapter")
        if name in vars(adapter) and not name.startswith("_"):
            return vars(adapter)[name]
        return getattr(object.__getattribute__(self, "_module"), name)

    def __setattr__(self, name: str, value) -> None:
        module = object.__getattribute__(self, "_module")
        saved = object.__getattribute__(self, "_saved")
        if name not in saved and hasattr(module, name):
            saved[name] = getattr(module, name)
        setattr(module, name, value)

    def __delattr__(self, name: str) -> None:
        # monkeypatch undoes a set on a proxy by deleting it: put the module's own value back instead
        module = object.__getattribute__(self, "_module")
        saved = object.__getattribute__(self, "_saved")
        if name in saved:
            setattr(module, name, saved.pop(name))
        else:
            delattr(module, name)


def load_task_utils(benchmark: str) -> ModuleType:
    """``lmms_eval_plugins.benchmarks.<benchmark>.tasks`` as its task folder's ``utils.py`` exposes it."""
    adapter = load_task_adapter(benchmark)
    module = importlib.import_module(f"lmms_eval_plugins.benchmarks.{benchmark}.tasks")
    return TaskCode(adapter, module)
