"""Model zoo: hooked architectures built by name (see registry); each module imported on first use."""

from emergence.core.models.hooks import HookedModel, HookPoint
from emergence.core.models.registry import architectures, build_model, make_config, model_spec, register

__all__ = ["HookPoint", "HookedModel", "architectures", "build_model", "make_config", "model_spec", "register"]
