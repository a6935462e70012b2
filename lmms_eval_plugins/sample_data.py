"""Regenerate the bundled sample data of installed benchmarks (synthetic media in each one's real schema).

The sample folders are checked in and ship in the wheel; each benchmark's ``sample_data`` hook is how
they were made, and a test checks that regenerating them changes nothing. Usage:
``lmms-eval-plugins sample-data [BENCHMARK ...]`` (all when none is named).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from lmms_eval_plugins.benchmark import Benchmark, get, ordered_benchmarks


def generators() -> dict[str, Callable[[Path], None]]:
    """Benchmark name -> the function writing its sample data into a folder."""
    return {b.name: b.resolve("sample_data") for b in ordered_benchmarks() if b.sample_data}


def sample_dir(benchmark: str | Benchmark) -> Path:
    spec = get(benchmark) if isinstance(benchmark, str) else benchmark
    return spec.sample_dir or spec.tasks_dir / "sample_data"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lmms-eval-plugins sample-data", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "benchmarks", nargs="*", help="benchmark names (default: every installed benchmark with a generator)"
    )
    args = parser.parse_args(argv)
    made = generators()
    for name in args.benchmarks or list(made):
        if name not in made:
            parser.error(f"no sample-data generator for {name!r} (have: {', '.join(made) or 'none'})")
        made[name](sample_dir(name))
        print(f"wrote {sample_dir(name)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
