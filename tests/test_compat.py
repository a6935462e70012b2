"""The compatibility layer (lmms_eval_plugins/compat): every patch and caller-frame read in one table,
each checked against the installed lmms-eval before it is used, and nothing outside it reaching inside
lmms-eval."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from lmms_eval_plugins import compat
from lmms_eval_plugins.compat import frames

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def fresh_compat(monkeypatch):
    """Forget which entries warned or were checked in this process (each test sees its own warnings)."""
    monkeypatch.setattr(compat, "_warned", set())
    monkeypatch.setattr(compat, "_available", {})


def _compat_warnings(caplog) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.name == "lmms_eval_plugins.compat" and r.levelno == logging.WARNING
    ]


# ------------------------------------------------------------------------------------------ the table


def test_every_entry_is_present_in_the_installed_lmms_eval():
    problems = [f"{c.entry.name}: {c.problem}" for c in compat.check_all() if not c.ok]
    assert problems == []
    assert len(compat.check_all()) == len(compat.ENTRIES)


def test_entries_are_complete_and_uniquely_named():
    names = [e.name for e in compat.ENTRIES]
    assert len(names) == len(set(names)) and set(names) == set(compat._INSTALLERS)
    for e in compat.ENTRIES:
        assert ":" in e.target and e.why and e.versions and e.without and e.feature, e.name
        assert "none in 0.7.3" in e.why or e.upstream, f"{e.name}: say whether lmms-eval offers a supported route"
        if e.upstream:
            assert (REPO / "docs" / "upstream" / e.upstream).is_file(), e.upstream
        assert e.kind in (compat.PATCH, compat.FRAME_READ, compat.PRIVATE_CALL), e.name
        assert (compat._INSTALLERS[e.name][1] is None) == (e.kind != compat.PATCH), e.name


def test_the_table_in_docs_architecture_is_markdown_table():
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert compat.markdown_table() in text, (
        "regenerate: python -c 'from lmms_eval_plugins import compat; print(compat.markdown_table())'"
    )
    assert compat.markdown_table().count("\n") == len(compat.ENTRIES) + 2


# ------------------------------------------------------------------------------------------ the check


def test_signature_problem_names_what_is_missing_or_reordered():
    def f(self, include_path=None, include_defaults=True): ...

    assert compat.signature_problem(f, ("self", "include_path", "include_defaults")) is None
    assert compat.signature_problem(f, ("include_path",)) is None  # a subsequence is enough
    assert (
        compat.signature_problem(f, ("self", "paths"))
        == "signature (self, include_path, include_defaults) lacks 'paths'"
    )
    assert compat.signature_problem(f, ("include_defaults", "include_path")) == (
        "signature (self, include_path, include_defaults) does not take (include_defaults, include_path) in this order"
    )
    assert compat.signature_problem(f, ()) is None


def test_check_entry_never_raises_and_says_missing():
    gone = compat.Entry(
        "x", "lmms_eval.no_such_module:f", compat.PATCH, (), "why", None, "0.7.3", "fallback", "feature"
    )
    check = compat.check_entry(gone)
    assert not check.ok and check.problem.startswith("missing (ModuleNotFoundError")
    no_attr = compat.Entry("x", "lmms_eval.utils:NoSuchThing.method", compat.PATCH, (), "why", None, "0.7.3", "f", "g")
    assert compat.check_entry(no_attr).problem.startswith("missing (AttributeError")


def test_check_looks_through_our_own_wrappers():
    compat.install("error-bars")
    from lmms_eval.evaluator_utils import TaskOutput

    assert getattr(TaskOutput.calculate_aggregate_metric, compat.MARK, False)
    assert compat.unwrap(TaskOutput.calculate_aggregate_metric) is not TaskOutput.calculate_aggregate_metric
    assert compat.check_entry(compat.entry("error-bars")).ok


def test_a_changed_signature_gives_one_named_warning_and_the_patch_is_skipped(monkeypatch, caplog, fresh_compat):
    from lmms_eval.evaluator_utils import TaskOutput

    def calculate_aggregate_metric(self):  # a future lmms-eval without bootstrap_iters
        return None

    monkeypatch.setattr(TaskOutput, "calculate_aggregate_metric", calculate_aggregate_metric)
    with caplog.at_level(logging.WARNING):
        assert compat.install("error-bars") is False
        assert compat.install_all(compat.TASKS)["error-bars"] is False  # asked again: no second warning
    assert TaskOutput.calculate_aggregate_metric is calculate_aggregate_metric  # untouched
    assert _compat_warnings(caplog) == [
        (
            "lmms-eval-plugins: compat error-bars: signature (self) lacks 'bootstrap_iters'; error bars off: "
            "`<metric>_stderr` stays N/A for our metrics (values unchanged)"
        )
    ]


def test_a_missing_attribute_gives_one_named_warning_and_nothing_crashes(monkeypatch, caplog, fresh_compat):
    import lmms_eval.models as models

    monkeypatch.delattr(models, "get_model")
    with caplog.at_level(logging.WARNING):
        assert compat.install("probe-notice") is False
        assert compat.install("probe-notice") is False
    assert not hasattr(models, "get_model")
    [warning] = _compat_warnings(caplog)
    assert warning.startswith("lmms-eval-plugins: compat probe-notice: missing (AttributeError")
    assert warning.endswith("; collapsed probe notice off: the notice is logged once per video request (harmless)")


def test_every_install_is_idempotent():
    first = compat.install_all()
    patched = {e.name: compat.resolve(e.target) for e in compat.ENTRIES if e.kind == compat.PATCH}
    assert compat.install_all() == first
    assert {e.name: compat.resolve(e.target) for e in compat.ENTRIES if e.kind == compat.PATCH} == patched
    for name, attribute in patched.items():  # every patch in place, each wrapped once
        assert getattr(attribute, compat.MARK, False), name
        assert not getattr(attribute.__wrapped__, compat.MARK, False), name


# ------------------------------------------------------------------------------------------ frame reads


def _filter_apply():  # stands in for a Filter.apply called by FilterEnsemble.apply
    return frames.caller_instances()


def _ensemble_apply(instances, docs):  # stands in for lmms-eval's FilterEnsemble.apply (its locals are read)
    return _filter_apply()


def test_the_filter_reads_its_callers_instances(fresh_compat):
    instances = ["i0", "i1"]
    assert _ensemble_apply(instances, []) is instances
    assert _ensemble_apply("not a list", []) is None  # nothing usable: the filter aligns by position


def test_a_changed_filter_ensemble_turns_the_frame_read_off_once(monkeypatch, caplog, fresh_compat):
    from lmms_eval.api.filter import FilterEnsemble

    from lmms_eval_plugins.judges.filter import _aligned_docs

    monkeypatch.setattr(FilterEnsemble, "apply", lambda self, requests, docs: None)
    with caplog.at_level(logging.WARNING):
        assert _ensemble_apply(["i0"], []) is None
        assert _ensemble_apply(["i0"], []) is None
    [warning] = _compat_warnings(caplog)
    assert warning.startswith(
        "lmms-eval-plugins: compat filter-instances: signature (self, requests, docs) lacks 'instances'"
    )
    assert _aligned_docs(["r0", "r1"], ["d0", "d1", "d2"], None) == ["d0", "d1"]  # the fallback: by position


def test_the_request_loop_is_found_on_the_stack_and_off_when_collator_changed(monkeypatch, caplog, fresh_compat):
    from lmms_eval.utils import Collator

    class Model:
        task_dict = {"t": {"test": ["doc0", "doc1"]}}

    def layer_call():  # the frame find_request_loop skips, as prefetch's _Layer.call
        return frames.find_request_loop()

    def hook():
        return layer_call()

    def generate_until(self, requests):
        collator = Collator([("b", 2), ("a", 1)], lambda args: args[1])  # noqa: F841 (the frame the hook reads)
        return hook()

    source, task_dict, order = generate_until(Model(), [])
    assert isinstance(source, Collator) and task_dict is Model.task_dict
    assert order() == [("a", 1), ("b", 2)]  # Collator's sort order, not list order

    monkeypatch.setattr(compat, "_available", {})
    monkeypatch.setattr(Collator, "__init__", lambda self, items: None)
    with caplog.at_level(logging.WARNING):
        assert layer_call() is None  # decode-ahead off: inputs prepared inline
    assert _compat_warnings(caplog)[0].startswith("lmms-eval-plugins: compat request-loop: signature (self, items)")


def test_model_args_split_like_lmms_eval_or_by_the_same_rule(monkeypatch, caplog, fresh_compat):
    from lmms_eval_plugins.compat.private import split_model_args

    assert split_model_args('a=1,b="x,y",c={"k": 1, "j": 2}') == ["a=1", 'b="x,y"', 'c={"k": 1, "j": 2}']
    monkeypatch.delattr("lmms_eval.utils._smart_comma_split")
    monkeypatch.setattr(compat, "_available", {})
    with caplog.at_level(logging.WARNING):
        assert split_model_args('a=1,b="x,y",c={"k": 1, "j": 2}') == [
            "a=1",
            'b="x,y"',
            'c={"k": 1, "j": 2}',
        ]  # the fallback
    assert _compat_warnings(caplog)[0].startswith("lmms-eval-plugins: compat model-args-split: missing (AttributeError")


# ------------------------------------------------------------------------------------------ nothing outside compat/


def _lmms_eval_names(tree: ast.AST) -> set[str]:
    """Names a module binds to lmms-eval modules or their members (``import lmms_eval.x as y``, ``from lmms_eval.x import Z``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "lmms_eval" or alias.name.startswith("lmms_eval."):
                    names.add(alias.asname or alias.name.split(".")[0])
        elif (
            isinstance(node, ast.ImportFrom)
            and not node.level
            and node.module
            and (node.module == "lmms_eval" or node.module.startswith("lmms_eval."))
        ):
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def internals_reached(source: str) -> list[str]:
    """What in ``source`` reads a caller's frame, assigns onto an lmms-eval module or class, or uses a
    private name of lmms-eval."""
    tree = ast.parse(source)
    lmms = _lmms_eval_names(tree)
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and not node.level
            and node.module
            and node.module.split(".")[0] == "lmms_eval"
        ):
            found += [f"line {node.lineno}: imports {node.module}.{a.name}" for a in node.names if _private(a.name)]
        elif (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in lmms
        ):
            found.append(f"line {node.lineno}: uses {node.value.id}.{node.attr}")
        if isinstance(node, ast.Attribute) and node.attr in (
            "_getframe",
            "_current_frames",
            "currentframe",
            "f_locals",
            "f_back",
            "f_globals",
        ):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                base = target
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(target, ast.Attribute) and isinstance(base, ast.Name) and base.id in lmms:
                    found.append(f"line {node.lineno}: assigns {base.id}.{target.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in lmms
        ):
            found.append(f"line {node.lineno}: {node.func.id}({node.args[0].id}, ...)")
    return sorted(found, key=lambda text: (int(text.split(":")[0].split()[1]), text))


