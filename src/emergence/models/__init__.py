"""Model zoo: hooked architectures built by name (see registry)."""
from emergence.models.hooks import HookedModel, HookPoint
from emergence.models.registry import architectures, build_model, make_config, model_spec, register
from emergence.models.transformer import Transformer, TransformerConfig

__all__ = [
    "HookPoint",
    "HookedModel",
    "Transformer",
    "TransformerConfig",
    "architectures",
    "build_model",
    "make_config",
    "model_spec",
    "register",
]
