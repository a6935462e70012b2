"""Chat messages: the one builder of every benchmark's ``doc_to_messages``.

lmms-eval's chat model classes read a prompt from ``doc_to_messages``: a list of ``{"role": ...,
"content": [...]}`` messages whose content items are ``{"type": "text", "text": ...}``,
``{"type": "image", "url": PIL.Image}`` and ``{"type": "video", "url": [PIL.Image, ...]}``. Every
benchmark's prompt is one user turn (after an optional system message) of text interleaved with
labelled groups of visuals: ErrorRadar's and MMErroR's image inside the prompt, CausalStep's
"Segment i:" clips, CrossVid's "Video 1:", "View A:" ... videos, ViRectify's "[3s]" frames or its
whole video. :func:`interleaved_messages` builds all of them.

Simple (non-chat) model classes instead get every frame first (``doc_to_visual``) and the text after
it (``doc_to_text``); :func:`frame_legend` tells such a model which frames belong to which label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lmms_eval_plugins.media import as_image_contents, as_video_content

#: how a group's frames become content items: one video item of all of them, or one image item each
GROUP_KINDS = ("video", "image")


@dataclass(frozen=True)
class FrameGroup:
    """One labelled group of frames: ``text`` is shown right before the frames (e.g. "Video 1:\\n").

    ``kind="video"`` (default): the frames are one video item (:func:`as_video_content`);
    ``kind="image"``: each frame is an image item of its own (:func:`as_image_contents`), e.g. a
    benchmark's single picture, or a video's frames shown as separate images.
    """

    text: str
    frames: Sequence[Any]
    kind: str = "video"

    def __post_init__(self) -> None:
        if self.kind not in GROUP_KINDS:
            raise ValueError(f"FrameGroup kind must be one of {', '.join(GROUP_KINDS)}, got {self.kind!r}")


def system_message(text: str) -> dict[str, Any]:
    """A system message in lmms-eval's chat format (content is always a list of items)."""
    return {"role": "system", "content": [{"type": "text", "text": text}]}


def interleaved_content(before: str, groups: Sequence[FrameGroup], after: str) -> list[dict[str, Any]]:
    """``before`` + (label text, frames) for each group + ``after`` as chat content items.

    Adjacent texts are merged into one item (``before`` and the first label, say) and empty texts
    are dropped, so the model sees exactly the concatenated prompt with the frames at their places.
    A group without frames is an error: lmms-eval's Qwen2.5-VL chat class crashes on an empty video,
    and a label followed by nothing would mislead any model. No groups: the text alone.
    """
    content: list[dict[str, Any]] = []
    pending = before
    for group in groups:
        if not group.frames:
            raise ValueError(
                f"no frames for {group.text.strip() or 'a frame group'}: every group needs at least one frame"
            )
        pending += group.text
        if pending:
            content.append({"type": "text", "text": pending})
        if group.kind == "image":
            content.extend(as_image_contents(list(group.frames)))
        else:
            content.append(as_video_content(list(group.frames)))
        pending = ""
    pending += after
    if pending:
        content.append({"type": "text", "text": pending})
    return content


def interleaved_messages(
    before: str, groups: Sequence[FrameGroup], after: str, *, system: str | None = None
) -> list[dict[str, Any]]:
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
