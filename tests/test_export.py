"""``lmms-eval-plugins export-upstream``: self-contained task folders that run on stock lmms-eval.

Fast tests check the import graph, the rewriting and the copy on the errorradar folder (and a
synthetic judged folder) and import an exported ``utils.py`` with this package blocked. The slow test
(``wheel`` marker) exports every benchmark, installs lmms-eval alone into a fresh virtual environment
(cached under ``$LMMS_EVAL_PLUGINS_TEST_CACHE`` when set), runs every exported ``*_sample`` task there
with lmms-eval's ``dummy`` model through ``--include_path``, and checks that the results equal those of
the installed package's tasks.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lmms_eval_plugins import export as ex
from lmms_eval_plugins import tasks_dir
from lmms_eval_plugins.tasks_command import task_names
from lmms_eval_plugins.cli_run import OFFLINE_ENV, run_lmms_eval

REPO = Path(__file__).resolve().parents[1]
# The benchmark package is vendored module by module: errorradar's export holds no other benchmark's code.
ER_MODULES = {
    "data",
    "errors",
    "media",
    "messages",
    "metrics",
    "outcome",
    "parsing",
    "parsing_letters",
    "parsing_markup",
    "parsing_steps",
    "parsing_times",
    "doc_fields",
    "benchmarks",
    "benchmarks.errorradar",
    "benchmarks.errorradar.tasks",
    "frame_cache",
    "settings",
    "benchmark",
    "yaml_index",
    "task_hooks",
    "benchmarks.errorradar.spec",
    "benchmarks.errorradar.scoring",
    "benchmarks.errorradar.records",
    "run_state",
    "safe_files",
    "bounded_http",
    "stats",
}

# Run in a subprocess: import hooks that make `lmms_eval_plugins` unimportable, as on a machine with
# stock lmms-eval only. Entry points of our judge group are hidden too (no installed metadata there).
BLOCKER = textwrap.dedent("""
    import importlib.abc, importlib.metadata, sys

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "lmms_eval_plugins" or name.startswith("lmms_eval_plugins."):
                raise ModuleNotFoundError(f"blocked: {name}")
            return None

    sys.meta_path.insert(0, Block())
    _entry_points = importlib.metadata.entry_points
    def entry_points(**kw):
        if kw.get("group") == "lmms_eval_plugins.judges":
            return importlib.metadata.EntryPoints([])
        return _entry_points(**kw)
    importlib.metadata.entry_points = entry_points
