"""Test and baseline models, registered under ``oracle`` and ``random`` (see discovery.py)."""
