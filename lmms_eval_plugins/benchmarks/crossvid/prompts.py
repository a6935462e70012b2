"""CrossVid prompts: the official prompt templates, the MSR/MOC "Objects information" lines, and the
messages and text a model is given (the frames at the template's frames slot)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from lmms_eval_plugins.benchmarks.crossvid.frames import (
    _side,
    plan_frames,
    sample_frames,
)
from lmms_eval_plugins.benchmarks.crossvid.records import (
    CrossVidRecord,
    ObjectRef,
    record_of,
)
from lmms_eval_plugins.media import SampledFrames
from lmms_eval_plugins.messages import FrameGroup, frame_legend, interleaved_messages

SYSTEM_PROMPT = "You are a helpful video analyzer."

# Verbatim from the official scripts (chuntianli666/CrossVid, eval/<TASK>.py, the INFERENCE strings;
# the paper's Figures 18-23). "{FRAMES}" is where the labelled frames go.

_CHOICE_TAIL = "\n\nQuestion:\n{QUESTION}\n\nOptions:\n{OPTIONS}\n\nInput frames:\n{FRAMES}\n\nYour answer:\n"
_SINGLE = "Select one answer choice, and only output the capital letter of your choice."
_UAV = (
    "\nProvide you two synchronized UAV road recording videos, objects' positional information and a single-choice question.\n"
    "The positional information contains the bounding box coordinates ([xtl, ytl, xbr, ybr]) of the objects positioned in one appearing frame.\n"
    "Watch the videos first, then track the objects in both views and think about the question based on the information.\n"
    f"{_SINGLE}\n\nQuestion:\n{{QUESTION}}\n\nOptions:\n{{OPTIONS}}\n\nObjects information:\n{{BBOX}}\n\n"
    "Input frames:\n{FRAMES}\n\nYour answer:\n"
)
PROMPTS: dict[str, str] = {
    "BU": (
        "\nProvide you several videos and a multiple-choice question with 1-3 correct answer choices.\n"
        "Watch the videos carefully, and think about the question based on the information from the videos.\n"
        'Only output the capital letters of ALL your choices, e.g., "BCD".' + _CHOICE_TAIL
    ),
    "NC": (
        "\nProvide you four videos and a single-choice question with only one correct option.\n"
        "Watch the videos carefully, and think about the question based on the information from the four videos.\n"
        + _SINGLE
        + _CHOICE_TAIL
    ),
    "CC": (
        "\nProvide you four videos and a single-choice question with only one correct option.\n"
        "Watch the videos carefully, and think about the question based on the information from these videos.\n"
        + _SINGLE
        + _CHOICE_TAIL
    ),
    "PEA": (
        "\nProvide you three videos assembling the same toy car and a single-choice question.\n"
        "In addition, provide you four predefined error types that may assist you answer.\n"
        "- wrong order: this action is an ordering mistake.\n"
        "- previous one is mistake: this action is also an ordering mistake but is caused by the preceding ordering "
        "mistakes in the context.\n"
        "- shouldn't have happened: this action is unnecessary in the assembly.\n"
        "- wrong position: the two parts are not attached at their correct position.\n"
        "Watch the videos carefully, and think about the question based on the information from these videos.\n"
        + _SINGLE
        + _CHOICE_TAIL
    ),
    "PI": (
        "\nProvide you the beginning and the ending of a movie clip, what is most likely to happen in the middle?\n"
        "Watch the video segments carefully, and think about the question based on the context information.\n"
        + _SINGLE
        + "\n\nOptions:\n{OPTIONS}\n\nInput frames:\n{FRAMES}\n\nYour answer:\n"
    ),
    "FSA": (
        "\nProvide you two cooking videos, which step in Video 2 is functionally equivalent to the step shown between "
        "{BEGIN}s and {END}s in Video 1?\n"
        "Timestamps of frames sampled from Video 1 are: {TIME1}.\n"
        "Timestamps of frames sampled from Video 2 are: {TIME2}.\n"
        "Watch the two videos carefully, and think about the question based on the information of the two videos.\n"
        'Only output a time interval in seconds and separate the beginning and ending time with a comma, e.g., "15,23".'
        "\n\nInput frames:\n{FRAMES}\n\nYour answer:\n"
    ),
    "PSS": (
        "\nProvide you {N} shuffled segments of a cooking video, what's the correct order of these segments?\n"
        "Watch the segments carefully, and think about the question based on the relationship between these segments.\n"
        'Only output the correct segment number sequence separated by "->", e.g., "2->3->1->4".'
        "\n\nInput frames:\n{FRAMES}\n\nYour answer:\n"
    ),
    "MSR": _UAV,
    "MOC": _UAV,
    "CCQA": (
        "\nProvide you two cooking videos (Video A + Video B) and an open-ended question.\n"
        "Watch the videos carefully, and think about the question based on the information from both videos."
        "\n\nQuestion:\n{QUESTION}\n\nInput frames:\n{FRAMES}\n\nYour answer:\n"
    ),
}
FRAMES_SLOT = "{FRAMES}"
_FIELD = re.compile(r"\{(QUESTION|OPTIONS|BEGIN|END|TIME1|TIME2|N|BBOX)\}")


def fill(template: str, values: Mapping[str, Any]) -> str:
    """Replace ``{FIELD}`` slots in one pass, so braces inside the data are never expanded again."""
    return _FIELD.sub(lambda m: str(values[m.group(1)]), template)


# ----------------------------------------------------------------------------------------------- boxes (MSR/MOC)


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, 21st (the official script writes 21th, 22th)."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def official_ordinal(n: int) -> str:
    """The official script's ordinals: 1st, 2nd, 3rd, then 4th, ..., 21th, 22th (what the model reads)."""
    return {1: "1st", 2: "2nd", 3: "3rd"}.get(n, f"{n}th")


