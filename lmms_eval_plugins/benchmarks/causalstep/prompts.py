"""What a CausalStep request shows the model: each shown segment's frames, labelled, then the text.

The hooks here are the plain functions; tasks.py hands lmms-eval their prefetched form
(lmms_eval_plugins/prefetch.py: the next requests' frames are decoded while the model answers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lmms_eval_plugins.benchmarks.causalstep.protocol import DESC, ISOLATED
from lmms_eval_plugins.benchmarks.causalstep.records import Request, record_of
from lmms_eval_plugins.media import (
    sample_video,
    seconds_to_frame_range,
    uniform_indices,
    video_info,
)
from lmms_eval_plugins.messages import FrameGroup, interleaved_messages

LETTERS = "ABCDEFGH"  # the option letters (CausalStep has 8 options per question)

# ----------------------------------------------------------------------------------------------- prompt
# The paper's Appendix E (prompts) is not in the text we have; the wording below reuses the paper's
# own terms for the question types ("descriptive understanding question", "observable content",
# "explicit stepwise causal reasoning question", "the causal relationship between the current
# segment (S_i) and its direct preceding segment (S_i-1)", "the history of its previously correct
# answer") and lmms-eval's usual multiple-choice instruction.

INTRO = (
    "You are watching a video that is divided into causally linked segments. The segments are shown step by "
    "step, without access to future segments."
)
DESC_TASK = "Answer this descriptive understanding question about the observable content of Segment {i}."
HISTORY = (
    "Your previous question in this reasoning chain, about Segment {p}, and its correct answer:\n"
    "Previous question: {question}\nPrevious answer: {answer}"
)
CAUSAL_TASK = (
    "Answer this explicit stepwise causal reasoning question about the causal relationship between the "
    "current segment (Segment {i}) and its direct preceding segment (Segment {p})."
)
ISOLATED_TASK = (
    "Answer this causal reasoning question about the current segment (Segment {i}). Only the current "
    "segment is shown: no earlier segment and no earlier answer."
)
ANSWER_INSTRUCTION = "Answer with the option's letter from the given choices directly."


def prompt_text(doc: Mapping[str, Any]) -> str:
    """The text after the frames: task, history (chained causal questions), question, options."""
    return _prompt_text(record_of(doc))


def _prompt_text(request: Request) -> str:
    i, kind = request.segment, request.kind
    parts = [INTRO]
    if kind == DESC:
        parts.append(DESC_TASK.format(i=i))
    elif kind == ISOLATED:
        parts.append(ISOLATED_TASK.format(i=i))
    else:
        parts.append(HISTORY.format(p=i - 1, question=request.prev_question, answer=request.prev_answer))
        parts.append(CAUSAL_TASK.format(i=i, p=i - 1))
    options = "\n".join(f"{LETTERS[k]}. {text}" for k, text in enumerate(request.options))
    parts.append(f"Question: {request.question}\nOptions:\n{options}")
    parts.append(ANSWER_INSTRUCTION)
    return "\n\n".join(parts)


def segment_frames(request: Request) -> list[tuple[int, list]]:
    """(segment number, frames) for each segment the request shows, sampled inside its interval."""
    return [
        (
            s.index,
            sample_video(
                request.video_path,
                request.num_frames,
                interval=(s.start, s.end),
                max_long_side=request.max_long_side or None,
                record_id=request.request_id,
            ).frames,
        )
        for s in request.shown
    ]


def frame_count(request: Request, start: float, end: float) -> int:
    """How many frames ``sample_video`` returns for one interval, without decoding any."""
    info = video_info(request.video_path, request.request_id)
    first, last = seconds_to_frame_range(start, end, info.fps, info.num_frames)
    return len(uniform_indices(info.num_frames, request.num_frames, first, last))


def doc_to_visual(doc, lmms_eval_specific_kwargs=None) -> list:
    """All frames of the shown segments, in order (for models that take a flat list of images)."""
    return [frame for _, frames in segment_frames(record_of(doc)) for frame in frames]


def doc_to_text(doc, lmms_eval_specific_kwargs=None) -> str:
    """For models that put the visuals before the text: say which frames belong to which segment."""
    request = record_of(doc)
    spans, first = [], 1
    for s in request.shown:
        count = frame_count(request, s.start, s.end)
        spans.append(f"Segment {s.index}: frames {first}-{first + count - 1}.")
        first += count
    return " ".join(spans) + "\n\n" + _prompt_text(request)


def doc_to_messages(doc, lmms_eval_specific_kwargs=None) -> list[dict[str, Any]]:
    """Each shown segment's frames preceded by its label ("Segment i-1:", "Segment i:"), then the text."""
    request = record_of(doc)
    groups = [FrameGroup(f"Segment {i}:", frames) for i, frames in segment_frames(request)]
    return interleaved_messages("", groups, _prompt_text(request))
