"""ViRectify prompts: the instructions (the paper's Table 11, the section 6.3 reflection), frame labels and
clock times, and the lmms-eval hooks that build a request (frames, text, messages) from the doc's typed
record (``records.record_of``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lmms_eval_plugins.benchmarks.virectify.records import Record, record_of
from lmms_eval_plugins.media import frame_plan, sample_video, video_info
from lmms_eval_plugins.messages import FrameGroup, interleaved_messages

# ----------------------------------------------------------------------------------------------- prompts
# The paper's Table 11 instruction (the training and evaluation template), verbatim but for ASCII quotes
# and its typo "Ratioanale". The output format is the one of Tables 9 and 10 (error identification and
# rationale annotation), which the model's answer must follow; Table 11 in the paper's text ends before it.

INSTRUCTION = """You are an expert in reasoning analysis and video question answering. Given the following information:
- A video (represented by a set of timestamped frames),
- A question about the video,
- A solution for the question (with step-by-step reasoning),
Your task is to analyze the solution, detect reasoning errors step by step, and provide an overall correction using timestamp-aligned visual evidence from the video.
Guidelines:
1. Error identification:
- For each step in the solution (e.g., "step1", "step2"...), judge whether the reasoning is correct.
- If correct: Mark as '1' and leave the second element as an empty string.
- If incorrect: Mark as '0' and provide a brief and specific explanation of what is wrong in the step.
2. Error Propagation Graph:
- For each step with an error, list direct sources of errors in that step.
3. Timestamps:
- List merged timestamp ranges (e.g., [00:12-00:20]) for most critical video evidence clips that directly correct the reasoning errors.
4. Rationale:
- Use natural language to describe how the original reasoning went wrong, referencing the specific timestamps and what the visual content shows. State the correct final answer to the question."""

OUTPUT_FORMAT = (
    "Output Format:\n"
    "<error_identify>{ 'step1': ['1', ''], 'step2': ['0', 'error explanation'],} </error_identify> "
    "<error_graph>{ 'step1': ['step1'], 'step2': ['step1'], 'step3': ['step2'] }</error_graph> "
    "<timestamps>[00:00-00:08],[...]</timestamps> "
    "<rationale> rationale with video evidence <answer>The correct answer should be \\boxed{xxx}</answer> </rationale>"
)

# Section 6.3 gives no prompt; this one reuses the wording of Table 11 and the paper's description
# ("provide the error identification and rationale with video evidence (excluding the final answer) as
# input ..., prompting it to revise its reasoning and produce a corrected answer").
REFLECT_FEEDBACK = {
    "error_identify": (
        "An error identification for the solution (for each step, '1' if the step is correct, or "
        "'0' and an explanation of what is wrong in the step),"
    ),
    "rationale": (
        "A rationale with video evidence (the key timestamps and a description of how the original "
        "reasoning went wrong),"
    ),
}
REFLECT_INSTRUCTION = """You are an expert in reasoning analysis and video question answering. Given the following information:
- A video (represented by a set of timestamped frames),
- A question about the video,
- A solution for the question (with step-by-step reasoning) that contains reasoning errors,
- {feedback}
Your task is to revise the reasoning of the solution using the feedback and the visual evidence from the video, and state the correct final answer to the question."""
REFLECT_OUTPUT_FORMAT = (
    "Output Format:\nRevise the reasoning, then end with <answer>The correct answer should be \\boxed{xxx}</answer>"
)
ANSWER_SENTENCE = "The correct answer should be \\boxed{{{answer}}}"


def clock(seconds: float) -> str:
    """12 -> "00:12", 62.5 -> "01:02.5", 3725 -> "1:02:05" (what the prompt's mm:ss format asks for)."""
    total = round(float(seconds), 3)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    secs = round(secs, 3)
    sec_text = f"{int(secs):02d}" if float(secs).is_integer() else f"{secs:06.3f}".rstrip("0")
    if hours:
        return f"{int(hours)}:{int(minutes):02d}:{sec_text}"
    return f"{int(minutes):02d}:{sec_text}"


def format_intervals(intervals: Iterable[Sequence[float]]) -> str:
    return ",".join(f"[{clock(s)}-{clock(e)}]" for s, e in intervals)


def frame_label(seconds: float) -> str:
    """The paper's frame tag "[1s]"; one decimal when the frame is not on a whole second ("[2.5s]")."""
    value = round(float(seconds), 1)
    return f"[{int(value)}s]" if value.is_integer() else f"[{value:.1f}s]"


# ----------------------------------------------------------------------------------------------- prompts and visuals


def frame_times(doc: Mapping[str, Any]) -> list[float]:
    """Timestamps (s) of the frames ``doc_to_visual`` samples, from the video's frame count and rate only."""
    return _frame_times(record_of(doc))


def _frame_times(record: Record) -> list[float]:
    info = video_info(record.video_path, record_id=record.record_id)
    return [i / info.fps for i in frame_plan(info.num_frames, info.fps, record.num_frames, None)]


def _frames(record: Record):
    return sample_video(
        record.video_path, record.num_frames, max_long_side=record.max_long_side or None, record_id=record.record_id
    )


def prompt_text(doc: Mapping[str, Any]) -> str:
    """Everything after the frames: instruction, question, solution (and hint), output format."""
    return _prompt_text(record_of(doc))


def _prompt_text(record: Record) -> str:
    parts = [f"Question: {record.question}", "Solution:\n" + "\n".join(record.solution)]
    if record.hint is not None:
        intro = REFLECT_INSTRUCTION.format(feedback=REFLECT_FEEDBACK[record.hint.kind])
        return "\n\n".join([intro, *parts, record.hint.text, REFLECT_OUTPUT_FORMAT])
    return "\n\n".join([INSTRUCTION, *parts, OUTPUT_FORMAT])


def doc_to_visual(doc: Mapping[str, Any]) -> list:
    return _frames(record_of(doc)).frames


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    # Simple model classes get the frames from doc_to_visual and "<image>" at each frame's slot.
    record = record_of(doc)
    stamps = "".join(f"{frame_label(t)}<image>" for t in _frame_times(record))
    return f"{stamps}\n{_prompt_text(record)}"


def doc_to_messages(doc, lmms_eval_specific_kwargs=None):
    record = record_of(doc)
    sampled = _frames(record)
    if record.visual_mode == "video":
        labels = ", ".join(frame_label(t) for t in sampled.timestamps)
        return interleaved_messages(
            f"The video's frames, sampled at {labels}:", [FrameGroup("", sampled.frames)], _prompt_text(record)
        )
    # the paper's "[1s]<image>[2s]<image>...": each frame an image after its time
    groups = [FrameGroup(frame_label(t), [frame], kind="image") for t, frame in zip(sampled.timestamps, sampled.frames)]
    return interleaved_messages("", groups, _prompt_text(record))
