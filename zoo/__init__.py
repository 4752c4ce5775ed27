"""zoo: trained attention models built from `keras_attention` layers.

The models land with their issues (Seq2Seq, Transformer, Recurrent Attention
Model, Show-Attend-Tell); `zoo.data` already holds the real-data loaders.
"""

__version__ = "0.1.0"
