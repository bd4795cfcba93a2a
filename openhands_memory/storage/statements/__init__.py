"""The library's statements, grouped by concern: recorders in ``eventsourcing``'s sense.

Each module holds one group, a class over the shared ``Driver`` (``driver.py``: the
connection's ``execute/one/all/executemany`` and the hooks a backend overrides). A group's
class is its own contract: its methods, with their signatures, are what a backend's session
provides (concrete where both backends share the SQL; a backend overrides what its dialect
spells differently). ``storage/session.py`` composes them into ``Session``.
"""
