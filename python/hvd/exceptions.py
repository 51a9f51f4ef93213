"""Exceptions of the hvd package (Horovod's names)."""


class HorovodInternalError(RuntimeError):
    """A collective operation failed: a peer died, the transport broke, the
    ranks disagreed about an operation (mismatch), or the engine stopped.

    The message is libhvd's, which starts with the status's stable code;
    ``status`` holds its status name (``'HVD_ERR_PEER_FAILED'``,
    ``'HVD_ERR_MISMATCH'``, ...) and ``code`` that code (``'HVD-5002'``,
    ``'HVD-3020'``, ...: doc/errors.md says cause and fix of each).  After a peer
    failure every later operation fails too: save what can be saved and
    exit (``hvd.torch.Checkpoint`` resumes the job when it is requeued),
    or, with elastic training on, let ``hvd.elastic.run`` roll back to the
    last commit and go on with the survivors (doc/elastic.md).
    """
    status = None
    code = None


class DuplicateNameError(HorovodInternalError, ValueError):
    """An operation was submitted under a name that another operation of
    this rank still has in flight (status 'HVD_ERR_DUPLICATE_NAME'): wait
    for that one first, or use another name.  Raised at submission, as
    Horovod raises ValueError there; it is a HorovodInternalError too."""


class HostsUpdatedInterrupt(RuntimeError):
    """Elastic training: processes are waiting to join (a later srun step of
    the job).  Raised on every rank at once by State.commit() /
    check_host_updates(); hvd.elastic.run then re-forms the world with
    them and syncs the state.  skip_sync is Horovod's (True when hosts were
    only removed, which libhvd reports as a failure instead: always False
    here)."""

    def __init__(self, skip_sync=False):
        super().__init__('hosts updated')
        self.skip_sync = skip_sync


class ElasticError(RuntimeError):
    """Elastic training cannot go on: fewer ranks are left than
    HOROVOD_ELASTIC_MIN_SIZE (status 'HVD_ERR_TOO_FEW_RANKS': the world was
    re-formed among them, so collectives still work and the state may be
    checkpointed before exiting), this rank was left out of the new world
    ('HVD_ERR_REMOVED': exit), or no agreement came in time.  ``status``
    holds libhvd's status name, ``code`` its code (the message starts with
    it)."""
    status = None
    code = None
