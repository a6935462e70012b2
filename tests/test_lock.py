"""The lock (constraints.txt), pyproject.toml's ranges and tested_versions.py agree, and every install
the README and CI run goes through the lock."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from lmms_eval_plugins import tested_versions as tv

REPO = Path(__file__).resolve().parents[1]


def lock_pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for number, line in enumerate((REPO / "constraints.txt").read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version and not any(c in version for c in "<>=!~ ;"), (
            f"constraints.txt:{number} is not a pin: {line!r}"
        )
        key = canonicalize_name(name)
        assert key not in pins, f"constraints.txt:{number} pins {name} twice"
        pins[key] = version
    return pins


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def requirements() -> list[Requirement]:
    project = pyproject()["project"]
    return [Requirement(r) for r in [*project["dependencies"], *project["optional-dependencies"]["dev"]]]


def test_lock_pins_every_package_once_and_not_the_plugin_itself():
    pins = lock_pins()
    assert len(pins) > 50  # a whole resolved environment, not a hand-picked list
    assert "lmms-eval-plugins" not in pins  # pip would refuse to install the checkout against its own pin


def test_every_direct_dependency_is_locked_inside_its_range():
    pins = lock_pins()
    for requirement in requirements():
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, (
            f"{requirement.name} is a dependency but constraints.txt does not pin it: run bash .ci/lock"
        )
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside pyproject.toml's {requirement}: run bash .ci/lock"
        )


@pytest.mark.parametrize("bad", tv.KNOWN_BAD, ids=lambda b: b.package)
def test_known_bad_versions_are_excluded_with_their_reason(bad):
    lines = (REPO / "pyproject.toml").read_text(encoding="utf-8").splitlines()
    index = next(i for i, line in enumerate(lines) if re.match(rf'\s*"{re.escape(bad.package)}\s*[<>=!~]', line))
    requirement = Requirement(lines[index].strip().strip(",").strip('"'))
    first_bad = re.search(r"[\d.]+", bad.specifier).group(0)
    assert first_bad in SpecifierSet(bad.specifier)
    assert not requirement.specifier.contains(first_bad), f"pyproject.toml admits {bad.package} {first_bad}"
    assert lines[index - 1].strip().startswith("#") or "#" in lines[index], "the exclusion needs a comment naming why"
    pinned = lock_pins()[canonicalize_name(bad.package)]
    assert not SpecifierSet(bad.specifier).contains(pinned), f"the lock pins a known-bad {bad.package} {pinned}"


def test_tested_versions_are_the_locks():
    pins = lock_pins()
    assert tv.LOCKED_ON and tv.LOCKED_WITH
    assert set(tv.TESTED) == set(tv.KEY_PACKAGES)
    for package, version in tv.TESTED.items():
        assert pins[canonicalize_name(package)] == version, (
            f"tested_versions.py says {package} {version}; run bash .ci/lock"
        )
        Version(version)


def test_supported_ranges_are_pyprojects():
    project = pyproject()["project"]
    assert SpecifierSet(project["requires-python"]) == SpecifierSet(tv.PYTHON)
    lmms_eval = next(r for r in requirements() if canonicalize_name(r.name) == "lmms-eval")
    assert lmms_eval.specifier == SpecifierSet(tv.LMMS_EVAL)


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return [line.strip() for block in re.findall(r"```bash\n(.*?)```", text, re.S) for line in block.splitlines()]


def test_ci_runs_exactly_the_readme_test_command():
    ci = [
        line.strip()
        for line in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith(("#", "set ", "cd "))
    ]
    assert len(ci) == 1
    assert ci[0] in readme_commands()
    assert "pytest" in ci[0]


def test_every_readme_install_from_a_checkout_goes_through_the_lock():
    installs = [
        c
        for c in readme_commands()
        if "pip install" in c and any(word == "." or word.startswith(".[") for word in shlex.split(c.split("#")[0]))
    ]
    assert len(installs) >= 3  # the demo line, the test line, the usage line
    for command in installs:
        if "[vllm]" in command:
            continue  # vLLM pins its own torch; the README says so
        assert "-c constraints.txt" in command, command


def test_readme_names_the_tested_versions():
    text = " ".join((REPO / "README.md").read_text(encoding="utf-8").split())
    for package, version in tv.TESTED.items():
        assert f"{package} {version}" in text, f"README's tested versions lack {package} {version}"
    assert f"the lock of {tv.LOCKED_ON}" in text
