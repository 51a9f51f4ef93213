"""horovod.common.exceptions: hvd's exception classes."""

from hvd.exceptions import HorovodInternalError, HostsUpdatedInterrupt

__all__ = ['HorovodInternalError', 'HostsUpdatedInterrupt']
