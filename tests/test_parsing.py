"""Unit and property tests for lmms_eval_plugins.parsing (pure, no I/O)."""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lmms_eval_plugins.parsing import (
    Parsed,
    clean_markup,
    extract_boxed,
    extract_tag,
    match_category,
    parse_interval,
    parse_intervals,
    parse_letter_set,
    parse_option_letter,
    parse_order,
    parse_step,
    parse_timestamp,
    strip_reasoning,
    tag_runs_to_end,
)

MMERROR_NAMES = {
    "A": "A_Visual_Perception_Error",
    "B": "B_Reasoning_Error",
    "C": "C_Question_Comprehension_Error",
    "D": "D_Knowledge_Deployment_Error",
}
ERRORRADAR_KEYWORDS = {
    "VIS": ["visual", "perception"],
    "CAL": ["calculation"],
    "REAS": ["reasoning"],
    "KNOW": ["knowledge"],
    "MIS": ["misinterpret", "misunderstand"],
}


# --------------------------------------------------------------------------------------------
# Parsed


def test_parsed_constructors():
    ok = Parsed.success("B")
    bad = Parsed.failure("no option letter found")
    assert ok.ok and ok.value == "B" and ok.error is None
    assert not bad.ok and bad.value is None and bad.error == "no option letter found"


def test_parsed_rejects_neither_or_both():
    with pytest.raises(ValueError):
        Parsed(value=None, error=None)
    with pytest.raises(ValueError):
        Parsed(value="B", error="x")


# --------------------------------------------------------------------------------------------
# strip_reasoning / clean_markup / extract_*


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>A is right</think>\nB", "B"),
        ("<THINK>\nline1\nline2\n</Think>  C  ", "C"),
        ("<thinking>x</thinking>D", "D"),
        ("pre <think>a</think> mid <think>b</think> post", "pre  mid  post"),
        # pre-filled template: only an orphan closing tag appears
        ("I reason that A... </think>\nB", "B"),
        ("r1 </think> r2 </think> final", "final"),
        # unclosed opening tag: the model never finished thinking
        ("B <think> maybe A", "B"),
        ("<think>only thoughts", ""),
        ("  plain answer \n", "plain answer"),
        ("", ""),
    ],
)
def test_strip_reasoning(text, expected):
    assert strip_reasoning(text) == expected


def test_clean_markup():
    assert clean_markup("**B**") == "B"
    assert clean_markup("`C`") == "C"
    assert clean_markup("$\\boxed{\\text{A}}$") == "A"
    assert clean_markup("\\fbox{D}") == "D"
    assert clean_markup("### Final Answer") == "Final Answer"
    assert clean_markup("<|begin_of_box|>B<|end_of_box|>") == "B"
    # a single underscore inside a label name is kept
    assert clean_markup("__B_Reasoning_Error__") == "B_Reasoning_Error"
    # unbalanced box left alone (no crash)
    assert clean_markup("\\boxed{B") == "\\boxed{B"


