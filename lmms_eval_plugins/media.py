"""Frame sampling shared by the video benchmarks: decord for videos, PIL for images and frame folders.

Frames leave this module as RGB PIL images, ready for lmms-eval's chat content
(`{"type": "video", "url": [PIL, ...]}`), so every model class sees exactly the frames we chose.
`sample_video`, `sample_frame_folder` and `video_info` go through the persistent frame cache
(`lmms_eval_plugins.frame_cache`): a hit returns bit-identical frames without decoding.
"""

from __future__ import annotations

import bisect
import math
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar, get_args

import numpy as np
from PIL import Image, ImageFile

from lmms_eval_plugins import frame_cache
from lmms_eval_plugins.data import safe_path, skip_missing_media
from lmms_eval_plugins.errors import MediaError
from lmms_eval_plugins.run_state import current_run
from lmms_eval_plugins.settings import BadSetting, env_number

if TYPE_CHECKING:
    from decord import VideoReader

Interval = tuple[float, float]
T = TypeVar("T")
IMAGE_SUFFIXES = frozenset({".jpg", ".jpeg", ".png", ".bmp", ".webp"})
# One decoding thread, as lmms-eval's own decord loaders use: sampled frames are far apart, so decord
# seeks before almost every frame and ffmpeg's frame threads are flushed at each seek. On the bench,
# decord's automatic thread count was no faster, and it would compete with the model's own threads.
DECODE_THREADS = 1
MAX_PIXELS_ENV = "LMMS_EVAL_PLUGINS_MAX_IMAGE_PIXELS"
DEFAULT_MAX_IMAGE_PIXELS = 100_000_000  # 10,000 x 10,000: far above any benchmark image, far below a bomb
MAX_VIDEO_PIXELS_ENV = "LMMS_EVAL_PLUGINS_MAX_VIDEO_PIXELS"
# 8K UHD (7680 x 4320 = 33.2 M) fits; a decoded RGB frame at the cap is 120 MB, and a batch holds many.
DEFAULT_MAX_VIDEO_PIXELS = 40_000_000
PLACEHOLDER_SIDE = 32  # what a model gets for a skipped unreadable file: small, and above Qwen's 28-pixel minimum
_STRICT_DECODE = threading.Lock()  # LOAD_TRUNCATED_IMAGES is process-wide: one strict decode at a time


@dataclass(frozen=True)
class VideoInfo:
    num_frames: int
    fps: float
    duration: float  # seconds: num_frames / fps
    width: int
    height: int


@dataclass
class SampledFrames:
    frames: list[Image.Image]
    timestamps: list[float]  # seconds: index / fps
    indices: list[int]  # video: frame index; folder: position in the numerically sorted file list
    path: str
    fps: float
    # Number of each frame in its source: the video frame index, or the integer in a frame file's
    # name. Defaults to `indices`. (CrossVid's official code keys boxes by sorted position: `indices`.)
    frame_numbers: list[int] = field(default_factory=list)
    source_size: tuple[int, int] | None = None  # (width, height) before resizing, to scale boxes

    def __post_init__(self) -> None:
        if not self.frame_numbers:
            self.frame_numbers = list(self.indices)


@dataclass(frozen=True)
class VideoRequest:
    path: str | Path
    intervals: Sequence[Interval] | None = None  # seconds; None = the whole video
    record_id: str | None = None


# ---------------------------------------------------------------------------------------------
# Pure index math
# ---------------------------------------------------------------------------------------------


def _clamp(index: int, total_frames: int) -> int:
    return min(max(index, 0), total_frames - 1)


