"""Model zoo: hooked architectures built by name (see registry)."""

from emergence.core.models.hooks import HookedModel, HookPoint
from emergence.core.models.registry import architectures, build_model, make_config, model_spec, register
from emergence.core.models.transformer import Transformer, TransformerConfig

# Every architecture registers itself on import; listing them here (not discovering them at run
# time) keeps them in the static import closure, so a stage that builds models depends on each.
from emergence.core.models import attn_only, lstm, mamba2  # noqa: E402,F401  isort: skip

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
