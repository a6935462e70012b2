"""``lmms-eval-plugins new-benchmark``: the names it refuses, the package it writes, and that package working.

Fast tests generate into a temporary folder and check the files, that the Python compiles and that the
generated unit tests pass (pytest in a subprocess). The slow test (``wheel`` marker) installs the
generated package, offline and without build isolation, into a virtual environment layered on this
one, and runs there what a maintainer would: ``lmms-eval --tasks list``, the sample task with
``--model oracle`` (accuracy 100) and ``--model random``, ``lmms-eval-plugins report`` and
``export-upstream``. lmms-eval can exit 0 when a task failed, so the results JSON is what is checked.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import site
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lmms_eval_plugins import scaffold, yaml_sync
from lmms_eval_plugins.benchmark import Benchmark, registry
from lmms_eval_plugins.cli_run import OFFLINE_ENV, RunResult, run_lmms_eval

OURS = ("errorradar", "mmerror", "crossvid", "causalstep", "virectify")
NAME = "scaffold_demo"


def generate(dest: Path, name: str = NAME, *extra: str) -> Path:
    assert scaffold.main([name, "--dest", str(dest), *extra]) == 0
    return dest / f"lmms-eval-plugins-{name.replace('_', '-')}"


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    return generate(tmp_path_factory.mktemp("scaffold"), NAME, "--title", "Scaffold Demo")


@pytest.fixture()
def generated_spec(generated, monkeypatch) -> Iterator[Benchmark]:
    """The generated ``spec`` imported from the generated folder (then forgotten again)."""
    monkeypatch.syspath_prepend(str(generated))
    package = f"{NAME}_bench"
    try:
        yield importlib.import_module(f"{package}.spec").BENCHMARK
    finally:
        for module in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[module]
        sys.modules.pop(f"lmms_eval_plugins_task_utils_{NAME}", None)


# ------------------------------------------------------------------------------------------------ names


@pytest.mark.parametrize(
    "name", ["", "MyBench", "1bench", "my-bench", "my bench", "my__bench", "bench_", "_bench", "naïve", "a" * 41]
)
def test_malformed_names_are_refused(name, tmp_path, capsys):
    assert scaffold.main([name, "--dest", str(tmp_path)]) == 2
    assert "new-benchmark: error:" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("name", sorted({*OURS, *registry()}))
def test_installed_benchmark_names_are_refused(name, tmp_path, capsys):
    assert scaffold.main([name, "--dest", str(tmp_path)]) == 2
    assert "already an installed benchmark" in capsys.readouterr().err


def test_a_name_that_would_own_an_installed_benchmarks_tasks_is_refused(tmp_path, capsys):
    from lmms_eval_plugins.tasks_command import task_names

    spec = registry()["errorradar"]
    task = next(t for t in sorted(task_names(spec.tasks_dir)) if t.count("_") >= 2)  # errorradar_step_sample...
    prefix = task.rsplit("_", 1)[0]
    assert scaffold.main([prefix, "--dest", str(tmp_path)]) == 2
    assert "would take over tasks of the installed benchmark 'errorradar'" in capsys.readouterr().err


def test_lmms_eval_builtin_task_prefixes_are_refused(tmp_path, capsys):
    folder = scaffold.builtin_task_folder()
    assert folder is not None and folder.is_dir()
    builtin = next(
        p.name
        for p in sorted(folder.iterdir())
        if p.is_dir() and scaffold.NAME_PATTERN.fullmatch(p.name) and not p.name.endswith("_") and "__" not in p.name
    )
    assert scaffold.main([builtin, "--dest", str(tmp_path)]) == 2
    assert "clashes with lmms-eval's built-in tasks" in capsys.readouterr().err


def test_a_name_whose_package_is_already_importable_is_refused(tmp_path, monkeypatch, capsys):
    (tmp_path / "taken_name_bench.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert scaffold.main(["taken_name", "--dest", str(tmp_path / "out")]) == 2
    assert "'taken_name_bench' is already importable" in capsys.readouterr().err


@pytest.mark.parametrize("title", ["", 'The "X"', "back\\slash", "two\nlines"])
def test_titles_that_cannot_go_into_code_are_refused(title, tmp_path, capsys):
    assert scaffold.main([NAME, "--dest", str(tmp_path), "--title", title]) == 2
    assert "--title" in capsys.readouterr().err


def test_an_existing_folder_needs_force(tmp_path, capsys):
    root = generate(tmp_path)
    (root / "README.md").write_text("edited\n")
    assert scaffold.main([NAME, "--dest", str(tmp_path)]) == 2
    assert "--force" in capsys.readouterr().err
    assert (root / "README.md").read_text() == "edited\n"
    assert scaffold.main([NAME, "--dest", str(tmp_path), "--force"]) == 0
    assert (root / "README.md").read_text() != "edited\n"


# ------------------------------------------------------------------------------------------------ files


def test_the_package_layout(generated):
    files = {p.relative_to(generated).as_posix() for p in generated.rglob("*") if p.is_file()}
    pkg, tasks = f"{NAME}_bench", f"{NAME}_bench/task_yamls/{NAME}"
    assert files == {
        "pyproject.toml",
        "README.md",
        ".gitignore",
        f"tests/test_{NAME}.py",
        f"{pkg}/__init__.py",
        f"{pkg}/spec.py",
        f"{pkg}/scoring.py",
        f"{pkg}/tasks.py",
        f"{tasks}/_{NAME}_template_yaml",
        f"{tasks}/{NAME}_sample.yaml",
        f"{tasks}/{NAME}.yaml",
        f"{tasks}/utils.py",
        f"{tasks}/README.md",
        f"{tasks}/sources/sample.json",
        f"{tasks}/sources/auto.json",
        f"{tasks}/sample_data/records.jsonl",
    }
    assert not re.search(r"@[A-Z][A-Z_]*@", "".join(p.read_text() for p in generated.rglob("*") if p.is_file()))


def test_pyproject_registers_the_benchmark_and_ships_the_task_folder(generated):
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    project = tomllib.loads((generated / "pyproject.toml").read_text())
    assert project["project"]["name"] == "lmms-eval-plugins-scaffold-demo"
    assert project["project"]["dependencies"] == ["lmms-eval-plugins"]
    assert project["project"]["entry-points"]["lmms_eval_plugins.benchmarks"] == {NAME: f"{NAME}_bench.spec:BENCHMARK"}
    setuptools = project["tool"]["setuptools"]
    task_package = f"{NAME}_bench.task_yamls.{NAME}"
    assert task_package in setuptools["packages"]
    patterns = setuptools["package-data"][task_package]
    assert {"*.yaml", "_*_yaml", "sample_data/*", "sources/*.json"} <= set(patterns)


def test_generated_python_compiles(generated):
    sources = sorted(generated.rglob("*.py"))
    assert len(sources) == 6
    for path in sources:
        compile(path.read_text(encoding="utf-8"), str(path), "exec")


def test_the_spec_and_its_yaml_agree(generated_spec):
    spec = generated_spec
    assert (spec.name, spec.title) == (NAME, "Scaffold Demo")
    # the spec lists two metrics; the core ends the list with the run-wide counts
    assert [m.name for m in spec.metrics().values()] == [
        "accuracy",
        "parse_fail",
        "skipped",
        "unscored",
        "skipped_by_reason",
    ]
    assert spec.metrics()["accuracy"].unit == "%" and spec.metrics()["parse_fail"].unit == "count"
    assert yaml_sync.sync(spec, check=True) == []
    assert spec.task_metrics(f"{NAME}_sample") == spec.metrics()
    assert spec.report_section == "" and spec.readme is not None and spec.readme.is_file()


def test_sample_docs_carry_oracle_and_chance_replies(generated_spec):
    tasks = importlib.import_module(f"{NAME}_bench.tasks")
    utils = generated_spec.hooks()  # what lmms-eval's !function reads: process_docs bound to the bundled sample
    docs = list(utils.process_docs([{"benchmark": NAME, "source": "sample"}]))
    assert len(docs) == 4 and all(d["oracle_response"] in d["chance_responses"] for d in docs)
    assert [tasks.score(d, d["oracle_response"])["correct"] for d in docs] == [True] * 4
    assert tasks.doc_to_visual(docs[0]) == []
    assert tasks.doc_to_messages(docs[0]) == [
        {"role": "user", "content": [{"type": "text", "text": tasks.doc_to_text(docs[0])}]}
    ]


def test_the_generated_utils_is_the_standard_adapter_and_the_metric_is_named_only_in_the_spec(
    generated, generated_spec
):
    from lmms_eval_plugins.task_hooks import utils_source

    assert (generated / f"{NAME}_bench/task_yamls/{NAME}/utils.py").read_text() == utils_source(NAME, f"{NAME}_bench")
    for name in ("tasks.py", "scoring.py"):  # no metric name outside the spec (and the generated YAML)
        text = (generated / f"{NAME}_bench" / name).read_text()
        assert not re.search(r"[\"'](accuracy|parse_fail)[\"']|agg_", text), name


def test_the_generated_unit_tests_pass(generated):
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # the generated tests need no plugin
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=generated,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\b(\d+) passed\b", done.stdout) and "failed" not in done.stdout


def test_the_generated_readme_installs_what_its_tests_need_and_the_parser_reads_prose(generated):
    # issue 37 case 17: the README said a bare `pytest`, which the README's venv lacks until the test extra
    # is installed; and the parser refused "The answer is B.", which the main README says parsers read
    readme = (generated / "README.md").read_text(encoding="utf-8")
    assert "pip install -e '.[test]' && pytest" in readme
    assert '("The answer is B.", "B")' in next(generated.glob("tests/test_*.py")).read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------------ end to end

E2E = "scaffold_e2e_mc"


@dataclass
class Installed:
    python: Path  # the layered venv's interpreter
    root: Path  # the generated package folder
    work: Path  # where runs write
    env: dict[str, str]

    def run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.python), *args],
            cwd=self.work,
            env={**os.environ, **OFFLINE_ENV, **self.env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def lmms_eval(self, model: str, out: str, **kwargs) -> RunResult:
        return run_lmms_eval(
            tasks=f"{E2E}_sample",
            model=model,
            output_dir=self.work / out,
            env={**self.env, **kwargs.pop("env", {})},
            launcher=[str(self.python)],
            timeout=300,
            **kwargs,
        )


def layered_venv(folder: Path) -> Path:
    """A venv that sees this environment's packages: ``--system-site-packages`` gives the base interpreter's,
    and a ``.pth`` adds this one's site folders (their own ``.pth`` files run, so editable installs work)."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(folder)], check=True, timeout=120
    )
    python = folder / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    lines = [f"import site; site.addsitedir({p!r})\n" for p in site.getsitepackages() if Path(p).is_dir()]
    (Path(purelib) / "_lmms_eval_plugins_parent_env.pth").write_text("".join(lines))
    return python


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    work = tmp_path_factory.mktemp("scaffold-e2e")
    root = generate(work / "src", E2E, "--title", "Scaffold E2E")
    python = layered_venv(work / "venv")
    env = {
        "LMMS_EVAL_PLUGINS_CACHE": str(work / "cache"),
        "HF_DATASETS_CACHE": str(work / "hf-datasets"),
        "PYTHONWARNINGS": "ignore",
    }
    box = Installed(python, root, work, env)
    probe = box.run("-c", "import setuptools, pip, lmms_eval, lmms_eval_plugins")
    assert probe.returncode == 0, f"the layered venv misses its build tools or lmms-eval:\n{probe.stderr[-2000:]}"
    pip = box.run(
        "-m",
        "pip",
        "install",
        "--no-deps",
        "--no-build-isolation",
        "--no-index",
        "--disable-pip-version-check",
        "-q",
        str(root),
        timeout=300,
    )
    assert pip.returncode == 0, pip.stdout[-2000:] + pip.stderr[-3000:]
    return box