def test_extract_boxed():
    assert extract_boxed("so \\boxed{A} then \\boxed{ 42 }") == "42"
    assert extract_boxed("\\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert extract_boxed("\\boxed{x \\boxed{y}}") == "x \\boxed{y}"  # outer box is the last outermost
    assert extract_boxed("\\boxed{unbalanced") is None
    assert extract_boxed("no box") is None
    assert extract_boxed("The correct answer should be \\boxed{B}") == "B"


def test_extract_tag():
    out = "<error_graph>{'step2': ['step2']}</error_graph> <timestamps>[00:12-00:20]</timestamps>"
    assert extract_tag(out, "timestamps") == "[00:12-00:20]"
    assert extract_tag(out, "error_graph") == "{'step2': ['step2']}"
    assert extract_tag("<A>one</A> <a> two </a>", "a") == "two"  # last occurrence, any case
    # missing closing tag: runs to the end when last ...
    assert extract_tag("<rationale> because ... \\boxed{B}", "rationale") == "because ... \\boxed{B}"
    # ... or to the next tag otherwise
    assert extract_tag("<timestamps>[00:01-00:02] <rationale>r</rationale>", "timestamps") == "[00:01-00:02]"
    assert extract_tag("no tags", "answer") is None
    assert extract_tag(
        "<rationale>x <answer>The correct answer should be \\boxed{C}</answer></rationale>", "answer"
    ) == ("The correct answer should be \\boxed{C}")


def test_tag_runs_to_end_only_when_extract_tag_took_the_rest_of_the_reply():
    assert tag_runs_to_end("<timestamps>[00:01-00:0", "timestamps")  # cut off inside the tag
    assert tag_runs_to_end("<timestamps>a</timestamps> <TimeStamps> [1-2", "timestamps")  # the last one counts
    assert not tag_runs_to_end("<timestamps>[00:01-00:02]</timestamps>", "timestamps")  # closed
    assert not tag_runs_to_end("<timestamps>[00:01-00:02] <rationale>r", "timestamps")  # another tag follows
    assert not tag_runs_to_end("<timestamps>[00:01-00:02] </ rationale>", "timestamps")  # a closing one too
    assert not tag_runs_to_end("no tags", "timestamps")
    assert not tag_runs_to_end("<timestamps>x", "")


# --------------------------------------------------------------------------------------------
# parse_option_letter


@pytest.mark.parametrize(
    "text, expected",
    [
        # rule 1: bare, wrapped
        ("B", "B"),
        ("  B \n", "B"),
        ("**B**", "B"),
        ("(B)", "B"),
        ("[B]", "B"),
        ("B)", "B"),
        ("B.", "B"),
        ("\\boxed{B}", "B"),
        ("$\\boxed{C}$", "C"),
        ("b", "B"),  # lowercase only as the whole output
        ("(d).", "D"),
        # rule 2: Answer lines (last one wins)
        ("Reasoning here.\nAnswer: C", "C"),
        ("Answer: A\nWait, re-checking.\nFinal answer: D", "D"),
        ("**Final Answer:** (B)", "B"),
        ("Final Answer - C", "C"),
        # rule 3: last boxed letter
        ("The error is in the logic, so \\boxed{B}.", "B"),
        ("First \\boxed{A}, no wait: \\boxed{C} and \\boxed{42}", "C"),
        # rule 4: a unique bare-letter line (agreeing repeats are fine)
        ("The chain misreads the chart.\nA", "A"),
        ("A\nsome text\nA", "A"),
        ("### Final Answer\n**D**", "D"),
        # <think> content never counts
        ("<think>It is A. Answer: A</think>\nC", "C"),
        ("long reasoning that says A </think>\nAnswer: B", "B"),
        # rule 5: exact label names
        ("B_Reasoning_Error", "B"),
        ("**d_knowledge_deployment_error**.", "D"),
    ],
)
def test_parse_option_letter_accepts(text, expected):
    got = parse_option_letter(text, "ABCD", names=MMERROR_NAMES)
    assert got.ok, got.error
    assert got.value == expected


@pytest.mark.parametrize(
    "text, reason_part",
    [
        ("", "empty output"),
        ("   \n\t ", "empty output"),
        ("<think>B</think>", "empty output after removing reasoning"),
        ("I think the answer is B because A is wrong", "no option letter found"),
        ("The answer is B", "no option letter found"),
        ("Answer is B", "no option letter found"),  # only the 'Answer:' label form counts
        ("None of the above", "no option letter found"),
        ("A\nC", "ambiguous: several letters (A, C)"),
        ("Option A or option C?\nA\nC", "ambiguous"),
        ("E", "letter E not among A, B, C, D"),
        ("answer: b", "no option letter found"),  # lowercase outside rule 1
        ("B_Reasoning_Error because the logic fails", "no option letter found"),
        ("Reasoning Error", "no option letter found"),  # not the exact label name
        ("🤔 B 🤔", "no option letter found"),
        ("Answer: B. The logic is wrong", "no option letter found"),
    ],
)
def test_parse_option_letter_rejects(text, reason_part):
    got = parse_option_letter(text, "ABCD", names=MMERROR_NAMES)
    assert not got.ok
    assert reason_part in got.error


def test_parse_option_letter_custom_letters():
    # EPD stage 1 uses P/N
    assert parse_option_letter("N", "PN").value == "N"
    assert parse_option_letter("Answer: P", "PN").value == "P"
    assert not parse_option_letter("A", "PN").ok


def test_parse_option_letter_without_names_rejects_label_name():
    assert not parse_option_letter("B_Reasoning_Error").ok


# --------------------------------------------------------------------------------------------
# parse_letter_set


@pytest.mark.parametrize(
    "text, expected",
    [
        ("AC", {"A", "C"}),
        ("A, C", {"A", "C"}),
        ("A and C", {"A", "C"}),
        ("(A)(C)", {"A", "C"}),
        ("A C", {"A", "C"}),
        ("C, A", {"A", "C"}),
        ("B", {"B"}),
        ("**A, B, D**", {"A", "B", "D"}),
        ("Looking at all videos.\nAnswer: B and D", {"B", "D"}),
        ("So \\boxed{A, C}", {"A", "C"}),
        ("<think>A only</think>A, E", {"A", "E"}),
        ("A, A, C", {"A", "C"}),
    ],
)
def test_parse_letter_set_accepts(text, expected):
    got = parse_letter_set(text)
    assert got.ok, got.error
    assert got.value == frozenset(expected)


@pytest.mark.parametrize(
    "text",
    ["", "The answer is A and C", "Options A, C", "A, C, Z", "none", "a, c", "Answer: ", "A, C because B fails"],
)
def test_parse_letter_set_rejects(text):
    got = parse_letter_set(text)
    assert not got.ok and got.error


# --------------------------------------------------------------------------------------------
# parse_step


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Error Step: Step 3", 3),
        ("Error Step: step3", 3),
        ("error step: STEP 2", 2),
        ("Error Step: 4", 4),
        ("**Error Step**: Step 2", 2),
        ("Error Step:\nStep 5", 5),
        ("Step 1 is right but Step 2 is wrong.\nError Step: Step 2", 2),  # the label wins
        ("Error Step: Step 1\nOn reflection...\nError Step: Step 3", 3),  # last label
        ("The first mistake is in Step 3.", 3),
        ("Step 3 ... indeed Step 3", 3),
        ("3", 3),
        ("(2)", 2),
        ("Error Step: Step 03", 3),
        ("<think>Step 1? Step 2?</think>Error Step: Step 4", 4),
    ],
)
def test_parse_step_accepts(text, expected):
    got = parse_step(text, max_step=5)
    assert got.ok, got.error
    assert got.value == expected


