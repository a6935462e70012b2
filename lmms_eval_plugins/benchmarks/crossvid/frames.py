"""CrossVid frames: the per-question budget and its split over the videos (the official
``allocate_frames`` and index rules), frame sampling, and the frame plan without decoding."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from PIL import Image

from lmms_eval_plugins.benchmarks.crossvid.records import from_row
from lmms_eval_plugins.errors import MediaError
from lmms_eval_plugins.media import (
    SampledFrames,
    VideoRequest,
    folder_positions,
    frame_files,
    frame_plan,
    sample_frame_folder,
    sample_video,
    sample_videos,
    split_budget,
    video_info,
)
from lmms_eval_plugins.messages import FrameGroup, flat_frames

PROPORTIONAL = frozenset({"PI", "PSS"})  # budget split by interval length; every other task splits equally
DEFAULT_FRAMES = 128
DEFAULT_MAX_LONG_SIDE = 360
# Frame indices as the official scripts take them (np.linspace, first and last frame included);
# "centre" (bin centres, lmms_eval_plugins.media.uniform_indices) is kept behind the source option.
DEFAULT_INDEX_RULE = "linspace"


def official_allocation(lengths: Sequence[float], total: int) -> list[int]:
    """The official ``allocate_frames``, in its float arithmetic: quota ``length / sum * total``,
    floors, then one more frame to each of the largest fractional parts (earlier first on ties).
    No group is promised a frame; all zeros when the lengths sum to 0."""
    whole = sum(lengths)
    if whole == 0:
        return [0] * len(lengths)
    quotas = [(x / whole) * total for x in lengths]
    parts = [math.floor(q) for q in quotas]
    spare = total - sum(parts)
    for i in sorted(range(len(quotas)), key=lambda i: -(quotas[i] - math.floor(quotas[i])))[:max(spare, 0)]:
        parts[i] += 1
    return parts


def _at_least_one(parts: list[int]) -> list[int]:
    """A group left without a frame takes one from the largest (an empty label misleads a model and
    crashes lmms-eval's Qwen2.5-VL class), when there are enough frames to go round."""
    parts = list(parts)
    if sum(parts) >= len(parts):
        for i in range(len(parts)):
            if parts[i] == 0:
                donor = parts.index(max(parts))
                parts[donor] -= 1
                parts[i] = 1
    return parts


def frame_budgets(task: str, total: int, lengths: Sequence[float], index_rule: str = DEFAULT_INDEX_RULE) -> list[int]:
    """Frames per video/segment. Equal tasks: ``total // n`` each, as the official scripts do (the
    remainder is not used: 128 frames over 3 videos is 42 each). PI/PSS: in proportion to each
    group's total interval length, largest remainder first (the official ``allocate_frames``:
    :func:`official_allocation` under the ``linspace`` rule, exact fractions under ``centre``),
    every group keeping at least one frame when ``total`` >= the number of groups."""
    n = len(lengths)
    if task in PROPORTIONAL:
        if index_rule == "linspace":
            return _at_least_one(official_allocation(lengths, total))
        return split_budget(total, lengths, "proportional")
    return [total // n] * n


def _lengths(groups: Sequence[Mapping[str, Any]], index_rule: str = "centre") -> list[float]:
    if index_rule == "linspace":  # the official code keeps only pieces with start < end
        return [sum(e - s for s, e in g["intervals"] if s < e) if g["intervals"] else 1.0 for g in groups]
    return [sum(abs(e - s) for s, e in g["intervals"]) if g["intervals"] else 1.0 for g in groups]


def _rule(doc: Mapping[str, Any]) -> str:
    return str(doc.get("index_rule") or "centre")  # a doc without the option: the rule it was made with


def _side(doc: Mapping[str, Any]) -> int | None:
    return int(doc.get("max_long_side") or 0) or None


def sample_frames(doc: Mapping[str, Any]) -> list[SampledFrames]:
    """Decode the frames of every video (or view) of a doc under its budget."""
    doc = from_row(doc)
    groups, task, rule = doc["media"], doc["task"], _rule(doc)
    budgets = frame_budgets(task, int(doc["budget"]), _lengths(groups, rule), rule)
    if groups[0]["kind"] == "folder":
        out = [sample_frame_folder(g["path"], k, max_long_side=_side(doc), record_id=doc["record"],
                                   root=doc.get("media_root") or None, index_rule=rule)
               for g, k in zip(groups, budgets)]
    elif rule == "linspace":  # each video (or group of intervals) on its own, under its own budget
        out = [sample_video(g["path"], k, intervals=[tuple(p) for p in g["intervals"]] if g["intervals"] else None,
                            max_long_side=_side(doc), record_id=doc["record"], index_rule=rule)
               for g, k in zip(groups, budgets)]
    else:
        requests = [VideoRequest(g["path"], [tuple(p) for p in g["intervals"]] if g["intervals"] else None, doc["record"])
                    for g in groups]
        if task in PROPORTIONAL:
            out = sample_videos(requests, int(doc["budget"]), "proportional", max_long_side=_side(doc))
        else:
            out = sample_videos(requests, sum(budgets), "equal", max_long_side=_side(doc))
    _require_frames(doc, [len(s.frames) for s in out])
    return out


def _require_frames(doc: Mapping[str, Any], counts: Sequence[int]) -> None:
    """Every label needs a frame: an empty video crashes lmms-eval's Qwen2.5-VL class and misleads any model."""
    for g, count in zip(doc["media"], counts):
        if count == 0:
            raise MediaError(f"no frame could be sampled for {g['label']}", record=doc["record"], path=g["path"],
                             fix="raise the frame budget ('frames' in the source file) to at least one frame per video")


def plan_frames(doc: Mapping[str, Any]) -> list[tuple[int, list[float], list[int], tuple[int, int] | None]]:
    """Per video/view: (frame count, timestamps, positions, source size), without decoding frames.

    Gives exactly what :func:`sample_frames` returns (a test checks it); simple model classes need
    it for ``doc_to_text``, which lmms-eval builds for every doc before inference.
    """
    doc = from_row(doc)
    groups, task, rule = doc["media"], doc["task"], _rule(doc)
    budgets = frame_budgets(task, int(doc["budget"]), _lengths(groups, rule), rule)
    out = []
    for g, k in zip(groups, budgets):
        if g["kind"] == "folder":
            files = frame_files(g["path"], doc["record"], root=doc.get("media_root") or None)
            positions = folder_positions(len(files), k, rule)
            size = None
            if positions:
                with Image.open(files[positions[0]][1]) as im:
                    size = im.size
            out.append((len(positions), [float(p) for p in positions], positions, size))
        else:
            info = video_info(g["path"], doc["record"])
            intervals = [tuple(p) for p in g["intervals"]] if g["intervals"] else None
            indices = frame_plan(info.num_frames, info.fps, k, intervals, rule)
            out.append((len(indices), [i / info.fps for i in indices], indices, (info.width, info.height)))
    _require_frames(doc, [p[0] for p in out])
    return out


def doc_to_visual(doc, lmms_eval_specific_kwargs=None) -> list:
    """Every sampled frame, video after video (for simple model classes, which show them first)."""
    doc = from_row(doc)
    return flat_frames([FrameGroup(g["text"], s.frames) for g, s in zip(doc["media"], sample_frames(doc))])
