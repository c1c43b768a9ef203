"""The layering the developers' guide asks for, checked on the source (AST; only the
star-import test imports the packages).

- the library packages never import the web stack (FastAPI, Starlette);
- no package takes a private name (``_x``) or private module from another package;
- every package re-exports its public surface with ``__all__``, and each name exists;
- no import cycle between modules, counting imports inside functions too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIBRARIES = ("srn", "host", "queues", "transport", "datamover", "planning")
PACKAGES = (*LIBRARIES, "app")
WEB = ("fastapi", "starlette", "uvicorn")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()


def imports(name: str, path: Path) -> Iterator[tuple[str, list[str]]]:
    """(imported module, names) for every import in the module, relative ones resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            yield target, [alias.name for alias in node.names]


def edges(name: str, path: Path) -> set[str]:
    """The project modules ``name`` imports (``from pkg import mod`` counts as pkg.mod)."""
    found = set()
    for target, names in imports(name, path):
        for imported in names or [""]:
            module = f"{target}.{imported}" if f"{target}.{imported}" in MODULES else target
            while module and module not in MODULES:
                module = module.rpartition(".")[0]
            if module and module != name:
                found.add(module)
    return found


@pytest.mark.parametrize("package", LIBRARIES)
def test_libraries_do_not_import_the_web_stack(package: str) -> None:
    offenders = [
        f"{name} imports {target}"
        for name, path in MODULES.items()
        if name.split(".")[0] == package
        for target, _ in imports(name, path)
        if target.split(".")[0] in WEB
    ]
    assert offenders == []


def test_no_private_names_cross_packages() -> None:
    offenders = []
    for name, path in MODULES.items():
        for target, names in imports(name, path):
            top = target.split(".")[0]
            if top not in PACKAGES or top == name.split(".")[0]:
                continue
            private = [n for n in names if n.startswith("_") and not n.startswith("__")]
            if private or any(part.startswith("_") for part in target.split(".")):
                offenders.append(f"{name}: from {target} import {', '.join(names)}")
    assert offenders == []


@pytest.mark.parametrize("package", PACKAGES)
def test_packages_declare_their_public_surface(package: str) -> None:
    tree = ast.parse((ROOT / package / "__init__.py").read_text())
    declared = [
        node
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
    ]
    assert declared, f"{package}/__init__.py has no __all__"


def test_no_import_cycles() -> None:
    graph = {name: edges(name, path) for name, path in MODULES.items()}
    # Depth-first search for a back edge; the cycle is the path from its target.
    state: dict[str, int] = {}  # 1 on the path, 2 finished
    path: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert cycles == []


#: The rooms of ``app/``, lowest first: a room imports only from the rooms before it (and
#: ``app.settings`` and ``app.version``, which every room reads).  The command line sits
#: beside the service, not on it: only ``blastrate serve`` starts the service.
APP_ROOMS = ("app.schemas", "app.operations", "app.runtime", "app.service")
APP_BASE = ("app.settings", "app.version")


def _room(module: str) -> str | None:
    return next((r for r in (*APP_ROOMS, "app.commands") if module.startswith(r)), None)


def test_app_rooms_import_downwards() -> None:
    offenders = []
    for name, path in MODULES.items():
        room = _room(name)
        if room is None:
            continue
        for target in edges(name, path):
            other = _room(target)
            if not target.startswith("app") or target in APP_BASE or other in (None, room):
                continue
            if room == "app.commands":
                allowed = other != "app.service" or name == "app.commands.serve"
            else:
                allowed = other in APP_ROOMS[: APP_ROOMS.index(room)]
            if not allowed:
                offenders.append(f"{name} imports {target}")
    assert offenders == []


@pytest.mark.parametrize("package", LIBRARIES)
def test_every_public_name_exists(package: str) -> None:
    # `from transport import *` once raised AttributeError: __all__ named a class that
    # had moved to datamover.  Star-import each library in a fresh namespace.
    exec(f"from {package} import *", {})
