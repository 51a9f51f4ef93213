"""horovod.torch's operations over libhvd's engine.

Every operation takes the tensor's memory as it is (contiguous, host or
device), hands its pointer to an hvd_*_async call and keeps the tensor
alive in the handle map until the operation completed; results land in
place where Horovod's do (the ``_`` variants) and in a new tensor
otherwise.  Names, defaults, errors and gradients are Horovod 0.28's.

Types: the reductions take what libhvd reduces (uint8, int8, int32, int64,
float16, bfloat16, float32, float64); broadcast, allgather and alltoall
move any type (types libhvd does not know travel as bytes).

The operations live in _allreduce.py, _collect.py (allgather, broadcast,
alltoall, sparse) and _reducescatter.py over the shared pieces of
_tensors.py; this module is the namespace Horovod scripts import.
"""

import torch

import hvd as _hvd
from hvd import _lib
from hvd.exceptions import HorovodInternalError  # noqa: F401 (Horovod has it here)
from hvd.process_sets import (ProcessSet, add_process_set, global_process_set,
                              remove_process_set)
from hvd.torch import _engine
from hvd.torch._engine import Op, submit
from hvd.torch.compression import Compression  # noqa: F401
from hvd.torch._tensors import _ps_id, poll, synchronize
from hvd.torch._allreduce import (HorovodAllreduce, HorovodGroupedAllreduce,
                                  allreduce, allreduce_, allreduce_async,
                                  allreduce_async_, grouped_allreduce,
                                  grouped_allreduce_, grouped_allreduce_async,
                                  grouped_allreduce_async_,
                                  handle_average_backwards_compatibility)
from hvd.torch._collect import (HorovodAllgather, HorovodAlltoall,
                                HorovodBroadcast, HorovodGroupedAllgather,
                                allgather, allgather_async, alltoall,
                                alltoall_async, broadcast, broadcast_,
                                broadcast_async, broadcast_async_,
                                grouped_allgather, grouped_allgather_async,
                                sparse_allreduce_async)
from hvd.torch._reducescatter import (HorovodGroupedReducescatter,
                                      HorovodReducescatter,
                                      grouped_reducescatter,
                                      grouped_reducescatter_async,
                                      reducescatter, reducescatter_async)

# basics
init = _hvd.init
is_initialized = _hvd.is_initialized
start_timeline = _hvd.start_timeline
stop_timeline = _hvd.stop_timeline
size = _hvd.size
local_size = _hvd.local_size
cross_size = _hvd.cross_size
rank = _hvd.rank
local_rank = _hvd.local_rank
cross_rank = _hvd.cross_rank
is_homogeneous = _hvd.is_homogeneous
mpi_threads_supported = _hvd.mpi_threads_supported
mpi_enabled = _hvd.mpi_enabled
mpi_built = _hvd.mpi_built
gloo_enabled = _hvd.gloo_enabled
gloo_built = _hvd.gloo_built
nccl_built = _hvd.nccl_built
ddl_built = _hvd.ddl_built
ccl_built = _hvd.ccl_built
cuda_built = _hvd.cuda_built
rocm_built = _hvd.rocm_built

Average = _hvd.Average
Sum = _hvd.Sum
Adasum = _hvd.Adasum
Min = _hvd.Min
Max = _hvd.Max
Product = _hvd.Product

_hvd._shutdown_hooks.append(_engine.reset)


def shutdown(*args, **kwargs):
    """Shut Horovod down; operations still in flight fail."""
    _engine.reset()
    return _hvd.shutdown(*args, **kwargs)




# ------------------------------------------------------- join and barrier

def join(device=-1):
    """This process has no more data: until every process joined it takes
    part in the others' allreduces with zeros.  Blocks until all joined;
    returns the rank that joined last."""
    import ctypes
    last = ctypes.c_int(-1)
    st = _lib.hvd_join(ctypes.byref(last))
    if st != _lib.OK:
        raise _lib.error(st)
    _engine.joined()
    return last.value


def barrier(process_set=global_process_set):
    """Returns once every process of process_set reached it."""
    ps_id = _ps_id(process_set)
    t = torch.zeros(1, dtype=torch.int32)
    h = submit(_lib.hvd_allreduce_async, 'barrier.%d' % ps_id,
               _lib.HVD_IN_PLACE, t.data_ptr(), 1, _lib.INT32, _lib.SUM,
               _engine.make_opts(ps_id))
    Op([h], (t,), lambda: None).wait()
