"""Offline test fixtures: a tiny Qwen2.5-VL builder and synthetic media generators."""
