"""Broadcasts of model and optimizer state, and of Python objects.

broadcast_parameters and broadcast_optimizer_state send every tensor of a
state from the root to the others in place (all broadcasts in flight at
once, then waited for); broadcast_object and allgather_object pickle
(cloudpickle when it is installed, else the standard pickle) and send the
bytes.
"""

import collections
import io

import torch

from hvd.process_sets import global_process_set
from hvd.torch.mpi_ops import (allgather, broadcast_, broadcast_async_, rank,
                               size, synchronize)

try:
    import cloudpickle as _pickle
except ImportError:  # Debian has no python3-cloudpickle
    import pickle as _pickle


def broadcast_parameters(params, root_rank):
    """Broadcast parameters from root_rank to every other process, in place.

    params: a dict (``model.state_dict()``) or a list of parameters or of
    (name, parameter) pairs (``model.named_parameters()``)."""
    if isinstance(params, dict):
        params = sorted(params.items())
    elif isinstance(params, list):
        params = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError('invalid params of type: %s' % type(params))
    handles = [broadcast_async_(p, root_rank, name) for name, p in params]
    for handle in handles:
        synchronize(handle)


def broadcast_optimizer_state(optimizer, root_rank, model=None):
    """Broadcast an optimizer's state (its tensors in place, its scalars and
    the options of its parameter groups, e.g. the learning rate) from
    root_rank.  model: optional, to find sparse embeddings (a fresh optimizer
    is stepped once with zero gradients to create its state; the weights
    are left as they were)."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError('cannot broadcast torch.optim.LBFGS state')
    state_dict = optimizer.state_dict()

    sparse_params = []
    if model:
        for m in model.modules():
            if isinstance(m, torch.nn.modules.sparse.Embedding) and m.sparse:
                sparse_params.extend(id(p) for p in m.parameters())

    # A new optimizer has no state yet: step it once with zero gradients
    # so that every rank has the same structure to receive into.  That
    # step must not move the weights: weight decay (SGD's, AdamW's) would,
    # and on a resume, where only the root has loaded a state, the other
    # ranks would train on from weights of their own.  Their values are
    # put back after it (the zero gradients stay, as in Horovod).
    if len(state_dict['state']) == 0:
        kept = []
        for group in optimizer.param_groups:
            for p in group['params']:
                if p.requires_grad and id(p) not in state_dict['state']:
                    kept.append((p, p.detach().clone()))
                    p.grad = p.data.new(p.size()).zero_()
                    if isinstance(optimizer, torch.optim.SparseAdam) or \
                            (isinstance(optimizer, torch.optim.SGD) and
                             id(p) in sparse_params):
                        p.grad = p.grad.to_sparse()
        # A DistributedOptimizer's step() would allreduce (and block until
        # every rank steps): take the wrapped optimizer's step.
        if getattr(optimizer, '_hvd_collective_step', False):
            super(optimizer.__class__, optimizer).step()
        else:
            optimizer.step()
        with torch.no_grad():
            for p, value in kept:
                p.copy_(value)
        state_dict = optimizer.state_dict()

    if len(state_dict['state']) == 0:
        return  # a stateless optimizer

    params = []
    scalars = {}
    callbacks = {}
    occurrences = collections.defaultdict(int)

    def _state_setter(pid, name):
        def assign(v):
            state_dict['state'][pid][name] = v
        return assign

    def _option_setter(index, key):
        def assign(v):
            optimizer.param_groups[index][key] = v
        return assign

    for index, group in enumerate(state_dict['param_groups']):
        for key, value in group.items():
            if key == 'params':
                continue
            k = '%s.%d' % (key, index)
            scalars[k] = value
            callbacks[k] = _option_setter(index, key)
        for pid in group['params']:
            if pid not in state_dict['state']:
                continue  # no gradient, no state
            for name, p in state_dict['state'][pid].items():
                occurrences[name] += 1
                k = '%s.%d' % (str(name), occurrences[name])
                if torch.is_tensor(p):
                    params.append((k, p))
                else:
                    scalars[k] = p
                    callbacks[k] = _state_setter(pid, name)

    broadcast_parameters(params, root_rank)
    scalars = broadcast_object(scalars, root_rank)
    for k, p in scalars.items():
        callbacks[k](p)


def _dumps(obj):
    b = io.BytesIO()
    _pickle.dump(obj, b)
    return b.getvalue()


def broadcast_object(obj, root_rank=0, name=None,
                     process_set=global_process_set):
    """Serialize obj on root_rank and return it on every process of
    process_set (root_rank is a world rank)."""
    if name is None:
        name = type(obj).__name__
    if rank() == root_rank:
        data = _dumps(obj)
        t = torch.frombuffer(bytearray(data), dtype=torch.uint8) \
            if data else torch.empty(0, dtype=torch.uint8)
        sz = torch.IntTensor([t.shape[0]])
        broadcast_(sz, root_rank, name + '.sz', process_set)
    else:
        sz = torch.IntTensor([0])
        broadcast_(sz, root_rank, name + '.sz', process_set)
        t = torch.empty(int(sz[0]), dtype=torch.uint8)
    broadcast_(t, root_rank, name + '.t', process_set)
    if rank() != root_rank:
        obj = _pickle.loads(t.numpy().tobytes())
    return obj


def allgather_object(obj, name=None, process_set=global_process_set):
    """Serialize obj on every process and return the list of all of them,
    in rank order (of process_set)."""
    if name is None:
        name = type(obj).__name__
    data = _dumps(obj)
    t = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    sz = torch.IntTensor([t.shape[0]])
    sizes = allgather(sz, name=name + '.sz', process_set=process_set).tolist()
    gathered = allgather(t, name=name + '.t',
                         process_set=process_set).numpy().tobytes()
    out, off = [], 0
    for s in sizes:
        out.append(_pickle.loads(gathered[off:off + s]))
        off += s
    return out


__all__ = ['broadcast_parameters', 'broadcast_optimizer_state',
           'broadcast_object', 'allgather_object']
