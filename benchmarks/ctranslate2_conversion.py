"""`zoo.Transformer` as a CTranslate2 model, and CTranslate2 translating like ours.

CTranslate2's `TransformerSpec` expresses the zoo's pre-norm Transformer
translator exactly: one shared token table (scaled by `sqrt(d_model)`, tied
to the output projection), the backbone's own sinusoid table loaded as the
position encodings (ours interleaves sine and cosine, CTranslate2's default
concatenates them), pre-norm blocks with ReLU feed-forward layers and a final
layer normalisation after each stack, LayerNorm epsilon from the config.
`transformer_spec` fills the spec from the Keras weights; `convert` saves it.

What CTranslate2 cannot express is our beam search's ranking (GNMT's length
penalty and our stop rule): `CTranslate2Translator` asks for every finished
hypothesis with its log-probability (`length_penalty=0`) and re-ranks them
with our formula, `log P(Y) / ((5 + |Y|) / 6) ** alpha` (`|Y|` counts the
`[END]`), as `keras_attention.decoding.BeamSearch` ranks its finished set.

Imported by `benchmarks/decode_engines.py` and its test; CTranslate2 is a
benchmark dependency (`pip install -e .[bench]`), never the library's.
"""

import os

import numpy as np
from keras import ops

#: Rows of the position table written into the model: the longest sequence
#: CTranslate2 can then encode or decode.
MAX_POSITIONS = 512


def _numpy(variable):
    return np.asarray(ops.convert_to_numpy(variable), "float32")


class _Weights:
    """The backbone's weights by path (`decoder_block_0/cross_attention/...`)."""

    def __init__(self, backbone):
        self.values = {w.path: w for w in backbone.weights}

    def __call__(self, path):
        return _numpy(self.values[path])

    def linear(self, spec, scope):
        """A Keras Dense/EinsumDense at `scope` as CTranslate2's `(out, in)`."""
        kernel, bias = self(f"{scope}/kernel"), self(f"{scope}/bias")
        if kernel.ndim == 3 and kernel.shape[-1] == bias.size:  # (heads, dim, out)
            kernel = kernel.reshape(-1, kernel.shape[-1])
        else:  # (in, out) or (in, heads, dim)
            kernel = kernel.reshape(kernel.shape[0], -1)
        spec.weight = np.ascontiguousarray(kernel.T)
        spec.bias = bias.reshape(-1)

    def layer_norm(self, spec, scope):
        spec.gamma, spec.beta = self(f"{scope}/gamma"), self(f"{scope}/beta")

    def attention(self, spec, scope, norm):
        """Query, key and value (fused as CTranslate2 wants them), the output."""
        from ctranslate2.converters import utils
        from ctranslate2.specs import common_spec

        parts = [common_spec.LinearSpec() for _ in range(3)]
        for part, name in zip(parts, ("query", "key", "value")):
            self.linear(part, f"{scope}/{name}")
        if len(spec.linear) == 2:  # self-attention: one query-key-value linear
            utils.fuse_linear(spec.linear[0], parts)
        else:  # cross-attention: the query, then one key-value linear
            spec.linear[0] = parts[0]
            utils.fuse_linear(spec.linear[1], parts[1:])
        self.linear(spec.linear[-1], f"{scope}/attention_output")
        self.layer_norm(spec.layer_norm, norm)

    def feedforward(self, spec, block):
        self.layer_norm(spec.layer_norm, f"{block}/feedforward_layer_norm")
        self.linear(spec.linear_0, f"{block}/feedforward_intermediate_dense")
        self.linear(spec.linear_1, f"{block}/feedforward_output_dense")


def position_table(backbone, length=MAX_POSITIONS):
    """The backbone's sinusoid encodings of positions `0 .. length - 1`."""
    zeros = np.zeros((1, length, backbone.hidden_dim), "float32")
    return _numpy(backbone.position_encoding(zeros))[0]


def check_convertible(backbone):
    """Raises a `ValueError` naming what CTranslate2's spec cannot hold."""
    unsupported = {
        "normalize_first": (backbone.normalize_first, True),
        "score": (backbone.score, "scaled_dot"),
        "tie_embeddings": (backbone.tie_embeddings, True),
        "target_vocabulary_size": (backbone.target_vocabulary_size, None),
    }
    for name, (value, wanted) in unsupported.items():
        if value != wanted:
            raise ValueError(
                f"The CTranslate2 conversion needs {name}={wanted!r}. "
                f"Received: {name}={value!r}"
            )


