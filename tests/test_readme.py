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

from lmms_eval_plugins.tasks_command import task_names

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
CLASSES = ("qwen2_5_vl", "vllm", "openai")


def examples() -> dict[str, list[str]]:
    """model class -> the argv of the ``lmms-eval`` command in the block after ``<!-- example: CLASS -->``."""
    out = {}
    for name, block in re.findall(r"<!-- example: (\w+) -->\s*```bash\n(.*?)```", README, re.S):
        command = block.replace("\\\n", " ")
        line = next(text for text in command.splitlines() if "lmms-eval --model" in text)
        argv = shlex.split(line)
        out[name] = argv[argv.index("lmms-eval") :]
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
        imports = {
            alias.asname or alias.name: (n.module, alias.name)
            for n in tree.body
            if isinstance(n, ast.ImportFrom)
            for alias in n.names
        }
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


# what the README's install line puts in .venv/bin and nowhere else
VENV_COMMANDS = ("lmms-eval-plugins", "lmms-eval", "pip", "pytest", "vllm")
ACTIVATE = "source .venv/bin/activate"


def bash_blocks(text: str = README) -> list[tuple[int, str]]:
    """(line number, text) of every ```bash block."""
    return [(text[: m.start()].count("\n") + 2, m.group(1)) for m in re.finditer(r"```bash\n(.*?)```", text, re.S)]


def bare_venv_commands(block: str) -> list[str]:
    """The commands in a bash block that run a program the venv holds, by bare name, before any
    ``source .venv/bin/activate`` line: without it they are not found, or are another environment's."""
    out, active = [], False
    for line in block.replace("\\\n", " ").splitlines():  # one line per command, continuations joined
        code = "" if line.lstrip().startswith("#") else line.split(" #")[0].strip()
        if code == ACTIVATE:
            active = True
        for command in filter(None, (c.strip().rstrip("&").strip() for c in re.split(r"&&|\|\||;|\|", code))):
            words = [w for w in shlex.split(command) if not re.fullmatch(r"[A-Z_]+=\S*", w)]
            if words and words[0] in VENV_COMMANDS and not active:
                out.append(" ".join(command.split()))
    return out


def test_the_venv_check_finds_bare_commands_until_the_block_activates():
    assert bare_venv_commands("lmms-eval-plugins tasks   # list\n") == ["lmms-eval-plugins tasks"]
    assert bare_venv_commands("python3 -m venv .venv && .venv/bin/pip install . && pip list\n") == ["pip list"]
    assert bare_venv_commands("X=1 Y=2 \\\nlmms-eval --model a \\\n  --tasks b\n") == [
        "X=1 Y=2 lmms-eval --model a --tasks b"
    ]
    assert bare_venv_commands("vllm serve M &\nuntil curl -sf URL; do sleep 5; done\n") == ["vllm serve M"]
    assert bare_venv_commands("# lmms-eval-plugins tasks\n.venv/bin/lmms-eval-plugins tasks\n") == []
    assert bare_venv_commands(f"{ACTIVATE}\nlmms-eval-plugins tasks\npip install .\n") == []
    assert bare_venv_commands(f"pip install .\n{ACTIVATE}\n") == ["pip install ."]


def test_every_readme_command_runs_after_the_readme_install_line():
    blocks = bash_blocks()
    assert len(blocks) >= 8
    assert any(".venv/bin/" in block for _, block in blocks) and any(ACTIVATE in block for _, block in blocks)
    bare = {line: found for line, block in blocks if (found := bare_venv_commands(block))}
    assert bare == {}, f"README blocks (by line) run venv commands without '{ACTIVATE}' or '.venv/bin/': {bare}"


def test_the_qwen_example_fits_qwen_vl_utils_video_frame_cap():
    import qwen_vl_utils.vision_process as vp

    factor = 14 * vp.SPATIAL_MERGE_SIZE  # Qwen2.5-VL: 14 px patches, 2 x 2 merged into one token
    frames = 128  # the most frames one of our tasks sends as one video (CrossVid's budget per question)
    cap = min(
        vp.VIDEO_MAX_TOKEN_NUM * factor * factor, vp.MODEL_SEQ_LEN * factor * factor * 0.9 / frames * vp.FRAME_FACTOR
    )
    args = _model_args(_option(examples()["qwen2_5_vl"], "--model_args"))
    assert vp.VIDEO_MIN_TOKEN_NUM * factor * factor <= int(args["max_pixels"]) <= cap
    assert f"max_pixels={int(cap)}" in README and "exceeds limit[602112]" in README


def test_the_tiny_model_line_uses_the_demos_settings():
    from lmms_eval_plugins.demo import TINY_MODEL_GEN_KWARGS
    from lmms_eval_plugins.tiny_qwen import LMMS_EVAL_MODEL_ARGS

    assert f"--gen_kwargs {TINY_MODEL_GEN_KWARGS}" in README
    assert f"--model_args {LMMS_EVAL_MODEL_ARGS.format(path='/tmp/tiny-qwen')}" in README


def test_a_near_miss_command_gets_did_you_mean(capsys):
    # issue 37 case 17: `lmms-eval-plugins export` said only "unknown command"
    from lmms_eval_plugins import cli

    assert cli.main(["export", "x"]) == 2
    assert "unknown command 'export'; did you mean 'export-upstream'?" in capsys.readouterr().err
    assert cli.main(["reprot"]) == 2 and "did you mean 'report'?" in capsys.readouterr().err
    assert cli.main(["zzz"]) == 2 and "did you mean" not in capsys.readouterr().err
