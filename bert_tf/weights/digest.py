"""A digest of pre-trained weights: what a LoRA run records of its base checkpoint, so
that a base changed since is refused instead of silently giving another model.

    record = digest.weights_digest("uncased_L-12_H-768_A-12")
    record["sha256"], record["weights"]   # the digest, the file or prefix it covers

The rule (cheap, and any change of a weight changes it):
  * a TF checkpoint (google-research or bert_tf, a prefix or the folder holding it):
    sha256 of its `.index` file, which lists every tensor's dtype, shape, offset and
    CRC32C checksum, then of each data shard's name and size (the data itself is not
    read: its checksums are in the index);
  * a Hugging Face `model.safetensors`: sha256 of the whole file (its header holds no
    checksums), read once per file, size and modification time.
"""

import functools
import hashlib
import os

import tensorflow as tf

from bert_tf.weights import checkpoints

RULE = ("sha256 of the checkpoint's .index file (every tensor's CRC32C) and its data "
        "shards' names and sizes; of the whole file for a .safetensors")
_CHUNK = 1 << 20


def data_files(prefix: str) -> list:
    """The data shards `<prefix>.data-0000i-of-0000n` of a checkpoint.

    Raises:
      FileNotFoundError: naming the first shard that is missing.
    """
    folder, stem = os.path.split(prefix)
    found = [name for name in tf.io.gfile.listdir(folder or ".")  # no glob: `[` in a name
             if name.startswith(f"{stem}.data-") and "-of-" in name]
    counts = {int(name.rsplit("-of-", 1)[1]) for name in found
              if name.rsplit("-of-", 1)[1].isdigit()}
    count = max(counts) if counts else 1
    shards = [f"{prefix}.data-{index:05d}-of-{count:05d}" for index in range(count)]
    for path in shards:
        if not tf.io.gfile.exists(path):
            raise FileNotFoundError(f"{os.path.basename(path)} is missing")
    return shards


def weights_digest(path) -> dict:
    """{"path": `path`, "weights": the file or prefix read, "sha256": the digest (see the
    module docstring)} of the pre-trained weights at `path` (any `from_pretrained`
    location).

    Raises:
      FileNotFoundError: naming `path`, when no weights are there.
    """
    kind, weights, _ = checkpoints.resolve_location(path)
    if kind == "hf":
        if os.path.isdir(weights):
            weights = os.path.join(weights, "model.safetensors")
        stat = os.stat(weights)
        sha = _file_sha256(os.path.abspath(weights), stat.st_size, stat.st_mtime_ns)
    else:
        digest = hashlib.sha256()
        with tf.io.gfile.GFile(weights + ".index", "rb") as file:
            digest.update(file.read())
        for shard in data_files(weights):
            digest.update(f"{os.path.basename(shard)}:{tf.io.gfile.stat(shard).length}\n"
                          .encode())
        sha = digest.hexdigest()
    return {"path": os.fspath(path), "weights": os.fspath(weights), "sha256": sha}


@functools.lru_cache(maxsize=8)
def _file_sha256(path, size, mtime_ns) -> str:
    """sha256 of a whole file (cached per path, size and modification time)."""
    del size, mtime_ns  # the cache key: a rewritten file is read again
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()
