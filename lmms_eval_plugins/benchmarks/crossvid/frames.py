"""CrossVid frames: the per-question budget and its split over the videos (the official
``allocate_frames`` and index rules), frame sampling, and the frame plan without decoding."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from PIL import Image

from lmms_eval_plugins.benchmarks.crossvid.records import (
    CrossVidRecord,
    MediaGroup,
    record_of,
)
from lmms_eval_plugins.errors import DataError, MediaError
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
FRAME_DROP_TASKS = frozenset({"FSA", "PI", "PEA"})  # official_frame_drop; MSR/MOC: tasks.official_drop


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
    for i in sorted(range(len(quotas)), key=lambda i: -(quotas[i] - math.floor(quotas[i])))[: max(spare, 0)]:
        parts[i] += 1
    return parts


def frame_budgets(task: str, total: int, lengths: Sequence[float], index_rule: str = DEFAULT_INDEX_RULE) -> list[int]:
    """Frames per video/segment. Equal tasks: ``total // n`` each, as the official scripts do (the
    remainder is not used: 128 frames over 3 videos is 42 each). PI/PSS: in proportion to each
    group's total interval length, largest remainder first. ``linspace`` (the official rule): the
    official ``allocate_frames`` (:func:`official_allocation`), which may leave a short group no frame
    (a 0.2-s PI beginning beside a 90-s ending, 128 frames: 0 and 128). ``centre``: exact fractions,
    every group keeping at least one frame when ``total`` >= the number of groups."""
    n = len(lengths)
    if task in PROPORTIONAL:
        if index_rule == "linspace":
            return official_allocation(lengths, total)
        return split_budget(total, lengths, "proportional")
    return [total // n] * n


def _lengths(groups: Sequence[MediaGroup], index_rule: str = "centre") -> list[float]:
    if index_rule == "linspace":  # the official code keeps only pieces with start < end
        return [sum(e - s for s, e in g.intervals if s < e) if g.intervals else 1.0 for g in groups]
    return [sum(abs(e - s) for s, e in g.intervals) if g.intervals else 1.0 for g in groups]


def official_folder_positions(n_files: int, k: int) -> list[int]:
    """``np.linspace(0, n - 1, k, dtype=int)`` over a view's sorted frame files, as the official
    ``process_frames``: always k positions, repeated when the folder holds fewer than k files (40
    files, 64 asked: 64 positions, the last the 64th frame)."""
    if k <= 0 or n_files <= 0:
        return []
    return [int(x) for x in np.linspace(0, n_files - 1, num=k, dtype=int)]


def group_indices(group: MediaGroup, k: int, size: tuple[int, float], index_rule: str) -> list[int]:
    """The frames one video, group of intervals or frame folder shows under a budget of ``k``:
    ``size`` is (frames, fps) of the video, or (files, 1.0) of the folder. Positions in the folder's
    sorted file list; frame indices in the video."""
    n, fps = size
    if group.kind == "folder":
        return official_folder_positions(n, k) if index_rule == "linspace" else folder_positions(n, k, "centre")
    intervals = list(group.intervals) if group.intervals else None
    return frame_plan(n, fps, k, intervals, index_rule)  # type: ignore[arg-type]


def plan_indices(
    task: str,
    budget: int,
    groups: Sequence[MediaGroup],
    sizes: Sequence[tuple[int, float]],
    index_rule: str = DEFAULT_INDEX_RULE,
) -> list[list[int]]:
    """Per video/segment/view, the frames it shows (:func:`group_indices` under :func:`frame_budgets`).
    Pure: ``sizes`` as in :func:`group_indices`. Under ``linspace`` a group may show none."""
    budgets = frame_budgets(task, budget, _lengths(groups, index_rule), index_rule)
    return [group_indices(g, k, size, index_rule) for g, k, size in zip(groups, budgets, sizes)]


def official_frame_drop(
    task: str, budget: int, groups: Sequence[MediaGroup], sizes: Sequence[tuple[int, float]]
) -> str:
    """Why the official script drops a record for its frames ("" when it keeps it): it crashes on
    every one of its three tries, then leaves the record out of its results and its denominator.

    - FSA (``eval/FSA.py``): its prompt holds ``budget // 2`` frame slots per video, but a video of
      fewer frames gives fewer, and filling the slots runs past the frame list.
    - PI and PEA: a beginning, ending or clip with no piece of start < end is left out of the
      sampler's result, and the script's fixed ``[0]``/``[1]`` lookup fails.
    """
    if task == "FSA":
        slots = budget // 2
        short = [f"{g.label} has {n} frames" for g, (n, _fps) in zip(groups, sizes) if n < slots]
        if short:
            return f"{' and '.join(short)}, fewer than the {slots} frame slots of the official prompt"
    if task in ("PI", "PEA"):
        empty = [g.label for g in groups if not any(s < e for s, e in g.intervals or [])]
        if empty:
            return f"{', '.join(empty)}: no interval with start < end"
    return ""


def frame_drop(doc: Mapping[str, Any] | CrossVidRecord) -> str:
    """:func:`official_frame_drop` for a loaded doc (FSA's videos are probed for their frame counts; a
    video that cannot be probed is reported when its frames are read, not here)."""
    rec = record_of(doc)
    if rec.task not in FRAME_DROP_TASKS:
        return ""
    try:
        sizes = media_sizes(rec) if rec.task == "FSA" else [(0, 0.0)] * len(rec.media)
    except (DataError, MediaError):
        return ""
    return official_frame_drop(rec.task, rec.budget, rec.media, sizes)


def _side(rec: CrossVidRecord) -> int | None:
    return rec.max_long_side or None


def _no_frames(path: str) -> SampledFrames:
    return SampledFrames(frames=[], timestamps=[], indices=[], path=path, fps=1.0)


def _official_view(sampled: SampledFrames, k: int) -> SampledFrames:
    """The view's frames at the official positions, repeats included: ``sampled`` holds each distinct
    position once (``linspace_indices``: the same set), the last being the folder's last file."""
    if not sampled.indices:
        return sampled
    positions = official_folder_positions(sampled.indices[-1] + 1, k) if k > 1 else sampled.indices[:k]
    where = {p: j for j, p in enumerate(sampled.indices)}
    if any(p not in where for p in positions):
        return sampled  # a placeholder for an unreadable folder (its record is left out of every metric)
    return SampledFrames(
        frames=[sampled.frames[where[p]] for p in positions],
        timestamps=[p / sampled.fps for p in positions],
        indices=positions,
        path=sampled.path,
        fps=sampled.fps,
        frame_numbers=[sampled.frame_numbers[where[p]] for p in positions],
        source_size=sampled.source_size,
    )