@pytest.mark.parametrize(
    "text, reason_part",
    [
        ("", "empty output"),
        ("Error Step: Step three", "no step found"),
        ("The third step", "no step found"),
        ("Step 2 and Step 3 are both wrong", "ambiguous: several steps (2, 3)"),
        ("Error Step: Step 2 or Step 3", "ambiguous"),
        ("Error Step: Step 9", "step 9 out of range 1..5"),
        ("Error Step: Step 0", "out of range"),
        ("Step 3.5", "no step found"),
        ("Error Step: Step " + "9" * 5000, "too large"),
    ],
)
def test_parse_step_rejects(text, reason_part):
    got = parse_step(text, max_step=5)
    assert not got.ok
    assert reason_part in got.error


def test_parse_step_no_max_and_custom_label():
    assert parse_step("Error Step: Step 42").value == 42
    assert parse_step("First Wrong Step: 2", label="First Wrong Step").value == 2


# --------------------------------------------------------------------------------------------
# match_category


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Error Category: Visual Perception Error", "VIS"),  # two VIS keywords, one category
        ("Error Category: Calculation Error", "CAL"),
        ("Error Category: Misinterpretation of the Question", "MIS"),
        ("Error Category: knowledge error", "KNOW"),
        ("Error Category: REAS", "REAS"),  # code as a whole word
        ("CAL", "CAL"),
        ("**Error Category:** Reasoning Error", "REAS"),
        # only the last label's value is read, not the prose
        ("The calculation looks fine, it is a reasoning slip.\nError Category: Reasoning Error", "REAS"),
        ("Error Category:\nCalculation Error", "CAL"),
        ("Reasoning Error", "REAS"),  # no label -> whole output
    ],
)
def test_match_category_accepts(text, expected):
    got = match_category(text, ERRORRADAR_KEYWORDS, label="Error Category")
    assert got.ok, got.error
    assert got.value == expected


