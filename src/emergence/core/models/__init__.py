"""Model zoo: hooked architectures built by name (registry.py); each module imported on first use."""
