"""How busy the machine is: the verifier's deadlines scale with it, and a run it starved is said so.

* :func:`measure` at the start of ``--verify``: the 1-minute load average per CPU this process may
  use, and a short calibration (how much wall time a fixed slice of CPU work takes: 1.0 on an idle
  machine, about 2.5 with five busy processes on two CPUs).  Its ``scale`` (at least 1, at most
  :data:`MAX_SCALE`) multiplies ``--timeout`` (the time a script may take on an idle machine), the
  grace a cluster worker gets after its peer failed, how long workers wait for each other's decision
  at the step bound, and TensorFlow's coordination-service shutdown-barrier time-out.
* :class:`Sampler` during a run: the load average, and how long the run's threads waited for a CPU
  (``/proc/PID/task/TID/schedstat``: time on a CPU, time waiting on a run queue) against the time
  they ran.  :func:`too_busy` says whether the machine starved the run: a time-out or a cluster that
  fell apart is then reported as "the machine was too busy", with these figures.

Linux ``/proc`` for the run-queue figures; elsewhere the load average alone.  No TensorFlow import.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Iterable, Optional

MAX_SCALE = 8.0  # deadlines grow at most this much
CALIBRATION_CPU_S = 0.1  # CPU seconds of work timed at the start
SCALE_ENV = "TFPAR_VERIFY_LOAD_SCALE"  # a number: use it instead of measuring (1: no scaling)
# a run was starved when its threads waited for a CPU at least this share of the time they wanted one
STARVED_WAIT_SHARE = 0.5


def cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def loadavg() -> Optional[float]:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


@dataclass
class Load:
    cpus: int
    load1: Optional[float]  # 1-minute load average at the start
    stretch: float  # wall time / CPU time of the calibration work
    scale: float  # what the deadlines are multiplied by
    forced: bool = False  # set by TFPAR_VERIFY_LOAD_SCALE

    def describe(self) -> str:
        if self.forced:
            return f"time-outs scaled x{self.scale:.1f} ({SCALE_ENV})"
        load = f"load average {self.load1:.1f} on {self.cpus} CPU{'s' if self.cpus != 1 else ''}" \
            if self.load1 is not None else f"{self.cpus} CPUs"
        return (f"the machine was busy at the start ({load}; {CALIBRATION_CPU_S:g} s of CPU work took "
                f"{CALIBRATION_CPU_S * self.stretch:.2f} s): time-outs scaled x{self.scale:.1f}")


def measure() -> Load:
    n = cpus()
    load1 = loadavg()
    forced = os.environ.get(SCALE_ENV, "").strip()
    if forced:
        try:
            value = float(forced)
            if 0 < value < float("inf"):
                return Load(n, load1, 1.0, min(MAX_SCALE, max(1.0, value)), forced=True)
        except ValueError:
            pass
    t0, c0 = time.perf_counter(), time.process_time()
    x = 0
    while time.process_time() - c0 < CALIBRATION_CPU_S and time.perf_counter() - t0 < 20 * CALIBRATION_CPU_S:
        for i in range(2000):
            x += i
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    stretch = wall / cpu if cpu > 0 else 1.0
    scale = max(1.0, stretch, (load1 or 0.0) / n)
    return Load(n, load1, stretch, round(min(MAX_SCALE, scale), 2))


def _thread_times(pid: int) -> Optional[tuple[int, int]]:
    """(ns on a CPU, ns waiting on a run queue) summed over the threads of ``pid``; None without
    /proc (or without schedstat)."""
    run = wait = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    if not tids or not os.path.exists(f"/proc/{pid}/task/{tids[0]}/schedstat"):
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                parts = f.read().split()
            run += int(parts[0])
            wait += int(parts[1])
        except (OSError, ValueError, IndexError):
            continue
    return run, wait


@dataclass
class Sampler:
    """What the machine did to one run: load samples, and its processes' CPU and run-queue times
    (per process the largest sum seen: a thread that ended takes its times with it)."""

    cpus: int = field(default_factory=cpus)
    loads: list[float] = field(default_factory=list)
    per_pid: dict[int, tuple[int, int]] = field(default_factory=dict)
    series: list[tuple[float, int, int]] = field(default_factory=list)  # (time, ns run, ns waited) so far

    def sample(self, pids: Iterable[int]) -> None:
        la = loadavg()
        if la is not None:
            self.loads.append(la)
        for pid in pids:
            times = _thread_times(pid)
            if times is None:
                continue
            run, wait = times
            old = self.per_pid.get(pid, (0, 0))
            if run + wait >= sum(old):
                self.per_pid[pid] = (run, wait)
        if self.per_pid:
            self.series.append((time.time(), sum(r for r, _ in self.per_pid.values()),
                                sum(w for _, w in self.per_pid.values())))

    def figures(self) -> dict:
        """The whole run's figures, and the last third of it (``recent_*``: what it was doing when it
        ended, or was killed; a script that hangs after a slow start is not starved at its end)."""
        out = {"cpus": self.cpus, "load_mean": round(sum(self.loads) / len(self.loads), 2) if self.loads else None,
               "load_max": round(max(self.loads), 2) if self.loads else None, "schedstat": bool(self.series),
               "cpu_s": 0.0, "wait_s": 0.0, "recent_s": 0.0, "recent_cpu_s": 0.0, "recent_wait_s": 0.0}
        if self.series:
            t_end, run, wait = self.series[-1]
            t_from = t_end - max(2.0, (t_end - self.series[0][0]) / 3)
            t0, run0, wait0 = next(x for x in self.series if x[0] >= t_from)
            out.update(cpu_s=round(run / 1e9, 2), wait_s=round(wait / 1e9, 2), recent_s=round(t_end - t0, 2),
                       recent_cpu_s=round((run - run0) / 1e9, 2), recent_wait_s=round((wait - wait0) / 1e9, 2))
        return out


def too_busy(fig: Optional[dict]) -> bool:
    """In the last third of the run its threads wanted a CPU (a quarter of a CPU on average at
    least: a script that sleeps, or waits for a peer, does not) and waited for one at least as long
    as they ran; without run-queue figures (no /proc), the load average stayed above twice the CPUs."""
    if not fig:
        return False
    if fig.get("schedstat"):
        run, wait, span = fig.get("recent_cpu_s") or 0.0, fig.get("recent_wait_s") or 0.0, fig.get("recent_s") or 0.0
        return span > 0 and run + wait >= 0.25 * span and wait / (run + wait) >= STARVED_WAIT_SHARE
    load = fig.get("load_mean")
    return load is not None and load > 2 * (fig.get("cpus") or 1)


def describe_run(fig: dict, scale: float) -> str:
    """``load average 5.1 (peak 6.0) on 2 CPUs during the run; its threads ran 12.0 s and waited 30.1 s
    for a CPU; time-outs were scaled x2.5``."""
    parts = []
    if fig.get("load_mean") is not None:
        parts.append(f"load average {fig['load_mean']:.1f} (peak {fig['load_max']:.1f}) on {fig['cpus']} CPU"
                     f"{'s' if fig['cpus'] != 1 else ''} during the run")
    if (fig.get("cpu_s") or 0) + (fig.get("wait_s") or 0) > 0:
        parts.append(f"its threads ran {fig['cpu_s']:.1f} s and waited {fig['wait_s']:.1f} s for a CPU (in its last "
                     f"{fig['recent_s']:.0f} s: ran {fig['recent_cpu_s']:.1f} s, waited {fig['recent_wait_s']:.1f} s)")
    parts.append(f"time-outs were scaled x{scale:.1f} for the load at the start" if scale > 1 else
                 "the machine was idle at the start (time-outs not scaled)")
    return "; ".join(parts)
