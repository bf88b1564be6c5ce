"""Stage scripts: thin CLIs that read params and inputs, call src/emergence, and write atomically."""