@pytest.fixture(scope="module")
def oracle_run(installed) -> RunResult:
    return installed.lmms_eval("oracle", "oracle")


@pytest.fixture(scope="module")
def random_run(installed) -> RunResult:
    return installed.lmms_eval("random", "random")


@pytest.fixture(scope="module")
def exported(installed) -> Path:
    done = installed.run("-m", "lmms_eval_plugins.cli", "export-upstream", E2E, str(installed.work / "export"))
    assert done.returncode == 0, done.stderr[-3000:]
    return installed.work / "export" / E2E


@pytest.mark.wheel
@pytest.mark.cli
def test_installed_package_is_registered_from_site_packages(installed):
    done = installed.run("-c", f"from lmms_eval_plugins.benchmark import get; print(get({E2E!r}).tasks_dir)")
    assert done.returncode == 0, done.stderr[-2000:]
    folder = Path(done.stdout.strip())
    assert "site-packages" in folder.parts and folder.name == E2E and installed.root not in folder.parents
    assert (folder / "sample_data" / "records.jsonl").is_file() and (folder / f"_{E2E}_template_yaml").is_file()


@pytest.mark.wheel
@pytest.mark.cli
def test_lmms_eval_lists_the_tasks(installed):
    done = installed.run("-m", "lmms_eval", "--tasks", "list")
    listed = set(re.findall(r"^ - (\S+)$", done.stdout + done.stderr, re.MULTILINE))
    assert {E2E, f"{E2E}_sample"} <= listed, (done.stdout + done.stderr)[-3000:]


