"""Tensors and plain Python values to bytes and back, without pickle: what
broadcast_object sends. A peer's bytes can only ever make None, bools,
ints, floats, strings, lists, tuples, dicts and tensors of torch's own
dtypes; anything else is refused on the sender, before a byte leaves.

The bytes: an 8-byte little-endian length, a JSON tree of that length,
then the tensors' bytes. Each JSON node names its kind: {"N": 0} None,
{"b": bool}, {"i": "digits"}, {"f": "repr"}, {"s": str}, {"l": [...]},
{"u": [...]} a tuple, {"d": [[key, value], ...]} a dict (in order), and
{"t": [dtype, shape, offset, bytes]} a tensor."""
import json
import math
import struct

import torch


def _encode(obj, blobs, at):
    if obj is None:
        return {"N": 0}
    if isinstance(obj, bool):
        return {"b": obj}
    if isinstance(obj, int):
        return {"i": str(obj)}
    if isinstance(obj, float):
        return {"f": repr(obj)}
    if isinstance(obj, str):
        return {"s": obj}
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous()
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        node = {"t": [str(t.dtype).replace("torch.", ""), list(t.shape), at[0], len(data)]}
        blobs.append(data)
        at[0] += len(data)
        return node
    if isinstance(obj, dict):
        return {"d": [[_encode(k, blobs, at), _encode(v, blobs, at)] for k, v in obj.items()]}
    if isinstance(obj, tuple):
        return {"u": [_encode(v, blobs, at) for v in obj]}
    if isinstance(obj, list):
        return {"l": [_encode(v, blobs, at) for v in obj]}
    raise ValueError("a %s is not a tensor or a plain value (None, bool, int, float, str, list, tuple, dict)"
                     % type(obj).__name__)


def dumps(obj):
    """The bytes of obj; ValueError when it holds anything else."""
    blobs = []
    tree = json.dumps(_encode(obj, blobs, [0]), allow_nan=False).encode()
    return struct.pack("<Q", len(tree)) + tree + b"".join(blobs)


def _dtype(name):
    d = getattr(torch, name, None) if isinstance(name, str) and name.isidentifier() else None
    if not isinstance(d, torch.dtype):
        raise ValueError("not a dtype: %r" % (name,))
    return d


def _decode(node, data):
    if not isinstance(node, dict) or len(node) != 1:
        raise ValueError("not a node: %r" % (node,))
    (kind, v), = node.items()
    if kind == "N":
        return None
    if kind == "b" and isinstance(v, bool):
        return v
    if kind == "i" and isinstance(v, str) and v.lstrip("-").isdigit() and len(v) < 4400:
        return int(v)
    if kind == "f" and isinstance(v, str):
        return float(v)  # repr's digits, nan, inf
    if kind == "s" and isinstance(v, str):
        return v
    if kind in ("l", "u") and isinstance(v, list):
        items = [_decode(x, data) for x in v]
        return items if kind == "l" else tuple(items)
    if kind == "d" and isinstance(v, list):
        out = {}
        for pair in v:
            if not isinstance(pair, list) or len(pair) != 2:
                raise ValueError("not a dict entry")
            key = _decode(pair[0], data)
            if isinstance(key, (list, dict, torch.Tensor)):
                raise ValueError("not a dict key")
            out[key] = _decode(pair[1], data)
        return out
    if kind == "t" and isinstance(v, list) and len(v) == 4:
        dtype, shape, off, n = _dtype(v[0]), v[1], v[2], v[3]
        if not (isinstance(shape, list) and all(isinstance(s, int) and s >= 0 for s in shape) and
                isinstance(off, int) and isinstance(n, int) and 0 <= off and 0 <= n and off + n <= len(data)):
            raise ValueError("a tensor's place is wrong")
        numel = math.prod(shape)
        if numel * torch.empty((), dtype=dtype).element_size() != n:
            raise ValueError("a tensor's size is wrong")
        if not n:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(bytearray(data[off:off + n]), dtype=torch.uint8).view(dtype).reshape(shape).clone()
    raise ValueError("not a node of kind %r" % (kind,))


def loads(data):
    """The value in bytes that dumps made; ValueError for anything else."""
    if len(data) < 8:
        raise ValueError("too short")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError("too short")
    try:
        return _decode(json.loads(data[8:8 + n].decode()), data[8 + n:])
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ValueError(str(e)) from None
