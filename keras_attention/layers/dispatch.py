"""Which attention path a layer takes on the user's backend and device.

These are the rules, stated once; the layers' `_route` methods
(`MultiHeadAttention`, `Attention`, `ImageSelfAttention`) apply them, and
`docs/layers.md` has the measurements behind them. Every path computes the
same exact softmax attention, to float tolerance:

- fused: the backend's `keras.ops.dot_product_attention` (a scaled dot
  product only);
- explicit: the `(B, heads, Tq, Tv)` scores, a float32 masked softmax, the
  weighted sum (any score; the only path that returns the weights);
- chunked: `chunked_attention`, an online softmax over blocks of
  `chunk_size`, in memory linear in `Tq + Tv`, forward and backward (its
  dropout draws from a hash of the positions, `chunked.dropout_keep_mask`:
  the same rate, other draws than Keras's `Dropout`);
- Triton: under JAX on a GPU, JAX's Triton flash kernel in place of the
  chunk loop (`triton_flash_attention`);
- windowed (`MultiHeadAttention(window=r)`): `windowed_attention`, blocks of
  `r` positions, `O(r T d)`.

Where the fused kernel is memory-efficient (`fused_is_memory_efficient`):

- PyTorch on CUDA: `scaled_dot_product_attention` picks its flash or
  memory-efficient kernel, float32 included, with or without a mask.
- PyTorch on CPU: its flash kernel, without a mask, causal or with a key
  padding mask; a pairwise mask (causal and padding together, an
  `attention_mask`, `sliding_window`) becomes one `(B, 1, Tq, Tv)` tensor,
  one head's share of the scores, still counted as fused.
- JAX on a GPU in bfloat16/float16, without a mask or causal: cuDNN flash
  attention. It takes a padding mask only as a full bias, and its
  sequence-length form is exact only for masks that keep a prefix (which a
  trace cannot see), so padding and pairwise masks count as not fused;
  float32 has no cuDNN flash kernel.
- TensorFlow (any device), JAX on CPU or TPU: nowhere.

`chunk_threshold="auto"` keeps the fused path, at every length, where it
is memory-efficient; elsewhere it chunks above `auto_threshold()` keys:
`CPU_CHUNK_THRESHOLD` on a CPU (chunking is already the faster there),
`EAGER_CPU_CHUNK_THRESHOLD` on a CPU while TensorFlow runs eagerly (the
chunk loop then runs op by op) unless the call has a score hook (below),
`DEVICE_CHUNK_THRESHOLD` on an accelerator
or under PyTorch (for the memory). An int chunks above it on any device
(`0`: always), `None` never. `chunk_size="auto"` is `auto_chunk_size()`.

The Triton kernel replaces the chunk loop where `chunk_size="auto"`, the
call is a plain (scaled) dot product (not float16, where the score is
taken in float32) without dropout, the head width is in `TRITON_DEPTHS`
and the kernel takes the masks exactly (`triton_padding`): none, causal
(`Tq == Tv`), a query mask alone (padded rows zeroed after), or one padding
mask that is both the query and the key mask of a self-attention (the same
tensor, as Keras propagates an `Embedding(mask_zero=True)` mask into
`mha(x, x)`), which becomes its segment ids. A key padding mask alone (a
Transformer block's `value_mask`), two mask tensors, an `attention_mask` or
a band keep the loop. Self-attention pads itself to whole blocks of
`TRITON_LENGTH_BLOCK`; cross-attention needs whole blocks of keys.

`MultiHeadAttention._route`, in this order:

1. Inputs of rank other than 3 or a non-default `attention_axes`: Keras's
   own `call` (scaled dot only, no cache).
2. Windowed, with `window` set, unless the full weights are needed
   (`return_attention_scores`, a cache, a length unknown when traced, an
   overridden `_compute_attention` / `_masked_softmax`): those take the
   explicit path with the band as a mask.
3. Chunked (Triton where it applies), when `dispatch.takes_chunked_path`
   says so and nothing needs the full weights: static lengths, no cache, no
   `return_attention_scores`, no `flash_attention=True`, a score computed
   on chunks (not `"location"`), no hook overridden.
4. A cache of grouped heads (`GroupedQueryAttention`, scaled dot, no
   flash kernel asked for, no hook overridden): the explicit path with the
   queries grouped per key/value head, the cache never repeated.
5. A split cache `(keys, values)`: the explicit path on its heads-first
   tensors (a subclass's hook or `flash_attention=True` gets Keras's
   layout instead, and step 6).
6. Keras's hook `_compute_attention`: fused where the score is scaled dot,
   no weights are returned, no dropout is active, `value_dim == key_dim`,
   and, unless `flash_attention=True`, the compute dtype is not float16
   (the kernels overflow there; the explicit path scores in float32) and
   the call is not one query with at most `MAX_BLOCK_HEADS` heads (a
   decoding step, whose explicit path reads the cache in place). Else
   explicit. On the fused path a fully masked row gets the output
   projection's bias, as the explicit path gives it (a 4-D mask zeroes
   those heads' context instead).

A causal decoding step whose `cache_update_index` is known when the call
runs reads only the cache positions up to its last query
(`kv_cache.visible_prefix`): the same outputs and weights.

`Attention._route` (soft mode; hard mode and `window` are explicit):
chunked under the same rules when nothing needs the weights (no `return_*`
output, no `projected_key`, no `window`, not `"location"`, static lengths,
an `attention_mask` of rank 2 or 3); else fused where the score is
`"scaled_dot"` or `"dot"` without a learned scale
(`fused.dot_product_scale`), with no dropout while training, not float16,
known non-zero lengths, and the kernel memory-efficient for the mask; else
explicit. `ImageSelfAttention` follows the same rules.

A score hook (`score_mod=`, `keras_attention.layers.score_mods`, or a
list of them) runs on the explicit, chunked, windowed and cached paths,
computed per block from positions. On the explicit path its bias is a
`(heads, Tq, Tv)` tensor beside the scores, so a call with a hook chunks
above `CPU_CHUNK_THRESHOLD` on a CPU eagerly too (`auto_threshold(...,
hooked=True)`): its peak is then a few blocks, below Keras's scores.
Eager TensorFlow, GQA 8/2 heads x 32 with ALiBi, causal, peak RSS growth
over Keras's `GroupQueryAttention`'s: explicit 1.29 / 1.20, chunked 0.13 /
0.04 at 1,024 / 2,048 keys (`experiments/benchmarks/gqa_hook_eager.py`,
2-core AMD EPYC, load 30). PyTorch and accelerators keep their thresholds
(there the explicit path is the faster, and chunking is only for the
memory).

Fused kernels and hooks, Keras 3.15: no hook runs fused, on any backend,
so a call with one never takes the fused kernel or the Triton kernel.
- The causal mask (`use_causal_mask`) and a sliding window
  (`GroupedQueryAttention(sliding_window=)`) are layer arguments, not
  hooks: they run fused wherever the fused path applies (above).
- Soft-cap: `ops.dot_product_attention(attn_logits_soft_cap=)` raises a
  `ValueError` on every backend but JAX on a TPU, whose splash kernel
  caps with `s / (1 + |s| / cap)`, not Gemma's `tanh`: no backend computes
  `SoftCap`'s formula fused, so it is not dispatched there.
- A bias (ALiBi, T5 buckets) could reach the fused op only as a full
  `(heads, Tq, Tv)` `bias=` tensor, the memory the hooks avoid.
"""

