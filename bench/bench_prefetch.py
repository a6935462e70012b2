"""Benchmark: how long a model's request loop waits for its inputs, cold, with decode-ahead, with a warm frame cache.

    python bench/bench_prefetch.py [--workdir DIR] [--questions 8] [--seconds 30] [--latency-crossvid 1.0]
                                   [--latency-causalstep 0.3] [--json OUT]

Data (generated once into --workdir): a CrossVid CC task of --questions questions, each over its own
four synthetic 854x480 30 fps MPEG-4 videos of --seconds (128 frames a question, 32 a video, shrunk
to 360 px), and a CausalStep task of 4 synthetic videos of 6 segments of 8 s (854x480, 30 fps; 8
frames a segment at 448 px; 80 requests). The tasks' own ``process_docs``, ``doc_to_text`` and
``doc_to_messages`` are used.

The model is simulated: lmms-eval's real chat request loop (``lmms_eval.models.chat._chat_base.ChatMixin``:
the ``Collator`` order, ``doc_to_messages`` called per request inside the loop) with a fixed latency per
request (it sleeps, as a GPU or an API leaves the CPU free; the time it spends hashing the frames it got
counts toward that latency). The wait of request n is the time between the model finishing request n-1
(for the first one: the loop starting) and starting request n. As in lmms-eval, every ``doc_to_text`` is
built before the loop (it probes each video), so probing is outside the loop.

Each mode runs in a fresh process (no in-process caches carried over); the memory high-water mark of
a benchmark is the highest RSS sampled (every 5 ms) during its loop:

  cold             no decode-ahead, no frame cache: every request decodes in the loop (the issue's case)
  prefetch         decode-ahead (default settings: 2 workers, 16 ahead, 1024 MB), no frame cache
  cache, 1st run   no decode-ahead, an empty frame cache (filled by this run)
  cache, warm      no decode-ahead, the frame cache the previous mode filled: nothing is decoded
  warm + prefetch  both
  default 1st run  decode-ahead and an empty frame cache (the defaults, on new data)

Goals (issue #20): with decode-ahead, the mean wait per request after the first (the pipeline full) is at
most 10% of the cold mean; with a warm cache, a whole run's waiting (its preparation) is at least 5x
shorter than cold. Every mode must hand the model the same frames: the frames' SHA-256 per request is
compared across modes. Memory: the high-water mark of the process RSS above its level when the loop
started, and the prefetcher's own high-water mark of prepared inputs held (estimated).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

FPS, WIDTH, HEIGHT = 30, 854, 480
CS_VIDEOS, CS_SEGMENTS, CS_SEGMENT_S = 4, 6, 8.0
MODES = {  # name: (decode-ahead, frame cache: None = off, "fresh" = emptied first, "keep" = as left)
    "cold": (False, None),
    "prefetch": (True, None),
    "cache, 1st run": (False, "fresh"),
    "cache, warm": (False, "keep"),
    "warm + prefetch": (True, "keep"),
    "default 1st run": (True, "fresh"),
}
PREFETCH_GOAL, WARM_GOAL = 0.10, 5.0


# ----------------------------------------------------------------------------------------------- data


def _video(path: Path, seconds: float, seed: int) -> str:
    from lmms_eval_plugins.synthetic import make_video

    if not path.exists():
        print(f"writing {path} ...", file=sys.stderr)
        tmp = path.with_suffix(".tmp.mp4")
        make_video(tmp, seconds=seconds, fps=FPS, width=WIDTH, height=HEIGHT, seed=seed).rename(path)
    return str(path)


def build_data(workdir: Path, questions: int, seconds: int) -> None:
    root = workdir / "crossvid"
    records = []
    for q in range(questions):
        videos = [
            _video(root / "videos" / "cook" / f"q{q}v{k}_{seconds}s.mp4", seconds, seed=100 * q + k) for k in range(4)
        ]
        records.append(
            {
                "id": q,
                "videos": [str(Path(v).relative_to(root / "videos")) for v in videos],
                "question": f"In which video is ingredient {q} added first?",
                "options": ["A. Video 1", "B. Video 2", "C. Video 3", "D. Video 4"],
                "answer": "ABCD"[q % 4],
            }
        )
    (root / "QA").mkdir(parents=True, exist_ok=True)
    (root / "QA" / "CC.json").write_text(json.dumps(records))

    root = workdir / "causalstep"
    options = [f"Option {k}: something happens in this part of the video." for k in range(8)]
    out = []
    for v in range(CS_VIDEOS):
        rel = f"videos/cs{v}.mp4"
        _video(root / rel, CS_SEGMENTS * CS_SEGMENT_S, seed=1000 + v)
        segments = []
        for i in range(CS_SEGMENTS):
            block = {
                "question": f"What happens in segment {i + 1} of video {v}?",
                "options": options,
                "answer": (i + v) % 8,
            }
            causal = (
                None
                if i == 0
                else {**block, "question": f"Why does segment {i + 1} of video {v} follow from segment {i}?"}
            )
            segments.append({"start": i * CS_SEGMENT_S, "end": (i + 1) * CS_SEGMENT_S, "desc": block, "causal": causal})
        out.append({"video_id": f"cs{v}", "video": rel, "category": "bench", "segments": segments})
    (root / "causalstep.json").write_text(json.dumps(out))


# ----------------------------------------------------------------------------------------------- one mode


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


class _PeakRss:
    """The highest RSS seen while it runs, sampled every 5 ms by a thread (Linux's own high-water mark
    covers the whole process: both benchmarks of a mode)."""

    def __init__(self) -> None:
        self.peak = _rss_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, _rss_mb())

    def __enter__(self) -> _PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mb())


def _frames_digest(chat_messages: Any) -> str:
    """SHA-256 over the text and every frame's pixels the model receives, in order."""
    h = hashlib.sha256()
    for message in chat_messages.messages:
        for part in message.content:
            if part.type == "text":
                h.update(part.text.encode())
            elif part.type in ("video", "image"):
                for frame in part.url if isinstance(part.url, list) else [part.url]:
                    h.update(frame.mode.encode() + repr(frame.size).encode() + frame.tobytes())
    return h.hexdigest()


