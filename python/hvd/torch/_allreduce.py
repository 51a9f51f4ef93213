"""allreduce, grouped_allreduce and their async and in-place forms."""

import torch

import hvd as _hvd
from hvd import _lib
from hvd import Adasum
from hvd.process_sets import global_process_set
from hvd.torch import _engine
from hvd.torch._engine import Op, register, submit
from hvd.torch._tensors import (_C_DTYPES_GET, _C_OPS_GET, _IN_PLACE, _NONE,
                                _before_device, _c_op, _check_tensor,
                                _copy_back, _device_staged, _empty,
                                _empty_like, _grad_enabled, _group_names,
                                _needs_grad, _ps_id, _reduce_type, synchronize)
from hvd.torch.compression import Compression


# -------------------------------------------------------------- allreduce

handle_average_backwards_compatibility = _hvd._average_compat(_hvd)


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
                  _engine.make_opts(ps_id, prescale_factor, postscale_factor,
                                    shape=tensor.shape))


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
                   prescale_factor, postscale_factor, 0, tensor.shape)
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
               _engine.make_opts(ps_id, prescale_factor, postscale_factor,
                                 shape=tensor.shape))
    return Op([h], (tensor, output), lambda: output)


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
                                  o.data_ptr(), t.numel(), dt, cop,
                                  opts[:4] + (t.shape,)))
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
