"""``lmms-eval-plugins export-upstream``: write a self-contained ``lmms_eval/tasks/<name>/`` folder.

The exported folder loads and scores with stock lmms-eval, without this package installed. It is
generated from the same sources as the installed task, never edited by hand:

1. the task folder is copied as is (YAMLs, ``utils.py``, ``sources/``, ``sample_data/``, README);
2. the ``lmms_eval_plugins`` modules its Python files need are found by walking the import graph
   (``ast``; imports inside functions count too) and copied to ``_vendor/lmms_eval_plugins_<name>/``.
   A sub-package that is needed at all (``judges``) is copied whole, data files included, because it
   loads its own modules lazily. The top-level ``__init__.py`` is generated: it holds only the
   version (the real one points at the installed task folder, which has no meaning here);
   A benchmark from another installed package (its task folder lies inside that package) brings
   the modules of that package the task folder reaches, copied to ``_vendor/<vendored name>__<its
   package>/`` and renamed in every import the same way, so an installed copy can never shadow them;
3. every reference to ``lmms_eval_plugins`` that Python resolves as a module is rewritten to the
   vendored name: import statements, and string arguments of ``import_module``, ``find_spec`` and
   ``importlib.resources.files``. Other strings (environment variable names, the judges' entry-point
   group, messages) are kept;
4. each task-folder Python file that imports vendored code gets a short block that appends
   ``_vendor/`` to ``sys.path``: lmms-eval imports ``utils.py`` by file path
   (``importlib.util.spec_from_file_location`` in ``lmms_eval.utils.import_function``), so neither
   the folder nor anything beside it is importable otherwise. ``_vendor/`` holds only the vendored
   package, whose name is unique per benchmark, so nothing else can be shadowed;
5. ``README.md`` is the task README plus generated sections (what is vendored, third-party imports,
   how to run and regenerate), and ``_vendor/EXPORT.json`` records the source version and a SHA-256
   of every generated file.

Usage::

    lmms-eval-plugins export-upstream errorradar ~/lmms-eval/lmms_eval/tasks/     # -> tasks/errorradar/
    lmms-eval-plugins export-upstream --all /tmp/export                           # every benchmark
    lmms-eval-plugins export-upstream path/to/task_folder /tmp/export --force     # replace an earlier export
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import json
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from lmms_eval_plugins.safe_files import move_into_place, write_atomic

ROOT = "lmms_eval_plugins"
VENDOR_DIR = "_vendor"
MANIFEST = "EXPORT.json"
# Never vendored: the task folders themselves (the export *is* the task) and the lmms-eval discovery hook.
FORBIDDEN = {f"{ROOT}.task_yamls", f"{ROOT}.discovery", f"{ROOT}.cli"}
# Sub-packages vendored module by module (with their __init__ files), not whole. ``compat``: an export
# needs its frame reads (judge filter, decode-ahead), never its patches (installed by discovery).
MODULE_WISE_PACKAGES = {"benchmarks", "compat"}
# Calls whose first argument is a module path (a vendored one must be renamed too).
MODULE_PATH_CALLS = {"import_module", "find_spec", "files"}
SKIP_NAMES = {"__pycache__", ".pytest_cache", ".DS_Store"}
SKIP_SUFFIXES = {".pyc", ".pyo"}
BOOTSTRAP_MARK = "# --- added by `lmms-eval-plugins export-upstream`"
# File types lmms-eval 0.7.3's wheel ships from its task folders (its RECORD): others need its package data.
WHEEL_SUFFIXES = {"", ".yaml", ".py", ".md", ".json", ".jsonl", ".txt", ".js", ".sh", ".ttf"}


class ExportError(Exception):
    """The task folder cannot be exported as it stands; the message says why and what to change."""


# ------------------------------------------------------------------------------------------------ naming


def vendored_name(benchmark: str) -> str:
    """``errorradar`` -> ``lmms_eval_plugins_errorradar`` (unique per benchmark, a valid identifier)."""
    return f"{ROOT}_{re.sub(r'[^0-9A-Za-z_]', '_', benchmark)}"


def resolve_task_folder(name_or_path: str | Path) -> Path:
    """An installed benchmark's name (``errorradar``) or a path to a task folder."""
    from lmms_eval_plugins.benchmark import registry

    path = Path(name_or_path).expanduser()
    if path.is_dir():
        folder = path.resolve()
    elif str(name_or_path) in registry():
        folder = registry()[str(name_or_path)].tasks_dir
    else:
        known = ", ".join(benchmarks()) or "none"
        raise ExportError(f"{name_or_path!r} is neither a folder nor an installed benchmark (benchmarks: {known})")
    if not any(folder.glob("*.yaml")):
        raise ExportError(f"{folder} holds no task YAML; pass a task folder such as task_yamls/<benchmark>")
    return folder


