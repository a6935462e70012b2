"""Regenerate the bundled sample data (synthetic media in each benchmark's real schema).

The sample folders are checked in and ship in the wheel; this module is how they were made, and a
test checks that regenerating them changes nothing. Usage:
``python -m lmms_eval_plugins.testing.sample_data [BENCHMARK ...]``.
"""

from __future__ import annotations

import csv
import hashlib
import sys
from pathlib import Path
from typing import Callable

from PIL import Image, ImageDraw

from lmms_eval_plugins import tasks_dir

# question_id, question_type, level, content, answer, user_answer, steps, error_step, error_category (as spelled in the data)
_ERRORRADAR_ROWS = [
    ("shapes-count", "multiple-choice", "Grade 2", "How many triangles are in the picture?", "['4']", "3",
     ["Step 1: I look at the picture.", "Step 2: I count 3 triangles.", "Step 3: So the answer is 3."], 2, "Visual Perception Error"),
    ("bar-height", "fill-in-the-blank", "Grade 4", "The bar chart shows apples sold. How many more on Monday than Tuesday?", "['2']", "3",
     ["Step 1: Monday is 5.", "Step 2: Tuesday is 2.", "Step 3: 5 - 2 = 3."], 2, "visual perception error"),
    ("sum-lengths", "calculation", "Grade 3", "Add the two side lengths shown.", "['10+5=15']", "14",
     ["Step 1: The sides are 10 and 5.", "Step 2: 10 + 5 = 14.", "Step 3: The answer is 14."], 2, "Calculation Error"),
    ("area-rect", "calculation", "Grade 5", "Find the area of the rectangle.", "['24']", "20",
     ["Step 1: Width 6, height 4.", "Step 2: Area = width x height.", "Step 3: 6 x 4 = 20.", "Step 4: Area is 20."], 3, "calculation error"),
    ("odd-even", "judgement", "Grade 1", "Is the number of dots odd or even?", "['even']", "odd",
     ["Step 1: There are 6 dots.", "Step 2: 6 cannot be split into pairs, so it is odd."], 2, "Reasoning Error"),
    ("pattern-next", "multiple-choice", "Grade 3", "Which shape comes next in the pattern?", "['C']", "A",
     ["Step 1: The pattern is circle, square, circle, square.", "Step 2: The pattern repeats every three shapes.",
      "Step 3: So the next is circle.", "Step 4: Answer A."], 2, "reasoning error"),
    ("angle-sum", "fill-in-the-blank", "Grade 6", "Two angles of the triangle are shown. Find the third.", "['70']", "110",
     ["Step 1: The angles are 50 and 60.", "Step 2: Angles in a triangle sum to 360.", "Step 3: 360 - 110 = 250.",
      "Step 4: Hmm, the answer is 110."], 2, "Knowledge Error"),
    ("circle-area", "word problem", "Grade 6", "Find the area of the circle with the radius shown.", "['9π']", "6π",
     ["Step 1: The radius is 3.", "Step 2: Area of a circle is 2πr.", "Step 3: 2π x 3 = 6π."], 2, "knowledge error"),
    ("units-answer", "", "Grade 4", "How many centimetres long is the ribbon? Answer with a letter.", "['B']", "12",
     ["Step 1: The ribbon goes from 0 to 12.", "Step 2: It is 12 cm long.", "Step 3: I write 12."], 3, "Misinterpretation of the Question"),
    ("ask-perimeter", "word problem", "Grade 5", "The square's side is shown. What is its perimeter?", "['16']", "16 square units",
     ["Step 1: The question asks for the area.", "Step 2: 4 x 4 = 16.", "Step 3: The area is 16 square units."], 1, "misinterpretation of the question"),
]


def _errorradar_image(seed: int) -> Image.Image:
    image = Image.new("RGB", (96, 72), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    for k in range(1 + seed % 4):
        x = 8 + 20 * k
        draw.polygon([(x, 60), (x + 16, 60), (x + 8, 44 - 4 * (seed % 3))], outline=(0, 0, 0), fill=(40 * k, 120, 200))
    draw.rectangle([6, 6, 30 + 6 * seed, 20], outline=(200, 0, 0))
    return image


def make_errorradar(folder: Path) -> None:
    (folder / "images").mkdir(parents=True, exist_ok=True)
    with open(folder / "ErrorRadar_dataset.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["question_id", "content_image", "study_level", "question_type", "content", "answer",
                         "user_answer", "user_answer_steps", "error_step", "error_category"])
        for seed, (name, qtype, level, content, answer, user_answer, steps, step, category) in enumerate(_ERRORRADAR_ROWS):
            question_id = hashlib.md5(name.encode()).hexdigest()  # the real ids are 32 hex chars
            _errorradar_image(seed).save(folder / "images" / f"{question_id}.png", optimize=False)
            writer.writerow([question_id, f"https://example.invalid/errorradar/{question_id}.png", level, qtype, content,
                             answer, user_answer, "\n".join(steps), f"Step {step}", category])


