"""Serving: SavedModel formats, request parsing and the HTTP server.

- `zoo.serving.export`: the export's description, `Exported` (load and
  run an export with TensorFlow alone), `export_preset`.
- `zoo.serving.image_export`: the image signatures (`serve`, `serve_bytes`)
  that image exports share.
- `zoo.serving.server` (the process), `zoo.serving.handler` (the HTTP
  routes), `zoo.serving.requests`, `zoo.serving.batcher`,
  `zoo.serving.v2_protocol`, `page.html`: `python -m zoo serve`;
  `zoo.serving.grpc_server` and `zoo.serving.grpc_tensors`: its gRPC port.

This package knows formats, not families: a task writes its own export
(`Task.export`, through its kind), and the server reads what the export's
description says.
"""
