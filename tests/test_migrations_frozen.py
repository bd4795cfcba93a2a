"""A revision builds what it built when it was written: it imports only code frozen for the
migrations, never the library's live modules, whose next change would change an old revision.

The frozen modules (``storage/search_queue.py``, ``search_expression.py``, ``search_text_v1.py``,
``search_watermark.py``) import only one another. While a revision is the newest, what it
builds is what the live code builds: a change to ``storage/search.py`` that no new revision
freezes fails here.
"""

from __future__ import annotations

import ast

import pytest

from openhands_memory import migrate
from openhands_memory.storage import search, search_watermark

from .test_layers import DYNAMIC, NAME, ROOTS, graph, modules

FROZEN = {f"{NAME}.storage.{m}" for m in ("search_queue", "search_expression", "search_text_v1", "search_watermark")}
VERSIONS = f"{NAME}.migrations.versions."
# The alembic environment is no revision: it compares the schema of today (``alembic check``).
ENVIRONMENT = {f"{NAME}.migrations.env": {f"{NAME}.schema", f"{NAME}.location"}}
# ``migrate.progress``: where the command line hears of a long step's progress, no schema.
HOOKS = {f"{NAME}.migrate"}


@pytest.fixture(scope="module")
def edges() -> dict[str, set[str]]:
    return graph(ROOTS, DYNAMIC)


def test_a_revision_imports_only_what_is_frozen_for_it(edges):
    revisions = [m for m in edges if m.startswith(VERSIONS)]
    assert len(revisions) == len(migrate.REVISIONS)
    live = {m: sorted(edges[m] - FROZEN - HOOKS) for m in revisions}
    assert not {m: found for m, found in live.items() if found}, "a revision imports live code"


def test_the_frozen_modules_import_only_one_another(edges):
    assert {m: sorted(edges[m] - FROZEN) for m in FROZEN} == {m: [] for m in FROZEN}


def test_the_environment_imports_only_the_schema_and_a_location(edges):
    for module, allowed in ENVIRONMENT.items():
        assert edges[module] <= allowed


def test_a_revision_asks_migrate_for_its_progress_hook_only():
    known = modules(ROOTS)
    for module, path in known.items():
        if not module.startswith(VERSIONS):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "migrate":
                assert node.attr == "progress", f"{module} uses migrate.{node.attr}"


# What ``search_watermark`` freezes, which revision 0015 built (the revisions after it leave
# the index alone).
BUILT = ("KIND_LIST", "KEY_LIST", "SHIFT", "WORDS", "GRAMS", "STATE", "FLUSH_AT", "AUTOMERGE", "STATE_TABLE",
         "TABLES", "TRIGGERS", "TRIGGER_NAMES", "PG_FUNCTION", "PG_WORDS_FUNCTION", "PG_TEXTS", "PG_FLUSH_AT",
         "PG_TRIGGER_FUNCTIONS", "PG_TRIGGERS", "PG_TABLES", "PG_INDEXES")


def test_the_newest_revision_builds_what_the_code_builds():
    # Revisions after 0015 that leave the search index alone (0016: replay_run; 0017:
    # ingest_pending).
    assert migrate.REVISIONS[migrate.REVISIONS.index("0015") + 1:] == ("0016", "0017"), (
        "a new revision: if it changes the search index, freeze what it builds beside "
        "storage/search_watermark.py and compare that here; if not, name it above")
    changed = [name for name in BUILT if getattr(search, name) != getattr(search_watermark, name)]
    assert not changed, (f"storage/search.py builds {', '.join(changed)} otherwise than revision 0015 did "
                         "(storage/search_watermark.py): a change to the index is a new revision")
    assert search.upto_of("c.id") == search_watermark.upto_of("c.id")
    assert search.sqlite_text("e.payload") == search_watermark.sqlite_text("e.payload")
