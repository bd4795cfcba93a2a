"""The stores bench/peers.py measures: one script per peer, each run as a child process by
that peer's own virtual environment (see :mod:`bench.peer_stores.registry`)."""
