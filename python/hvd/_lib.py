"""libhvd's C ABI through ctypes: the library, its prototypes, its statuses.

This is the only module that touches ctypes.  Everything above it passes
plain integers (pointers, counts, ids) and gets Python exceptions back.

Why ctypes and not a C extension: libhvd's ABI is plain C (integers,
pointers, one opaque handle), so one pure-Python package serves every
interpreter and every torch release; ctypes releases the GIL around each
foreign call, so a wait in hvd_wait() never blocks other Python threads.
libhvd never calls back into Python: the binding passes no callbacks, so
the engine thread never needs the GIL.

The library is found, in order, through HVD_LIBHVD (a path; the test suite
points it into the build tree), the path written into hvd/_config.py by
``make install``, and the dynamic loader's search for libhvd.so.0.
"""

import ctypes
import os

from hvd.exceptions import DuplicateNameError, HorovodInternalError

# hvd_status_t (include/hvd.h; the numbers are stable, doc/errors.md).
OK = 0
IN_PROGRESS = 1
ERR_NOT_INITIALIZED = 2
ERR_INVALID_ARG = 3
ERR_BAD_TYPE = 4
ERR_BAD_OP = 5
ERR_BOOTSTRAP = 6
ERR_TRANSPORT = 7
ERR_PEER_FAILED = 8
ERR_TIMEOUT = 9
ERR_NO_MEMORY = 10
ERR_MISMATCH = 11
ERR_STALLED = 12
ERR_NOT_MEMBER = 13
ERR_PROCESS_SET = 14
ERR_SHUTDOWN = 15
ERR_IO = 16
ERR_CORRUPT = 17
ERR_CUDA = 18
ERR_NCCL = 19
ERR_UNSUPPORTED = 20
ERR_DUPLICATE_NAME = 21
ERR_INTERNAL = 22
HOSTS_UPDATED = 23
ERR_TOO_FEW_RANKS = 24
ERR_REMOVED = 25

# hvd_dtype_t
UINT8, INT8, INT32, INT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64 = range(8)
# hvd_op_t
SUM, AVERAGE, MIN, MAX, PRODUCT = range(5)
ADASUM = 16  # not elementwise (include/hvd.h)

HVD_IN_PLACE = 1  # (const void *)1

NOT_INITIALIZED_MSG = 'Horovod has not been initialized; use hvd.init().'

Handle = ctypes.c_void_p


class Opts(ctypes.Structure):
    """hvd_opts_t."""
    _fields_ = [
        ('pset', ctypes.c_int32),
        ('prescale', ctypes.c_double),
        ('postscale', ctypes.c_double),
        ('priority', ctypes.c_int),
        ('compress_fp16', ctypes.c_int),
        ('group', ctypes.c_int),
        ('callback', ctypes.c_void_p),
        ('callback_arg', ctypes.c_void_p),
        ('shape', ctypes.POINTER(ctypes.c_int64)),
        ('ndims', ctypes.c_int),
    ]


class CkptConfig(ctypes.Structure):
    """hvd_ckpt_config_t."""
    _fields_ = [
        ('dir', ctypes.c_char_p),
        ('every', ctypes.c_long),
        ('keep', ctypes.c_int),
        ('async_', ctypes.c_int),
        ('overlap', ctypes.c_int),
    ]


def _candidates():
    env = os.environ.get('HVD_LIBHVD')
    if env:
        return [env]
    paths = []
    try:
        from hvd import _config  # written by make install
        paths.append(_config.LIBHVD)
    except ImportError:
        pass
    paths.append('libhvd.so.0')
    return paths


def _load():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append('%s: %s' % (path, e))
    raise ImportError(
        'hvd: cannot load libhvd (%s); install slurm-horovod (make install, '
        'ldconfig) or point HVD_LIBHVD at libhvd.so.0' % '; '.join(errors))


lib, path = _load()

_c = ctypes
_P = ctypes.c_void_p
_SZ = ctypes.c_size_t
_I = ctypes.c_int
_PH = ctypes.POINTER(Handle)
_POPTS = ctypes.POINTER(Opts)