def benchmarks() -> list[str]:
    """Installed benchmarks (the ``lmms_eval_plugins.benchmarks`` entry-point group) with a task folder."""
    from lmms_eval_plugins.benchmark import ordered_benchmarks

    return [b.name for b in ordered_benchmarks() if b.tasks_dir.is_dir() and any(b.tasks_dir.glob("*.yaml"))]


# ------------------------------------------------------------------------------------------------ import graph


@dataclass(frozen=True)
class ModuleFile:
    name: str  # dotted name in the real package, e.g. lmms_eval_plugins.judges.base
    path: Path  # source file
    is_package: bool


def _spec_file(name: str) -> ModuleFile | None:
    """The source file of module ``name`` of the installed package (None: not a module)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a parent is not a package, or the name is an attribute
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return ModuleFile(name, Path(spec.origin), spec.submodule_search_locations is not None)


def _package_of(module: ModuleFile) -> str:
    return module.name if module.is_package else module.name.rpartition(".")[0]


def imported_names(tree: ast.AST, *, package: str | None) -> list[tuple[str, int]]:
    """Absolute module names an AST imports (``from a import b`` yields ``a`` and ``a.b``), with line numbers.

    ``package`` resolves relative imports (None for a file outside any package, where they are an error).
    """
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if not package:
                    raise ExportError(f"relative import on line {node.lineno} of a file outside a package")
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.append((module, node.lineno))
            found += [(f"{module}.{alias.name}", node.lineno) for alias in node.names if alias.name != "*"]
        elif isinstance(node, ast.Call) and _call_name(node) in MODULE_PATH_CALLS and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _is_ours(arg.value):
                found.append((arg.value, node.lineno))
    return found


def _call_name(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _is_ours(name: str) -> bool:
    return name == ROOT or name.startswith(ROOT + ".")


def _top_package(name: str) -> str | None:
    """``lmms_eval_plugins.judges.base`` -> ``lmms_eval_plugins.judges`` when that is a package, else None.

    Benchmark packages (``lmms_eval_plugins.benchmarks.<name>``) are not vendored whole: only the
    modules a task folder reaches, so one benchmark's export holds none of the others' code."""
    parts = name.split(".")
    if len(parts) < 3 or parts[1] in MODULE_WISE_PACKAGES:
        return None
    candidate = ".".join(parts[:2])
    spec = _spec_file(candidate)
    return candidate if spec is not None and spec.is_package else None


@dataclass
class Plan:
    benchmark: str
    task_folder: Path
    vendor_name: str
    modules: dict[str, ModuleFile] = field(default_factory=dict)  # top-level modules, by dotted name
    packages: dict[str, ModuleFile] = field(default_factory=dict)  # sub-packages vendored whole
    why: dict[str, str] = field(default_factory=dict)  # module -> "needed by X (line N)"
    third_party: set[str] = field(default_factory=set)
    # the benchmark's own package when it is not ours (a third-party benchmark whose task folder lies
    # inside it): vendored module by module under its own, already unique, name
    own: dict[str, ModuleFile] = field(default_factory=dict)

    @property
    def renames(self) -> dict[str, str]:
        """The own package's top-level name -> its vendored name (unique per export)."""
        return {top: f"{self.vendor_name}__{top}" for top in {n.split(".")[0] for n in self.own}}


