"""``keras.datasets.*.load_data`` without a network: synthetic arrays.

When the dataset file is not in the Keras cache (``~/.keras/datasets``) and
the download host cannot be reached, ``load_data`` returns random arrays of
the real shapes and dtypes (deterministic, seed 0) and the run notes it.
``TFPAR_VERIFY_DATASETS=synthetic`` forces synthetic data, ``real`` never
replaces.  The arrays are random, not constant, so input probes never see
"identical data on every replica" because of the replacement.
"""
from __future__ import annotations

import os
import socket
import threading
import types
from typing import Any, Callable

import numpy as np

# name -> (train n, test n, x shape tail, x dtype, y shape tail, y dtype, classes, cache files)
_IMAGES = {
    "mnist": (60000, 10000, (28, 28), "uint8", (), "uint8", 10, ["mnist.npz"]),
    "fashion_mnist": (60000, 10000, (28, 28), "uint8", (), "uint8", 10,
                      ["fashion-mnist/train-images-idx3-ubyte.gz"]),
    "cifar10": (50000, 10000, (32, 32, 3), "uint8", (1,), "uint8", 10, ["cifar-10-batches-py"]),
    "cifar100": (50000, 10000, (32, 32, 3), "uint8", (1,), "int64", 100, ["cifar-100-python"]),
}
_TABLES = {
    "boston_housing": (506, 13, "float64", ["boston_housing.npz"]),
    "california_housing": (20640, 8, "float32", ["california_housing.npz"]),
}
_TEXT = {
    "imdb": (25000, 25000, 2, 88586, ["imdb.npz"]),
    "reuters": (8982, 2246, 46, 30979, ["reuters.npz"]),
}

REPLACED: list[str] = []
_online: list[bool] = []
_lock = threading.Lock()


def _cache_dir() -> str:
    base = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    return os.path.join(base, "datasets")


def _online_check() -> bool:
    with _lock:
        if _online:
            return _online[0]
        ok = False
        try:
            with socket.create_connection(("storage.googleapis.com", 443), timeout=2.0):
                ok = True
        except OSError:
            ok = False
        _online.append(ok)
        return ok


def use_synthetic(name: str) -> bool:
    mode = os.environ.get("TFPAR_VERIFY_DATASETS", "auto").lower()
    if mode == "synthetic":
        return True
    if mode == "real":
        return False
    files = (_IMAGES.get(name) or _TABLES.get(name) or _TEXT.get(name) or (0,) * 8)[-1]
    if files and any(os.path.exists(os.path.join(_cache_dir(), f)) for f in files):
        return False
    return not _online_check()


def make(name: str, *args: Any, **kwargs: Any):
    rng = np.random.default_rng(0)
    if name in _IMAGES:
        ntr, nte, xs, xd, ys, yd, classes, _ = _IMAGES[name]
        if name == "cifar100":
            mode = kwargs.get("label_mode", args[0] if args else "fine")
            classes = 20 if mode == "coarse" else 100

        def part(n):
            x = rng.integers(0, 256, size=(n,) + xs, dtype=np.uint8).astype(xd, copy=False)
            y = rng.integers(0, classes, size=(n,) + ys).astype(yd)
            return x, y

        return part(ntr), part(nte)
    if name in _TABLES:
        n, d, dt, _ = _TABLES[name]
        if name == "california_housing":
            version = kwargs.get("version", args[0] if args else "large")
            n = 600 if version == "small" else n
        split = kwargs.get("test_split", 0.2)
        x = rng.normal(size=(n, d)).astype(dt)
        y = rng.normal(size=(n,)).astype(dt)
        k = int(n * (1 - split))
        return (x[:k], y[:k]), (x[k:], y[k:])
    if name in _TEXT:
        ntr, nte, classes, vocab, _ = _TEXT[name]
        num_words = kwargs.get("num_words") or vocab
        maxlen = kwargs.get("maxlen")
        start = kwargs.get("start_char", 1)

        def seqs(n):
            out = np.empty(n, dtype=object)
            lens = rng.integers(20, 300, size=n)
            if maxlen:
                lens = np.minimum(lens, maxlen)
            for i in range(n):
                s = rng.integers(2, max(3, num_words), size=int(lens[i])).tolist()
                out[i] = ([start] if start is not None else []) + s[:-1]
            return out

        return (seqs(ntr), rng.integers(0, classes, size=ntr).astype("int64")), (
            seqs(nte), rng.integers(0, classes, size=nte).astype("int64"))
    raise KeyError(name)


KNOWN = sorted(list(_IMAGES) + list(_TABLES) + list(_TEXT))


def install(note: Callable[[str], None]) -> None:
    """Patch the ``load_data`` functions of Keras 3 and tf_keras (in place,
    so every alias module such as ``tf.keras.datasets.mnist`` sees it)."""
    from tfpar_lint.verify.runtime import when_imported

    for pkg in ("keras.src.datasets", "tf_keras.src.datasets"):
        for name in KNOWN:
            when_imported(f"{pkg}.{name}", lambda m, n=name: _patch_module(m, n, note))


def _patch_module(mod: types.ModuleType, name: str, note: Callable[[str], None]) -> None:
    orig = getattr(mod, "load_data", None)
    if orig is None or getattr(orig, "__tfpar_wrapped__", False):
        return
    real = types.FunctionType(orig.__code__, orig.__globals__, orig.__name__,
                              orig.__defaults__, orig.__closure__)
    real.__kwdefaults__ = orig.__kwdefaults__

    def load_data(*args, **kwargs):
        if use_synthetic(name):
            note(f"keras.datasets.{name}.load_data replaced by synthetic arrays "
                 "of the same shapes and dtypes (offline)")
            REPLACED.append(name)
            return make(name, *args, **kwargs)
        return real(*args, **kwargs)

    # Swap the code object so every alias of this function object follows.
    _REGISTRY[mod.__name__] = load_data
    template = _template()
    orig.__code__ = template.__code__
    orig.__defaults__ = None
    orig.__kwdefaults__ = None
    orig.__tfpar_wrapped__ = True


_REGISTRY: dict[str, Callable] = {}


def _template():
    def load_data(*args, **kwargs):
        import tfpar_lint.verify.synthetic as _s

        return _s._REGISTRY[__name__](*args, **kwargs)  # noqa: F821 - module global

    return load_data
