"""Fail unless the PostgreSQL half of the test suite really ran, and its run through PgBouncer.

    python .ci/postgres_ran.py report.xml      # pytest --junitxml=report.xml

``OHM_REQUIRE_POSTGRES=1`` (and ``OHM_REQUIRE_PGBOUNCER=1``) make a missing server (pooler)
fail the tests that need one; this check catches what they cannot: such a test skipped for
any other reason (a stray skip mark, a missing module), or a run that collected none at all
(a renamed parameter, a narrowed path). A PostgreSQL test is one whose name or module names
PostgreSQL (the ``[postgresql]`` backend parameter, ``test_postgres_*``), or one skipped with
a reason that names it; a PgBouncer test likewise names PgBouncer (``[pgbouncer]``).
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

#: What each kind of test is called in messages, and the word its tests' names hold.
KINDS = (("PostgreSQL", "postgres"), ("PgBouncer", "pgbouncer"))


def verdict(report: str) -> tuple[bool, str]:
    """(whether the PostgreSQL and PgBouncer tests ran and none was skipped, one line saying so)."""
    cases = list(ET.parse(report).iter("testcase"))
    said = []
    for kind, word in KINDS:
        ran, skipped = 0, []
        for case in cases:
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            skip = case.find("skipped")
            reason = "" if skip is None else (skip.get("message") or "")
            named = word in name.lower()
            if skip is not None and (named or word in reason.lower()):
                skipped.append(f"{name} ({reason})" if reason else name)
            elif named and skip is None:
                ran += 1
        if skipped:
            more = f" and {len(skipped) - 1} more" if len(skipped) > 1 else ""
            return False, f"{kind} tests were skipped: {skipped[0]}{more}"
        if not ran:
            return False, f"no {kind} test ran ({len(cases)} tests in {report})"
        said.append(f"{kind}: {ran} tests ran, none skipped")
    return True, "; ".join(said)


if __name__ == "__main__":
    ok, line = verdict(sys.argv[1])
    print(line, file=sys.stdout if ok else sys.stderr)
    sys.exit(0 if ok else 1)