def _proto(name, restype, *argtypes, optional=False):
    try:
        f = getattr(lib, name)
    except AttributeError:
        if optional:
            return None
        raise ImportError('hvd: %s lacks %s(): it is older than this '
                          'binding; rebuild and reinstall slurm-horovod'
                          % (path, name))
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


hvd_status_name = _proto('hvd_status_name', _c.c_char_p, _I)
hvd_status_code = _proto('hvd_status_code', _c.c_char_p, _I)
hvd_last_error = _proto('hvd_last_error', _c.c_char_p)
hvd_init = _proto('hvd_init', _I)
hvd_finalize = _proto('hvd_finalize', _I)
hvd_is_initialized = _proto('hvd_is_initialized', _I)
hvd_rank = _proto('hvd_rank', _I)
hvd_size = _proto('hvd_size', _I)
hvd_local_rank = _proto('hvd_local_rank', _I)
hvd_local_size = _proto('hvd_local_size', _I)
hvd_cross_rank = _proto('hvd_cross_rank', _I)
hvd_cross_size = _proto('hvd_cross_size', _I)
hvd_node_id = _proto('hvd_node_id', _I)
hvd_barrier = _proto('hvd_barrier', _I)
hvd_allreduce = _proto('hvd_allreduce', _I, _P, _P, _SZ, _I, _I)

hvd_pset_add = _proto('hvd_pset_add', _I, _c.POINTER(_I), _I,
                      _c.POINTER(_c.c_int32))
hvd_pset_remove = _proto('hvd_pset_remove', _I, _c.c_int32)
hvd_pset_rank = _proto('hvd_pset_rank', _I, _c.c_int32)
hvd_pset_size = _proto('hvd_pset_size', _I, _c.c_int32)
hvd_pset_list = _proto('hvd_pset_list', _I, _c.POINTER(_c.c_int32), _I,
                       _c.POINTER(_I))

hvd_opts_init = _proto('hvd_opts_init', None, _POPTS)
hvd_allreduce_async = _proto('hvd_allreduce_async', _I, _c.c_char_p, _P, _P,
                             _SZ, _I, _I, _POPTS, _PH)
hvd_allgather_async = _proto('hvd_allgather_async', _I, _c.c_char_p, _P, _P,
                             _SZ, _I, _POPTS, _PH)
hvd_broadcast_async = _proto('hvd_broadcast_async', _I, _c.c_char_p, _P, _SZ,
                             _I, _I, _POPTS, _PH)
hvd_alltoall_async = _proto('hvd_alltoall_async', _I, _c.c_char_p, _P, _P,
                            _SZ, _I, _POPTS, _PH)
hvd_reducescatter_async = _proto('hvd_reducescatter_async', _I, _c.c_char_p,
                                 _P, _P, _SZ, _I, _I, _POPTS, _PH)
hvd_wait = _proto('hvd_wait', _I, Handle)
hvd_test = _proto('hvd_test', _I, Handle)
hvd_handle_count = _proto('hvd_handle_count', _SZ, Handle)
hvd_group_begin = _proto('hvd_group_begin', _I, _c.POINTER(_I))
hvd_group_end = _proto('hvd_group_end', _I, _I)
hvd_join = _proto('hvd_join', _I, _c.POINTER(_I))
hvd_timeline_start = _proto('hvd_timeline_start', _I, _c.c_char_p, _I)
hvd_timeline_stop = _proto('hvd_timeline_stop', _I)

_PCKPT = _P
hvd_ckpt_open = _proto('hvd_ckpt_open', _I, _c.POINTER(CkptConfig),
                       _c.POINTER(_P))
hvd_ckpt_register = _proto('hvd_ckpt_register', _I, _P, _c.c_char_p, _P, _SZ,
                           _I)
hvd_ckpt_set_meta = _proto('hvd_ckpt_set_meta', _I, _P, _P, _SZ)
hvd_ckpt_get_meta = _proto('hvd_ckpt_get_meta', _I, _P, _P, _SZ,
                           _c.POINTER(_SZ))