import numbers

import keras
from keras import ops

from keras_attention.arguments import int_argument

#: The default `chunk_threshold` / `chunk_size`: decided per call by device.
AUTO = "auto"

#: Above this many keys a CPU without a memory-efficient fused kernel
#: (TensorFlow, JAX) chunks: from 1,024 keys on, the smallest length
#: measured, the chunked path was already faster than the full one, forward
#: and forward + backward, on both backends (2-core AMD EPYC, load ~10,
#: `benchmarks/attention_crossover.py --lengths 1024,2048,3072,4096
#: --chunks 256,512,1024`: fwd+bwd / full at T = 1,024 with 256-blocks 0.22
#: on JAX, 0.61 on TensorFlow; below 512 keys one block is the whole
#: matrix anyway).
CPU_CHUNK_THRESHOLD = 1023

#: Above this many keys a CPU chunks while TensorFlow runs eagerly (a layer
#: called outside `fit`, `predict` or a `tf.function`): the chunk loop then
#: runs op by op, and below ~3,072 keys, where the full path's scores are
#: small, it only costs time. Eager forward / forward + backward over the
#: full path's, 512-blocks: 1.80 / 2.22 at T = 2,048, 0.98 / 1.17 at 3,072
#: (`attention_crossover.py --lengths 2048,3072 --chunks 512 --modes
#: eager`, load 5), 0.84-1.13 / 1.35-1.59 at 4,096 (below); 1.51 / 2.24 at
#: 1,024, where compiled chunking was already faster.
EAGER_CPU_CHUNK_THRESHOLD = 3071

