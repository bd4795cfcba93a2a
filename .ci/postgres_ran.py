"""Fail unless the PostgreSQL half of the test suite really ran.

    python .ci/postgres_ran.py report.xml      # pytest --junitxml=report.xml

``OHM_REQUIRE_POSTGRES=1`` makes a missing server fail the tests that need one; this check
catches what it cannot: a PostgreSQL test skipped for any other reason (a stray skip mark, a
missing module), or a run that collected none at all (a renamed parameter, a narrowed path).
A PostgreSQL test is one whose name or module names PostgreSQL (the ``[postgresql]`` backend
parameter, ``test_postgres_*``), or one skipped with a reason that names it.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET


def verdict(report: str) -> tuple[bool, str]:
    """(whether the PostgreSQL tests ran and none was skipped, one line saying so)."""
    cases = list(ET.parse(report).iter("testcase"))
    ran, skipped = 0, []
    for case in cases:
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        skip = case.find("skipped")
        reason = "" if skip is None else (skip.get("message") or "")
        is_postgres = "postgres" in name.lower()
        if skip is not None and (is_postgres or "postgres" in reason.lower()):
            skipped.append(f"{name} ({reason})" if reason else name)
        elif is_postgres and skip is None:
            ran += 1
    if skipped:
        more = f" and {len(skipped) - 1} more" if len(skipped) > 1 else ""
        return False, f"PostgreSQL tests were skipped: {skipped[0]}{more}"
    if not ran:
        return False, f"no PostgreSQL test ran ({len(cases)} tests in {report})"
    return True, f"PostgreSQL: {ran} tests ran, none skipped"


if __name__ == "__main__":
    ok, line = verdict(sys.argv[1])
    print(line, file=sys.stdout if ok else sys.stderr)
    sys.exit(0 if ok else 1)
