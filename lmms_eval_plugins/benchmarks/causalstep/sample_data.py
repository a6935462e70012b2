"""CausalStep's bundled sample data: synthetic media in the benchmark's real schema.

Written by ``lmms-eval-plugins sample-data causalstep`` (a test checks that regenerating changes nothing)."""

from __future__ import annotations

from pathlib import Path

from lmms_eval_plugins.safe_files import write_atomic

_CAUSALSTEP_VIDEOS = [
    (
        "cs001",
        "Cartoons",
        [
            (4.0, "A cat chases a red ball across the kitchen floor.", None, None),
        ],
    ),
    (
        "cs002",
        "Cartoons",
        [
            (3.0, "A boy builds a sandcastle close to the water.", None, None),
            (
                2.5,
                "A wave washes over the sandcastle.",
                "Why does the sandcastle collapse?",
                "It was built close to the water, so the incoming wave reached it.",
            ),
            (
                3.5,
                "The boy builds a new castle further up the beach.",
                "Why does the boy build the new castle further up the beach?",
                "The wave destroyed his first castle, so he moves away from the water.",
            ),
        ],
    ),
    (
        "cs003",
        "Regular Sports",
        [
            (2.5, "A player dribbles the ball up the court.", None, None),
            (
                3.0,
                "The player passes to a teammate under the basket.",
                "Why does the player pass the ball?",
                "A defender blocks his path, and his teammate is open under the basket.",
            ),
            (
                2.0,
                "The teammate is fouled while shooting.",
                "Why is the teammate fouled?",
                "He receives the pass close to the basket and a defender arrives late to stop the shot.",
            ),
            (
                3.5,
                "The teammate takes two free throws.",
                "Why does the teammate take free throws?",
                "He was fouled in the act of shooting, which awards him free throws.",
            ),
            (
                3.0,
                "The crowd cheers as the second free throw goes in.",
                "Why does the crowd cheer?",
                "The second free throw scores the point the home team needed.",
            ),
        ],
    ),
    (
        "cs004",
        "Regular Sports",
        [
            (3.0, "The goalkeeper kicks the ball upfield.", None, None),
            (
                2.0,
                "A midfielder controls the ball and runs down the wing.",
                "Why does the midfielder have the ball?",
                "The goalkeeper's long kick landed at his feet.",
            ),
            (
                2.5,
                "The midfielder crosses the ball into the penalty box.",
                "Why does the midfielder cross the ball?",
                "He reached the wing with space and sees a striker waiting in the box.",
            ),
            (
                3.0,
                "A striker heads the ball toward the goal.",
                "Why does the striker head the ball?",
                "The cross arrives at head height in front of the goal.",
            ),
            (
                2.0,
                "A defender blocks the header with his hand.",
                "Why does the defender raise his hand?",
                "He is too late to block the header with his body and tries to stop the goal.",
            ),
            (
                3.5,
                "The referee points to the penalty spot.",
                "Why does the referee award a penalty?",
                "The defender handled the ball inside his own penalty box.",
            ),
            (
                2.5,
                "The striker scores the penalty.",
                "Why does the striker get to shoot from the penalty spot?",
                "The referee awarded a penalty for the defender's handball.",
            ),
        ],
    ),
]
_CAUSALSTEP_DESC_DISTRACTORS = [
    "Nobody moves; the scene stays empty.",
    "It is raining heavily and everyone leaves.",
    "A dog runs through the scene carrying a stick.",
    "Two people argue about the price of a ticket.",
    "The lights go out and the screen turns black.",
    "Someone reads a newspaper on a bench.",
    "A car drives past in the background.",
]
_CAUSALSTEP_CAUSAL_DISTRACTORS = [
    "It happens by pure coincidence, unrelated to anything before.",
    "A sudden change in the weather causes it.",
    "Someone off-screen ordered it before the video started.",
    "It does not happen; the scene is unchanged.",
    "It is a rehearsal, so nothing depends on what happened before.",
    "The camera operator asked for it.",
    "It was caused by a loud noise from the crowd.",
]


def _causalstep_options(correct: str, others: list[str], pool: list[str], answer: int) -> list[str]:
    """Eight options: the correct one at index ``answer``, then other events, then the pool."""
    distractors = [o for o in others if o != correct] + [p for p in pool if p not in others]
    options = distractors[:7]
    options.insert(answer, correct)
    return options


def make_causalstep(folder: Path) -> None:
    """Four videos of 1, 3, 5 and 7 segments (96x72, 4 fps, 2-4 s a segment) in two categories."""
    import json

    from lmms_eval_plugins.synthetic import make_video

    records = []
    for number, (video_id, category, segments) in enumerate(_CAUSALSTEP_VIDEOS, start=1):
        events = [event for _, event, _, _ in segments]
        causes = [answer for _, _, _, answer in segments if answer]
        start, rows = 0.0, []
        for index, (seconds, event, question, answer) in enumerate(segments):
            desc = {
                "question": "What mainly happens in this segment?",
                "options": _causalstep_options(
                    event, events, _CAUSALSTEP_DESC_DISTRACTORS, (3 * number + 5 * index) % 8
                ),
                "answer": (3 * number + 5 * index) % 8,
            }
            causal = None
            if question is not None:
                causal = {
                    "question": question,
                    "options": _causalstep_options(
                        answer, causes, _CAUSALSTEP_CAUSAL_DISTRACTORS, (5 * number + 3 * index) % 8
                    ),
                    "answer": (5 * number + 3 * index) % 8,
                }
            rows.append({"start": start, "end": start + seconds, "desc": desc, "causal": causal})
            start += seconds
        make_video(folder / "videos" / f"{video_id}.mp4", seconds=start, fps=4, width=96, height=72, seed=number)
        records.append(
            {"video_id": video_id, "video": f"videos/{video_id}.mp4", "category": category, "segments": rows}
        )
    write_atomic(folder / "causalstep.json", json.dumps(records, indent=1, ensure_ascii=False) + "\n")


# ViRectify: (video number, domain, source, error_type, solution_source, question, answer, solution steps,
#             step labels ("1" correct / "0" wrong, explanation), error graph, key timestamps (s), rationale)