@pytest.mark.wheel
@pytest.mark.cli
def test_the_oracle_scores_100(oracle_run):
    metrics = oracle_run.task_results(f"{E2E}_sample")
    assert metrics["accuracy"] == 100.0 and metrics["parse_fail"] == 0 and metrics["unscored"] == 0
    assert oracle_run.results["n-samples"][f"{E2E}_sample"]["effective"] == 4
    logged = oracle_run.samples(f"{E2E}_sample")
    assert all(s["accuracy"]["pred"] == s["accuracy"]["gold"] for s in logged)


@pytest.mark.wheel
@pytest.mark.cli
def test_the_random_baseline_runs(random_run):
    metrics = random_run.task_results(f"{E2E}_sample")
    assert 0.0 <= metrics["accuracy"] <= 100.0 and metrics["parse_fail"] == 0  # chance replies are option letters


@pytest.mark.wheel
@pytest.mark.cli
def test_the_report_has_a_section(installed, oracle_run, random_run):
    out = installed.work / "report"
    done = installed.run(
        "-m",
        "lmms_eval_plugins.cli",
        "report",
        str(oracle_run.results_path.parent),
        str(random_run.results_path.parent),
        "-o",
        str(out),
        "--no-plots",
        "--label",
        "oracle",
        "--label",
        "random",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    markdown = (out / "report.md").read_text()
    assert "\n## Scaffold E2E\n" in markdown  # the default section, titled from the spec
    table = markdown.split(f"<!-- table: {E2E}-main -->", 1)[1].split("<!--", 1)[0]
    assert "| model | Acc | parse_fail | skipped | unscored |" in table and "| oracle | 100.00 | 0 | 0 | 0 |" in table
    assert re.search(r"^\| random \| \d+\.\d\d \| 0 \| 0 \| 0 \|$", table, re.MULTILINE), table


@pytest.mark.wheel
@pytest.mark.cli
def test_export_upstream_writes_the_task_folder(exported):
    assert (exported / f"{E2E}_sample.yaml").is_file() and (exported / "utils.py").is_file()
    assert (exported / "sample_data" / "records.jsonl").is_file()
    manifest = json.loads((exported / "_vendor" / "EXPORT.json").read_text())
    assert manifest["benchmark"] == E2E


@pytest.mark.wheel
@pytest.mark.cli
def test_the_exported_folder_runs_where_the_package_is_installed(installed, exported):
    # the task hook off: lmms-eval sees only the exported folder (--include_path), not the installed one
    run = installed.lmms_eval(
        "oracle", "exported", include_path=str(exported), env={"LMMS_EVAL_PLUGINS_NO_TASK_HOOK": "1"}, log_samples=False
    )
    assert run.task_results(f"{E2E}_sample")["accuracy"] == 100.0
    data_files = run.results["configs"][f"{E2E}_sample"]["dataset_kwargs"]["data_files"]["test"]
    assert Path(data_files).is_relative_to(exported)


BLOCK_AND_IMPORT = textwrap.dedent("""
    import importlib.abc, importlib.util, sys

    BLOCKED = sys.argv[1:3]

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if any(name == b or name.startswith(b + ".") for b in BLOCKED):
                raise ModuleNotFoundError(f"blocked: {name}")
            return None

    sys.meta_path.insert(0, Block())
    spec = importlib.util.spec_from_file_location("utils", sys.argv[3])
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
""")


@pytest.mark.wheel
@pytest.mark.cli
def test_the_exported_folder_is_self_contained(installed, exported):
    done = installed.run("-P", "-c", BLOCK_AND_IMPORT, "lmms_eval_plugins", f"{E2E}_bench", str(exported / "utils.py"))
    assert done.returncode == 0, done.stderr[-2000:]
