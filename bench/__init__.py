"""Benchmarks that print tables (not timed tests): run `make bench` or `python -m bench.<name>`.

Importing the package pins the BLAS/OpenMP thread pools before any bench imports
numpy (or onnxruntime): two cores shared between an ONNX session and OpenBLAS
threads that spin after each matmul made searches 3-5x slower than the scan they
ran (issue 13). A bench gives its ONNX session the same count (bench.machine).
Set EMBORNAL_BENCH_THREADS to change it.
"""

import os

THREADS = os.environ.get("EMBORNAL_BENCH_THREADS", "1")
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, THREADS)
