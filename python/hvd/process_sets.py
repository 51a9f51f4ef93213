"""Process sets, as horovod.common.process_sets has them.

A ProcessSet is made from a list of world ranks or from an mpi4py
communicator, passed to hvd.init(process_sets=[...]) (static sets) or to
add_process_set() (dynamic sets, HOROVOD_DYNAMIC_PROCESS_SETS=1); once
registered it has a process_set_id and can be passed to every operation.

libhvd takes static sets from HOROVOD_PROCESS_SETS at hvd_init() ("0,2;1,3",
ids 1, 2, ... in that order), so hvd.init() writes that variable from the
objects it is given.  The ranks of every set are kept here (``_table``), the
same on every rank, because the C API only reports a set's size and the
caller's rank in it.

Elastic training: a re-forming of the world (hvd.elastic.reset) renumbers
the ranks, and libhvd keeps only the global set across it: its table
starts again at id 1, so a set made for the new world can get the id an
old one had.  Every object registered before is therefore retired there
(``_retire_all``): its id goes, and using it raises ValueError saying
what happened and to create it again in a reset callback; passing the
object to add_process_set() again registers it for the new world.
"""

import sys
import weakref

# id -> sorted list of world ranks (0 -> all ranks); filled by hvd.init()
_table = {}
# the objects registered with an id other than 0 in the current world
_registered = weakref.WeakSet()


def _is_iterable(x):
    if isinstance(x, (str, bytes)):
        return False
    try:
        iter(x)
    except TypeError:
        return False
    return True


def _is_mpi_comm(x):
    # Never import mpi4py here: importing it initializes MPI, whose PMIx
    # event handler then aborts the process (exit status 56) when a peer
    # dies, before libhvd can raise HorovodInternalError.  A caller that
    # passes a communicator has imported it already.
    mpi = sys.modules.get('mpi4py.MPI')
    return mpi is not None and isinstance(x, mpi.Comm)


class ProcessSet:
    """A set of Horovod processes that run collective operations together.

    Initialize it with a list of process ranks or an mpi4py communicator,
    then pass it to hvd.init() or hvd.add_process_set(); once registered,
    ``process_set_id`` is set.
    """
    process_set_id = None
    ranks = None
    mpi_comm = None
    # why the object is no longer registered (a re-forming), or None
    _gone = None

    def __init__(self, ranks_or_comm):
        if _is_iterable(ranks_or_comm) and not _is_mpi_comm(ranks_or_comm):
            ranks_or_comm = sorted(ranks_or_comm)
            if any(not isinstance(rk, int) for rk in ranks_or_comm):
                raise ValueError(
                    'ProcessSet should be initialized with a list of process '
                    'ranks or an mpi4py Comm object')
            self.ranks = ranks_or_comm
        else:
            if not _is_mpi_comm(ranks_or_comm):
                raise ValueError(
                    'ProcessSet should be initialized with a list of process '
                    'ranks or an mpi4py Comm object')
            self.mpi_comm = ranks_or_comm

    def _invalidate(self):
        self.process_set_id = None

    def _registered_as(self, ps_id):
        self.process_set_id = ps_id
        self._gone = None
        if ps_id:
            from hvd import elastic
            self._epoch = elastic.epoch()
            _registered.add(self)

    def _check_gone(self):
        if self._gone is not None:
            raise ValueError(self._gone)

    def size(self):
        """Size of the process set, or None if it is not registered.
        Raises ValueError when the world re-formed since it was."""
        self._check_gone()
        if self.process_set_id is None:
            return None
        return _set_size(self.process_set_id)

    def rank(self):
        """This process's rank within the set, or None if it is not
        registered.  Operations still take world ranks (hvd.rank()), e.g.
        as a broadcast root.  Raises ValueError when the world re-formed
        since it was registered."""
        self._check_gone()
        if self.process_set_id is None:
            return None
        return _set_rank(self.process_set_id)

    def included(self):
        """Whether this process is part of the set (None before it is
        registered with its ranks).  Raises ValueError when the world
        re-formed since it was registered."""
        self._check_gone()
        if self.ranks is None:
            return None
        from hvd import rank
        return rank() in self.ranks

    def __str__(self):
        return 'ProcessSet(process_set_id=%s, ranks=%s, mpi_comm=%s)' % (
            self.process_set_id, self.ranks, self.mpi_comm)

    __repr__ = __str__


