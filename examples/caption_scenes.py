"""Caption Fashion-MNIST scenes and draw where the model looked for each word.

Run: `python examples/caption_scenes.py`. Loads the shipped preset
`show_attend_tell_fashion_scenes`, captions held-out scenes (built from the
shipped Fashion-MNIST test sample, so no Debian data is needed) with greedy
and beam search, and writes the paper's figure, one attention overlay per
generated word, for the scene with the most items, to
`demo_output/caption_attention.png`.
"""

import argparse

from zoo.captioning.evaluation import attention_correctness
from zoo.captioning.plotting import plot_caption_attention
from zoo.data import scenes
from zoo.show_attend_tell import ShowAttendTell


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="show_attend_tell_fashion_scenes")
    p.add_argument("--scenes", type=int, default=8)
    p.add_argument("--plot", default="demo_output/caption_attention.png")
    args = p.parse_args(argv)

    model = ShowAttendTell.from_preset(args.preset)
    test = scenes.load("test", num_scenes=args.scenes, sample=True, seed=123)
    greedy = model.caption(test["images"], beam_width=1)
    beam, maps = model.caption(test["images"], beam_width=3, return_attention=True)
    for reference, g, b in zip(test["captions"], greedy, beam):
        print(f"REF    {reference}\nGREEDY {g}\nBEAM 3 {b}\n")
    correct = attention_correctness(maps, test["labels"], test["boxes"], (84, 84))
    print(
        f"attention peak on the named item for {correct['peak']:.0f}% of "
        f"{correct['nouns']} nouns"
    )
    # Draw the scene with the most items (the longest reference caption).
    i = max(range(len(beam)), key=lambda k: len(test["captions"][k]))
    path = plot_caption_attention(
        test["images"][i], maps[i]["tokens"], maps[i]["weights"], args.plot, beam[i]
    )
    print(f"figure written to {path}")


if __name__ == "__main__":
    main()
