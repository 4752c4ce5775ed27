"""Safe-mode rebuild: a preset's JSON configs checked, then deserialized.

A config holding code or a file payload (`CODE_CLASSES`) or an array of a
dtype Keras never writes (`ARRAY_DTYPES`) is refused before anything is
rebuilt, and the rebuild runs in Keras safe mode, forced even after
`keras.config.enable_unsafe_deserialization()`.
"""

import contextlib

import keras

from keras_attention.presets.format import PresetError

# Configs that run code or read files outside the preset: refused even where
# Keras's safe mode has been switched off for the whole process.
CODE_CLASSES = frozenset({"__lambda__", "Lambda", "TFSMLayer", "TorchModuleWrapper"})

# The arrays Keras writes into a config (`serialize_keras_object` of a NumPy
# array or a tensor) and the dtypes it writes them with; another dtype, such
# as NumPy's `"U100000000"` (400 MB an element), would let a few bytes of
# JSON allocate GiBs when Keras rebuilds the array.
ARRAY_CLASSES = frozenset({"__numpy__", "__tensor__"})
ARRAY_DTYPES = frozenset(
    "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 bfloat16 float16 "
    "float32 float64 float8_e4m3fn float8_e5m2 complex64 complex128".split()
)


def _code_payload(value):
    """The first code or file payload (`CODE_CLASSES`) in a JSON config, or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            name = item.get("class_name")
            if isinstance(name, str) and name in CODE_CLASSES:
                return name
            if "__lambda__" in item:
                return "__lambda__"
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif item == "__lambda__":
            return item
    return None


def _array_payload(value):
    """`(class_name, dtype)` of the first array in a JSON config whose dtype
    is not in `ARRAY_DTYPES`, or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("class_name") in ARRAY_CLASSES:
                inner = item.get("config")
                dtype = inner.get("dtype") if isinstance(inner, dict) else None
                if not isinstance(dtype, str) or dtype not in ARRAY_DTYPES:
                    return item["class_name"], dtype
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


@contextlib.contextmanager
def _forced_safe_mode():
    """Keras safe mode for this block, even if the process switched it off.

    Keras offers `keras.config.enable_unsafe_deserialization()` to switch
    safe mode off for the process, and no public call to switch it back on;
    its `SafeModeScope` (what `keras.saving` uses) does that for a block.
    The scan of `_code_payload` does not depend on it.
    """
    try:
        from keras.src.saving.serialization_lib import SafeModeScope
    except ImportError:  # pragma: no cover - a Keras without it.
        yield
        return
    with SafeModeScope(True):
        yield


def check_config(config, path, what):
    """Returns `config`, refused unless it is a serialized Keras object free
    of code payloads and of arrays of unexpected dtypes."""
    if not isinstance(config, dict) or not isinstance(config.get("class_name"), str):
        raise PresetError(
            f"Corrupt preset file {path}: not a serialized Keras object "
            "(a JSON object with a class_name)"
        )
    if not isinstance(config.get("config", {}), dict):
        raise PresetError(f"Corrupt preset file {path}: its config is not an object")
    payload = _code_payload(config)
    if payload is not None:
        raise PresetError(
            f"Cannot rebuild the {what} in {path}: it holds a {payload!r} "
            "payload (code, or a file outside the preset), which a preset "
            "may not hold."
        )
    array = _array_payload(config)
    if array is not None:
        raise PresetError(
            f"Cannot rebuild the {what} in {path}: it holds a {array[0]!r} "
            f"array of dtype {array[1]!r:.80}; Keras writes arrays only of "
            f"the dtypes {', '.join(sorted(ARRAY_DTYPES))}."
        )
    return config


_MAX_MESSAGE = 4000


def cause(error):
    """The message of an error and of the errors that caused it, on one line.

    Keras's own messages span lines and put the cause in the middle (a
    failed weights load says "Example error message for object <Dense>:
    Not allowed: H5 file with external Dataset ..." and ends with the list
    of objects), so the whole chain is kept: each message with its lines
    joined, outermost first, those already quoted by an outer one left out.
    A message over 4,000 characters (Keras quotes whole configs in the
    middle of its own) keeps its first 1,000 and last 3,000 and says how
    much of the middle was cut.
    """
    parts, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        text = " ".join(str(error).split()) or type(error).__name__
        if not any(text in part for part in parts):
            parts.append(text)
        error = error.__cause__ or (
            None if error.__suppress_context__ else error.__context__
        )
    message = " Caused by: ".join(parts)
    if len(message) > _MAX_MESSAGE:
        head, tail = _MAX_MESSAGE // 4, _MAX_MESSAGE - _MAX_MESSAGE // 4
        cut = len(message) - _MAX_MESSAGE
        message = f"{message[:head]} [... {cut} characters cut ...] {message[-tail:]}"
    return message


def deserialize(config, path, what):
    """Rebuilds a checked config in forced safe mode; errors name `path`."""
    try:
        with _forced_safe_mode():
            return keras.saving.deserialize_keras_object(config, safe_mode=True)
    except Exception as e:  # Keras raises several types here.
        raise PresetError(f"Cannot rebuild the {what} in {path}: {cause(e)}") from e


def check_finite(model, path):
    """Refuses a model whose float weights hold NaN or infinite values."""
    import numpy as np

    for variable in model.weights:
        if not keras.backend.is_float_dtype(variable.dtype):
            continue
        value = np.asarray(keras.ops.convert_to_numpy(variable), "float32")
        if not np.isfinite(value).all():
            raise PresetError(
                f"Weights file {path} holds NaN or infinite values "
                f"(in {variable.path})."
            )
