"""Benchmark: lmms_eval_plugins.media.sample_video against raw decord and qwen_vl_utils.fetch_video.

    python bench/bench_sampler.py [--workdir DIR] [--k 32 128] [--reps 5] [--json OUT]

Generates a 2-minute 854x480 30 fps MPEG-4 video once (cached in --workdir), then times, for each
frame budget K (median over --reps, methods interleaved so background load hits all of them alike):
  raw decord   VideoReader(path).get_batch(indices).asnumpy() of the very indices we sample (the floor),
               with decord's default threads and with the single thread media.py uses;
  ours         sample_video(path, K) and sample_video(path, K, max_long_side=360), with the VideoInfo
               cache cleared before every call, so resizing pays its size probe as on a first visit;
  fetch_video  qwen_vl_utils.fetch_video({"video": path, "nframes": K}) on its decord backend (the path
               lmms-eval's Qwen classes take for a video file); it also resizes to its own pixel budget
               (bicubic, in torch) and returns a float tensor.
Targets: ours at most 1.3x raw decord time, and faster than fetch_video. Wall and CPU seconds are both
reported: on a machine shared with other jobs, CPU time is the steadier measure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

# qwen_vl_utils reads this once, at import time; without it, it prefers torchcodec when installed.
os.environ.setdefault("FORCE_QWENVL_VIDEO_READER", "decord")

import decord
from qwen_vl_utils import fetch_video

from lmms_eval_plugins import media

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: bench/ holds _timing
from _timing import environment, measure  # noqa: E402
from lmms_eval_plugins.synthetic import make_video

SECONDS, FPS, WIDTH, HEIGHT = 120, 30, 854, 480


def bench_video(workdir: Path) -> Path:
    path = workdir / f"bench_{WIDTH}x{HEIGHT}_{FPS}fps_{SECONDS}s.mp4"
    if not path.exists():
        print(f"writing {path} ...", file=sys.stderr)
        make_video(path.with_suffix(".tmp.mp4"), seconds=SECONDS, fps=FPS, width=WIDTH, height=HEIGHT).rename(path)
    return path


def methods(path: Path, k: int) -> dict[str, Callable[[], object]]:
    indices = media.uniform_indices(len(decord.VideoReader(str(path))), k)

    def ours(max_long_side: int | None):
        def run():
            media._probe.cache_clear()  # time a first visit: the size probe is part of the cost
            return media.sample_video(path, k, max_long_side=max_long_side)

        return run

    return {
        "raw decord (default threads)": lambda: (
            decord.VideoReader(str(path), ctx=decord.cpu(0)).get_batch(indices).asnumpy()
        ),
        "raw decord (1 thread)": lambda: (
            decord.VideoReader(str(path), ctx=decord.cpu(0), num_threads=1).get_batch(indices).asnumpy()
        ),
        "ours": ours(None),
        "ours, max_long_side=360": ours(360),
        "fetch_video": lambda: fetch_video({"video": str(path), "nframes": k}),
    }


def table(results: dict[int, dict[str, dict[str, float]]]) -> str:
    lines = [
        "| K | method | wall s | frames/s | wall vs raw | CPU s | CPU vs raw | fetch_video wall / this |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k, times in results.items():
        # the floor: the faster of the two raw decord reads, per measure
        raw = {kind: min(t[kind] for name, t in times.items() if name.startswith("raw")) for kind in ("wall", "cpu")}
        for name, t in times.items():
            lines.append(
                f"| {k} | {name} | {t['wall']:.3f} | {k / t['wall']:.0f} | {t['wall'] / raw['wall']:.2f}x "
                f"| {t['cpu']:.3f} | {t['cpu'] / raw['cpu']:.2f}x | {times['fetch_video']['wall'] / t['wall']:.2f}x |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "lmms_eval_plugins_bench")
    parser.add_argument("--k", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    os.environ.setdefault("LMMS_EVAL_PLUGINS_FRAME_CACHE", "off")  # time decoding, not persistent-cache hits
    args.workdir.mkdir(parents=True, exist_ok=True)
    path = bench_video(args.workdir)
    results = {k: measure(methods(path, k), args.reps) for k in args.k}
    env = environment(("decord", "pillow", "numpy", "torch", "qwen-vl-utils", "opencv-python-headless"))
    print(f"video: {WIDTH}x{HEIGHT}, {FPS} fps, {SECONDS} s, mp4v; median of {args.reps} runs")
    print("machine: " + ", ".join(f"{key}={value}" for key, value in env.items()))
    print()
    print(table(results))
    if args.json:
        args.json.write_text(
            json.dumps({"env": env, "video": str(path), "reps": args.reps, "seconds": results}, indent=2)
        )


if __name__ == "__main__":
    main()
