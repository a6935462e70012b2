"""Writes crossvid_official.jsonl: the official CrossVid scorers run on replies (issue 30).

Usage (the official code stays outside this repository; nothing of it is copied):
    git clone https://github.com/chuntianli666/CrossVid OFFICIAL   # commit 5b44760
    python tests/data/parity/make_crossvid_official.py OFFICIAL tests/data/answer_corpus/crossvid.jsonl \
        tests/data/parity/crossvid_official.jsonl
Each reply goes through the official scoring code itself: the nested ``update`` of ``main()`` in
``eval/<TASK>.py`` (and ``interval_iou`` of ``eval/FSA.py``), read from the official files and run
unmodified, with ``eval/utils/extract.py``. The replies are the answer corpus plus the cases below.
Deterministic. Needs nothing beyond the standard library.
"""

import ast
import json
import math
import sys
import tempfile
import textwrap
from pathlib import Path

OFFICIAL, CORPUS, OUT = Path(sys.argv[1]) / "eval", sys.argv[2], sys.argv[3]
sys.path.insert(0, str(OFFICIAL))
from utils.extract import extract  # noqa: E402  (the official module)


class _Bar:  # the tqdm bar update() reports to
    def set_description(self, *a, **k):
        pass

    def update(self, *a, **k):
        pass


def run_official(script: str, xs):
    """The results list the official ``update`` builds from (pair, answer) pairs."""
    src = (OFFICIAL / f"{script}.py").read_text(encoding="utf-8")
    tree = ast.parse(src)
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    update = next(n for n in main.body if isinstance(n, ast.FunctionDef) and n.name == "update")
    ns = {"json": json, "extract": extract, "pbar": _Bar(), "model": "m",
          "save_path": str(Path(tempfile.gettempdir()) / "crossvid_official_save.json")}
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name == "interval_iou":
            exec(ast.get_source_segment(src, n), ns)
    code = ("def make(results):\n    num_suc = 0\n    num_fail = 0\n"
            + textwrap.indent(textwrap.dedent(ast.get_source_segment(src, update)), "    ") + "\n    return update\n")
    exec(code, ns)
    results = []
    step = ns["make"](results)
    for x in xs:
        step(x)
    return results


GOLD = {"NC": "C", "CC": "B", "PEA": "B", "PI": "B", "MSR": "B", "MOC": "C", "BU": ["A", "C"], "PSS": "2->4->1->3", "FSA": [2.0, 4.5]}
OPT = {"NC": "Video 3", "CC": "Video 2", "PEA": "Video 2", "PI": "The hero buys a ticket and boards the train.", "MSR": "obj_3", "MOC": "3"}
SCRIPT = {t: t for t in GOLD} | {"CCQA": "score_CCQA"}
rows = []

def add(task, reply, note, style="synthetic"):
    rows.append({"task": task, "model_style": style, "reply": reply, "note": note})

for line in open(CORPUS, encoding="utf-8"):
    d = json.loads(line)
    add(d["task"], d["reply"], d["note"], d["model_style"])

THINK = "<think>The third video shows it.</think>"
for task in ("NC", "CC", "PEA", "PI", "MSR", "MOC"):
    g = GOLD[task]; other = "A" if g != "A" else "D"
    for reply, note in [
        (g, "the asked-for bare letter"), (other, "another letter"), (f" {g}", "leading space (lmms-eval strips it)"),
        (f"{g}\n", "trailing newline (lmms-eval strips it)"), (f"\n{g} ", "newline and space around"), (f"\t{g}", "leading tab"),
        (f"{g}.", "letter and full stop"), (f"({g})", "letter in parentheses"), (f"**{g}**", "bold letter"),
        (f"Answer: {g}", "Answer: prefix"), (f"The answer is {g}.", "prose"), (f"{g}. {OPT[task]}", "letter and option text"),
        (g.lower(), "lowercase letter"), (chr(ord(g) + 0xFEE0), "full-width letter"), (THINK + g, "<think> then the letter"),
        (THINK + "\n" + g, "<think>, newline, letter"), (f"\\boxed{{{g}}}", "boxed letter"), (json.dumps({"answer": g}), "JSON object"),
        ("", "empty reply"), ("I cannot tell from the videos.", "refusal"), (f"{g}\n\nExplanation: the third video.", "letter then explanation"),
        (f"Option {g}", "Option X"), (f"{g})", "letter and parenthesis"), (f"{g}{g}", "letter twice"), (f"{g}\u200b", "letter and zero-width space"),
        (f"\u00a0{g}", "no-break space before the letter"), (f"{g} ", "trailing space"), ("<think>unfinished", "cut-off reasoning"),
        (f"{other}\n", "wrong letter with newline"), (f"[{g}]", "letter in brackets"),
    ]:
        add(task, reply, note)

