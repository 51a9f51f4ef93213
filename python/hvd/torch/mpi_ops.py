"""horovod.torch's operations over libhvd's engine.

Every operation takes the tensor's memory as it is (contiguous, host or
device), hands its pointer to an hvd_*_async call and keeps the tensor
alive in the handle map until the operation completed; results land in
place where Horovod's do (the ``_`` variants) and in a new tensor
otherwise.  Names, defaults, errors and gradients are Horovod 0.28's.

Types: the reductions take what libhvd reduces (uint8, int8, int32, int64,
float16, bfloat16, float32, float64); broadcast, allgather and alltoall
move any type (types libhvd does not know travel as bytes).
"""

import warnings

import torch

import hvd as _hvd
from hvd import _lib
from hvd.exceptions import HorovodInternalError
from hvd.process_sets import (ProcessSet, add_process_set, global_process_set,
                              remove_process_set)
from hvd.torch import _engine
from hvd.torch._engine import Op, TwoRoundOp, register, submit
from hvd.torch.compression import Compression

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


def poll(handle):
    """True when the asynchronous operation behind handle has completed:
    synchronize() will then return without blocking."""
    return _engine.poll(handle)


def synchronize(handle):
    """Wait for an asynchronous operation and return its result (a tensor,
    or a tuple/list of them); HorovodInternalError when it failed."""
    return _engine.synchronize(handle)


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
        _cuda_built.append(cuda_built())
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


# -------------------------------------------------------------- allreduce

def handle_average_backwards_compatibility(op, average):
    if op is not None:
        if average is not None:
            raise ValueError('The op parameter supersedes average. Please '
                             'provide only one of them.')
        return op
    elif average is not None:
        warnings.warn('Parameter `average` has been replaced with `op` and '
                      'will be removed in v1.0', DeprecationWarning)
        return Average if average else Sum
    return Average


def _c_op(op):
    cop = _hvd._C_OPS.get(op)
    if cop is None:
        raise ValueError('op must be one of Average, Sum, Adasum, Min, Max '
                         'or Product, not %r' % (op,))
    return cop


def _fast_allreduce(tensor, output, name, op, prescale_factor,
                    postscale_factor, process_set, prefix='allreduce'):
    """The common case with as few calls as possible (a 4-byte allreduce
    costs tens of microseconds in all, Python included): a contiguous host
    tensor of a type libhvd reduces, a registered set, one of libhvd's
    reductions.  Returns the libhvd handle, or None for the general path."""
    ps_id = process_set.process_set_id
    cop = _C_OPS_GET(op)
    dt = _C_DTYPES_GET(tensor.dtype)
    if ps_id is None or cop is None or dt is None or tensor.is_cuda or \
            not tensor.is_contiguous() or tensor.is_sparse or \
            (output is not tensor and not output.is_contiguous()):
        return None
    return submit(_lib.hvd_allreduce_async,
                  _engine.name_bytes(prefix, name, ps_id),
                  _IN_PLACE if output is tensor else tensor.data_ptr(),
                  output.data_ptr(), tensor.numel(), dt, cop,
                  _engine.make_opts(ps_id, prescale_factor, postscale_factor))


def _wait1(h):
    st = _engine._hvd_wait(h)
    if st:
        raise _lib.error(st)


_fast = _lib.fast


def _run_allreduce(tensor, output, name, op, prescale_factor,
                   postscale_factor, process_set):
    """Synchronous allreduce in one C call when hvd._fast is there and the
    case is the common one; False for the general path."""
    ps_id = process_set.process_set_id
    cop = _C_OPS_GET(op)
    dt = _C_DTYPES_GET(tensor.dtype)
    if _fast is None or ps_id is None or cop is None or dt is None or \
            tensor.is_cuda or not tensor.is_contiguous() or \
            tensor.is_sparse or \
            (output is not tensor and not output.is_contiguous()):
        return False
    st = _fast.run(0, _engine.name_bytes('allreduce', name, ps_id),
                   _IN_PLACE if output is tensor else tensor.data_ptr(),
                   output.data_ptr(), tensor.numel(), dt, cop, ps_id,
                   prescale_factor, postscale_factor, 0)
    if st:
        raise _lib.error(st)
    return True


