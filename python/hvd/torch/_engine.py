"""Operations in flight: libhvd handles, the tensors they keep alive, and
how their results are built.

An operation is an _Op in _handle_map under an integer handle (Horovod's
handles are integers).  It holds the libhvd handles it waits for, every
tensor whose memory libhvd may still read or write (so that none is freed
before the engine is done with it), and a function that builds the result
once they completed.

Allgather and alltoall need two rounds, because libhvd's engine wants the
receive buffer sized before the op is submitted while only the other ranks
know their first dimensions: a first, small collective exchanges the
shapes (and the splits), then the data moves.  The second round is
submitted by a worker thread as soon as the first completes, not by the
user's synchronize(), so that ranks which wait for their operations in
different orders cannot deadlock; the worker blocks in hvd_wait with the
GIL released, and one worker per such operation in flight is kept (a pool)
so that the first rounds may complete in any order.
"""

import ctypes
import itertools
import threading

from hvd import _lib

_handle_map = {}
_handles = itertools.count(1)
_noname = {}
_noname_lock = threading.Lock()
_joins = 0


def op_name(prefix, name, process_set_id):
    """Horovod's names: "allreduce.<name>", or "allreduce.noname.<n>" with
    n counting this process set's unnamed operations (the same on every
    member as long as they issue the same sequence).  After a join the
    count starts again under the join's number ("allreduce.noname.j1.<n>"):
    ranks with less data made fewer unnamed operations before it, and would
    otherwise number every later one apart (Horovod's do, and wait).

    Each of Horovod's process sets has its own table of names, so the same
    name may be in flight in two sets at once (the even ranks and the odd
    ranks running the same code); libhvd's names are global, so the names
    of other sets than the global one carry the set: "allreduce.ps2.<name>".
    """
    if name and process_set_id:
        return '%s.ps%d.%s' % (prefix, process_set_id, name)
    if name:
        return '%s.%s' % (prefix, name)
    with _noname_lock:
        n = _noname.get(process_set_id, 0) + 1
        _noname[process_set_id] = n
        joins = _joins
    base = '%s.noname.j%d' % (prefix, joins) if joins else prefix + '.noname'
    if process_set_id:
        return '%s.ps%d.%d' % (base, process_set_id, n)
    return '%s.%d' % (base, n)


def joined():
    """Every rank returned from the same join: number unnamed operations
    afresh, the same on all of them."""
    global _joins
    with _noname_lock:
        _joins += 1
        _noname.clear()


_name_bytes = {}


def name_bytes(prefix, name, process_set_id):
    """op_name() encoded, cached for named ops (a training loop repeats the
    same names every step)."""
    if not name:
        return op_name(prefix, name, process_set_id).encode()
    key = (prefix, name, process_set_id)
    b = _name_bytes.get(key)
    if b is None:
        if len(_name_bytes) > 100000:
            _name_bytes.clear()
        b = _name_bytes[key] = op_name(prefix, name, process_set_id).encode()
    return b


_DEFAULT_OPTS = (0, 1.0, 1.0, 0, None)


def make_opts(process_set_id=0, prescale=1.0, postscale=1.0, group=0,
              shape=None):
    """An operation's hvd_opts_t fields: (pset, prescale, postscale, group,
    shape).  shape: the tensor's (a torch.Size or other tuple) for the
    ranks to agree on, as Horovod checks it (libhvd otherwise only sees
    element counts)."""
    if not process_set_id and prescale == 1.0 and postscale == 1.0 and \
            not group and not shape:
        return _DEFAULT_OPTS
    return (process_set_id, prescale, postscale, group, shape or None)


def _c_opts(o):
    if o == _DEFAULT_OPTS:
        return None
    c = _lib.Opts()
    c.pset, c.prescale, c.postscale, c.group, shape = o
    if shape:
        c.ndims = len(shape)
        c.shape = (ctypes.c_int64 * len(shape))(*shape)
    return ctypes.byref(c)


_Handle = _lib.Handle
_byref = ctypes.byref
_fast = _lib.fast
# hvd._fast's operation kinds (ctypes functions are not hashable: by id)
_KIND = {id(_lib.hvd_allreduce_async): 0, id(_lib.hvd_allgather_async): 1,
         id(_lib.hvd_broadcast_async): 2, id(_lib.hvd_alltoall_async): 3,
         id(_lib.hvd_reducescatter_async): 4}


