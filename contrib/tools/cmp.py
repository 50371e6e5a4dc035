#!/usr/bin/env python3
"""cmp.py N name1 'cmd1' name2 'cmd2' ...: time shell commands against each other.

Each of N rounds runs every command once (through /bin/sh -c, stdout and
stderr to /dev/null), the rounds' orders shuffled; it prints each median
and how many runs failed, and for names old-X/new-X the median of the
per-round ratios new/old. The times go to /tmp/t/last.json. Used for the
paired figures of docs/perf/ (e.g. against-b838e68.md).
"""
import subprocess, sys, time, random, statistics, json, os
n = int(sys.argv[1]); pairs = list(zip(sys.argv[2::2], sys.argv[3::2]))
times = {k: [] for k, _ in pairs}
fails = {k: 0 for k, _ in pairs}
for i in range(n):
    order = pairs[:] ; random.shuffle(order)
    for k, c in order:
        t = time.perf_counter(); r = subprocess.run(c, shell=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); d = time.perf_counter() - t
        if r.returncode != 0: fails[k] += 1
        times[k].append(d*1000)
for k, _ in pairs:
    line = f"{k:14s} median {statistics.median(times[k]):8.2f} ms  fails {fails[k]}"
    if k.startswith("new-") and "old-"+k[4:] in times:
        o = times["old-"+k[4:]]
        line += f"   paired median new/old {statistics.median([a/b for a,b in zip(times[k], o)]):.3f}"
    print(line)
os.makedirs("/tmp/t", exist_ok=True)
json.dump(times, open("/tmp/t/last.json", "w"))
