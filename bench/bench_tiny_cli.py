"""Benchmark: the README's tiny-model CLI lines, run exactly as written there, timed.

    python bench/bench_tiny_cli.py [--workdir DIR] [--json OUT]

Reads the README's bash block that starts with ``.venv/bin/lmms-eval-plugins tiny-qwen`` (building the tiny
Qwen2.5-VL, then the plain ``lmms-eval`` line with the demo's short generation) and runs each command
in --workdir, with the tiny model's folder (``/tmp/tiny-qwen`` in the README) moved under --workdir so
a run never reuses an old model. Reports each command's wall time and the documents the lmms-eval
run scored (``n-samples`` of its results JSON). Run it with the README's venv (``.venv/bin/python``):
``.venv/bin/X`` is run as this interpreter's console script ``X``.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README_MODEL_DIR = "/tmp/tiny-qwen"
VENV_BIN = ".venv/bin/"


def readme_commands(readme: str) -> list[list[str]]:
    """argv of each command of the README block that builds the tiny model (backslash continuations joined)."""
    blocks = re.findall(r"```bash\n((?:\.venv/bin/)?lmms-eval-plugins tiny-qwen .*?)```", readme, re.S)
    if len(blocks) != 1:
        raise SystemExit(
            f"README: expected one bash block starting with 'lmms-eval-plugins tiny-qwen', found {len(blocks)}"
        )
    lines = blocks[0].replace("\\\n", " ").splitlines()
    return [shlex.split(line) for line in lines if line.strip()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=None, help="default: a fresh temporary folder")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lmms_eval_plugins_bench_tiny_"))
    workdir.mkdir(parents=True, exist_ok=True)
    model_dir = workdir / "tiny-qwen"
    shutil.rmtree(model_dir, ignore_errors=True)
    shutil.rmtree(workdir / "out", ignore_errors=True)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _timing import environment

    env = environment(("lmms_eval", "torch", "transformers"))
    rows = []
    for written in readme_commands((ROOT / "README.md").read_text(encoding="utf-8")):
        argv = [a.replace(README_MODEL_DIR, str(model_dir)) for a in written]
        if argv[0].startswith(VENV_BIN):  # the README's venv is this environment's
            argv[0] = str(Path(sys.executable).parent / argv[0][len(VENV_BIN) :])
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
            raise SystemExit(f"{argv[0]} exited {done.returncode}")
        rows.append({"command": shlex.join(written), "wall_s": round(wall, 2)})  # as the README writes it

    results = sorted((workdir / "out").rglob("*_results.json"), key=lambda p: p.stat().st_mtime)
    if not results:
        raise SystemExit("the lmms-eval line wrote no results JSON")
    n_samples = json.loads(results[-1].read_text(encoding="utf-8")).get("n-samples", {})
    documents = sum(int(v.get("effective", 0)) for v in n_samples.values())

    print("machine: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    for row in rows:
        print(f"{row['wall_s']:7.1f} s  {row['command']}")
    print(f"{documents} documents scored over {len(n_samples)} tasks: " + ", ".join(sorted(n_samples)))
    if args.json:
        args.json.write_text(
            json.dumps({"env": env, "commands": rows, "documents": documents, "tasks": sorted(n_samples)}, indent=2)
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
