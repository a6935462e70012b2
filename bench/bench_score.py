"""Benchmark: ``lmms-eval-plugins score`` of a stored run against lmms-eval's own replay of it (issue 41).

    .venv/bin/python bench/bench_score.py [--sizes 10000,100000] [--json OUT]

At each size: ErrorRadar's bundled sample records repeated to that many records (each its own
question id; the one image hard-linked under each id) as a local data root, then, each as a child
process with CPU seconds and peak RSS (the child and everything it waits for):

1. **run**: ``lmms-eval --model random --tasks errorradar_cate --log_samples`` (the stored run);
2. **score**: ``lmms-eval-plugins score`` of that run (its checks, the replay, the comparison and the
   re-score's results);
3. **floor**: the replay alone, the very command ``score`` starts (``score.replay_command``: ``python -m
   lmms_eval --model replay ...``): what lmms-eval itself costs to replay the run, so score / floor is what
   score adds.

Also the samples file's size. Judge-free, so no endpoint is needed; offline (``HF_HUB_OFFLINE=1``).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import environment  # noqa: E402

from lmms_eval_plugins.score import replay_command  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "task_yamls" / "errorradar" / "sample_data"
TASK = "errorradar_cate"


def data_root(folder: Path, size: int) -> Path:
    """A local ErrorRadar data root of ``size`` records (the sample's rows in turn, ids made unique)."""
    target = folder / "errorradar"
    (target / "images").mkdir(parents=True)
    with (SAMPLE / "ErrorRadar_dataset.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    images = {p.stem: p for p in (SAMPLE / "images").iterdir()}
    with (target / "ErrorRadar_dataset.csv").open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        for k in range(size):
            row = dict(rows[k % len(rows)])
            image = images[row["question_id"]]
            row["question_id"] = f"{row['question_id']}x{k}"
            os.link(image, target / "images" / f"{row['question_id']}{image.suffix}")
            writer.writerow(row)
    return folder


def child(command: list[str], env: dict, cwd: Path) -> dict:
    """CPU seconds (the child and its children), peak RSS (MB) and wall seconds of a command."""
    probe = (
        "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
        "stderr=subprocess.PIPE, text=True); u = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "print(done.returncode, u.ru_utime + u.ru_stime, u.ru_maxrss // 1024); "
        "sys.stderr.write(done.stderr[-3000:] if done.returncode else '')"
    )
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - started
    status, seconds, peak = done.stdout.split()
    if int(status):
        raise SystemExit(f"{' '.join(command[:6])} ... failed ({status}):\n{done.stderr}")
    return {"cpu_s": round(float(seconds), 1), "peak_mb": int(peak), "wall_s": round(wall, 1)}


def figures(size: int, workdir: Path) -> dict:
    root = data_root(workdir / f"data{size}", size)
    env = {
        **os.environ,
        "LMMS_EVAL_PLUGINS_DATA_ROOT": str(root),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "LMMS_EVAL_PLUGINS_JUDGE": "offline",
    }
    bin_dir = Path(sys.executable).parent
    stored = workdir / f"run{size}"
    run = child(
        [
            str(bin_dir / "lmms-eval"),
            "--model",
            "random",
            "--tasks",
            TASK,
            "--output_path",
            str(stored),
            "--log_samples",
        ],
        env,
        workdir,
    )
    results = next(stored.rglob("*_results.json"))
    samples = next(stored.rglob(f"*_samples_{TASK}.jsonl"))
    score = child([str(bin_dir / "lmms-eval-plugins"), "score", str(results.parent)], env, workdir)
    config = json.loads(results.read_text(encoding="utf-8"))["config"]
    floor = child(replay_command(results, [TASK], workdir / f"floor{size}", config), env, workdir)
    return {
        "samples_mb": round(samples.stat().st_size / 1e6, 1),
        "run": run,
        "score": score,
        "replay_floor": floor,
        "score_ratio_to_replay": round(score["cpu_s"] / floor["cpu_s"], 2),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    out: dict = {"task": TASK, "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            out["sizes"][size] = figures(size, Path(tmp))
            print(size, json.dumps(out["sizes"][size]), flush=True)
    out["environment"] = environment(["lmms-eval", "datasets"])
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
