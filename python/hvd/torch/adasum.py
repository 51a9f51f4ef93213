"""Adasum (op=hvd.Adasum) on host tensors.

Adasum combines two gradients a and b as

    a' = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b

(a coefficient stays 1 when its norm squared is below sqrt(DBL_MIN)), and
a power-of-two number of ranks pairwise, as a binary tree: ranks r and
r^1 first, then the pairs (r, r^1) and (r^2, r^3), and so on, each
combination using the dot products and norms of the whole vectors (in
float64).  That is Horovod's recursive vector-halving algorithm; its
halving only spreads the work and the traffic over the ranks.

This module gathers every rank's tensor with one engine allreduce (each
rank's tensor in its own slot, the others zero: sums of one value and
zeros are exact in every type) and runs the tree locally, the same on
every rank, so that every rank gets bit-identical results.  It serves
process sets as well as the world (Horovod refuses other sets).
"""

import math
import sys

import torch

from hvd import _lib
from hvd.exceptions import HorovodInternalError
from hvd.torch import _engine
from hvd.torch._engine import Op

_SQRT_DBL_MIN = math.sqrt(sys.float_info.min)
_TYPES = (torch.float16, torch.float32, torch.float64)


def combine(a, b):
    """Adasum of two tensors (float64 arithmetic, result in a's type)."""
    a64 = a.double().reshape(-1)
    b64 = b.double().reshape(-1)
    dot = float(torch.dot(a64, b64))
    anormsq = float(torch.dot(a64, a64))
    bnormsq = float(torch.dot(b64, b64))
    acoeff = 1.0 - dot / anormsq * 0.5 if anormsq >= _SQRT_DBL_MIN else 1.0
    bcoeff = 1.0 - dot / bnormsq * 0.5 if bnormsq >= _SQRT_DBL_MIN else 1.0
    return (acoeff * a64 + bcoeff * b64).to(a.dtype).reshape(a.shape)


def reduce(tensors):
    """Adasum of a power-of-two list of tensors, as the tree of VHDD."""
    level = list(tensors)
    while len(level) > 1:
        level = [combine(level[i], level[i + 1])
                 for i in range(0, len(level), 2)]
    return level[0]


def _check(tensors, ps_size):
    if ps_size & (ps_size - 1):
        raise NotImplementedError('Running Adasum with non-power of 2 ranks '
                                  'is not supported yet.')
    for t in tensors:
        if t.dtype not in _TYPES:
            raise ValueError('Adasum reduction supports float16, float32 and '
                             'float64 tensors, not %s' % t.type())
        if t.is_cuda:
            raise ValueError('Adasum on device tensors is not supported: '
                             'libhvd has Adasum for host tensors only; '
                             'move the tensor to the CPU')


def _grouped(tensors, outputs, names, prescale, postscale, process_set):
    from hvd.torch.mpi_ops import _check_tensor, _ps_id
    ps_id = _ps_id(process_set)
    n = _lib.hvd_pset_size(ps_id)
    me = _lib.hvd_pset_rank(ps_id)
    _check(tensors, n)
    slots, handles = [], []
    with _engine.Group(len(tensors)) as g:
        opts = _engine.make_opts(ps_id, group=g.id)
        for t, o, nm in zip(tensors, outputs, names):
            _check_tensor(t)
            s = t.new_zeros((n,) + tuple(t.shape))
            s[me].copy_(t)
            if prescale != 1.0:
                s[me].mul_(prescale)
            slots.append(s)
            handles.append(_engine.submit(
                _lib.hvd_allreduce_async, nm, _lib.HVD_IN_PLACE,
                s.data_ptr(), s.numel(),
                {torch.float16: _lib.FLOAT16, torch.float32: _lib.FLOAT32,
                 torch.float64: _lib.FLOAT64}[t.dtype], _lib.SUM, opts))

    def result():
        for s, o in zip(slots, outputs):
            r = reduce(list(s.unbind(0)))
            if postscale != 1.0:
                r = r * postscale
            o.copy_(r)
        return outputs
    return Op(handles, (tensors, outputs, slots), result)


def allreduce_op(tensor, output, name, prescale, postscale, process_set):
    from hvd.torch.mpi_ops import _ps_id
    names = [_engine.op_name('adasum', name, _ps_id(process_set))]
    op = _grouped([tensor], [output], names, prescale, postscale,
                  process_set)
    inner = op.result
    op.result = lambda: inner()[0]
    return op


def grouped_allreduce_op(tensors, outputs, name, prescale, postscale,
                         process_set):
    from hvd.torch.mpi_ops import _group_names, _ps_id
    names = _group_names('grouped_adasum', name, len(tensors),
                         _ps_id(process_set))
    return _grouped(tensors, outputs, names, prescale, postscale,
                    process_set)


__all__ = ['combine', 'reduce', 'HorovodInternalError']
