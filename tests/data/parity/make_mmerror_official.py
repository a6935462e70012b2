"""Writes mmerror_official.jsonl: the official MMErroR code run on replies, gold labels and small runs.

Usage (the official code stays outside this repository; nothing of it is copied):
    git clone https://github.com/code-here-in/MMerroR-Evaluation OFFICIAL   # commit b5fc9f8
    python tests/data/parity/make_mmerror_official.py OFFICIAL tests/data/answer_corpus/mmerror.jsonl \
        tests/data/parity/mmerror_official.jsonl
Deterministic (seeded). Needs PyYAML (the official runner imports it).
"""

import json
import random
import sys
from collections import Counter
from pathlib import Path

OFFICIAL, CORPUS, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, OFFICIAL)
from mmerror_eval import labels, reporting, runner
from mmerror_eval.dataset import DatasetRecord
from mmerror_eval.prompts import load_prompt_template

ETC, EPD = labels.build_label_spec("etc"), labels.build_label_spec("epd")
LETTER = {v: k for k, v in ETC.pred_map.items()} | {"E_NoError": "E"}
SRC_LABEL = "mmerror_eval/labels.py:normalize_label"
SRC_PRES = "mmerror_eval/labels.py:normalize_presence_decision"
SRC_GOLD = "mmerror_eval/labels.py:normalize_label"
SRC_ETC = "mmerror_eval/runner.py:_evaluate_record_etc, mmerror_eval/reporting.py:compute_model_metrics"
SRC_EPD = "mmerror_eval/runner.py:_evaluate_record_epd, mmerror_eval/reporting.py:compute_model_metrics"


def off_type(reply):
    name = labels.normalize_label(reply, ETC, is_prediction=True)
    return LETTER[name] if name else None


def off_presence(reply):
    return labels.normalize_presence_decision(reply)


rows = []
seen = set()


def add_reply(family, reply):
    if (family, reply) in seen:
        return
    seen.add((family, reply))
    fn = off_presence if family == "epd_presence" else off_type
    rows.append({"id": f"{family}-{sum(r.get('family') == family for r in rows) + 1:04d}", "kind": "reply",
                 "family": family, "reply": reply, "official": fn(reply),
                 "source": SRC_PRES if family == "epd_presence" else SRC_LABEL})


# 1. the answer corpus of the plugin (real-model styles)
for line in Path(CORPUS).read_text().splitlines():
    r = json.loads(line)
    add_reply(r["family"], r["reply"])

# 2. systematic forms
WRAP = ["{}", "{}.", "({})", "[{}]", "**{}**", "*{}*", "_{}_", "`{}`", "$${}$$", "~{}~", "{}!", "{}?", "{}:", "{}..",
        "( {} )", "(({}))", "{})", "({}", "  {}  ", "\n{}\n", "{} ", "\\boxed{{{}}}", "\\boxed {{ {} }}",
        "\\boxed{{\\text{{{}}}}}", "\\boxed{{\\mathbf{{{}}}}}", "\\boxed{{\\mathrm {}}}", "\\boxed{{\\textbf{{{}}}}}",
        "$\\boxed{{{}}}$", "<|begin_of_box|>{}<|end_of_box|>", "Answer: {}", "answer:{}", "ANSWER - {}",
        "Final answer: {}", "Final Answer: ({})", "FinalAnswer: {}", "Output: {}", "Output - **{}**", "Answer {}",
        "Answer: \\boxed{{{}}}", "The answer is {}.", "Option {}", "Answer: Option {}", "<think>hmm</think>{}",
        "<think>\nThe chain misreads a value.\n</think>\n\n{}", "<think>{}</think>", "</think>{}", "{}</think>",
        "Reasoning: step 2 is wrong.\nAnswer: {}", "{}\nThe reasoning misreads the chart.",
        "The reasoning misreads the chart.\n{}", "{}\n{}", "Answer: {}\nAnswer: {}", "{}\n\nFinal answer: {}",
        "\\boxed{{{}}} and \\boxed{{{}}}", "ｂ{}", "{}ｂ", "Answer：{}", "答案：{}", "{}_Reasoning_Error", "{}. Reasoning Error",
        "{} - the arithmetic in step 3 is wrong", "{}\u200b", "\u00a0{}\u00a0", "'{}'", "\"{}\"", "{{{}}}", "<{}>", "{}\t", "\t{}\n"]
