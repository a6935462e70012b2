"""The benchmark spec and its registry: YAML metric lists agree with each spec, hooks resolve, the core
names no benchmark, a broken third-party entry point is left out with a warning."""

from __future__ import annotations

import ast
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from lmms_eval_plugins import benchmark as B
from lmms_eval_plugins import yaml_sync
from lmms_eval_plugins.report import split_task
from testkit.task_utils import load_task_adapter

REPO = Path(__file__).resolve().parents[1]
OURS = ("errorradar", "mmerror", "crossvid", "causalstep", "virectify")


def test_our_benchmarks_register_through_the_entry_point_group():
    names = [b.name for b in B.ordered_benchmarks()]
    assert names[: len(OURS)] == list(OURS)  # `order` puts ours first, in the papers' order
    for name in OURS:
        spec = B.get(name)
        assert spec.tasks_dir.is_dir() and spec.readme is not None and spec.readme.is_file()
        assert callable(spec.resolve("report_section")) and callable(spec.resolve("sample_data"))
        assert spec.metric_lists and all(spec.metric_lists.values())


def test_unknown_benchmark_names_what_is_installed():
    with pytest.raises(KeyError, match="installed: errorradar"):
        B.get("nope")


@pytest.mark.parametrize(
    "task, owner, role, variant",
    [
        ("errorradar_step_sample", "errorradar", "step", "sample"),
        ("crossvid_bu_sample", "crossvid", "bu", "sample"),
        ("crossvid", "crossvid", None, ""),
        ("mmerror_epd", "mmerror", "epd", ""),
        ("causalstep_sample_restart_same", "causalstep", None, "sample_restart_same"),
        ("mmerrorx", None, None, "mmerrorx"),  # a prefix is a whole name, not a substring
        ("mmmu_val", None, None, "mmmu_val"),
    ],
)
def test_tasks_map_to_their_benchmark_role_and_variant(task, owner, role, variant):
    spec = B.benchmark_of_task(task)
    assert (spec.name if spec else None) == owner
    assert split_task(task) == (owner, role, variant)


@pytest.mark.parametrize("name", OURS)
def test_yaml_metric_lists_agree_with_the_spec(name):
    assert yaml_sync.sync(B.get(name), check=True) == []


@pytest.mark.parametrize("name", OURS)
def test_every_hook_the_yamls_name_resolves_in_the_adapter(name):
    spec = B.get(name)
    adapter = load_task_adapter(name)
    named = {
        hook
        for path in spec.tasks_dir.iterdir()
        if path.is_file() and "yaml" in path.name
        for hook in re.findall(r"!function utils\.(\w+)", path.read_text(encoding="utf-8"))
    }
    named |= {m.hook for metrics in spec.metric_lists.values() for m in metrics}
    missing = sorted(h for h in named if not callable(getattr(adapter, h, None)))
    assert missing == []
    # the adapter is thin and explicit: imports, then one plain binding per name (no globals(), no code)
    source = (spec.tasks_dir / "utils.py").read_text(encoding="utf-8")
    body = ast.parse(source).body
    assert not any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) for node in body)
    assert "globals()" not in source
    bindings = [node for node in body if isinstance(node, ast.Assign)]
    assert all(isinstance(node, (ast.Expr, ast.Import, ast.ImportFrom, ast.Assign)) for node in body)
    assert all(len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) for node in bindings)
    bound = {node.targets[0].id for node in bindings}
    assert named <= bound  # every hook the YAMLs name is a line of its own: "go to definition" lands on it


def _copy(spec: B.Benchmark, tmp_path: Path) -> B.Benchmark:
    folder = tmp_path / spec.name
    shutil.copytree(spec.tasks_dir, folder, ignore=shutil.ignore_patterns("sample_data", "__pycache__"))
    return replace(spec, tasks_dir=folder)


def test_a_yaml_that_drifts_from_its_spec_is_caught_and_regenerated(tmp_path):
    spec = _copy(B.get("errorradar"), tmp_path)
    path = spec.tasks_dir / "_step_template_yaml"
    original = path.read_text(encoding="utf-8")
    # drop one metric from the YAML by hand: lmms-eval would silently never report it
    drifted = re.sub(r"  - metric: step_parse_fail\n(    .*\n){2}", "", original)
    assert drifted != original
    path.write_text(drifted, encoding="utf-8")
    assert yaml_sync.sync(spec, check=True) == [f"errorradar: {path} metric_list differs from the spec"]
    assert path.read_text(encoding="utf-8") == drifted  # --check changes nothing
    yaml_sync.sync(spec)
    assert path.read_text(encoding="utf-8") == original
    assert yaml_sync.sync(spec, check=True) == []


def test_a_utils_py_that_drifts_from_its_generator_is_caught_and_regenerated(tmp_path):
    # a metric added to the spec needs its aggregation line in utils.py: sync-yaml writes it
    spec = _copy(B.get("errorradar"), tmp_path)
    path = spec.tasks_dir / "utils.py"
    original = path.read_text(encoding="utf-8")
    drifted = original.replace('agg_cate_acc = aggregation_hook(BENCHMARK, "agg_cate_acc")\n', "")
    assert drifted != original
    path.write_text(drifted, encoding="utf-8")
    assert yaml_sync.sync(spec, check=True) == [f"errorradar: {path} differs from its generator"]
    assert path.read_text(encoding="utf-8") == drifted
    assert yaml_sync.sync(spec) == [f"errorradar: {path} differs from its generator (rewritten)"]
    assert path.read_text(encoding="utf-8") == original
    assert yaml_sync.sync(spec, check=True) == []


