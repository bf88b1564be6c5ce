"""The shipped params.yaml, and copies of it with a few values changed (what a test of a rule starts from)."""

from __future__ import annotations

import copy

import yaml
from conftest import ROOT

SHIPPED = yaml.safe_load((ROOT / "params.yaml").read_text())


def edited(**changes) -> dict:
    """A deep copy of the shipped params with `section__key=value` changes."""
    params = copy.deepcopy(SHIPPED)
    for dotted, value in changes.items():
        name, key = dotted.split("__")
        params[name][key] = value
    return params
