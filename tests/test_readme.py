"""The README's example per model class is one lmms-eval accepts: the class is registered, every
``--model_args`` key is a parameter of the class (or, for vLLM, one its constructor forwards to
``vllm.LLM``), every task exists. Read from lmms-eval's source, so classes whose backend is not
installed (vLLM) are checked too."""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from lmms_eval_plugins.task_list import task_names

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
CLASSES = ("qwen2_5_vl", "vllm", "openai")


def examples() -> dict[str, list[str]]:
    """model class -> the argv of the ``lmms-eval`` command in the block after ``<!-- example: CLASS -->``."""
    out = {}
    for name, block in re.findall(r"<!-- example: (\w+) -->\s*```bash\n(.*?)```", README, re.S):
        command = block.replace("\\\n", " ")
        line = next(l for l in command.splitlines() if "lmms-eval --model" in l)
        argv = shlex.split(line)
        out[name] = argv[argv.index("lmms-eval"):]
    return out


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def _model_args(text: str) -> dict[str, str]:
    # lmms-eval splits on commas outside brackets (a JSON value such as {"image":128} has none inside)
    return dict(part.split("=", 1) for part in re.split(r",(?![^{]*})", text))


def _class_source_chain(model: str) -> list[ast.ClassDef]:
    """The class lmms-eval builds for ``model`` (chat preferred, as it does) and its bases in lmms-eval."""
    import lmms_eval.models as models

    root = Path(models.__file__).parent
    kind = "chat" if model in models.AVAILABLE_CHAT_TEMPLATE_MODELS else "simple"
    name = (models.AVAILABLE_CHAT_TEMPLATE_MODELS if kind == "chat" else models.AVAILABLE_SIMPLE_MODELS)[model]
    chain, todo = [], [(root / kind / f"{model}.py", name)]
    while todo:
        path, class_name = todo.pop()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        node = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name)
        chain.append(node)
        imports = {alias.asname or alias.name: (n.module, alias.name) for n in tree.body
                   if isinstance(n, ast.ImportFrom) for alias in n.names}
        for base in node.bases:
            module, original = imports.get(base.id if isinstance(base, ast.Name) else "", (None, None))
            if module and module.startswith("lmms_eval.models."):
                spec = importlib.util.find_spec(module)
                todo.append((Path(spec.origin), original))
    return chain


def _init_parameters(chain: list[ast.ClassDef]) -> set[str]:
    names = set()
    for node in chain:
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                args = item.args
                names |= {a.arg for a in [*args.args, *args.kwonlyargs]}
    return names - {"self"}


# keys a class's constructor forwards through **kwargs (checked in its source below)
FORWARDED = {"vllm": {"limit_mm_per_prompt"}}


def test_every_model_class_has_an_example():
    assert set(examples()) == set(CLASSES)


@pytest.mark.parametrize("model", CLASSES)
def test_the_example_is_one_lmms_eval_accepts(model):
    argv = examples()[model]
    assert _option(argv, "--model") == model
    chain = _class_source_chain(model)
    accepted = _init_parameters(chain)
    for key in _model_args(_option(argv, "--model_args")):
        if key in FORWARDED.get(model, set()):
            source = ast.unparse(chain[-1])
            assert "**kwargs" in source and "LLM(" in source, f"{model} no longer forwards {key}"
            continue
        assert key in accepted, f"{model} takes no {key!r} (it takes {sorted(accepted)})"
    known = set(task_names())
    for task in _option(argv, "--tasks").split(","):
        assert task in known, task
    assert "--output_path" in argv and "--log_samples" in argv


def test_the_documented_check_is_a_real_command():
    from lmms_eval_plugins.cli import SUBCOMMANDS

    commands = re.findall(r"`lmms-eval-plugins ([a-z][a-z-]*)(?![a-z:-])", README)
    commands += re.findall(r"^\s*(?:\S+=\S+ )*lmms-eval-plugins ([a-z][a-z-]*)(?![a-z:-])", README, re.M)
    assert len(commands) > 5
    for command in commands:
        assert command in SUBCOMMANDS, command


def test_the_tiny_model_line_uses_the_demos_settings():
    from lmms_eval_plugins.demo import TINY_MODEL_GEN_KWARGS
    from lmms_eval_plugins.tiny_qwen import LMMS_EVAL_MODEL_ARGS

    assert f"--gen_kwargs {TINY_MODEL_GEN_KWARGS}" in README
    assert f"--model_args {LMMS_EVAL_MODEL_ARGS.format(path='/tmp/tiny-qwen')}" in README
