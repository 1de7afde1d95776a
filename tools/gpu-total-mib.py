#!/usr/bin/env python3
"""Prints device 0's memory in MiB as the CUDA driver counts it (cuDeviceTotalMem): what
liblms's LMS_EXCLUDE_MB is taken from. nvidia-smi's memory.total is larger (on the H100, 81559
MiB against the driver's 81079), and a cache computed from it comes out smaller than meant.
Exits 1, saying why, when the driver cannot be loaded or has no device."""
import ctypes
import sys


def main():
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        sys.exit(f"gpu-total-mib: cannot load the CUDA driver (libcuda.so.1): {e}")
    device, total = ctypes.c_int(), ctypes.c_size_t()
    for name, args in (("cuInit", (0,)), ("cuDeviceGet", (ctypes.byref(device), 0)),
                       ("cuDeviceTotalMem_v2", (ctypes.byref(total), device))):
        result = getattr(cuda, name)(*args)
        if result:
            sys.exit(f"gpu-total-mib: {name} returned CUresult {result}")
    print(total.value >> 20)


if __name__ == "__main__":
    main()
