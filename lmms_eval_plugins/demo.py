"""``lmms-eval-plugins demo``: the README's main command.

Builds the tiny randomly initialised Qwen2.5-VL (seconds, no network), runs the real ``lmms-eval`` CLI
with the real ``qwen2_5_vl`` model class on the CPU over the bundled sample tasks, and prints the
results table. Exits non-zero when a task has no results (lmms-eval itself exits 0 on failure).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lmms_eval_plugins.cli_run import run_lmms_eval
from lmms_eval_plugins.data import cache_dir
from lmms_eval_plugins.task_list import sample_tasks


# The tiny model's weights are random: it rarely stops by itself, so cap its replies.
TINY_MODEL_GEN_KWARGS = "max_new_tokens=32"


def main(argv: list[str]) -> int:
    from lmms_eval_plugins.tiny_qwen import build_tiny_qwen2_5_vl, lmms_eval_model_args

    parser = argparse.ArgumentParser(prog="lmms-eval-plugins demo", description=__doc__)
    parser.add_argument("--tasks", default=",".join(sample_tasks()), help="comma-separated tasks (default: every *_sample task or group)")
    parser.add_argument("--model", default="qwen2_5_vl", help="lmms-eval model name (default: the tiny Qwen2.5-VL)")
    parser.add_argument("--model_args", default=None, help="default: the tiny Qwen2.5-VL built on the fly")
    parser.add_argument("--output_path", default="out/demo")
    args = parser.parse_args(argv)

    model_args, extra_args = args.model_args, []
    if model_args is None and args.model == "qwen2_5_vl":
        model_dir = build_tiny_qwen2_5_vl(cache_dir("tiny-qwen2_5_vl"))
        model_args = lmms_eval_model_args(model_dir)
        extra_args = ["--gen_kwargs", TINY_MODEL_GEN_KWARGS]
    tasks = [t for t in args.tasks.split(",") if t]
    # The offline judges keep the demo free of API keys.
    run = run_lmms_eval(tasks=tasks, model=args.model, model_args=model_args, output_dir=Path(args.output_path),
                        env={"LMMS_EVAL_PLUGINS_JUDGE": "offline"}, extra_args=extra_args, stream=True)
    if run.results_path is None:
        print("lmms-eval wrote no results; see its log above", file=sys.stderr)
        return 1
    missing = [t for t in tasks if t not in run.results.get("results", {}) and t not in run.results.get("groups", {})]
    print(f"\nresults: {run.results_path}")
    if missing:
        print(f"no results for: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0
