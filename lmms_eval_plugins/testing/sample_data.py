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


GENERATORS: dict[str, Callable[[Path], None]] = {
    "errorradar": make_errorradar,
    "mmerror": make_mmerror,
    "causalstep": make_causalstep,
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