def _allreduce_op(tensor, output, name, op, prescale_factor,
                  postscale_factor, process_set, prefix='allreduce'):
    h = _fast_allreduce(tensor, output, name, op, prescale_factor,
                        postscale_factor, process_set, prefix)
    if h is not None:
        return Op([h], (tensor, output), lambda: output)
    ps_id = _ps_id(process_set)
    if op == Adasum:
        from hvd.torch import adasum
        adasum.check([tensor], _lib.hvd_pset_size(ps_id))
        cop = _hvd._C_ADASUM
    else:
        cop = _c_op(op)
    dt = _reduce_type(tensor)
    if output is not tensor:
        _check_tensor(output)
    if _device_staged(tensor):
        host = tensor.cpu()
        inner = _allreduce_op(host, host, name, op, prescale_factor,
                              postscale_factor, process_set, prefix)
        return _copy_back(inner, tensor, output)
    _before_device(tensor)
    send = _IN_PLACE if output is tensor else tensor.data_ptr()
    h = submit(_lib.hvd_allreduce_async,
               _engine.name_bytes(prefix, name, ps_id), send,
               output.data_ptr(), tensor.numel(), dt, cop,
               _engine.make_opts(ps_id, prescale_factor, postscale_factor))
    return Op([h], (tensor, output), lambda: output)


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


def allreduce_async(tensor, average=None, name=None, op=None,
                    prescale_factor=1.0, postscale_factor=1.0,
                    process_set=global_process_set):
    """Asynchronous average (or sum, min, max, product, Adasum) of tensor
    over the processes of process_set; tensor is not modified.  Returns a
    handle for poll() and synchronize()."""
    op = handle_average_backwards_compatibility(op, average)
    output = _empty(tensor)
    return register(_allreduce_op(tensor, output, name, op, prescale_factor,
                                  postscale_factor, process_set))