def box_scale(size: tuple[int, int] | None, max_long_side: int | None) -> float:
    """The factor frames were shrunk by: ``max_long_side / longer side`` when larger, else 1."""
    if size is None or max_long_side is None or max(size) <= max_long_side:
        return 1.0
    return max_long_side / max(size)


def object_lines(
    objects: Sequence[ObjectRef], positions: Mapping[str, Sequence[int]], scales: Mapping[str, float]
) -> list[str]:
    """The "Objects information" lines: for each object (view A first, then view B, each in order of
    first appearance), its box in the first sampled frame of its view where it is annotated, scaled
    to the resized frame and truncated to integers as the official ``process_frame`` does, the frame
    counted as the official script counts it (:func:`official_ordinal`). An object annotated in no
    sampled frame gets a "does not appear" line (the official script crashes there).

    ``positions[view]``: the sampled frames' 0-based positions in the view's sorted frame folder (the
    official script looks boxes up by that position); ``scales[view]``: :func:`box_scale`.
    """
    lines = []
    for ref in sorted(objects, key=lambda r: r.view):  # stable: keeps first-appearance order inside a view
        view = ref.view
        for j, position in enumerate(positions[view]):
            box = ref.box_at(position)
            if box is not None:
                s = scales[view]
                coords = [int(v * s) for v in (box.xtl, box.ytl, box.xbr, box.ybr)]
                lines.append(
                    f"{ref.name} appears in {official_ordinal(j + 1)} frame of view {view} with bbox "
                    f"[{', '.join(map(str, coords))}]"
                )
                break
        else:
            lines.append(f"{ref.name} does not appear in the sampled frames of view {view}")
    return lines


# ----------------------------------------------------------------------------------------------- prompts


def _prompt_values(
    rec: CrossVidRecord,
    timestamps: Sequence[Sequence[float]],
    positions: Sequence[Sequence[int]],
    sizes: Sequence[tuple[int, int] | None],
) -> dict[str, Any]:
    values = dict(rec.fields)
    if rec.task == "FSA":
        # the official script prints list(map(int, timestamps)): whole seconds, truncated
        values["TIME1"], values["TIME2"] = (str([int(t) for t in ts]) for ts in timestamps[:2])
    if rec.task in ("MSR", "MOC"):
        pos = {"A": list(positions[0]), "B": list(positions[1])}
        scales = {"A": box_scale(sizes[0], _side(rec)), "B": box_scale(sizes[1], _side(rec))}
        values["BBOX"] = "\n".join(object_lines(rec.objects, pos, scales))
    return values


def _halves(rec: CrossVidRecord, values: Mapping[str, Any]) -> tuple[str, str]:
    before, after = PROMPTS[rec.task].split(FRAMES_SLOT)
    return fill(before, values), fill(after, values)


def label_groups(labels: Sequence[str], frames: Sequence[Sequence[Any]]) -> tuple[list[FrameGroup], str]:
    """(label, frames) pairs as frame groups; a label the official sampler left without frames (a short
    PI beginning, a short PSS segment) stays in the text, right before the next label, as the official
    prompt reads ("Beginning:\\nEnding:\\n" + frames). Returns the groups and the labels left over at the end."""
    groups, carried = [], ""
    for label, group_frames in zip(labels, frames):
        if group_frames:
            groups.append(FrameGroup(carried + label, group_frames))
            carried = ""
        else:
            carried += label
    return groups, carried


def build_messages(doc: Mapping[str, Any] | CrossVidRecord, sampled: Sequence[SampledFrames]) -> list[dict[str, Any]]:
    """System prompt + one user turn: the task prompt with each label's frames at the frames slot."""
    rec = record_of(doc)
    values = _prompt_values(
        rec, [s.timestamps for s in sampled], [s.indices for s in sampled], [s.source_size for s in sampled]
    )
    before, after = _halves(rec, values)
    groups, left = label_groups([g.text for g in rec.media], [s.frames for s in sampled])
    return interleaved_messages(before, groups, left + after, system=SYSTEM_PROMPT)


def doc_to_messages(doc, lmms_eval_specific_kwargs=None) -> list[dict[str, Any]]:
    rec = record_of(doc)
    return build_messages(rec, sample_frames(rec))


def doc_to_text(doc, lmms_eval_specific_kwargs=None) -> str:
    """The prompt for simple model classes: the frames come before the text, so the frames slot says
    which of them belong to which label ("Video 1: frames 1-32"). The system prompt leads the text."""
    rec = record_of(doc)
    plan = plan_frames(rec)
    values = _prompt_values(rec, [p[1] for p in plan], [p[2] for p in plan], [p[3] for p in plan])
    before, after = _halves(rec, values)
    counts = [(g.label, p[0]) for g, p in zip(rec.media, plan)]
    shown = iter(frame_legend([c for c in counts if c[1]]).split("\n"))
    legend = "\n".join(f"{label}: no frames" if not count else next(shown) for label, count in counts)
    return f"{SYSTEM_PROMPT}\n{before}{legend}{after}"
