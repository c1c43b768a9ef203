"""The Docker image's file set is enough to run the service.

Before: the ``Dockerfile`` copied five packages, not ``planning/``, which the app
imports, so the image could not be built.  Base images cannot be pulled here, so this
test does what can be done without Docker: it copies exactly the files the build stage
``COPY``s into an empty directory, imports the service and every module of the project
from there, and answers ``/healthz`` -- failing if any module had to come from elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _copied(dockerfile: str) -> list[str]:
    """Sources of the build stage's ``COPY`` lines (the runtime stage copies the venv)."""
    sources: list[str] = []
    for line in dockerfile.splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            sources += words[1:-1]
    return sources


def test_the_dockerfile_copies_every_package_setuptools_installs() -> None:
    copied = {s.rstrip("/") for s in _copied((ROOT / "Dockerfile").read_text())}
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "packages"
    ]
    tops = {p.split(".")[0] for p in packages}
    assert tops <= copied, f"not copied into the image: {sorted(tops - copied)}"
    assert {"pyproject.toml", "constraints.txt", "README.md"} <= copied


def test_the_service_runs_from_the_images_files_alone(tmp_path: Path) -> None:
    image = tmp_path / "src"
    image.mkdir()
    for source in _copied((ROOT / "Dockerfile").read_text()):
        path = ROOT / source.rstrip("/")
        if path.is_dir():
            shutil.copytree(path, image / path.name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(path, image / path.name)
    tops = sorted(p.name for p in image.iterdir() if (p / "__init__.py").exists())
    # Every package of the project, copied or not: one that was left out and is then
    # imported from the checkout (the editable install) must show as "outside".
    project = sorted(
        {
            p.split(".")[0]
            for p in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
                "packages"
            ]
        }
    )
    script = f"""
import importlib, pkgutil, sys, warnings
warnings.filterwarnings("ignore")
image = {str(image)!r}
for top in {tops!r}:
    package = importlib.import_module(top)
    for info in pkgutil.walk_packages(package.__path__, top + "."):
        if not info.name.endswith(".__main__"):  # that one runs the command line
            importlib.import_module(info.name)
from fastapi.testclient import TestClient
from app import Settings, create_app
with TestClient(create_app(Settings(warm_up=False, log_level="warning"))) as client:
    assert client.get("/healthz").status_code == 200
def elsewhere(module):
    return not (getattr(module, "__file__", None) or image).startswith(image)
outside = sorted(
    name for name, module in sys.modules.items()
    if name.split(".")[0] in {project!r} and elsewhere(module)
)
print("outside:", outside)
sys.exit(1 if outside else 0)
"""
    env = {**os.environ, "PYTHONPATH": str(image)}
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