class HorovodAllreduce(torch.autograd.Function):
    """An autograd function that performs allreduce on a tensor."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor,
                postscale_factor, process_set):
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        handle = allreduce_async(tensor, average, name, op, prescale_factor,
                                 postscale_factor, process_set)
        return synchronize(handle)

    @staticmethod
    def backward(ctx, grad_output):
        # (autograd hands expanded, non-contiguous gradients, e.g. of sum())
        grad_output = grad_output.contiguous()
        return allreduce(grad_output, average=ctx.average, op=ctx.op,
                         prescale_factor=ctx.prescale_factor,
                         postscale_factor=ctx.postscale_factor,
                         process_set=ctx.process_set), \
            None, None, None, None, None, None


def _needs_grad(*tensors):
    if not _grad_enabled():
        return False
    for t in tensors:
        if t.requires_grad:
            return True
    return False


def allreduce(tensor, average=None, name=None, compression=Compression.none,
              op=None, prescale_factor=1.0, postscale_factor=1.0,
              process_set=global_process_set):
    """Average (by default) of tensor over all processes, as a new tensor;
    differentiable (the gradient is the allreduce of the gradient)."""
    if compression is _NONE and average is None and op is not None and \
            not (_grad_enabled() and tensor.requires_grad):
        output = _empty_like(tensor)
        if _run_allreduce(tensor, output, name, op, prescale_factor,
                          postscale_factor, process_set):
            return output
    tensor_compressed, ctx = compression.compress(tensor)
    if _needs_grad(tensor_compressed):
        summed = HorovodAllreduce.apply(tensor_compressed, average, name, op,
                                        prescale_factor, postscale_factor,
                                        process_set)
    else:
        op = handle_average_backwards_compatibility(op, average)
        output = _empty(tensor_compressed)
        summed = _allreduce_op(tensor_compressed, output, name, op,
                               prescale_factor, postscale_factor,
                               process_set).wait()
    return compression.decompress(summed, ctx)


def allreduce_async_(tensor, average=None, name=None, op=None,
                     prescale_factor=1.0, postscale_factor=1.0,
                     process_set=global_process_set):
    """Asynchronous in-place allreduce; returns a handle."""
    op = handle_average_backwards_compatibility(op, average)
    return register(_allreduce_op(tensor, tensor, name, op, prescale_factor,
                                  postscale_factor, process_set))


def allreduce_(tensor, average=None, name=None, op=None,
               prescale_factor=1.0, postscale_factor=1.0,
               process_set=global_process_set):
    """In-place allreduce; returns tensor."""
    if average is not None or op is None:
        op = handle_average_backwards_compatibility(op, average)
    if _run_allreduce(tensor, tensor, name, op, prescale_factor,
                      postscale_factor, process_set):
        return tensor
    return _allreduce_op(tensor, tensor, name, op, prescale_factor,
                         postscale_factor, process_set).wait()


# ----------------------------------------------------- grouped allreduce

def _group_names(prefix, name, n, ps_id):
    base = _engine.op_name(prefix, name, ps_id)
    return ['%s_%dof%d' % (base, i + 1, n) for i in range(n)]


def _grouped_allreduce_op(tensors, outputs, name, op, prescale_factor,
                          postscale_factor, process_set):
    ps_id = _ps_id(process_set)
    tensors = list(tensors)
    outputs = list(outputs)
    if not tensors:
        return Op([], (), lambda: [])
    if op == Adasum:
        from hvd.torch import adasum
        adasum.check(tensors, _lib.hvd_pset_size(ps_id))
        cop = _hvd._C_ADASUM
    else:
        cop = _c_op(op)
    dts = [_reduce_type(t) for t in tensors]
    if any(t.device != tensors[0].device for t in tensors):
        raise ValueError('Tensors in list must be on same device.')
    if _device_staged(tensors[0]):
        hosts = [t.cpu() for t in tensors]
        inner = _grouped_allreduce_op(hosts, hosts, name, op, prescale_factor,
                                      postscale_factor, process_set)
        orig = inner.result

        def staged():
            for o, h in zip(outputs, orig()):
                o.copy_(h)
            return outputs
        inner.result = staged
        inner.keep = (inner.keep, tensors, outputs)
        return inner
    for t in tensors:
        _before_device(t)
    names = _group_names('grouped_allreduce', name, len(tensors), ps_id)
    handles = []
    with _engine.Group(len(tensors)) as g:
        opts = _engine.make_opts(ps_id, prescale_factor, postscale_factor,
                                 g.id)
        for t, o, dt, nm in zip(tensors, outputs, dts, names):
            send = _lib.HVD_IN_PLACE if o is t else t.data_ptr()
            handles.append(submit(_lib.hvd_allreduce_async, nm, send,
                                  o.data_ptr(), t.numel(), dt, cop, opts))
    return Op(handles, (tensors, outputs), lambda: outputs)


def grouped_allreduce_async(tensors, average=None, name=None, op=None,
                            prescale_factor=1.0, postscale_factor=1.0,
                            process_set=global_process_set):
    """Asynchronous allreduce of a list of tensors, negotiated and run as one
    group; the inputs are not modified.  Returns a handle."""
    op = handle_average_backwards_compatibility(op, average)
    outputs = [_empty(t) for t in tensors]
    return register(_grouped_allreduce_op(tensors, outputs, name, op,
                                          prescale_factor, postscale_factor,
                                          process_set))


class HorovodGroupedAllreduce(torch.autograd.Function):
    """An autograd function that performs allreduce on a list of tensors."""

    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor,
                process_set, *tensors):
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        handle = grouped_allreduce_async(list(tensors), average, name, op,
                                         prescale_factor, postscale_factor,
                                         process_set)
        return tuple(synchronize(handle))

    @staticmethod
    def backward(ctx, *grad_output):
        grad_output = [g.contiguous() for g in grad_output]
        grad_reduced = grouped_allreduce(list(grad_output),
                                         average=ctx.average, op=ctx.op,
                                         prescale_factor=ctx.prescale_factor,
                                         postscale_factor=ctx.postscale_factor,
                                         process_set=ctx.process_set)
        return (None, None, None, None, None, None, *grad_reduced)


def grouped_allreduce(tensors, average=None, name=None,
                      compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0,
                      process_set=global_process_set):
    """Allreduce of a list of tensors as one group; returns a list of new
    tensors; differentiable."""
    if not tensors:
        return []
    tensors_compressed, ctxs = zip(*[compression.compress(t)
                                     for t in tensors])
    if _needs_grad(*tensors_compressed):
        summed = HorovodGroupedAllreduce.apply(average, name, op,
                                               prescale_factor,
                                               postscale_factor, process_set,
                                               *tensors_compressed)
    else:
        op = handle_average_backwards_compatibility(op, average)
        outputs = [_empty(t) for t in tensors_compressed]
        summed = _grouped_allreduce_op(tensors_compressed, outputs, name, op,
                                       prescale_factor, postscale_factor,
                                       process_set).wait()
    return [compression.decompress(t, ctx) for t, ctx in zip(summed, ctxs)]


def grouped_allreduce_async_(tensors, average=None, name=None, op=None,
                             prescale_factor=1.0, postscale_factor=1.0,
                             process_set=global_process_set):
    """Asynchronous in-place allreduce of a list of tensors; a handle."""
    op = handle_average_backwards_compatibility(op, average)
    return register(_grouped_allreduce_op(tensors, tensors, name, op,
                                          prescale_factor, postscale_factor,
                                          process_set))


def grouped_allreduce_(tensors, average=None, name=None, op=None,
                       prescale_factor=1.0, postscale_factor=1.0,
                       process_set=global_process_set):
    """In-place allreduce of a list of tensors; returns the list."""
    op = handle_average_backwards_compatibility(op, average)
    return _grouped_allreduce_op(tensors, tensors, name, op, prescale_factor,
                                 postscale_factor, process_set).wait()


# ----------------------------------------------------------------- sparse

def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Allreduce of a sparse tensor as Horovod does it: an allgather of its
    indices and of its values (duplicates are summed by the consumer, e.g.
    the optimizer's add_).  Returns a callable that waits and gives the
    aggregated sparse tensor."""
    t = tensor
    indices_handle = allgather_async(t._indices().transpose(0, 1).contiguous(),
                                     name='%s.indices' % name,
                                     process_set=process_set)
    values_handle = allgather_async(t._values(), name='%s.values' % name,
                                    process_set=process_set)

    def handle():
        values = synchronize(values_handle)
        indices = synchronize(indices_handle)
        values = (values / process_set.size()) if op == Average else values
        if indices.dim() == 0 or values.dim() == 0:
            return t.new().resize_as_(t)
        return t.new(indices.transpose(0, 1), values, t.size())

    return handle


