#!/usr/bin/env python3
"""Runs an msac-gpu-conformance bundle on the GPU and compares bit for bit.

The bundle (built on the development machine by `msac-gpu-conformance -o
DIR`, see unittests/Codegen/GpuConformance.cpp) holds generated kernels
`void NAME(ptr buffers, ptr scalars)` in DIR/kernels.cubin and, per kernel
in DIR/cases.json, its scalars and buffers: input files, and outputs with
the file of their expected bytes (from msac/Numerics/LowPrecision.h) and a
comparison: "bytes" (identical), "e4m3" / "f32" / "bf16" / "f16" (identical bits, or any NaN
where the expected value is NaN). Each kernel runs as one thread (grid 1,
block 1) through the CUDA driver API (cuModuleLoadData, cuLaunchKernel);
PyTorch only allocates and copies the buffers.

Before trusting a PASS, the script checks that its comparison catches a
flipped bit in every output (so an empty or unread output cannot pass).

Usage: gpu_conformance.py DIR     (exit status 1 on any mismatch)
"""
import ctypes
import json
import sys
from pathlib import Path

import torch


def check(rc, what):
    if rc != 0:
        sys.exit(f"gpu_conformance: {what} failed with CUDA error {rc}")


def mismatches(got, want, compare):
    """Indices (into elements) where `got` differs from `want` (bytes)."""
    if compare == "bytes":
        g = torch.frombuffer(bytearray(got), dtype=torch.uint8)
        w = torch.frombuffer(bytearray(want), dtype=torch.uint8)
        return (g != w).nonzero().flatten().tolist()
    if compare == "e4m3":
        # E4M3FN bytes; NaN (0x7F / 0xFF) matches NaN of either sign.
        g = torch.frombuffer(bytearray(got), dtype=torch.uint8).to(torch.int32)
        w = torch.frombuffer(bytearray(want), dtype=torch.uint8).to(torch.int32)
        nan = lambda x: (x & 0x7F) == 0x7F
        return ((g != w) & ~(nan(g) & nan(w))).nonzero().flatten().tolist()
    if compare == "f32":
        g = torch.frombuffer(bytearray(got), dtype=torch.int32)
        w = torch.frombuffer(bytearray(want), dtype=torch.int32)
        nan = lambda x: ((x & 0x7F800000) == 0x7F800000) & ((x & 0x7FFFFF) != 0)
    elif compare == "bf16":
        g = torch.frombuffer(bytearray(got), dtype=torch.int16).to(torch.int32) & 0xFFFF
        w = torch.frombuffer(bytearray(want), dtype=torch.int16).to(torch.int32) & 0xFFFF
        nan = lambda x: ((x & 0x7F80) == 0x7F80) & ((x & 0x7F) != 0)
    elif compare == "f16":
        g = torch.frombuffer(bytearray(got), dtype=torch.int16).to(torch.int32) & 0xFFFF
        w = torch.frombuffer(bytearray(want), dtype=torch.int16).to(torch.int32) & 0xFFFF
        nan = lambda x: ((x & 0x7C00) == 0x7C00) & ((x & 0x3FF) != 0)
    else:
        sys.exit(f"gpu_conformance: unknown comparison '{compare}'")
    bad = (g != w) & ~(nan(g) & nan(w))
    return bad.nonzero().flatten().tolist()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    folder = Path(sys.argv[1])
    bundle = json.loads((folder / "cases.json").read_text())
    torch.zeros(1, device="cuda")  # the primary context, made current
    cuda = ctypes.CDLL("libcuda.so.1")
    module = ctypes.c_void_p()
    image = (folder / bundle["cubin"]).read_bytes()
    check(cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(image)),
          "cuModuleLoadData")
    print(f"{torch.cuda.get_device_name()}: {bundle['target']} bundle {folder}")
    status = 0
    for case in bundle["cases"]:
        fn = ctypes.c_void_p()
        check(cuda.cuModuleGetFunction(ctypes.byref(fn), module,
                                       case["kernel"].encode()),
              f"cuModuleGetFunction({case['kernel']})")
        tensors = []
        for b in case["buffers"]:
            if "input" in b:
                data = (folder / b["input"]).read_bytes()
                t = torch.frombuffer(bytearray(data), dtype=torch.uint8).cuda()
            else:
                # Outputs start as 0xA5 bytes, so unwritten elements show.
                t = torch.full((b["output_bytes"],), 0xA5, dtype=torch.uint8,
                               device="cuda")
            tensors.append(t)
        pointers = torch.tensor([t.data_ptr() for t in tensors],
                                dtype=torch.int64, device="cuda")
        scalars = torch.tensor(case["scalars"], dtype=torch.int64, device="cuda")
        params = (ctypes.c_uint64 * 2)(pointers.data_ptr(), scalars.data_ptr())
        args = (ctypes.c_void_p * 2)(ctypes.addressof(params),
                                     ctypes.addressof(params) + 8)
        torch.cuda.synchronize()
        check(cuda.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, args, None),
              f"cuLaunchKernel({case['kernel']})")
        check(cuda.cuCtxSynchronize(), f"{case['kernel']}")
        for i, (b, t) in enumerate(zip(case["buffers"], tensors)):
            if "expected" not in b:
                continue
            got = bytes(t.cpu().tolist())
            want = (folder / b["expected"]).read_bytes()
            # The comparison must catch one flipped bit of every output.
            flipped = bytearray(want)
            flipped[len(flipped) // 2] ^= 0x01
            if not mismatches(bytes(flipped), want, b["compare"]):
                sys.exit(f"gpu_conformance: the '{b['compare']}' comparison "
                         "misses a flipped bit")
            bad = mismatches(got, want, b["compare"])
            width = {"bytes": 1, "e4m3": 1, "f32": 4, "bf16": 2, "f16": 2}[b["compare"]]
            name = f"{case['kernel']} buffer {i} ({len(want) // width} values)"
            if bad:
                status = 1
                print(f"FAIL {name}: {len(bad)} differ, first at {bad[:8]}")
                for e in bad[:8]:
                    print(f"  element {e}: got {got[e * width:(e + 1) * width].hex()}"
                          f" want {want[e * width:(e + 1) * width].hex()}")
            else:
                print(f"PASS {name}: bit-exact")
    sys.exit(status)


if __name__ == "__main__":
    main()