@pytest.mark.parametrize(
    "text, reason_part",
    [
        ("", "empty output"),
        ("Error Category: X", "no category keyword found"),
        ("Error Category: Calculation or Reasoning Error", "ambiguous: several categories (CAL, REAS)"),
        ("It's not a calculation error, it is a reasoning error", "ambiguous"),
        ("Error Category:", "empty value"),
        ("CALCULATOR", "no category"),  # neither a code as a whole word nor a keyword at a word start
    ],
)
def test_match_category_rejects(text, reason_part):
    got = match_category(text, ERRORRADAR_KEYWORDS, label="Error Category")
    assert not got.ok
    assert reason_part in got.error


def test_match_category_longer_phrase_of_other_category_wins():
    # "question" belongs to C, but inside the longer C-phrase... and "knowledge deployment" (D)
    # contains "deployment" that another category lists: the longer D phrase wins.
    kws = {"C": ["question"], "D": ["knowledge deployment"], "X": ["deployment"]}
    assert match_category("Knowledge Deployment Error", kws).value == "D"
    assert not match_category("deployment of the question", kws).ok  # X and C: ambiguous
    # identical keyword in two categories is ambiguous, never silently one of them
    assert not match_category("error", {"P": ["error"], "Q": ["error"]}).ok


def test_match_category_single_letter_codes_only_whole_output():
    kws = {"A": ["visual"], "B": ["reasoning"]}
    assert match_category("A reasoning error", kws).value == "B"  # article "A" is not a vote
    assert match_category("A", kws).value == "A"
    assert match_category("A_Visual_Perception_Error", kws).value == "A"


# --------------------------------------------------------------------------------------------
# timestamps and intervals


@pytest.mark.parametrize(
    "text, expected",
    [
        ("01:02", 62.0),  # 1*60 + 2
        ("1:00:05.5", 3605.5),  # 3600 + 0 + 5.5
        ("1:02.5", 62.5),
        ("12.5", 12.5),
        ("12.5s", 12.5),
        ("12 sec", 12.0),
        ("12 seconds", 12.0),
        ("[12s]", 12.0),
        (" 00:00 ", 0.0),
    ],
)
def test_parse_timestamp(text, expected):
    assert parse_timestamp(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "abc", "1:75", "1:2:3:4", "12 minutes", "1e400", "9" * 500])
def test_parse_timestamp_none(text):
    assert parse_timestamp(text) is None


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[12.5, 20]", (12.5, 20.0)),
        ("(12.5,20)", (12.5, 20.0)),
        ("12.5 - 20", (12.5, 20.0)),
        ("12.5s to 20s", (12.5, 20.0)),
        ("12.5 seconds - 20 seconds", (12.5, 20.0)),
        ("00:12-00:20", (12.0, 20.0)),
        ("[00:01:02-00:01:10]", (62.0, 70.0)),
        ("[20, 10]", (20.0, 10.0)),  # reversed stays reversed
        # several: last one in the text ...
        ("Video 1 shows it at 1-2, video 2 at [30, 40]", (30.0, 40.0)),
        # ... unless an Answer: label is present: first interval after it
        ("Answer: [30, 40]. (The reference was 5-8.)", (30.0, 40.0)),
        ("<think>[1, 2]</think>[3, 4]", (3.0, 4.0)),
    ],
)
def test_parse_interval_accepts(text, expected):
    got = parse_interval(text)
    assert got.ok, got.error
    assert got.value == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "no numbers", "at 12 seconds", "00:75-00:80"])
def test_parse_interval_rejects(text):
    assert not parse_interval(text).ok


def test_parse_intervals():
    assert parse_intervals("<timestamps>[00:12-00:20],[00:31-00:35]</timestamps>") == [(12.0, 20.0), (31.0, 35.0)]
    assert parse_intervals("[01:00:00-01:00:30]") == [(3600.0, 3630.0)]
    assert parse_intervals("[[12.0, 20.0], [31.0, 35.0]]") == [(12.0, 20.0), (31.0, 35.0)]
    assert parse_intervals("12-20, 31-35") == [(12.0, 20.0), (31.0, 35.0)]
    assert parse_intervals("nothing here") == []
    assert parse_intervals("") == []


# --------------------------------------------------------------------------------------------
# parse_order


