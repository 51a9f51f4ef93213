"""The pieces every operation of hvd.torch shares: which torch types libhvd
reduces or moves, process set ids, staging of device tensors, waiting."""

import torch

import hvd as _hvd
from hvd import _lib
from hvd import process_sets as _ps
from hvd.torch import _engine
from hvd.torch.compression import Compression


# ------------------------------------------------------------------ types

_C_DTYPES = {
    torch.uint8: _lib.UINT8,
    torch.int8: _lib.INT8,
    torch.int32: _lib.INT32,
    torch.int64: _lib.INT64,
    torch.float16: _lib.FLOAT16,
    torch.bfloat16: _lib.BFLOAT16,
    torch.float32: _lib.FLOAT32,
    torch.float64: _lib.FLOAT64,
}
_C_DTYPES_GET = _C_DTYPES.get
_C_OPS_GET = _hvd._C_OPS.get
_IN_PLACE = _lib.HVD_IN_PLACE
# a stable number per torch dtype, for the shape exchanges
_DTYPE_IDS = {dt: i + 1 for i, dt in enumerate([
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.bool,
    torch.complex64, torch.complex128])}


_grad_enabled = torch.is_grad_enabled
_empty_like = torch.empty_like
_NONE = Compression.none


def _empty(t):
    """An uninitialized contiguous tensor like t (Horovod's t.new(t.shape),
    which costs several times more)."""
    return torch.empty_like(t)


def _type_error(tensor):
    return ValueError('Tensor type %s is not supported.' % tensor.type())


def _check_tensor(tensor):
    if not isinstance(tensor, torch.Tensor):
        raise ValueError('expected a torch.Tensor, got %s' % type(tensor))
    if not tensor.is_contiguous():
        raise ValueError('Tensor is required to be contiguous.')
    if tensor.is_sparse:
        raise ValueError('Tensor type %s is not supported (sparse tensors '
                         'go through sparse_allreduce_async).' % tensor.type())


def _reduce_type(tensor):
    _check_tensor(tensor)
    dt = _C_DTYPES.get(tensor.dtype)
    if dt is None:
        raise _type_error(tensor)
    return dt


def _move_type(tensor):
    """(hvd dtype, element size) for a data-moving op: bytes for types
    libhvd does not know."""
    _check_tensor(tensor)
    dt = _C_DTYPES.get(tensor.dtype)
    if dt is None:
        return _lib.UINT8, tensor.element_size()
    return dt, 1


def _ps_id(process_set):
    ps_id = process_set.process_set_id
    if ps_id is None:
        gone = _ps._gone_error(process_set)
        if gone is not None:
            raise gone
        raise ValueError('Process set %s has not been registered (pass it to '
                         'hvd.init or hvd.add_process_set).' % process_set)
    return ps_id


_cuda_built = []


def _device_staged(tensor):
    """A CUDA tensor when libhvd has no GPU path: Horovod then stages it
    through host memory, and so do we."""
    if not tensor.is_cuda:
        return False
    if not _cuda_built:
        _cuda_built.append(_hvd.cuda_built())
    return not _cuda_built[0]


def _before_device(tensor):
    """Device memory is read by libhvd's NCCL stream, not torch's, so
    libhvd is told torch's current stream (hvd_stream_set): NCCL waits for
    it on the GPU and the stream waits for the result, no host sync.
    Returns that stream (an int, for a second round submitted from
    another thread), or None for host memory."""
    if not tensor.is_cuda:
        return None
    stream = torch.cuda.current_stream(tensor.device).cuda_stream
    _order_after(stream)
    return stream


def _order_after(stream):
    """This thread's next device operations wait for stream."""
    if stream is None:
        return
    if _lib.hvd_stream_set is None:  # an older libhvd: wait on the host
        torch.cuda.synchronize()
        return
    _lib.check(_lib.hvd_stream_set(stream or None), 'hvd_stream_set')


def poll(handle):
    """True when the asynchronous operation behind handle has completed:
    synchronize() will then return without blocking."""
    return _engine.poll(handle)


def synchronize(handle):
    """Wait for an asynchronous operation and return its result (a tensor,
    or a tuple/list of them); HorovodInternalError when it failed."""
    return _engine.synchronize(handle)


def _c_op(op):
    cop = _hvd._C_OPS.get(op)
    if cop is None:
        raise ValueError('op must be one of Average, Sum, Adasum, Min, Max '
                         'or Product, not %r' % (op,))
    return cop


def _copy_back(inner, tensor, output):
    """Wraps a host-staged op: its result goes back into output on the
    device."""
    orig = inner.result

    def staged():
        output.copy_(orig())
        return output
    inner.result = staged
    inner.keep = (inner.keep, tensor, output)
    return inner


def _needs_grad(*tensors):
    if not _grad_enabled():
        return False
    for t in tensors:
        if t.requires_grad:
            return True
    return False


def _group_names(prefix, name, n, ps_id):
    base = _engine.op_name(prefix, name, ps_id)
    return ['%s_%dof%d' % (base, i + 1, n) for i in range(n)]
