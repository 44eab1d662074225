"""The study reports (results/**/REPORT.md, each written by its script in benchmarks/) and benchmarks/README.md
cite only what exists: every repository path they name is on disk and every heading they link to exists."""
from __future__ import annotations

import pytest
from doc_citations import REPO, broken_heading_links, missing_paths

DOCS = sorted([REPO / "benchmarks" / "README.md", *(REPO / "results").rglob("REPORT.md")])


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(REPO).as_posix() for d in DOCS])
def test_every_cited_path_exists(doc):
    missing = missing_paths(doc)
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(REPO).as_posix() for d in DOCS])
def test_every_linked_heading_exists(doc):
    bad = broken_heading_links(doc)
    assert not bad, "\n".join(bad)