@pytest.mark.parametrize(
    "text",
    [
        "4->1->3->2",
        "4 -> 1 -> 3 -> 2",
        "4→1→3→2",
        "4, 1, 3, 2",
        "4 > 1 > 3 > 2",
        "**4->1->3->2**",
        "Segment 4 -> Segment 1 -> Segment 3 -> Segment 2",
        # arrows preferred over a comma list in prose
        "The order is 4->1->3->2 since segments 1, 2 come later",
        "Answer: 4->1->3->2\nCheck: 1->2->3->4 would be chronological",
        "<think>1->2->3->4</think>4->1->3->2",
    ],
)
def test_parse_order_accepts(text):
    got = parse_order(text, 4)
    assert got.ok, got.error
    assert got.value == (4, 1, 3, 2)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("4->1->3->3", "repeats 3; missing 2"),
        ("4->1->3", "missing 2"),
        ("4->1->3->2->5", "unexpected 5"),
        ("no order", "no order found"),
        ("", "empty output"),
    ],
)
def test_parse_order_rejects(text, reason):
    got = parse_order(text, 4)
    assert not got.ok
    assert got.error == reason


def test_parse_order_without_n():
    assert parse_order("3->1").value == (3, 1)


# --------------------------------------------------------------------------------------------
# huge and adversarial outputs


HUGE = [
    "x" * 100_000,
    "B" * 100_000,
    "Step 1 " * 15_000,
    "<think>" * 15_000,
    "</think>" * 15_000 + "B",
    "\\boxed{" * 15_000,
    "{" * 50_000 + "}" * 50_000,
    "<" + " " * 100_000 + "x",
    "step" + " " * 100_000 + "x",
    "1" + " " * 100_000 + "x",
    "B" + " " * 100_000 + "#",
    "9" * 100_000,
    "1, " * 30_000,
    "1->" * 30_000,
    "Error Step:" * 10_000,
    "Answer:" * 10_000,
    "[00:01-00:02]," * 8_000,
    "🙂" * 50_000,
    "a\n" * 50_000 + "\nAnswer: C",
]

PARSED_FUNCS = [
    lambda t: parse_option_letter(t, names=MMERROR_NAMES),
    parse_letter_set,
    lambda t: parse_step(t, max_step=10),
    lambda t: match_category(t, ERRORRADAR_KEYWORDS, label="Error Category"),
    parse_interval,
    lambda t: parse_order(t, 4),
]
OTHER_FUNCS = [
    strip_reasoning,
    clean_markup,
    extract_boxed,
    lambda t: extract_tag(t, "timestamps"),
    parse_intervals,
    parse_timestamp,
]


def _check_parsed(p: Parsed) -> None:
    assert isinstance(p, Parsed)
    assert (p.value is None) != (p.error is None)
    if p.error is not None:
        assert isinstance(p.error, str) and p.error


@pytest.mark.parametrize("text", HUGE, ids=[f"huge{i}" for i in range(len(HUGE))])
def test_huge_outputs_are_fast_and_safe(text):
    start = time.perf_counter()
    for f in PARSED_FUNCS:
        _check_parsed(f(text))
    for f in OTHER_FUNCS:
        f(text)
    assert time.perf_counter() - start < 2.0


def test_huge_output_with_answer_at_end():
    text = "blah " * 20_000 + "\nAnswer: C"
    assert parse_option_letter(text).value == "C"


def test_non_str_inputs_do_not_raise():
    for bad in (None, 3, b"B", ["B"]):
        for f in PARSED_FUNCS:
            _check_parsed(f(bad))
        for f in OTHER_FUNCS:
            f(bad)
    assert parse_option_letter(b"B").value == "B"


# --------------------------------------------------------------------------------------------
# property tests

