"""MMErroR's label vocabulary, shared by the prompts and parsers (tasks.py) and the aggregations (scoring.py).

Letters, names and definitions as in the official ``mmerror_eval/labels.py``
(github.com/code-here-in/MMerroR-Evaluation).
"""

from __future__ import annotations

# Letter -> label name and one-line definition.
# Note the letter order: B is reasoning and D is knowledge (the paper lists them differently).
ERROR_LETTERS = "ABCD"
NO_ERROR = "E"
LABELS = {
    "A": "A_Visual_Perception_Error",
    "B": "B_Reasoning_Error",
    "C": "C_Question_Comprehension_Error",
    "D": "D_Knowledge_Deployment_Error",
    "E": "E_NoError",
}
DEFINITIONS = {
    "A": "Misread or misinterpret the visual content, such as text, numbers, objects, locations, colors, or counts.",
    "B": "Visual facts are correct, but the logic, arithmetic, or multi-step deduction is wrong.",
    "C": "The image is read reasonably well, but the question intent or constraint is misunderstood.",
    "D": "The image and question are understood, but the wrong fact, formula, or external knowledge is applied.",
}
ERROR_LABELS = tuple(LABELS[c] for c in ERROR_LETTERS)
ALL_LABELS = (*ERROR_LABELS, LABELS[NO_ERROR])
NO_ERROR_LABEL = LABELS[NO_ERROR]

# Stage 1 of EPD: P = an error is present, N = no error (official PRESENCE_*_LETTER).
PRESENT, ABSENT = "P", "N"
PRESENCE_NAMES = {PRESENT: "Error Present", ABSENT: "No Error"}

STAGE_PRESENCE, STAGE_TYPE = "presence", "type"

# On every ETC doc and item: the E_NoError records left out of ETC, which the official ETC report still
# counts in its strict_accuracy denominator (official.official_report's ``not_asked``).
OFFICIAL_NOT_ASKED_FIELD = "official_not_asked"
