"""Readiness of the Ray cluster, run inside the head container: every host joined with its NPUs and CPUs.

argv[1]: JSON {"nodes": {ip: host}, "npus": int, "min_cpus": int}. Prints one table and a JSON line;
exit 0 when every node is alive with enough NPU and CPU, 1 otherwise (the caller retries).
"""

import json
import os
import sys

import ray


def main() -> int:
    want = json.loads(sys.argv[1])
    address = f"{os.environ['HEAD_ADDR']}:{os.environ['RAY_PORT']}"
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        alive = {n["NodeManagerAddress"]: n["Resources"] for n in ray.nodes() if n.get("Alive")}
    finally:
        ray.shutdown()
    rows, ready = [], True
    for ip, host in sorted(want["nodes"].items(), key=lambda kv: kv[1]):
        res = alive.get(ip)
        npu = int(res.get("NPU", 0)) if res else 0
        cpu = int(res.get("CPU", 0)) if res else 0
        ok = res is not None and npu >= want["npus"] and cpu >= want["min_cpus"]
        ready &= ok
        state = "joined" if res is not None else "missing"
        rows.append((host, ip, state, str(npu), str(cpu), "ok" if ok else "NOT READY"))
    extra = sorted(set(alive) - set(want["nodes"]))
    header = ("host", "node ip", "ray", "NPU", "CPU", "status")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    if extra:
        print(f"unexpected nodes in the cluster: {', '.join(extra)}")
    print(json.dumps({"ready": ready, "alive": len(alive), "expected": len(want["nodes"])}))
    return 0 if ready else 1


if __name__ == "__main__":
    sys.exit(main())
