"""Benchmark: `lmms-eval-plugins doctor`, offline, as the README runs it, timed with the machine's load.

    .venv/bin/python bench/bench_doctor.py [--reps 3] [--json OUT]

A time limit belongs here, not in a test (issue 37): a loaded machine is slower, not broken. Reports each
run's wall time and the CPU time of the doctor process, and the 1-minute load average before each run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import environment  # noqa: E402


def one_run(workdir: Path) -> dict[str, float]:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "LMMS_EVAL_PLUGINS_CACHE": str(workdir / "cache"),
    }
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "lmms_eval_plugins.cli", "doctor"],
        capture_output=True,
        text=True,
        env=env,
        cwd=workdir,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "load_avg_1m": round(load, 2), "exit": done.returncode}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs = [one_run(Path(tmp)) for _ in range(args.reps)]
    report = {"runs": runs, "environment": environment(["lmms-eval", "torch"])}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0 if all(r["exit"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
