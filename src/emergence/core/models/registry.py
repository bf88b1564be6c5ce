"""The model zoo: architecture name -> (config dataclass, model class).

Every architecture registers itself here, so the training loop, checkpoints
and analyses build models by name and never import a concrete class:
adding an architecture means two new modules named after it, its config
(`<name>_config.py`, no torch) and its model (`<name>.py`, with one
decorator), and its name in `ARCHITECTURES`. Its model module is imported on
first use, so a stage's code (core/code_digest.py) holds only the
architectures it builds, and the params rules (`make_config`) import only the
config, without torch.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from emergence.core.config import did_you_mean
from emergence.core.io import PipelineError

if TYPE_CHECKING:
    import torch.nn as nn

# arch -> its config class, in emergence.core.models.<arch>_config; the model is emergence.core.models.<arch>
ARCHITECTURES = {
    "attn_only": "AttnOnlyConfig",
    "lstm": "LSTMConfig",
    "mamba2": "Mamba2Config",
    "transformer": "TransformerConfig",
}
_ZOO: dict[str, tuple[type, type[nn.Module]]] = {}


def register(arch: str, config_cls: type) -> Callable[[type[nn.Module]], type[nn.Module]]:
    """Class decorator: `@register("transformer", TransformerConfig)`."""

    def deco(model_cls: type[nn.Module]) -> type[nn.Module]:
        if arch in _ZOO:
            raise ValueError(f"architecture '{arch}' registered twice")
        _ZOO[arch] = (config_cls, model_cls)
        model_cls.arch = arch
        return model_cls

    return deco


def architectures() -> list[str]:
    return sorted(ARCHITECTURES)


def make_config(arch: str, values: dict[str, Any], where: str = "model") -> Any:
    """Build the config dataclass of `arch`, rejecting unknown keys by name."""
    if arch in _ZOO:
        config_cls = _ZOO[arch][0]
    else:  # the config alone: no model module, no torch
        _known(arch, where)
        config_cls = getattr(importlib.import_module(f"emergence.core.models.{arch}_config"), ARCHITECTURES[arch])
    names = {f.name for f in dataclasses.fields(config_cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        hint = f" ({did_you_mean(unknown[0], sorted(names)).strip()})" if did_you_mean(unknown[0], names) else ""
        raise PipelineError(f"{where}.{unknown[0]}: unknown key for architecture '{arch}'{hint}")
    config = config_cls(**values)
    if hasattr(config, "validate"):  # name the caller's key (binding_model.n_heads), not "model.n_heads"
        config.validate(where)
    return config


def build_model(arch: str, config: Any | dict[str, Any], where: str = "model") -> nn.Module:
    """Instantiate `arch` from its config dataclass or a plain dict of its fields."""
    if isinstance(config, dict):
        config = make_config(arch, config, where)
    _, model_cls = _lookup(arch, where)
    return model_cls(config)


def model_spec(model: nn.Module) -> dict[str, Any]:
    """JSON-able description that `build_model(**spec)` turns back into the same model."""
    return {"arch": model.arch, "config": dataclasses.asdict(model.config)}


def _known(arch: str, where: str) -> None:
    if arch not in ARCHITECTURES:
        raise PipelineError(f"{where}.arch: unknown architecture '{arch}' (known: {', '.join(architectures())})")


def _lookup(arch: str, where: str) -> tuple[type, type[nn.Module]]:
    if arch not in _ZOO:
        _known(arch, where)
        importlib.import_module(f"emergence.core.models.{arch}")  # registers it
    return _ZOO[arch]
