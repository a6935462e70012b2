"""Test, baseline and replay models, registered under ``oracle``, ``random`` and ``replay`` (see discovery.py; ``replay`` answers from a stored run for ``lmms-eval-plugins score``)."""
