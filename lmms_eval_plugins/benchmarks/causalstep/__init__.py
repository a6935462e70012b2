"""CausalStep: records, prompts, answer parsing, scoring and report section (spec: :mod:`.spec`)."""