for family, letters in (("etc", "ABEbx"), ("epd_type", "Dc"), ("epd_presence", "PnA")):
    for w in WRAP:
        for letter in letters:
            n = w.count("{}")
            if n == 1:
                add_reply(family, w.format(letter))
        if w.count("{}") == 2:
            for a, b in (("A", "A"), ("A", "B"), (letters[0], letters[1])):
                add_reply(family, w.format(a, b))

NAMES = ["A_Visual_Perception_Error", "B_Reasoning_Error", "C_Question_Comprehension_Error",
         "D_Knowledge_Deployment_Error", "E_NoError", "b_reasoning_error", " B_Reasoning_Error ",
         "B_Reasoning_Error.", "<think>x</think>B_Reasoning_Error", "Reasoning Error", "B_Reasoning_Error\n"]
for name in NAMES:
    add_reply("etc", name)
    add_reply("epd_type", name)
WORDS = ["no error", "No Error", "NO ERROR", "There is no error.", "no errors here", "error present", "Error Present",
         "The error present in step 2", "none", "None", "NONE", "none.", "error", "Error", "ERROR", "error.", "errors",
         "No error in step 1, but step 3 is wrong.", "Answer: N", "Answer: P", "**N**", "P N", "PN", "P/N", "Yes", "No",
         "P.!", "N?", "N :", " p ", "n\n", "<think>no error</think>P", "noerror", "no  error", "No-Error", "error  present",
         "present error", "P\nN", "N\nN", "\\boxed{N}", "(P)", "P)", "The reasoning is correct.", "none of them", "errorless"]
for w in WORDS:
    add_reply("epd_presence", w)
    add_reply("etc", w)

# 3. seeded random combinations of the pieces the parsers look at
PIECES = ["A", "B", "C", "D", "E", "P", "N", "a", "b", "p", "n", "Answer:", "answer", "Final answer:", "Output:", "\\boxed{",
          "\\text{", "}", "{", "(", ")", "[", "]", "**", "*", "_", "`", "$", "~", ".", ":", "!", "?", "-", " ", "  ", "\n",
          "\t", "<think>", "</think>", "<|begin_of_box|>", "<|end_of_box|>", "no error", "error present", "none", "error",
          "B_Reasoning_Error", "The answer is", "Option", "because", "step 3"]
rng = random.Random(30)
for family, count in (("etc", 90), ("epd_type", 50), ("epd_presence", 80)):
    made = 0
    while made < count:
        reply = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 7)))
        before = len(rows)
        add_reply(family, reply)
        made += len(rows) - before

# gold labels
GOLD = ["A_Visual_Perception_Error", "B_Reasoning_Error", "C_Question_Comprehension_Error", "D_Knowledge_Deployment_Error",
        "D_Knowledge_Application_Error", "Knowledge Deficiency Error", "E_NoError", "No Error", "noerror", "NoError",
        "Visual Reasoning Error", "Reasoning about the question", "b", "B", "a", "c", "d", "e", "E", " b ", "b.",
        "B Reasoning", "D. knowledge", "e_noerror", "Visual", "perception", "Question Comprehension", "comprehension",
        "knowledge", "reasoning", "Spelling Error", "Data error", "Calculation error", "Answer error", "", "   ",
        "No error (visual check)", "E visual", "e: no error", "b_visual", "Bvisual", "Question about knowledge",
        "Knowledge of visual perception", "VISUAL", "REASONING ERROR", "nonvisual", "misreasoning", "Perceptual",
        "Visual_Perception", "Comprehension of the question", "A/B", "A or B", "(b)", "b)", "B-Reasoning", "é visual",
        "Diagram error", "Logic error", "Knowledge", "question", "No error in reasoning"]
for i, label in enumerate(GOLD, 1):
    etc = labels.normalize_label(label, ETC, is_prediction=False)
    epd = labels.normalize_label(label, EPD, is_prediction=False)
    rows.append({"id": f"gold-{i:03d}", "kind": "gold_label", "label": label,
                 "official_etc": LETTER[etc] if etc else None, "official_epd": LETTER[epd] if epd else None,
                 "source": SRC_GOLD})

