"""horovod.torch.elastic is not part of slurm-horovod.

Elastic training (hosts joining and leaving a running job, horovodrun's
rendezvous) has no counterpart here: on Slurm a job keeps its allocation,
and preemption, time limits and node failures are handled by
hvd.torch.Checkpoint (checkpoint on SIGTERM, exit 85, requeue, resume).
Any use of this module says so.
"""

_WHY = ('hvd.torch.elastic: elastic training is not supported by '
        'slurm-horovod; use hvd.torch.Checkpoint (every N steps and on '
        'SIGTERM) with a requeued job instead (doc/python.md)')


def __getattr__(name):
    if name.startswith('__'):
        raise AttributeError(name)
    raise NotImplementedError(_WHY)


def run(func):
    """Horovod's decorator: refused (see the module documentation)."""
    raise NotImplementedError(_WHY)
