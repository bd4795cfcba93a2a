"""`python cli.py ...` runs the same command-line app as the installed `openhands-memory`."""

from openhands_memory.cli import main

if __name__ == "__main__":
    main()
