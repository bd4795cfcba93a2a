""".ci/postgres_ran.py: CI fails when the PostgreSQL half of the suite did not really run, or
its run through PgBouncer did not.

(No test here has "postgres" or "pgbouncer" in its name: the check would count it.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def report(tmp_path: Path, *cases: str) -> Path:
    path = tmp_path / "junit.xml"
    path.write_text('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
                    + "".join(cases) + "</testsuite></testsuites>")
    return path


def case(classname: str, name: str, skipped: str | None = None) -> str:
    inner = f'<skipped type="pytest.skip" message="{skipped}">{skipped}</skipped>' if skipped is not None else ""
    return f'<testcase classname="{classname}" name="{name}" time="0.1">{inner}</testcase>'


def check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, ".ci/postgres_ran.py", str(path)], cwd=REPO, check=False,
                          capture_output=True, text=True, timeout=60)


PASSED = [case("tests.test_store_on_both_backends", "test_views[sqlite]"),
          case("tests.test_store_on_both_backends", "test_views[postgresql]"),
          case("tests.test_migrations", "test_postgres_upgrade_head_then_check"),
          case("tests.test_store_on_both_backends", "test_views[pgbouncer]")]


def test_server_backend_tests_that_ran_pass(tmp_path):
    done = check(report(tmp_path, *PASSED, case("tests.sdk.test_agent_loop", "test_loop[sqlite]", skipped="no SDK")))
    assert (done.returncode, done.stdout) == (
        0, "PostgreSQL: 2 tests ran, none skipped; PgBouncer: 1 tests ran, none skipped\n")


@pytest.mark.parametrize("skipped, named", [
    (case("tests.test_store_on_both_backends", "test_ids[postgresql]", skipped="no PostgreSQL server could be started"),
     "tests.test_store_on_both_backends::test_ids[postgresql] (no PostgreSQL server could be started)"),
    (case("tests.test_cli_backends", "test_sql[postgresql]", skipped="psycopg is not installed"),
     "tests.test_cli_backends::test_sql[postgresql] (psycopg is not installed)"),
    (case("tests.test_query_plans", "test_plans", skipped="PostgreSQL: no server binaries"),
     "tests.test_query_plans::test_plans (PostgreSQL: no server binaries)"),
], ids=["no-server", "no-driver", "reason-names-it"])
def test_a_skipped_server_backend_test_fails(tmp_path, skipped, named):
    done = check(report(tmp_path, *PASSED, skipped))
    assert done.returncode == 1
    assert done.stderr == f"PostgreSQL tests were skipped: {named}\n"


@pytest.mark.parametrize("skipped, named", [
    (case("tests.test_tree", "test_branches[pgbouncer]", skipped="no PgBouncer could be started: not found"),
     "tests.test_tree::test_branches[pgbouncer] (no PgBouncer could be started: not found)"),
    (case("tests.test_fleet", "test_load", skipped="PgBouncer is not installed"),
     "tests.test_fleet::test_load (PgBouncer is not installed)"),
], ids=["no-pooler", "reason-names-it"])
def test_a_skipped_pooler_test_fails(tmp_path, skipped, named):
    done = check(report(tmp_path, *PASSED, skipped))
    assert done.returncode == 1
    assert done.stderr == f"PgBouncer tests were skipped: {named}\n"


def test_no_server_backend_test_at_all_fails(tmp_path):
    done = check(report(tmp_path, case("tests.test_store_on_both_backends", "test_views[sqlite]")))
    assert done.returncode == 1 and done.stderr.startswith("no PostgreSQL test ran (1 tests in ")


def test_no_pooler_test_at_all_fails(tmp_path):
    done = check(report(tmp_path, *PASSED[:3]))
    assert done.returncode == 1 and done.stderr.startswith("no PgBouncer test ran (3 tests in ")
