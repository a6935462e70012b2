"""MMErroR's bundled sample data: synthetic media in the benchmark's real schema.

Written by ``lmms-eval-plugins sample-data mmerror`` (a test checks that regenerating changes nothing)."""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

from lmms_eval_plugins.safe_files import atomic_writer, write_atomic

_MMERROR_ROWS = [
    (
        1,
        "A_Visual_Perception_Error",
        "Mathematics",
        "Geometry",
        "How many triangles are in the figure?",
        "4",
        "Step 1: The figure shows three triangles. Step 2: Counting them gives 3. Step 3: So the answer is 3.",
    ),
    (
        2,
        "A_Visual_Perception_Error",
        "Physics",
        "Measurement",
        "What pressure does the gauge show, in kPa?",
        "40",
        "Step 1: The needle points at 60 on the dial. Step 2: The dial is in kPa. Step 3: The pressure is 60 kPa.",
    ),
    (
        3,
        "A_Visual_Perception_Error",
        "Data Analysis",
        "Charts",
        "Which bar in the chart is the tallest?",
        "C",
        "Step 1: Bar A reaches 5, bar B reaches 3, bar C reaches 4. Step 2: The largest value is 5. Step 3: Bar A is the tallest.",
    ),
    (
        4,
        "B_Reasoning_Error",
        "Mathematics",
        "Arithmetic",
        "What is the sum of the two numbers shown?",
        "15",
        "Step 1: The numbers are 10 and 5. Step 2: 10 + 5 = 14. Step 3: The sum is 14.",
    ),
    (
        5,
        "B_Reasoning_Error",
        "Biology",
        "Genetics",
        "Both parents in the pedigree are carriers. What share of their children is expected to be affected?",
        "？",
        "Step 1: Both parents are Aa. Step 2: A carrier is unaffected, so no child can be affected. Step 3: The share is 0.",
    ),
    (
        6,
        "C_Question_Comprehension_Error",
        "Data Analysis",
        "Tables",
        "How much larger is the value in row 2 than in row 1?",
        "3",
        "Step 1: Row 1 holds 4 and row 2 holds 7. Step 2: The question asks for their total. Step 3: 4 + 7 = 11.",
    ),
    (
        7,
        "C_Question_Comprehension_Error",
        "Physics",
        "Geometry of motion",
        "The square track has the side length shown. How far is one lap?",
        "16 m",
        "Step 1: The side is 4 m. Step 2: The question asks for the area enclosed by the track. Step 3: 4 x 4 = 16 square metres.",
    ),
    (
        8,
        "D_Knowledge_Deployment_Error",
        "Mathematics",
        "Geometry",
        "Two angles of the triangle are 50 and 60 degrees. Find the third.",
        "70",
        "Step 1: The angles shown are 50 and 60 degrees. Step 2: The angles of a triangle add up to 360 degrees. Step 3: 360 - 110 = 250 degrees.",
    ),
    (
        9,
        "D_Knowledge_Application_Error",
        "Physics",
        "Mechanics",
        "A 2 kg cart accelerates at 3 m/s^2 as shown. What is the net force?",
        "6 N",
        "Step 1: The mass is 2 kg and the acceleration 3 m/s^2. Step 2: Force equals mass divided by acceleration. Step 3: 2 / 3 = 0.67 N.",
    ),
    (
        10,
        "E_NoError",
        "Mathematics",
        "Arithmetic",
        "What is the product of the two numbers shown?",
        "12",
        "Step 1: The numbers are 3 and 4. Step 2: 3 x 4 = 12. Step 3: The product is 12.",
    ),
    (
        11,
        "E_NoError",
        "Biology",
        "Ecology",
        "Which organism in the food chain is a producer?",
        "grass",
        "Step 1: The chain is grass, rabbit, fox. Step 2: A producer makes its own food by photosynthesis. Step 3: Grass is the producer.",
    ),
    (
        12,
        "E_NoError",
        "Data Analysis",
        "Charts",
        "How many bars in the chart are taller than 2?",
        "2",
        "Step 1: The bars reach 1, 3 and 4. Step 2: Two of them exceed 2. Step 3: The answer is 2.",
    ),
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
        record = {
            "question_id": question_id,
            "question": question,
            "correct_answer": correct_answer,
            "error_reason": chain,
            "label": label,
            "domain": domain,
            "subdomain": subdomain,
        }
        records.append(record)
        write_atomic(jsons / f"{question_id}.json", json.dumps(record, ensure_ascii=False, indent=2) + "\n")
        image = _mmerror_image(number)
        if number % 4 == 0:  # the real data mixes formats; the reader looks up png, jpg, jpeg, webp
            with atomic_writer(images / f"{question_id}.jpg", binary=True) as out:
                image.save(out, format="JPEG", quality=90)
        else:
            with atomic_writer(images / f"{question_id}.png", binary=True) as out:
                image.save(out, format="PNG", optimize=False)
    # The hub also holds an aggregate file; readers must ignore it.
    write_atomic(jsons / "MMErroR_all.json", json.dumps(records, ensure_ascii=False, indent=2) + "\n")


# CausalStep: (video_id, category, [(segment seconds, event, causal question or None, causal answer or None), ...])
