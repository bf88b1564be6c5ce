"""Training: the shared loop (loop.py), its settings (config.py, no torch), checkpoints and schedules."""
