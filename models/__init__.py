"""Named hardware and kernels as parameter sets, each parameter citing its source."""

from .units import (
    ALIASES,
    SCALED_INPUT_NAMES,
    SCALED_KINDS,
    SCALED_RECIPES,
    SCALED_UNIT_NAMES,
    UNIT_INPUTS,
    UNIT_INSTRUCTIONS,
    UNIT_MIXED_INPUTS,
    UNIT_NAMES,
    Unit,
    scaled_input,
    unit,
)

__all__ = [
    "Unit",
    "unit",
    "UNIT_NAMES",
    "UNIT_INPUTS",
    "UNIT_MIXED_INPUTS",
    "UNIT_INSTRUCTIONS",
    "ALIASES",
    "SCALED_UNIT_NAMES",
    "SCALED_KINDS",
    "SCALED_INPUT_NAMES",
    "SCALED_RECIPES",
    "scaled_input",
]
