"""The binding report's params (report.py draws it): no torch, so the params rules load them without it."""

from __future__ import annotations

import dataclasses
from typing import Annotated

from annotated_types import Ge


@dataclasses.dataclass
class ReportParams:
    n_examples: Annotated[int, Ge(0)] = 8  # test programs shown with the model's answer
