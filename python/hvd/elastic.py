"""hvd.elastic: elastic training, framework-independent (Horovod's
horovod.common.elastic): State, ObjectState and the run loop.

With HOROVOD_ELASTIC=1 (srun --horovod=elastic, hvdrun --elastic) a rank's
death does not end the job: the survivors' operations raise
HorovodInternalError, the run loop rolls the state back to its last
commit, libhvd re-forms the world among the live ranks (hvd_elastic_reset),
the reset callbacks run, every rank takes rank 0's state (sync), and the
training function is called again.  A later srun step of the job joins in
its hvd.init(); the running ranks see it at a commit
(HostsUpdatedInterrupt) and re-form with it.

Unlike Horovod there is no driver process, no host discovery script and no
shutdown/init cycle: the world is re-formed in place, by libhvd, within
Slurm's allocation (doc/elastic.md).
"""

import functools

from hvd import _lib
from hvd.exceptions import (ElasticError, HorovodInternalError,
                            HostsUpdatedInterrupt)


class HostUpdateResult:
    """Horovod's host update kinds (horovod.runner.elastic.worker)."""
    no_update = 0
    removed = 1
    added = 2
    mixed = removed | added


class State:
    """State kept in memory across a change of the world.

    bcast_object: broadcasts a picklable object from rank 0;
    get_rank: this process's rank.
    Subclasses define save(), restore() and sync().
    """

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        """Callbacks run after every re-forming of the world, before the
        state is synced (e.g. to scale the learning rate by hvd.size())."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        """Horovod's driver notification; libhvd's rank 0 learns of
        newcomers itself (their join requests), so nothing to do."""

    def commit(self):
        """Save the state (to host memory) and check for processes waiting
        to join: HostsUpdatedInterrupt on every rank when there are.

        A commit copies the state, so it costs about one pass over it:
        commit less often than every batch when the state is large."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self):
        """HostsUpdatedInterrupt, on every rank at once, when processes are
        waiting to join (rank 0 decides; collective).  Without elastic it
        returns at once."""
        f = _lib.hvd_elastic_check_hosts
        if f is None:
            return
        st = f()
        if st == _lib.HOSTS_UPDATED:
            raise HostsUpdatedInterrupt(skip_sync=False)
        _lib.check(st, 'check_host_updates')

    def save(self):
        """Save the state to host memory."""
        raise NotImplementedError()

    def restore(self):
        """Back to the last committed state."""
        raise NotImplementedError()

    def sync(self):
        """Make every rank's state rank 0's."""
        raise NotImplementedError()

    def reset(self):
        """Called after a re-forming, before the reset callbacks."""


class ObjectState(State):
    """State of plain Python objects, one per keyword argument, exposed as
    attributes: state.epoch, state.batch...; sync broadcasts them from rank
    0, save and restore copy them."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._bcast_object = bcast_object
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        new_state = {}
        for attr in self._saved_state.keys():
            new_state[attr] = getattr(self, attr)
        self._saved_state = new_state

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, value)


# Called after libhvd re-formed the world, before the reset callbacks:
# what the bindings keep per world (hvd.torch: its handles and the counters
# that name unnamed tensors, which must start equal on every rank,
# newcomers included).
_reset_hooks = []


def elastic_enabled():
    """True with HOROVOD_ELASTIC=1."""
    f = _lib.hvd_elastic_enabled
    return bool(f and f())


def epoch():
    """Re-formings of the world so far (0 after init)."""
    f = _lib.hvd_elastic_epoch
    return f() if f else 0


def reset():
    """Re-form the world among the live ranks (and the processes waiting
    to join); collective over them.  Raises ElasticError when fewer than
    HOROVOD_ELASTIC_MIN_SIZE are left (after re-forming: the state can
    still be checkpointed), when this rank was left out, or when no
    agreement came in time."""
    if _lib.hvd_elastic_reset is None:
        raise ElasticError('%s has no elastic training (hvd_elastic_reset)'
                           % _lib.path)
    st = _lib.hvd_elastic_reset()
    if st in (_lib.OK, _lib.ERR_TOO_FEW_RANKS):
        import hvd
        hvd._after_reform()
        for hook in list(_reset_hooks):
            hook()
    if st == _lib.OK:
        return
    msg = _lib.last_error() or _lib.status_name(st)
    if st in (_lib.ERR_TOO_FEW_RANKS, _lib.ERR_REMOVED, _lib.ERR_TIMEOUT,
              _lib.ERR_UNSUPPORTED):
        e = ElasticError(msg)
    else:
        e = HorovodInternalError(msg)
    e.status = _lib.status_name(st)
    e.code = _lib.status_code(st)
    raise e


# Failures the loop recovers from (libhvd's hvd_elastic_run: a peer died,
# or the transport broke or timed out around it); None: raised by the
# program itself, as Horovod's examples do.  A mismatch, a stall or a bad
# argument is the program's and propagates: re-running it would fail again.
_RECOVERABLE = ('HVD_ERR_PEER_FAILED', 'HVD_ERR_TIMEOUT',
                'HVD_ERR_TRANSPORT', None)


def _recoverable(e):
    return getattr(e, 'status', None) in _RECOVERABLE


def run_fn(func, reset_fn=None):
    """Horovod's run loop around func(state, ...): sync the state, run
    func; on HorovodInternalError (a peer failed) restore the last commit,
    on HostsUpdatedInterrupt keep the state; then re-form (reset_fn), run
    the reset callbacks, sync again and call func again.  A failure during
    the re-forming or the callbacks restores and re-forms again; errors
    that are the program's (HVD_ERR_MISMATCH, ...) and ElasticError
    propagate.  Without elastic, func runs once after a sync and an error
    propagates as it would without the loop."""
    if reset_fn is None:
        reset_fn = reset

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        if not elastic_enabled():
            state.sync()
            return func(state, *args, **kwargs)
        skip_sync = False
        reform = False
        while True:
            try:
                if reform:
                    reset_fn()
                    state.on_reset()
                    reform = False
                if not skip_sync:
                    state.sync()
                return func(state, *args, **kwargs)
            except HorovodInternalError as e:
                if not _recoverable(e):
                    raise
                state.restore()
                skip_sync = False
            except HostsUpdatedInterrupt as e:
                skip_sync = e.skip_sync
            reform = True
    return wrapper


def run(func):
    """Decorator: func(state, ...) runs under the elastic loop (run_fn)."""
    return run_fn(func, reset)


__all__ = ['State', 'ObjectState', 'HostUpdateResult', 'run', 'run_fn',
           'reset', 'elastic_enabled', 'epoch', 'HorovodInternalError',
           'HostsUpdatedInterrupt', 'ElasticError']