def _sample_group(rec: CrossVidRecord, group: MediaGroup, k: int) -> SampledFrames:
    """One video, group of intervals or view under the official rule, each on its own budget."""
    if group.kind == "folder":
        sampled = sample_frame_folder(
            group.path,
            k,
            max_long_side=_side(rec),
            record_id=rec.record,
            root=rec.media_root or None,
            index_rule="linspace",
            by_name=True,
        )
        return _official_view(sampled, k)
    if k <= 0:  # the official scripts show the label alone
        return _no_frames(group.path)
    intervals = list(group.intervals) if group.intervals else None
    return sample_video(
        group.path, k, intervals=intervals, max_long_side=_side(rec), record_id=rec.record, index_rule="linspace"
    )


def sample_frames(doc: Mapping[str, Any] | CrossVidRecord) -> list[SampledFrames]:
    """Decode the frames of every video (or view) of a doc under its budget."""
    rec = record_of(doc)
    groups, task, rule = rec.media, rec.task, rec.index_rule
    budgets = frame_budgets(task, rec.budget, _lengths(groups, rule), rule)
    if rule == "linspace":  # as the official scripts: a PI/PSS label may be left without frames
        _require_budget(rec, budgets)
        return [_sample_group(rec, g, k) for g, k in zip(groups, budgets)]
    if groups[0].kind == "folder":
        out = [
            sample_frame_folder(
                g.path, k, max_long_side=_side(rec), record_id=rec.record, root=rec.media_root or None, index_rule=rule
            )
            for g, k in zip(groups, budgets)
        ]
    else:
        requests = [VideoRequest(g.path, list(g.intervals) if g.intervals else None, rec.record) for g in groups]
        if task in PROPORTIONAL:
            out = sample_videos(requests, rec.budget, "proportional", max_long_side=_side(rec))
        else:
            out = sample_videos(requests, sum(budgets), "equal", max_long_side=_side(rec))
    _require_frames(rec, [len(s.frames) for s in out])
    return out