global_process_set = ProcessSet([])
global_process_set.process_set_id = 0


def _retire_all(new_epoch):
    """After a re-forming: every set registered before (but the global
    one) loses its id, and says why when it is used."""
    for ps in list(_registered):
        if ps.process_set_id is None or ps.process_set_id == 0:
            continue
        ps._gone = (
            'hvd: process set %d (ranks %s) was registered before the world '
            're-formed (elastic epoch %d -> %d): the ranks were renumbered '
            'and libhvd keeps only the global set across a re-forming, so '
            'its id means nothing (or another set) now. Create the set again '
            'for the new world in a reset callback '
            '(state.register_reset_callbacks: hvd.add_process_set(...), which '
            'also takes this object again).'
            % (ps.process_set_id, ps.ranks, getattr(ps, '_epoch', 0),
               new_epoch))
        ps.process_set_id = None
    _registered.clear()


def _gone_error(process_set):
    """The ValueError for a set retired by a re-forming, else None."""
    why = getattr(process_set, '_gone', None)
    return ValueError(why) if why is not None else None


def _temp_process_set_object(process_set_id):
    ps = ProcessSet.__new__(ProcessSet)
    ps.process_set_id = process_set_id
    ps.ranks = _table.get(process_set_id)
    return ps


def _set_size(process_set_id):
    from hvd import _lib
    if not _lib.hvd_is_initialized():
        raise ValueError(_lib.NOT_INITIALIZED_MSG)
    n = _lib.hvd_pset_size(process_set_id)
    if n < 0:
        raise ValueError(
            'Process set does not exist or has not been registered.')
    return n


def _set_rank(process_set_id):
    from hvd import _lib
    if not _lib.hvd_is_initialized():
        raise ValueError(_lib.NOT_INITIALIZED_MSG)
    if _lib.hvd_pset_size(process_set_id) < 0:
        raise ValueError(
            'Process set does not exist or has not been registered.')
    r = _lib.hvd_pset_rank(process_set_id)
    if r < 0:
        raise ValueError('Process is not part of provided process set.')
    return r


def _comm_world_ranks(comm):
    """The world ranks of an mpi4py communicator's members, in its order.

    libhvd's world is PMIx's job, whose ranks are MPI_COMM_WORLD's under
    mpirun, so the translation goes through COMM_WORLD."""
    from mpi4py import MPI
    world = MPI.COMM_WORLD.Get_group()
    group = comm.Get_group()
    try:
        ranks = MPI.Group.Translate_ranks(group, list(range(group.Get_size())),
                                          world)
    finally:
        group.Free()
        world.Free()
    if any(r == MPI.UNDEFINED for r in ranks):
        raise ValueError('hvd: the MPI communicator holds processes outside '
                         'MPI_COMM_WORLD')
    return list(ranks)


def _comm_process_set_id(comm):
    ranks = tuple(sorted(_comm_world_ranks(comm)))
    for ps_id, r in _table.items():
        if tuple(r) == ranks:
            return ps_id
    raise ValueError(
        'MPI communicator does not correspond to any registered process set.')