def _holds(top: str, folder: Path) -> bool:
    """True when top-level package ``top`` contains ``folder``: the benchmark's own package."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    roots = [Path(p).resolve() for p in (spec.submodule_search_locations or [])] if spec else []
    return any(root == folder or root in folder.parents for root in roots)


def _package_files(package: ModuleFile) -> list[Path]:
    root = package.path.parent
    return sorted(p for p in root.rglob("*") if p.is_file() and not _skipped(p.relative_to(root)))


def _skipped(relative: Path) -> bool:
    return (
        any(part in SKIP_NAMES or part.startswith(".") for part in relative.parts) or relative.suffix in SKIP_SUFFIXES
    )


def plan_export(task_folder: str | Path) -> Plan:
    """Which modules of this package the task folder needs (transitively), without writing anything."""
    folder = resolve_task_folder(task_folder)
    plan = Plan(folder.name, folder, vendored_name(folder.name))
    # (file, its package for relative imports, who asked)
    queue: list[tuple[Path, str | None, str]] = [
        (path, None, f"{path.relative_to(folder)}")
        for path in sorted(folder.rglob("*.py"))
        if not _skipped(path.relative_to(folder))
    ]
    seen_files: set[Path] = set()
    stdlib = set(sys.stdlib_module_names)
    while queue:
        path, package, label = queue.pop(0)
        if path in seen_files:
            continue
        seen_files.add(path)
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError as exc:
            raise ExportError(f"cannot parse {path}: {exc}") from exc
        for name, line in imported_names(tree, package=package):
            top = name.split(".")[0]
            if top != ROOT:
                if top and top not in stdlib and top != "__future__" and _holds(top, plan.task_folder):
                    parts = name.split(".")
                    for depth in range(1, len(parts) + 1):  # the module and each package above it
                        dotted = ".".join(parts[:depth])
                        found = _spec_file(dotted)
                        if found is not None and dotted not in plan.own:
                            plan.own[dotted] = found
                            plan.why[dotted] = f"{label} (line {line})"
                            queue.append((found.path, _package_of(found), dotted))
                elif top and top not in stdlib and top != "__future__":
                    plan.third_party.add(top)
                continue
            if name == ROOT:
                continue  # the generated __init__ covers the package itself; attributes are checked below
            module = _spec_file(name)
            if module is None:
                parent = name.rpartition(".")[0]
                if parent == ROOT:
                    raise ExportError(
                        f"{label} line {line} imports {name.rpartition('.')[2]!r} from {ROOT} itself; "
                        f"the vendored copy gets a generated __init__.py, so import it from its module instead"
                    )
                continue  # an attribute of a module (from a.b import c): the module is listed separately
            if any(name == f or name.startswith(f + ".") for f in FORBIDDEN):
                raise ExportError(f"{label} line {line} imports {name}, which cannot be vendored into a task folder")
            reason = f"{label} (line {line})"
            wise = name.split(".")[1] in MODULE_WISE_PACKAGES
            sub = _top_package(name) or (name if module.is_package and name.count(".") == 1 and not wise else None)
            if sub is not None:
                if sub not in plan.packages:
                    pkg = _spec_file(sub)
                    assert pkg is not None
                    plan.packages[sub] = pkg
                    plan.why[sub] = reason
                    for file in _package_files(pkg):
                        if file.suffix == ".py":
                            rel = file.relative_to(pkg.path.parent).with_suffix("")
                            dotted = ".".join([sub, *rel.parts])
                            pkg_name = (
                                dotted.removesuffix(".__init__")
                                if rel.name == "__init__"
                                else dotted.rpartition(".")[0]
                            )
                            queue.append((file, pkg_name, dotted.removesuffix(".__init__")))
                continue
            # a module inside a sub-package needs each package above it (their __init__ run first)
            parts = name.split(".")
            for depth in range(2, len(parts) + 1):
                dotted = ".".join(parts[:depth])
                found = module if dotted == name else _spec_file(dotted)
                if found is not None and dotted not in plan.modules:
                    plan.modules[dotted] = found
                    plan.why[dotted] = reason
                    queue.append((found.path, _package_of(found), dotted))
    return plan


# ------------------------------------------------------------------------------------------------ rewriting


def _line_offsets(data: bytes) -> list[int]:
    offsets, pos = [0], 0
    for line in data.splitlines(keepends=True):
        pos += len(line)
        offsets.append(pos)
    return offsets


def rewrite_source(
    source: str, new_root: str, *, filename: str = "<source>", renames: dict[str, str] | None = None
) -> tuple[str, int]:
    """Rename ``lmms_eval_plugins`` to ``new_root`` (and each top-level package in ``renames`` to its
    new name) wherever Python resolves it as a module.

    Returns the new source and the number of statements changed. ``import lmms_eval_plugins.x``
    without ``as`` binds the name ``lmms_eval_plugins`` itself and is refused (use ``from ... import``).
    """
    names = {ROOT: new_root, **(renames or {})}

    def root_of(module: str) -> str | None:
        top = module.split(".")[0]
        return top if top in names else None

    data = source.encode("utf-8")  # ast column offsets are UTF-8 byte offsets
    tree = ast.parse(source, filename=filename)
    offsets = _line_offsets(data)
    spans: list[tuple[int, int, str]] = []

    def span(node: ast.AST) -> tuple[int, int]:
        return offsets[node.lineno - 1] + node.col_offset, offsets[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            ours = [a for a in node.names if root_of(a.name)]
            for alias in ours:
                if alias.asname is None:
                    top = root_of(alias.name)
                    raise ExportError(
                        f"{filename} line {node.lineno}: `import {alias.name}` binds the name {top!r}, which the vendored "
                        f"copy renames; write `from {alias.name.rpartition('.')[0] or top} import {alias.name.rpartition('.')[2]}` "
                        f"or `import {alias.name} as ...`"
                    )
            for alias in ours:
                spans.append((*span(node), root_of(alias.name)))  # type: ignore[arg-type]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and root_of(node.module):
            top = root_of(node.module)
            start, end = span(node)
            # only the module after `from` (the imported names may legitimately contain the word)
            match = re.compile(rb"from\s+(" + re.escape(top.encode()) + rb")\b").search(data, start, end)  # type: ignore[union-attr]
            assert match is not None, (filename, node.lineno)
            spans.append((match.start(1), match.end(1), top))  # type: ignore[arg-type]
        elif isinstance(node, ast.Call) and _call_name(node) in MODULE_PATH_CALLS and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and root_of(arg.value):
                spans.append((*span(arg), root_of(arg.value)))  # type: ignore[arg-type]
    out, last = bytearray(), 0
    for start, end, top in sorted(set(spans)):
        if start < last:  # one `import a, b` statement holding two renamed roots: its span is already done
            continue
        segment = data[start:end]
        for old, new in names.items():
            segment = re.sub(rb"\b" + re.escape(old.encode()) + rb"\b", new.encode(), segment)
        out += data[last:start] + segment
        last = end
    out += data[last:]
    text = out.decode("utf-8")
    # every module reference must now point at the vendored copy
    leftovers = [
        f"line {line}: {name}" for name, line in imported_names(ast.parse(text), package="x.y") if root_of(name)
    ]
    if leftovers:
        raise ExportError(f"{filename}: could not rewrite {', '.join(leftovers)}")
    return text, len({(s, e) for s, e, _ in spans})


def bootstrap_block(new_root: str) -> str:
    return f'''{BOOTSTRAP_MARK} ---------------------------------------------
# lmms-eval imports this file by path (importlib.util.spec_from_file_location in
# lmms_eval.utils.import_function), so nothing beside it is importable by default. The shared
# helpers this task needs are vendored in _vendor/{new_root}/; put _vendor/ (which holds only
# that package) on sys.path once. Generated from lmms-eval-plugins: do not edit, re-export.
import os as _os
import sys as _sys

_VENDOR = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "{VENDOR_DIR}")
if _VENDOR not in _sys.path:
    _sys.path.append(_VENDOR)
# --------------------------------------------------------------------------------------------------
'''


def add_bootstrap(source: str, new_root: str) -> str:
    """Insert :func:`bootstrap_block` after the docstring and ``from __future__`` imports."""
    if BOOTSTRAP_MARK in source:
        return source
    tree = ast.parse(source)
    after = 0
    for i, node in enumerate(tree.body):
        is_doc = (
            i == 0
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        )
        is_future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if is_doc or is_future:
            after = node.end_lineno or after
        else:
            break
    lines = source.splitlines(keepends=True)
    head, tail = "".join(lines[:after]), "".join(lines[after:])
    if head and not head.endswith("\n"):
        head += "\n"
    return head + "\n" + bootstrap_block(new_root) + ("\n" if tail and not tail.startswith("\n") else "") + tail


# ------------------------------------------------------------------------------------------------ writing


@dataclass
class ExportResult:
    folder: Path
    plan: Plan
    files: dict[str, str]  # relative path -> sha256
    warnings: list[str]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_yaml_references(folder: Path) -> None:
    """YAML ``!function`` references must go through the task's own Python files."""
    for path in sorted({*folder.glob("*.yaml"), *folder.glob("_*yaml")}):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            code = line.split("#", 1)[0]
            if re.search(rf"\b{ROOT}\b", code):
                raise ExportError(
                    f"{path.name} line {number} refers to {ROOT} directly ({code.strip()!r}); lmms-eval would look for the "
                    "installed package. Import the function in utils.py and use `!function utils.<name>`"
                )


