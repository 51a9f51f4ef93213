"""hvd: slurm-horovod's Python binding, framework-independent core.

    import hvd
    hvd.init()
    print(hvd.rank(), hvd.size())

hvd.torch is the PyTorch API (Horovod 0.28's horovod.torch); this module
holds what does not depend on a framework: init and shutdown, ranks,
process sets, the build probes, the timeline and the errors.  Every call
goes to libhvd's C API (hvd._lib, ctypes).
"""

import atexit
import ctypes
import os
import warnings

from hvd import _lib
from hvd import process_sets as _ps
from hvd.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from hvd.process_sets import (ProcessSet, add_process_set, global_process_set,
                              remove_process_set)

__version__ = '0.1.0'

# Reduction ops: Horovod's values (horovod/common/message.h).
Average = 0
Sum = 1
Adasum = 2
Min = 3
Max = 4
Product = 5

_OP_NAMES = {Average: 'Average', Sum: 'Sum', Adasum: 'Adasum', Min: 'Min',
             Max: 'Max', Product: 'Product'}
# Horovod op -> hvd_op_t (Adasum is checked first: hvd.torch.adasum)
_C_OPS = {Average: _lib.AVERAGE, Sum: _lib.SUM, Min: _lib.MIN,
          Max: _lib.MAX, Product: _lib.PRODUCT}
_C_ADASUM = _lib.ADASUM


def _average_compat(reduce_ops):
    """A function (op, average) -> op reading Horovod's old average=
    argument; reduce_ops has Average and Sum (this module, or a
    framework's)."""
    def resolve(op, average):
        if op is not None:
            if average is not None:
                raise ValueError('The op parameter supersedes average. '
                                 'Please provide only one of them.')
            return op
        if average is None:
            return reduce_ops.Average
        warnings.warn('Parameter `average` has been replaced with `op` and '
                      'will be removed in v1.0', DeprecationWarning,
                      stacklevel=3)
        return reduce_ops.Average if average else reduce_ops.Sum
    return resolve

_state = {'homogeneous': None, 'atexit': False}
_shutdown_hooks = []


def _truthy(v):
    return v is not None and v.strip().lower() in ('1', 'true', 'yes', 'on')


def _ranks_spec(sets):
    return ';'.join(','.join(str(r) for r in s) for s in sets)


