# Shared helpers for every study's rules.
P = config["paths"]
SEEDS = config["base"]["seeds"]


def per_seed(path_key, suffix=".parquet"):
    """One file per configured seed under a paths: directory."""
    return expand(P[path_key] + "/seed{seed}" + suffix, seed=SEEDS)
