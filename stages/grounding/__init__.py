"""Stage scripts of study G (symbol grounding): thin CLIs over emergence.studies.grounding."""
