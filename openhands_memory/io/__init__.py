"""Import and export: OpenHands SDK conversation folders, legacy (V0) trajectories, JSONL.

* :mod:`.importer` finds out what a path holds and imports it as one new conversation, in
  one transaction: a bad file is named in the error and nothing is written.
* :mod:`.sdk` reads and writes the SDK's on-disk layout (``events/event-NNNNN-<id>.json``
  plus ``base_state.json``).
* :mod:`.legacy` maps legacy OpenHands events (``{"action": ...}`` / ``{"observation": ...}``)
  onto this library's kinds.
* :mod:`.jsonl` reads and writes event dicts, one JSON object a line.

Nothing here is imported by ``import openhands_memory``; the command-line tool loads these
modules only for the commands that need them.
"""
