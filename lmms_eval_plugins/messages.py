"""Chat messages for prompts that interleave labelled groups of frames with text.

Multi-video benchmarks (CrossVid: "Video 1:", "View A:", "Segment 3:" ...) put each video's frames
right after a text label, inside one user turn. lmms-eval's chat model classes read such prompts
from ``doc_to_messages``: a list of ``{"role": ..., "content": [...]}`` messages whose content items
are ``{"type": "text", "text": ...}`` and ``{"type": "video", "url": [PIL.Image, ...]}``.

Simple (non-chat) model classes instead get every frame first (``doc_to_visual``) and the text after
it (``doc_to_text``); :func:`frame_legend` tells such a model which frames belong to which label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lmms_eval_plugins.media import as_video_content


@dataclass(frozen=True)
class FrameGroup:
    """One labelled group of frames: ``text`` is shown right before the frames (e.g. "Video 1:\\n")."""

    text: str
    frames: Sequence[Any]


def system_message(text: str) -> dict[str, Any]:
    """A system message in lmms-eval's chat format (content is always a list of items)."""
    return {"role": "system", "content": [{"type": "text", "text": text}]}


def interleaved_content(before: str, groups: Sequence[FrameGroup], after: str) -> list[dict[str, Any]]:
    """``before`` + (label text, frames) for each group + ``after`` as chat content items.

    Adjacent texts are merged into one item (``before`` and the first label, say) and empty texts
    are dropped, so the model sees exactly the concatenated prompt with the frames at their places.
    A group without frames is an error: lmms-eval's Qwen2.5-VL chat class crashes on an empty video,
    and a label followed by nothing would mislead any model.
    """
    content: list[dict[str, Any]] = []
    pending = before
    for group in groups:
        if not group.frames:
            raise ValueError(f"no frames for {group.text.strip() or 'a frame group'}: every group needs at least one frame")
        pending += group.text
        if pending:
            content.append({"type": "text", "text": pending})
        content.append(as_video_content(list(group.frames)))
        pending = ""
    pending += after
    if pending:
        content.append({"type": "text", "text": pending})
    return content


def interleaved_messages(before: str, groups: Sequence[FrameGroup], after: str, *,
                         system: str | None = None) -> list[dict[str, Any]]:
    """One user turn from :func:`interleaved_content`, preceded by a system message when given."""
    messages = [system_message(system)] if system else []
    messages.append({"role": "user", "content": interleaved_content(before, groups, after)})
    return messages


def frame_legend(groups: Sequence[tuple[str, int]], separator: str = "\n") -> str:
    """Which of the frames given before the text belong to which label, for simple model classes.

    ``[("Video 1", 3), ("Video 2", 2)]`` -> ``"Video 1: frames 1-3\\nVideo 2: frames 4-5"``
    (a single frame reads "frame 4").
    """
    lines, first = [], 1
    for label, count in groups:
        last = first + count - 1
        lines.append(f"{label}: frame {first}" if count == 1 else f"{label}: frames {first}-{last}")
        first = last + 1
    return separator.join(lines)


def flat_frames(groups: Sequence[FrameGroup]) -> list[Any]:
    """Every frame of every group, in order (``doc_to_visual`` for simple model classes)."""
    return [frame for group in groups for frame in group.frames]
