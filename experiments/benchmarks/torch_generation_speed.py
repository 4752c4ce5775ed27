"""PyTorch generation of a preset: two checkouts' libraries, alternated.

Two worker processes load the same preset under `KERAS_BACKEND=torch`, one
importing `keras_attention` and `zoo` from `--baseline` (another checkout,
e.g. the main branch) and one from this checkout. Each first writes what
it generates for the first `--compare` test inputs (beam search and greedy:
translations or captions) and the logits of every greedy step, `next` run
again over the baseline's greedy tokens with a tensor index as the search
passes it; the parent counts the outputs that differ and the largest logit
difference. Then the workers take turns, `--rounds` times: each round
each of them decodes the first `--inputs` test inputs once per decoding
(the user verb, `translate` or `caption`, batches of 64), timed; the
parent prints every round and the median of the per-round ratios new /
baseline (the two share each round's load), in wall-clock seconds and in
the worker's CPU seconds (`time.process_time`, less moved by other
processes on a shared machine). Run it under `taskset -c 1` with one
thread, as in the command below.

    KERAS_BACKEND=torch OMP_NUM_THREADS=1 nice -n 10 taskset -c 1 python \\
        experiments/benchmarks/torch_generation_speed.py --baseline /work/main \\
        --preset transformer_bible_en_es --inputs 16 --rounds 5
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def load_inputs(model, count):
    """The first `count` test inputs of the preset's kind, and its verb."""
    if model.kind == "translation":
        from zoo.data import bible

        return [en for en, _, _ in bible.load_pairs("test")][:count], model.translate
    from zoo.data import scenes

    data = model.preset_metadata.get("data", {})
    test = scenes.load(
        "test", num_scenes=count, canvas_size=data.get("canvas_size", 84)
    )

    return test["images"][:count], model.caption


def prepared(model, inputs):
    """The batch `generate` takes for `inputs` (source ids or images)."""
    import numpy as np
    import tensorflow as tf

    pre = model.generation_preprocessor()
    if model.kind == "translation":
        ids = np.asarray(pre(tf.constant(list(inputs)))["encoder_token_ids"])
        return ids[:, : max(1, int((ids != pre.source_pad_id).sum(1).max()))]
    return pre.images(inputs)


def step_logits(model, batch, tokens):
    """float32 `(batch, T, vocab)`: `next` over `tokens`, a tensor index."""
    import numpy as np
    from keras import ops

    prompt = ops.convert_to_tensor(np.asarray(tokens, "int32"))
    cache = model.encode(batch, tokens.shape[1] - 1)
    rows = []
    for index in range(1, tokens.shape[1]):
        index = ops.convert_to_tensor(index, "int32")
        logits, _, cache = model.next(prompt, cache, index)
        rows.append(ops.convert_to_numpy(ops.cast(logits, "float32")))
    return np.stack(rows, axis=1)


def worker(args):
    sys.path.insert(0, args.library)
    import numpy as np
    import torch

    torch.set_num_threads(1)
    from zoo.base.task import Task

    model = Task.from_preset(args.preset)
    inputs, verb = load_inputs(model, max(args.inputs, args.compare))
    widths = (args.beam_width, 1)
    outputs = {w: list(verb(inputs[: args.compare], beam_width=w)) for w in widths}
    batch = prepared(model, inputs[: args.compare])
    with torch.no_grad():
        greedy = model.generate(batch, beam_width=1)
        reference = greedy if args.tokens is None else np.load(args.tokens)
        logits = step_logits(model, batch, reference)
    np.savez(args.dump, tokens=greedy, logits=logits)
    print(json.dumps({"outputs": {str(w): o for w, o in outputs.items()}}), flush=True)
    for line in sys.stdin:
        if line.strip() != "time":
            break
        seconds = {}
        for width in widths:
            start, cpu = time.perf_counter(), time.process_time()
            verb(inputs[: args.inputs], beam_width=width)
            seconds[str(width)] = (
                time.perf_counter() - start,
                time.process_time() - cpu,
            )
        print(json.dumps(seconds), flush=True)


def start(args, library, dump, tokens=None):
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        f"--library={library}",
        f"--preset={args.preset}",
        f"--inputs={args.inputs}",
        f"--compare={args.compare}",
        f"--beam-width={args.beam_width}",
        f"--dump={dump}",
    ]
    if tokens is not None:
        command.append(f"--tokens={tokens}")
    env = {**os.environ, "KERAS_BACKEND": "torch", "PYTHONPATH": library}
    return subprocess.Popen(
        command, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def read(process):
    line = process.stdout.readline()
    if not line:
        raise RuntimeError(f"worker exited with status {process.wait()}")
    return json.loads(line)


def start_and_compare(args, folder):
    """Starts both workers; prints how their outputs and logits differ."""
    import numpy as np

    dumps = {name: os.path.join(folder, f"{name}.npz") for name in ("old", "new")}
    old = start(args, os.path.abspath(args.baseline), dumps["old"])
    old_outputs = read(old)["outputs"]
    tokens = os.path.join(folder, "tokens.npy")
    np.save(tokens, np.load(dumps["old"])["tokens"])
    new = start(args, ROOT, dumps["new"], tokens)
    new_outputs = read(new)["outputs"]
    for width, texts in old_outputs.items():
        differ = sum(a != b for a, b in zip(texts, new_outputs[width]))
        print(f"beam width {width}: {differ} of {len(texts)} outputs differ")
    old_dump, new_dump = np.load(dumps["old"]), np.load(dumps["new"])
    same = np.array_equal(old_dump["tokens"], new_dump["tokens"])
    gap = np.abs(old_dump["logits"] - new_dump["logits"]).max()
    print(f"greedy tokens equal: {same}; per-step logits max |new - old| {gap:.2e}")
    return old, new


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--baseline", help="the other checkout (required)")
    p.add_argument("--preset", default="transformer_bible_en_es")
    p.add_argument("--inputs", type=int, default=16, help="timed inputs")
    p.add_argument("--compare", type=int, default=128, help="compared inputs")
    p.add_argument("--beam-width", type=int, default=4)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--library", help=argparse.SUPPRESS)
    p.add_argument("--dump", help=argparse.SUPPRESS)
    p.add_argument("--tokens", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        worker(args)
        return
    if args.baseline is None:
        p.error("--baseline: the other checkout is required")
    print(f"load average {os.getloadavg()}, {args.preset}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        old, new = start_and_compare(args, folder)
    ratios = {}
    for round_ in range(args.rounds):
        times = {}
        for name, process in (("old", old), ("new", new))[:: 1 - 2 * (round_ % 2)]:
            process.stdin.write("time\n")
            process.stdin.flush()
            times[name] = read(process)
        for width in times["old"]:
            (old_wall, old_cpu), (new_wall, new_cpu) = (
                times["old"][width],
                times["new"][width],
            )
            ratio = (new_wall / old_wall, new_cpu / old_cpu)
            ratios.setdefault(width, []).append(ratio)
            print(
                f"round {round_} beam width {width}: baseline {old_wall:.2f} s "
                f"(CPU {old_cpu:.2f} s), new {new_wall:.2f} s (CPU "
                f"{new_cpu:.2f} s), ratio {ratio[0]:.3f} (CPU {ratio[1]:.3f})",
                flush=True,
            )
    for process in (old, new):
        process.stdin.close()
        process.wait()
    for width, values in ratios.items():
        wall, cpu = zip(*values)
        print(
            f"beam width {width}: median ratio new / baseline "
            f"{statistics.median(wall):.3f} wall, {statistics.median(cpu):.3f} "
            f"CPU time, over {len(values)} rounds"
        )
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