# -------------------------------------------------------------- allgather

_SHAPE_SLOTS = 8  # ndim, dim 0, dtype id, shape hash, dims 1..4


def _shape_hash(dims):
    h = 1469598103934665603
    for d in dims:
        h = ((h ^ (int(d) & 0xffffffffffffffff)) * 1099511628211) & \
            0x7fffffffffffffff
    return h


def _shape_row(tensor):
    dims = list(tensor.shape)
    rest = dims[1:]
    row = [len(dims), dims[0], _DTYPE_IDS.get(tensor.dtype, 0),
           _shape_hash(rest)] + (rest[:4] + [0] * 4)[:4]
    return row


def _fmt_shape(row):
    ndim = row[0]
    if ndim - 1 <= 4:
        return str([int(row[1])] + [int(x) for x in row[4:4 + ndim - 1]])
    return '(%d dimensions)' % ndim


def _check_shapes(what, rows, mine, ranks):
    """Every process must send the same type and the same dimensions but the
    first: the same error on every rank when they do not."""
    for r, row in zip(ranks, rows):
        if row[0] != mine[0] or row[2] != mine[2] or row[3] != mine[3]:
            raise HorovodInternalError(
                'Mismatched %s tensor shapes or types: %s; every rank must '
                'send tensors of the same type and rank whose dimensions '
                'agree except the first' % (what, ', '.join(
                    'rank %d has %s %s' % (rr, _fmt_shape(x),
                                           _dtype_name(x[2]))
                    for rr, x in zip(ranks, rows))))


def _dtype_name(i):
    for dt, k in _DTYPE_IDS.items():
        if k == i:
            return str(dt).replace('torch.', '')
    return 'unknown'


def _set_ranks(ps_id):
    from hvd.process_sets import _table
    return _table.get(ps_id) or list(range(size()))


def _allgather_shapes(tensors, name, ps_id):
    """Round one: every member's shape row for each tensor (one allgather
    of a fixed count)."""
    rows = torch.tensor([_shape_row(t) for t in tensors], dtype=torch.int64)
    n = _lib.hvd_pset_size(ps_id)
    out = torch.empty((n, len(tensors), _SHAPE_SLOTS), dtype=torch.int64)
    h = submit(_lib.hvd_allgather_async, name + '.shapes', rows.data_ptr(),
               out.data_ptr(), rows.numel(), _lib.INT64,
               _engine.make_opts(ps_id))
    return h, rows, out


