"""Decoding searches sharing keras-hub's `next(prompt, cache, index)` contract."""

from keras_attention.decoding.beam_search import BeamSearch
from keras_attention.decoding.greedy import GreedySearch
from keras_attention.decoding.sampling import RandomSampler, TopKSampler, TopPSampler

__all__ = ["BeamSearch", "GreedySearch", "RandomSampler", "TopKSampler", "TopPSampler"]