def transformer_spec(model):
    """A filled, validated `ctranslate2.specs.TransformerSpec` of `model`.

    Args:
        model: a `zoo.Transformer` (pre-norm, scaled dot product, tied
            embeddings, one vocabulary) with its `TranslationPreprocessor`.

    Returns:
        The spec; `spec.save(directory)` writes the model.
    """
    from ctranslate2.specs import TransformerSpec

    backbone = model.backbone
    check_convertible(backbone)
    spec = TransformerSpec.from_config(
        (len(backbone.encoder_blocks), len(backbone.decoder_blocks)),
        backbone.num_heads,
        pre_norm=True,
    )
    weights = _Weights(backbone)
    table = weights("token_embedding/embeddings")
    positions = position_table(backbone)
    for stack in (spec.encoder, spec.decoder):
        stack.scale_embeddings = True
        stack.position_encodings.encodings = positions
    spec.encoder.embeddings[0].weight = table
    spec.decoder.embeddings.weight = table
    spec.decoder.projection.weight = table
    weights.layer_norm(spec.encoder.layer_norm, "encoder_output_norm")
    weights.layer_norm(spec.decoder.layer_norm, "decoder_output_norm")
    for i, layer in enumerate(spec.encoder.layer):
        block = f"encoder_block_{i}"
        weights.attention(
            layer.self_attention,
            f"{block}/self_attention_layer",
            f"{block}/self_attention_layer_norm",
        )
        weights.feedforward(layer.ffn, block)
    for i, layer in enumerate(spec.decoder.layer):
        block = f"decoder_block_{i}"
        weights.attention(
            layer.self_attention,
            f"{block}/self_attention",
            f"{block}/self_attention_layer_norm",
        )
        weights.attention(
            layer.attention,
            f"{block}/cross_attention",
            f"{block}/cross_attention_layer_norm",
        )
        weights.feedforward(layer.ffn, block)
    spec.config.layer_norm_epsilon = backbone.layer_norm_epsilon
    for name, token in (("unk", "[UNK]"), ("bos", "[START]"), ("eos", "[END]")):
        setattr(spec.config, f"{name}_token", token)
    spec.config.decoder_start_token = "[START]"
    pre = model.preprocessor
    spec.register_source_vocabulary(pre.source_tokenizer.get_vocabulary())
    spec.register_target_vocabulary(pre.target_tokenizer.get_vocabulary())
    spec.validate()
    return spec


def convert(model, directory):
    """Writes `model` as a float32 CTranslate2 model in `directory`; returns it.

    CTranslate2 quantizes when it loads (`compute_type="int8"`), so one
    conversion serves the float32 and the int8 engines.
    """
    os.makedirs(directory, exist_ok=True)
    transformer_spec(model).save(str(directory))
    return str(directory)


def gnmt_score(log_probability, length, alpha):
    """Our beam's ranking score: `log P(Y) / ((5 + |Y|) / 6) ** alpha`."""
    return log_probability / ((5.0 + length) / 6.0) ** alpha


class CTranslate2Translator:
    """Translates sentences with a converted model as `translate()` does.

    The preset's preprocessor tokenizes (`[END]` appended, as our encoder
    reads it) and detokenizes; CTranslate2 decodes. A beam search returns
    its `beam_width` finished hypotheses, re-ranked by `gnmt_score`.

    Args:
        directory: str. The converted model.
        preprocessor: the preset's `TranslationPreprocessor`.
        compute_type: str. `"float32"` or `"int8"` (quantized at load).
        length_penalty: float. Our alpha. Defaults to `0.6`, as `translate`.
        threads: int. CTranslate2's intra-op threads. Defaults to `0`
            (CTranslate2's choice: one per core).
    """

    def __init__(
        self, directory, preprocessor, compute_type, length_penalty=0.6, threads=0
    ):
        import ctranslate2

        self.translator = ctranslate2.Translator(
            directory, device="cpu", compute_type=compute_type, intra_threads=threads
        )
        self.preprocessor = preprocessor
        self.length_penalty = length_penalty
        self.source_vocabulary = preprocessor.source_tokenizer.get_vocabulary()
        target = preprocessor.target_tokenizer.get_vocabulary()
        self.target_ids = {token: i for i, token in enumerate(target)}

    def source_tokens(self, texts):
        """The subword pieces our encoder reads, `[END]` included, per text."""
        import tensorflow as tf

        pre = self.preprocessor
        ids = np.asarray(pre(tf.constant(texts))["encoder_token_ids"])
        return [
            [self.source_vocabulary[i] for i in row[row != pre.source_pad_id]]
            for row in ids
        ]

    def decode(self, tokens, beam_width, max_length, batch_size=64):
        """Target pieces of each source (without `[END]`): ours best first."""
        results = self.translator.translate_batch(
            tokens,
            max_batch_size=batch_size,
            beam_size=beam_width,
            num_hypotheses=beam_width,
            length_penalty=0.0,
            return_scores=True,
            max_decoding_length=max_length,
        )
        best = []
        for result in results:
            scored = [
                # `[END]` counts in |Y| unless the search ran out of length.
                (gnmt_score(s, len(h) + (len(h) < max_length), self.length_penalty), h)
                for h, s in zip(result.hypotheses, result.scores)
            ]
            best.append(max(scored, key=lambda pair: pair[0])[1])
        return best

    def detokenize(self, pieces):
        """Sentences from target pieces, by the preprocessor's `detokenize`."""
        pre = self.preprocessor
        width = max(len(p) for p in pieces) + 1
        ids = np.full((len(pieces), width), pre.target_pad_id, "int32")
        for row, piece in enumerate(pieces):
            ids[row, : len(piece)] = [self.target_ids[t] for t in piece]
            ids[row, len(piece)] = pre.end_id
        return list(pre.detokenize(ids))

    def __call__(self, texts, beam_width=4, max_length=None):
        """Translations of `texts` (a list of str), as `translate()` gives them."""
        max_length = max_length or self.preprocessor.target_sequence_length
        pieces = self.decode(self.source_tokens(texts), beam_width, max_length)
        return self.detokenize(pieces)
