"""Resource samples for the stats WebSockets: Docker's container stats frames (with the
sample Arcane adds), the host's SystemStats, and the diagnostics snapshot.

The numbers are the simulator's own but behave like Docker's: counters that only grow
(CPU time, bytes received and sent, bytes read and written), a memory figure that moves
around a base, a first frame whose `precpu_stats` is empty (Docker has nothing to compare
with yet), and zeros for a container that is not running. Everything is a function of
the container and the sample's number, so two runs see the same frames. A container's
`_sim.stats` may set the base figures: {cpu_percent, memory_bytes, memory_limit,
rx_bytes_per_s, tx_bytes_per_s, read_bytes_per_s, write_bytes_per_s, pids}.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

NS = 1_000_000_000
ZERO_TIME = "0001-01-01T00:00:00Z"  # Go's zero time.Time, as Docker writes an unset preread


def _seed(text: str, salt: str, low: float, high: float) -> float:
    h = int(hashlib.sha256(f"{salt}:{text}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return low + (high - low) * h


def _wobble(n: int, spread: float) -> float:
    """A repeatable factor around 1 (sample n)."""
    return 1 + spread * math.sin(n * 1.7 + 0.3)


def container_base(item: dict, cpus: int, memory_total: int) -> dict:
    """The figures a container's samples move around (its `_sim.stats`, else seeded)."""
    cid = str(item.get("id", ""))
    own = (item.get("_sim") or {}).get("stats") or {}
    host = item.get("hostConfig") or {}
    return {
        "cpu_percent": float(own.get("cpu_percent", _seed(cid, "cpu", 0.5, 35.0))),  # of one CPU
        "memory_bytes": int(own.get("memory_bytes", _seed(cid, "mem", 20e6, 320e6))),
        "memory_limit": int(own.get("memory_limit", host.get("memory") or memory_total)),
        "rx": float(own.get("rx_bytes_per_s", _seed(cid, "rx", 200, 40000))),
        "tx": float(own.get("tx_bytes_per_s", _seed(cid, "tx", 100, 20000))),
        "read": float(own.get("read_bytes_per_s", _seed(cid, "rd", 0, 200000))),
        "write": float(own.get("write_bytes_per_s", _seed(cid, "wr", 0, 100000))),
        "pids": int(own.get("pids", _seed(cid, "pid", 1, 40))),
        "cpus": cpus,
    }


