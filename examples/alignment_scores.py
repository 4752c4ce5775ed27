"""Every alignment function scoring the same query against the same keys.

Run: `python examples/alignment_scores.py`. Prints, for each score, the raw
scores of one query against four keys and the softmax weights they give.
"""

import numpy as np

from keras_attention import scores


def main():
    rng = np.random.default_rng(0)
    query = rng.normal(size=(1, 1, 8)).astype("float32")
    keys = rng.normal(size=(1, 4, 8)).astype("float32")
    keys[0, 2] = query[0, 0] * 2.0  # key 2 points the same way as the query
    for name in [
        "dot",
        "scaled_dot",
        "general",
        "additive",
        "concat",
        "perceptron",
        "cosine",
        "location",
    ]:
        layer = scores.get(name)
        raw = np.asarray(layer(query, keys))[0, 0]
        weights = np.exp(raw - raw.max())
        weights /= weights.sum()
        print(f"{name:11s} scores {np.round(raw, 2)}  weights {np.round(weights, 2)}")
    print(
        "dot, scaled_dot and cosine (no weights) prefer key 2, which is "
        "parallel to the query; the parametrised scores start random and learn."
    )


if __name__ == "__main__":
    main()
