"""Recurrent Attention Model (Mnih et al., 2014)."""

from zoo.ram.model import (
    ImagePreprocessor,
    LocationPolicy,
    RecurrentAttention,
    RecurrentAttentionModel,
)

__all__ = [
    "ImagePreprocessor",
    "LocationPolicy",
    "RecurrentAttention",
    "RecurrentAttentionModel",
]