# small runs through the official runner and report
prompts = {"type": load_prompt_template(Path(OFFICIAL) / "prompts" / "error_label.prompt.txt")}
epd_prompts = {"presence": load_prompt_template(Path(OFFICIAL) / "prompts" / "epd_presence.prompt.txt"),
               "type": load_prompt_template(Path(OFFICIAL) / "prompts" / "epd_type.prompt.txt")}


class Stub:
    def __init__(self, replies):
        self.replies = replies

    def generate(self, message, context=None):
        return self.replies[context.stage if context else "type"]


class NoWait:
    def wait(self):
        pass


NAME = {"A": "A_Visual_Perception_Error", "B": "B_Reasoning_Error", "C": "C_Question_Comprehension_Error",
        "D": "D_Knowledge_Deployment_Error", "E": "E_NoError"}


def run(task, samples):
    spec = ETC if task == "etc" else EPD
    results = []
    for i, sample in enumerate(samples):
        label = sample[0]
        record = DatasetRecord(index=i, question_id=f"MMErroR_{i:05d}", question="Q?", correct_answer="1",
                               error_reason="Step 1: r.", label=NAME.get(label, label), domain=sample[-1],
                               subdomain="s", image_path=None)
        if task == "etc":
            stub = Stub({"type": sample[1]})
            results.append(runner._evaluate_record(stub, NoWait(), record, prompts, spec, 0))
        else:
            stub = Stub({"presence": sample[1], "type": sample[2]})
            results.append(runner._evaluate_record(stub, NoWait(), record, epd_prompts, spec, 0))
    m = reporting.compute_model_metrics(results, len(samples))
    return {k: m[k] for k in ("dataset_total", "scored_total", "correct", "accuracy", "strict_accuracy")}


rng = random.Random(3030)
ETC_REPLIES = ["A", "B", "C", "D", "[B]", "The answer is B.", "A\nAnswer: B", "b", "\\boxed{C}", "E", "", "Answer: A\nAnswer: C"]
PRES = ["P", "N", "**P**", "no error", "error present", "P.", "x", "None", ""]
TYPE = ["A", "B", "C", "D", "[D]", "d", "A\nAnswer: C", ""]
runs = [
    ("etc", [["A", "A", "M"], ["B", "B", "M"], ["C", "C", "M"], ["E", "A", "M"]]),  # the 75.0
    ("etc", [["A", "[A]", "M"], ["B", "The answer is B.", "M"]]),                     # nothing parses: 0.0
    ("etc", [["E", "A", "M"], ["E", "B", "M"]]),                                      # only no-error records
    ("etc", [["A", "A", "M"], ["B", "C", "M"], ["C", "x", "M"], ["D", "D", "P"], ["E", "D", "P"]]),
    ("epd", [["A", "P", "A", "M"], ["E", "N", "A", "M"], ["C", "x", "C", "M"]]),
    ("epd", [["A", "**P**", "A", "M"], ["B", "P", "[B]", "M"]]),                        # nothing parses: 0.0
    ("epd", [["E", "N", "", "M"], ["E", "P", "A", "M"], ["A", "no error", "A", "M"]]),
]
for _ in range(23):
    task = rng.choice(["etc", "epd"])
    samples = []
    for _ in range(rng.randint(1, 8)):
        label = rng.choice("ABCDE")
        dom = rng.choice("MP")
        if task == "etc":
            samples.append([label, rng.choice(ETC_REPLIES), dom])
        else:
            samples.append([label, rng.choice(PRES), rng.choice(TYPE), dom])
    runs.append((task, samples))
for i, (task, samples) in enumerate(runs, 1):
    rows.append({"id": f"run-{i:03d}", "kind": "report", "task": task, "samples": samples,
                 "official": run(task, samples), "source": SRC_ETC if task == "etc" else SRC_EPD})

with open(OUT, "w") as f:
    for r in rows:
        f.write(json.dumps(r, ensure_ascii=False) + "\n")
print(Counter((r["kind"], r.get("family", r.get("task"))) for r in rows))
