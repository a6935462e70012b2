"""No module-level state in the code that decides a number (issue 28): a static scan.

State a run needs belongs to an object the run owns (judges/session.py, lmms_eval_plugins/run_state.py);
a module holds constants and code. The scan reads each module's syntax tree (nothing is imported) and
reports:
- a ``global`` statement;
- a module-level dict/list/set (literal, comprehension or constructor) that is mutated anywhere in the
  scanned code (a method such as ``append``/``update``/``setdefault``, an item assigned or deleted, ``+=``):
  a constant table is never mutated;
- inside a function, an attribute set on a module-level name (``holder.x = ...``, ``module.NAME = ...``,
  ``setattr(module, ...)``) or a call of ``globals()``: a module written at run time;
- a module-level function memoised with ``functools.cache``/``lru_cache``.
What remains on purpose is listed in ALLOWED, each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The modules that decide numbers: every benchmark package, the scoring core, and the judges.
SCANNED = (
    "lmms_eval_plugins/benchmarks/*/*.py",
    "lmms_eval_plugins/task_hooks.py",
    "lmms_eval_plugins/outcome.py",
    "lmms_eval_plugins/run_state.py",
    "lmms_eval_plugins/metrics.py",
    "lmms_eval_plugins/stats.py",
    "lmms_eval_plugins/parsing*.py",
    "lmms_eval_plugins/errorbars.py",
    "lmms_eval_plugins/benchmark.py",
    "lmms_eval_plugins/doc_fields.py",
    "judges/*.py",
)

# (module, name): why it stays. Each entry must still match a finding (no stale allowance).
ALLOWED = {
    ("judges/session.py", "_current"): "the one holder of the run's JudgeSession: lmms-eval gives a task's "
    "filters and hooks no handle on the run, so they find it here",
    ("lmms_eval_plugins/run_state.py", "_current"): "the one holder of the run's RunState, for the same reason",
    ("judges/registry.py", "_runtime_registry"): "judge classes registered in this process (register_judge, the "
    "in-process twin of entry points): code to look up, not a run's state",
    ("judges/__init__.py", "globals()"): "PEP 562 lazy import: keeps a name once imported (code, not state)",
    ("lmms_eval_plugins/benchmark.py", "registry"): "the installed benchmarks (entry points), read once per process",
    ("lmms_eval_plugins/benchmark.py", "_task_metric_files"): "which shipped task YAML holds a task's metric_list: "
    "installed files, read once per folder",
}

CONTAINERS = {
    "dict",
    "list",
    "set",
    "defaultdict",
    "OrderedDict",
    "Counter",
    "deque",
    "bytearray",
    "WeakValueDictionary",
    "WeakKeyDictionary",
    "WeakSet",
}
MUTATORS = {
    "append",
    "appendleft",
    "add",
    "update",
    "setdefault",
    "pop",
    "popitem",
    "popleft",
    "clear",
    "extend",
    "insert",
    "remove",
    "discard",
    "sort",
    "reverse",
    "__setitem__",
    "__delitem__",
}
MEMOISERS = {"cache", "lru_cache"}


def _called(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _is_container(value: ast.AST | None) -> bool:
    return isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)) or (
        _called(value) in CONTAINERS
    )


def _top_level(tree: ast.Module):
    """Module-level statements, including those inside a module-level ``if``/``try``."""
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.If, ast.Try)):
            todo += [
                *node.body,
                *node.orelse,
                *getattr(node, "finalbody", ()),
                *(s for h in getattr(node, "handlers", ()) for s in h.body),
            ]
        else:
            yield node


def _names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _names(e)]
    return []


def _locals(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names a function binds itself (parameters, assignments, loops, imports): they shadow the module's."""
    args = fn.args
    bound = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return bound


def _mutated_name(node: ast.AST) -> tuple[str | None, str | None]:
    """(name, owner) of what ``node`` mutates in place: ``NAME.add(x)``, ``NAME[k] = v``, ``del NAME[k]``,
    ``NAME += x``, or the same on ``owner.NAME``; (None, None) otherwise."""
    target = None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
        target = node.func.value
    elif isinstance(node, (ast.Assign, ast.Delete)):
        subscripts = [t for t in node.targets if isinstance(t, ast.Subscript)]
        target = subscripts[0].value if subscripts else None
    elif isinstance(node, ast.AugAssign):
        target = node.target.value if isinstance(node.target, ast.Subscript) else node.target
    if isinstance(target, ast.Name):
        return target.id, None
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return target.attr, target.value.id
    return None, None


