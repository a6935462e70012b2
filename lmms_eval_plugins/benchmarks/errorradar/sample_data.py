"""ErrorRadar's bundled sample data: synthetic media in the benchmark's real schema.

Written by ``lmms-eval-plugins sample-data errorradar`` (a test checks that regenerating changes nothing)."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

from PIL import Image, ImageDraw

from lmms_eval_plugins.safe_files import atomic_writer

# question_id, question_type, level, content, answer, user_answer, steps, error_step, error_category (as spelled in the data)
_ERRORRADAR_ROWS = [
    (
        "shapes-count",
        "multiple-choice",
        "Grade 2",
        "How many triangles are in the picture?",
        "['4']",
        "3",
        ["Step 1: I look at the picture.", "Step 2: I count 3 triangles.", "Step 3: So the answer is 3."],
        2,
        "Visual Perception Error",
    ),
    (
        "bar-height",
        "fill-in-the-blank",
        "Grade 4",
        "The bar chart shows apples sold. How many more on Monday than Tuesday?",
        "['2']",
        "3",
        ["Step 1: Monday is 5.", "Step 2: Tuesday is 2.", "Step 3: 5 - 2 = 3."],
        2,
        "visual perception error",
    ),
    (
        "sum-lengths",
        "calculation",
        "Grade 3",
        "Add the two side lengths shown.",
        "['10+5=15']",
        "14",
        ["Step 1: The sides are 10 and 5.", "Step 2: 10 + 5 = 14.", "Step 3: The answer is 14."],
        2,
        "Calculation Error",
    ),
    (
        "area-rect",
        "calculation",
        "Grade 5",
        "Find the area of the rectangle.",
        "['24']",
        "20",
        ["Step 1: Width 6, height 4.", "Step 2: Area = width x height.", "Step 3: 6 x 4 = 20.", "Step 4: Area is 20."],
        3,
        "calculation error",
    ),
    (
        "odd-even",
        "judgement",
        "Grade 1",
        "Is the number of dots odd or even?",
        "['even']",
        "odd",
        ["Step 1: There are 6 dots.", "Step 2: 6 cannot be split into pairs, so it is odd."],
        2,
        "Reasoning Error",
    ),
    (
        "pattern-next",
        "multiple-choice",
        "Grade 3",
        "Which shape comes next in the pattern?",
        "['C']",
        "A",
        [
            "Step 1: The pattern is circle, square, circle, square.",
            "Step 2: The pattern repeats every three shapes.",
            "Step 3: So the next is circle.",
            "Step 4: Answer A.",
        ],
        2,
        "reasoning error",
    ),
    (
        "angle-sum",
        "fill-in-the-blank",
        "Grade 6",
        "Two angles of the triangle are shown. Find the third.",
        "['70']",
        "110",
        [
            "Step 1: The angles are 50 and 60.",
            "Step 2: Angles in a triangle sum to 360.",
            "Step 3: 360 - 110 = 250.",
            "Step 4: Hmm, the answer is 110.",
        ],
        2,
        "Knowledge Error",
    ),
    (
        "circle-area",
        "word problem",
        "Grade 6",
        "Find the area of the circle with the radius shown.",
        "['9π']",
        "6π",
        ["Step 1: The radius is 3.", "Step 2: Area of a circle is 2πr.", "Step 3: 2π x 3 = 6π."],
        2,
        "knowledge error",
    ),
    (
        "units-answer",
        "",
        "Grade 4",
        "How many centimetres long is the ribbon? Answer with a letter.",
        "['B']",
        "12",
        ["Step 1: The ribbon goes from 0 to 12.", "Step 2: It is 12 cm long.", "Step 3: I write 12."],
        3,
        "Misinterpretation of the Question",
    ),
    (
        "ask-perimeter",
        "word problem",
        "Grade 5",
        "The square's side is shown. What is its perimeter?",
        "['16']",
        "16 square units",
        ["Step 1: The question asks for the area.", "Step 2: 4 x 4 = 16.", "Step 3: The area is 16 square units."],
        1,
        "misinterpretation of the question",
    ),
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
    with atomic_writer(folder / "ErrorRadar_dataset.csv", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(
            [
                "question_id",
                "content_image",
                "study_level",
                "question_type",
                "content",
                "answer",
                "user_answer",
                "user_answer_steps",
                "error_step",
                "error_category",
            ]
        )
        for seed, (name, qtype, level, content, answer, user_answer, steps, step, category) in enumerate(
            _ERRORRADAR_ROWS
        ):
            question_id = hashlib.md5(name.encode()).hexdigest()  # the real ids are 32 hex chars
            with atomic_writer(folder / "images" / f"{question_id}.png", binary=True) as out:
                _errorradar_image(seed).save(out, format="PNG", optimize=False)
            writer.writerow(
                [
                    question_id,
                    f"https://example.invalid/errorradar/{question_id}.png",
                    level,
                    qtype,
                    content,
                    answer,
                    user_answer,
                    "\n".join(steps),
                    f"Step {step}",
                    category,
                ]
            )


# question_id suffix, label (as spelled in the data), domain, subdomain, question, correct_answer, error_reason (the chain)
