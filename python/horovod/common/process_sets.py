"""horovod.common.process_sets: hvd's process sets."""

from hvd.process_sets import (ProcessSet, add_process_set, global_process_set,
                              remove_process_set)

__all__ = ['ProcessSet', 'add_process_set', 'global_process_set',
           'remove_process_set']
