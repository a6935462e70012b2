"""ViRectify's bundled sample data: synthetic media in the benchmark's real schema.

Written by ``lmms-eval-plugins sample-data virectify`` (a test checks that regenerating changes nothing)."""

from __future__ import annotations

from pathlib import Path

from lmms_eval_plugins.safe_files import write_atomic

_VIRECTIFY_RECORDS = [
    (
        1,
        "dynamic_perception",
        "MVBench",
        "visual_perception",
        "gpt-4o-injection",
        "How many times does the ball bounce before it comes to rest?",
        "3",
        [
            "Step 1: The ball is dropped from the top of the frame.",
            "Step 2: It hits the floor twice before it stops moving.",
            "Step 3: Each contact with the floor counts as one bounce.",
            "Step 4: So the ball bounces 2 times.",
        ],
        [
            ("1", ""),
            ("0", "The ball touches the floor three times, not twice."),
            ("1", ""),
            ("0", "The count carries over the miscount from step 2."),
        ],
        {"step2": ["step2"], "step4": ["step2"]},
        [[1.0, 4.0], [5.0, 7.0]],
        "At 00:01-00:04 the ball hits the floor twice and at 00:05-00:07 it bounces a third, smaller time before "
        "resting, so the solution missed the last bounce. The correct answer should be \\boxed{3}",
    ),
    (
        1,
        "dynamic_perception",
        "MVBench",
        "hallucination",
        "Qwen2.5-VL-7B",
        "In which direction does the ball roll after its last bounce?",
        "to the left",
        [
            "Step 1: After the last bounce a player kicks the ball.",
            "Step 2: The kick sends the ball to the right.",
            "Step 3: The ball rolls to the right.",
        ],
        [
            ("0", "No player appears in the video; nothing kicks the ball."),
            ("0", "The direction is inferred from the invented kick."),
            ("0", "The ball rolls left, toward the edge of the frame."),
        ],
        {"step1": ["step1"], "step2": ["step1"], "step3": ["step2"]},
        [[7.0, 9.5]],
        "From 00:07 to 00:09.5 the ball rolls on its own toward the left edge of the frame; no one kicks it. "
        "The correct answer should be \\boxed{to the left}",
    ),
    (
        2,
        "dynamic_perception",
        "Perception Test",
        "logical",
        "gpt-4o-injection",
        "Which happens first? A. The cup is lifted. B. The light turns on. C. The door closes. D. The cup falls.",
        "B",
        [
            "Step 1: The light turns on at the start of the video.",
            "Step 2: The cup is lifted a few seconds later.",
            "Step 3: Since the cup is the main object, the event involving it must come first.",
            "Step 4: The answer is A.",
        ],
        [
            ("1", ""),
            ("1", ""),
            ("0", "Order in time does not depend on which object is the main one."),
            ("0", "Follows the invalid inference of step 3."),
        ],
        {"step3": ["step3"], "step4": ["step3"]},
        [[0.0, 2.0]],
        "At 00:00-00:02 the light turns on, before the cup is lifted at 00:03; being the main object does not make "
        "an event earlier. The correct answer should be \\boxed{B}",
    ),
    (
        2,
        "dynamic_perception",
        "Perception Test",
        "question_misunderstanding",
        "InternVL3-8B",
        "How many seconds pass between the light turning on and the cup being lifted?",
        "3",
        [
            "Step 1: The light turns on at 00:01.",
            "Step 2: The cup is lifted at 00:04.",
            "Step 3: The question asks how many objects move, which is one.",
            "Step 4: The answer is 1.",
        ],
        [
            ("1", ""),
            ("1", ""),
            ("0", "The question asks for the time between two events, not the number of moving objects."),
            ("0", "Answers the misread question."),
        ],
        {"step3": ["step3"], "step4": ["step3"]},
        [[1.0, 1.5], [4.0, 4.5]],
        "The light turns on at 00:01-00:01.5 and the cup leaves the table at 00:04-00:04.5, so 3 seconds pass. "
        "The correct answer should be \\boxed{3}",
    ),
    (
        3,
        "scientific_reasoning",
        "MMVU",
        "logical",
        "gpt-4o-injection",
        "The pendulum completes 5 full swings during the clip. What is its period?",
        "2 seconds",
        [
            "Step 1: The clip lasts 10 seconds.",
            "Step 2: The pendulum completes 5 full swings.",
            "Step 3: The period is the number of swings divided by the time, 5 / 10 = 0.5.",
            "Step 4: The period is 0.5 seconds.",
        ],
        [
            ("1", ""),
            ("1", ""),
            ("0", "The period is time divided by the number of swings, 10 / 5 = 2 s; 0.5 is the frequency."),
            ("0", "Carries the inverted ratio of step 3."),
        ],
        {"step3": ["step3"], "step4": ["step3"]},
        [[2.0, 6.0]],
        "Between 00:02 and 00:06 the pendulum completes two full swings, one every 2 seconds; the solution divided "
        "swings by time, which gives the frequency. The correct answer should be \\boxed{2 seconds}",
    ),
    (
        3,
        "scientific_reasoning",
        "MMVU",
        "visual_perception",
        "Qwen2.5-VL-7B",
        "What colour does the solution in the flask turn after the indicator is added?",
        "pink",
        [
            "Step 1: A few drops of indicator are added at 00:03.",
            "Step 2: The liquid turns blue.",
            "Step 3: Blue means the solution is acidic.",
            "Step 4: The solution turns blue.",
        ],
        [
            ("1", ""),
            ("0", "The liquid turns pink, not blue."),
            ("0", "Interprets the misread colour."),
            ("0", "Reports the misread colour."),
        ],
        {"step2": ["step2"], "step3": ["step2"], "step4": ["step2", "step3"]},
        [[3.0, 6.0]],
        "At 00:03-00:06 the liquid clearly turns pink after the drops are added. The correct answer should be \\boxed{pink}",
    ),
    (
        4,
        "scientific_reasoning",
        "VideoMMMU",
        "hallucination",
        "gpt-4o-injection",
        "Which gas is collected in the test tube during the electrolysis shown?",
        "hydrogen",
        [
            "Step 1: Bubbles form at the negative electrode.",
            "Step 2: A glowing splint held at the tube relights.",
            "Step 3: A relighting splint shows the gas is oxygen.",
            "Step 4: The gas is oxygen.",
        ],
        [
            ("1", ""),
            ("0", "No splint test is shown in the video."),
            ("0", "Relies on the invented splint test."),
            ("0", "Follows from step 3."),
        ],
        {"step2": ["step2"], "step3": ["step2"], "step4": ["step3"]},
        [[1.0, 3.0], [6.0, 8.0]],
        "At 00:01-00:03 the gas collects above the negative electrode, and at 00:06-00:08 the tube holds twice the "
        "volume of the other one; gas from the negative electrode is hydrogen. The correct answer should be \\boxed{hydrogen}",
    ),
    (
        4,
        "scientific_reasoning",
        "VideoMMMU",
        "question_misunderstanding",
        "gpt-4o-injection",
        "At which electrode does more gas form, the positive or the negative one?",
        "the negative one",
        [
            "Step 1: Two test tubes collect gas over the electrodes.",
            "Step 2: The question asks which gas is produced.",
            "Step 3: Water splits into hydrogen and oxygen.",
            "Step 4: The answer is hydrogen and oxygen.",
        ],
        [
            ("1", ""),
            ("0", "The question asks which electrode produces more gas."),
            ("1", ""),
            ("0", "Answers the misread question instead of naming the electrode."),
        ],
        {"step2": ["step2"], "step4": ["step2"]},
        [[6.0, 9.0]],
        "From 00:06 to 00:09 the tube over the negative electrode holds about twice as much gas. "
        "The correct answer should be \\boxed{the negative one}",
    ),
    (
        5,
        "embodied_decision",
        "VSI-Bench",
        "logical",
        "InternVL3-8B",
        "The robot must reach the door. Should it turn left or right at the table?",
        "left",
        [
            "Step 1: The robot starts facing the table.",
            "Step 2: The door is on the left side of the room.",
            "Step 3: The chair is on the right, so the right side is the open path.",
            "Step 4: A free path always leads to the goal.",
            "Step 5: The robot should turn right.",
        ],
        [
            ("1", ""),
            ("1", ""),
            ("0", "Where the chair stands says nothing about where the door is."),
            ("0", "Overgeneralises: a free path need not lead to the door."),
            ("0", "Follows steps 3 and 4."),
        ],
        {"step3": ["step3"], "step4": ["step4"], "step5": ["step3", "step4"]},
        [[2.0, 5.0]],
        "At 00:02-00:05 the camera pans left and shows the door beside the table, so the robot must turn toward it. "
        "The correct answer should be \\boxed{left}",
    ),
    (
        5,
        "embodied_decision",
        "VSI-Bench",
        "visual_perception",
        "gpt-4o-injection",
        "How many chairs must the robot pass on its way to the door?",
        "2",
        [
            "Step 1: The path to the door runs along the wall.",
            "Step 2: One chair stands along that wall.",
            "Step 3: The robot passes 1 chair.",
        ],
        [
            ("1", ""),
            ("0", "Two chairs stand along the wall; the second is seen at 00:06."),
            ("0", "Counts from the miscount of step 2."),
        ],
        {"step2": ["step2"], "step3": ["step2"]},
        [[4.0, 7.0]],
        "From 00:04 to 00:07 the camera follows the wall and shows two chairs along it. The correct answer should be \\boxed{2}",
    ),
    (
        6,
        "embodied_decision",
        "EgoSchema",
        "hallucination",
        "Qwen2.5-VL-7B",
        "What should the person pick up next to finish making the tea?",
        "the kettle",
        [
            "Step 1: A cup with a tea bag stands on the counter.",
            "Step 2: The person has already poured hot water.",
            "Step 3: The next step is to add milk.",
            "Step 4: The person should pick up the milk.",
        ],
        [
            ("1", ""),
            ("0", "No water is poured in the video; the cup is still empty."),
            ("0", "Builds on the invented pouring."),
            ("0", "Follows step 3."),
        ],
        {"step2": ["step2"], "step3": ["step2"], "step4": ["step3"]},
        [[0.0, 3.0], [7.5, 10.0]],
        "At 00:00-00:03 the cup holds only a dry tea bag, and at 00:07.5-00:10 the kettle on the stove starts to steam, "
        "so the water still has to be poured. The correct answer should be \\boxed{the kettle}",
    ),
    (
        6,
        "embodied_decision",
        "EgoSchema",
        "question_misunderstanding",
        "gpt-4o-injection",
        "Where is the kettle when the video ends?",
        "on the stove",
        [
            "Step 1: The kettle is filled at the sink.",
            "Step 2: The question asks where the kettle was filled.",
            "Step 3: The answer is at the sink.",
        ],
        [
            ("1", ""),
            ("0", "The question asks where the kettle is at the end, not where it was filled."),
            ("0", "Answers the misread question."),
        ],
        {"step2": ["step2"], "step3": ["step2"]},
        [[8.0, 10.0]],
        "At 00:08-00:10, the end of the video, the kettle stands on the stove. The correct answer should be \\boxed{on the stove}",
    ),
]