#: Above this many keys a GPU without a memory-efficient fused kernel (JAX
#: float32, TensorFlow) or PyTorch's explicit path (a score other than
#: scaled dot) chunks: there the explicit path is faster and the choice is
#: the memory, 512 MiB of float32 scores for 8 heads.
DEVICE_CHUNK_THRESHOLD = 4096

#: Queries and keys per block on a CPU: 256 gave the fastest forward +
#: backward at every T of the same run (T = 4,096: 0.15 / 0.31 / 0.53 of
#: the full path's time with 256 / 512 / 1,024 blocks on JAX, 0.46 / 0.52 /
#: 0.85 on TensorFlow).
CPU_CHUNK_SIZE = 256

#: Queries and keys per block on a CPU while TensorFlow runs eagerly (a
#: layer called outside `fit`, `predict` or a `tf.function`): each block's
#: ops are dispatched from Python one by one, so fewer, larger blocks win.
#: Eager forward / forward + backward time over the full path's at T =
#: 4,096: 1.87 / 2.34 with 256-blocks, 1.13 / 1.59 with 512, 1.13 / 1.76
#: with 1,024, 1.34 / 2.04 with 2,048 (2-core AMD EPYC, load 7.5,
#: `attention_crossover.py --lengths 4096 --chunks 256,512,1024,2048
#: --modes eager`); a second run, `--chunks 256,512 --modes
#: eager,compiled` (load 7): 1.10 / 1.50 with 256, 0.84 / 1.35 with 512
#: eagerly, and compiled 0.39 / 0.24 with 256, 0.36 / 0.45 with 512, so
#: compiled code keeps `CPU_CHUNK_SIZE`.
EAGER_CPU_CHUNK_SIZE = 512

#: On an accelerator, the largest block of `(B * heads, c, c)` float32
#: scores up to this many bytes (4,096 for B = 1 and 8 heads: on an H100 a
#: 4,096 block was 2x faster than 512 at T = 32,768).
DEVICE_BLOCK_BYTES = 2**29
DEVICE_CHUNK_SIZES = (4096, 2048, 1024, 512)

MASK_KINDS = ("none", "causal", "padding", "pairwise")


def backend():
    """`keras.config.backend()`: the one place the backend is read (tests stub it)."""
    return keras.config.backend()


def platform(tensor=None):
    """`"cpu"`, `"gpu"` or `"tpu"`: where the backend computes `tensor`.

    JAX: the default device (`jax.devices()[0]`). PyTorch: the tensor's
    device, else Keras's default (CUDA when available). TensorFlow: a GPU
    when one is visible.
    """
    name = backend()
    if name == "jax":
        import jax

        name = jax.devices()[0].platform
    elif name == "torch":
        import torch

        device = getattr(tensor, "device", None)
        name = getattr(device, "type", None)
        if name not in ("cpu", "cuda"):
            name = "cuda" if torch.cuda.is_available() else "cpu"
    elif name == "tensorflow":
        import tensorflow as tf

        name = "gpu" if tf.config.list_logical_devices("GPU") else "cpu"
    else:
        name = "cpu"
    return {"cuda": "gpu", "rocm": "gpu"}.get(name, name)