hvd_ckpt_restore = _proto('hvd_ckpt_restore', _I, _P, _c.POINTER(_c.c_long))
hvd_ckpt_step = _proto('hvd_ckpt_step', _I, _P, _c.c_long, _c.POINTER(_I))
hvd_ckpt_save = _proto('hvd_ckpt_save', _I, _P, _c.c_long)
hvd_ckpt_wait = _proto('hvd_ckpt_wait', _I, _P)
hvd_ckpt_fence = _proto('hvd_ckpt_fence', _I, _P)
hvd_ckpt_close = _proto('hvd_ckpt_close', _I, _P)
hvd_ckpt_stop_requested = _proto('hvd_ckpt_stop_requested', _I)

# Build probes and additions for the binding (runtime/ of this release).
hvd_cuda_built = _proto('hvd_cuda_built', _I, optional=True)
hvd_nccl_built = _proto('hvd_nccl_built', _I, optional=True)
hvd_pset_ranks = _proto('hvd_pset_ranks', _I, _c.c_int32, _c.POINTER(_I), _I,
                        _c.POINTER(_I), optional=True)
hvd_stream_set = _proto('hvd_stream_set', _I, _P, optional=True)
# Elastic training (hvd.elastic).
hvd_elastic_enabled = _proto('hvd_elastic_enabled', _I, optional=True)
hvd_elastic_min_size = _proto('hvd_elastic_min_size', _I, optional=True)
hvd_elastic_epoch = _proto('hvd_elastic_epoch', _c.c_uint, optional=True)
hvd_elastic_reset = _proto('hvd_elastic_reset', _I, optional=True)
hvd_elastic_check_hosts = _proto('hvd_elastic_check_hosts', _I,
                                 optional=True)
hvd_ckpt_sampler_batch = _proto('hvd_ckpt_sampler_batch', _SZ, _c.c_uint64,
                                _c.c_uint64, _I, _I, _SZ,
                                _c.POINTER(_c.c_uint64), optional=True)
hvd_ckpt_sampler_advance = _proto('hvd_ckpt_sampler_advance', _c.c_uint64,
                                  _c.c_uint64, _c.c_uint64, _I, _SZ,
                                  optional=True)

CKPT_EXIT_STATUS = 85


def _load_fast():
    """hvd._fast, the C extension for the hot path (submit and wait), or
    None: then everything goes through ctypes.  HVD_FAST names the file
    (the test suite points it into the build tree); HVD_FAST=0 turns it
    off."""
    where = os.environ.get('HVD_FAST')
    if where == '0':
        return None
    try:
        if where:
            import importlib.util
            spec = importlib.util.spec_from_file_location('hvd._fast', where)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        else:
            from hvd import _fast as mod
    except ImportError:
        return None

    def addr(f):
        return ctypes.cast(f, ctypes.c_void_p).value
    mod.setup(addr(hvd_allreduce_async), addr(hvd_allgather_async),
              addr(hvd_broadcast_async), addr(hvd_alltoall_async),
              addr(hvd_reducescatter_async), addr(hvd_wait), addr(hvd_test))
    return mod


fast = _load_fast()


def status_name(st):
    return hvd_status_name(st).decode()


def status_code(st):
    """The status's stable code, 'HVD-3020' (doc/errors.md)."""
    return hvd_status_code(st).decode()


def last_error():
    return hvd_last_error().decode(errors='replace')


# Statuses that mean the job cannot go on (a peer died, the transport
# broke, the engine stopped): Horovod raises HorovodInternalError for them,
# and elastic-style recovery code catches exactly that class.  Everything
# else from a running operation is raised as HorovodInternalError too, as
# Horovod's synchronize() does for every failure, with the status name on
# the exception (e.status) for code that wants to tell them apart.  A name
# already in flight is refused at submission with DuplicateNameError, a
# HorovodInternalError that is also the ValueError Horovod raises there.
def error(st, what=None):
    msg = last_error() or status_name(st)
    if what:
        msg = '%s: %s' % (what, msg)
    if st == ERR_NOT_INITIALIZED:
        return ValueError(NOT_INITIALIZED_MSG + ' (' + msg + ')')
    e = (DuplicateNameError if st == ERR_DUPLICATE_NAME
         else HorovodInternalError)(msg)
    e.status = status_name(st)
    e.code = status_code(st)
    return e


def check(st, what=None):
    if st != OK:
        raise error(st, what)
