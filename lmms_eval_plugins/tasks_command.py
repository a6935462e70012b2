"""``lmms-eval-plugins tasks``: the installed benchmarks, what each needs, and their tasks and groups.

``lmms-eval-plugins info TASK_OR_BENCHMARK`` prints that benchmark's README from the installed package.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from lmms_eval_plugins import tasks_dir
from lmms_eval_plugins.benchmark import Benchmark, benchmark_of_task, ordered_benchmarks, registry
from lmms_eval_plugins.yaml_index import is_sample_task, names_by_kind, read_task_yamls


def task_names(folder: Path | None = None) -> dict[str, str]:
    """name -> "task" | "group" for every YAML below ``folder`` (default: every installed benchmark's folder)."""
    folders = [folder] if folder is not None else [b.tasks_dir for b in ordered_benchmarks()]
    return names_by_kind(read_task_yamls(folders))


def sample_tasks(names: dict[str, str] | None = None) -> list[str]:
    """What runs every task on the bundled sample data once: every sample group, plus every sample
    task (``is_sample_task``: ``*_sample`` and variants such as ``causalstep_sample_restart_same``)
    of a benchmark without a sample group."""
    names = task_names() if names is None else names
    groups = sorted(n for n, kind in names.items() if kind == "group" and is_sample_task(n))

    def owner(name: str) -> str:
        spec = benchmark_of_task(name)
        return spec.name if spec else name.split("_")[0]

    covered = {owner(g) for g in groups}
    tasks = sorted(n for n, kind in names.items() if kind == "task" and is_sample_task(n) and owner(n) not in covered)
    return groups + tasks


# Files of the source repository that the wheel does not ship (see pyproject's package-data). ``info``
# prints READMEs written in the repository, so it says where such a file is instead of implying it is installed.
SOURCE_ONLY = re.compile(
    r"(?<![\w./$-])(?:(?:docs|tests|bench|\.ci)/[\w./-]*\w|[A-Z][A-Z_]*\.md|constraints\.txt|pyproject\.toml)`?"
)
SOURCE_NOTE = " (in the source repository; not installed)"


def mark_source_only(text: str) -> str:
    """``text`` with :data:`SOURCE_NOTE` after each name of a file only the source repository has."""
    return SOURCE_ONLY.sub(lambda m: m.group(0) + SOURCE_NOTE, text)


JUDGE_NEEDS = (
    " (an OpenAI-compatible endpoint: OPENAI_BASE_URL, OPENAI_API_KEY; or LMMS_EVAL_PLUGINS_JUDGE=offline; "
    "'lmms-eval-plugins doctor --judge' checks it)"
)


def describe(spec: Benchmark, names: dict[str, str]) -> list[str]:
    """A benchmark's block in ``lmms-eval-plugins tasks``."""
    mine = sorted(n for n in names if spec.owns(n) and benchmark_of_task(n) is spec)
    lines = [
        f"{spec.name}: {spec.title}. {spec.description}".rstrip(),
        f"  data:  {spec.data or 'bundled sample only'}",
        f"  judge: {spec.judge + JUDGE_NEEDS if spec.judge else 'none'}",
        f"  help:  lmms-eval-plugins info {spec.name}",
    ]
    lines += [f"  {name:<34} {names[name]}" for name in mine]
    return lines


def info(name: str) -> str:
    """The README of the benchmark owning task (or benchmark) ``name``."""
    spec = registry().get(name) or benchmark_of_task(name)
    if spec is None:
        known = ", ".join(b.name for b in ordered_benchmarks())
        raise SystemExit(
            f"lmms-eval-plugins info: no installed benchmark owns {name!r} (benchmarks: {known}; "
            "'lmms-eval-plugins tasks' lists every task)"
        )
    if spec.readme is None or not spec.readme.is_file():
        return f"{spec.title}: {spec.description}\n(no README installed; task folder: {spec.tasks_dir})\n"
    return mark_source_only(spec.readme.read_text(encoding="utf-8"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="lmms-eval-plugins tasks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", action="store_true", help="print our task folder (for --include_path)")
    parser.add_argument("--names", action="store_true", help="only 'NAME<TAB>task|group', one per line")
    args = parser.parse_args(argv)
    if args.path:
        print(tasks_dir())
        return 0
    names = task_names()
    if args.names:
        for name, kind in sorted(names.items()):
            print(f"{name}\t{kind}")
        return 0
    for spec in ordered_benchmarks():
        print("\n".join(describe(spec, names)) + "\n")
    print("Run one: lmms-eval --model MODEL --tasks TASK [--limit N]; the *_sample tasks run offline on bundled data.")
    return 0


def info_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="lmms-eval-plugins info", description="print a benchmark's README (data layout, metrics, options)"
    )
    parser.add_argument("name", help="a task, group or benchmark name (see 'lmms-eval-plugins tasks')")
    args = parser.parse_args(argv)
    print(info(args.name), end="")
    return 0