def _readme(plan: Plan, folder: Path, version: str, warnings: list[str]) -> str:
    source = plan.task_folder / "README.md"
    if source.is_file():
        text = source.read_text(encoding="utf-8").rstrip() + "\n"
    else:
        warnings.append(
            f"{plan.task_folder.name} has no README.md; the exported README has only the generated sections"
        )
        text = f"# {plan.benchmark}\n"
    if not re.search(r"^#+\s*Citation", text, re.IGNORECASE | re.MULTILINE):
        quote = "\n".join(line for line in text.splitlines() if line.startswith(">"))
        if source.is_file():
            warnings.append(
                f"{source} has no '## Citation' section (add the BibTeX there); the export cites the README's reference line"
            )
        text += "\n## Citation\n\n" + (quote + "\n" if quote else "See the benchmark's paper.\n")
    sample_tasks = sorted(p.stem for p in plan.task_folder.glob("*_sample.yaml"))
    modules = sorted([*plan.modules, *plan.packages])
    vendored = ", ".join(f"`{m.replace(ROOT, plan.vendor_name, 1)}`" for m in modules) or "nothing"
    third = ", ".join(f"`{m}`" for m in sorted(plan.third_party)) or "none"
    judged = any(m.endswith(".judges") for m in plan.packages)
    group = f"{plan.benchmark}_sample"
    sample_task = group if (plan.task_folder / f"{group}.yaml").is_file() or not sample_tasks else sample_tasks[0]
    unshipped = sorted({p.suffix for p in folder.rglob("*") if p.is_file()} - WHEEL_SUFFIXES)
    parts = [
        "\n## This folder (exported from lmms-eval-plugins)\n",
        f"Generated by `lmms-eval-plugins export-upstream {plan.benchmark}` from lmms-eval-plugins {version}; "
        "do not edit it by hand: change the package and export again.\n",
        "- `*.yaml`, `_*_yaml`, `utils.py`: the task definitions and hooks, as in the package.",
        "- `sources/`: one-row source files naming where the data is read from (`sample` or `auto`).",
        "- `sample_data/`: a small synthetic sample in the real schema, used by "
        + (", ".join(f"`{t}`" for t in sample_tasks) or "the `*_sample` tasks")
        + " (runs offline).",
        f"- `{VENDOR_DIR}/{plan.vendor_name}/`: the shared helpers of lmms-eval-plugins this task uses ({vendored}), with "
        f"imports renamed so they never clash with an installed lmms-eval-plugins or another exported task. "
        f"`utils.py` appends `{VENDOR_DIR}/` to `sys.path` (lmms-eval imports `utils.py` by file path). "
        f"`{VENDOR_DIR}/{MANIFEST}` records the source version and file hashes.",
        f"- Third-party modules the code imports: {third} (lmms-eval installs all of them except `decord`, which the "
        "video helpers import only when they decode a video; `pip install decord` for video tasks).",
        "\nRun the bundled sample with any model, e.g. `lmms-eval --model dummy --tasks "
        + sample_task
        + " --batch_size 1 "
        "--output_path out/` (when this folder is not inside `lmms_eval/tasks/`, add `--include_path PARENT_FOLDER`).",
        "\nDocs carry an `oracle_response` field (the gold reply in the prompt's format), used by lmms-eval-plugins' "
        "`oracle` model; it is never shown to the model.",
        "\nThe metrics are the package's, number for number. Their standard errors (`<metric>_stderr`) come from "
        "lmms-eval-plugins' lmms-eval hook, so stock lmms-eval reports them as `N/A` here; "
        "`lmms-eval-plugins compare` computes error bars and paired differences from this folder's logged samples.",
    ]
    if unshipped:
        parts.append(
            f"\nFor lmms-eval maintainers: this folder holds {', '.join(f'`*{s}`' for s in unshipped)} files (sample data). "
            "lmms-eval 0.7.3's wheel ships only "
            f"{', '.join(f'`*{s}`' for s in sorted(WHEEL_SUFFIXES - {''}))} "
            "files of task folders, so add these types to its package data (a source checkout works as is)."
        )
    if judged:
        parts.append(
            "\nJudged metrics call an OpenAI-compatible endpoint (`OPENAI_BASE_URL`/`OPENAI_API_KEY`, "
            "`LMMS_EVAL_PLUGINS_JUDGE_MODEL`); `LMMS_EVAL_PLUGINS_JUDGE=offline` selects the deterministic offline "
            "judges (lower fidelity, for smoke tests). Verdicts are cached in SQLite (`LMMS_EVAL_PLUGINS_JUDGE_CACHE`). "
            "Third-party judges registered under the `lmms_eval_plugins.judges` entry-point group are found too; the "
            "built-in judges need no installed metadata."
        )
    return text + "\n".join(parts) + "\n"