for reply, note in [
    ("AC", "the asked-for letters"), ("CA", "letters out of order (official: exact string)"), ("A,C", "comma"), ("A, C", "comma and space"),
    (" AC", "leading space"), ("AC\n", "trailing newline"), ("ABC", "superset"), ("A", "subset"), ("C", "other subset"),
    ("Answer: AC", "Answer: prefix"), (THINK + "AC", "<think> then letters"), ("ac", "lowercase"), ("A and C", "prose"),
    ("A C", "space between"), ("AC.", "full stop"), ("\\boxed{AC}", "boxed"), ("", "empty"), ("BD", "wrong set"),
    ("ＡＣ", "full-width letters"), ("AC ", "trailing space"), ("\nAC\n", "newlines around"), ("A\nC", "newline between"),
    ("['A', 'C']", "Python list"), ('["A", "C"]', "JSON list"), ("AAC", "repeated letter"), ("A;C", "semicolon"),
    ("The answers are A and C.", "sentence"), ("ACD", "superset with D"), ("D", "none of the videos"), ("\tAC", "tab"),
    ("AC\r\n", "CRLF"), ("**AC**", "bold"), ("(A)(C)", "parentheses"), ("A/C", "slash"), ("AC" + "\u200b", "zero-width space"),
    ("<think>A or C?</think>\nAC", "think, newline"), ("<think>", "only an opening think tag"), ("A, B, C", "three letters"),
    ("CA\n", "reversed with newline"), ("Options A and C", "Options prose"),
]:
    add("BU", reply, note)

for reply, note in [
    ("2->4->1->3", "the asked-for order"), ("2 -> 4 -> 1 -> 3", "spaces around arrows"), ("2->4->1->3\n", "trailing newline"),
    (" 2->4->1->3", "leading space"), ("2,4,1,3", "commas"), ("2, 4, 1, 3", "commas and spaces"), ("2→4→1→3", "unicode arrows"),
    ("1->2->3->4", "identity order"), ("2->4->3->1", "wrong order"), ("2->4->1", "too short"), ("2->4->1->3->5", "too long"),
    ("Segment 2 -> Segment 4 -> Segment 1 -> Segment 3", "segment names"), (THINK + "2->4->1->3", "think then order"),
    ("The order is 2->4->1->3.", "prose"), ("2 4 1 3", "spaces"), ("2->4->1->3.", "full stop"), ("", "empty"),
    ("[2, 4, 1, 3]", "list"), ("2-4-1-3", "hyphens"), ("2=>4=>1=>3", "fat arrows"), ("2->2->1->3", "repeat"),
    ("２->４->１->３", "full-width digits"), ("2->4->1->3 ", "trailing space"), ("\n2->4->1->3", "leading newline"),
    ("2 ->4-> 1->3", "uneven spaces"), ("**2->4->1->3**", "bold"), ("2->4->1->3\n\nBecause ...", "explanation after"),
    ("Answer: 2->4->1->3", "Answer: prefix"), ("2>4>1>3", "greater-than signs"), ("2 → 4 → 1 → 3", "unicode arrows and spaces"),
    ("\t2->4->1->3", "tab"), ("2->4->1->3\r\n", "CRLF"), ("4->2->1->3", "swap"), ("2->4->1->3" + "\u200b", "zero-width space"),
    ("<think>order?</think>\n2->4->1->3", "think, newline"), ("3->1->4->2", "reversed"), ("S2->S4->S1->S3", "S names"),
    ("(2)->(4)->(1)->(3)", "parentheses"), ("2 -> 4 -> 1 -> 3\n", "spaces and newline"), ("I don't know.", "refusal"),
]:
    add("PSS", reply, note)