TOKENS = st.sampled_from(
    [
        "Step",
        "step",
        " ",
        "\n",
        "Answer:",
        "Final answer:",
        "Error Step:",
        "Error Category:",
        "A",
        "B",
        "C",
        "D",
        "E",
        "a",
        "1",
        "2",
        "3",
        "10",
        "0",
        ".",
        ",",
        ":",
        "->",
        "→",
        ">",
        "-",
        "[",
        "]",
        "(",
        ")",
        "{",
        "}",
        "<think>",
        "</think>",
        "<thinking>",
        "\\boxed{",
        "**",
        "`",
        "$",
        "_",
        "s",
        "sec",
        "to",
        "and",
        "calculation",
        "visual",
        "reasoning",
        "<timestamps>",
        "</timestamps>",
        "00:12",
        "1:02:03",
        "12.5",
        "🙂",
        "\u2028",
        "\x00",
        "Segment",
    ]
)
GRAMMAR_TEXT = st.lists(TOKENS, max_size=40).map("".join)
ANY_TEXT = st.one_of(st.text(), GRAMMAR_TEXT)


@settings(max_examples=300, deadline=None)
@given(ANY_TEXT)
def test_parsers_never_raise(text):
    for f in PARSED_FUNCS:
        _check_parsed(f(text))
    assert isinstance(strip_reasoning(text), str)
    assert isinstance(clean_markup(text), str)
    boxed = extract_boxed(text)
    assert boxed is None or isinstance(boxed, str)
    tag = extract_tag(text, "timestamps")
    assert tag is None or isinstance(tag, str)
    for a, b in parse_intervals(text):
        assert math.isfinite(a) and math.isfinite(b)
    ts = parse_timestamp(text)
    assert ts is None or (math.isfinite(ts) and ts >= 0)


@settings(max_examples=200, deadline=None)
@given(ANY_TEXT)
def test_parser_values_are_well_typed(text):
    letter = parse_option_letter(text)
    assert letter.value is None or letter.value in "ABCD"
    letters = parse_letter_set(text)
    assert letters.value is None or (letters.value and letters.value <= set("ABCDEFGH"))
    step = parse_step(text, max_step=10)
    assert step.value is None or 1 <= step.value <= 10
    order = parse_order(text, 4)
    assert order.value is None or sorted(order.value) == [1, 2, 3, 4]
    interval = parse_interval(text)
    assert interval.value is None or all(math.isfinite(x) for x in interval.value)


@given(st.text())
def test_strip_reasoning_without_tags_only_strips(text):
    if "<" not in text:
        assert strip_reasoning(text) == text.strip()


@given(
    st.sampled_from("ABCD"),
    st.sampled_from(["{}", "**{}**", "({})", "[{}]", "{})", "{}.", "\\boxed{{{}}}", "Answer: {}", "Final answer: {}"]),
    st.text(alphabet=" \n\t", max_size=3),
)
def test_parse_option_letter_roundtrip(letter, template, pad):
    assert parse_option_letter(pad + template.format(letter) + pad).value == letter


@given(st.permutations([1, 2, 3, 4, 5]), st.sampled_from(["->", " -> ", "→", ", ", " > "]))
def test_parse_order_roundtrip(perm, sep):
    assert parse_order(sep.join(map(str, perm)), 5).value == tuple(perm)


@given(
    st.integers(0, 7199),
    st.integers(0, 7199),
    st.sampled_from(["[{}, {}]", "{} - {}", "{}s to {}s", "({},{})"]),
    st.booleans(),
)
def test_parse_interval_roundtrip(a, b, template, clock):
    def fmt(x: int) -> str:
        return f"{x // 3600:02d}:{x // 60 % 60:02d}:{x % 60:02d}" if clock else str(x)

    if clock and "s" in template:
        template = "[{}-{}]"
    assert parse_interval(template.format(fmt(a), fmt(b))).value == (float(a), float(b))


@given(st.integers(1, 30), st.sampled_from(["Error Step: Step {}", "Error Step: step{}", "Error Step: {}", "Step {}"]))
def test_parse_step_roundtrip(n, template):
    assert parse_step(template.format(n), max_step=30).value == n


# --------------------------------------------------------------------------------------------
# parse_option_letter(prose=True): the answers real models write (issue 17)