def _require_budget(rec: CrossVidRecord, budgets: Sequence[int]) -> None:
    """A budget below one frame a video (``frames: 3`` over 4 videos) is a setting to fix: the official
    scripts would send the labels with no frame at all. PI/PSS split by length and may leave one empty."""
    if rec.task not in PROPORTIONAL:
        _require_frames(rec, budgets)


def _require_frames(rec: CrossVidRecord, counts: Sequence[int]) -> None:
    """``centre`` rule: every label needs a frame (it promises one to each when the budget allows)."""
    for g, count in zip(rec.media, counts):
        if count == 0:
            raise MediaError(
                f"no frame could be sampled for {g.label}",
                record=rec.record,
                path=g.path,
                fix="raise the frame budget ('frames' in the source file) to at least one frame per video",
            )


def media_sizes(doc: Mapping[str, Any] | CrossVidRecord) -> list[tuple[int, float]]:
    """(frames, fps) of each video, (files, 1.0) of each frame folder: what :func:`plan_indices` needs."""
    rec = record_of(doc)
    sizes = []
    for g in rec.media:
        if g.kind == "folder":
            sizes.append((len(frame_files(g.path, rec.record, root=rec.media_root or None)), 1.0))
        else:
            info = video_info(g.path, rec.record)
            sizes.append((info.num_frames, info.fps))
    return sizes


def plan_frames(
    doc: Mapping[str, Any] | CrossVidRecord,
) -> list[tuple[int, list[float], list[int], tuple[int, int] | None]]:
    """Per video/view: (frame count, timestamps, positions, source size), without decoding frames.

    Gives exactly what :func:`sample_frames` returns (a test checks it); simple model classes need
    it for ``doc_to_text``, which lmms-eval builds for every doc before inference.
    """
    rec = record_of(doc)
    groups, task, rule = rec.media, rec.task, rec.index_rule
    if rule == "linspace":
        _require_budget(rec, frame_budgets(task, rec.budget, _lengths(groups, rule), rule))
    sizes = media_sizes(rec)
    out = []
    for g, (n, fps), indices in zip(groups, sizes, plan_indices(task, rec.budget, groups, sizes, rule)):
        if g.kind == "folder":
            size = None
            if indices:
                files = frame_files(g.path, rec.record, root=rec.media_root or None, by_name=rule == "linspace")
                with Image.open(files[indices[0]][1]) as im:
                    size = im.size
            out.append((len(indices), [float(p) for p in indices], indices, size))
        else:
            info = video_info(g.path, rec.record)
            out.append((len(indices), [i / fps for i in indices], indices, (info.width, info.height)))
    if rule != "linspace":
        _require_frames(rec, [p[0] for p in out])
    return out


def doc_to_visual(doc, lmms_eval_specific_kwargs=None) -> list:
    """Every sampled frame, video after video (for simple model classes, which show them first)."""
    rec = record_of(doc)
    return flat_frames([FrameGroup(g.text, s.frames) for g, s in zip(rec.media, sample_frames(rec))])
