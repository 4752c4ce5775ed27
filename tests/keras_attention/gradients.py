"""Gradients of a layer's loss on every backend, for the tests.

`value_and_gradients(layer, inputs, loss)` calls `layer(*inputs, **kwargs)`
and differentiates `loss(output)` (written in `keras.ops`) with respect to
each input, then each trainable weight of the layer: `tf.GradientTape` on
TensorFlow, `jax.value_and_grad` of `stateless_call` on JAX, autograd on
PyTorch. A test file loads it by path (the tests are not a package):

    _spec = importlib.util.spec_from_file_location("gradients", path)
"""

import keras
import numpy as np
import pytest


def weighted_sum(directions):
    """The loss `sum(output * directions)`, in float32."""

    def loss(output):
        output = keras.ops.cast(output, "float32")
        return keras.ops.sum(keras.ops.multiply(output, directions))

    return loss


def value_and_gradients(
    layer, inputs, loss, kwargs=None, jit=False, unconnected_as_zeros=True
):
    """`layer(*inputs, **kwargs)` and the gradients of `loss(output)`.

    Args:
        layer: a Keras layer (its trainable weights get gradients too).
        inputs: the positional inputs, arrays or backend tensors, each of
            which gets a gradient.
        loss: `output -> scalar`, in `keras.ops` (`output` may be a tuple).
        kwargs: keyword arguments of the call (masks, flags). Not
            differentiated.
        jit: compile the call and its gradient (`tf.function(jit_compile=
            True)`, `jax.jit`); PyTorch always runs eagerly.
        unconnected_as_zeros: where the loss does not depend on a source at
            all (e.g. the location score reads only the key's length), zeros
            of its shape; with `False`, `None` there (TF and PyTorch tell;
            JAX always gives zeros).

    Returns:
        `(output, gradients)`: the output as float32 NumPy (a tuple of them
        for a tuple output), and a float32 NumPy gradient per input, then
        per trainable weight.
    """
    kwargs = kwargs or {}
    backend = keras.backend.backend()
    if backend == "tensorflow":
        output, grads, sources = _tensorflow(layer, inputs, loss, kwargs, jit)
    elif backend == "jax":
        output, grads, sources = _jax(layer, inputs, loss, kwargs, jit)
    elif backend == "torch":
        output, grads, sources = _torch(layer, inputs, loss, kwargs)
    else:
        pytest.skip(f"gradients are taken on TF, JAX and PyTorch, not {backend}")
    zeros = np.zeros if unconnected_as_zeros else lambda *_: None
    grads = [
        zeros(tuple(s.shape), "float32") if g is None else _numpy(g)
        for g, s in zip(grads, sources, strict=True)
    ]
    return keras.tree.map_structure(_numpy, output), grads


def _numpy(x):
    return keras.ops.convert_to_numpy(keras.ops.cast(x, "float32"))


def _tensorflow(layer, inputs, loss, kwargs, jit):
    import tensorflow as tf

    def run(*inputs):
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            output = layer(*inputs, **kwargs)
            value = loss(output)
        sources = [*inputs, *layer.trainable_variables]
        return output, tape.gradient(value, sources)

    if jit:
        run = tf.function(run, jit_compile=True)
    inputs = [tf.convert_to_tensor(x) for x in inputs]
    output, grads = run(*inputs)
    return output, grads, [*inputs, *layer.trainable_variables]


def _jax(layer, inputs, loss, kwargs, jit):
    import jax

    non_trainable = [v.value for v in layer.non_trainable_variables]

    def run(trainable, inputs):
        output, _ = layer.stateless_call(trainable, non_trainable, *inputs, **kwargs)
        return loss(output), output

    run = jax.value_and_grad(run, argnums=(0, 1), has_aux=True)
    if jit:
        run = jax.jit(run)
    trainable = [v.value for v in layer.trainable_variables]
    inputs = [jax.numpy.asarray(x) for x in inputs]
    (_, output), (weight_grads, input_grads) = run(trainable, inputs)
    return output, [*input_grads, *weight_grads], [*inputs, *trainable]


def _torch(layer, inputs, loss, kwargs):
    import torch

    inputs = [
        keras.ops.convert_to_tensor(x).detach().clone().requires_grad_(True)
        for x in inputs
    ]
    output = layer(*inputs, **kwargs)
    sources = [*inputs, *(v.value for v in layer.trainable_variables)]
    value = loss(output)
    if value.requires_grad:
        grads = torch.autograd.grad(value, sources, allow_unused=True)
    else:  # no input or weight reaches the loss
        grads = [None] * len(sources)
    output = keras.tree.map_structure(lambda x: x.detach(), output)
    return output, list(grads), sources
