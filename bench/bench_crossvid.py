"""Benchmark: preparing the inputs of a 4-video CrossVid question against decord's raw batched read.

    python bench/bench_crossvid.py [--workdir DIR] [--frames 128] [--seconds 150] [--reps 5] [--json OUT]

Generates four 854x480 30 fps MPEG-4 videos of --seconds each once (cached in --workdir) and a CrossVid
data folder holding one CC question over them (CC: four videos, the budget split equally). Then times,
median over --reps with the methods interleaved so that background load hits all of them alike:

  raw decord   for each video, VideoReader(path).get_batch(indices).asnumpy() of the very frame indices
               the task samples (128 frames: 32 a video), at full size; with decord's default threads and
               with one thread; the faster of the two is the floor;
  task, cold   the task's own doc_to_messages(doc): probe, decode (scaled to 360 px while decoding), PIL
               frames, labels and prompt; the video-info cache is cleared first, as on a first visit;
  task, warm   the same with the video-info cache filled (each video was probed before, e.g. by the
               doc_to_text lmms-eval builds for every doc before inference);
  doc_to_text  for reference: the prompt of simple model classes, which needs each video's frame count
               and rate (and decodes one frame per video for its size), cold.
Target: the task's preparation takes at most 1.5x the raw read. Wall and CPU seconds are both reported;
on a machine shared with other jobs, CPU time is the steadier measure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import decord

from lmms_eval_plugins import media

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: bench/ holds _timing
from _timing import environment, measure  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test kit (tests/testkit)
from testkit.task_utils import load_task_utils
from lmms_eval_plugins.synthetic import make_video

FPS, WIDTH, HEIGHT, N_VIDEOS = 30, 854, 480, 4
TARGET = 1.5


def bench_videos(workdir: Path, seconds: int) -> list[Path]:
    paths = []
    for k in range(1, N_VIDEOS + 1):
        path = workdir / "crossvid" / "videos" / "cook" / f"bench{k}_{WIDTH}x{HEIGHT}_{FPS}fps_{seconds}s.mp4"
        if not path.exists():
            print(f"writing {path} ...", file=sys.stderr)
            tmp = path.with_suffix(".tmp.mp4")
            make_video(tmp, seconds=seconds, fps=FPS, width=WIDTH, height=HEIGHT, seed=k).rename(path)
        paths.append(path)
    return paths


def bench_doc(workdir: Path, videos: list[Path], frames: int) -> tuple[object, dict]:
    cv = load_task_utils("crossvid")
    record = {
        "id": 0,
        "videos": [str(p.relative_to(workdir / "crossvid" / "videos")) for p in videos],
        "question": "In which video is the sauce thickened with flour?",
        "options": ["A. Video 1", "B. Video 2", "C. Video 3", "D. Video 4"],
        "answer": "B",
    }
    (workdir / "crossvid" / "QA").mkdir(parents=True, exist_ok=True)
    (workdir / "crossvid" / "QA" / "CC.json").write_text(json.dumps([record]))
    os.environ["LMMS_EVAL_PLUGINS_DATA_ROOT"] = str(workdir)
    (doc,) = cv.load_docs({"benchmark": "crossvid", "source": "auto", "frames": frames}, "CC")
    return cv, doc


def methods(cv, doc: dict) -> dict[str, Callable[[], object]]:
    plan = cv.plan_frames(doc)  # the indices the task decodes, per video
    paths = [m["path"] for m in doc["media"]]

    def raw(threads: int):
        return lambda: [
            decord.VideoReader(p, ctx=decord.cpu(0), num_threads=threads).get_batch(p_plan[2]).asnumpy()
            for p, p_plan in zip(paths, plan)
        ]

    def cold():
        media._probe.cache_clear()
        return cv.doc_to_messages(doc)

    return {
        "raw decord (default threads)": raw(0),
        "raw decord (1 thread)": raw(1),
        "task doc_to_messages, cold": cold,
        "task doc_to_messages, warm": lambda: cv.doc_to_messages(doc),
        "task doc_to_text, cold (no decoding)": lambda: (media._probe.cache_clear(), cv.doc_to_text(doc)),
    }


def table(times: dict[str, dict[str, float]], frames: int) -> str:
    raw = {kind: min(t[kind] for name, t in times.items() if name.startswith("raw")) for kind in ("wall", "cpu")}
    lines = ["| method | wall s | frames/s | wall vs raw | CPU s | CPU vs raw |", "|---|---|---|---|---|---|"]
    for name, t in times.items():
        lines.append(
            f"| {name} | {t['wall']:.3f} | {frames / t['wall']:.0f} | {t['wall'] / raw['wall']:.2f}x "
            f"| {t['cpu']:.3f} | {t['cpu'] / raw['cpu']:.2f}x |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "lmms_eval_plugins_bench")
    parser.add_argument("--frames", type=int, default=128)
    parser.add_argument("--seconds", type=int, default=150)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()
    os.environ.setdefault("LMMS_EVAL_PLUGINS_FRAME_CACHE", "off")  # time decoding, not persistent-cache hits
    args.workdir.mkdir(parents=True, exist_ok=True)
    videos = bench_videos(args.workdir, args.seconds)
    cv, doc = bench_doc(args.workdir, videos, args.frames)
    content = cv.doc_to_messages(doc)[1]["content"]
    counts = [len(c["url"]) for c in content if c["type"] == "video"]
    sizes = {c["url"][0].size for c in content if c["type"] == "video"}
    times = measure(methods(cv, doc), args.reps)
    raw = {kind: min(t[kind] for name, t in times.items() if name.startswith("raw")) for kind in ("wall", "cpu")}
    ratios = {name: {kind: t[kind] / raw[kind] for kind in ("wall", "cpu")} for name, t in times.items()}
    env = environment(("decord", "pillow", "numpy"))
    print(
        f"{N_VIDEOS} videos of {WIDTH}x{HEIGHT}, {FPS} fps, {args.seconds} s, mp4v; {args.frames} frames "
        f"({'+'.join(map(str, counts))}), output frames {sorted(sizes)}; median of {args.reps} runs"
    )
    print("machine: " + ", ".join(f"{key}={value}" for key, value in env.items()))
    print()
    print(table(times, sum(counts)))
    cold = ratios["task doc_to_messages, cold"]
    verdict = "PASS" if min(cold["wall"], cold["cpu"]) <= TARGET else "FAIL"
    print(
        f"\ntarget: task preparation (cold) <= {TARGET}x raw decord: wall {cold['wall']:.2f}x, CPU {cold['cpu']:.2f}x -> {verdict}"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "env": env,
                    "videos": [str(p) for p in videos],
                    "frames": args.frames,
                    "frames_per_video": counts,
                    "reps": args.reps,
                    "seconds": times,
                    "vs_raw": ratios,
                    "target": TARGET,
                    "verdict": verdict,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