def init(comm=None, process_sets=None):
    """Initialize Horovod (libhvd's hvd_init): ranks from the launcher
    (srun --mpi=pmix, hvdrun, mpirun), the engine thread started.

    comm: None, a list of ranks, or an mpi4py communicator.  libhvd's world
    is always the whole job, so a list must hold every rank and a
    communicator must span MPI_COMM_WORLD in its order; use process sets
    for subsets.
    process_sets: None, a list of hvd.ProcessSet (by ranks or by mpi4py
    communicator, registered in addition to the global set), or "dynamic"
    (sets added later with hvd.add_process_set).
    """
    if comm is None:
        comm = []
    if process_sets is None:
        process_sets = []
    elif isinstance(process_sets, str):
        if process_sets.lower() != 'dynamic':
            raise ValueError('process_sets must be a list of ProcessSet or '
                             '"dynamic", not %r' % process_sets)
        process_sets = []
        os.environ['HOROVOD_DYNAMIC_PROCESS_SETS'] = '1'
    process_sets = list(process_sets)
    via_comm = [ps for ps in process_sets
                if ps.mpi_comm is not None and ps.ranks is None]
    via_ranks = [ps for ps in process_sets if ps.ranks is not None]

    comm_is_mpi = _ps._is_mpi_comm(comm)
    if not comm_is_mpi and not _ps._is_iterable(comm):
        raise ValueError('Invalid type of argument comm. Expected list of '
                         'rank integers or mpi4py.MPI.Comm object.')
    if not comm_is_mpi and via_comm:
        raise NotImplementedError(
            'At this time process sets defined via MPI communicators are only '
            'supported when calling hvd.init() with comm set to a global MPI '
            'communicator.')

    # Static sets, in Horovod's order: those of the communicators (every
    # rank's own, gathered, sorted), then those given by ranks.
    static = []
    if comm_is_mpi:
        _check_global_comm(comm)
        for ps in via_comm:
            mine = sorted(_ps._comm_world_ranks(ps.mpi_comm))
            for s in sorted({tuple(s) for s in comm.allgather(mine)}):
                if list(s) not in static:
                    static.append(list(s))
    for ps in via_ranks:
        if list(ps.ranks) not in static:
            static.append(list(ps.ranks))

    if not _lib.hvd_is_initialized():
        saved = os.environ.get('HOROVOD_PROCESS_SETS')
        if static:
            os.environ['HOROVOD_PROCESS_SETS'] = _ranks_spec(static)
        try:
            st = _lib.hvd_init()
            if st != _lib.OK:
                raise ValueError('Horovod initialization failed: %s'
                                 % _lib.last_error())
        finally:
            if static:
                if saved is None:
                    del os.environ['HOROVOD_PROCESS_SETS']
                else:
                    os.environ['HOROVOD_PROCESS_SETS'] = saved
        if not _state['atexit']:
            atexit.register(shutdown)
            _state['atexit'] = True
        _ps._dynamic = _truthy(os.environ.get('HOROVOD_DYNAMIC_PROCESS_SETS'))
        _ps._table.clear()
        _ps._table[0] = list(range(_lib.hvd_size()))
        env_sets = static
        if not static and saved:
            env_sets = _parse_env_sets(saved, _lib.hvd_size())
        for i, s in enumerate(env_sets):
            _ps._table[i + 1] = list(s)
        _state['homogeneous'] = _compute_homogeneous()
    if not comm_is_mpi and comm and sorted(comm) != list(range(size())):
        n = size()
        shutdown()
        raise NotImplementedError(
            'hvd.init(comm=%r): libhvd runs over every rank the launcher '
            'started (%d here); a subset of them as the world is not '
            'supported. Use hvd.ProcessSet(ranks) for collectives on a subset.'
            % (list(comm), n))
    _ps._refresh_from_library()
    _ps._init_process_sets(process_sets)
    if comm_is_mpi:
        global_process_set.mpi_comm = comm
    for i, ps in enumerate(process_sets):
        if ps.process_set_id is None:
            raise ValueError(
                'Horovod could not be initialized because process_sets entry '
                'number %d is a duplicate: %s' % (i, ps))


def _parse_env_sets(spec, world):
    """HOROVOD_PROCESS_SETS as libhvd parses it ("0,1;2-3"), for the ranks
    of sets that came from the environment rather than from init()."""
    sets = []
    for part in spec.split(';'):
        part = part.strip()
        if not part:
            continue
        ranks = []
        for item in part.split(','):
            item = item.strip()
            if '-' in item:
                a, b = item.split('-', 1)
                ranks.extend(range(int(a), int(b) + 1))
            elif item:
                ranks.append(int(item))
        sets.append(sorted(ranks))
    return sets


def _check_global_comm(comm):
    from mpi4py import MPI
    if comm.Get_size() != MPI.COMM_WORLD.Get_size() or \
            _ps._comm_world_ranks(comm) != list(range(comm.Get_size())):
        raise NotImplementedError(
            'hvd.init(comm): libhvd runs over every rank the launcher started '
            '(MPI_COMM_WORLD, in its order); this communicator holds %d of '
            'them. Pass MPI.COMM_WORLD (or a duplicate) and use '
            'hvd.ProcessSet(subcomm) for subsets.' % comm.Get_size())


def _compute_homogeneous():
    """Every node runs the same number of ranks: one allreduce of
    (local_size, -local_size) with MAX at init, on every rank."""
    if _lib.hvd_size() == 1:
        return True
    buf = (ctypes.c_int32 * 2)(_lib.hvd_local_size(), -_lib.hvd_local_size())
    _lib.check(_lib.hvd_allreduce(_lib.HVD_IN_PLACE, buf, 2, _lib.INT32,
                                  _lib.MAX), 'hvd.init')
    return buf[0] == -buf[1]


def _after_reform():
    """After libhvd re-formed the world (hvd.elastic.reset): the world's
    set is the new one, the other process sets are gone (libhvd keeps only
    the global set across a re-forming), homogeneity is computed again.
    The ProcessSet objects of the other sets are retired: using one raises
    ValueError saying to create it again in a reset callback."""
    _ps._retire_all(elastic.epoch())
    for ps_id in list(_ps._table):
        if ps_id != 0:
            del _ps._table[ps_id]
    _ps._table[0] = list(range(_lib.hvd_size()))
    _ps._refresh_from_library()
    global_process_set.ranks = list(_ps._table[0])
    _state['homogeneous'] = _compute_homogeneous()


