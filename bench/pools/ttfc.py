#!/usr/bin/env python3
"""ttfc.py CMD... - run CMD (its stdout must print one line) and print two
numbers in microseconds: until the first byte of its output (the command's
result reached us) and until the process exited."""
import os, subprocess, sys, time
t0 = time.monotonic_ns()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
p.stdout.read(1)
t1 = time.monotonic_ns()
p.stdout.read()
p.wait()
t2 = time.monotonic_ns()
print((t1 - t0) // 1000, (t2 - t0) // 1000)
