"""Fashion-MNIST for the PyTorch baselines (train_torch.py, train_ddp.py,
train_torch_gpu.py), read from its gzipped IDX files and normalised as
ferry's runtime/data normalises it, so that both sides train on the same
numbers. numpy and torch are passed in: a script imports them itself, to
say so in a skip line when it cannot."""
import gzip
import json
import os
import struct
import sys

MEAN, STD = 0.2860, 0.3530  # the training set's, as ferry's runtime/data uses


def skip(why):
    """One JSON line saying why the baseline did not run; exit status 3."""
    print(json.dumps({"skipped": why}, separators=(",", ":")), flush=True)
    sys.exit(3)


def read_idx(path, np):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    if magic >> 8 != 0x08:
        raise ValueError("%s: not an IDX file of unsigned bytes" % path)
    ndims = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndims, data[4:4 + 4 * ndims])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndims).reshape(dims)


def load(data_dir, train, np, torch, shape=(-1,), dev=None):
    """The training (train) or test set as (images, labels) tensors, each
    image of `shape` ((-1,): flat), on `dev` when one is named."""
    prefix = "train" if train else "t10k"
    images = read_idx(os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz"), np)
    labels = read_idx(os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz"), np)
    x = (images.reshape((len(images),) + tuple(shape)).astype(np.float32) / 255.0 - MEAN) / STD
    x, y = torch.from_numpy(x), torch.from_numpy(labels.astype(np.int64))
    return (x.to(dev), y.to(dev)) if dev is not None else (x, y)