EIGHT = "ABCDEFGH"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The answer is B.", "B"),
        ("Option B", "B"),
        ("B. because the water boils", "B"),
        ("B because the water boils", "B"),
        ("The correct answer is (C) since the pot boils over", "C"),
        ("Ｂ", "B"),  # full-width letter
        ("（Ｄ）", "D"),
        ("答案：Ｃ", "C"),
        ("$\\text{B}$", "B"),
        ("The answer is $\\boxed{\\text{F}}$.", "F"),
        ("<answer>G</answer>", "G"),
        ("A man is cooking, so the answer is C", "C"),  # the article "A" is not option A
        ("A. A man walks away", "A"),  # "A." is a label
        ("The best choice is A, as the man leaves", "A"),
        ("I think the answer is B because A is wrong", "B"),  # rejected without prose (rules above)
        ("Answer: B. The logic is wrong", "B"),  # likewise
        ("I would choose option H.", "H"),
        ("B is the correct answer.", "B"),
        ("It shows him tasting the sauce. Therefore, F.", "F"),
        ("**B. The man pours the pasta.**\n\nOption A is less likely.", "B"),  # a statement level beats a mention
        ("The answer is B. The man pours the pasta because", "B"),  # cut off after the letter
        ("The answer is B/B", "B"),  # the same letter twice is no hedge
    ],
)
def test_parse_option_letter_prose_accepts(text, expected):
    got = parse_option_letter(text, EIGHT, prose=True)
    assert got.ok, got.error
    assert got.value == expected


@pytest.mark.parametrize(
    "text, reason_part",
    [
        ("The answer is B or D.", "ambiguous: several letters (B, D)"),
        ("The answer is B, C", "ambiguous: several letters (B, C)"),
        ("The answer is A. Wait, no, the answer is C.", "ambiguous: several letters (A, C)"),
        ("Option A or option C?", "ambiguous: several letters (A, C)"),
        ("A. The man turns off the stove.\nB. The man pours the pasta.", "ambiguous: several letters (A, B)"),
        ("The answer is A man walking away", "no option letter found"),  # "A man": the article
        ("A woman enters the kitchen.", "no option letter found"),
        ("Based on the video, nothing fits.", "no option letter found"),  # "B" inside a word
        ("The answer is", "no option letter found"),  # cut off before the letter
        ("<think>The answer is B", "empty output after removing reasoning"),  # cut off while thinking
        ("The answer is Z.", "no option letter found"),  # not an option
        ("answer: b", "no option letter found"),  # lowercase only as the whole output
    ],
)
def test_parse_option_letter_prose_rejects(text, reason_part):
    got = parse_option_letter(text, EIGHT, prose=True)
    assert not got.ok
    assert reason_part in got.error


def test_prose_mode_keeps_the_earlier_rules_first():
    # an Answer: line and a box decide before prose does; the default mode is unchanged
    assert parse_option_letter("The answer is A.\nAnswer: C", EIGHT, prose=True).value == "C"
    assert parse_option_letter("The answer is A, so \\boxed{D}", EIGHT, prose=True).value == "D"
    assert parse_option_letter("A\nC", EIGHT, prose=True).error == "ambiguous: several letters (A, C)"
    assert not parse_option_letter("The answer is B.", EIGHT).ok
    assert not parse_option_letter("Ｂ", EIGHT).ok


# --------------------------------------------------------------------------------------------
# interval forms (issue 17)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[12s]-[20s]", (12.0, 20.0)),
        ("[00:12]-[00:20]", (12.0, 20.0)),
        ("[00:12] to [00:20]", (12.0, 20.0)),
        ("12-20s", (12.0, 20.0)),
        ("0:12–0:20", (12.0, 20.0)),
        ("from 12 s to 20 s", (12.0, 20.0)),
        ("between 12 and 20 seconds", (12.0, 20.0)),
        ("00:12 until 00:20", (12.0, 20.0)),
    ],
)
def test_parse_interval_model_forms(text, expected):
    assert parse_interval(text).value == pytest.approx(expected)


def test_bracketed_ends_need_a_dash_not_a_comma():
    # "[12s], [20s]" lists two moments; a comma pairs ends only inside one bracket ("[12, 20]")
    assert not parse_interval("[12s], [20s]").ok
    assert parse_intervals("[00:12]-[00:20],[00:31]-[00:35]") == [(12.0, 20.0), (31.0, 35.0)]


def test_parse_intervals_clock_first():
    text = "[00:12-00:20] (the ball bounces 2-3 times)"
    assert parse_intervals(text) == [(12.0, 20.0), (2.0, 3.0)]
    assert parse_intervals(text, clock_first=True) == [(12.0, 20.0)]
    assert parse_intervals("2-3 and 5-8", clock_first=True) == [(2.0, 3.0), (5.0, 8.0)]  # no clock times: all