def test_the_scanner_finds_frame_reads_and_patches():
    sample = (
        "import sys\nimport lmms_eval.utils as u\nfrom lmms_eval.tasks import TaskManager\n"
        "f = sys._getframe(1).f_locals\nu.make_table = None\nTaskManager.initialize_tasks = None\n"
        "setattr(TaskManager, 'x', 1)\nclass A: pass\nA.y = 1\nfrom lmms_eval.utils import _split, ok\n"
        "u._helper(A._z)\n"
    )
    assert internals_reached(sample) == [
        "line 4: ._getframe",
        "line 4: .f_locals",
        "line 5: assigns u.make_table",
        "line 6: assigns TaskManager.initialize_tasks",
        "line 7: setattr(TaskManager, ...)",
        "line 10: imports lmms_eval.utils._split",
        "line 11: uses u._helper",
    ]


def test_nothing_outside_compat_reaches_inside_lmms_eval():
    roots = [REPO / "lmms_eval_plugins", REPO / "judges", REPO / "task_yamls"]
    files = [p for root in roots for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts]
    assert any(p.name == "filter.py" for p in files) and any(p.name == "prefetch.py" for p in files)
    compat_dir = REPO / "lmms_eval_plugins" / "compat"
    found = {
        str(p.relative_to(REPO)): hits
        for p in files
        if compat_dir not in p.parents and (hits := internals_reached(p.read_text(encoding="utf-8")))
    }
    assert found == {}, "move these into lmms_eval_plugins/compat (with an entry in its table)"
    inside = {p.name: internals_reached(p.read_text(encoding="utf-8")) for p in compat_dir.glob("*.py")}
    assert inside["frames.py"] and inside["patches.py"] and inside["fixes.py"] and inside["private.py"]  # it sees them
