"""Exceptions of the hvd package (Horovod's names)."""


class HorovodInternalError(RuntimeError):
    """A collective operation failed: a peer died, the transport broke, the
    ranks disagreed about an operation (mismatch), or the engine stopped.

    The message is libhvd's; ``status`` holds its status name
    (``'HVD_ERR_PEER_FAILED'``, ``'HVD_ERR_MISMATCH'``, ...).  After a peer
    failure every later operation fails too: save what can be saved and
    exit (``hvd.torch.Checkpoint`` resumes the job when it is requeued).
    """
    status = None


class HostsUpdatedInterrupt(RuntimeError):
    """Horovod's elastic interrupt; never raised here (no elastic mode),
    defined so that code catching it still imports."""

    def __init__(self, skip_sync=False):
        super().__init__('hosts updated')
        self.skip_sync = skip_sync