def submit(fn, name, *args):
    """Calls an hvd_*_async function (its arguments but the handle, the
    options from make_opts()); returns the handle (an int).  name: str, or
    bytes from name_bytes().  Through hvd._fast when it is built (one C
    call instead of a ctypes call with eight conversions), else ctypes."""
    if not isinstance(name, bytes):
        name = name.encode()
    if _fast is not None:
        kind = _KIND[id(fn)]
        if kind == 2:
            buf, count, dtype, root, o = args
            h = _fast.submit(2, name, buf, buf, count, dtype, root, *o)
        elif kind == 0 or kind == 4:
            send, recv, count, dtype, op, o = args
            h = _fast.submit(kind, name, send, recv, count, dtype, op, *o)
        else:
            send, recv, count, dtype, o = args
            h = _fast.submit(kind, name, send, recv, count, dtype, 0, *o)
        if h < 0:
            raise _lib.error(-h)
        return h
    h = _Handle()
    st = fn(name, *args[:-1], _c_opts(args[-1]), _byref(h))
    if st:
        raise _lib.error(st)
    return h.value


class Group:
    """hvd_group_begin/end around the submission of a group's members."""

    def __init__(self, n):
        self.id = 0
        self.n = n

    def __enter__(self):
        if self.n > 1:
            gid = ctypes.c_int(0)
            _lib.check(_lib.hvd_group_begin(ctypes.byref(gid)))
            self.id = gid.value
        return self

    def __exit__(self, *exc):
        if self.id:
            st = _lib.hvd_group_end(self.id)
            if st != _lib.OK and exc[0] is None:
                raise _lib.error(st)
        return False


_hvd_wait = _lib.hvd_wait if _fast is None else _fast.wait
_hvd_test = _lib.hvd_test if _fast is None else _fast.test


def wait_all(handles):
    """Waits for (and releases) every libhvd handle; raises the first
    failure after all of them are done."""
    err = None
    for h in handles:
        st = _hvd_wait(h)
        if st and err is None:
            err = _lib.error(st)
    if err is not None:
        raise err


def test_all(handles):
    """True when every handle completed (successfully or not)."""
    for h in handles:
        if _hvd_test(h) == _lib.IN_PROGRESS:
            return False
    return True


class Op:
    """One operation in flight (one round)."""
    __slots__ = ('handles', 'keep', 'result')

    def __init__(self, handles, keep, result):
        self.handles = handles  # libhvd handles (ints)
        self.keep = keep        # tensors libhvd may still touch
        self.result = result    # callable -> the operation's result

    def poll(self):
        return test_all(self.handles)

    def wait(self):
        handles, self.handles = self.handles, []
        wait_all(handles)
        return self.result()


class TwoRoundOp:
    """First round submitted by the caller; the second, built by
    second(), by a worker thread once the first is done."""
    __slots__ = ('first', 'second', 'keep', 'done', 'op', 'error')

    def __init__(self, first, keep, second):
        self.first = first      # libhvd handles of round one
        self.keep = keep
        self.second = second    # callable -> Op of round two
        self.done = threading.Event()
        self.op = None
        self.error = None
        _pool.start(self)

    def advance(self):
        try:
            first, self.first = self.first, []
            wait_all(first)
            self.op = self.second()
        except BaseException as e:  # reported by synchronize()
            self.error = e
        finally:
            self.done.set()

    def poll(self):
        if not self.done.is_set():
            return False
        return self.error is not None or self.op.poll()

    def wait(self):
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.op.wait()


class _Pool:
    """Worker threads for TwoRoundOp: one per operation in flight (idle
    workers are reused), daemon threads so that they never hold the
    interpreter at exit."""

    def __init__(self):
        self.lock = threading.Lock()
        self.idle = []
        self.nthreads = 0

    def start(self, op):
        with self.lock:
            if self.idle:
                w = self.idle.pop()
                w[1] = op
                w[0].set()
                return
            self.nthreads += 1
        ev = threading.Event()
        slot = [ev, op]
        t = threading.Thread(target=self._run, args=(slot,),
                             name='hvd-round2-%d' % self.nthreads,
                             daemon=True)
        ev.set()
        t.start()

    def _run(self, slot):
        while True:
            slot[0].wait()
            slot[0].clear()
            op, slot[1] = slot[1], None
            op.advance()
            del op
            with self.lock:
                self.idle.append(slot)


_pool = _Pool()


def register(op):
    h = next(_handles)
    _handle_map[h] = op
    return h


def poll(handle):
    op = _handle_map.get(handle)
    if op is None:
        return True
    return op.poll()


def synchronize(handle):
    op = _handle_map.get(handle)
    if op is None:
        return None
    try:
        return op.wait()
    finally:
        _handle_map.pop(handle, None)


def reset():
    """After shutdown: forget every operation (their handles failed)."""
    global _joins
    _handle_map.clear()
    with _noname_lock:
        _noname.clear()
        _joins = 0
