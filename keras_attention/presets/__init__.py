"""Preset directories: save, verify and load a model without running code.

A preset is a directory:

```
config.json          the model, as `keras.saving.serialize_keras_object`
preprocessor.json    optional: the preprocessor the same way
model.weights.h5     weights (`model.save_weights`)
assets/<layer>/...   optional: vocabularies and other files of layers
metadata.json        format version, library versions, metrics, the command
                     that trained it, and the sha256 of every other file
```

A checksum is not a signature: whoever can edit a preset can edit its
`metadata.json` too. So loading trusts nothing in the directory:

- `metadata.json` may list only plain relative names inside the directory
  (no `..`, no absolute path), checked before any file is opened; the
  directory must hold exactly the listed files, as regular files in real
  folders (a symbolic link, a device, a FIFO or an empty folder is refused).
- Every listed file's size, apparent (`st_size`) and allocated on disk
  (`st_blocks`, which a sparse file keeps small), is checked against a cap
  for its kind (`MAX_JSON_BYTES`, `MAX_WEIGHTS_BYTES`, `MAX_ASSET_BYTES`)
  and their sum against `MAX_TOTAL_BYTES`, before any file is copied or
  parsed; each read stops at its cap too, should a file grow meanwhile.
- Each file is read once, through the directory's open handle, hashed and
  copied into a private temporary folder, and everything is then parsed from
  that copy: a preset being rewritten while it loads gives the old preset
  or the new one (the read is retried when the directory was swapped),
  never a mix.
- JSON must be UTF-8 objects of the expected shape; configs are rebuilt in
  Keras safe mode, forced even after
  `keras.config.enable_unsafe_deserialization()`, and a config holding a
  Python lambda or another code or file payload (`Lambda`, `TFSMLayer`,
  `TorchModuleWrapper`), or an array of a dtype Keras never writes
  (`{"class_name": "__numpy__", ... "dtype": "U100000000"}`: 400 MB an
  element), is refused before anything is rebuilt; float weights must be
  finite.

Every problem is a `PresetError` (a `ValueError`) naming the file. A preset
saved by a newer major version of the format, of keras-attention-zoo or of
Keras is refused with a message saying so.

Saving is atomic: the preset is written into a hidden sibling folder,
flushed to disk, and swapped into place (Linux `renameat2` with
`RENAME_EXCHANGE`), so a reader, or a process killed at any point of the
save, finds the old preset or the new one. Stale files of an older preset
are never carried over. Saves into one parent folder are serialized with a
lock (`flock`).

The package, one concept a module: `format` (the files, the metadata and the
limits), `durable` (locks, atomic writes and swaps, fsync, bounded reads),
`rebuild` (safe-mode rebuild of a config), and the verbs `saving`,
`verification` and `loading`.
"""

from keras_attention.presets.durable import sha256
from keras_attention.presets.format import (
    ASSETS_DIR,
    CONFIG_FILE,
    FORMAT_VERSION,
    MAX_ASSET_BYTES,
    MAX_JSON_BYTES,
    MAX_TOTAL_BYTES,
    MAX_WEIGHTS_BYTES,
    METADATA_FILE,
    PREPROCESSOR_FILE,
    WEIGHTS_FILE,
    PresetError,
)
from keras_attention.presets.loading import load_preset
from keras_attention.presets.rebuild import ARRAY_CLASSES, ARRAY_DTYPES, CODE_CLASSES
from keras_attention.presets.saving import save_preset
from keras_attention.presets.verification import read_metadata, verify_preset

__all__ = [
    "ARRAY_CLASSES",
    "ARRAY_DTYPES",
    "ASSETS_DIR",
    "CODE_CLASSES",
    "CONFIG_FILE",
    "FORMAT_VERSION",
    "MAX_ASSET_BYTES",
    "MAX_JSON_BYTES",
    "MAX_TOTAL_BYTES",
    "MAX_WEIGHTS_BYTES",
    "METADATA_FILE",
    "PREPROCESSOR_FILE",
    "WEIGHTS_FILE",
    "PresetError",
    "load_preset",
    "read_metadata",
    "save_preset",
    "sha256",
    "verify_preset",
]
