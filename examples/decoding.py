"""Greedy and beam search on a tiny hand-built Markov language model.

The model is a bigram table over eight words. Greedy search takes the most
likely word at every step and ends in a "garden path": "the" is the likelier
first word, but every sentence that starts with "a" is more probable in the
end. Beam search keeps several hypotheses and finds the best sentence, which
the script checks against brute-force enumeration of every sentence.

Both searches use the keras-hub sampler contract:
`next(prompt, cache, index) -> (logits, hidden_states, cache)` returns the
logits of the word at position `index`; this model reads the word at
`index - 1`. The cache here is unused (`None`); a recurrent or Transformer
decoder would keep its state or key/value cache in it, and `BeamSearch` would
tile and reorder it per beam.

Run: `python examples/decoding.py` (a few seconds, any Keras backend).
"""

import itertools

import numpy as np
from keras import ops

from keras_attention.decoding import BeamSearch, GreedySearch

WORDS = ["<pad>", "<s>", "</s>", "the", "a", "cat", "dog", "sat"]
BOS, EOS = 1, 2
BIGRAMS = {
    "<s>": {"the": 0.55, "a": 0.45},
    "the": {"cat": 0.4, "dog": 0.35, "</s>": 0.25},
    "a": {"dog": 0.9, "cat": 0.1},
    "cat": {"sat": 0.6, "</s>": 0.4},
    "dog": {"sat": 0.7, "</s>": 0.3},
    "sat": {"</s>": 1.0},
    "</s>": {"</s>": 1.0},
    "<pad>": {"</s>": 1.0},
}
MAX_LENGTH = 6


def transition_log_probs():
    """`(vocab, vocab)` log-probabilities `log P(next | previous)`."""
    table = np.full((len(WORDS), len(WORDS)), -np.inf, "float32")
    for previous, row in BIGRAMS.items():
        for word, prob in row.items():
            table[WORDS.index(previous), WORDS.index(word)] = np.log(prob)
    return table


TABLE = transition_log_probs()


def next(prompt, cache, index):
    """The next-word logits: the table row of the previous word."""
    previous = ops.take(prompt, index - 1, axis=1)
    return ops.take(TABLE, previous, axis=0), None, cache


def text(sequence):
    words = [WORDS[int(t)] for t in sequence[1:]]
    return " ".join(words[: words.index("</s>") + 1] if "</s>" in words else words)


def brute_force(length_penalty):
    """Every sentence of at most `MAX_LENGTH - 1` words, best first."""
    found = []
    for length in range(1, MAX_LENGTH):
        for body in itertools.product(range(3, len(WORDS)), repeat=length - 1):
            sentence = [BOS, *body, EOS]
            log_prob = sum(TABLE[a, b] for a, b in itertools.pairwise(sentence))
            if np.isfinite(log_prob):
                score = log_prob / ((5.0 + length) / 6.0) ** length_penalty
                found.append((score, sentence))
    return sorted(found, key=lambda item: -item[0])


def main():
    prompt = np.zeros((1, MAX_LENGTH), "int32")
    prompt[:, 0] = BOS
    common = dict(index=1, stop_token_ids=[EOS])

    seqs, scores = GreedySearch()(next, prompt, **common, return_scores=True)
    greedy = ops.convert_to_numpy(seqs)[0]
    print(f"greedy : {text(greedy):24s} log P = {float(scores[0]):.3f}")

    for alpha in (0.0, 0.6):
        beam = BeamSearch(beam_width=3, length_penalty=alpha, return_all_beams=True)
        seqs, scores = beam(next, prompt, **common)
        seqs, scores = ops.convert_to_numpy(seqs)[0], ops.convert_to_numpy(scores)[0]
        print(f"beam (width 3, length_penalty={alpha}):")
        for seq, score in zip(seqs, scores):
            print(f"  {text(seq):24s} score = {score:.3f}")
        best = brute_force(alpha)[0]
        print(f"  brute force best: {text(best[1])} ({best[0]:.3f})")
        assert text(seqs[0]) == text(best[1]), "beam search missed the optimum"
        assert abs(scores[0] - best[0]) < 1e-4
    assert text(greedy) != text(seqs[0]), "greedy should take the garden path"
    print("Beam search found the brute-force optimum; greedy did not.")


if __name__ == "__main__":
    main()