# question_id suffix, label (as spelled in the data), domain, subdomain, question, correct_answer, error_reason (the chain)
_MMERROR_ROWS = [
    (1, "A_Visual_Perception_Error", "Mathematics", "Geometry", "How many triangles are in the figure?", "4",
     "Step 1: The figure shows three triangles. Step 2: Counting them gives 3. Step 3: So the answer is 3."),
    (2, "A_Visual_Perception_Error", "Physics", "Measurement", "What pressure does the gauge show, in kPa?", "40",
     "Step 1: The needle points at 60 on the dial. Step 2: The dial is in kPa. Step 3: The pressure is 60 kPa."),
    (3, "A_Visual_Perception_Error", "Data Analysis", "Charts", "Which bar in the chart is the tallest?", "C",
     "Step 1: Bar A reaches 5, bar B reaches 3, bar C reaches 4. Step 2: The largest value is 5. Step 3: Bar A is the tallest."),
    (4, "B_Reasoning_Error", "Mathematics", "Arithmetic", "What is the sum of the two numbers shown?", "15",
     "Step 1: The numbers are 10 and 5. Step 2: 10 + 5 = 14. Step 3: The sum is 14."),
    (5, "B_Reasoning_Error", "Biology", "Genetics", "Both parents in the pedigree are carriers. What share of their children is expected to be affected?", "？",
     "Step 1: Both parents are Aa. Step 2: A carrier is unaffected, so no child can be affected. Step 3: The share is 0."),
    (6, "C_Question_Comprehension_Error", "Data Analysis", "Tables", "How much larger is the value in row 2 than in row 1?", "3",
     "Step 1: Row 1 holds 4 and row 2 holds 7. Step 2: The question asks for their total. Step 3: 4 + 7 = 11."),
    (7, "C_Question_Comprehension_Error", "Physics", "Geometry of motion", "The square track has the side length shown. How far is one lap?", "16 m",
     "Step 1: The side is 4 m. Step 2: The question asks for the area enclosed by the track. Step 3: 4 x 4 = 16 square metres."),
    (8, "D_Knowledge_Deployment_Error", "Mathematics", "Geometry", "Two angles of the triangle are 50 and 60 degrees. Find the third.", "70",
     "Step 1: The angles shown are 50 and 60 degrees. Step 2: The angles of a triangle add up to 360 degrees. Step 3: 360 - 110 = 250 degrees."),
    (9, "D_Knowledge_Application_Error", "Physics", "Mechanics", "A 2 kg cart accelerates at 3 m/s^2 as shown. What is the net force?", "6 N",
     "Step 1: The mass is 2 kg and the acceleration 3 m/s^2. Step 2: Force equals mass divided by acceleration. Step 3: 2 / 3 = 0.67 N."),
    (10, "E_NoError", "Mathematics", "Arithmetic", "What is the product of the two numbers shown?", "12",
     "Step 1: The numbers are 3 and 4. Step 2: 3 x 4 = 12. Step 3: The product is 12."),
    (11, "E_NoError", "Biology", "Ecology", "Which organism in the food chain is a producer?", "grass",
     "Step 1: The chain is grass, rabbit, fox. Step 2: A producer makes its own food by photosynthesis. Step 3: Grass is the producer."),
    (12, "E_NoError", "Data Analysis", "Charts", "How many bars in the chart are taller than 2?", "2",
     "Step 1: The bars reach 1, 3 and 4. Step 2: Two of them exceed 2. Step 3: The answer is 2."),
]


