"""reducescatter and grouped_reducescatter."""

import torch

from hvd import _lib
from hvd import Average, Sum
from hvd.exceptions import HorovodInternalError
from hvd.process_sets import global_process_set
from hvd.torch import _engine
from hvd.torch._engine import Op, register, submit
from hvd.torch._collect import allgather, grouped_allgather
from hvd.torch._tensors import (_before_device, _c_op, _device_staged,
                                _group_names, _needs_grad, _ps_id,
                                _reduce_type, synchronize)
from hvd.torch.compression import Compression


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
                                  dt, cop, opts[:4] + (t.shape,)))

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
