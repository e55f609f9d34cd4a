# SPDX-License-Identifier: MIT
"""scan.py LIBCEXEC_SO - loads the shared library with ctypes (dlopen, as
Python, plugins and JNI do), runs an inclusive scan of 1e5 doubles on a
pool, checks it, and prints "dlopen: scan ok (jemalloc arenas|malloc)".
Run by scripts/check-install.sh."""
import ctypes
import sys


class Scheduler(ctypes.Structure):
    _fields_ = [("vt", ctypes.c_void_p), ("self", ctypes.c_void_p)]


class Value(ctypes.Structure):  # ex_value: a type, then a 16-byte union
    _fields_ = [("type", ctypes.c_int), ("as_", ctypes.c_uint64 * 2)]


class Error(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int), ("msg", ctypes.c_char_p), ("data", ctypes.c_void_p)]


class Result(ctypes.Structure):
    _fields_ = [("disposition", ctypes.c_int), ("n", ctypes.c_size_t), ("values", Value * 8), ("error", Error),
                ("nested", ctypes.c_void_p), ("nested_size", ctypes.c_size_t), ("nested_alloc", ctypes.c_void_p)]


def main():
    lib = ctypes.CDLL(sys.argv[1])
    lib.ex_pool_create.restype = Error
    lib.ex_pool_create.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.ex_pool_scheduler.restype = Scheduler
    lib.ex_pool_scheduler.argtypes = [ctypes.c_void_p]
    lib.ex_inclusive_scan_f64.restype = ctypes.c_void_p
    lib.ex_inclusive_scan_f64.argtypes = [Scheduler, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    lib.ex_sync_wait.restype = Result
    lib.ex_sync_wait.argtypes = [ctypes.c_void_p]
    lib.ex_result_destroy.argtypes = [ctypes.POINTER(Result)]
    lib.ex_pool_destroy.restype = Error
    lib.ex_pool_destroy.argtypes = [ctypes.c_void_p]
    lib.ex_jemalloc_is_malloc.restype = ctypes.c_bool

    n = 100000
    data = (ctypes.c_double * n)(*([1.0] * n))
    out = (ctypes.c_double * n)()
    pool = ctypes.c_void_p()
    e = lib.ex_pool_create(None, ctypes.byref(pool))
    if e.code:
        sys.exit("dlopen: ex_pool_create failed: %s" % e.msg)
    r = lib.ex_sync_wait(lib.ex_inclusive_scan_f64(lib.ex_pool_scheduler(pool), data, out, n))
    ok = r.disposition == 1 and all(out[i] == i + 1 for i in range(0, n, 997)) and out[n - 1] == n
    lib.ex_result_destroy(ctypes.byref(r))
    if lib.ex_pool_destroy(pool).code:
        sys.exit("dlopen: ex_pool_destroy failed")
    if not ok:
        sys.exit("dlopen: the scan's result is wrong")
    print("dlopen: scan ok (%s)" % ("malloc" if lib.ex_jemalloc_is_malloc() else "jemalloc arenas"))


main()
