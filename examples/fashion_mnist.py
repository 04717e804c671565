"""Fashion-MNIST from its gzipped IDX files (Debian's dataset-fashion-mnist
puts them in /usr/share/datasets/fashion-mnist) as torch tensors."""
import gzip
import os

import numpy as np
import torch


def idx(path):
    with gzip.open(path) as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(folder, kind):
    """kind "train" or "t10k": images (N x 784 floats in [0, 1]) and labels."""
    x = idx(os.path.join(folder, "%s-images-idx3-ubyte.gz" % kind)).reshape(-1, 784).astype(np.float32) / 255.0
    y = idx(os.path.join(folder, "%s-labels-idx1-ubyte.gz" % kind)).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)