""")


def run_isolated(code: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(OFFLINE_ENV)
    # -P: no cwd on sys.path (the repo must not leak in)
    return subprocess.run(
        [sys.executable, "-P", "-c", BLOCKER + textwrap.dedent(code)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def imports_of(path: Path) -> set[str]:
    return {name for name, _ in ex.imported_names(ast.parse(path.read_text(encoding="utf-8")), package="x.y")}


# ------------------------------------------------------------------------------------------------ unit


def test_plan_follows_the_import_graph_of_errorradar():
    plan = ex.plan_export("errorradar")
    assert plan.vendor_name == "lmms_eval_plugins_errorradar"
    assert set(plan.modules) == {f"lmms_eval_plugins.{m}" for m in ER_MODULES}
    assert plan.packages == {}  # no judge
    assert plan.why["lmms_eval_plugins.benchmarks.errorradar.tasks"].startswith("utils.py")
    assert plan.why["lmms_eval_plugins.errors"].startswith("lmms_eval_plugins.benchmarks.errorradar.tasks")
    assert {"PIL", "datasets", "huggingface_hub"} <= plan.third_party
    assert not {m for m in plan.third_party if m.startswith("lmms_eval_plugins")}


def test_rewrite_renames_module_references_only():
    source = textwrap.dedent('''\
        """Docs mention lmms_eval_plugins.data, which stays."""
        from __future__ import annotations
        import importlib
        from importlib import resources
        import lmms_eval_plugins.media as media
        from lmms_eval_plugins.data import (read_json,
                                            to_dataset)
        from lmms_eval_plugins import parsing
        ENV = "LMMS_EVAL_PLUGINS_DATA_ROOT"
        GROUP = "lmms_eval_plugins.judges"

        def f():
            from lmms_eval_plugins.metrics import accuracy
            importlib.import_module("lmms_eval_plugins.judges.rubric")
            return resources.files("lmms_eval_plugins.judges"), "lmms_eval_plugins_not_a_module"
        ''')
    text, changed = ex.rewrite_source(source, "vend_x")
    assert changed == 6
    assert "import vend_x.media as media" in text
    assert "from vend_x.data import (read_json," in text and "from vend_x import parsing" in text
    assert "from vend_x.metrics import accuracy" in text
    assert 'import_module("vend_x.judges.rubric")' in text and 'resources.files("vend_x.judges")' in text
    # kept: docstrings, environment variable names, the entry-point group, other strings
    assert "Docs mention lmms_eval_plugins.data" in text and '"LMMS_EVAL_PLUGINS_DATA_ROOT"' in text
    assert 'GROUP = "lmms_eval_plugins.judges"' in text and '"lmms_eval_plugins_not_a_module"' in text
    assert not {n for n in imports_of_text(text) if n.split(".")[0] == "lmms_eval_plugins"}
    with pytest.raises(ex.ExportError, match="binds the name"):
        ex.rewrite_source("import lmms_eval_plugins.data\n", "vend_x")


def imports_of_text(text: str) -> set[str]:
    return {name for name, _ in ex.imported_names(ast.parse(text), package="x.y")}


def test_bootstrap_goes_after_the_docstring_and_future_imports():
    source = '"""Doc."""\n\nfrom __future__ import annotations\n\nimport re\n'
    text = ex.add_bootstrap(source, "vend_x")
    compile(text, "utils.py", "exec")
    assert text.index("from __future__") < text.index("_sys.path.append") < text.index("import re")
    assert ex.add_bootstrap(text, "vend_x") == text  # idempotent


def _module_file(name: str) -> str:
    """``benchmarks.errorradar`` -> ``benchmarks/errorradar/__init__.py``; ``data`` -> ``data.py``."""
    path = REPO / "lmms_eval_plugins" / name.replace(".", "/")
    return f"{name.replace('.', '/')}/__init__.py" if path.is_dir() else f"{name.replace('.', '/')}.py"


def test_export_errorradar_is_the_source_with_renamed_imports(tmp_path):
    result = ex.export_task("errorradar", tmp_path)
    out, src = tmp_path / "errorradar", tasks_dir() / "errorradar"
    assert result.folder == out
    # task files copied unchanged (YAMLs, sources, sample data)
    for path in src.rglob("*"):
        rel = path.relative_to(src)
        if path.is_file() and "__pycache__" not in rel.parts and path.suffix != ".py" and path.name != "README.md":
            assert (out / rel).read_bytes() == path.read_bytes(), rel
    vendor = out / "_vendor" / "lmms_eval_plugins_errorradar"
    assert {p.relative_to(vendor).as_posix() for p in vendor.rglob("*.py")} == {_module_file(m) for m in ER_MODULES} | {
        "__init__.py"
    }
    # no Python file of the export imports the package any more; utils.py imports the vendored copy
    for path in out.rglob("*.py"):
        assert not {n for n in imports_of(path) if n.split(".")[0] == "lmms_eval_plugins"}, path
    assert "lmms_eval_plugins_errorradar.benchmarks.errorradar.tasks" in imports_of(out / "utils.py")
    assert {"lmms_eval_plugins_errorradar.data", "lmms_eval_plugins_errorradar.parsing"} <= imports_of(
        vendor / "benchmarks" / "errorradar" / "tasks.py"
    )
    # vendored modules differ from the package's only in the renamed import lines
    for name in ER_MODULES:
        original = (REPO / "lmms_eval_plugins" / _module_file(name)).read_text(encoding="utf-8").splitlines()
        copied = (vendor / _module_file(name)).read_text(encoding="utf-8").splitlines()
        assert len(original) == len(copied)
        changed = [(a, b) for a, b in zip(original, copied) if a != b]
        assert all(b == a.replace("lmms_eval_plugins", "lmms_eval_plugins_errorradar") for a, b in changed), name
    utils = (out / "utils.py").read_text(encoding="utf-8")
    assert utils.count(ex.BOOTSTRAP_MARK) == 1
    # README: the task's own README, then the generated sections
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert readme.startswith((src / "README.md").read_text(encoding="utf-8").rstrip())
    assert "## Citation" in readme and "lmms_eval_plugins_errorradar" in readme and "errorradar_sample" in readme
    manifest = json.loads((out / "_vendor" / "EXPORT.json").read_text())
    assert manifest["vendored_package"] == "lmms_eval_plugins_errorradar"
    assert set(manifest["vendored_modules"]) == {f"lmms_eval_plugins.{m}" for m in ER_MODULES}
    for rel, digest in manifest["files"].items():
        assert ex._sha256(out / rel) == digest


def test_export_refuses_to_overwrite_and_replaces_with_force(tmp_path, capsys):
    assert ex.main(["errorradar", str(tmp_path)]) == 0
    assert ex.main(["errorradar", str(tmp_path)]) == 1
    assert "--force" in capsys.readouterr().err
    (tmp_path / "errorradar" / "stray.txt").write_text("x")
    assert ex.main(["errorradar", str(tmp_path), "--force"]) == 0
    assert not (tmp_path / "errorradar" / "stray.txt").exists()
    source = tmp_path / "src" / "other"
    source.mkdir(parents=True)
    (source / "x.yaml").write_text("task: x\n")
    (tmp_path / "dest" / "other").mkdir(parents=True)  # a folder that is not an export: never replaced
    with pytest.raises(ex.ExportError, match="not an earlier export"):
        ex.export_task(source, tmp_path / "dest", force=True)
    assert ex.main(["no_such_benchmark", str(tmp_path / "x")]) == 1


def test_exported_errorradar_loads_and_scores_without_the_package(tmp_path):
    ex.export_task("errorradar", tmp_path / "tasks")
    yaml_path = tmp_path / "tasks" / "errorradar" / "errorradar_step_sample.yaml"
    proc = run_isolated(
        f"""
        import sys
        from lmms_eval.utils import load_yaml_config   # how lmms-eval reads a task YAML and its !function hooks
        config = load_yaml_config({str(yaml_path)!r}, mode="full")
        docs = config["process_docs"]([{{"benchmark": "errorradar", "source": "sample"}}])
        messages = config["doc_to_messages"](docs[0])
        kinds = [part["type"] for part in messages[0]["content"]]
        item = config["process_results"](docs[0], [docs[0]["oracle_response"]])["step_acc"]
        assert "lmms_eval_plugins" not in sys.modules
        vendored = sorted(m for m in sys.modules if m.startswith("lmms_eval_plugins_errorradar"))
        print(len(docs), kinds, item["correct"], item["parse_error"], vendored)
    """,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "10 ['text', 'image', 'text'] True None" in proc.stdout
    assert "lmms_eval_plugins_errorradar.parsing" in proc.stdout


JUDGED_UTILS = '''\
"""A judged task (synthetic)."""

from __future__ import annotations

from lmms_eval_plugins.judges import JudgeFilter, aggregate_judged  # noqa: F401
from lmms_eval_plugins.judges.base import JudgeItem


def judge_item(response, doc):
    return JudgeItem(question="q", prediction=response, reference="B")
'''


def test_a_judged_task_vendors_the_judges_and_finds_them_without_entry_points(tmp_path):
    folder = tmp_path / "src" / "judgedtask"
    folder.mkdir(parents=True)
    (folder / "utils.py").write_text(JUDGED_UTILS)
    (folder / "judgedtask.yaml").write_text(
        "task: judgedtask\nfilter_list:\n  - name: none\n    filter:\n"
        "      - function: !function utils.JudgeFilter\n        judge: semantic_match\n"
    )
    plan = ex.plan_export(folder)
    assert set(plan.packages) == {"lmms_eval_plugins.judges"}
    assert "lmms_eval_plugins.errors" in plan.modules  # judges/base.py imports it: followed transitively
    result = ex.export_task(folder, tmp_path / "tasks")
    judges = result.folder / "_vendor" / "lmms_eval_plugins_judgedtask" / "judges"
    shipped = {
        p.relative_to(REPO / "judges")
        for p in (REPO / "judges").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert {p.relative_to(judges) for p in judges.rglob("*") if p.is_file()} == shipped  # the whole package
    proc = run_isolated(
        f"""
        import importlib.util, os, sys
        os.environ["LMMS_EVAL_PLUGINS_JUDGE_CACHE"] = {str(tmp_path / "cache.sqlite3")!r}
        spec = importlib.util.spec_from_file_location("utils", {str(result.folder / "utils.py")!r})
        utils = importlib.util.module_from_spec(spec); spec.loader.exec_module(utils)
        from lmms_eval_plugins_judgedtask.judges import available_judges, load_judge
        judge = load_judge("semantic_match_offline")
        verdict = judge.judge(utils.judge_item("so the answer is \\\\boxed{{B}}", {{}}))
        assert type(judge).__module__.startswith("lmms_eval_plugins_judgedtask.judges"), type(judge).__module__
        assert "lmms_eval_plugins" not in sys.modules
        print(sorted(available_judges()), verdict.score)
    """,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "['rubric', 'rubric_offline', 'semantic_match', 'semantic_match_offline'] 1.0" in proc.stdout


@pytest.mark.parametrize(
    "benchmark, judge_name, prompt_ref",
    [
        ("crossvid", "rubric", "lmms_eval_plugins.benchmarks.crossvid.ccqa:CCQA_JUDGE_PROMPT"),
        ("virectify", "semantic_match", "lmms_eval_plugins.benchmarks.virectify.judge_prompt:ACC_R_JUDGE_PROMPT"),
    ],
)
def test_an_exported_benchmark_carries_its_judge_prompt(tmp_path, benchmark, judge_name, prompt_ref):
    """A judge prompt is a module of its benchmark's package (an export copies no data file of it): the
    exported task's filter is told it, and the vendored judge sends it byte for byte, with neither the
    package nor entry points."""
    from lmms_eval_plugins.benchmark import load_ref

    prompt = load_ref(prompt_ref)
    result = ex.export_task(benchmark, tmp_path / "tasks")
    proc = run_isolated(
        f"""
        import hashlib, importlib.util, sys
        spec = importlib.util.spec_from_file_location("utils", {str(result.folder / "utils.py")!r})
        utils = importlib.util.module_from_spec(spec); spec.loader.exec_module(utils)
        from lmms_eval_plugins_{benchmark}.judges import load_judge
        told = utils.JudgeFilter.told_prompt  # the task's filter is told its spec's prompt: nothing searched
        judge = load_judge({judge_name!r}, system_prompt=told)
        assert type(judge).__module__ == "lmms_eval_plugins_{benchmark}.judges.{judge_name}", type(judge).__module__
        assert "lmms_eval_plugins" not in sys.modules
        print(hashlib.sha256(judge.system_prompt.encode("utf-8")).hexdigest())
    """,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert hashlib.sha256(prompt.encode("utf-8")).hexdigest() in proc.stdout


def test_builtin_judge_table_matches_the_declared_entry_points():
    """The vendored registry falls back to BUILTIN_JUDGES; it must name what pyproject.toml declares."""
    from lmms_eval_plugins.judges.registry import BUILTIN_JUDGES

    declared = {
        ep.name: ep.value
        for ep in importlib.metadata.entry_points(group="lmms_eval_plugins.judges")
        if ep.value.startswith("lmms_eval_plugins.judges.")
    }
    assert {name: target.replace("lmms_eval_plugins.judges", "") for name, target in declared.items()} == BUILTIN_JUDGES


def test_yaml_that_names_the_package_directly_is_refused(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "utils.py").write_text("x = 1\n")
    (folder / "bad.yaml").write_text(
        "task: bad\nprocess_results: !function lmms_eval_plugins.judges.filter.judged_mean\n"
    )
    with pytest.raises(ex.ExportError, match="bad.yaml line 2"):
        ex.export_task(folder, tmp_path / "out")


# ------------------------------------------------------------------------------------------------ stock lmms-eval


def sample_benchmarks() -> list[str]:
    """Task folders holding at least one *_sample task."""
    return sorted({p.parent.name for p in tasks_dir().glob("*/*_sample.yaml") if p.stem in task_names()})


def sample_tasks() -> list[str]:
    folders = set(sample_benchmarks())
    names = task_names()
    return sorted(
        p.stem for p in tasks_dir().glob("*/*_sample.yaml") if p.parent.name in folders and names.get(p.stem) == "task"
    )


@pytest.fixture(scope="session")
def stock_venv(tmp_path_factory) -> Path:
    """A virtual environment with only lmms-eval (our version of it) and decord, at the lock's versions
    (stock lmms-eval 0.7.3 with the newest filelock cannot run at all)."""
    version = importlib.metadata.version("lmms_eval")
    base = os.environ.get("LMMS_EVAL_PLUGINS_TEST_CACHE")
    lock = hashlib.sha256((REPO / "constraints.txt").read_bytes()).hexdigest()[:12]  # a new lock, a new venv
    folder = (
        Path(base) / f"stock-lmms-eval-{version}-{lock}" if base else tmp_path_factory.mktemp("stock-venv") / "venv"
    )
    marker = folder / "READY"
    python = folder / "bin" / "python"
    if marker.is_file() and python.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=300)
    install = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-q",
            "-c",
            str(REPO / "constraints.txt"),
            f"lmms-eval=={version}",
            "decord",
        ],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    assert install.returncode == 0, f"pip install lmms-eval=={version} decord failed:\n{install.stderr[-3000:]}"
    marker.write_text(version + "\n")
    return folder


@pytest.mark.wheel
def test_exported_sample_tasks_run_on_stock_lmms_eval(tmp_path, stock_venv, isolated_env):
    tasks = sample_tasks()
    assert {"errorradar_step_sample", "mmerror_etc_sample"} <= set(tasks)
    for benchmark in sample_benchmarks():
        ex.export_task(benchmark, tmp_path / "tasks")
    python = stock_venv / "bin" / "python"
    probe = subprocess.run(
        [str(python), "-P", "-c", "import lmms_eval_plugins"],
        cwd=tmp_path,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert probe.returncode != 0, "lmms_eval_plugins must not be importable in the stock environment"
    env = {"LMMS_EVAL_PLUGINS_JUDGE": "offline", "PYTHONPATH": "", "PYTHONSAFEPATH": "1"}

    # stock lmms-eval (python -P: the current folder, the repo, is not on sys.path) with the exported folders
    stock = run_lmms_eval(
        tasks=tasks,
        model="dummy",
        output_dir=tmp_path / "stock",
        include_path=str(tmp_path / "tasks"),
        env=env,
        launcher=[str(python), "-P"],
        timeout=1800,
    )
    assert stock.results_path is not None, stock.tail()
    missing = [t for t in tasks if t not in stock.results.get("results", {})]
    assert not missing, f"no results for {missing}:\n{stock.tail()}"
    # the media logged for image tasks are the exported folder's sample files
    local_media = [
        str(m)
        for task in tasks
        for s in stock.samples(task)
        for m in s.get("input_media") or []
        if str(m).startswith("/")
    ]
    assert local_media and all(m.startswith(str(tmp_path / "tasks")) for m in local_media)

    # the same tasks from the installed package give the same numbers
    ours = run_lmms_eval(
        tasks=tasks,
        model="dummy",
        output_dir=tmp_path / "ours",
        env={"LMMS_EVAL_PLUGINS_JUDGE": "offline"},
        timeout=1800,
    )

    # (error bars are the plugin's lmms-eval hook: stock lmms-eval leaves our custom aggregations' *_stderr N/A)
    def numbers(results: dict) -> dict:  # and the CLT columns in metric units (the clt-columns hook, issue 37)
        return {k: v for k, v in results.items() if not k.endswith(("_stderr", "_stderr_clt", "_stderr_clustered"))}

    for task in tasks:
        assert numbers(stock.task_results(task)) == numbers(ours.task_results(task)), task