def _mmerror_image(seed: int) -> Image.Image:
    image = Image.new("RGB", (112, 84), (250, 250, 245))
    draw = ImageDraw.Draw(image)
    for k in range(2 + seed % 3):  # a small bar chart
        height = 10 + 9 * ((seed + 2 * k) % 5)
        draw.rectangle([10 + 18 * k, 76 - height, 22 + 18 * k, 76], fill=(60 + 50 * k, 90, 180 - 30 * k))
    draw.ellipse([70, 8, 70 + 10 + 3 * seed, 18 + 3 * seed], outline=(180, 30, 30), width=2)
    draw.line([(6, 6 + seed), (40, 6 + 2 * seed)], fill=(0, 0, 0), width=2)  # no text: fonts differ between installs
    return image


def make_mmerror(folder: Path) -> None:
    import json

    jsons, images = folder / "data" / "jsons", folder / "data" / "images"
    jsons.mkdir(parents=True, exist_ok=True)
    images.mkdir(parents=True, exist_ok=True)
    records = []
    for number, label, domain, subdomain, question, correct_answer, chain in _MMERROR_ROWS:
        question_id = f"MMErroR_{number:05d}"
        record = {"question_id": question_id, "question": question, "correct_answer": correct_answer,
                  "error_reason": chain, "label": label, "domain": domain, "subdomain": subdomain}
        records.append(record)
        (jsons / f"{question_id}.json").write_text(json.dumps(record, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        image = _mmerror_image(number)
        if number % 4 == 0:  # the real data mixes formats; the reader looks up png, jpg, jpeg, webp
            image.save(images / f"{question_id}.jpg", quality=90)
        else:
            image.save(images / f"{question_id}.png", optimize=False)
    # The hub also holds an aggregate file; readers must ignore it.
    (jsons / "MMErroR_all.json").write_text(json.dumps(records, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")


# CausalStep: (video_id, category, [(segment seconds, event, causal question or None, causal answer or None), ...])
_CAUSALSTEP_VIDEOS = [
    ("cs001", "Cartoons", [
        (4.0, "A cat chases a red ball across the kitchen floor.", None, None),
    ]),
    ("cs002", "Cartoons", [
        (3.0, "A boy builds a sandcastle close to the water.", None, None),
        (2.5, "A wave washes over the sandcastle.",
         "Why does the sandcastle collapse?", "It was built close to the water, so the incoming wave reached it."),
        (3.5, "The boy builds a new castle further up the beach.",
         "Why does the boy build the new castle further up the beach?", "The wave destroyed his first castle, so he moves away from the water."),
    ]),
    ("cs003", "Regular Sports", [
        (2.5, "A player dribbles the ball up the court.", None, None),
        (3.0, "The player passes to a teammate under the basket.",
         "Why does the player pass the ball?", "A defender blocks his path, and his teammate is open under the basket."),
        (2.0, "The teammate is fouled while shooting.",
         "Why is the teammate fouled?", "He receives the pass close to the basket and a defender arrives late to stop the shot."),
        (3.5, "The teammate takes two free throws.",
         "Why does the teammate take free throws?", "He was fouled in the act of shooting, which awards him free throws."),
        (3.0, "The crowd cheers as the second free throw goes in.",
         "Why does the crowd cheer?", "The second free throw scores the point the home team needed."),
    ]),
    ("cs004", "Regular Sports", [
        (3.0, "The goalkeeper kicks the ball upfield.", None, None),
        (2.0, "A midfielder controls the ball and runs down the wing.",
         "Why does the midfielder have the ball?", "The goalkeeper's long kick landed at his feet."),
        (2.5, "The midfielder crosses the ball into the penalty box.",
         "Why does the midfielder cross the ball?", "He reached the wing with space and sees a striker waiting in the box."),
        (3.0, "A striker heads the ball toward the goal.",
         "Why does the striker head the ball?", "The cross arrives at head height in front of the goal."),
        (2.0, "A defender blocks the header with his hand.",
         "Why does the defender raise his hand?", "He is too late to block the header with his body and tries to stop the goal."),
        (3.5, "The referee points to the penalty spot.",
         "Why does the referee award a penalty?", "The defender handled the ball inside his own penalty box."),
        (2.5, "The striker scores the penalty.",
         "Why does the striker get to shoot from the penalty spot?", "The referee awarded a penalty for the defender's handball."),
    ]),
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

    from lmms_eval_plugins.testing.videos import make_video

    records = []
    for number, (video_id, category, segments) in enumerate(_CAUSALSTEP_VIDEOS, start=1):
        events = [event for _, event, _, _ in segments]
        causes = [answer for _, _, _, answer in segments if answer]
        start, rows = 0.0, []
        for index, (seconds, event, question, answer) in enumerate(segments):
            desc = {"question": "What mainly happens in this segment?",
                    "options": _causalstep_options(event, events, _CAUSALSTEP_DESC_DISTRACTORS, (3 * number + 5 * index) % 8),
                    "answer": (3 * number + 5 * index) % 8}
            causal = None
            if question is not None:
                causal = {"question": question,
                          "options": _causalstep_options(answer, causes, _CAUSALSTEP_CAUSAL_DISTRACTORS, (5 * number + 3 * index) % 8),
                          "answer": (5 * number + 3 * index) % 8}
            rows.append({"start": start, "end": start + seconds, "desc": desc, "causal": causal})
            start += seconds
        make_video(folder / "videos" / f"{video_id}.mp4", seconds=start, fps=4, width=96, height=72, seed=number)
        records.append({"video_id": video_id, "video": f"videos/{video_id}.mp4", "category": category, "segments": rows})
    (folder / "causalstep.json").write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


# ViRectify: (video number, domain, source, error_type, solution_source, question, answer, solution steps,
#             step labels ("1" correct / "0" wrong, explanation), error graph, key timestamps (s), rationale)
_VIRECTIFY_RECORDS = [
    (1, "dynamic_perception", "MVBench", "visual_perception", "gpt-4o-injection",
     "How many times does the ball bounce before it comes to rest?", "3",
     ["Step 1: The ball is dropped from the top of the frame.",
      "Step 2: It hits the floor twice before it stops moving.",
      "Step 3: Each contact with the floor counts as one bounce.",
      "Step 4: So the ball bounces 2 times."],
     [("1", ""), ("0", "The ball touches the floor three times, not twice."), ("1", ""),
      ("0", "The count carries over the miscount from step 2.")],
     {"step2": ["step2"], "step4": ["step2"]}, [[1.0, 4.0], [5.0, 7.0]],
     "At 00:01-00:04 the ball hits the floor twice and at 00:05-00:07 it bounces a third, smaller time before "
     "resting, so the solution missed the last bounce. The correct answer should be \\boxed{3}"),
    (1, "dynamic_perception", "MVBench", "hallucination", "Qwen2.5-VL-7B",
     "In which direction does the ball roll after its last bounce?", "to the left",
     ["Step 1: After the last bounce a player kicks the ball.",
      "Step 2: The kick sends the ball to the right.",
      "Step 3: The ball rolls to the right."],
     [("0", "No player appears in the video; nothing kicks the ball."),
      ("0", "The direction is inferred from the invented kick."), ("0", "The ball rolls left, toward the edge of the frame.")],
     {"step1": ["step1"], "step2": ["step1"], "step3": ["step2"]}, [[7.0, 9.5]],
     "From 00:07 to 00:09.5 the ball rolls on its own toward the left edge of the frame; no one kicks it. "
     "The correct answer should be \\boxed{to the left}"),
    (2, "dynamic_perception", "Perception Test", "logical", "gpt-4o-injection",
     "Which happens first? A. The cup is lifted. B. The light turns on. C. The door closes. D. The cup falls.", "B",
     ["Step 1: The light turns on at the start of the video.",
      "Step 2: The cup is lifted a few seconds later.",
      "Step 3: Since the cup is the main object, the event involving it must come first.",
      "Step 4: The answer is A."],
     [("1", ""), ("1", ""), ("0", "Order in time does not depend on which object is the main one."),
      ("0", "Follows the invalid inference of step 3.")],
     {"step3": ["step3"], "step4": ["step3"]}, [[0.0, 2.0]],
     "At 00:00-00:02 the light turns on, before the cup is lifted at 00:03; being the main object does not make "
     "an event earlier. The correct answer should be \\boxed{B}"),
    (2, "dynamic_perception", "Perception Test", "question_misunderstanding", "InternVL3-8B",
     "How many seconds pass between the light turning on and the cup being lifted?", "3",
     ["Step 1: The light turns on at 00:01.",
      "Step 2: The cup is lifted at 00:04.",
      "Step 3: The question asks how many objects move, which is one.",
      "Step 4: The answer is 1."],
     [("1", ""), ("1", ""), ("0", "The question asks for the time between two events, not the number of moving objects."),
      ("0", "Answers the misread question.")],
     {"step3": ["step3"], "step4": ["step3"]}, [[1.0, 1.5], [4.0, 4.5]],
     "The light turns on at 00:01-00:01.5 and the cup leaves the table at 00:04-00:04.5, so 3 seconds pass. "
     "The correct answer should be \\boxed{3}"),
    (3, "scientific_reasoning", "MMVU", "logical", "gpt-4o-injection",
     "The pendulum completes 5 full swings during the clip. What is its period?", "2 seconds",
     ["Step 1: The clip lasts 10 seconds.",
      "Step 2: The pendulum completes 5 full swings.",
      "Step 3: The period is the number of swings divided by the time, 5 / 10 = 0.5.",
      "Step 4: The period is 0.5 seconds."],
     [("1", ""), ("1", ""), ("0", "The period is time divided by the number of swings, 10 / 5 = 2 s; 0.5 is the frequency."),
      ("0", "Carries the inverted ratio of step 3.")],
     {"step3": ["step3"], "step4": ["step3"]}, [[2.0, 6.0]],
     "Between 00:02 and 00:06 the pendulum completes two full swings, one every 2 seconds; the solution divided "
     "swings by time, which gives the frequency. The correct answer should be \\boxed{2 seconds}"),
    (3, "scientific_reasoning", "MMVU", "visual_perception", "Qwen2.5-VL-7B",
     "What colour does the solution in the flask turn after the indicator is added?", "pink",
     ["Step 1: A few drops of indicator are added at 00:03.",
      "Step 2: The liquid turns blue.",
      "Step 3: Blue means the solution is acidic.",
      "Step 4: The solution turns blue."],
     [("1", ""), ("0", "The liquid turns pink, not blue."), ("0", "Interprets the misread colour."),
      ("0", "Reports the misread colour.")],
     {"step2": ["step2"], "step3": ["step2"], "step4": ["step2", "step3"]}, [[3.0, 6.0]],
     "At 00:03-00:06 the liquid clearly turns pink after the drops are added. The correct answer should be \\boxed{pink}"),
    (4, "scientific_reasoning", "VideoMMMU", "hallucination", "gpt-4o-injection",
     "Which gas is collected in the test tube during the electrolysis shown?", "hydrogen",
     ["Step 1: Bubbles form at the negative electrode.",
      "Step 2: A glowing splint held at the tube relights.",
      "Step 3: A relighting splint shows the gas is oxygen.",
      "Step 4: The gas is oxygen."],
     [("1", ""), ("0", "No splint test is shown in the video."), ("0", "Relies on the invented splint test."),
      ("0", "Follows from step 3.")],
     {"step2": ["step2"], "step3": ["step2"], "step4": ["step3"]}, [[1.0, 3.0], [6.0, 8.0]],
     "At 00:01-00:03 the gas collects above the negative electrode, and at 00:06-00:08 the tube holds twice the "
     "volume of the other one; gas from the negative electrode is hydrogen. The correct answer should be \\boxed{hydrogen}"),
    (4, "scientific_reasoning", "VideoMMMU", "question_misunderstanding", "gpt-4o-injection",
     "At which electrode does more gas form, the positive or the negative one?", "the negative one",
     ["Step 1: Two test tubes collect gas over the electrodes.",
      "Step 2: The question asks which gas is produced.",
      "Step 3: Water splits into hydrogen and oxygen.",
      "Step 4: The answer is hydrogen and oxygen."],
     [("1", ""), ("0", "The question asks which electrode produces more gas."), ("1", ""),
      ("0", "Answers the misread question instead of naming the electrode.")],
     {"step2": ["step2"], "step4": ["step2"]}, [[6.0, 9.0]],
     "From 00:06 to 00:09 the tube over the negative electrode holds about twice as much gas. "
     "The correct answer should be \\boxed{the negative one}"),
    (5, "embodied_decision", "VSI-Bench", "logical", "InternVL3-8B",
     "The robot must reach the door. Should it turn left or right at the table?", "left",
     ["Step 1: The robot starts facing the table.",
      "Step 2: The door is on the left side of the room.",
      "Step 3: The chair is on the right, so the right side is the open path.",
      "Step 4: A free path always leads to the goal.",
      "Step 5: The robot should turn right."],
     [("1", ""), ("1", ""), ("0", "Where the chair stands says nothing about where the door is."),
      ("0", "Overgeneralises: a free path need not lead to the door."), ("0", "Follows steps 3 and 4.")],
     {"step3": ["step3"], "step4": ["step4"], "step5": ["step3", "step4"]}, [[2.0, 5.0]],
     "At 00:02-00:05 the camera pans left and shows the door beside the table, so the robot must turn toward it. "
     "The correct answer should be \\boxed{left}"),
    (5, "embodied_decision", "VSI-Bench", "visual_perception", "gpt-4o-injection",
     "How many chairs must the robot pass on its way to the door?", "2",
     ["Step 1: The path to the door runs along the wall.",
      "Step 2: One chair stands along that wall.",
      "Step 3: The robot passes 1 chair."],
     [("1", ""), ("0", "Two chairs stand along the wall; the second is seen at 00:06."), ("0", "Counts from the miscount of step 2.")],
     {"step2": ["step2"], "step3": ["step2"]}, [[4.0, 7.0]],
     "From 00:04 to 00:07 the camera follows the wall and shows two chairs along it. The correct answer should be \\boxed{2}"),
    (6, "embodied_decision", "EgoSchema", "hallucination", "Qwen2.5-VL-7B",
     "What should the person pick up next to finish making the tea?", "the kettle",
     ["Step 1: A cup with a tea bag stands on the counter.",
      "Step 2: The person has already poured hot water.",
      "Step 3: The next step is to add milk.",
      "Step 4: The person should pick up the milk."],
     [("1", ""), ("0", "No water is poured in the video; the cup is still empty."),
      ("0", "Builds on the invented pouring."), ("0", "Follows step 3.")],
     {"step2": ["step2"], "step3": ["step2"], "step4": ["step3"]}, [[0.0, 3.0], [7.5, 10.0]],
     "At 00:00-00:03 the cup holds only a dry tea bag, and at 00:07.5-00:10 the kettle on the stove starts to steam, "
     "so the water still has to be poured. The correct answer should be \\boxed{the kettle}"),
    (6, "embodied_decision", "EgoSchema", "question_misunderstanding", "gpt-4o-injection",
     "Where is the kettle when the video ends?", "on the stove",
     ["Step 1: The kettle is filled at the sink.",
      "Step 2: The question asks where the kettle was filled.",
      "Step 3: The answer is at the sink."],
     [("1", ""), ("0", "The question asks where the kettle is at the end, not where it was filled."),
      ("0", "Answers the misread question.")],
     {"step2": ["step2"], "step3": ["step2"]}, [[8.0, 10.0]],
     "At 00:08-00:10, the end of the video, the kettle stands on the stove. The correct answer should be \\boxed{on the stove}"),
]


def make_virectify(folder: Path) -> None:
    """Twelve records (three domains x four error types) on six videos (96x72, 4 fps, 10 s each)."""
    import json

    from lmms_eval_plugins.testing.videos import make_video

    lines, written = [], set()
    for number, row in enumerate(_VIRECTIFY_RECORDS, start=1):
        video, domain, source, error_type, solution_source, question, answer, steps, labels, graph, stamps, rationale = row
        if video not in written:  # two records (questions) per video
            make_video(folder / "videos" / f"clip{video:02d}.mp4", seconds=10, fps=4, width=96, height=72, seed=100 + video)
            written.add(video)
        record = {"id": f"vr-{number:06d}", "video": f"videos/clip{video:02d}.mp4", "domain": domain, "source": source,
                  "error_type": error_type, "solution_source": solution_source, "question": question, "answer": answer,
                  "solution": steps,
                  "error_identify": {f"step{k}": list(label) for k, label in enumerate(labels, start=1)},
                  "error_graph": graph, "timestamps": stamps, "rationale": rationale}
        lines.append(json.dumps(record, ensure_ascii=False))
    (folder / "virectify.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


# CrossVid: tiny videos (96x72, 4 fps) shared by the tasks, two UAV scenes (two views of 6 numbered
# 400x300 frames, so the 360 px resize and the box scaling are exercised) and 2 records per task.
_CROSSVID_VIDEOS = {  # path under videos/ -> (seconds, seed)
    **{f"behavior/bh{k}.mp4": (5, 10 + k) for k in range(1, 5)},
    **{f"movie/mv{k}.mp4": (5, 20 + k) for k in range(1, 5)},
    "movie/mv5.mp4": (12, 25),
    **{f"cook/ck{k}.mp4": (6, 30 + k) for k in range(1, 5)},
    "cook/ck5.mp4": (12, 35),
    **{f"assembly/as{k}.mp4": (8, 40 + k) for k in range(1, 4)},
}
_CROSSVID_BOX = {"xtl": 40.5, "ytl": 60.0, "xbr": 81.9, "ybr": 100.2}


def _crossvid_box(dx: float, dy: float) -> dict[str, float]:
    return {k: v + (dx if k[0] == "x" else dy) for k, v in _CROSSVID_BOX.items()}


_CROSSVID_QA: dict[str, list[dict]] = {
    "BU": [
        {"id": 0, "videos": ["behavior/bh1.mp4", "behavior/bh2.mp4", "behavior/bh3.mp4"],
         "question": "In which videos does the animal drink water?",
         "options": ["A. Video 1", "B. Video 2", "C. Video 3", "D. None of the videos"], "answer": ["A", "C"]},
        {"id": 1, "videos": ["behavior/bh2.mp4", "behavior/bh4.mp4"],
         "question": "Which behaviours appear in both videos?",
         "options": ["A. Running", "B. Eating", "C. Sleeping", "D. Grooming"], "answer": "BD"},
    ],
    "NC": [
        {"id": 0, "videos": [f"movie/mv{k}.mp4" for k in range(1, 5)],
         "question": "Which clip shows the moment the two friends reconcile?",
         "options": ["A. Video 1", "B. Video 2", "C. Video 3", "D. Video 4"], "answer": "C"},
        {"id": 1, "videos": [f"movie/mv{k}.mp4" for k in (4, 3, 2, 1)],
         "question": "What do the four clips have in common?",
         "options": ["A. A chase", "B. A dinner", "C. A phone call", "D. A storm"], "answer": "A"},
    ],
    "CC": [
        {"id": 0, "videos": [f"cook/ck{k}.mp4" for k in range(1, 5)],
         "question": "In which video is the sauce thickened with flour?",
         "options": ["A. Video 1", "B. Video 2", "C. Video 3", "D. Video 4"], "answer": "B"},
        {"id": 1, "videos": [f"cook/ck{k}.mp4" for k in (2, 4, 1, 3)],
         "question": "Which video uses the most garlic?",
         "options": ["A. Video 1", "B. Video 2", "C. Video 3", "D. Video 4"], "answer": "D"},
    ],
    "PEA": [
        {"id": 0, "videos": [f"assembly/as{k}.mp4" for k in range(1, 4)], "begin": [1.5, 0, 2], "end": [6.2, 5, 7.9],
         "question": "Which video attaches the cabin at the wrong position?",
         "options": ["A. Video 1", "B. Video 2", "C. Video 3", "D. None of them"], "answer": "B"},
        {"id": 1, "videos": [f"assembly/as{k}.mp4" for k in (3, 1, 2)], "begin": [0, 1, 3], "end": [4, 7, 8],
         "question": "What kind of mistake happens in Video 1?",
         "options": ["A. wrong order", "B. previous one is mistake", "C. shouldn't have happened", "D. wrong position"],
         "answer": "C"},
    ],
    "PI": [
        {"id": 0, "video": "movie/mv5.mp4", "beginning": [0, 3], "ending": [9, 12],
         "options": ["A. The hero misses the train.", "B. The hero buys a ticket and boards the train.",
                     "C. The train is cancelled.", "D. The hero goes home."], "answer": "B"},
        {"id": 1, "video": "movie/mv5.mp4", "beginning": [[0, 2], [3, 4.5]], "ending": [[8, 12]],
         "options": ["A. They argue and part ways.", "B. They meet for the first time.",
                     "C. They celebrate a wedding.", "D. They solve the case together."], "answer": "D"},
    ],
    "FSA": [
        {"id": 0, "video A": "cook/ck1.mp4", "video B": "cook/ck2.mp4", "ref_segment": [1, 3], "answer": [2, 4.5]},
        {"id": 1, "video A": "cook/ck3.mp4", "video B": "cook/ck4.mp4", "ref_segment": [0.5, 2.0], "answer": [3.25, 5.5]},
    ],
    "PSS": [
        {"id": 0, "video": "cook/ck5.mp4",
         "segments": {"clip_a": [[6, 9]], "clip_b": [[0, 3]], "clip_c": [[9, 12]], "clip_d": [[3, 6]]},
         "answer": "2->4->1->3"},
        {"id": 1, "video": "cook/ck5.mp4", "segments": {"1": [[0, 2], [2.5, 4]], "2": [[8, 12]], "3": [[4, 8]]},
         "answer": "1->3->2"},
    ],
    "MSR": [
        # {A2} appears only in an option (the official script reads placeholders from the question only)
        {"id": 0, "vid": 7, "objects": [{"id": 3}, {"id": 5}], "question": "In view B, which object is closer to {B1}?",
         "options": ["A. {A2}", "B. {B2}", "C. Neither of them", "D. Both are equally close"], "answer": "B"},
        {"id": 1, "vid": 7, "objects": [{"id": 5}, {"id": 3}], "question": "On which side of {A2} is {A1} in view A?",
         "options": ["A. Left", "B. Right", "C. Above", "D. Below"], "answer": "A"},
    ],
    "MOC": [
        {"id": 0, "vid": 9, "objects": [{"id": 1}, {"id": 2}],
         "question": "How many vehicles appear in both views, counting {A1} and {B2}?",
         "options": ["A. 1", "B. 2", "C. 3", "D. 4"], "answer": "C"},
        # track 4 is annotated only after the frames the folder holds: not visible in the sampled frames
        {"id": 1, "vid": 9, "objects": [{"id": 4}, {"id": 1}],
         "question": "Counting {A1} and {B2}, how many cars cross the junction?",
         "options": ["A. 2", "B. 3", "C. 4", "D. 5"], "answer": "A"},
    ],
    "CCQA": [
        {"id": 0, "video A": "cook/ck3.mp4", "video B": "cook/ck4.mp4",
         "question": "How does the way the onion is cut differ between the two videos?",
         "answer": "In Video A the onion is diced finely, while in Video B it is sliced into thick rings.",
         "scoring_points": ["Video A dices the onion finely", "Video B slices the onion into thick rings"]},
        {"id": 1, "video A": "cook/ck1.mp4", "video B": "cook/ck2.mp4",
         "question": "Compare how long the pasta is boiled and how it is drained.",
         "answer": "Video A boils the pasta for 8 minutes and drains it in a colander; Video B boils it for 10 minutes "
                   "and lifts it out with tongs.",
         "scoring_points": ["Video A boils the pasta for 8 minutes", "Video A drains the pasta in a colander",
                            "Video B boils the pasta for 10 minutes and lifts it out with tongs"]},
    ],
}
_CROSSVID_TRACKS = {  # (view, vid) -> [(track id, {frame position: box or None})]
    (1, 7): [(3, {"0": None, "2": _crossvid_box(0, 0), "3": _crossvid_box(4, 1)}),
             (5, {"0": _crossvid_box(200, 30.7), "1": _crossvid_box(205, 31)})],
    (2, 7): [(3, {"1": _crossvid_box(100, 50), "4": _crossvid_box(110, 52)}),
             (5, {"0": _crossvid_box(150.9, 99.99)}), (8, {"5": _crossvid_box(10, 10)})],
    (1, 9): [(1, {"1": _crossvid_box(20, 20)}), (2, {"0": _crossvid_box(0, 150)}), (4, {"40": _crossvid_box(5, 5)})],
    (2, 9): [(1, {"3": _crossvid_box(300, 150)}), (2, {"2": _crossvid_box(250, 0)})],
}


def make_crossvid(folder: Path) -> None:
    import json

    from lmms_eval_plugins.testing.videos import make_frame_folder, make_video

    for rel, (seconds, seed) in _CROSSVID_VIDEOS.items():
        make_video(folder / "videos" / rel, seconds=seconds, fps=4, width=96, height=72, seed=seed)
    for (view, vid), tracks in _CROSSVID_TRACKS.items():
        make_frame_folder(folder / "uav" / "frames" / str(view) / f"{vid}-{view}", num_frames=6, width=400, height=300,
                          start_number=1, seed=50 + 10 * view + vid)
        records = [{"id": track, "bbox": boxes} for track, boxes in tracks]
        path = folder / "uav" / "bbox" / str(view) / f"{vid}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    (folder / "QA").mkdir(parents=True, exist_ok=True)
    for task, records in _CROSSVID_QA.items():
        (folder / "QA" / f"{task}.json").write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


GENERATORS: dict[str, Callable[[Path], None]] = {
    "errorradar": make_errorradar,
    "mmerror": make_mmerror,
    "causalstep": make_causalstep,
    "virectify": make_virectify,
    "crossvid": make_crossvid,
}


def sample_dir(benchmark: str) -> Path:
    return tasks_dir() / benchmark / "sample_data"


def main(argv: list[str] | None = None) -> int:
    names = list(sys.argv[1:] if argv is None else argv) or sorted(GENERATORS)
    for name in names:
        GENERATORS[name](sample_dir(name))
        print(f"wrote {sample_dir(name)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
