"""allgather, broadcast and alltoall (types libhvd does not know travel as
bytes), their grouped forms, and sparse allreduce (as allgathers)."""

import torch

from hvd import _lib
from hvd import Average, rank, size
from hvd.exceptions import HorovodInternalError
from hvd.process_sets import global_process_set
from hvd.torch import _engine
from hvd.torch._engine import Op, TwoRoundOp, register, submit
from hvd.torch._allreduce import allreduce, grouped_allreduce
from hvd.torch._tensors import (_DTYPE_IDS, _before_device, _check_tensor,
                                _copy_back, _device_staged, _empty,
                                _group_names, _move_type, _needs_grad,
                                _order_after, _ps_id, synchronize)


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
               tensor.numel() * k, dt, root_rank,
               _engine.make_opts(ps_id, shape=tensor.shape))
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
            raise ValueError(
                'splits not provided, but first dimension of tensor is not an '
                'even multiple of the number of workers.')
        split_list = [dim0 // n] * n
    else:
        if splits.dim() > 1:
            raise ValueError('alltoall expects a 1D splits tensor')
        if splits.dtype != torch.int32:
            raise ValueError(
                'alltoall expects splits to contain 32-bit integer elements.')
        split_list = [int(x) for x in splits.cpu().tolist()]
        if len(split_list) != n:
            raise ValueError(
                'Number of entries in splits does not equal number of '
                'workers.')
        if sum(split_list) > dim0:
            raise ValueError(
                'Sum of splits entries is greater than the first dimension '
                'of tensor.')
        if any(s < 0 for s in split_list):
            raise ValueError('alltoall: splits must not be negative')
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
