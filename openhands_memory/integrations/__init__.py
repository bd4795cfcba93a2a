"""Adapters that plug this library into agent frameworks (each an optional extra)."""