def mask_kind(causal=False, padding=False, pairwise=False):
    """The mask as the fused kernels see it, one of `MASK_KINDS`.

    Args:
        causal: bool. `use_causal_mask`.
        padding: bool. A query or key padding mask.
        pairwise: bool. An `attention_mask` or a band (`sliding_window`).

    >>> mask_kind(causal=True), mask_kind(causal=True, padding=True)
    ('causal', 'pairwise')
    """
    if pairwise or (causal and padding):
        return "pairwise"
    if causal:
        return "causal"
    return "padding" if padding else "none"


def fused_is_memory_efficient(backend, device, dtype, mask):
    """Whether `keras.ops.dot_product_attention` runs in linear memory.

    Args:
        backend: str. `keras.config.backend()`.
        device: str. `platform()`.
        dtype: str. The compute dtype.
        mask: str. `mask_kind()`.

    >>> fused_is_memory_efficient("torch", "cpu", "float32", "padding")
    True
    >>> fused_is_memory_efficient("jax", "gpu", "float32", "none")
    False
    >>> fused_is_memory_efficient("jax", "gpu", "bfloat16", "causal")
    True
    """
    if mask not in MASK_KINDS:
        raise ValueError(f"`mask` must be one of {MASK_KINDS}. Received: mask={mask!r}")
    if backend == "torch":
        return device in ("cpu", "gpu")
    if backend == "jax":
        half = keras.backend.standardize_dtype(dtype) in ("bfloat16", "float16")
        return device == "gpu" and half and mask in ("none", "causal")
    return False


def auto_threshold(backend, device, eager=False, hooked=False):
    """The number of keys above which `"auto"` chunks (no fused kernel).

    `eager`: TensorFlow runs the call op by op (`tensorflow_eager()`).
    `hooked`: the call has a score hook, whose full-path bias would add a
    `(heads, Tq, Tv)` tensor to Keras's scores: a CPU then chunks eagerly
    above `CPU_CHUNK_THRESHOLD` too.

    >>> auto_threshold("tensorflow", "cpu", eager=True, hooked=True)
    1023
    """
    if device == "cpu" and backend != "torch":
        if eager and not hooked:
            return EAGER_CPU_CHUNK_THRESHOLD
        return CPU_CHUNK_THRESHOLD
    # PyTorch runs the chunked loop op by op, slower than its explicit
    # path at any length: there chunking is only for the memory.
    return DEVICE_CHUNK_THRESHOLD


def auto_chunk_size(device, rows=None):
    """Queries and keys per block: `CPU_CHUNK_SIZE`, or by `DEVICE_BLOCK_BYTES`.

    Args:
        device: str. `platform()`.
        rows: int or None. `batch * heads` of the blocks, when known.

    >>> auto_chunk_size("cpu"), auto_chunk_size("gpu", 8), auto_chunk_size("gpu", 128)
    (256, 4096, 1024)
    """
    if device == "cpu":
        return CPU_CHUNK_SIZE
    rows = rows or 1
    for size in DEVICE_CHUNK_SIZES:
        if rows * size * size * 4 <= DEVICE_BLOCK_BYTES:
            return size
    return DEVICE_CHUNK_SIZES[-1]


