#!/usr/bin/env python3
"""docker-py 7.1 doing what bench_docker does through sbx, on the same daemon.

usage: docker_py_bench.py HOST IMAGE [RUNS]
Per run: create+start, 100 execs of `true` (exec_run, which also inspects
the exit code), put and get a 1 MiB file, remove. Prints the median total,
the per-exec median and the median of each step.
"""
import io
import statistics
import sys
import tarfile
import time

import docker


def main():
    host, image = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    client = docker.DockerClient(base_url=host, version="1.41")
    data = bytes((i * 31) & 0xFF for i in range(1024 * 1024))
    totals, per = [], []
    names = ["create_start", "execs_100", "write_1mib", "read_1mib", "destroy"]
    steps = {n: [] for n in names}
    for _ in range(runs):
        t0 = time.monotonic()
        c = client.containers.run(image, ["sleep", "infinity"], detach=True,
                                  network_mode="none", init=True,
                                  working_dir="/workspace")
        t1 = time.monotonic()
        steps["create_start"].append(t1 - t0)
        for _ in range(100):
            e0 = time.monotonic()
            rc, _ = c.exec_run(["true"])
            per.append(time.monotonic() - e0)
            assert rc == 0
        t2 = time.monotonic()
        steps["execs_100"].append(t2 - t1)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo("bench.bin")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        c.put_archive("/workspace", buf.getvalue())
        t3 = time.monotonic()
        steps["write_1mib"].append(t3 - t2)
        stream, _ = c.get_archive("/workspace/bench.bin")
        got = io.BytesIO(b"".join(stream))
        with tarfile.open(fileobj=got) as tar:
            assert len(tar.extractfile("bench.bin").read()) == len(data)
        t4 = time.monotonic()
        steps["read_1mib"].append(t4 - t3)
        c.remove(force=True)
        t5 = time.monotonic()
        steps["destroy"].append(t5 - t4)
        totals.append(t5 - t0)
    print("dockerpy_total_median_s %.4f" % statistics.median(totals))
    print("dockerpy_exec_median_ms %.3f" % (1000 * statistics.median(per)))
    for n in names:
        print("dockerpy_step_%s_median_ms %.1f" % (n, 1000 * statistics.median(steps[n])))


if __name__ == "__main__":
    main()
