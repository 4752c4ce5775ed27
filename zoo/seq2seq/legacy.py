"""Reading `Seq2Seq` weights saved before the backbone split (old presets).

The shipped preset's `model.weights.h5` stores every layer at the top level
(`layers/attention_decoder/...`, `layers/embedding_1/...`): the layout of
one functional graph from the token ids to the logits. `legacy_view` builds
that graph again from the same layer objects (the backbone's graph with the
head applied to its output), so Keras names the layers as it did then and
`load_weights` fills this model's variables.
"""

import h5py
import keras

#: A top-level layer group that only the old layout has.
LEGACY_MARKER = "layers/attention_decoder"


def is_legacy_weights(filepath):
    """Whether `filepath` is an `.h5` weights file in the pre-backbone layout."""
    path = str(filepath)
    if not path.endswith(".h5"):
        return False
    with h5py.File(path, "r") as f:
        return LEGACY_MARKER in f


def legacy_view(model):
    """A functional model sharing `model`'s layers, in the old layer layout."""
    backbone = model.backbone
    features = backbone.get_layer("deep_output").output
    logits = model.projection(model.output_dropout(features))
    return keras.Model(backbone.inputs, logits)


def load_legacy_weights(model, filepath):
    """Loads an old-layout weights file into `model` (a `Seq2Seq`)."""
    legacy_view(model).load_weights(filepath)
