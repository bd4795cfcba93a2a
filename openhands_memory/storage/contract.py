"""What a backend provides: the storage contract, read off the statement groups.

A datastore (``recorder.Datastore``) owns a connection and hands out sessions. A session is
one transaction's statements: ``Session`` (``session.py``) composes the statement groups of
``statements/`` (and the inspection mixin) over one ``Driver``. Each group's class is its
own contract: its methods and their signatures are what every backend's session provides,
concrete where both backends share the SQL, overridden where a dialect differs; ``Driver``
holds the hooks a backend implements. So there is no second list of signatures here: the
contract is ``Session`` itself, and this module names its parts. Nothing above ``storage/``
calls a session method that is not a statement (``tests/test_session_statements.py`` checks
that, that both backends' sessions keep ``Session``'s signatures, and runs the statements
on both).
"""

from __future__ import annotations

import inspect

from .session import GROUPS, Driver, Session

#: The contract every backend's session meets: ``Session``'s methods, with its signatures.
BackendSession = Session

#: Statement groups' building blocks, which only the implementation calls.
HELPERS = frozenset({"batch_sizes_sql", "batch_statements", "edge_statements", "interval_statements",
                     "over_intervals", "path_statement"})


def _public(cls: type) -> list[str]:
    return [n for n, v in vars(cls).items() if not n.startswith("_") and inspect.isfunction(v)]


#: The driver's hooks and primitives (``statements/driver.py``).
DRIVER = tuple(_public(Driver))
#: Every statement the library runs above the driver, group by group.
STATEMENTS = tuple(n for group in GROUPS for n in _public(group) if n not in HELPERS)

__all__ = ["BackendSession", "DRIVER", "Driver", "GROUPS", "HELPERS", "STATEMENTS"]