for reply, note in [
    ("2,4.5", "the asked-for pair"), ("2.0, 4.5", "pair with space"), (" 2 , 4.5 ", "spaces around (float() strips them)"),
    ("2,4.5\n", "trailing newline"), ("nan,3", "nan start (float reads it)"), ("2, nan", "nan end"), ("nan, nan", "both nan"),
    ("NaN,4", "NaN spelled so"), ("-nan,4", "negative nan"), ("inf,5", "infinite start"), ("-inf, inf", "infinite both"),
    ("2, inf", "infinite end"), ("infinity,3", "infinity spelled out"), ("4.5,2", "reversed"), ("2,4.5,6", "three numbers"),
    ("[2, 4.5]", "brackets (float fails)"), ("2-4.5", "hyphen (no comma)"), ("1e0,4.5", "exponent"), ("2_0,45", "underscore digits"),
    ("０.５,3", "full-width digits (float reads them)"), ("0,0", "empty interval at 0"), ("2,2", "empty interval inside"),
    ("3,4", "inside gold"), ("0,10", "covers gold"), ("5,6", "disjoint after"), ("0,1", "disjoint before"), ("4.5,5", "touching"),
    ("", "empty"), ("2s, 4.5s", "units (float fails)"), ("From 2 to 4.5 seconds", "prose"), (THINK + "2,4.5", "think then pair"),
    ("2;4.5", "semicolon"), ("2,", "missing end"), (",4.5", "missing start"), ("2.,4.5", "trailing dot"), ("+2,+4.5", "plus signs"),
    ("0x2,4", "hex (float fails)"), ("1e400,2", "overflowing exponent (inf)"), ("-1,3", "negative start"), ("2.25,4.25", "shifted"),
    ("2,4.5 ", "trailing space"), ("\t2,4.5", "tab"), ("2 ,4.5", "space before comma"), ("2.0,4.50", "trailing zero"),
    ("1.5,3.5", "partial overlap"), ("00:02,00:04", "clock times (float fails)"), ("2,4.5\r\n", "CRLF"), ("nan,inf", "nan and inf"),
    ("3, nan", "nan end after a number"), ("[00:02]-[00:04]", "bracket times"),
]:
    add("FSA", reply, note)

def block(obj):
    return f"<score>{obj}</score>"
ccqa = [
    ('{"coverage": [true, false], "correctness": [true, false]}', "the asked-for booleans"),
    ('{"coverage": [true, true], "correctness": [true, true]}', "full marks"),
    ('{"coverage": [false, false], "correctness": [false, false]}', "no marks"),
    ('{"coverage": [1.0, 0.0], "correctness": [1.0, 0.0]}', "numeric list of floats: 2/4"),
    ('{"coverage": [2, 0], "correctness": [1, 0]}', "a 2 in coverage: 3/4"),
    ('{"coverage": [1, 0], "correctness": [1, 0]}', "integers 0/1"),
    ('{"coverage": [true, true, true], "correctness": [true, false, false]}', "booleans of the wrong length (3 for 2 points)"),
    ('{"coverage": [true], "correctness": [true]}', "one entry for 2 points"),
    ('{"coverage": [true, true], "correctness": [true]}', "lists of different lengths (official: assert fails after storing)"),
    ('{"coverage": [true], "correctness": [true, true, true]}', "correctness longer than coverage"),
    ('{"coverage": [0.5, 1], "correctness": [1, 0]}', "a half point: 2.5/4"),
    ('{"coverage": [true, -1], "correctness": [1, 0]}', "a negative entry: 1/4"),
    ('{"coverage": [], "correctness": []}', "empty lists: 0/0"),
    ('{"coverage": [NaN, 1], "correctness": [1, 0]}', "NaN (json.loads reads it)"),
    ('{"coverage": [Infinity, 0], "correctness": [0, 0]}', "Infinity"),
    ('{"coverage": [Infinity, 0], "correctness": [-Infinity, 0]}', "opposite infinities: NaN"),
    ('{"coverage": [null, 1], "correctness": [1, 0]}', "null entry (sum fails)"),
    ('{"coverage": ["true", "false"], "correctness": ["true", "false"]}', "strings (sum fails)"),
    ('{"coverage": "true,false", "correctness": "true,false"}', "string lists (sum fails)"),
    ('{"coverage": [[1], [0]], "correctness": [[1], [0]]}', "nested lists (sum fails)"),
    ('{"coverage": {"1": true}, "correctness": {"1": true}}', "objects (+ fails)"),
    ('{"coverage": 1, "correctness": 1}', "numbers (sum fails)"),
    ('{"coverage": [true, false]}', "missing correctness"),
    ('{"correctness": [true, false]}', "missing coverage"),
    ('[true, false]', "a list, not an object"),
    ('{"coverage": [true, false], "correctness": [true, false], "notes": "x"}', "extra key"),
    ('{"coverage": [false, false], "coverage": [true, true], "correctness": [true, true]}', "repeated key (last wins)"),
    ("{'coverage': [true, false], 'correctness': [true, false]}", "single quotes (not JSON)"),
    ('{"coverage": [true, false], "correctness": [true, false],}', "trailing comma"),
    ('{"coverage": [True, False], "correctness": [True, False]}', "Python literals"),
    ('```json\n{"coverage": [true, false], "correctness": [true, false]}\n```', "code fence inside the block"),
    ('', "empty block"),
    ('{"coverage": [1e0, 0e0], "correctness": [1E0, 0]}', "exponent numbers"),
    ('{"coverage": [100, 0], "correctness": [0, 0]}', "a large entry: 100/4"),
    ('{"coverage": [0.1, 0.2], "correctness": [0.3, 0.4]}', "fractions"),
    ('{"coverage": [true, false, true, false, true], "correctness": [true, false, false, false, false]}', "five entries"),
    ('  {"coverage": [true, true], "correctness": [false, false]}  ', "spaces inside the tags"),
    ('\n{"coverage": [true, true],\n "correctness": [false, true]}\n', "newlines inside the tags"),
    ('{"coverage": [true, false], "correctness": [true, false]} trailing', "text after the JSON (not JSON)"),
    ('{"coverage": [1' + "0" * 400 + ', 0], "correctness": [0.5, 0]}', "int too large to add to a float (OverflowError)"),
]
for body, note in ccqa:
    add("CCQA", block(body), note)
