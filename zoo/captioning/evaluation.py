"""BLEU-1..4 and attention correctness of a captioner on held-out scenes.

Run on a preset (prints the table of the model card):

    python -m zoo.captioning.evaluation show_attend_tell_fashion_scenes
"""

import argparse
import time

import numpy as np

from zoo import progress
from zoo.base.task import Task
from zoo.data import scenes as scene_data

#: Scenes per `caption` call when evaluation shows progress: the task's own
#: decoding batch, so the outputs are those of one call on all scenes.
CAPTION_BATCH = 64


def bleu_scores(hypotheses, references):
    """Corpus BLEU-1..4 with sacreBLEU (cumulative n-gram orders).

    Args:
        hypotheses: list of str.
        references: list of str (one reference each) or list of lists of
            str (several; cut to the smallest count so every segment has as
            many).

    Returns:
        dict with `bleu1` ... `bleu4` (0-100), `signature` (of BLEU-4) and
        `sentences`.

    Example:
    >>> bleu_scores(["a bag above a coat"], ["a bag above a coat"])["bleu4"]
    100.0

    Reference:
        Papineni et al., 2002, "BLEU"; Post, 2018, "A Call for Clarity in
        Reporting BLEU Scores".
    """
    import sacrebleu

    if len(hypotheses) != len(references):
        raise ValueError(
            "Need references for every hypothesis. Received: "
            f"{len(hypotheses)} hypotheses, {len(references)} references"
        )
    refs = [[r] if isinstance(r, str) else list(r) for r in references]
    count = min(len(r) for r in refs) if refs else 1
    streams = [[r[k] for r in refs] for k in range(count)]
    results = {"sentences": len(hypotheses)}
    for n in range(1, 5):
        metric = sacrebleu.metrics.BLEU(max_ngram_order=n)
        results[f"bleu{n}"] = round(metric.corpus_score(hypotheses, streams).score, 2)
        if n == 4:
            results["signature"] = str(metric.get_signature())
    return results


def _cell_boxes(grid_shape, image_size):
    """Pixel bounds `(L, 4)` of every grid cell, `(top, left, bottom, right)`."""
    height, width = grid_shape
    rows = np.linspace(0, image_size[0], height + 1)
    cols = np.linspace(0, image_size[1], width + 1)
    return np.array(
        [
            (rows[i], cols[j], rows[i + 1], cols[j + 1])
            for i in range(height)
            for j in range(width)
        ]
    )


def attention_in_box(weights, box, image_size):
    """Where one attention map puts its peak and its mass, against a box.

    Each grid cell stands for the image region it tiles (an `H x W` grid
    over the image), the usual way attention maps are upsampled.

    Args:
        weights: array `(H, W)`: one step's attention over the grid.
        box: `(top, left, bottom, right)` in pixels (bottom/right exclusive).
        image_size: `(height, width)` of the image in pixels.

    Returns:
        `(peak_inside, mass_inside)`: whether the centre of the most
        attended cell lies in the box, and the share of the attention mass
        that falls in the box.

    Example:
    >>> w = np.zeros((2, 2)); w[0, 1] = 1.0
    >>> attention_in_box(w, (0, 10, 10, 20), (20, 20))
    (True, 1.0)
    """
    weights = np.asarray(weights, "float64")
    cells = _cell_boxes(weights.shape, image_size)
    flat = weights.reshape(-1)
    top, left, bottom, right = box
    peak = cells[int(np.argmax(flat))]
    centre = ((peak[0] + peak[2]) / 2, (peak[1] + peak[3]) / 2)
    peak_inside = bool(top <= centre[0] < bottom and left <= centre[1] < right)
    overlap_rows = np.clip(
        np.minimum(cells[:, 2], bottom) - np.maximum(cells[:, 0], top), 0, None
    )
    overlap_cols = np.clip(
        np.minimum(cells[:, 3], right) - np.maximum(cells[:, 1], left), 0, None
    )
    area = (cells[:, 2] - cells[:, 0]) * (cells[:, 3] - cells[:, 1])
    share = overlap_rows * overlap_cols / area
    total = flat.sum()
    mass = float((flat * share).sum() / total) if total > 0 else 0.0
    return peak_inside, round(mass, 6)


