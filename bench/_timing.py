"""Timing harness shared by the bench scripts: medians of wall and CPU time, and the machine's state."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from importlib.metadata import version


def measure(runs: dict[str, Callable[[], object]], reps: int) -> dict[str, dict[str, float]]:
    """Median wall-clock and CPU seconds (this process, all threads) per method, methods interleaved.

    CPU time is reported too because it hardly moves when other jobs share the machine; wall time does.
    """
    for run in runs.values():  # warm-up: page cache, lazy imports
        run()
    samples: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in runs}
    for _ in range(reps):
        for name, run in runs.items():
            wall, cpu = time.perf_counter(), time.process_time()
            run()
            samples[name]["wall"].append(time.perf_counter() - wall)
            samples[name]["cpu"].append(time.process_time() - cpu)
    return {name: {kind: statistics.median(v) for kind, v in s.items()} for name, s in samples.items()}


def environment(packages: Sequence[str]) -> dict:
    return {
        "cpu_count": os.cpu_count(),
        "machine": platform.machine(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        **{pkg: version(pkg) for pkg in packages},
    }