def scan(source: str, module: str = "<module>") -> list[tuple[int, str, str]]:
    """(line, name, what) for each piece of module-level state in ``source``."""
    tree = ast.parse(source)
    containers, module_names = {}, set()
    for node in _top_level(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for name in (n for t in targets for n in _names(t)):
                module_names.add(name)
                if _is_container(node.value):
                    containers[name] = node.lineno
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            module_names.update((a.asname or a.name).split(".")[0] for a in node.names)
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    local_to = {}  # node -> the names its innermost function binds (outer functions come first in the walk)
    for fn in functions:
        shadowed = _locals(fn)
        local_to.update((id(node), shadowed) for node in ast.walk(fn))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            found.append((node.lineno, ", ".join(node.names), "a global statement"))
        name, owner = _mutated_name(node)
        if name in containers and owner is None and name not in local_to.get(id(node), ()):
            found.append((node.lineno, name, f"the module-level container of line {containers[name]} is mutated"))
    for fn in functions:
        shadowed = _locals(fn)
        for node in ast.walk(fn):
            stores = []
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                stores = [e for t in targets for e in (t, *getattr(t, "elts", ())) if isinstance(e, ast.Attribute)]
            elif _called(node) == "setattr" and node.args and isinstance(node.func, ast.Name):
                stores = [ast.Attribute(value=node.args[0], attr="?")]
            elif _called(node) == "globals" and isinstance(node.func, ast.Name):
                found.append((node.lineno, "globals()", f"{fn.name} reaches the module's namespace"))
            for store in stores:
                base = store.value
                if isinstance(base, ast.Name) and base.id in module_names and base.id not in shadowed:
                    found.append((node.lineno, base.id, f"{fn.name} sets {base.id}.{store.attr} at run time"))
    for node in _top_level(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                called = decorator.func if isinstance(decorator, ast.Call) else decorator
                if (getattr(called, "attr", None) or getattr(called, "id", None)) in MEMOISERS:
                    found.append((node.lineno, node.name, "a memoised function (a process-wide cache)"))
    return found


def scanned_modules() -> list[Path]:
    return sorted({p for pattern in SCANNED for p in REPO.glob(pattern)})


def test_the_scan_covers_the_modules_that_decide_numbers():
    names = {p.relative_to(REPO).as_posix() for p in scanned_modules()}
    for module in (
        "lmms_eval_plugins/outcome.py",
        "lmms_eval_plugins/task_hooks.py",
        "judges/rubric.py",
        "judges/session.py",
        "lmms_eval_plugins/benchmarks/crossvid/scoring.py",
        "lmms_eval_plugins/benchmarks/causalstep/protocol.py",
        "lmms_eval_plugins/parsing_times.py",
    ):
        assert module in names, module


def test_no_module_level_state_in_scoring():
    seen, problems = set(), []
    for path in scanned_modules():
        module = path.relative_to(REPO).as_posix()
        for line, name, what in scan(path.read_text(encoding="utf-8"), module):
            if (module, name) in ALLOWED:
                seen.add((module, name))
            else:
                problems.append(f"{module}:{line}: {name}: {what}")
    assert not problems, (
        "module-level state where numbers are decided; keep it in an object the run owns "
        "(judges/session.py, lmms_eval_plugins/run_state.py) or make the table constant:\n" + "\n".join(problems)
    )
    assert not set(ALLOWED) - seen, f"allowed but no longer found (remove from ALLOWED): {sorted(set(ALLOWED) - seen)}"


@pytest.mark.parametrize(
    "source, name",
    [
        ("_SEEN = set()\ndef f(x):\n    _SEEN.add(x)\n", "_SEEN"),
        ("_CACHE = {}\ndef f(k):\n    _CACHE[k] = 1\n", "_CACHE"),
        ("_CACHE: dict = dict()\ndef f(k):\n    del _CACHE[k]\n", "_CACHE"),
        ("_ITEMS = []\ndef f():\n    global _ITEMS\n    _ITEMS = [1]\n", "_ITEMS"),
        ("_ALL = []\n_ALL += [1]\n", "_ALL"),
        ("class H:\n    x = None\n_current = H()\ndef f():\n    _current.x = 1\n", "_current"),
        ("from . import tasks\ndef f(d):\n    tasks.SAMPLE_DIR = d\n", "tasks"),
        ("import sys\ndef f():\n    setattr(sys, 'x', 1)\n", "sys"),
        ("def f(names):\n    globals().update(names)\n", "globals()"),
        ("import functools\n@functools.lru_cache(maxsize=None)\ndef f(x):\n    return x\n", "f"),
    ],
)
def test_the_scan_finds_each_kind_of_state(source, name):
    assert name in {found for _, found, _ in scan(source)}


@pytest.mark.parametrize(
    "source",
    [
        "TABLE = {'a': 1}\ndef f(k):\n    return TABLE[k]\n",  # a constant table, only read
        "def f():\n    seen = set()\n    seen.add(1)\n    return seen\n",  # a function's own container
        "TABLE = {'a': 1}\ndef f(TABLE):\n    TABLE['b'] = 2\n",  # a parameter shadows the module's name
        "import json\ndef f(item):\n    item.value = json.dumps(1)\n",  # an attribute of a local object
    ],
)
def test_the_scan_leaves_constants_and_local_state_alone(source):
    assert scan(source) == []
