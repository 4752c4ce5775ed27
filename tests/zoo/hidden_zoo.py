"""Runs exported SavedModels in a fresh process where the zoo cannot be imported.

`call_signatures` hands its calls to `zoo.serving.export.run_without_zoo` (a
subprocess whose first `sys.meta_path` finder refuses `zoo`,
`keras_attention`, `keras_hub` and Keras itself, so whatever the exported
graph still needed from them fails loudly). The child loads the SavedModels
with `tf.saved_model.load`, calls their signatures and hands back their
outputs (and which packages it could not import, as proof the blocker ran).

Test files import this file by path (pytest's importlib mode has no
package here):

    spec = importlib.util.spec_from_file_location("hidden_zoo", path)
"""

import os
import pickle
import tempfile

from zoo.serving.export import HIDDEN_PACKAGES, run_without_zoo

#: The packages an export must do without.
HIDDEN = HIDDEN_PACKAGES

CHILD = """\
import pickle

with open(requests, "rb") as f:
    calls, probes = pickle.load(f)
hidden = []
for name in probes:
    try:
        __import__(name)
    except ImportError:
        hidden.append(name)
import tensorflow as tf

loaded = {}
outputs = {"hidden": hidden, "signatures": {}}
for label, (path, signature, arguments) in calls.items():
    if path not in loaded:
        loaded[path] = tf.saved_model.load(path)
        outputs["signatures"][path] = sorted(loaded[path].signatures)
    function = loaded[path].signatures[signature]
    result = function(**{k: tf.constant(v) for k, v in arguments.items()})
    outputs[label] = {k: v.numpy() for k, v in result.items()}
with open(answers, "wb") as f:
    pickle.dump(outputs, f)
"""


def call_signatures(calls, hidden=HIDDEN, timeout=600):
    """Calls signatures of SavedModels in one zoo-less process.

    Args:
        calls: dict `{label: (savedmodel_dir, signature_name, {input_name:
            array})}`; arrays of bytes are object arrays (or lists) of
            `bytes`.
        hidden: the top-level packages the child may not import. Defaults
            to `HIDDEN`.
        timeout: seconds. Defaults to `600`.

    Returns:
        dict `{label: {output_name: np.ndarray}}`, plus `"hidden"` (the
        packages the child failed to import: all of `hidden`) and
        `"signatures"` (`{savedmodel_dir: signature names}`).

    Raises:
        RuntimeError: the child failed (its stderr is in the message).
    """
    with tempfile.TemporaryDirectory(prefix="hidden-zoo-") as folder:
        requests = os.path.join(folder, "requests.pkl")
        answers = os.path.join(folder, "answers.pkl")
        with open(requests, "wb") as f:
            calls = {
                label: (os.path.abspath(path), signature, arguments)
                for label, (path, signature, arguments) in calls.items()
            }
            pickle.dump((calls, tuple(hidden)), f)
        paths = f"requests, answers = {requests!r}, {answers!r}\n"
        run_without_zoo(paths + CHILD, timeout=timeout, hidden=hidden)
        with open(answers, "rb") as f:
            return pickle.load(f)