def run_mode(workdir: Path, latency: dict[str, float]) -> dict[str, Any]:
    """Both benchmarks under the settings of the environment; run in its own process."""
    os.environ["LMMS_EVAL_PLUGINS_DATA_ROOT"] = str(workdir)
    from lmms_eval.api.instance import Instance
    from lmms_eval.api.model import CacheHook
    from lmms_eval.models.chat._chat_base import ChatMixin

    from lmms_eval_plugins import frame_cache, prefetch
    from lmms_eval_plugins.data import to_dataset

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test kit (tests/testkit)
    from testkit.task_utils import load_task_utils

    cv, cs = load_task_utils("crossvid"), load_task_utils("causalstep")
    datasets = {
        "crossvid": (
            cv,
            to_dataset(cv.load_docs({"benchmark": "crossvid", "source": "auto"}, "CC"), features=cv.row_features("CC")),
        ),
        "causalstep": (
            cs,
            cs.process_docs(
                [{"benchmark": "causalstep", "source": "auto", "frames_per_segment": 8, "max_long_side": 448}]
            ),
        ),
    }
    out: dict[str, Any] = {}
    for name, (module, dataset) in datasets.items():
        hook = prefetch.prefetched(module.doc_to_messages)  # what the task folder's utils.py exports
        requests = [
            Instance(
                "generate_until",
                (module.doc_to_text(dataset[i]), hook, {"max_new_tokens": 8}, i, name, "test"),
                0,
                {"task": name, "doc_id": i, "repeats": 1},
            )
            for i in range(len(dataset))
        ]
        stamps: list[tuple[float, float]] = []  # (start, end) of each request in the model
        digests: dict[int, str] = {}
        model = _simulated_model(ChatMixin, CacheHook, {name: {"test": dataset}}, latency[name], stamps, digests)

        counters_before = dict(vars(frame_cache.COUNTERS))
        rss0, cpu0 = _rss_mb(), time.process_time()
        start = time.perf_counter()
        with _PeakRss() as rss:
            model.generate_until(requests)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
        waits = [stamps[0][0] - start] + [stamps[n][0] - stamps[n - 1][1] for n in range(1, len(stamps))]
        stats = prefetch.layer_stats() or {}
        prefetch.shutdown()  # the next benchmark discovers its own plan
        out[name] = {
            "requests": len(waits),
            "latency_s": latency[name],
            "wall_s": wall,
            "cpu_s": cpu,
            "wait_total_s": sum(waits),
            "wait_mean_s": statistics.fmean(waits),
            "wait_first_s": waits[0],
            "wait_steady_mean_s": statistics.fmean(waits[1:]),
            "wait_steady_p90_s": _quantile(waits[1:], 0.9),
            "wait_max_s": max(waits),
            "rss_before_mb": rss0,
            "rss_peak_mb": rss.peak,
            "prefetch_peak_mb": stats.get("peak_bytes", 0) / 1e6,
            "prefetched": stats.get("ready", 0) + stats.get("waited", 0),
            "cache": {k: v - counters_before[k] for k, v in vars(frame_cache.COUNTERS).items()},
            "digests": [digests[i] for i in range(len(digests))],
        }
    return out


def _simulated_model(
    chat_mixin: type,
    cache_hook: type,
    task_dict: dict,
    latency: float,
    stamps: list[tuple[float, float]],
    digests: dict[int, str],
) -> Any:
    """lmms-eval's chat request loop with a model that takes ``latency`` seconds a request."""

    class SimulatedModel(chat_mixin):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.task_dict, self.batch_size, self.rank, self.cache_hook = task_dict, 1, 0, cache_hook(None)

        def _infer_one(self, chat_messages: Any, gen_kwargs: dict) -> str:
            begin = time.perf_counter()
            digests[len(stamps)] = _frames_digest(chat_messages)  # part of the model's time
            time.sleep(max(0.0, latency - (time.perf_counter() - begin)))
            stamps.append((begin, time.perf_counter()))
            return "A"

    return SimulatedModel()


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