def _refresh_from_library():
    """Reconcile _table with libhvd's list of set ids (sets whose ranks we
    never learnt get them from hvd_pset_ranks when libhvd has it)."""
    from hvd import _lib
    import ctypes
    n = ctypes.c_int(0)
    _lib.check(_lib.hvd_pset_list(None, 0, ctypes.byref(n)))
    ids = (ctypes.c_int32 * max(n.value, 1))()
    _lib.check(_lib.hvd_pset_list(ids, n.value, ctypes.byref(n)))
    live = set(ids[:n.value])
    for ps_id in list(_table):
        if ps_id not in live:
            del _table[ps_id]
    for ps_id in live:
        if ps_id in _table or _lib.hvd_pset_ranks is None:
            continue
        size = _lib.hvd_pset_size(ps_id)
        buf = (ctypes.c_int * max(size, 1))()
        got = ctypes.c_int(0)
        _lib.check(_lib.hvd_pset_ranks(ps_id, buf, size, ctypes.byref(got)))
        _table[ps_id] = list(buf[:got.value])


def _init_process_sets(process_set_list):
    """After hvd_init(): give every object its id (by its ranks), invalidate
    duplicates, and fill in the global set's ranks."""
    seen = {0}
    ranks_to_id = {tuple(r): i for i, r in _table.items()}
    for ps in process_set_list:
        if ps.ranks is not None:
            ps._registered_as(ranks_to_id.get(tuple(ps.ranks)))
        elif ps.mpi_comm is not None:
            ps._registered_as(_comm_process_set_id(ps.mpi_comm))
            ps.ranks = list(_table[ps.process_set_id])
        if ps.process_set_id in seen:
            ps._invalidate()
        else:
            seen.add(ps.process_set_id)
    global_process_set.ranks = list(_table[0])


def add_process_set(process_set):
    """Add a process set after hvd.init() and return it (registered).

    Collective: every process makes the same calls in the same order.
    Needs HOROVOD_DYNAMIC_PROCESS_SETS=1 (or hvd.init(process_sets="dynamic"));
    no set with the same ranks may exist already."""
    from hvd import _lib
    import ctypes
    if not isinstance(process_set, ProcessSet):
        process_set = ProcessSet(process_set)
    if process_set.ranks is None and process_set.mpi_comm is not None:
        raise NotImplementedError(
            'Dynamically adding process sets defined by an MPI communicator '
            'is not implemented. Please build the process set via a list of '
            'ranks.')
    if not _lib.hvd_is_initialized():
        raise ValueError(_lib.NOT_INITIALIZED_MSG)
    if not _dynamic_enabled():
        raise ValueError(
            'Set HOROVOD_DYNAMIC_PROCESS_SETS=1 to allow adding process sets '
            'after Horovod initialization.')
    ranks = list(process_set.ranks)
    if tuple(ranks) in {tuple(r) for r in _table.values()}:
        raise ValueError('Attempted to add a duplicate process set: %s'
                         % process_set)
    arr = (ctypes.c_int * max(len(ranks), 1))(*ranks)
    ps_id = ctypes.c_int32(-1)
    st = _lib.hvd_pset_add(arr, len(ranks), ctypes.byref(ps_id))
    if st == _lib.ERR_INVALID_ARG:
        raise ValueError(_lib.last_error())
    _lib.check(st)
    _table[ps_id.value] = ranks
    process_set._registered_as(ps_id.value)
    return process_set


def remove_process_set(process_set):
    """Remove a dynamic process set; returns whether it was removed (and
    then invalidates the object).  Collective, like add_process_set()."""
    from hvd import _lib
    ps_id = process_set.process_set_id
    if ps_id is None or ps_id == 0:
        # one retired by a re-forming is gone already
        process_set._gone = None
        return False
    if not _lib.hvd_is_initialized():
        raise ValueError(_lib.NOT_INITIALIZED_MSG)
    if not _dynamic_enabled():
        raise ValueError(
            'Set HOROVOD_DYNAMIC_PROCESS_SETS=1 to allow removing process sets '
            'after Horovod initialization.')
    process_set._invalidate()
    if ps_id not in _table:
        return False
    st = _lib.hvd_pset_remove(ps_id)
    if st == _lib.ERR_PROCESS_SET and _lib.hvd_pset_size(ps_id) < 0:
        _table.pop(ps_id, None)
        return False
    _lib.check(st)
    _table.pop(ps_id, None)
    return True


_dynamic = False


def _dynamic_enabled():
    return _dynamic
