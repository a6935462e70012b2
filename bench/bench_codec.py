"""Benchmark: the frame cache's compression (lmms_eval_plugins.frame_cache) on sampled video frames.

    python bench/bench_codec.py [VIDEO ...] [--frames 32] [--max-long-side 360] [--no-level19] [--json OUT]

Samples --frames frames from each video with ``media.sample_video`` (frame cache off, so they are
decoded), at most --max-long-side px (0: full size), and compresses them as one cache entry with
``frame_cache._compress`` (zstandard at ``ZSTD_LEVEL``, as the cache stores them), then decompresses
them with ``frame_cache._decompress``. Reports, per video and in all: raw and compressed bytes, the
ratio (raw / compressed), compression and decompression speed (MB of raw frames per second, CPU
time, median of --reps) and, unless --no-level19, the ratio zstandard level 19 would give (slow).

Default videos: the sample data bundled with the plugin (task_yamls/*/sample_data/videos), which
are synthetic (``lmms_eval_plugins.synthetic.make_video``: flat coded cells and a smooth moving
texture). Pass real footage as VIDEO arguments to size a cache for it; ratios depend on content.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def _cpu_seconds(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def measure(path: Path, frames: int, max_long_side: int | None, reps: int, level19: bool) -> dict:
    from lmms_eval_plugins import frame_cache, media

    arrays = [
        np.ascontiguousarray(np.asarray(img))
        for img in media.sample_video(path, frames, max_long_side=max_long_side).frames
    ]
    raw = sum(a.nbytes for a in arrays)
    codec, payload = frame_cache._compress(arrays)
    assert frame_cache._decompress(codec, memoryview(payload), raw) == b"".join(a.tobytes() for a in arrays)
    comp_s = _cpu_seconds(lambda: frame_cache._compress(arrays), reps)
    dec_s = _cpu_seconds(lambda: frame_cache._decompress(codec, memoryview(payload), raw), reps)
    out = {
        "video": str(path),
        "frames": len(arrays),
        "shape": list(arrays[0].shape),
        "codec": codec,
        "level": frame_cache.ZSTD_LEVEL if codec == "zstd" else 1,
        "raw_bytes": raw,
        "compressed_bytes": len(payload),
        "ratio": raw / len(payload),
        "compress_s": comp_s,
        "decompress_s": dec_s,
    }
    if level19 and codec == "zstd":
        saved = frame_cache.ZSTD_LEVEL
        frame_cache.ZSTD_LEVEL = 19
        try:
            out["compressed_bytes_level19"] = len(frame_cache._compress(arrays)[1])
        finally:
            frame_cache.ZSTD_LEVEL = saved
        out["ratio_level19"] = raw / out["compressed_bytes_level19"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("videos", nargs="*", type=Path, help="default: the bundled sample videos")
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--max-long-side", type=int, default=360, help="0: full size")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-level19", action="store_true", help="skip the level-19 comparison")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    os.environ["LMMS_EVAL_PLUGINS_FRAME_CACHE"] = "off"  # decode the frames; a cache hit would return the same arrays
    videos = args.videos or sorted(ROOT.glob("task_yamls/*/sample_data/videos/**/*.mp4"))
    if not videos:
        raise SystemExit("no videos")
    rows = [measure(v, args.frames, args.max_long_side or None, args.reps, not args.no_level19) for v in videos]
    for r in rows:  # relative to the checkout where it can be
        path = Path(r["video"]).resolve()
        r["video"] = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _timing import environment

    env = environment(("numpy", "decord", "pillow", "zstandard"))
    print("machine: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    print(
        f"{len(rows)} videos, {args.frames} frames each, long side <= {args.max_long_side or 'full'} px; "
        f"CPU time, median of {args.reps}\n"
    )
    print("| video | frames x shape | raw MB | cached MB | ratio | level 19 ratio | compress MB/s | decompress MB/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")

    def line(name: str, r: dict) -> str:
        l19 = f"{r['ratio_level19']:.2f}" if "ratio_level19" in r else "-"
        return (
            f"| {name} | {r['frames']} x {r['shape']} | {r['raw_bytes'] / 1e6:.2f} | {r['compressed_bytes'] / 1e6:.2f} | "
            f"{r['ratio']:.2f} | {l19} | {r['raw_bytes'] / 1e6 / max(r['compress_s'], 1e-9):.0f} | "
            f"{r['raw_bytes'] / 1e6 / max(r['decompress_s'], 1e-9):.0f} |"
        )

    for r in rows:
        print(line(r["video"], r))
    total = {
        "frames": sum(r["frames"] for r in rows),
        "shape": "various",
        **{k: sum(r[k] for r in rows) for k in ("raw_bytes", "compressed_bytes", "compress_s", "decompress_s")},
    }
    total["ratio"] = total["raw_bytes"] / total["compressed_bytes"]
    if all("ratio_level19" in r for r in rows):
        total["compressed_bytes_level19"] = sum(r["compressed_bytes_level19"] for r in rows)
        total["ratio_level19"] = total["raw_bytes"] / total["compressed_bytes_level19"]
    print(line("**all**", total))
    ratios = [r["ratio"] for r in rows]
    print(f"\nratio per video: min {min(ratios):.2f}, median {statistics.median(ratios):.2f}, max {max(ratios):.2f}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {"env": env, "args": {k: str(v) for k, v in vars(args).items()}, "videos": rows, "all": total}, indent=2
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
