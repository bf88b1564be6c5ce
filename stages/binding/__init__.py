"""Stage scripts of study B (variable binding): thin CLIs over emergence.studies.binding."""