def export_task(task_folder: str | Path, dest: str | Path, *, force: bool = False) -> ExportResult:
    """Write ``dest/<benchmark>/``; see the module docstring. ``force`` replaces an earlier export."""
    from lmms_eval_plugins import __version__

    plan = plan_export(task_folder)
    _check_yaml_references(plan.task_folder)
    dest = Path(dest).expanduser().resolve()
    target = dest / plan.benchmark
    if target.exists():
        if not force:
            raise ExportError(f"{target} exists; pass --force to replace an earlier export")
        if not (target / VENDOR_DIR / MANIFEST).is_file():
            raise ExportError(
                f"{target} exists and is not an earlier export (no {VENDOR_DIR}/{MANIFEST}); remove it yourself"
            )
    if plan.task_folder == target or target in plan.task_folder.parents:
        raise ExportError("the destination may not be the task folder itself")
    dest.mkdir(parents=True, exist_ok=True)
    warnings: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix=f".{plan.benchmark}.export-", dir=dest))
    try:
        # 1. the task folder
        for src in sorted(plan.task_folder.rglob("*")):
            rel = src.relative_to(plan.task_folder)
            if _skipped(rel) or src.is_dir() or rel.parts[0] == VENDOR_DIR:
                continue
            out = tmp / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            if src.suffix == ".py":
                text, changed = rewrite_source(
                    src.read_text(encoding="utf-8"), plan.vendor_name, filename=str(rel), renames=plan.renames
                )
                write_atomic(out, add_bootstrap(text, plan.vendor_name) if changed else text)
            else:
                shutil.copy2(src, out)
        # 2. the vendored package
        vroot = tmp / VENDOR_DIR / plan.vendor_name
        vroot.mkdir(parents=True)
        write_atomic(
            vroot / "__init__.py",
            f'"""Vendored copy of lmms-eval-plugins {__version__} (the modules the {plan.benchmark} task needs).\n\n'
            f'Generated by `lmms-eval-plugins export-upstream`: do not edit; change lmms-eval-plugins and export again.\n"""\n\n'
            f'__version__ = "{__version__}"\n',
        )
        copies: list[tuple[Path, Path]] = []
        for name, module in plan.modules.items():
            rel = Path(*name.split(".")[1:])
            copies.append(
                (module.path, vroot / rel / "__init__.py" if module.is_package else vroot / rel.with_suffix(".py"))
            )
        for name, package in plan.packages.items():
            sub = vroot / Path(*name.split(".")[1:])
            copies += [(f, sub / f.relative_to(package.path.parent)) for f in _package_files(package)]
        for name, module in plan.own.items():  # beside ours in _vendor/, renamed like ours
            top, _, rest = name.partition(".")
            rel = tmp / VENDOR_DIR / plan.renames[top] / Path(*rest.split(".") if rest else ())
            copies.append((module.path, rel / "__init__.py" if module.is_package else rel.with_suffix(".py")))
        for src, out in copies:
            out.parent.mkdir(parents=True, exist_ok=True)
            if src.suffix == ".py":
                text, _ = rewrite_source(
                    src.read_text(encoding="utf-8"), plan.vendor_name, filename=str(src), renames=plan.renames
                )
                write_atomic(out, text)
            else:
                shutil.copy2(src, out)
        # 3. README and manifest
        write_atomic(tmp / "README.md", _readme(plan, tmp, __version__, warnings))
        for path in tmp.rglob("*.py"):
            compile(path.read_text(encoding="utf-8"), str(path), "exec")
        files = {str(p.relative_to(tmp)): _sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
        manifest = {
            "generator": "lmms-eval-plugins export-upstream",
            "lmms_eval_plugins_version": __version__,
            "benchmark": plan.benchmark,
            "source_folder": str(plan.task_folder),
            "vendored_package": plan.vendor_name,
            "vendored_modules": {m: plan.why[m] for m in sorted([*plan.modules, *plan.packages, *plan.own])},
            "third_party_imports": sorted(plan.third_party),
            "files": files,
        }
        write_atomic(tmp / VENDOR_DIR / MANIFEST, json.dumps(manifest, indent=2) + "\n")
        if target.exists():
            shutil.rmtree(target)
        move_into_place(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return ExportResult(target, plan, files, warnings)


# ------------------------------------------------------------------------------------------------ CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lmms-eval-plugins export-upstream",
        description="Write a self-contained lmms_eval/tasks/<name>/ folder (YAMLs, utils.py, the shared helpers it needs "
        "vendored under _vendor/, sample data, README) that runs with stock lmms-eval, without this package.",
    )
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="TASK_FOLDER ... DEST",
        help="installed benchmark names (see `lmms-eval-plugins tasks`) or task folder paths, then the destination folder; "
        "each task is written to DEST/<name>/ (e.g. DEST = lmms_eval/tasks)",
    )
    parser.add_argument(
        "--all", action="store_true", help="export every benchmark of this package (then only DEST is given)"
    )
    parser.add_argument("--force", action="store_true", help="replace earlier exports in DEST")
    parser.add_argument("--dry-run", action="store_true", help="print what would be vendored, write nothing")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    *sources, dest = args.paths
    if args.all:
        if sources:
            parser.error("--all takes only DEST")
        sources = benchmarks()
    elif not sources:
        parser.error("give at least one TASK_FOLDER and a DEST (or --all DEST)")
    status = 0
    for source in sources:
        try:
            if args.dry_run:
                plan = plan_export(source)
                print(f"{plan.benchmark}: would vendor as {plan.vendor_name}:")
                for name in sorted([*plan.modules, *plan.packages]):
                    print(f"  {name:<40} needed by {plan.why[name]}")
                print(f"  third-party imports: {', '.join(sorted(plan.third_party))}")
                continue
            result = export_task(source, dest, force=args.force)
        except ExportError as exc:
            print(f"export-upstream: {source}: {exc}", file=sys.stderr)
            status = 1
            continue
        vendored = sorted([*result.plan.modules, *result.plan.packages])
        print(f"{result.folder}  ({len(result.files)} files; vendored {', '.join(vendored)})")
        for warning in result.warnings:
            print(f"  warning: {warning}", file=sys.stderr)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
