"""``lmms-eval-plugins sync-yaml``: write each task YAML's ``metric_list`` from its benchmark's metric table,
and the task folder's ``utils.py`` from its spec and hooks (:func:`lmms_eval_plugins.task_hooks.utils_source`).

A benchmark's spec (``Benchmark.metric_lists``) is the one place its metrics are declared; the YAML
blocks lmms-eval reads are generated from it, as lm-evaluation-harness generates its task configs.
``--check`` changes nothing and exits 1 when a file disagrees with its spec (the tests run it).

Usage::

    lmms-eval-plugins sync-yaml             # rewrite every out-of-date metric_list
    lmms-eval-plugins sync-yaml --check     # list disagreements, exit 1 if any
    lmms-eval-plugins sync-yaml errorradar  # one benchmark
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from pathlib import Path

from lmms_eval_plugins.benchmark import ENTRY_POINT_GROUP, Benchmark, Metric, get, ordered_benchmarks
from lmms_eval_plugins.safe_files import write_atomic

GENERATED_MARK = "# metric_list: generated from the benchmark's spec.py by `lmms-eval-plugins sync-yaml`; edit the spec"
# The top-level block: an optional generated-mark line, `metric_list:`, then its indented or `-` lines.
_BLOCK = re.compile(
    r"^(?:" + re.escape(GENERATED_MARK) + r"\n)?metric_list:[ \t]*\n(?:[ \t-].*\n|[ \t]*\n(?=[ \t-]))*", re.M
)


def render(metrics: Sequence[Metric]) -> str:
    lines = [GENERATED_MARK, "metric_list:"]
    for m in metrics:
        lines += [
            f"  - metric: {m.name}",
            f"    aggregation: !function utils.{m.hook}",
            f"    higher_is_better: {'true' if m.higher_is_better else 'false'}",
        ]
    return "\n".join(lines) + "\n"


def synced_text(text: str, metrics: Sequence[Metric]) -> str | None:
    """``text`` with its metric_list block replaced; None when it has no top-level metric_list."""
    blocks = list(_BLOCK.finditer(text))
    if len(blocks) != 1:
        return None
    block = blocks[0]
    return text[: block.start()] + render(metrics) + text[block.end() :]


def declared_files(folder: Path) -> list[str]:
    """Task YAML files in ``folder`` holding a top-level metric_list."""
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.is_file()
        and (p.suffix == ".yaml" or p.name.endswith("_yaml"))
        and _BLOCK.search(p.read_text(encoding="utf-8"))
    )


def spec_package(name: str) -> str | None:
    """The package of benchmark ``name``, from its entry point (``<package>.spec:BENCHMARK``); None when the
    entry point has another form (its ``utils.py`` is then the author's own)."""
    from importlib import metadata

    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        module = ep.value.split(":", 1)[0]
        if ep.name == name and module.endswith(".spec"):
            return module[: -len(".spec")]
    return None


def sync_utils(spec: Benchmark, *, check: bool = False) -> list[str]:
    """Bring the task folder's ``utils.py`` in line with its generator (or only report)."""
    from lmms_eval_plugins.task_hooks import utils_source

    package = spec_package(spec.name)
    if package is None:
        return []
    path = spec.tasks_dir / "utils.py"
    want = utils_source(spec.name, package)
    if path.is_file() and path.read_text(encoding="utf-8") == want:
        return []
    if not check:
        write_atomic(path, want)
    return [f"{spec.name}: {path} differs from its generator" + ("" if check else " (rewritten)")]


def sync(spec: Benchmark, *, check: bool = False) -> list[str]:
    """Bring ``spec``'s YAML files and ``utils.py`` in line (or, with ``check``, only report): one line per
    disagreement."""
    problems: list[str] = sync_utils(spec, check=check)
    for name, metrics in spec.metric_lists.items():
        path = spec.tasks_dir / name
        if not path.is_file():
            problems.append(f"{spec.name}: {path} is named in the spec's metric_lists but does not exist")
            continue
        text = path.read_text(encoding="utf-8")
        new = synced_text(text, metrics)
        if new is None:
            problems.append(f"{spec.name}: {path} has no single top-level metric_list block to generate")
        elif new != text:
            problems.append(
                f"{spec.name}: {path} metric_list differs from the spec" + ("" if check else " (rewritten)")
            )
            if not check:
                write_atomic(path, new)
    for name in declared_files(spec.tasks_dir):
        if name not in spec.metric_lists:
            problems.append(f"{spec.name}: {spec.tasks_dir / name} declares a metric_list its spec does not have")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lmms-eval-plugins sync-yaml", description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmarks", nargs="*", help="benchmark names (default: every installed benchmark)")
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 when a YAML disagrees with its spec"
    )
    args = parser.parse_args(argv)
    try:
        specs = [get(n) for n in args.benchmarks] if args.benchmarks else ordered_benchmarks()
    except KeyError as exc:
        parser.error(str(exc.args[0]))
    problems = [p for spec in specs for p in sync(spec, check=args.check)]
    for line in problems:
        print(line)
    if args.check:
        if not problems:
            print(f"metric lists and utils.py of {len(specs)} benchmark(s) agree with their specs")
        return 1 if problems else 0
    unfixable = [p for p in problems if not p.endswith("(rewritten)")]
    return 1 if unfixable else 0


if __name__ == "__main__":
    raise SystemExit(main())