def takes_chunked_path(
    chunk_threshold, key_length, fused, dtype, mask, tensor=None, hooked=False
):
    """Whether a call chunks, `chunk_threshold` and the device deciding.

    Args:
        chunk_threshold: `"auto"`, an int (chunk above it) or None (never).
        key_length: int. The number of keys `Tv`, static.
        fused: bool. Whether the call would otherwise take the fused
            `dot_product_attention` path (scaled dot, no weights returned,
            no dropout, ...).
        dtype: str. The compute dtype.
        mask: str. `mask_kind()`.
        tensor: optional tensor of the call, to find its device.
        hooked: bool. The call has a score hook (`auto_threshold`).

    >>> takes_chunked_path(None, 10**6, False, "float32", "none")
    False
    >>> takes_chunked_path(100, 101, True, "float32", "none")
    True
    """
    if chunk_threshold is None:
        return False
    if chunk_threshold == AUTO:
        if key_length <= min(CPU_CHUNK_THRESHOLD, DEVICE_CHUNK_THRESHOLD):
            return False  # short: no device query (a decoding step, say)
        name, device = backend(), platform(tensor)
        if fused and fused_is_memory_efficient(name, device, dtype, mask):
            return False
        chunk_threshold = auto_threshold(name, device, tensorflow_eager(), hooked)
    return key_length > chunk_threshold


def tensorflow_eager():
    """Whether TensorFlow runs the call op by op (outside a `tf.function`)."""
    if backend() != "tensorflow":
        return False
    import tensorflow as tf

    return tf.executing_eagerly()


def traced(tensor):
    """Whether `tensor` is symbolic: a `tf.function` graph or a JAX tracer.

    Code that is traced becomes one compiled program, in which a Python
    loop is unrolled; op-by-op code (eager TensorFlow, PyTorch, a concrete
    JAX array) runs each operation at once.

    >>> traced(keras.ops.ones((2,)))
    False
    """
    name = backend()
    if name == "tensorflow":
        return not tensorflow_eager()
    if name == "jax":
        import jax

        return isinstance(tensor, jax.core.Tracer)
    return False


def concrete_int(value):
    """The value of a scalar index when it is known now, else None.

    Known: a Python int, an eager PyTorch tensor (not while `torch.compile`,
    `torch.export` or `torch.jit.trace` traces the call) and a TensorFlow
    tensor outside a `tf.function`. Unknown: a symbolic tensor (a
    `tf.function` graph, a JAX tracer under `jax.jit`), any JAX array (JAX
    code is meant to be traced), None. Code that reads the value may then
    shape tensors by it (eager code runs op by op); traced code must keep
    static shapes.

    >>> concrete_int(3), concrete_int(None), concrete_int(True)
    (3, None, None)
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if len(getattr(value, "shape", (None,))) != 0:
        return None
    name = backend()
    if name == "torch":
        import torch

        if (
            isinstance(value, torch.Tensor)
            and value.device.type != "meta"
            and not torch.compiler.is_compiling()
            and not torch.jit.is_tracing()
        ):
            return int(value)
    elif name == "tensorflow" and tensorflow_eager():
        import tensorflow as tf

        if isinstance(value, tf.Tensor):
            return int(value)
    return None


def chunk_size(size, rows=None, tensor=None):
    """The block size of a call: `size`, or for `"auto"` `auto_chunk_size`
    (`EAGER_CPU_CHUNK_SIZE` on a CPU while TensorFlow runs eagerly)."""
    if size != AUTO:
        return size
    device = platform(tensor)
    if device == "cpu" and tensorflow_eager():
        return EAGER_CPU_CHUNK_SIZE
    return auto_chunk_size(device, rows)


def check(chunk_threshold, chunk_size):
    """Checks a layer's `chunk_threshold` and `chunk_size`; returns them."""
    return (
        int_argument(
            "chunk_threshold", chunk_threshold, minimum=0, allowed=(AUTO, None)
        ),
        int_argument("chunk_size", chunk_size, allowed=(AUTO,)),
    )


def fused_is_memory_efficient_here(dtype, mask, tensor=None):
    """`fused_is_memory_efficient` on this backend and `tensor`'s device."""
    return fused_is_memory_efficient(backend(), platform(tensor), dtype, mask)


