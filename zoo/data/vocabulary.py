"""WordPiece vocabularies for the translation models, trained with keras-hub.

Training uses `keras_hub.tokenizers.compute_word_piece_vocabulary` (backed by
tensorflow-text). Accents are kept: Spanish needs them ("lloró" and "lloro"
are different words), so a tokenizer built from these vocabularies should
be created with `strip_accents=False` (see `tokenizer`).
"""

import os

DEFAULT_RESERVED_TOKENS = ("[PAD]", "[UNK]", "[START]", "[END]")


def train_wordpiece(
    texts,
    vocabulary_size=8000,
    lowercase=True,
    reserved_tokens=DEFAULT_RESERVED_TOKENS,
    strip_accents=False,
):
    """Learns a WordPiece vocabulary from sentences.

    Args:
        texts: iterable of str, or a `tf.data.Dataset` of string scalars.
        vocabulary_size: int. Maximum number of tokens, reserved ones
            included. Defaults to `8000`.
        lowercase: bool. Lowercase (Unicode case-fold) before counting.
            Defaults to `True`.
        reserved_tokens: sequence of str. Tokens placed first, in this order
            (so `"[PAD]"` gets id 0). Defaults to
            `("[PAD]", "[UNK]", "[START]", "[END]")`.
        strip_accents: bool. Remove accent marks. Defaults to `False`, which
            keeps "lloró" distinct from "lloro".

    Returns:
        A list of at most `vocabulary_size` tokens: the reserved tokens, then
        the learned pieces (suffix pieces start with `"##"`).

    Example:
    >>> vocab = train_wordpiece(["Y lloró Jesús.", "Jesus wept."], 100)
    >>> vocab[:4]
    ['[PAD]', '[UNK]', '[START]', '[END]']
    """
    import keras_hub
    import tensorflow as tf

    reserved_tokens = list(reserved_tokens)
    if vocabulary_size <= len(reserved_tokens):
        raise ValueError(
            "vocabulary_size must exceed the number of reserved tokens "
            f"({len(reserved_tokens)}). Received: {vocabulary_size=}"
        )
    if isinstance(texts, tf.data.Dataset):
        data = texts
    else:
        texts = list(texts)
        data = tf.data.Dataset.from_tensor_slices(
            tf.constant(texts, tf.string, shape=[len(texts)])
        )
    return keras_hub.tokenizers.compute_word_piece_vocabulary(
        data,
        vocabulary_size,
        lowercase=lowercase,
        strip_accents=strip_accents,
        reserved_tokens=reserved_tokens,
    )


def learned_wordpiece(texts, vocabulary_size, folder=None, name="vocabulary", **kwargs):
    """`train_wordpiece(texts, ...)`, kept in `folder` and reused from it.

    Learning a vocabulary on a whole corpus takes minutes; a training
    script given a folder (`--vocabulary-dir`) keeps each vocabulary there
    as `<name>_<vocabulary_size>.txt` and reads it back on the next run
    instead of learning it again. The file is reused as it is: use one
    folder per corpus.

    Args:
        texts: iterable of str (read only when the vocabulary is learned).
        vocabulary_size: int. As in `train_wordpiece`.
        folder: optional str. The folder that keeps the vocabulary (created
            if missing). Defaults to `None` (learn it, keep nothing).
        name: str. The file's name before the size, e.g. `"source"`.
            Defaults to `"vocabulary"`.
        **kwargs: other `train_wordpiece` arguments (`lowercase`, ...).

    Returns:
        A list of tokens, as `train_wordpiece` returns it.

    Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> vocab = learned_wordpiece(["Y lloró Jesús."], 100, folder, name="es")
    >>> sorted(os.listdir(folder))
    ['es_100.txt']
    >>> learned_wordpiece([], 100, folder, name="es") == vocab  # read back
    True
    """
    path = None
    if folder:
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{name}_{vocabulary_size}.txt")
        if os.path.isfile(path):
            return load_vocabulary(path)
    tokens = train_wordpiece(texts, vocabulary_size, **kwargs)
    if path:
        save_vocabulary(tokens, path)
    return tokens


