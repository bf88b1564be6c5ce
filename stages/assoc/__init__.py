"""Stage scripts of study A (token associations): thin CLIs over emergence.studies.assoc."""