# --------------------------------------------------------------------------------------------
# ErrorRadar forms (issue 17)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("**Error Step:** 3", 3),
        ("the first error is in step 3", 3),
        ("\\boxed{3}", 3),
        ("The first incorrect step is \\boxed{3}.", 3),  # a box holding only a step
        ("Error Step: \\boxed{Step 3}", 3),
        ("Error Step：Step 3", 3),  # full-width colon
        ("First \\boxed{2}, then on reflection \\boxed{Step 4}", 4),  # the last box
    ],
)
def test_parse_step_model_forms(text, expected):
    assert parse_step(text, label="Error Step", max_step=8).value == expected


def test_parse_step_box_must_hold_only_a_step():
    assert not parse_step("The area is \\boxed{12 cm}", label="Error Step", max_step=8).ok
    assert parse_step("\\boxed{9}", label="Error Step", max_step=8).error == "step 9 out of range 1..8"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Error Category: CALCULATION ERROR", "CAL"),
        ("**Error Category: Visual Perception Error**", "VIS"),
        ("Error Category: **Reasoning Error**\n\nThe student assumed congruence.", "REAS"),
        ("### Error Category\nKnowledge Error", "KNOW"),
        ("Error Category: $\\boxed{\\text{Calculation Error}}$", "CAL"),
        ("Error Category: Knowledge Error\n\nIt is not a calculation error.", "KNOW"),  # the label's line only
    ],
)
def test_match_category_model_forms(text, expected):
    assert match_category(text, ERRORRADAR_KEYWORDS, label="Error Category").value == expected


# --------------------------------------------------------------------------------------------
# the new rules stay linear (tests/test_hostile_text.py times parse_option_letter without prose)

PROSE_SHAPES = {
    "answer_is": lambda n: "the answer is " * (n // 14),
    "hedges": lambda n: "The answer is B or " * (n // 19),
    "option_runs": lambda n: "Option " * (n // 7),
    "letter_lines": lambda n: "A. \n" * (n // 4),
    "so_comma": lambda n: "so, " * (n // 4),
    "answer_tags": lambda n: "<answer>" * (n // 8),
    "fullwidth": lambda n: "Ｂ（" * (n // 2),
    "spaces_after_answer": lambda n: "The answer is" + " " * n + "x",
    "bracket_dash_spaces": lambda n: "12] - " + " " * n + "x",
    "between_spaces": lambda n: "between 12" + " " * n + "x",
    "boxed_steps": lambda n: "\\boxed{Step 3} " * (n // 15),
}


@pytest.mark.parametrize("shape", list(PROSE_SHAPES))
def test_prose_rules_are_linear(shape):
    funcs = [lambda t: parse_option_letter(t, EIGHT, prose=True), parse_interval, parse_step]
    for f in funcs:
        small, big = PROSE_SHAPES[shape](1_000), PROSE_SHAPES[shape](200_000)
        t_small = min(_timed(f, small) for _ in range(3))
        t_big = min(_timed(f, big) for _ in range(2))  # the faster of two: a busy machine slows one
        # linear: about 200 x; quadratic: about 40,000 x
        assert t_big < 1500 * t_small + 0.1, (shape, f, t_small, t_big)


def _timed(f, text):
    start = time.perf_counter()
    f(text)
    return time.perf_counter() - start


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The answer is AC.", {"A", "C"}),
        ("ＡＣ", {"A", "C"}),  # full-width letters
        ("The correct answers are A and C", {"A", "C"}),
        ("Reasoning first.\nI choose B, D", {"B", "D"}),
        ("I think the answer is A, but C also", None),  # prose after the letters: not a list
        ("The answer is A. Because the man ...", None),
        ("The answer is AX.", None),  # X is no option
    ],
)
def test_letter_set_prose_reads_stated_answers(text, expected):
    got = parse_letter_set(text, "ABCD", prose=True)
    assert (set(got.value) if got.ok else None) == expected
    assert not parse_letter_set(text, "ABCD").ok  # the default stays strict on every one of them
