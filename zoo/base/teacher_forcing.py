"""Teacher forcing: decoder inputs, labels and weights from packed targets."""

from zoo import quiet

tf = quiet.LazyModule("tensorflow", "Preprocessing labels")


def teacher_forcing(ids, pad_id, end_id):
    """Splits packed `[START] tokens [END] [PAD]...` ids for teacher forcing.

    Args:
        ids: int tensor `(batch, length)` from a start/end packer.
        pad_id: int. The padding id.
        end_id: int. The `[END]` id.

    Returns:
        `(decoder_token_ids, labels, sample_weight)`: the ids without their
        last column, with `[END]` replaced by padding (a shorter row's
        `[END]` is no decoder input, its label is padding, so the decoder's
        padding mask matches the sample weight); the ids shifted left by
        one; and float32 weights, 1 on real labels and 0 on padding.

    Example:
    >>> ids = tf.constant([[2, 7, 8, 3], [2, 7, 3, 0]])  # [START] .. [END] [PAD]
    >>> decoder, labels, weights = teacher_forcing(ids, pad_id=0, end_id=3)
    >>> decoder.numpy().tolist()
    [[2, 7, 8], [2, 7, 0]]
    >>> labels.numpy().tolist(), weights.numpy().tolist()
    ([[7, 8, 3], [7, 3, 0]], [[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    """
    decoder = ids[..., :-1]
    decoder = tf.where(decoder == end_id, pad_id, decoder)
    labels = ids[..., 1:]
    weights = tf.cast(tf.not_equal(labels, pad_id), "float32")
    return decoder, labels, weights