for reply, note in [
    ("no tags at all", "no <score> block"),
    ('<SCORE>{"coverage": [true, false], "correctness": [true, false]}</SCORE>', "uppercase tags (official regex is case-sensitive)"),
    ('<score>{"coverage": [true, false], "correctness": [true, false]}</score><score>{"coverage": [true, true], "correctness": [true, true]}</score>', "two blocks: the first counts"),
    ('<score>{"coverage": [true, true], "correctness": [true, true]}</score> then <score>{"coverage": [false, false], "correctness": [false, false]}</score>', "two blocks, full marks first"),
    ('<think>maybe <score>{"coverage": [true, true], "correctness": [true, true]}</score></think><score>{"coverage": [false, false], "correctness": [false, false]}</score>', "a block inside <think> comes first"),
    ('<think>reasoning</think>\n<score>{"coverage": [true, false], "correctness": [false, false]}</score>', "think then block"),
    ('Here is my scoring.\n<score>\n{"coverage": [true, true], "correctness": [true, false]}\n</score>\nDone.', "prose around the block"),
    ('<score>{"coverage": [true, false], "correctness": [true, false]}', "unclosed block"),
    ('</score>{"coverage": [true, false], "correctness": [true, false]}<score>', "tags in the wrong order"),
    ('< score>{"coverage": [true, false], "correctness": [true, false]}</score>', "space in the opening tag"),
    ('<score>{"coverage": [true, false], "correctness": [true, false]}</ score>', "space in the closing tag"),
    ('<score><score>{"coverage": [true, false], "correctness": [true, false]}</score>', "two opening tags"),
    ('<score>{"coverage": [true, false], "correctness": [true, false]}</score></score>', "two closing tags"),
    ('<score>{"coverage": [true, true], "correctness": [true, true]}</score>\n\nCorrection: <score>{"coverage": [false], "correctness": [false]}</score>', "a correction after"),
    ('<score>{"coverage": [NaN], "correctness": [NaN]}</score><score>{"coverage": [true], "correctness": [true]}</score>', "NaN block first"),
    ('<score>null</score>', "null"),
    ('<score>"coverage"</score>', "a string"),
    ('<score>{"coverage": [true, false], "correctness": [true, false]}</score>' * 3, "three identical blocks"),
    ('<score>{"coverage":[true,false],"correctness":[false,true]}</score>', "no spaces, a correct-but-uncovered point"),
    ('<score>{"coverage": [false, false], "correctness": [true, true]}</score>', "correct but uncovered points (counted as given)"),
]:
    add("CCQA", reply, note)

# the official results, by running the official code
def pair(task, i):
    p = {"id": i, "answer": GOLD.get(task)}
    return p | ({"response": "model reply"} if task == "CCQA" else {})

def jsonable(v):
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    return v

out = []
counts = {}
for i, r in enumerate(rows):
    res = run_official(SCRIPT[r["task"]], [(pair(r["task"], i), r["reply"])])
    if r["task"] == "CCQA":
        off = {"sum": jsonable(res[0]["score"]) if isinstance(res[0]["score"], float) else res[0]["score"],
               "points": len(res[0]["coverage"])} if res else None
        src = "eval/score_CCQA.py main().update (extract(response, 'score'), json.loads, sum(coverage + correctness), 2 * len(coverage))"
    elif r["task"] == "FSA":
        off = jsonable(res[0]["iou"])
        src = "eval/FSA.py main().update (answer.split(','), float, interval_iou)"
    elif r["task"] == "BU":
        off = res[0]["correct"]
        src = "eval/BU.py main().update (answer == ''.join(input_pair['answer']))"
    else:
        off = res[0]["correct"]
        src = f"eval/{r['task']}.py main().update (answer == input_pair['answer'])"
    counts[r["task"]] = counts.get(r["task"], 0) + 1
    out.append({"id": f"cvp-{i:03d}", "task": r["task"], "model_style": r["model_style"], "reply": r["reply"],
                "gold": GOLD.get(r["task"]), "official": off, "official_source": src, "note": r["note"]})
with open(OUT, "w", encoding="utf-8") as f:
    for o in out:
        f.write(json.dumps(o, ensure_ascii=False) + "\n")
print(len(out), counts)
