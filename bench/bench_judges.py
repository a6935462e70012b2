"""Judge runtime throughput against the loopback judge server (no network, no GPU).

Measures, for N verdicts with a fixed server latency per call (default 500 and 200 ms):
  * sequential: the runtime with concurrency 1 (one call at a time),
  * concurrent: the runtime at each requested concurrency (fresh cache each),
  * cached re-run: a fresh runtime on the filled cache (what a re-run or a resumed run does).

    python bench/bench_judges.py                      # full run, about two minutes
    python bench/bench_judges.py --json bench/judges.json
    python bench/bench_judges.py --n 100 --latency 0.05   # quick look

Prints a Markdown table.  Speed-ups are relative to the sequential wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # judge_server.py

from judge_server import JudgeServer
from lmms_eval_plugins.judges import JudgeItem, load_judge
from lmms_eval_plugins.judges.endpoint import Endpoint
from lmms_eval_plugins.judges.runtime import JudgeRuntime, RuntimeSettings


def items(n: int) -> list[JudgeItem]:
    return [
        JudgeItem(question=f"Bench question {i}?", prediction="A" if i % 4 else "B", reference="A") for i in range(n)
    ]


def measure(cache: Path, server: JudgeServer, n: int, concurrency: int) -> dict:
    runtime = JudgeRuntime(cache)
    before = server.n_requests
    start = time.perf_counter()
    outcomes = runtime.judge_items(
        load_judge("semantic_match"),
        items(n),
        model="bench-judge",
        endpoint=Endpoint(server.base_url, "bench-key"),
        settings=RuntimeSettings(concurrency=concurrency, timeout=30),
    )
    wall = time.perf_counter() - start
    errors = sum(1 for o in outcomes if o.error)
    if errors:
        raise SystemExit(f"{errors} judge errors in the benchmark: something is wrong")
    return {
        "concurrency": concurrency,
        "verdicts": n,
        "calls": server.n_requests - before,
        "cache_hits": sum(1 for o in outcomes if o.cached),
        "wall_s": wall,
        "verdicts_per_s": n / wall if wall > 0 else float("inf"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=500, help="verdicts per measurement (default 500)")
    p.add_argument("--latency", type=float, default=0.2, help="server latency per call in seconds (default 0.2)")
    p.add_argument(
        "--concurrency",
        default="16,64",
        help="comma-separated concurrency levels (default 16,64; 16 is the runtime default)",
    )
    p.add_argument("--json", dest="json_out", type=Path, default=None, help="write the results as JSON here")
    args = p.parse_args(argv)
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]

    rows = []
    with tempfile.TemporaryDirectory() as tmp, JudgeServer(latency=args.latency, lifetime=3600) as server:
        tmpdir = Path(tmp)
        measure(tmpdir / "warmup.sqlite3", server, 4, 4)  # imports, first connection
        seq = measure(tmpdir / "sequential.sqlite3", server, args.n, 1)
        rows.append({"mode": "sequential", **seq})
        last_cache = None
        for level in levels:
            last_cache = tmpdir / f"concurrent{level}.sqlite3"
            rows.append({"mode": "concurrent", **measure(last_cache, server, args.n, level)})
        if last_cache is not None:
            rows.append({"mode": "cached re-run", **measure(last_cache, server, args.n, levels[-1])})
    for row in rows:
        row["speedup"] = seq["wall_s"] / row["wall_s"] if row["wall_s"] > 0 else float("inf")

    print(
        f"Judge runtime, {args.n} verdicts, loopback server with {args.latency * 1000:.0f} ms per call "
        f"(Python {platform.python_version()}, {os.cpu_count()} CPUs)\n"
    )
    print("| mode | concurrency | verdicts | HTTP calls | cache hits | wall (s) | verdicts/s | speed-up |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['mode']} | {r['concurrency']} | {r['verdicts']} | {r['calls']} | {r['cache_hits']} | "
            f"{r['wall_s']:.2f} | {r['verdicts_per_s']:.0f} | {r['speedup']:.1f}x |"
        )
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps({"n": args.n, "latency_s": args.latency, "rows": rows}, indent=2) + "\n")
        print(f"\nwritten {args.json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