def _cpu(base: dict, n: int, interval_s: float, running: bool) -> dict:
    """cpu_stats after n samples (n = 0: the first frame's precpu, empty)."""
    if n <= 0 or not running:
        return {"cpu_usage": {"total_usage": 0, "usage_in_kernelmode": 0, "usage_in_usermode": 0},
                "system_cpu_usage": 0, "online_cpus": 0 if n <= 0 else base["cpus"],
                "throttling_data": {"periods": 0, "throttled_periods": 0, "throttled_time": 0}}
    step = interval_s * NS
    total = sum(int(step * base["cpu_percent"] / 100 * _wobble(i, 0.25)) for i in range(1, n + 1))
    system = int(1_000_000 * NS + n * step * base["cpus"])
    return {"cpu_usage": {"total_usage": total, "usage_in_kernelmode": total // 5, "usage_in_usermode": total - total // 5},
            "system_cpu_usage": system, "online_cpus": base["cpus"],
            "throttling_data": {"periods": 0, "throttled_periods": 0, "throttled_time": 0}}


def container_frame(item: dict, n: int, read: str, preread: str, base: dict, interval_s: float) -> dict:
    """Docker's StatsResponse for sample n (1-based) of a container, moby's field names."""
    running = item.get("state") in ("running", "paused")
    t = n * interval_s
    usage = int(base["memory_bytes"] * _wobble(n, 0.08)) if running else 0
    inactive = usage // 20 if running else 0
    frame: dict[str, Any] = {
        "read": read,
        "preread": preread if n > 1 else ZERO_TIME,
        "pids_stats": {"current": base["pids"] if running else 0, "limit": 4194304 if running else 0},
        "blkio_stats": {
            "io_service_bytes_recursive": [
                {"major": 8, "minor": 0, "op": "read", "value": int(base["read"] * t)},
                {"major": 8, "minor": 0, "op": "write", "value": int(base["write"] * t)},
            ] if running else None,
            "io_serviced_recursive": None, "io_queue_recursive": None, "io_service_time_recursive": None,
            "io_wait_time_recursive": None, "io_merged_recursive": None, "io_time_recursive": None, "sectors_recursive": None,
        },
        "num_procs": 0,
        "storage_stats": {},
        "cpu_stats": _cpu(base, n, interval_s, running),
        "precpu_stats": _cpu(base, n - 1, interval_s, running),
        "memory_stats": ({"usage": usage, "stats": {"inactive_file": inactive, "active_file": usage // 10, "anon": usage - usage // 4,
                                                     "file": usage // 4, "pgfault": 1200 * n, "pgmajfault": 3}, "limit": base["memory_limit"]}
                         if running else {}),
        "name": str((item.get("names") or [""])[0]),
        "id": str(item.get("id", "")),
    }
    if running:
        rx, tx = int(base["rx"] * t), int(base["tx"] * t)
        frame["networks"] = {"eth0": {"rx_bytes": rx, "rx_packets": rx // 600, "rx_errors": 0, "rx_dropped": 0,
                                      "tx_bytes": tx, "tx_packets": tx // 400, "tx_errors": 0, "tx_dropped": 0}}
    return frame


def history_sample(frame: dict) -> dict:
    """streams stats/history.go BuildSample: CPU % = Δcpu/Δsystem (no online-CPU factor),
    memory = usage - inactive_file, both in tenths of a percent, clamped to 0-100."""
    cpu, pre = frame["cpu_stats"], frame["precpu_stats"]
    cpu_delta = cpu["cpu_usage"]["total_usage"] - pre["cpu_usage"]["total_usage"]
    system_delta = cpu["system_cpu_usage"] - pre["system_cpu_usage"]
    cpu_pct = 0.0 if system_delta <= 0 or cpu_delta <= 0 else min(max(cpu_delta / system_delta * 100, 0), 100)
    mem = frame.get("memory_stats") or {}
    usage, inactive = int(mem.get("usage") or 0), int((mem.get("stats") or {}).get("inactive_file") or 0)
    used = usage - inactive if usage > inactive else 0
    limit = int(mem.get("limit") or 0)
    mem_pct = 0.0 if limit == 0 else min(max(used / limit * 100, 0), 100)
    return {"cpuTenths": int(round(min(max(cpu_pct, 0), 100) * 10)), "memoryTenths": int(round(mem_pct * 10)), "memoryUsageBytes": used}


def system_frame(env: str, n: int, host: dict, hostname: str) -> dict:
    """types/system/stats.go SystemStats for the n-th sample of a host (the first one too
    has a CPU figure: Arcane's sampler measures one second before its first frame)."""
    mem_total = int(host["memoryTotal"])
    disk_total = int(host["diskTotal"])
    cpu = round(_seed(env, "host-cpu", 4, 40) * _wobble(n, 0.3), 2)
    out: dict[str, Any] = {
        "cpuUsage": cpu,
        "memoryUsage": int(mem_total * _seed(env, "host-mem", 0.2, 0.6) * _wobble(n, 0.05)),
        "memoryTotal": mem_total,
        "diskUsage": int(disk_total * _seed(env, "host-disk", 0.3, 0.7)),
        "diskTotal": disk_total,
        "cpuCount": int(host["cpuCount"]),
        "architecture": host["architecture"],
        "platform": host["platform"],
    }
    if hostname:
        out["hostname"] = hostname
    out["gpuCount"] = int(host.get("gpuCount", 0))
    return out
