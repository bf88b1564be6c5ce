"""What every study shares: config, io, stage CLI, model zoo and hooks, training loop, reports, pipeline."""
