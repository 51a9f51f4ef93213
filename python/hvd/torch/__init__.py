"""hvd.torch: Horovod 0.28's PyTorch API (horovod.torch) on libhvd.

    import hvd.torch as hvd          # or, unchanged: import horovod.torch as hvd
    hvd.init()
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01 * hvd.size())
    opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)

Run it with ``srun --horovod python train.py``, ``hvdrun -np 4 python
train.py`` or ``mpirun -np 4 python train.py``.  See doc/python.md.
"""

from hvd.exceptions import HorovodInternalError, HostsUpdatedInterrupt
from hvd.torch.compression import Compression
from hvd.torch.functions import (allgather_object, broadcast_object,
                                 broadcast_optimizer_state,
                                 broadcast_parameters)
from hvd.torch.mpi_ops import (
    Adasum, Average, Max, Min, Product, ProcessSet, Sum, add_process_set,
    allgather, allgather_async, allreduce, allreduce_, allreduce_async,
    allreduce_async_, alltoall, alltoall_async, barrier, broadcast,
    broadcast_, broadcast_async, broadcast_async_, ccl_built, cross_rank,
    cross_size, cuda_built, ddl_built, gloo_built, gloo_enabled,
    global_process_set, grouped_allgather, grouped_allgather_async,
    grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
    grouped_allreduce_async_, grouped_reducescatter,
    grouped_reducescatter_async, init, is_homogeneous, is_initialized, join,
    local_rank, local_size, mpi_built, mpi_enabled, mpi_threads_supported,
    nccl_built, poll, rank, reducescatter, reducescatter_async,
    remove_process_set, rocm_built, shutdown, size, sparse_allreduce_async,
    start_timeline, stop_timeline, synchronize)
from hvd.torch.optimizer import DistributedOptimizer
from hvd.torch.sync_batch_norm import SyncBatchNorm
from hvd.torch.checkpoint import Checkpoint, GlobalSampler
from hvd.torch import elastic  # noqa: F401 (hvd.elastic.run, TorchState, ...)
