"""Issue 36's stored-run cases that are not about files, HTTP, redaction or batches: a doc_id that is no id,
an integer no float holds, and what `score` records of its strict option. Through the real CLI where a user
meets them (`compare`, `report`), by hand for the pure parts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lmms_eval_plugins import score
from lmms_eval_plugins.data import JsonLimitError, parse_json
from lmms_eval_plugins.logged_samples import UnusableDocError, read_samples

RUNS = Path(__file__).parent / "data" / "report_runs"
STEP = "20261122_143442_samples_errorradar_step_sample.jsonl"


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lmms_eval_plugins.cli", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("doc_id", [[0], {"id": 0}, True, 1.5])
def test_compare_names_a_doc_id_that_is_no_id_instead_of_crashing(tmp_path, doc_id):
    run = tmp_path / "oracle"
    shutil.copytree(RUNS / "oracle", run)
    samples = run / STEP
    lines = samples.read_text(encoding="utf-8").splitlines(keepends=True)
    first = json.loads(lines[0])
    first["doc_id"] = doc_id
    samples.write_text(json.dumps(first) + "\n" + "".join(lines[1:]), encoding="utf-8")
    done = _cli(tmp_path, "compare", str(run), str(RUNS / "random"))
    assert "Traceback" not in done.stderr + done.stdout, done.stderr[-3000:]
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"{samples}: line 1: doc_id is a JSON {type(doc_id).__name__}" in done.stderr, done.stderr[-2000:]


def test_the_samples_reader_takes_numbers_and_strings_and_refuses_other_ids(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"doc_id": 0}\n{"doc_id": "a"}\n{"doc_id": null}\n', encoding="utf-8")
    assert [r["doc_id"] for r in read_samples(path)] == [0, "a", None]
    path.write_text('{"doc_id": 0}\n{"doc_id": [1]}\n', encoding="utf-8")
    with pytest.raises(UnusableDocError, match="line 2: doc_id is a JSON list"):
        read_samples(path)


def test_integers_no_float_holds_are_refused_by_the_bounded_parser():
    assert parse_json('{"a": -12, "b": ' + "9" * 308 + "}")["a"] == -12  # 308 digits: still a float's range
    for text, problem in (
        ("1" * 309, "more than 308 digits"),
        ("-" + "9" * 400, "more than 308 digits"),
        ("[" + "1" * 5000 + "]", "more than 4300 digits"),
    ):
        with pytest.raises(JsonLimitError, match=problem):
            parse_json(text)


@pytest.mark.parametrize(
    "options, env, recorded",
    [
        ({"strict": True}, {}, True),  # what the replay did wins
        ({"strict": False}, {"LMMS_EVAL_PLUGINS_STRICT": "yes"}, False),
        (None, {"LMMS_EVAL_PLUGINS_STRICT": "yes"}, True),  # the run's own rule: yes is on (it was recorded false)
        (None, {"LMMS_EVAL_PLUGINS_STRICT": "TRUE"}, True),
        (None, {"LMMS_EVAL_PLUGINS_STRICT": "0"}, False),
    ],
)
def test_score_records_the_strict_option_that_was_applied(tmp_path, options, env, recorded):
    new = {"config": {}} if options is None else {"config": {}, "lmms_eval_plugins_options": options}
    score.mark_rescored(new, {"config": {"model": "oracle"}}, tmp_path / "r_results.json", env)
    assert new[score.SCORE_KEY]["strict"] is recorded


def test_a_run_folder_whose_path_holds_a_comma_is_scored(tmp_path):
    run = tmp_path / "runs,2026" / "oracle"
    shutil.copytree(RUNS / "oracle", run)
    done = _cli(tmp_path, "score", str(run), "--tasks", "errorradar_step_sample")
    said = done.stdout + done.stderr
    assert "Traceback" not in said, said[-3000:]
    assert done.returncode == 0 and "every sample scored" in said, said[-3000:]
    rescored = [p for p in run.glob("*_results.json") if "lmms_eval_plugins_score" in p.read_text(encoding="utf-8")]
    assert len(rescored) == 1


def test_recipe_tasks_count_their_judge_errors_as_unscored(tmp_path):
    results = {
        "results": {
            "mine": {"alias": "mine", "score,none": None, "judge_errors,none": 3},
            "ours": {"acc_r_judge_errors,none": 2, "unscored,none": 0},
            "fine": {"score,none": 0.5, "judge_errors,none": 0},
        }
    }
    # ours has the `unscored` count, which already holds its judge errors (here a judge outage left none unscored)
    assert score.unscored_counts(results, ["mine", "ours", "fine"]) == {"mine": 3}


def test_ids_with_controls_are_refused_and_nfc_nfd_spellings_are_one_id(tmp_path):
    from lmms_eval_plugins.data import DataError, id_text_problem, require_unique

    assert id_text_problem("MMErroR_00001") is None and id_text_problem("caf\u00e9") is None
    assert id_text_problem("a\x00b") == "holds the control character U+0000"
    assert id_text_problem("a\u202eb") == "holds the bidi control U+202E"
    assert id_text_problem("\u0301a") == "starts with the combining mark U+0301"
    records = [{"question_id": "caf\u00e9"}, {"question_id": "cafe\u0301"}]  # NFC and NFD spellings of one id
    with pytest.raises(DataError, match="is used twice"):
        require_unique(records, "question_id", path=tmp_path / "d.json", where=lambda i: f"record {i + 1}")
    with pytest.raises(DataError, match="bidi control U\\+202E"):
        require_unique([{"question_id": "x\u202ey"}], "question_id", path=tmp_path / "d.json", where=str)


def _grow(run: Path, samples_name: str, megabytes: float) -> int:
    """The run's samples file grown to about ``megabytes`` by repeating its lines under new doc_ids."""
    path = run / samples_name
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    count = size = 0
    with path.open("w", encoding="utf-8") as out:
        while size < megabytes * 1e6:
            record = {**lines[count % len(lines)], "doc_id": count}
            text = json.dumps(record, ensure_ascii=False) + "\n"
            out.write(text)
            size, count = size + len(text.encode()), count + 1
    return count


