"""``--devices auto|cpu:N|gpu|gpu:N``: parsing (parent) and set-up (child).

* ``auto``  - every GPU when there are at least two; one GPU split into N
  logical GPUs (memory limit per logical GPU); else N logical CPU devices.
* ``cpu:N`` - N logical CPU devices (GPUs hidden).
* ``gpu``   - every GPU (one GPU is split into N logical GPUs).
* ``gpu:N`` - N GPUs, or GPU 0 split into N logical GPUs when fewer exist.

N defaults to 2.  Logical devices must be configured before TensorFlow
initialises its runtime, so :func:`configure` runs in the child before the
script (and before any op).  For a multi-worker cluster every worker process
gets one device (MultiWorkerMirroredStrategy uses one CPU, or the GPUs, of
each worker).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

DEFAULT_N = 2
DEFAULT_GPU_MEMORY_MB = 2048


@dataclass(frozen=True)
class DeviceRequest:
    kind: str  # auto | cpu | gpu
    count: int | None = None

    def __str__(self) -> str:
        return self.kind if self.count is None else f"{self.kind}:{self.count}"


def parse_devices(spec: str | None) -> DeviceRequest:
    s = (spec or "auto").strip().lower()
    if s == "auto":
        return DeviceRequest("auto")
    m = re.fullmatch(r"(cpu|gpu)(?::(\d+))?", s)
    if not m:
        raise ValueError(f"--devices must be auto, cpu:N, gpu or gpu:N, not {spec!r}")
    n = int(m.group(2)) if m.group(2) else None
    if n is not None and n < 1:
        raise ValueError(f"--devices {spec!r}: N must be at least 1")
    if m.group(1) == "cpu" and n is None:
        n = DEFAULT_N
    return DeviceRequest(m.group(1), n)


def host_has_gpu() -> bool:
    """Cheap guess in the parent (no TensorFlow import): NVIDIA device nodes."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return os.path.exists("/dev/nvidia0") or os.path.exists("/dev/dxg")


def configure(req: DeviceRequest, worker_index: int | None = None, num_workers: int = 1):
    """Child side: configure logical devices; returns (device names, notes, split_gpu).

    Must run after ``import tensorflow`` and before any op executes.
    """
    import tensorflow as tf

    notes: list[str] = []
    gpus = [] if req.kind == "cpu" else tf.config.list_physical_devices("GPU")
    mem = int(os.environ.get("TFPAR_VERIFY_GPU_MEMORY_MB", DEFAULT_GPU_MEMORY_MB))
    if req.kind == "gpu" and not gpus:
        raise RuntimeError(f"--devices {req}: no GPU visible to TensorFlow")
    if req.kind == "cpu" or not gpus:
        try:
            tf.config.set_visible_devices([], "GPU")
        except Exception:
            pass
        n = req.count or DEFAULT_N
        if worker_index is not None:
            n = 1  # MWMS uses CPU:0 of each worker
        cpu = tf.config.list_physical_devices("CPU")[0]
        if n > 1:
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
            )
            notes.append(f"{n} logical CPU devices")
        return [f"/device:CPU:{i}" for i in range(n)], notes, False
    # GPUs
    if worker_index is not None:
        if len(gpus) >= num_workers:
            mine = [gpus[worker_index]]
            tf.config.set_visible_devices(mine, "GPU")
            return ["/device:GPU:0"], notes, False
        tf.config.set_visible_devices([gpus[0]], "GPU")
        tf.config.set_logical_device_configuration(
            gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=mem)]
        )
        notes.append(f"workers share GPU 0 ({mem} MiB each)")
        return ["/device:GPU:0"], notes, False
    want = req.count or (len(gpus) if len(gpus) >= 2 else DEFAULT_N)
    if len(gpus) >= want:
        tf.config.set_visible_devices(gpus[:want], "GPU")
        return [f"/device:GPU:{i}" for i in range(want)], notes, False
    tf.config.set_visible_devices([gpus[0]], "GPU")
    tf.config.set_logical_device_configuration(
        gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=mem) for _ in range(want)]
    )
    notes.append(f"GPU 0 split into {want} logical GPUs of {mem} MiB")
    return [f"/device:GPU:{i}" for i in range(want)], notes, True
