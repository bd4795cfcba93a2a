"""``python -m openhands_memory.cli``: the same app as ``openhands-memory``."""

from . import main

if __name__ == "__main__":
    main()
