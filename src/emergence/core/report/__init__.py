"""Report helpers: HTML pages, plots, provenance, the index."""