def shutdown():
    """Shut Horovod down (hvd_finalize: collective; pending operations fail
    with HorovodInternalError)."""
    for hook in list(_shutdown_hooks):
        hook()
    if _lib.hvd_is_initialized():
        _lib.hvd_finalize()
    _ps._table.clear()


def is_initialized():
    """True between init() and shutdown()."""
    return bool(_lib.hvd_is_initialized())


def _query(f):
    v = f()
    if v == -1:
        raise ValueError(_lib.NOT_INITIALIZED_MSG)
    return v


def size():
    """Number of Horovod processes."""
    return _query(_lib.hvd_size)


def local_size():
    """Number of Horovod processes on this node."""
    return _query(_lib.hvd_local_size)


def cross_size():
    """Number of nodes that have a process with this process's local rank."""
    return _query(_lib.hvd_cross_size)


def rank():
    """Rank of this process, 0 to size()-1."""
    return _query(_lib.hvd_rank)


def local_rank():
    """Rank of this process within its node."""
    return _query(_lib.hvd_local_rank)


def cross_rank():
    """Index of this process among those with the same local rank (its
    node's index when every node runs the same number of processes)."""
    return _query(_lib.hvd_cross_rank)


def is_homogeneous():
    """True when every node runs the same number of processes."""
    if not is_initialized():
        raise ValueError(_lib.NOT_INITIALIZED_MSG)
    return bool(_state['homogeneous'])


def mpi_threads_supported():
    """True: libhvd does not use MPI, so MPI (mpi4py) may be used from any
    thread alongside it.  Raises ValueError before init(), as Horovod does."""
    if not is_initialized():
        raise ValueError(_lib.NOT_INITIALIZED_MSG)
    return True


def mpi_enabled():
    """False: libhvd's controller and data path are PMIx + UCX, not MPI."""
    return False


def mpi_built():
    """False: libhvd is not built on MPI (mpi4py communicators are still
    accepted by init() and ProcessSet())."""
    return False


def gloo_enabled():
    return False


def gloo_built():
    return False


def nccl_built():
    """NCCL's version code when libhvd was built with the GPU path, else 0."""
    if _lib.hvd_nccl_built is None:
        return 0
    return int(_lib.hvd_nccl_built())


def cuda_built():
    """True when libhvd was built with the GPU path (CUDA + NCCL)."""
    if _lib.hvd_cuda_built is None:
        return False
    return bool(_lib.hvd_cuda_built())


def rocm_built():
    return False


def ddl_built():
    return False


def ccl_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Start writing the Chrome-trace timeline to file_path (rank 0 writes
    it; see doc/timeline.md)."""
    if not is_initialized():
        raise ValueError(_lib.NOT_INITIALIZED_MSG)
    _lib.check(_lib.hvd_timeline_start(os.fsencode(file_path),
                                       1 if mark_cycles else 0),
               'start_timeline')


def stop_timeline():
    """Stop the timeline and close its file."""
    if not is_initialized():
        raise ValueError(_lib.NOT_INITIALIZED_MSG)
    _lib.check(_lib.hvd_timeline_stop(), 'stop_timeline')


def library_path():
    """The libhvd this package loaded."""
    return _lib.path


__all__ = [
    'init', 'shutdown', 'is_initialized', 'size', 'local_size', 'cross_size',
    'rank', 'local_rank', 'cross_rank', 'is_homogeneous',
    'mpi_threads_supported', 'mpi_enabled', 'mpi_built', 'gloo_enabled',
    'gloo_built', 'nccl_built', 'cuda_built', 'rocm_built', 'ddl_built',
    'ccl_built', 'start_timeline', 'stop_timeline', 'ProcessSet',
    'global_process_set', 'add_process_set', 'remove_process_set',
    'HorovodInternalError', 'HostsUpdatedInterrupt', 'Average', 'Sum',
    'Adasum', 'Min', 'Max', 'Product', 'elastic',
]

from hvd import elastic  # noqa: E402 (uses hvd._after_reform at run time)