#: Queries and keys per block of JAX's Triton flash kernel on a GPU
#: (`jax.experimental.pallas.ops.gpu.attention.mha`): forward blocks of
#: 128 queries x 64 keys, backward 64 x 64. On an H100, float32, 8 heads of
#: 64, forward + backward of the attention alone: 6.8 / 97.7 / 385 ms at T =
#: 8,192 / 32,768 / 65,536 against 15.5 / 235 / 937 ms for the chunked
#: loop with 4,096 blocks and 8.4 ms for XLA's explicit form (which runs out
#: of memory from 32,768); causal T = 16,384: 14.1 ms against 39.4 / 40.7;
#: 32 / 130 / 260 MiB of temporaries (`experiments/benchmarks/
#: attention_gpu_probe.py`, log in `experiments/benchmarks/logs/`).
TRITON_BLOCKS = {"block_q": 128, "block_k": 64, "backward": 64}

#: Lengths the Triton kernel takes: whole blocks of this many positions
#: (a self-attention of another length is padded up to them).
TRITON_LENGTH_BLOCK = 128

#: Head widths the Triton kernel takes (`depth`, after the narrower of
#: the key and value widths gets zero channels). The kernel rounds the width
#: up to a power of two; Triton's block product needs at least 16, and the
#: kernel's own tests run 32 to 128 (float16); this project measured 64.
TRITON_DEPTHS = (9, 128)

#: Run the Triton kernel in Pallas's interpreter (tests on a CPU only).
TRITON_INTERPRET = False

#: How `triton_padding` says the kernel takes a call's padding masks.
TRITON_PADDINGS = ("none", "queries", "shared")


def triton_padding(query_mask=None, key_masks=()):
    """How JAX's Triton kernel takes a call's padding masks, or None.

    Decided from the objects, never their values (a trace cannot read
    them): `"none"` without padding masks; `"queries"` with a query mask
    alone (the kernel runs unmasked, the padded rows are zeroed after);
    `"shared"` when every key mask given is the query mask itself, one
    tensor (self-attention with a Keras mask, `mha(x, x)`): the mask is the
    kernel's segment ids, so kept queries see only kept keys. None: a key
    mask of its own. Segment ids are shared by queries and keys, so a
    query that sees every key cannot be given a hidden key; that call
    keeps the chunked loop.

    Args:
        query_mask: optional `(B, Tq)` mask, `True` = kept.
        key_masks: the key padding masks of the call, each None or a
            `(B, Tv)` mask (`value_mask`, `key_mask`).

    >>> import numpy as np
    >>> mask = np.ones((1, 4), bool)
    >>> triton_padding(mask, (mask, None)), triton_padding(mask)
    ('shared', 'queries')
    >>> triton_padding(None, (mask,)) is None, triton_padding(mask, (mask.copy(),)) is None
    (True, True)
    """
    keys = [mask for mask in key_masks if mask is not None]
    if not keys:
        return "none" if query_mask is None else "queries"
    if query_mask is not None and all(mask is query_mask for mask in keys):
        return "shared"
    return None


def triton_flash_applies(
    backend, device, query_length, key_length, depth, causal=False, padding="none"
):
    """Whether JAX's Triton flash kernel can replace the chunked loop.

    JAX on a GPU, a head width in `TRITON_DEPTHS`, the kernel importable,
    and the masks it takes exactly: `padding` (`triton_padding`) not None,
    causal and `"shared"` padding only for self-attention (`Tq == Tv`).
    A self-attention of any length is padded to whole blocks of
    `TRITON_LENGTH_BLOCK` (the padding gets a segment id of its own);
    cross-attention needs the keys in whole blocks (its queries are padded).

    Args:
        backend: str. `keras.config.backend()`.
        device: str. `platform()`.
        query_length: int or None. `Tq`, static.
        key_length: int or None. `Tv`, static.
        depth: int. The head width of queries, keys and values.
        causal: bool. `use_causal_mask`.
        padding: str or None. `triton_padding()`.

    >>> triton_flash_applies("jax", "cpu", 8192, 8192, 64)
    False
    >>> triton_flash_applies("torch", "gpu", 8192, 8192, 64)
    False
    """
    if padding not in (*TRITON_PADDINGS, None):
        raise ValueError(
            f"`padding` must be one of {TRITON_PADDINGS} or None. "
            f"Received: padding={padding!r}"
        )
    if backend != "jax" or device != "gpu" or padding is None:
        return False
    if None in (query_length, key_length):
        return False
    if not TRITON_DEPTHS[0] <= depth <= TRITON_DEPTHS[1]:
        return False
    self_attention = query_length == key_length
    aligned = key_length % TRITON_LENGTH_BLOCK == 0
    if (causal or padding == "shared" or not aligned) and not self_attention:
        return False
    return _triton_mha() is not None