def attention_correctness(attention, labels, boxes, image_size, offset=0):
    """Share of generated nouns whose attention falls on the named item.

    For every generated word that names an item of the scene (a noun of
    `zoo.data.scenes.NOUNS` whose class is in the scene), the attention of
    the step that emitted it is compared with that item's box. With
    `offset=-1` the step before the noun is checked instead (a model may
    read an object one word early, e.g. while emitting "a").

    Args:
        attention: list of dicts `{"tokens", "weights" (n, H, W)}`, one per
            scene (`CaptioningTask.caption(..., return_attention=True)`).
        labels: int array `(N, max_items)` of the scenes (`-1` padded).
        boxes: int array `(N, max_items, 4)`.
        image_size: `(height, width)`.
        offset: int. Steps from the noun to the attention checked. Defaults
            to `0`.

    Returns:
        dict with `nouns` (how many were checked), `peak` (% whose attention
        peak lies in the box), `mass` (% with at least half the attention
        mass in the box), `either` (% with one or the other) and
        `mean_mass` (mean % of the mass in the box).
    """
    noun_class = {noun: k for k, noun in enumerate(scene_data.NOUNS)}
    peaks, masses = [], []
    for maps, scene_labels, scene_boxes in zip(attention, labels, boxes):
        items = {int(k): box for k, box in zip(scene_labels, scene_boxes) if k >= 0}
        for step, token in enumerate(maps["tokens"]):
            k = noun_class.get(token)
            if (
                k is None
                or k not in items
                or not 0 <= step + offset < len(maps["weights"])
            ):
                continue
            weights = maps["weights"][step + offset]
            peak, mass = attention_in_box(weights, items[k], image_size)
            peaks.append(peak)
            masses.append(mass)
    if not peaks:
        return {"nouns": 0, "peak": 0.0, "mass": 0.0, "either": 0.0, "mean_mass": 0.0}
    peaks, masses = np.array(peaks), np.array(masses)
    return {
        "nouns": int(len(peaks)),
        "peak": round(100 * float(peaks.mean()), 2),
        "mass": round(100 * float((masses >= 0.5).mean()), 2),
        "either": round(100 * float((peaks | (masses >= 0.5)).mean()), 2),
        "mean_mass": round(100 * float(masses.mean()), 2),
    }


def caption_errors(hypotheses, references, top=8):
    """Sorts scene captions into exact, wrong-noun, wrong-relation, wrong-count.

    Args:
        hypotheses: list of str.
        references: list of str (scene captions).
        top: int. Most frequent noun substitutions to list. Defaults to 8.

    Returns:
        dict with the counts `exact`, `noun`, `relation`, `noun+relation`,
        `count` (a different number of items) and `substitutions`: the most
        frequent `"reference->output"` noun pairs with their counts.

    Example:
    >>> caption_errors(["a top", "a bag above a coat"], ["a shirt", "a bag below a coat"])["noun"]
    1
    """
    nouns = set(scene_data.NOUNS)
    kinds = {"exact": 0, "noun": 0, "relation": 0, "noun+relation": 0, "count": 0}
    substitutions = {}
    for hyp, ref in zip(hypotheses, references):
        if hyp == ref:
            kinds["exact"] += 1
            continue
        h_nouns = [w for w in hyp.split() if w in nouns]
        r_nouns = [w for w in ref.split() if w in nouns]
        if len(h_nouns) != len(r_nouns):
            kinds["count"] += 1
            continue
        frame_h = ["N" if w in nouns else w for w in hyp.split()]
        frame_r = ["N" if w in nouns else w for w in ref.split()]
        wrong_noun, wrong_relation = h_nouns != r_nouns, frame_h != frame_r
        key = "+".join(
            k for k, bad in (("noun", wrong_noun), ("relation", wrong_relation)) if bad
        )
        kinds[key] += 1
        for a, b in zip(r_nouns, h_nouns):
            if a != b:
                substitutions[f"{a}->{b}"] = substitutions.get(f"{a}->{b}", 0) + 1
    ranked = sorted(substitutions.items(), key=lambda kv: (-kv[1], kv[0]))
    return {**kinds, "substitutions": dict(ranked[:top])}


