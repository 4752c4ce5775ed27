"""Seq2Seq with attention (Bahdanau 2014, Luong 2015)."""

from zoo.seq2seq.model import Seq2Seq
from zoo.seq2seq.preprocessor import TranslationPreprocessor

__all__ = ["Seq2Seq", "TranslationPreprocessor"]
