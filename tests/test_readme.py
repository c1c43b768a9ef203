"""The Python examples in README.md run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


def test_readme_has_python_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(block):
    exec(compile(block, str(README), "exec"), {})


def test_no_link_leaves_the_repository():
    # Issue #13: README linked ../shared/SPEC.md, which a clone does not have.  Every
    # relative link of README and docs/ must resolve inside the repository.
    root = README.parent
    pages = [README, *sorted((root / "docs").glob("*.md"))]
    assert len(pages) >= 2
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "../shared" not in text, page
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            if "://" in target:
                continue
            resolved = (page.parent / target).resolve()
            assert resolved.is_relative_to(root), (page, target)
            assert resolved.exists(), (page, target)


def test_readme_links_the_modelling_conventions():
    # Issue #13: the product carries its own statement of the conventions the paper leaves
    # open.  README must link it, and the page must cover each of them.
    readme = README.read_text(encoding="utf-8")
    assert "](docs/conventions.md)" in readme
    conventions = (README.parent / "docs" / "conventions.md").read_text(encoding="utf-8")
    headings = re.findall(r"^#+ (.+)$", conventions, flags=re.MULTILINE)
    for topic in ("Units", "Fig. 1a", "Fig. 1b", "M/M[N]/1/K", "Transfer time", "parameters"):
        assert any(topic in heading for heading in headings), topic
    for term in ("Processor sharing", "batch rule", "resend rounds", "effective bottleneck rate"):
        assert term in conventions, term