def tokenizer(vocabulary, lowercase=True, sequence_length=None, **kwargs):
    """Builds the matching `keras_hub.tokenizers.WordPieceTokenizer`.

    Args:
        vocabulary: list of str, or the path of a vocabulary file.
        lowercase: bool. Must match the training setting. Defaults to `True`.
        sequence_length: int or None. Pad/truncate outputs to this length.
            Defaults to `None` (ragged output).
        **kwargs: other `WordPieceTokenizer` arguments.

    Returns:
        A `WordPieceTokenizer` with `strip_accents=False` and
        `oov_token="[UNK]"` unless overridden in `kwargs`.

    Example:
    >>> tok = tokenizer(train_wordpiece(["Y lloró Jesús."], 100))
    >>> tok.detokenize(tok.tokenize("Y lloró Jesús."))
    'y lloró jesús .'
    """
    import keras_hub

    if not isinstance(vocabulary, (list, tuple)):
        if not isinstance(vocabulary, (str, os.PathLike)):
            raise TypeError(
                "`vocabulary` must be a list of tokens or the path of a file. "
                f"Received: vocabulary={vocabulary!r:.80}"
            )
        vocabulary = load_vocabulary(vocabulary)
    kwargs.setdefault("strip_accents", False)
    kwargs.setdefault("oov_token", "[UNK]")
    return keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=list(vocabulary),
        lowercase=lowercase,
        sequence_length=sequence_length,
        **kwargs,
    )


def as_tokenizer(value, lowercase=True, name=None):
    """A keras-hub tokenizer from any form a preprocessor takes one in.

    Args:
        value: a `keras_hub.tokenizers.Tokenizer` (returned as it is), its
            serialized config (a dict, from a preprocessor's config), a
            vocabulary (list of tokens or the path of a file, see
            `tokenizer`), or `None`: a `WordPieceTokenizer` without
            vocabulary yet, which a preset's assets fill in
            (`load_tokenizer_assets`).
        lowercase: bool. For a new tokenizer. Defaults to `True`.
        name: optional str. The new tokenizer's name (its assets folder).

    Returns:
        A `keras_hub.tokenizers.Tokenizer`.

    Example:
    >>> tok = as_tokenizer(["[PAD]", "[UNK]", "a", "bag"], name="words")
    >>> tok.name, tok.vocabulary_size()
    ('words', 4)
    >>> as_tokenizer(None, name="later").vocabulary is None
    True
    >>> import keras
    >>> config = keras.saving.serialize_keras_object(tok)  # no vocabulary
    >>> as_tokenizer(config).name, as_tokenizer(config).vocabulary is None
    ('words', True)
    """
    import keras
    import keras_hub

    if isinstance(value, dict):
        value = keras.saving.deserialize_keras_object(value)
    if isinstance(value, keras_hub.tokenizers.Tokenizer):
        return value
    if value is None:
        return keras_hub.tokenizers.WordPieceTokenizer(
            lowercase=lowercase, strip_accents=False, name=name
        )
    return tokenizer(value, lowercase=lowercase, name=name)


def row_lengths(tokens):
    """Tokens per row of a tokenizer's output, before packing cuts them.

    Args:
        tokens: what a keras-hub tokenizer returns for a batch: a
            `tf.RaggedTensor` (inside `tf.data`), a list of lists (eagerly)
            or a dense tensor (a tokenizer with its own `sequence_length`).

    Returns:
        int64 tensor `(batch,)`, or `None` for dense output (its rows are
        cut already, so no length is known).

    Example:
    >>> tok = tokenizer(["[PAD]", "[UNK]", "a", "bag"])
    >>> row_lengths(tok(["a bag bag", "a"])).numpy().tolist()
    [3, 1]
    """
    import tensorflow as tf

    if isinstance(tokens, tf.RaggedTensor):
        return tokens.row_lengths()
    if isinstance(tokens, (list, tuple)):  # keras-hub's eager ragged output
        return tf.constant([len(row) for row in tokens], "int64")
    return None


def decode(tokenizer, token_ids, end_id, reserved_tokens=DEFAULT_RESERVED_TOKENS):
    """Detokenizes rows of ids, each up to its first `end_id`, without specials.

    Args:
        tokenizer: a keras-hub tokenizer.
        token_ids: int array `(batch, length)`.
        end_id: int. Each row is cut before its first `end_id`.
        reserved_tokens: sequence of str. Tokens dropped from the rows.
            Defaults to `("[PAD]", "[UNK]", "[START]", "[END]")`.

    Returns:
        A list of Python str, one per row.

    Example:
    >>> tok = tokenizer(["[PAD]", "[UNK]", "[START]", "[END]", "a", "bag"])
    >>> decode(tok, [[2, 4, 5, 3, 4], [4, 0, 0, 0, 0]], end_id=3)
    ['a bag', 'a']
    """
    import keras
    import tensorflow as tf

    specials = {tokenizer.token_to_id(t) for t in reserved_tokens}
    texts = []
    for row in keras.ops.convert_to_numpy(token_ids).tolist():
        if end_id in row:
            row = row[: row.index(end_id)]
        row = [t for t in row if t not in specials]
        text = tokenizer.detokenize(tf.constant([row], "int32"))
        text = keras.ops.convert_to_numpy(text)[0]
        texts.append(text.decode("utf-8") if isinstance(text, bytes) else str(text))
    return texts