def test_report_and_compare_of_a_big_samples_file_hold_each_item_once_and_never_load_torch(tmp_path):
    # case 15a: an 85 MB samples file made `report` use 769 MB: the run's model_args were split by lmms-eval's
    # helper, whose module imports torch (~600 MB), and every line was kept whole (23 copies of its item).
    # Now the split is the plugin's own rule unless lmms-eval is already loaded, and a line keeps its item once.
    runs = []
    for name in ("oracle", "random"):
        shutil.copytree(RUNS / name, tmp_path / name)
        (samples,) = (tmp_path / name).glob("*_samples_errorradar_cate_sample.jsonl")
        _grow(tmp_path / name, samples.name, 12)
        runs.append(str(tmp_path / name))
    probe = (
        "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024); "
        "print(done.stderr[-2000:], file=sys.stderr)"
    )
    for command in (
        ["report", runs[0], "-o", str(tmp_path / "one"), "--no-plots"],
        ["report", *runs, "-o", str(tmp_path / "two"), "--no-plots"],
    ):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                probe,
                sys.executable,
                "-c",
                "import sys; from lmms_eval_plugins.cli import main; rc = main(); "
                "sys.exit(rc if 'torch' not in sys.modules else 99)",
                *command,
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "LMMS_EVAL_PLUGINS_BOOTSTRAP_ITERS": "50"},
        )
        code, peak_mb = map(int, done.stdout.split())
        assert code == 0, done.stderr  # 99: torch was imported
        assert peak_mb < 400, (command[0], len(command), peak_mb)  # was about 9x the file, torch included


def test_a_lean_sample_keeps_each_item_once_and_drops_the_document_and_replies():
    from lmms_eval_plugins.compare import _item
    from lmms_eval_plugins.logged_samples import lean

    item = {"gold": "CAL", "pred": "VIS", "correct": False}
    record = {
        "doc_id": 3,
        "doc": {"big": "x" * 1000},
        "arguments": ["prompt"],
        "resps": [["r"]],
        "filtered_resps": ["r"],
        "target": "CAL",
        "cate_acc": dict(item),
        "cate_f1_cal": dict(item),
        "judged": {"verdict": 1},
        "n": 2,
    }
    kept = lean(record)
    assert kept == {"doc_id": 3, "target": "CAL", "cate_acc": item, "judged": {"verdict": 1}, "n": 2}
    assert _item(kept, "cate_f1_cal") is kept["cate_acc"] and _item(kept, "judged") == {"verdict": 1}