def make_virectify(folder: Path) -> None:
    """Twelve records (three domains x four error types) on six videos (96x72, 4 fps, 10 s each)."""
    import json

    from lmms_eval_plugins.synthetic import make_video

    lines, written = [], set()
    for number, row in enumerate(_VIRECTIFY_RECORDS, start=1):
        (
            video,
            domain,
            source,
            error_type,
            solution_source,
            question,
            answer,
            steps,
            labels,
            graph,
            stamps,
            rationale,
        ) = row
        if video not in written:  # two records (questions) per video
            make_video(
                folder / "videos" / f"clip{video:02d}.mp4", seconds=10, fps=4, width=96, height=72, seed=100 + video
            )
            written.add(video)
        record = {
            "id": f"vr-{number:06d}",
            "video": f"videos/clip{video:02d}.mp4",
            "domain": domain,
            "source": source,
            "error_type": error_type,
            "solution_source": solution_source,
            "question": question,
            "answer": answer,
            "solution": steps,
            "error_identify": {f"step{k}": list(label) for k, label in enumerate(labels, start=1)},
            "error_graph": graph,
            "timestamps": stamps,
            "rationale": rationale,
        }
        lines.append(json.dumps(record, ensure_ascii=False))
    write_atomic(folder / "virectify.jsonl", "\n".join(lines) + "\n")


# CrossVid: tiny videos (96x72, 4 fps) shared by the tasks, two UAV scenes (two views of 6 numbered
# 400x300 frames, so the 360 px resize and the box scaling are exercised) and 2 records per task.
