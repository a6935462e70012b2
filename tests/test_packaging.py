"""The wheel ships every task file and sample; sample data is exactly what its generator writes."""

from __future__ import annotations

import filecmp
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lmms_eval_plugins.sample_data import generators, sample_dir

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (path,) = out.glob("lmms_eval_plugins-*.whl")
    return zipfile.ZipFile(path)


@pytest.fixture(scope="module")
def wheel_names(wheel) -> set[str]:
    return set(wheel.namelist())


@pytest.mark.wheel
def test_wheel_ships_every_task_file(wheel_names):
    source = REPO / "task_yamls"
    expected = {
        f"lmms_eval_plugins/task_yamls/{p.relative_to(source).as_posix()}"
        for p in source.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert expected - wheel_names == set()


@pytest.mark.wheel
def test_wheel_declares_entry_points_and_keeps_judges_in_our_namespace(wheel, wheel_names):
    (entry_points,) = [n for n in wheel_names if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points).decode()
    assert "[lmms_eval.models]" in text and "lmms_eval_plugins.discovery:register" in text
    assert "[lmms_eval_plugins.judges]" in text and "semantic_match" in text and "rubric" in text
    assert "lmms_eval_plugins/judges/__init__.py" in wheel_names
    assert not any(name.startswith("judges/") for name in wheel_names)  # PyPI has a package named `judges`


@pytest.mark.parametrize("benchmark", sorted(generators()))
def test_sample_data_is_what_the_generator_writes(benchmark, tmp_path):
    generators()[benchmark](tmp_path)
    comparison = filecmp.dircmp(tmp_path, sample_dir(benchmark))

    def differences(cmp: filecmp.dircmp) -> list[str]:
        found = cmp.left_only + cmp.right_only + cmp.diff_files
        return found + [d for sub in cmp.subdirs.values() for d in differences(sub)]

    assert differences(comparison) == []
