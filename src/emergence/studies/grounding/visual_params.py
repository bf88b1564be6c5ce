"""The visual runs' params (visual_inputs.py reads them): no torch, so the params rules load them without it."""

from __future__ import annotations

from dataclasses import dataclass

from emergence.core.io import PipelineError

SETTINGS = ("caption", "image")  # the visual settings: v<ENV> from the caption, or from the image


@dataclass
class VisualRuns:
    settings: list[str]  # caption and/or image
    models: list[str]  # names of grounding_models entries
    seeds: list[int]

    def validate(self, where: str) -> None:
        if not self.settings or set(self.settings) - set(SETTINGS) or len(set(self.settings)) != len(self.settings):
            raise PipelineError(f"{where}.settings: distinct values of {list(SETTINGS)}, got {self.settings}")
        if not self.models or len(set(self.models)) != len(self.models):
            raise PipelineError(f"{where}.models: distinct model names, at least one, got {self.models}")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise PipelineError(f"{where}.seeds: distinct seeds, at least one, got {self.seeds}")

    def names(self, models: list[str] | None = None) -> list[str]:
        """Run names of settings x models x seeds (models: all, or the given subset)."""
        return [run_name(s, m, k) for s in self.settings for m in (models or self.models) for k in self.seeds]


def run_name(setting: str, model: str, seed: int) -> str:
    return f"{setting}_{model}_seed{seed}"