# ----------------------------------------------------------------------------------------------- driver


def _child(args: argparse.Namespace, mode: str, cache_dir: Path) -> dict[str, Any]:
    ahead, cache = MODES[mode]
    env = {**os.environ, "LMMS_EVAL_PLUGINS_PREFETCH": "1" if ahead else "0"}
    if cache is None:
        env["LMMS_EVAL_PLUGINS_FRAME_CACHE"] = "off"
    else:
        if cache == "fresh":
            shutil.rmtree(cache_dir, ignore_errors=True)
        env["LMMS_EVAL_PLUGINS_FRAME_CACHE"] = str(cache_dir)
    load = os.getloadavg()[0]
    proc = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            "--workdir",
            str(args.workdir),
            "--latency-crossvid",
            str(args.latency_crossvid),
            "--latency-causalstep",
            str(args.latency_causalstep),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"mode {mode!r} failed:\n{proc.stderr[-4000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["load_avg_1m"] = [load, os.getloadavg()[0]]
    return result


def table(results: dict[str, dict[str, Any]], bench: str) -> str:
    cold = results["cold"][bench]
    lines = [
        f"**{bench}** ({cold['requests']} requests, model latency {cold['latency_s']} s a request)",
        "",
        "| mode | wait / request (mean) | after the 1st (mean, p90) | whole run's wait | vs cold | run wall | "
        "RSS growth | prefetched, peak held | frame cache hits / decoded |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for mode, result in results.items():
        r = result[bench]
        lines.append(
            f"| {mode} | {r['wait_mean_s']:.3f} s | {r['wait_steady_mean_s']:.3f} s, {r['wait_steady_p90_s']:.3f} s "
            f"| {r['wait_total_s']:.2f} s | {cold['wait_total_s'] / max(r['wait_total_s'], 1e-9):.1f}x faster "
            f"| {r['wall_s']:.1f} s | {r['rss_peak_mb'] - r['rss_before_mb']:.0f} MB "
            f"| {r['prefetched']}, {r['prefetch_peak_mb']:.0f} MB | {r['cache']['hits']} / {r['cache']['misses']} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workdir", type=Path, default=Path(tempfile.gettempdir()) / "lmms_eval_plugins_bench_prefetch"
    )
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--latency-crossvid", type=float, default=1.0)
    parser.add_argument("--latency-causalstep", type=float, default=0.3)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    latency = {"crossvid": args.latency_crossvid, "causalstep": args.latency_causalstep}
    if args.child:
        print(json.dumps(run_mode(args.workdir, latency)))
        return 0
    args.workdir.mkdir(parents=True, exist_ok=True)
    build_data(args.workdir, args.questions, args.seconds)
    cache_dir = args.workdir / "frame_cache"
    results = {}
    for mode in MODES:
        print(f"running {mode} ...", file=sys.stderr)
        results[mode] = _child(args, mode, cache_dir)

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _timing import environment

    env = environment(("decord", "pillow", "numpy", "lmms_eval"))
    print("machine: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    print(
        "1-min load average before/after each mode: "
        + "; ".join(f"{mode} {r['load_avg_1m'][0]:.2f}/{r['load_avg_1m'][1]:.2f}" for mode, r in results.items())
    )
    verdicts = {}
    for bench in ("crossvid", "causalstep"):
        print()
        print(table(results, bench))
        same = all(r[bench]["digests"] == results["cold"][bench]["digests"] for r in results.values())
        cold = results["cold"][bench]
        ratio = results["prefetch"][bench]["wait_steady_mean_s"] / cold["wait_mean_s"]
        speedup = cold["wait_total_s"] / max(results["cache, warm"][bench]["wait_total_s"], 1e-9)
        verdicts[bench] = {
            "identical_frames": same,
            "prefetch_wait_vs_cold": ratio,
            "warm_speedup": speedup,
            "pass": same and ratio <= PREFETCH_GOAL and speedup >= WARM_GOAL,
        }
        print(
            f"\nsame frames in every mode: {same}; decode-ahead: wait after the 1st request {100 * ratio:.1f}% of the "
            f"cold wait (goal <= {100 * PREFETCH_GOAL:.0f}%); warm cache: whole run's wait {speedup:.1f}x shorter "
            f"(goal >= {WARM_GOAL:.0f}x) -> {'PASS' if verdicts[bench]['pass'] else 'FAIL'}"
        )
    if args.json:
        for result in results.values():
            for r in result.values():
                if isinstance(r, dict):
                    r.pop("digests", None)
        args.json.write_text(
            json.dumps(
                {
                    "env": env,
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "results": results,
                    "verdicts": verdicts,
                },
                indent=2,
            )
        )
    return 0 if all(v["pass"] for v in verdicts.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
