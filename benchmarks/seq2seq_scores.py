"""Quality table: `zoo.Seq2Seq` with each alignment function, one step budget.

The shape of Luong et al. (2015), table 4 (global dot / general / concat and
local-p attention), on the Bible EN->ES split. Every row trains the same
architecture as the shipped preset except for a unidirectional encoder, as in
Luong et al. (the dot score needs encoder and decoder states of one size):
embedding 128, GRU encoder and GRU decoder, 256 units unless `--units` says otherwise, maxout output,
Adam 2e-3, dropout 0.1, batch 64) for the same number of optimizer steps, then prints sacreBLEU BLEU/chrF of
greedy and beam-4 decoding on the 763 test verses. A step budget rather than
a wall-clock one keeps the rows comparable when other jobs share the CPU; the
minutes each row took are printed beside it.

Each row runs `python -m zoo.seq2seq.train` in its own process and writes a
preset under `--out` (not shipped); the table is read back from the presets'
`metadata.json`, so `--table-only` re-prints it without training.

Run (the table in zoo/seq2seq/README.md):

    python benchmarks/seq2seq_scores.py --steps 1200 --units 128 \
        --out runs/seq2seq_scores

Smoke run on the shipped sample:

    python benchmarks/seq2seq_scores.py --data sample --steps 3 --out /tmp/s2s
"""

import argparse
import json
import os
import subprocess
import sys

ROWS = {
    # name: extra arguments of zoo.seq2seq.train
    "luong-dot": ["--style", "luong", "--score", "dot"],
    "luong-general": ["--style", "luong", "--score", "general"],
    "luong-concat": ["--style", "luong", "--score", "concat"],
    "luong-local-p-general": [
        "--style",
        "luong",
        "--score",
        "general",
        "--window",
        "10",
        "--local",
        "predictive",
    ],
}

COMMON = [
    "--cell",
    "gru",
    "--no-bidirectional",
    "--embedding-dim",
    "128",
    "--learning-rate",
    "2e-3",
    "--dropout",
    "0.1",
    "--epochs",
    "100",
    "--verbose",
    "2",
]


def run_row(name, args):
    out = os.path.join(args.out, name)
    command = [
        sys.executable,
        "-m",
        "zoo.seq2seq.train",
        "--data",
        args.data,
        "--out",
        out,
        *(
            ["--time-budget", str(args.minutes)]
            if args.minutes
            else ["--max-steps", str(args.steps)]
        ),
        "--units",
        str(args.units),
        *COMMON,
        *ROWS[name],
    ]
    if args.vocabulary_dir:
        command += ["--vocabulary-dir", args.vocabulary_dir]
    print("$ " + " ".join(command[1:]), flush=True)
    subprocess.run(command, check=True)


def table(args, names):
    budget = f"{args.minutes:g} minutes" if args.minutes else f"{args.steps} steps"
    print(
        f"\n{budget} of batch 64 per row, GRU {args.units} units; sacreBLEU on "
        "the test verses (greedy | beam 4, length penalty 0.6)\n"
    )
    print(
        "| attention | minutes | steps | val loss | greedy BLEU | greedy chrF "
        "| beam-4 BLEU | beam-4 chrF |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        path = os.path.join(args.out, name, "metadata.json")
        if not os.path.isfile(path):
            print(f"| {name} | (not run) | | | | | | |")
            continue
        with open(path) as f:
            metrics = json.load(f)["metrics"]
        test = metrics.get("test", {})
        greedy, beam = test.get("greedy", {}), test.get("beam4", {})
        val_loss = history(metrics).get("val_loss") or [float("nan")]
        print(
            f"| {name} | {metrics['train_minutes']:.1f} | {metrics.get('steps', '?')} "
            f"| {min(val_loss):.3f} | "
            f"{greedy.get('bleu', float('nan')):.2f} | "
            f"{greedy.get('chrf', float('nan')):.2f} | "
            f"{beam.get('bleu', float('nan')):.2f} | "
            f"{beam.get('chrf', float('nan')):.2f} |"
        )


def history(metrics):
    """The per-epoch history a preset's `metrics.history_file` names, or `{}`."""
    path = metrics.get("history_file")
    if not path or not os.path.isfile(path):
        return {}
    with open(path) as f:
        return json.load(f)["history"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument(
        "--minutes",
        type=float,
        help="wall-clock budget per row instead of --steps (give every row "
        "the same machine, e.g. one `taskset` core each)",
    )
    parser.add_argument("--units", type=int, default=256, help="GRU units")
    parser.add_argument("--out", required=True, help="where the row presets go")
    parser.add_argument("--data", default="bible", help="'bible' or 'sample'")
    parser.add_argument("--vocabulary-dir", default="runs/vocab_bible")
    parser.add_argument(
        "--rows", nargs="*", choices=sorted(ROWS), help="default: every row"
    )
    parser.add_argument("--table-only", action="store_true")
    args = parser.parse_args()
    names = args.rows or list(ROWS)
    if not args.table_only:
        for name in names:
            run_row(name, args)
    table(args, names)


if __name__ == "__main__":
    main()
