"""Tests that run the real OpenHands SDK (Python >= 3.12). The suite's main run, on any
Python, runs them in the SDK's environment (tests/test_openhands_sdk.py)."""