def test_a_metric_list_the_spec_does_not_declare_is_caught(tmp_path):
    spec = _copy(B.get("mmerror"), tmp_path)
    lists = dict(spec.metric_lists)
    lists.pop("_epd_template_yaml")
    spec = replace(spec, metric_lists=lists)
    assert yaml_sync.sync(spec, check=True) == [
        f"mmerror: {spec.tasks_dir / '_epd_template_yaml'} declares a metric_list its spec does not have"
    ]


def test_sync_yaml_check_command_exit_status(tmp_path, capsys):
    assert yaml_sync.main(["--check"]) == 0
    assert "agree with their specs" in capsys.readouterr().out


def test_a_broken_third_party_entry_point_is_left_out_with_a_warning(monkeypatch, caplog):
    class EP:
        def __init__(self, name, value, obj):
            self.name, self.value, self._obj = name, value, obj

        def load(self):
            if isinstance(self._obj, Exception):
                raise self._obj
            return self._obj

    good = B.get("errorradar")
    fake = [
        EP("errorradar", "x:BENCHMARK", good),
        EP("broken", "nope:BENCHMARK", ImportError("no module named nope")),
        EP("notaspec", "x:y", object()),
    ]
    monkeypatch.setattr(B.metadata, "entry_points", lambda group: fake if group == B.ENTRY_POINT_GROUP else [])
    B.registry.cache_clear()
    try:
        assert list(B.registry()) == ["errorradar"]
    finally:
        B.registry.cache_clear()
    assert "'broken'" in caplog.text and "no module named nope" in caplog.text and "not a Benchmark" in caplog.text


# --------------------------------------------------------------------------- the core names no benchmark

CORE = sorted(
    [*REPO.glob("lmms_eval_plugins/*.py"), *REPO.glob("lmms_eval_plugins/models/*.py"), *REPO.glob("judges/*.py")]
)


def _names_in_code(path: Path) -> list[str]:
    """Identifiers and string constants of a module, docstrings excluded (comments are not in the AST)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            found.append(node.value)
        elif isinstance(node, ast.Name):
            found.append(node.id)
        elif isinstance(node, ast.Attribute):
            found.append(node.attr)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append(node.name)
        elif isinstance(node, ast.alias):
            found.append(node.name)
    return found


def test_the_core_names_no_benchmark_in_its_code():
    pattern = re.compile("|".join(OURS), re.IGNORECASE)
    assert len(CORE) > 20
    hits = [
        f"{path.relative_to(REPO)}: {text[:80]!r}"
        for path in CORE
        for text in _names_in_code(path)
        if pattern.search(text)
    ]
    assert hits == []


# --------------------------------------------------------------------------- tasks / info commands


def test_tasks_lists_each_benchmark_with_its_needs_and_tasks(capsys):
    from lmms_eval_plugins import tasks_command

    assert tasks_command.main([]) == 0
    out = capsys.readouterr().out
    for name in OURS:
        spec = B.get(name)
        block = out[out.index(f"{name}: {spec.title}.") :]
        assert f"  data:  {spec.data}" in block and f"lmms-eval-plugins info {name}" in block
        assert re.search(rf"^  {name}_\w*sample\w* +(task|group)$", block, re.M)
    assert "judge: none" in out[out.index("errorradar:") : out.index("mmerror:")]
    assert "judge: rubric" in out[out.index("crossvid:") : out.index("causalstep:")]
    assert tasks_command.main(["--names"]) == 0
    assert "crossvid_bu_sample\ttask" in capsys.readouterr().out.splitlines()


def test_info_prints_the_installed_readme_of_a_task_or_benchmark(capsys):
    from lmms_eval_plugins import tasks_command

    mark = tasks_command.mark_source_only  # repository-only files are marked (tests/test_tasks_command.py)
    assert tasks_command.info("crossvid_bu_sample") == mark(B.get("crossvid").readme.read_text(encoding="utf-8"))
    assert tasks_command.info("causalstep") == mark(B.get("causalstep").readme.read_text(encoding="utf-8"))
    with pytest.raises(SystemExit, match="no installed benchmark owns 'mmmu_val'"):
        tasks_command.info("mmmu_val")


@pytest.mark.parametrize("name", OURS)
def test_no_spec_lists_the_run_counts_and_every_list_ends_with_them(name):
    # issue 38: the core appends the run-wide counts to every metric list (Benchmark.__post_init__)
    spec = B.get(name)
    source = (REPO / "lmms_eval_plugins" / "benchmarks" / name / "spec.py").read_text(encoding="utf-8")
    counts = [m.name for m in B.RUN_COUNT_METRICS]
    assert not [c for c in counts if f'"{c}"' in source or f"'{c}'" in source]
    for metrics in spec.metric_lists.values():
        assert [m.name for m in metrics[-len(counts) :]] == counts
    assert B.with_run_counts(B.with_run_counts(())) == B.RUN_COUNT_METRICS  # appended once