def save_vocabulary(tokens, path):
    """Writes tokens to a UTF-8 file, one per line, in order.

    Args:
        tokens: sequence of str. No token may be empty, contain a line break,
            or appear twice.
        path: str or path-like. Destination file.
    """
    tokens = list(tokens)
    for token in tokens:
        if not token or "\n" in token or "\r" in token:
            raise ValueError(f"Cannot store token {token!r} one per line.")
    if len(set(tokens)) != len(tokens):
        raise ValueError("The vocabulary has duplicate tokens.")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(token + "\n" for token in tokens)


def load_vocabulary(path):
    """Reads a vocabulary written by `save_vocabulary` (one token per line).

    Refused while Keras deserializes in safe mode (as keras-hub's tokenizers
    do): a config, e.g. a preset's, may not name a file to read; presets
    keep their vocabularies in their assets.

    Args:
        path: str or path-like.

    Returns:
        A list of str, in file order.

    Raises:
        ValueError: in Keras safe mode.
    """
    from keras.src.saving import serialization_lib

    if serialization_lib.in_safe_mode():
        raise ValueError(
            "Refusing to read a vocabulary file named in a config while Keras "
            "deserializes in safe mode: it could be any file (presets keep "
            "their vocabularies in their assets). If you trust the config, "
            "load it with `safe_mode=False`. Received: "
            f"vocabulary={os.fspath(path)!r}"
        )
    with open(path, encoding="utf-8", newline="") as f:
        return [line.rstrip("\r\n") for line in f if line.rstrip("\r\n")]


def save_tokenizer_assets(dir_path, tokenizers):
    """Saves each tokenizer's vocabulary in a folder named after it.

    The preprocessors' `save_assets` (called by `keras.saving` and
    `Task.save_to_preset`): `dir_path/<tokenizer.name>/vocabulary.txt`.

    Args:
        dir_path: str. The assets folder.
        tokenizers: sequence of keras-hub tokenizers with distinct names.
    """
    for tokenizer in tokenizers:
        path = os.path.join(dir_path, tokenizer.name)
        os.makedirs(path, exist_ok=True)
        tokenizer.save_assets(path)


def load_tokenizer_assets(
    dir_path, tokenizers, reserved_tokens=DEFAULT_RESERVED_TOKENS
):
    """Loads the vocabularies `save_tokenizer_assets` wrote, and checks them.

    Args:
        dir_path: str. The assets folder.
        tokenizers: sequence of keras-hub tokenizers, named as when saved.
        reserved_tokens: sequence of str. Tokens every vocabulary must hold
            (the models pad, start and stop with them). Defaults to
            `("[PAD]", "[UNK]", "[START]", "[END]")`.

    Raises:
        ValueError: a tokenizer's name is not a plain folder name, its folder
            is missing, its vocabulary cannot be read (e.g. not UTF-8), holds
            a token twice or lacks a reserved token.
    """
    for tokenizer in tokenizers:
        name = tokenizer.name
        if name in ("", ".", "..") or any(s and s in name for s in (os.sep, os.altsep)):
            raise ValueError(
                "A tokenizer's name must be a plain folder name. "
                f"Received: name={name!r}"
            )
        path = os.path.join(dir_path, name)
        if not os.path.isdir(path):
            raise ValueError(f"Missing vocabulary folder {path} for {name}")
        try:
            tokenizer.load_assets(path)
        except (OSError, UnicodeError, ValueError) as e:
            raise ValueError(f"Cannot read the vocabulary in {path}: {e}") from e
        tokens = list(tokenizer.get_vocabulary())
        missing = [t for t in reserved_tokens if t not in tokens]
        if missing:
            raise ValueError(
                f"The vocabulary in {path} lacks the reserved tokens "
                f"{', '.join(missing)}."
            )
        if len(set(tokens)) != len(tokens):
            raise ValueError(f"The vocabulary in {path} holds a token twice.")
