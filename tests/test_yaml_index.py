"""The one reader of task folders (``yaml_index``), and the commands that index through it."""

from __future__ import annotations

import pytest

from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.yaml_index import is_sample_task, names_by_kind, read_task_yamls


def _folder(tmp_path):
    (tmp_path / "_template_yaml").write_text("output_type: generate_until\nprocess_results: !function utils.process\n")
    (tmp_path / "b_task.yaml").write_text("task: b_task\ninclude: _template_yaml\n")
    (tmp_path / "b.yaml").write_text("group: b\ntask:\n  - b_task\n  - group: b_sub\n    task: [b_task]\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b_deep.yaml").write_text("task: b_deep\n")
    return tmp_path


def test_each_file_gives_its_name_kind_include_and_raw_config_without_importing_hooks(tmp_path):
    entries = {e.path.name: e for e in read_task_yamls([_folder(tmp_path)])}
    assert sorted(entries) == ["_template_yaml", "b.yaml", "b_deep.yaml", "b_task.yaml"]
    template, task, group = entries["_template_yaml"], entries["b_task.yaml"], entries["b.yaml"]
    assert (template.kind, template.name, template.include) == ("", "", "")
    assert template.config["process_results"] == "!function utils.process"  # text: nothing imported
    assert (task.kind, task.name, task.include, task.members) == ("task", "b_task", "_template_yaml", ())
    assert (group.kind, group.name) == ("group", "b")
    assert group.members == ("b_task", {"group": "b_sub", "task": ["b_task"]})
    assert names_by_kind(entries.values()) == {"b": "group", "b_deep": "task", "b_task": "task"}
    assert {e.path.name for e in read_task_yamls([tmp_path], recursive=False)} == {
        "_template_yaml",
        "b.yaml",
        "b_task.yaml",
    }


def test_a_broken_yaml_is_a_named_error_or_skipped_in_folders_that_are_not_ours(tmp_path):
    (tmp_path / "bad.yaml").write_text("task: [unclosed\n")
    (tmp_path / "ok.yaml").write_text("task: ok\n")
    with pytest.raises(DataError) as err:
        read_task_yamls([tmp_path])
    assert "bad.yaml" in str(err.value) and "fix:" in str(err.value)
    assert [e.name for e in read_task_yamls([tmp_path], skip_unreadable=True)] == ["ok"]


@pytest.mark.parametrize(
    ("name", "sample"),
    [
        ("errorradar_sample", True),
        ("errorradar_step_sample", True),
        ("causalstep_sample_restart_same", True),
        ("causalstep_restart_same", False),
        ("causalstep", False),
        ("sample", False),
        ("mmerror_samples", False),
    ],
)
def test_a_sample_task_has_sample_as_a_name_token_after_the_benchmark(name, sample):
    assert is_sample_task(name) is sample


def test_every_indexer_sees_the_same_tasks():
    from lmms_eval_plugins import check_model, doctor, scaffold
    from lmms_eval_plugins.benchmark import ordered_benchmarks
    from lmms_eval_plugins.tasks_command import task_names

    names = task_names()
    assert {n: e.kind for n, e in check_model.task_index().items()} == names
    assert doctor._task_yamls()[0] == names
    declared = set().union(*(scaffold.task_names_in(b.tasks_dir) for b in ordered_benchmarks()))
    assert set(names) <= declared
    assert "virectify_sample" in doctor._task_yamls()[2]  # judged: its template's filter_list names JudgeFilter


def test_the_demo_default_covers_every_sample_task_restart_variants_included():
    from lmms_eval_plugins.tasks_command import sample_tasks, task_names

    names = task_names()
    chosen = sample_tasks(names)
    assert "causalstep_sample_restart_same" in chosen and "causalstep_sample" in chosen
    from lmms_eval_plugins.doctor import _leaf_tasks, _task_yamls

    _, groups, _ = _task_yamls()
    covered = {leaf for name in chosen for leaf in _leaf_tasks(names, groups, name)}
    assert {n for n, kind in names.items() if kind == "task" and is_sample_task(n)} <= covered


def test_doctor_counts_a_restart_sample_variant_as_sample_data():
    from lmms_eval_plugins.doctor import requested_needs

    rows, data, _ = requested_needs(["causalstep_sample_restart_same", "causalstep_restart_same"])
    assert rows == [] and data == {"causalstep": ["causalstep_restart_same"]}


def test_the_scaffold_clash_index_reads_names_stems_and_legacy_groups_and_skips_broken_files(tmp_path):
    from lmms_eval_plugins.scaffold import task_names_in

    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "ref_a.yaml").write_text(
        "group: ref_bbox  # lmms-eval's older membership form\ntask: 'ref_bbox_a'\n"
    )
    (tmp_path / "ref" / "broken.yaml").write_text("task: [\n")
    assert task_names_in(tmp_path) == {"ref_a", "ref_bbox", "ref_bbox_a"}  # lmms-eval cannot load broken.yaml either
    assert task_names_in(tmp_path, with_folders=True) == {"ref", "ref_a", "ref_bbox", "ref_bbox_a"}
