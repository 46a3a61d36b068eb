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


def host_gpus() -> int:
    """How many GPUs the scripts would see, guessed in the parent without TensorFlow: the NVIDIA
    device nodes (``/dev/nvidiaN``; WSL's ``/dev/dxg`` counts as one), as far as
    ``CUDA_VISIBLE_DEVICES`` lets them through."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", None)
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    try:
        n = sum(1 for d in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", d))
    except OSError:
        n = 0
    if not n and os.path.exists("/dev/dxg"):
        n = 1
    if visible is not None and n:
        ids = [x for x in visible.split(",") if x.strip() and not x.strip().startswith("-")]
        n = min(n, len(ids))
    return n


def host_has_gpu() -> bool:
    return host_gpus() > 0


def unmet(spec: str | None) -> str | None:
    """Why this machine cannot give what ``--devices`` asks for (None when it can): a GPU request
    without a GPU is refused, never run on CPUs instead."""
    try:
        req = parse_devices(spec)
    except ValueError as e:
        return str(e)
    if req.kind == "gpu" and not host_has_gpu():
        hidden = " (CUDA_VISIBLE_DEVICES hides them)" if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1") \
            else ""
        return (f"--devices {req}: this machine has no GPU{hidden}; use --devices auto or cpu:N "
                f"(N logical CPU devices), or run on a machine with a GPU")
    return None


@dataclass(frozen=True)
class DevicePlan:
    """What :func:`configure` does, decided from the GPUs present alone (testable without one).

    ``kind`` "cpu" or "gpu"; ``visible``: indices of the physical GPUs to keep visible;
    ``split``: logical devices to create on the first visible device (0: none);
    ``names``: the devices the strategies get; ``split_gpu``: one GPU split into logical GPUs
    (NCCL cannot all-reduce between those)."""

    kind: str
    names: tuple[str, ...]
    visible: tuple[int, ...] = ()
    split: int = 0
    memory_mb: int = 0
    split_gpu: bool = False
    note: str = ""


def plan(req: DeviceRequest, n_gpus: int, worker_index: int | None = None, num_workers: int = 1,
         memory_mb: int = DEFAULT_GPU_MEMORY_MB) -> DevicePlan:
    """The devices for ``req`` on a machine with ``n_gpus`` GPUs (0 for none, or hidden).

    * ``auto``: every GPU when there are at least two; one GPU split into 2 logical GPUs;
      no GPU: 2 logical CPU devices.
    * ``gpu``: as auto, but an error without a GPU; ``gpu:N``: N GPUs, or GPU 0 split into N.
    * ``cpu:N``: N logical CPU devices.
    * a worker of a local cluster (``worker_index``) gets one device: its own GPU when there
      is one per worker, else GPU 0 shared with a memory limit, else CPU:0."""
    gpus = 0 if req.kind == "cpu" else max(0, int(n_gpus))
    if req.kind == "gpu" and not gpus:
        raise RuntimeError(f"--devices {req}: no GPU visible to TensorFlow")
    if not gpus:
        n = 1 if worker_index is not None else (req.count or DEFAULT_N)
        return DevicePlan("cpu", tuple(f"/device:CPU:{i}" for i in range(n)), split=n if n > 1 else 0,
                          note=f"{n} logical CPU devices" if n > 1 else "")
    if worker_index is not None:
        if gpus >= num_workers:
            return DevicePlan("gpu", ("/device:GPU:0",), visible=(worker_index,))
        return DevicePlan("gpu", ("/device:GPU:0",), visible=(0,), split=1, memory_mb=memory_mb,
                          note=f"workers share GPU 0 ({memory_mb} MiB each)")
    want = req.count or (gpus if gpus >= 2 else DEFAULT_N)
    names = tuple(f"/device:GPU:{i}" for i in range(want))
    if gpus >= want:
        return DevicePlan("gpu", names, visible=tuple(range(want)))
    return DevicePlan("gpu", names, visible=(0,), split=want, memory_mb=memory_mb, split_gpu=True,
                      note=f"GPU 0 split into {want} logical GPUs of {memory_mb} MiB")


def configure(req: DeviceRequest, worker_index: int | None = None, num_workers: int = 1):
    """Child side: configure logical devices as :func:`plan` says; returns (device names,
    notes, split_gpu).  Must run after ``import tensorflow`` and before any op executes."""
    import tensorflow as tf

    gpus = [] if req.kind == "cpu" else tf.config.list_physical_devices("GPU")
    mem = int(os.environ.get("TFPAR_VERIFY_GPU_MEMORY_MB", DEFAULT_GPU_MEMORY_MB))
    p = plan(req, len(gpus), worker_index, num_workers, mem)
    notes = [p.note] if p.note else []
    if p.kind == "cpu":
        try:
            tf.config.set_visible_devices([], "GPU")
        except Exception:
            pass
        if p.split:
            cpu = tf.config.list_physical_devices("CPU")[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(p.split)])
        return list(p.names), notes, False
    tf.config.set_visible_devices([gpus[i] for i in p.visible], "GPU")
    if p.split:
        tf.config.set_logical_device_configuration(
            gpus[p.visible[0]], [tf.config.LogicalDeviceConfiguration(memory_limit=p.memory_mb)
                                 for _ in range(p.split)])
    return list(p.names), notes, p.split_gpu