def evaluate_scenes(model, test, beam_widths=(1, 3), limit=None, examples=3):
    """BLEU-1..4 and attention correctness on scenes, for each beam width.

    Args:
        model: a captioner (`zoo.captioning.CaptioningTask`) with its
            preprocessor.
        test: a scenes dict (`zoo.data.scenes.load("test")`).
        beam_widths: sequence of int. Defaults to `(1, 3)`.
        limit: int or None. Use the first `limit` scenes.
        examples: int. Captions printed per beam width.

    Returns:
        `{"beam1": {...}, "beam3": {...}}`, each with the BLEU scores,
        `attention` (see `attention_correctness`) and `decode_seconds`.
    """
    n = len(test["captions"]) if limit is None else limit
    images = test["images"][:n]
    references = test["captions"][:n]
    image_size = images.shape[1:3]
    results = {}
    for width in beam_widths:
        start = time.time()
        captioned = progress.in_batches(  # a bar on a terminal's stderr
            images,
            CAPTION_BATCH,
            lambda batch, width=width: list(
                zip(*model.caption(batch, beam_width=width, return_attention=True))
            ),
            "scenes",
            f"beam {width}: compiling the search (first call)",
        )
        hypotheses = [text for text, _ in captioned]
        attention = [maps for _, maps in captioned]
        scores = bleu_scores(hypotheses, references)
        scores["attention"] = attention_correctness(
            attention, test["labels"][:n], test["boxes"][:n], image_size
        )
        scores["attention_step_before"] = attention_correctness(
            attention, test["labels"][:n], test["boxes"][:n], image_size, offset=-1
        )
        scores["errors"] = caption_errors(hypotheses, references)
        scores["exact_match"] = round(
            100 * float(np.mean([h == r for h, r in zip(hypotheses, references)])), 2
        )
        scores["decode_seconds"] = round(time.time() - start, 1)
        results[f"beam{width}"] = scores
        a = scores["attention"]
        print(
            f"{_label(model)} beam {width}: BLEU-1 {scores['bleu1']:.2f} "
            f"BLEU-2 {scores['bleu2']:.2f} BLEU-3 {scores['bleu3']:.2f} "
            f"BLEU-4 {scores['bleu4']:.2f} | exact {scores['exact_match']:.1f}% | "
            f"attention correctness: peak {a['peak']:.1f}%, mass>=0.5 "
            f"{a['mass']:.1f}%, either {a['either']:.1f}% of {a['nouns']} nouns | "
            f"{scores['sentences']} scenes, {scores['decode_seconds']} s"
        )
        b = scores["attention_step_before"]
        print(
            f"  attention one step before the noun: peak {b['peak']:.1f}%, "
            f"mass>=0.5 {b['mass']:.1f}%"
        )
        e = scores["errors"]
        print(
            f"  errors: {e['noun']} noun, {e['relation']} relation, "
            f"{e['noun+relation']} both, {e['count']} item count; "
            f"{e['substitutions']}"
        )
        print(f"  {scores['signature']}")
        for hyp, ref in list(zip(hypotheses, references))[:examples]:
            print(f"  OUT {hyp}\n  REF {ref}")
    return results


def _label(model):
    """How the printed scores name the model: its attention, else its class."""
    return getattr(model, "attention", None) or type(model).__name__


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("preset", help="preset name or directory")
    p.add_argument("--test-scenes", type=int, default=2000)
    p.add_argument("--beam-widths", default="1,3")
    p.add_argument("--sample", action="store_true", help="shipped Fashion-MNIST sample")
    args = p.parse_args(argv)
    model = Task.from_preset(args.preset)
    if model.kind != "captioning":
        raise ValueError(
            f"`preset` must be a captioner's. Received: preset={args.preset!r} "
            f"(a {type(model).__name__}, kind {model.kind})"
        )
    data = model.preset_metadata.get("data", {})
    test = scene_data.load(
        "test",
        num_scenes=args.test_scenes,
        canvas_size=data.get("canvas_size", 84),
        sample=args.sample,
    )
    widths = [int(w) for w in args.beam_widths.split(",")]
    return evaluate_scenes(model, test, widths)


if __name__ == "__main__":
    main()
