"""Attention layers built on `keras_attention.scores`."""

from keras_attention.layers.masking import causal_mask, masked_softmax, merge_masks
