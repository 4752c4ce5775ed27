"""Attention layers built on `keras_attention.scores`."""

from keras_attention.layers.attention import Attention
from keras_attention.layers.chunked import chunked_attention, dropout_keep_mask
from keras_attention.layers.glimpse import GlimpseNetwork, GlimpseSensor
from keras_attention.layers.grouped_query_attention import GroupedQueryAttention
from keras_attention.layers.image_attention import ImageSelfAttention
from keras_attention.layers.masking import causal_mask, masked_softmax, merge_masks
from keras_attention.layers.multi_head_attention import MultiHeadAttention
from keras_attention.layers.position import (
    PositionEmbedding,
    SinusoidalPositionEncoding,
)
from keras_attention.layers.recurrent import AttentionDecoder, AttentionDecoderCell
from keras_attention.layers.score_mods import (
    ALiBi,
    RelativePositionBias,
    ScoreMod,
    ScoreMods,
    SegmentMask,
    SoftCap,
)
from keras_attention.layers.transformer import (
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)
from keras_attention.layers.windowed import windowed_attention

__all__ = [
    "ALiBi",
    "Attention",
    "AttentionDecoder",
    "AttentionDecoderCell",
    "GlimpseNetwork",
    "GlimpseSensor",
    "GroupedQueryAttention",
    "ImageSelfAttention",
    "MultiHeadAttention",
    "PositionEmbedding",
    "RelativePositionBias",
    "ScoreMod",
    "ScoreMods",
    "SegmentMask",
    "SinusoidalPositionEncoding",
    "SoftCap",
    "TransformerDecoderBlock",
    "TransformerEncoderBlock",
    "causal_mask",
    "chunked_attention",
    "dropout_keep_mask",
    "masked_softmax",
    "merge_masks",
    "windowed_attention",
]
