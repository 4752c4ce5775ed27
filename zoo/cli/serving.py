"""`export PRESET DIR` and `serve DIR`: a serving SavedModel and its server."""

import argparse
import os

from zoo.cli import common
from zoo.training.flags import positive_float, positive_int

#: `zoo serve`'s flags for `zoo.serving.server.Limits` (their defaults are its).
SERVE_LIMITS = [
    ("--max-request-bytes", positive_int, "larger bodies get 413"),
    ("--max-rows", positive_int, "rows (sentences, images) per request"),
    ("--max-batch", positive_int, "rows per model call"),
    ("--max-beam-width", positive_int, "largest beam_width input"),
    ("--max-length", positive_int, "largest max_length input"),
    ("--max-image-pixels", positive_int, "pixels of one image"),
    ("--max-request-pixels", positive_int, "pixels of a request's images"),
    ("--request-timeout", positive_float, "seconds to answer, else 503"),
    ("--read-timeout", positive_float, "seconds to send a request, else 408"),
    ("--workers", positive_int, "threads handling connections"),
    ("--max-queued", positive_int, "connections waiting, else 503"),
    ("--max-client-connections", positive_int, "connections, gRPC calls per client IP"),
]


def add_export_parser(sub):
    export = sub.add_parser("export", help="write a preset as a serving SavedModel")
    export.add_argument("preset", help=common.PRESET_HELP)
    export.add_argument(
        "directory",
        help="SavedModel directory to write (BASE/1 for tensorflow_model_server "
        "--model_base_path=BASE, and for `serve BASE`)",
    )
    export.add_argument(
        "--beam",
        type=positive_int,
        default=None,
        help="beam width of the default signature (translation, captioning)",
    )
    common.add_model_flags(export)
    return export


def add_serve_parser(sub):
    serve = sub.add_parser(
        "serve",
        help="serve an export over HTTP: TF Serving's REST API, JSON and a page",
    )
    serve.add_argument(
        "directory",
        help="a directory written by `export` (or a folder of numbered versions)",
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on; 0.0.0.0 for every interface "
        "(default: %(default)s, this machine only)",
    )
    serve.add_argument(
        "--port", type=positive_int, default=8501, help="default: %(default)s"
    )
    serve.add_argument(
        "--grpc-port",
        type=int,
        help="gRPC port (TF Serving's and KServe v2's services); 0: none "
        "(default: 8500 if it is free)",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name to answer besides the loopback ones (repeatable; '*': any)",
    )
    serve.add_argument(
        "--model-name", help="the NAME of /v1/models/NAME (default: the preset's)"
    )
    from zoo.serving.server import Limits

    defaults = Limits()
    for flag, kind, meaning in SERVE_LIMITS:
        default = getattr(defaults, flag[2:].replace("-", "_"))
        serve.add_argument(
            flag, type=kind, default=default, help=f"{meaning} (default {default})"
        )
    serve.add_argument(
        "--batch-delay-ms",
        type=_non_negative_float,
        default=5.0,
        help="how long a request waits for others to batch with",
    )
    return serve


def _check_export_directory(path):
    """Refuses an export `DIR` that is a file or cannot be written, at once."""
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ValueError(f"export DIR {path!r} is a file, not a folder")
    folder = os.path.abspath(path)
    while not os.path.lexists(folder):  # the nearest folder that exists
        folder = os.path.dirname(folder)
    if not os.path.isdir(folder):
        raise ValueError(f"export DIR {path!r} is inside a file, {folder!r}")
    common.check_writable_folder(folder, "export DIR")


def export(args):
    from zoo.serving.export import export_preset

    _check_export_directory(args.directory)
    metadata = export_preset(
        args.preset,
        args.directory,
        beam_width=args.beam,
        dtype=args.dtype,
        quantize=args.quantize,
    )
    signatures = ", ".join(sorted(metadata.get("signatures", {})))
    print(f"Exported {args.preset} to {args.directory} (signatures: {signatures})")
    return 0


def serve(args):
    from zoo.serving import server

    if not os.path.isdir(args.directory):
        raise FileNotFoundError(f"No export directory {args.directory!r}")
    server.serve(
        args.directory,
        args.host,
        args.port,
        grpc_port=args.grpc_port,
        allow_hosts=args.allow_host,
        model_name=args.model_name,
        **{
            flag[2:].replace("-", "_"): getattr(args, flag[2:].replace("-", "_"))
            for flag, _, _ in SERVE_LIMITS
        },
        batch_delay=args.batch_delay_ms / 1000.0,
    )
    return 0


def _non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, received {text!r}")
    return value
