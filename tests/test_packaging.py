"""The project's dependency declarations: every dependency used, every pin needed.

``pyproject.toml`` declares what the project imports and ``constraints.txt`` pins the
whole installed tree.  Both drift: a dependency nothing imports stays declared (``sympy``
did), and a pin outlives the package that needed it (a merge brought ``sympy`` back to
the constraints after it had been dropped).  The checks read the installed distributions'
own metadata (:mod:`importlib.metadata`), which is what pip resolved from these files.
"""

from __future__ import annotations

import functools
import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# The library and service packages, and what else imports a test dependency.
SOURCES = ("srn", "host", "queues", "transport", "datamover", "planning", "app")
TEST_SOURCES = (*SOURCES, "tests", "benchmarks", "conftest.py")
# Declared but never imported by name, each for a stated reason (pyproject's comments):
# uvicorn picks up uvloop and httptools on its own; ruff and mypy are commands that
# scripts/test runs; SQLAlchemy loads psycopg for postgresql+psycopg:// URLs; mkdocs and
# its theme and plugins build the documentation site (`mkdocs build --strict`, mkdocs.yml);
# pytest loads pytest-xdist as a plugin (scripts/test's -n).
NOT_IMPORTED = {
    "uvloop",
    "httptools",
    "ruff",
    "mypy",
    "psycopg",
    "mkdocs",
    "mkdocs-material",
    "mkdocstrings",
    "mkdocs-click",
    "pytest-xdist",
}
# The bench extra (stormpy) is not installed for the tests, so its requirements are
# invisible to the metadata walk; `pip install --dry-run --report - stormpy==2.0.0`
# lists them.
BENCH_ONLY_PINS = {"deprecated", "wrapt"}
# Pinned for scripts/_venv.sh, which installs with it (not a dependency of the package).
INSTALLER_PINS = {"uv"}


def canonical(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(group: str | None) -> list[Requirement]:
    """Requirements of the project proper (None) or of one extra."""
    if group is None:
        return [Requirement(r) for r in PROJECT["project"]["dependencies"]]
    return [Requirement(r) for r in PROJECT["project"]["optional-dependencies"][group]]


def pins() -> dict[str, str]:
    """constraints.txt as {canonical name: version}."""
    found = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version = line.split("==")
            found[canonical(name)] = version
    return found


def dependency_tree() -> set[str]:
    """Canonical names of every distribution the declared requirements reach, through
    installed metadata, with the extras each one is asked for (markers evaluated here)."""
    groups = [None, *PROJECT["project"]["optional-dependencies"]]
    stack = [r for group in groups for r in declared(group)]
    seen: set[tuple[str, frozenset[str]]] = set()
    while stack:
        requirement = stack.pop()
        key = (canonical(requirement.name), frozenset(requirement.extras))
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.requires(requirement.name) or []
        except metadata.PackageNotFoundError:
            continue  # not installed here (the bench extra): a leaf
        for text in requires:
            child = Requirement(text)
            extras = requirement.extras or {""}
            if child.marker is None or any(child.marker.evaluate({"extra": e}) for e in extras):
                stack.append(child)
    return {name for name, _ in seen}


def imported_modules(roots: tuple[str, ...]) -> set[str]:
    """Top-level module names that ``import`` statements under ``roots`` name."""
    pattern = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)
    names: set[str] = set()
    for root in roots:
        path = ROOT / root
        for source in [path] if path.is_file() else path.rglob("*.py"):
            names.update(pattern.findall(source.read_text()))
    return names


@functools.cache
def provided_modules() -> dict[str, set[str]]:
    """Canonical distribution name -> the top-level modules it installs (one scan of
    every installed distribution, shared by the tests)."""
    modules: dict[str, set[str]] = {}
    for module, owners in metadata.packages_distributions().items():
        for owner in owners:
            modules.setdefault(canonical(owner), set()).add(module)
    return modules


def import_names(distribution: str) -> set[str]:
    """The top-level modules an installed distribution provides."""
    return provided_modules().get(canonical(distribution), set())


def test_every_runtime_dependency_is_imported() -> None:
    used = imported_modules(SOURCES)
    unused = [
        r.name
        for r in declared(None)
        if canonical(r.name) not in NOT_IMPORTED and not import_names(r.name) & used
    ]
    assert not unused, f"declared in [project.dependencies] but imported nowhere: {unused}"


def test_every_test_dependency_is_imported() -> None:
    used = imported_modules(TEST_SOURCES)
    unused = [
        r.name
        for r in declared("test")
        if canonical(r.name) not in NOT_IMPORTED and not import_names(r.name) & used
    ]
    assert not unused, f"declared in the test extra but imported nowhere: {unused}"


def test_every_pin_is_in_the_dependency_tree() -> None:
    stale = sorted(set(pins()) - dependency_tree() - BENCH_ONLY_PINS - INSTALLER_PINS)
    assert not stale, f"pinned in constraints.txt but required by nothing: {stale}"


def test_everything_installed_from_the_tree_is_pinned() -> None:
    pinned = pins()
    tree = dependency_tree()
    unpinned = []
    for name in sorted(tree):
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
        if name != "blastrate" and pinned.get(name) != version:
            unpinned.append(f"{name}=={version} (pinned: {pinned.get(name)})")
    assert not unpinned, f"installed but not pinned at that version: {unpinned}"


def test_license_is_an_spdx_expression() -> None:
    # The older table form, {text = ...}, makes setuptools >= 77 print a deprecation
    # banner on every install (three times per editable install).
    assert isinstance(PROJECT["project"]["license"], str)
    setuptools = Requirement(PROJECT["build-system"]["requires"][0])
    assert setuptools.name == "setuptools"
    assert setuptools.specifier.contains("77") and not setuptools.specifier.contains("76.9")