def uniform_indices(total_frames: int, k: int, first: int = 0, last: int | None = None) -> list[int]:
    """K frame indices spread uniformly over the frames first..last (inclusive).

    Rule: cut the n = last - first + 1 frames into k equal bins and take the frame holding each
    bin's centre, i.e. first + floor((j + 1/2) * n / k) for j = 0..k-1. Centres keep equal margins at
    both ends (unlike linspace, which always takes the first and last frame). When n <= k, every
    frame in the range is returned once: a video shorter than the budget is never padded with
    repeats. Bounds are clamped to the video and a reversed range is swapped.
    """
    if k <= 0 or total_frames <= 0:
        return []
    last = total_frames - 1 if last is None else last
    first, last = sorted((_clamp(first, total_frames), _clamp(last, total_frames)))
    n = last - first + 1
    if n <= k:
        return list(range(first, last + 1))
    # Integer form of floor((2j + 1) * n / (2k)): exact, no float rounding at bin edges.
    return [first + (2 * j + 1) * n // (2 * k) for j in range(k)]


def seconds_to_frame_range(start: float, end: float, fps: float, total_frames: int) -> tuple[int, int]:
    """The first and last frame (by timestamp index / fps) inside [start, end] seconds.

    A reversed interval is swapped. An interval holding no frame timestamp (zero length, or shorter
    than one frame) yields the single frame nearest its midpoint. The result is clamped to the video.
    """
    if total_frames <= 0 or fps <= 0:
        raise ValueError(f"need a video with frames and a frame rate, got {total_frames} frames at {fps} fps")
    start, end = sorted((start, end))
    # Rounding before ceil/floor stops float noise (0.3 * 10 = 3.0000000000000004) from losing a frame.
    first, last = math.ceil(round(start * fps, 6)), math.floor(round(end * fps, 6))
    if first > last:
        first = last = round((start + end) / 2 * fps)
    return _clamp(first, total_frames), _clamp(last, total_frames)


def split_budget(total: int, lengths: Sequence[float], mode: Literal["equal", "proportional"]) -> list[int]:
    """Split a frame budget over several videos or intervals; the parts always sum to `total`.

    "equal": total // n each, the remainder going one by one to the first parts.
    "proportional": by length, with the largest-remainder method (floor every exact quota, then hand
    the leftover frames to the largest fractional parts, earlier parts first on ties). Lengths that
    are not positive finite numbers count as 0; if all do, the split is equal. When total >= n every
    part gets at least one frame: a part left at 0 takes one from the largest part.
    """
    n = len(lengths)
    if mode not in ("equal", "proportional"):
        raise ValueError(f"split mode must be 'equal' or 'proportional', got {mode!r}")
    if n == 0:
        return []
    if total <= 0:
        return [0] * n
    weights = [Fraction(float(x)) if 0 < x < float("inf") else Fraction(0) for x in lengths]
    if mode == "equal" or not any(weights):
        return [total // n + (i < total % n) for i in range(n)]
    whole = sum(weights)
    quotas = [total * w / whole for w in weights]  # exact fractions: no float drift in the sum
    parts = [int(q) for q in quotas]
    by_remainder = sorted(range(n), key=lambda i: (parts[i] - quotas[i], i))
    for i in by_remainder[: total - sum(parts)]:
        parts[i] += 1
    if total >= n:
        for i in range(n):
            if parts[i] == 0:
                donor = parts.index(max(parts))
                parts[donor] -= 1
                parts[i] = 1
    return parts


IndexRule = Literal["centre", "linspace"]
INDEX_RULES: tuple[str, ...] = get_args(IndexRule)


def linspace_indices(total_frames: int, k: int) -> list[int]:
    """K frame indices over frames 0..n-1 as ``np.linspace(0, n - 1, k)`` cast to int (floored).

    The first and last frame are always taken. When n < k the budget drops to n (every frame once);
    indices that coincide are kept once. numpy's own linspace is used, so the float steps (and the
    floor of a value landing just under an integer) are exactly those of code that calls it.
    """
    if k <= 0 or total_frames <= 0:
        return []
    k = min(k, total_frames)
    return sorted({int(x) for x in np.floor(np.linspace(0, total_frames - 1, num=k))})


def linspace_interval_indices(total_frames: int, fps: float, intervals: Sequence[Interval], k: int) -> list[int]:
    """K frame indices over one group of intervals (seconds) by a linspace in time.

    The valid pieces (start < end; others are ignored) are laid end to end in "virtual" time; k
    times ``np.linspace(0, total length, k)`` (one frame: time 0) are mapped back to each piece's own
    time, clamped to the video, and to frame ``int(t * fps)``. Frames outside the video are dropped,
    and the result is sorted with repeats removed (so it may hold fewer than k frames).
    """
    if k <= 0 or total_frames <= 0 or fps <= 0:
        return []
    pieces = [(float(s), float(e)) for s, e in intervals if s < e]
    if not pieces:
        return []
    ends = [0.0]  # running sum of piece lengths, as floats in file order
    for s, e in pieces:
        ends.append(ends[-1] + (e - s))
    duration = total_frames / fps
    times = np.linspace(0, ends[-1], num=k) if k > 1 else [0.0]
    found = set()
    for t in times:
        t = float(t)
        j = min(max(bisect.bisect_right(ends, t) - 1, 0), len(pieces) - 1)
        actual = min(max(pieces[j][0] + (t - ends[j]), 0.0), duration)
        index = int(actual * fps)
        if 0 <= index < total_frames:
            found.add(index)
    return sorted(found)


def frame_plan(
    total_frames: int,
    fps: float,
    num_frames: int,
    intervals: Sequence[Interval] | None,
    index_rule: IndexRule = "centre",
) -> list[int]:
    """The indices `sample_video` decodes: uniform over the video, or over each interval (seconds)
    with the budget split in proportion to interval length; interval by interval, in the given order.

    ``index_rule="linspace"``: `linspace_indices` over the video, or `linspace_interval_indices`
    over the intervals taken together as one group (no per-interval split)."""
    _check_rule(index_rule)
    if index_rule == "linspace":
        if intervals is None:
            return linspace_indices(total_frames, num_frames)
        return linspace_interval_indices(total_frames, fps, intervals, num_frames)
    if intervals is None:
        return uniform_indices(total_frames, num_frames)
    budgets = split_budget(num_frames, [abs(end - start) for start, end in intervals], "proportional")
    return [
        i
        for (start, end), k in zip(intervals, budgets)
        for i in uniform_indices(total_frames, k, *seconds_to_frame_range(start, end, fps, total_frames))
    ]


def _check_rule(index_rule: str) -> None:
    if index_rule not in INDEX_RULES:
        raise ValueError(f"index_rule must be one of {INDEX_RULES}, got {index_rule!r}")


def fit_size(width: int, height: int, max_long_side: int | None) -> tuple[int, int]:
    """(width, height) scaled so the longer side is at most `max_long_side`; never enlarged."""
    if max_long_side is None or max(width, height) <= max_long_side:
        return width, height
    if max_long_side < 1:
        raise ValueError(f"max_long_side must be a positive number of pixels, got {max_long_side}")
    scale = max_long_side / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def resize_down(image: Image.Image, max_long_side: int | None) -> Image.Image:
    """Shrink so the longer side is at most `max_long_side` (aspect kept); never enlarges."""
    size = fit_size(*image.size, max_long_side)
    if size == image.size:
        return image
    # reducing_gap: box-reduce by an integer factor first (fast) when shrinking a lot, as thumbnail does.
    return image.resize(size, Image.Resampling.BILINEAR, reducing_gap=2.0)


# Annotations are rounded and container durations differ by a frame: a gold interval may end this far
# past the probed duration; further out its frames would silently be the last ones.
END_TOLERANCE_S = 1.0


def intervals_past_end(intervals: Sequence[Interval], duration: float, tolerance: float = END_TOLERANCE_S) -> list[int]:
    """Positions of the (start, end) intervals (seconds) that start at or after ``duration``
    or end more than ``tolerance`` past it."""
    return [
        i for i, (start, end) in enumerate(intervals) if float(start) >= duration or float(end) > duration + tolerance
    ]


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


def _existing(path: str | Path, what: str, record_id: str | None, *, folder: bool = False) -> Path:
    p = Path(path).expanduser()
    if not (p.is_dir() if folder else p.is_file()):
        raise MediaError(
            f"{what} not found",
            record=record_id,
            path=str(p),
            fix=f"put the {what} at this path (see the benchmark's data layout in the README), "
            "or run with the task option that skips records with missing media",
        )
    return p


_REENCODE = {
    "video": "ffmpeg -i in.mp4 -c:v libx264 -pix_fmt yuv420p out.mp4",
    "image": "save it again as JPEG or PNG",
}


def _undecodable(what: str, path: Path, record_id: str | None, exc: BaseException) -> MediaError:
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
    return MediaError(
        f"cannot decode {what} ({reason})",
        record=record_id,
        path=str(path),
        fix=f"the {what} is truncated or in an unsupported format: download it again, or convert it ({_REENCODE[what]})",
    )


def _reader(path: str, width: int = -1, height: int = -1) -> VideoReader:
    try:
        import decord
    except ImportError as exc:  # decord is not pulled in by lmms-eval itself
        raise ImportError("reading videos needs decord: pip install decord (eva-decord on macOS arm64)") from exc
    return decord.VideoReader(path, ctx=decord.cpu(0), width=width, height=height, num_threads=DECODE_THREADS)


def video_info(path: str | Path, record_id: str | None = None) -> VideoInfo:
    """Frame count, frame rate, duration and size of a video (cached by path, mtime and size)."""
    p = _existing(path, "video", record_id)
    stat = p.stat()
    try:
        return _probe(str(p.resolve()), stat.st_mtime_ns, stat.st_size)
    except MediaError as exc:  # the cache is shared by all records, so the probe cannot name one
        raise MediaError(exc.problem, record=record_id, path=str(p), fix=exc.fix) from exc


@lru_cache(maxsize=512)
def _probe(path: str, mtime_ns: int, size: int) -> VideoInfo:
    # mtime and size are part of the key so an edited file is probed again; no reader outlives the call.
    cache = frame_cache.get_cache()
    key = frame_cache.sampling_key("probe", [[path, size, mtime_ns]], {}) if cache is not None else ""
    known = cache.get_info(key) if cache is not None else None
    if known is not None:
        try:
            n, fps, width, height = (
                int(known["num_frames"]),
                float(known["fps"]),
                int(known["width"]),
                int(known["height"]),
            )
            if n > 0 and fps > 0:
                return VideoInfo(n, fps, n / fps, width, height)
        except (KeyError, TypeError, ValueError):
            pass  # a bad row: probe again and overwrite it
    _check_video_pixels(Path(path), None)  # before decord decodes a (maybe gigantic) first frame
    reader, fps = _open(Path(path), None)
    width, height = _decode(reader, [0], Path(path), None)[0].size  # decord tells the size only by decoding
    _refuse_video_pixels(width, height, Path(path), None)  # a header that understated the size
    info = VideoInfo(len(reader), fps, len(reader) / fps, width, height)
    if cache is not None:
        cache.put_info(key, {"num_frames": info.num_frames, "fps": fps, "width": width, "height": height})
    return info


def max_video_pixels() -> int:
    """The largest video frame (width x height) we decode: ``LMMS_EVAL_PLUGINS_MAX_VIDEO_PIXELS``, default 40 M."""
    try:
        return int(env_number(MAX_VIDEO_PIXELS_ENV, DEFAULT_MAX_VIDEO_PIXELS, whole=True, minimum=1))
    except BadSetting as exc:
        raise MediaError(str(exc), fix=f"e.g. {DEFAULT_MAX_VIDEO_PIXELS}") from None


def _refuse_video_pixels(width: int, height: int, path: Path, record_id: str | None) -> None:
    limit = max_video_pixels()
    if width * height > limit:
        raise MediaError(
            f"video frames have {width} x {height} pixels, above the limit of {limit:,}",
            record=record_id,
            path=str(path),
            fix=f"scale the video down (ffmpeg -i in.mp4 -vf scale=-2:1080 out.mp4); if it is genuine, "
            f"raise {MAX_VIDEO_PIXELS_ENV}",
        )


def video_header_size(path: Path) -> tuple[int, int] | None:
    """(width, height) of the first video stream from the container header (PyAV: nothing is decoded);
    None when PyAV is missing or cannot read the header (decord then reports the file itself)."""
    try:
        import av
    except ImportError:
        return None
    try:
        with av.open(str(path)) as container:
            streams = container.streams.video
            if not streams:
                return None
            context = streams[0].codec_context
            return int(context.width), int(context.height)
    except Exception:  # noqa: BLE001 - any unreadable header: decord names the problem when it opens the file
        return None


def _check_video_pixels(path: Path, record_id: str | None) -> None:
    size = video_header_size(path)
    if size is not None:
        _refuse_video_pixels(*size, path, record_id)


def _open(path: Path, record_id: str | None, width: int = -1, height: int = -1) -> tuple[VideoReader, float]:
    """A decord reader (scaling to width x height while decoding, unless -1) and its frame rate."""
    try:
        reader = _reader(str(path), width, height)
        fps = float(reader.get_avg_fps())
    except Exception as exc:  # decord raises DECORDError, RuntimeError or AssertionError on bad files
        raise _undecodable("video", path, record_id, exc) from exc
    if fps <= 0:
        raise _undecodable("video", path, record_id, ValueError(f"the container gives {fps} frames per second"))
    return reader, fps


def _decode(reader: VideoReader, indices: list[int], path: Path, record_id: str | None) -> list[Image.Image]:
    if not indices:
        return []
    try:
        batch = reader.get_batch(indices).asnumpy()  # one seek-optimised read of every index
    except Exception as exc:  # a file can open yet fail mid-stream
        raise _undecodable("video", path, record_id, exc) from exc
    return [Image.fromarray(frame) for frame in batch]


def load_image(path: str | Path, record_id: str | None = None, max_long_side: int | None = None) -> Image.Image:
    """An RGB image, shrunk to `max_long_side` if larger (a placeholder for an unreadable file when skipping is on:
    see :func:`skippable`)."""
    return skippable(
        lambda: _load_image(_existing(path, "image", record_id), record_id, max_long_side)[0],
        path,
        record_id,
        _placeholder_image,
    )


def _placeholder_image() -> Image.Image:
    return Image.new("RGB", (PLACEHOLDER_SIDE, PLACEHOLDER_SIDE), (128, 128, 128))


def _placeholder_frames(path: str | Path, num_frames: int) -> SampledFrames:
    k = max(1, min(int(num_frames), 2))
    return SampledFrames(
        frames=[_placeholder_image() for _ in range(k)],
        timestamps=[0.0] * k,
        indices=list(range(k)),
        path=str(path),
        fps=1.0,
        source_size=(PLACEHOLDER_SIDE, PLACEHOLDER_SIDE),
    )


def skippable(decode: Callable[[], T], path: str | Path, record_id: str | None, placeholder: Callable[[], T]) -> T:
    """``decode()`` at request time; a media file it cannot read is a MediaError, or, with
    ``LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA=1``, a placeholder for the model while the sample is noted
    in the run's state (:mod:`lmms_eval_plugins.run_state`): its results leave it out of every metric
    and count it under ``skipped_by_reason`` as "unreadable media". A run never stops on one bad file."""
    try:
        return decode()
    except MediaError as exc:
        if exc.path is None or not skip_missing_media():  # a bad setting is no file's fault: never skipped
            raise
        from loguru import logger

        current_run().note_unreadable_media(path, record_id)
        logger.warning(f"skipping record {record_id}: {exc.problem} ({exc.path}); counted as 'unreadable media'")
        return placeholder()


def max_image_pixels() -> int:
    """The largest image (width x height) we decode: ``LMMS_EVAL_PLUGINS_MAX_IMAGE_PIXELS``, default 100 M."""
    try:
        return int(env_number(MAX_PIXELS_ENV, DEFAULT_MAX_IMAGE_PIXELS, whole=True, minimum=1))
    except BadSetting as exc:
        raise MediaError(str(exc), fix="e.g. 100000000") from None


def _load_image(path: Path, record_id: str | None, max_long_side: int | None) -> tuple[Image.Image, tuple[int, int]]:
    """The RGB image (shrunk) and its original (width, height).

    Never decoded silently: lmms-eval turns on PIL's ``LOAD_TRUNCATED_IMAGES`` for the whole process
    (a cut-off file would come out grey at the bottom), so we decode with it off; and an image above
    :func:`max_image_pixels` (a decompression bomb) is refused before it is decoded.
    """
    try:
        with Image.open(path) as im:
            size = im.size
            limit = max_image_pixels()
            if size[0] * size[1] > limit:
                raise MediaError(
                    f"image has {size[0]} x {size[1]} pixels, above the limit of {limit:,} "
                    "(a decompression bomb, or a genuine huge image)",
                    record=record_id,
                    path=str(path),
                    fix=f"check the file; if it is genuine, raise {MAX_PIXELS_ENV}",
                )
            # JPEG can decode at 1/2, 1/4 or 1/8 scale: ask for no less than the target size.
            im.draft("RGB", fit_size(*size, max_long_side))
            with _STRICT_DECODE:
                saved, ImageFile.LOAD_TRUNCATED_IMAGES = ImageFile.LOAD_TRUNCATED_IMAGES, False
                try:
                    im.load()
                finally:
                    ImageFile.LOAD_TRUNCATED_IMAGES = saved
            return resize_down(im.convert("RGB"), max_long_side), size
    except MediaError:
        raise
    except Exception as exc:  # noqa: BLE001 - PIL raises OSError, ValueError, SyntaxError, EOFError, struct.error,
        # DecompressionBombError, IndexError... on hostile files: each is this file's fault, named as such
        raise _undecodable("image", path, record_id, exc) from exc


# ---------------------------------------------------------------------------------------------
# Sampling
# ---------------------------------------------------------------------------------------------


def sample_video(
    path: str | Path,
    num_frames: int,
    *,
    interval: Interval | None = None,
    intervals: Sequence[Interval] | None = None,
    max_long_side: int | None = None,
    record_id: str | None = None,
    index_rule: IndexRule = "centre",
) -> SampledFrames:
    """`num_frames` frames spread uniformly over the video, one interval, or several intervals.

    Intervals are [start, end] in seconds; `frame_plan` picks the indices. One batched decord read
    per call. Frames larger than `max_long_side` are scaled down by decord's ffmpeg filter (swscale,
    bicubic) while decoding, which is cheaper than converting full-size frames to PIL and resizing
    them; that needs the video's size first (`video_info`, cached).
    """
    if interval is not None and intervals is not None:
        raise ValueError("pass either interval or intervals, not both")
    _check_rule(index_rule)
    return skippable(
        lambda: _sample_video_cached(path, num_frames, interval, intervals, max_long_side, record_id, index_rule),
        path,
        record_id,
        lambda: _placeholder_frames(path, num_frames),
    )


def _sample_video_cached(
    path: str | Path,
    num_frames: int,
    interval: Interval | None,
    intervals: Sequence[Interval] | None,
    max_long_side: int | None,
    record_id: str | None,
    index_rule: IndexRule,
) -> SampledFrames:
    p = _existing(path, "video", record_id)
    spans = [interval] if interval is not None else intervals

    def decode() -> SampledFrames:
        return _sample_video(p, num_frames, spans, max_long_side, record_id, index_rule)

    try:
        params = {
            "num_frames": int(num_frames),
            "max_long_side": max_long_side,
            "intervals": None if spans is None else [[float(start), float(end)] for start, end in spans],
        }
    except (TypeError, ValueError):
        return decode()  # malformed arguments: the sampler's own error, not the cache's
    if index_rule != "centre":  # the default rule keeps the keys it always had
        params["index_rule"] = index_rule
    return _through_cache("video", [p], params, str(p), decode)


def _sample_video(
    p: Path,
    num_frames: int,
    spans: Sequence[Interval] | None,
    max_long_side: int | None,
    record_id: str | None,
    index_rule: IndexRule = "centre",
) -> SampledFrames:
    source = size = None
    if max_long_side is not None:
        info = video_info(p, record_id)
        source = (info.width, info.height)
        size = fit_size(*source, max_long_side)
    scaled = size is not None and size != source
    if source is None:
        _check_video_pixels(p, record_id)  # video_info checked it otherwise
    reader, fps = _open(p, record_id, *(size if scaled else (-1, -1)))
    indices = frame_plan(len(reader), fps, num_frames, spans, index_rule)
    try:
        frames = _decode(reader, indices, p, record_id)
    except MediaError:
        if not scaled:
            raise
        # decord's scaler rejects some target sizes (e.g. 96x72 -> 48x36: "from_size == to_size");
        # decode at full size and shrink in PIL instead.
        reader, fps = _open(p, record_id)
        frames = [resize_down(frame, max_long_side) for frame in _decode(reader, indices, p, record_id)]
    return SampledFrames(
        frames=frames,
        timestamps=[i / fps for i in indices],
        indices=indices,
        path=str(p),
        fps=fps,
        source_size=source or (frames[0].size if frames else None),
    )


def sample_videos(
    videos: Sequence[VideoRequest],
    total_frames: int,
    mode: Literal["equal", "proportional"],
    max_long_side: int | None = None,
) -> list[SampledFrames]:
    """Sample several videos under one frame budget split by `split_budget`.

    "proportional" weighs each video by the total length of its intervals, or by its duration when
    it has none. Each video is sampled on its own, so videos of different lengths are fine.
    """
    lengths = [_length(v) for v in videos] if mode == "proportional" else [1.0] * len(videos)
    return [
        sample_video(v.path, k, intervals=v.intervals, max_long_side=max_long_side, record_id=v.record_id)
        for v, k in zip(videos, split_budget(total_frames, lengths, mode))
    ]


def _length(video: VideoRequest) -> float:
    if video.intervals is None:
        return video_info(video.path, video.record_id).duration
    return sum(abs(end - start) for start, end in video.intervals)


_NUMBER = re.compile(r"\d+")


def frame_files(
    folder: str | Path, record_id: str | None = None, *, root: str | Path | None = None, by_name: bool = False
) -> list[tuple[int, Path]]:
    """(frame number, path) of the images in a frame folder, sorted by the last integer in each name
    (``by_name``: by the file names as strings, as CrossVid's official scripts sort them).

    With ``root`` (the benchmark folder the frames come from), the folder and every frame file must
    resolve inside it (:func:`lmms_eval_plugins.data.safe_path`: a symbolic link out is a DataError);
    the paths returned are then the files' real paths.
    """
    folder_path = _existing(folder, "frame folder", record_id, folder=True)
    if root is not None:
        folder_path = safe_path(folder_path, ".", record=record_id, field="frame folder", within=root)
    files, names = [], {}
    for p in folder_path.iterdir():
        if p.suffix.lower() not in IMAGE_SUFFIXES:
            continue
        numbers = _NUMBER.findall(p.stem)
        if not numbers:
            raise MediaError(
                "frame file name holds no frame number",
                record=record_id,
                path=str(p),
                fix="name frame images with their frame number (e.g. 000123.jpg) or move other images out",
            )
        name = p.name
        if root is not None:  # the number is the link's name; the path is where it really leads
            p = safe_path(folder_path, p.name, record=record_id, field="frame file", within=root)
        files.append((int(numbers[-1]), p))
        names[files[-1]] = name
    if not files:
        raise MediaError(
            "frame folder holds no images",
            record=record_id,
            path=str(folder_path),
            fix=f"extract the frames ({', '.join(sorted(IMAGE_SUFFIXES))}) into this folder",
        )
    return sorted(files, key=names.__getitem__) if by_name else sorted(files)


def folder_listing(folder: str | Path, record_id: str | None = None) -> list[tuple[str, bool]]:
    """Every entry of a frame folder in the order ``sorted(os.listdir(folder))`` gives (what CrossVid's
    official scripts sample from), each with whether it is an image file (a regular file with an image
    suffix); ``cv2.imread`` fails on any other entry, a stray text file or a sub-folder."""
    folder_path = _existing(folder, "frame folder", record_id, folder=True)
    return [
        (p.name, p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES)
        for p in sorted(folder_path.iterdir(), key=lambda entry: entry.name)
    ]


def folder_positions(n_files: int, num_frames: int, index_rule: IndexRule = "centre") -> list[int]:
    """The positions (in the sorted file list) `sample_frame_folder` loads."""
    _check_rule(index_rule)
    return linspace_indices(n_files, num_frames) if index_rule == "linspace" else uniform_indices(n_files, num_frames)


def sample_frame_folder(
    folder: str | Path,
    num_frames: int,
    *,
    fps: float = 1.0,
    max_long_side: int | None = None,
    record_id: str | None = None,
    root: str | Path | None = None,
    index_rule: IndexRule = "centre",
    by_name: bool = False,
) -> SampledFrames:
    """`num_frames` images spread uniformly (`uniform_indices`, or `linspace_indices` with
    ``index_rule="linspace"``) over a folder of numbered frames.

    `indices` are positions in the sorted list, `frame_numbers` the numbers in the file names, and
    timestamps are position / fps. `root`: see `frame_files` (frames must resolve inside it).
    """
    _check_rule(index_rule)
    return skippable(
        lambda: _sample_frame_folder(folder, num_frames, fps, max_long_side, record_id, root, index_rule, by_name),
        folder,
        record_id,
        lambda: _placeholder_frames(folder, num_frames),
    )


def _sample_frame_folder(
    folder: str | Path,
    num_frames: int,
    fps: float,
    max_long_side: int | None,
    record_id: str | None,
    root: str | Path | None,
    index_rule: IndexRule,
    by_name: bool = False,
) -> SampledFrames:
    files = frame_files(folder, record_id, root=root, by_name=by_name)
    positions = folder_positions(len(files), num_frames, index_rule)
    shown = str(Path(folder).expanduser())

    def load() -> SampledFrames:
        loaded = [_load_image(files[i][1], record_id, max_long_side) for i in positions]
        return SampledFrames(
            frames=[image for image, _ in loaded],
            timestamps=[i / fps for i in positions],
            indices=positions,
            path=shown,
            fps=fps,
            frame_numbers=[files[i][0] for i in positions],
            source_size=loaded[0][1] if loaded else None,
        )

    # The chosen files are the key's sources: editing, adding or removing one changes the key.
    params = {
        "num_frames": int(num_frames),
        "fps": float(fps),
        "max_long_side": max_long_side,
        "positions": positions,
        "numbers": [files[i][0] for i in positions],
        "n_files": len(files),
    }
    if index_rule != "centre":
        params["index_rule"] = index_rule
    return _through_cache("folder", [files[i][1] for i in positions], params, shown, load)


def _through_cache(
    kind: str, sources: Sequence[Path], params: dict, shown_path: str, decode: Callable[[], SampledFrames]
) -> SampledFrames:
    """``decode()``, or the same frames from the frame cache; a fresh result is stored for next time.

    Only RGB results are stored (every sampler returns RGB): ``Image.fromarray`` of the stored uint8
    arrays then gives back the very same pixels. The sources are checked again after decoding, so a
    file that changed meanwhile is not stored under its old identity.
    """
    cache = frame_cache.get_cache()
    if cache is None:
        return decode()
    try:
        identities = [frame_cache.identity(p) for p in sources]
    except OSError:
        return decode()  # let the sampler report the missing file
    key = frame_cache.sampling_key(kind, identities, params)
    entry = cache.get(key)
    if entry is not None:
        restored = _restore(entry, shown_path)
        if restored is not None:
            return restored
    sampled = decode()
    if sampled.frames and all(f.mode == "RGB" for f in sampled.frames):
        try:
            unchanged = [frame_cache.identity(p) for p in sources] == identities
        except OSError:
            unchanged = False
        if unchanged:
            cache.put(
                key,
                [np.asarray(f) for f in sampled.frames],
                {
                    "timestamps": sampled.timestamps,
                    "indices": sampled.indices,
                    "fps": sampled.fps,
                    "frame_numbers": sampled.frame_numbers,
                    "source_size": list(sampled.source_size) if sampled.source_size else None,
                },
            )
    return sampled


def _restore(entry: frame_cache.CachedFrames, shown_path: str) -> SampledFrames | None:
    meta = entry.meta
    try:
        frames = [Image.fromarray(a) for a in entry.frames]  # copies: the images own their pixels
        size = meta["source_size"]
        sampled = SampledFrames(
            frames=frames,
            timestamps=[float(t) for t in meta["timestamps"]],
            indices=[int(i) for i in meta["indices"]],
            path=shown_path,
            fps=float(meta["fps"]),
            frame_numbers=[int(n) for n in meta["frame_numbers"]],
            source_size=(int(size[0]), int(size[1])) if size else None,
        )
    except (KeyError, TypeError, ValueError, IndexError):
        return None  # an entry from a foreign writer: decode instead
    if any(f.mode != "RGB" for f in frames) or not len(frames) == len(sampled.indices) == len(sampled.timestamps):
        return None
    return sampled


# ---------------------------------------------------------------------------------------------
# Chat content
# ---------------------------------------------------------------------------------------------


def as_video_content(frames: list[Image.Image]) -> dict:
    """lmms-eval chat content for a video given as frames (chat models use every frame)."""
    return {"type": "video", "url": frames}


def as_image_contents(frames: list[Image.Image]) -> list[dict]:
    """One lmms-eval image content per frame, for models that take images only."""
    return [{"type": "image", "url": frame} for frame in frames]