def triton_flash_applies_here(query, key, depth, causal=False, padding="none"):
    """`triton_flash_applies` on this backend, `query`'s device and the
    static lengths of `query` and `key` (`(B, T, ...)`)."""
    return triton_flash_applies(
        backend(),
        platform(query),
        query.shape[1],
        key.shape[1],
        depth,
        causal,
        padding,
    )


def _triton_mha():
    """`jax.experimental.pallas.ops.gpu.attention`, or None where missing."""
    try:
        from jax.experimental.pallas.ops.gpu import attention
    except ImportError:
        return None
    return attention


def triton_flash_attention(
    query,
    key,
    value,
    use_causal_mask=False,
    scale=None,
    query_mask=None,
    shared_mask=False,
):
    """Exact attention through JAX's Triton flash kernel, linear in memory.

    Lengths not in whole blocks are padded: the queries always (their rows
    are dropped after), the keys of a self-attention with a segment id of
    their own. A query row whose `query_mask` is `False` is zero, as on the
    explicit path: with `shared_mask` it attended only to hidden keys (its
    own segment), without it to every key; either way its gradient is
    zero.

    Args:
        query: `(B, Tq, heads, depth)`.
        key: `(B, Tv, heads, depth)`.
        value: `(B, Tv, heads, depth)`, the same depth as the keys.
        use_causal_mask: bool. Hide key `j > i` from query `i` (`Tq == Tv`).
        scale: float or None. Defaults to `1 / sqrt(depth)`.
        query_mask: optional boolean `(B, Tq)`; `False` rows are zero.
        shared_mask: bool. `query_mask` is also the keys' mask (`Tq == Tv`):
            it becomes the kernel's segment ids.

    Returns:
        The context `(B, Tq, heads, depth)` in the query's dtype; the
        kernel's own gradient (recomputing blocks, FlashAttention-2).
    """
    attention = _triton_mha()
    depth = query.shape[-1]
    scale = 1.0 / depth**0.5 if scale is None else float(scale)
    query_length, key_length = query.shape[1], key.shape[1]
    block = TRITON_LENGTH_BLOCK
    segment_ids = None
    if shared_mask:
        segment_ids = ops.cast(query_mask, "int32")
    elif key_length % block:
        # A self-attention of another length: the padding's own segment.
        segment_ids = ops.ones((ops.shape(query)[0], key_length), "int32")
    query = _pad_length(query, -query_length % block)
    key = _pad_length(key, -key_length % block)
    value = _pad_length(value, -key_length % block)
    if segment_ids is not None:
        segment_ids = ops.pad(segment_ids, [(0, 0), (0, -key_length % block)])
    blocks = TRITON_BLOCKS
    sizes = attention.BlockSizes(
        block_q=blocks["block_q"],
        block_k=blocks["block_k"],
        block_q_dkv=blocks["backward"],
        block_kv_dkv=blocks["backward"],
        block_q_dq=blocks["backward"],
        block_kv_dq=blocks["backward"],
    )
    context = attention.mha(
        query,
        key,
        value,
        segment_ids,
        sm_scale=scale,
        causal=bool(use_causal_mask),
        block_sizes=sizes,
        interpret=TRITON_INTERPRET,
    )
    context = context[:, :query_length]
    if query_mask is not None:
        rows = ops.cast(query_mask, "bool")[:, :, None, None]
        context = ops.where(rows, context, ops.zeros_like(context))
    return context


def _pad_length(tensor, extra):
    """`tensor` `(B, T, heads, depth)` with `extra` zero positions at the end."""
    if not extra:
        return tensor
    return ops.pad(tensor, [(0, 0), (0, extra), (0, 0), (0, 0)])