def _allgather_twostage(tensors, name, process_set, what):
    ps_id = _ps_id(process_set)
    for t in tensors:
        _check_tensor(t)
        if t.dim() == 0:
            raise ValueError('%s: a tensor of at least one dimension is '
                             'required (got a 0-dim tensor)' % what)
    if any(t.device != tensors[0].device for t in tensors):
        raise ValueError('Tensors in list must be on same device.')
    n = len(tensors)
    if n == 1:
        names = [_engine.op_name(what, name, ps_id)]
    else:
        names = _group_names('grouped_' + what, name, n, ps_id)
    staged = _device_staged(tensors[0])
    src = [t.cpu() for t in tensors] if staged else list(tensors)
    stream = _before_device(src[0])
    h, rows, shapes = _allgather_shapes(src, names[0], ps_id)

    def second():
        _order_after(stream)  # (the worker thread's own setting)
        ranks = _set_ranks(ps_id)
        outputs, handles = [], []
        rows_all = shapes.tolist()
        for i, t in enumerate(src):
            col = [rows_all[r][i] for r in range(len(rows_all))]
            _check_shapes(what, col, rows[i].tolist(), ranks)
            total = sum(c[1] for c in col)
            outputs.append(torch.empty((total,) + tuple(t.shape[1:]),
                                       dtype=t.dtype, device=t.device))
        with _engine.Group(n) as g:
            opts = _engine.make_opts(ps_id, group=g.id)
            for t, o, nm in zip(src, outputs, names):
                dt, k = _move_type(t)
                handles.append(submit(_lib.hvd_allgather_async, nm,
                                      t.data_ptr(), o.data_ptr(),
                                      t.numel() * k, dt, opts))

        def result():
            if staged:
                res = [o.to(tensors[0].device) for o in outputs]
            else:
                res = outputs
            return res[0] if n == 1 else res
        return Op(handles, (src, outputs), result)

    return TwoRoundOp([h], (tensors, src, rows, shapes), second)


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Asynchronous concatenation of tensor from every process along the
    first dimension (which may differ between processes); a handle."""
    return register(_allgather_twostage([tensor], name, process_set,
                                        'allgather'))


class HorovodAllgather(torch.autograd.Function):
    """An autograd function that performs allgather on a tensor."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.dim = tensor.shape[0]
        ctx.process_set = process_set
        handle = allgather_async(tensor, name, process_set)
        return synchronize(handle)

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output.contiguous(), op=Average,
                                 process_set=ctx.process_set)
        dim_t = torch.IntTensor([ctx.dim])
        dim = allgather(dim_t, process_set=ctx.process_set).view(
            ctx.process_set.size())
        r = ctx.process_set.rank()
        offset = torch.sum(dim.narrow(0, 0, r)).item() if r != 0 else 0
        return grad_reduced.narrow(0, offset, ctx.dim), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenation of tensor from every process along the first
    dimension, as a new tensor; differentiable."""
    if _needs_grad(tensor):
        return HorovodAllgather.apply(tensor, name, process_set)
    return _allgather_twostage([tensor], name, process_set,
                               'allgather').wait()


def grouped_allgather_async(tensors, name=None,
                            process_set=global_process_set):
    """Asynchronous allgather of a list of tensors as one group."""
    if not tensors:
        return register(Op([], (), lambda: []))
    return register(_allgather_twostage(list(tensors), name, process_set,
                                        'allgather'))


class HorovodGroupedAllgather(torch.autograd.Function):
    """An autograd function that performs allgather on a list of tensors."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.dims = [t.shape[0] for t in tensors]
        ctx.process_set = process_set
        handle = grouped_allgather_async(list(tensors), name, process_set)
        res = synchronize(handle)
        return tuple(res) if isinstance(res, list) else (res,)

    @staticmethod
    def backward(ctx, *grad_output):
        grad_reduced = grouped_allreduce([g.contiguous() for g in grad_output],
                                         op=Average,
                                         process_set=ctx.process_set)
        dim_ts = [torch.IntTensor([dim]) for dim in ctx.dims]
        dims = [dt.view(ctx.process_set.size())
                for dt in grouped_allgather(dim_ts,
                                            process_set=ctx.process_set)]
        r = ctx.process_set.rank()
        offsets = [torch.sum(dim.narrow(0, 0, r)).item() if r != 0 else 0
                   for dim in dims]
        result = [gr.narrow(0, offset, dim)
                  for gr, offset, dim in zip(grad_reduced, offsets, ctx.dims)]
        return (None, None, *result)


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgather of a list of tensors as one group; a list of new tensors;
    differentiable."""
    if not tensors:
        return []
    if _needs_grad(*tensors):
        return list(HorovodGroupedAllgather.apply(name, process_set,
                                                  *tensors))
    res = _allgather_twostage(list(tensors), name, process_set,
                              'allgather').wait()
    return res if isinstance(res, list) else [res]


# -------------------------------------------------------------- broadcast

def _broadcast_op(tensor, output, root_rank, name, process_set):
    ps_id = _ps_id(process_set)
    dt, k = _move_type(tensor)
    if output is not tensor:
        _check_tensor(output)
    if not isinstance(root_rank, int) or isinstance(root_rank, bool):
        root_rank = int(root_rank)
    if _device_staged(tensor):
        host = tensor.cpu()
        inner = _broadcast_op(host, host, root_rank, name, process_set)
        return _copy_back(inner, tensor, output)
    if output is not tensor and rank() == root_rank:
        output.copy_(tensor)
    _before_device(output)
    h = submit(_lib.hvd_broadcast_async,
               _engine.op_name('broadcast', name, ps_id), output.data_ptr(),
               tensor.numel() * k, dt, root_rank, _engine.make_opts(ps_id))
    return Op([h], (tensor, output), lambda: output)


def broadcast_async(tensor, root_rank, name=None,
                    process_set=global_process_set):
    """Asynchronous broadcast of root_rank's tensor (a world rank) into a
    new tensor on every process; tensor is not modified."""
    output = _empty(tensor)
    return register(_broadcast_op(tensor, output, root_rank, name,
                                  process_set))


class HorovodBroadcast(torch.autograd.Function):
    """An autograd function that broadcasts a tensor."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        handle = broadcast_async(tensor, root_rank, name, process_set)
        return synchronize(handle)

    @staticmethod
    def backward(ctx, grad_output):
        grad_reduced = allreduce(grad_output.contiguous(), op=Average,
                                 process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            grad_reduced *= 0
        return grad_reduced, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """root_rank's tensor on every process, as a new tensor;
    differentiable."""
    if _needs_grad(tensor):
        return HorovodBroadcast.apply(tensor, root_rank, name, process_set)
    output = _empty(tensor)
    return _broadcast_op(tensor, output, root_rank, name, process_set).wait()


def broadcast_async_(tensor, root_rank, name=None,
                     process_set=global_process_set):
    """Asynchronous in-place broadcast; a handle."""
    return register(_broadcast_op(tensor, tensor, root_rank, name,
                                  process_set))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """In-place broadcast; returns tensor."""
    return _broadcast_op(tensor, tensor, root_rank, name, process_set).wait()


# --------------------------------------------------------------- alltoall

def _alltoall_twostage(tensor, splits, name, process_set):
    ps_id = _ps_id(process_set)
    _check_tensor(tensor)
    n = _lib.hvd_pset_size(ps_id)
    if tensor.dim() == 0:
        raise ValueError('alltoall: a tensor of at least one dimension is '
                         'required (got a 0-dim tensor)')
    dim0 = tensor.shape[0]
    if splits is None:
        if dim0 % n != 0:
            raise HorovodInternalError(
                'splits not provided, but first dimension of tensor is not an '
                'even multiple of the number of workers.')
        split_list = [dim0 // n] * n
    else:
        if splits.dim() > 1:
            raise HorovodInternalError('alltoall expects a 1D splits tensor')
        if splits.dtype != torch.int32:
            raise HorovodInternalError(
                'alltoall expects splits to contain 32-bit integer elements.')
        split_list = [int(x) for x in splits.cpu().tolist()]
        if len(split_list) != n:
            raise HorovodInternalError(
                'Number of entries in splits does not equal number of '
                'workers.')
        if sum(split_list) > dim0:
            raise HorovodInternalError(
                'Sum of splits entries is greater than the first dimension '
                'of tensor.')
        if any(s < 0 for s in split_list):
            raise HorovodInternalError('alltoall: splits must not be negative')
    full = _engine.op_name('alltoall', name, ps_id)
    staged = _device_staged(tensor)
    src = tensor.cpu() if staged else tensor
    stream = _before_device(src)
    # Round one: every member's splits and shape row.
    meta = torch.tensor(split_list + _shape_row(src), dtype=torch.int64)
    gathered = torch.empty((n, meta.numel()), dtype=torch.int64)
    h = submit(_lib.hvd_allgather_async, full + '.splits', meta.data_ptr(),
               gathered.data_ptr(), meta.numel(), _lib.INT64,
               _engine.make_opts(ps_id))
    my = _lib.hvd_pset_rank(ps_id)

    def second():
        _order_after(stream)
        g = gathered.tolist()
        ranks = _set_ranks(ps_id)
        _check_shapes('alltoall', [row[n:] for row in g],
                      meta.tolist()[n:], ranks)
        recv_splits = [g[i][my] for i in range(n)]
        block = max(max(row[:n]) for row in g)
        rest = tuple(src.shape[1:])
        rowelems = 1
        for d in rest:
            rowelems *= d
        dt, k = _move_type(src)
        even_send = all(s == block for s in split_list) and \
            sum(split_list) == dim0
        if even_send:
            sendbuf = src
        else:
            sendbuf = src.new_zeros((n * block,) + rest)
            off = 0
            for j, s in enumerate(split_list):
                sendbuf[j * block:j * block + s] = src[off:off + s]
                off += s
        even_recv = all(s == block for s in recv_splits)
        recvbuf = src.new_empty((n * block,) + rest)
        hh = submit(_lib.hvd_alltoall_async, full, sendbuf.data_ptr(),
                    recvbuf.data_ptr(), block * rowelems * k, dt,
                    _engine.make_opts(ps_id))

        def result():
            if even_recv:
                out = recvbuf
            else:
                out = torch.cat([recvbuf[i * block:i * block + s]
                                 for i, s in enumerate(recv_splits)])
            if staged:
                out = out.to(tensor.device)
            if isinstance(splits, torch.Tensor):
                rs = torch.tensor(recv_splits, dtype=splits.dtype,
                                  device=splits.device)
            else:
                rs = torch.tensor(recv_splits, dtype=torch.int32)
            return out, rs
        return Op([hh], (sendbuf, recvbuf), result)

    return TwoRoundOp([h], (tensor, src, meta, gathered), second)


def alltoall_async(tensor, splits=None, name=None,
                   process_set=global_process_set):
    """Asynchronous alltoall: rows of tensor go to every process
    (splits[i] rows to process i, an even split by default); a handle whose
    result is (output, received_splits)."""
    if splits is not None and not isinstance(splits, torch.Tensor):
        splits = torch.tensor(splits, dtype=torch.int32)
    return register(_alltoall_twostage(tensor, splits, name, process_set))


class HorovodAlltoall(torch.autograd.Function):
    """An autograd function that performs alltoall on a tensor."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        handle = alltoall_async(tensor, splits, name, process_set)
        output, received_splits = synchronize(handle)
        ctx.process_set = process_set
        ctx.recvsplits = received_splits
        if splits is None:
            return output
        ctx.mark_non_differentiable(received_splits)
        return output, received_splits

    @staticmethod
    def backward(ctx, grad_output, *dead_gradients):
        grad_wrt_tensor, _ = alltoall(grad_output.contiguous(),
                                      splits=ctx.recvsplits,
                                      process_set=ctx.process_set)
        return grad_wrt_tensor, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Scatter rows of tensor to every process and gather theirs: returns
    the gathered tensor, and with splits also the received splits;
    differentiable."""
    if splits is not None and not isinstance(splits, torch.Tensor):
        splits = torch.tensor(splits, dtype=torch.int32)
    if _needs_grad(tensor):
        return HorovodAlltoall.apply(tensor, splits, name, process_set)
    output, received = _alltoall_twostage(tensor, splits, name,
                                          process_set).wait()
    if splits is None:
        return output
    return output, received


# ---------------------------------------------------------- reducescatter

def _rows_of(dim0, n, r):
    return dim0 // n + (1 if r < dim0 % n else 0)


def _reducescatter_op(tensors, name, op, process_set, prescale_factor,
                      postscale_factor, grouped):
    ps_id = _ps_id(process_set)
    if op not in (Average, Sum):
        raise HorovodInternalError(
            'Reducescatter currently only supports AVERAGE and SUM.')
    cop = _c_op(op)
    tensors = list(tensors)
    dts = [_reduce_type(t) for t in tensors]
    for t in tensors:
        if t.dim() == 0:
            raise ValueError('reducescatter: a tensor of at least one '
                             'dimension is required (got a 0-dim tensor)')
    if any(t.device != tensors[0].device for t in tensors):
        raise ValueError('Tensors in list must be on same device.')
    staged = _device_staged(tensors[0])
    src = [t.cpu() for t in tensors] if staged else tensors
    n = _lib.hvd_pset_size(ps_id)
    my = _lib.hvd_pset_rank(ps_id)
    if grouped:
        names = _group_names('grouped_reducescatter', name, len(src), ps_id)
    else:
        names = [_engine.op_name('reducescatter', name, ps_id)]
    bufs, outs, handles = [], [], []
    with _engine.Group(len(src)) as g:
        opts = _engine.make_opts(ps_id, prescale_factor, postscale_factor,
                                 g.id)
        for t, dt, nm in zip(src, dts, names):
            _before_device(t)
            dim0 = t.shape[0]
            rest = tuple(t.shape[1:])
            mine = _rows_of(dim0, n, my)
            if dim0 % n == 0:
                # libhvd's element split is then Horovod's row split
                inp = t
                out = t.new_empty((mine,) + rest)
            else:
                # Horovod gives the first dim0 % n ranks one more row: pad
                # every rank's block to the largest, reduce, keep ours.
                block = dim0 // n + 1
                inp = t.new_zeros((n * block,) + rest)
                off = 0
                for j in range(n):
                    rows = _rows_of(dim0, n, j)
                    inp[j * block:j * block + rows] = t[off:off + rows]
                    off += rows
                out = t.new_empty((block,) + rest)
            bufs.append(inp)
            outs.append((out, mine))
            handles.append(submit(_lib.hvd_reducescatter_async, nm,
                                  inp.data_ptr(), out.data_ptr(), inp.numel(),
                                  dt, cop, opts))

    def result():
        res = []
        for (out, mine) in outs:
            o = out[:mine] if out.shape[0] != mine else out
            if staged:
                o = o.to(tensors[0].device)
            res.append(o)
        return res if grouped else res[0]
    return Op(handles, (tensors, src, bufs, outs), result)


def reducescatter_async(tensor, name=None, op=Average,
                        process_set=global_process_set, prescale_factor=1.0,
                        postscale_factor=1.0):
    """Asynchronous reduce (Average or Sum) of tensor over all processes,
    scattered along the first dimension (the first dim0 % size processes
    get one more row); a handle."""
    return register(_reducescatter_op([tensor], name, op, process_set,
                                      prescale_factor, postscale_factor,
                                      False))


class HorovodReducescatter(torch.autograd.Function):
    """An autograd function that performs reducescatter on a tensor."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor,
                postscale_factor):
        ctx.op = op
        ctx.process_set = process_set
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        handle = reducescatter_async(tensor, name, op, process_set,
                                     prescale_factor, postscale_factor)
        return synchronize(handle)

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.op == Sum:
            grad_output = grad_output * ctx.process_set.size()
        if ctx.prescale_factor != 1.0:
            grad_output = grad_output * ctx.prescale_factor
        if ctx.postscale_factor != 1.0:
            grad_output = grad_output * ctx.postscale_factor
        return allgather(grad_output.contiguous(),
                         process_set=ctx.process_set), \
            None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none,
                  op=Average, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    """Reduce tensor over all processes and return this process's rows of
    the result; differentiable."""
    tensor_compressed, ctx = compression.compress(tensor)
    if _needs_grad(tensor_compressed):
        reduced = HorovodReducescatter.apply(tensor_compressed, name, op,
                                             process_set, prescale_factor,
                                             postscale_factor)
    else:
        reduced = _reducescatter_op([tensor_compressed], name, op,
                                    process_set, prescale_factor,
                                    postscale_factor, False).wait()
    return compression.decompress(reduced, ctx)


def grouped_reducescatter_async(tensors, name=None, op=Average,
                                process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Asynchronous reducescatter of a list of tensors as one group."""
    if not tensors:
        return register(Op([], (), lambda: []))
    return register(_reducescatter_op(tensors, name, op, process_set,
                                      prescale_factor, postscale_factor,
                                      True))


class HorovodGroupedReducescatter(torch.autograd.Function):
    """An autograd function that performs reducescatter on a list of
    tensors."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor,
                postscale_factor, *tensors):
        ctx.op = op
        ctx.process_set = process_set
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        handle = grouped_reducescatter_async(list(tensors), name, op,
                                             process_set, prescale_factor,
                                             postscale_factor)
        return tuple(synchronize(handle))

    @staticmethod
    def backward(ctx, *grad_output):
        if ctx.op == Sum:
            grad_output = [g * ctx.process_set.size() for g in grad_output]
        if ctx.prescale_factor != 1.0:
            grad_output = [ctx.prescale_factor * g for g in grad_output]
        if ctx.postscale_factor != 1.0:
            grad_output = [ctx.postscale_factor * g for g in grad_output]
        return (None, None, None, None, None,
                *grouped_allgather([g.contiguous() for g in grad_output],
                                   process_set=ctx.process_set))


def grouped_reducescatter(tensors, name=None, compression=Compression.none,
                          op=Average, process_set=global_process_set,
                          prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatter of a list of tensors as one group; differentiable."""
    if not tensors:
        return []
    compressed, ctxs = [], []
    for tensor in tensors:
        tc, ctx = compression.compress(tensor)
        compressed.append(tc)
        ctxs.append(ctx)
    if _needs_grad(*compressed):
        reduced = HorovodGroupedReducescatter.apply(name, op, process_set,
                                                    prescale_factor,
                                                    postscale_factor,
                                                    *compressed)
    else:
        reduced = _reducescatter_op(compressed, name, op, process_set,
                                    prescale_factor, postscale_factor,
                                    True).wait()
    return [compression.decompress(r, ctx) for r, ctx in zip(reduced, ctxs)]


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
    return last.value


def barrier(process_set=global_process_set):
    """Returns once every process of process_set reached it."""
    ps_id = _ps_id(process_set)
    t = torch.zeros(1, dtype=torch.int32)
    h = submit(_lib.hvd_allreduce_async, 'barrier.%d' % ps_id,
               _lib.HVD_IN_PLACE, t.data_ptr(), 1, _lib.INT32, _lib.SUM,
               _engine.make_opts(ps_id))
    Op([h], (t,), lambda: None).wait()
