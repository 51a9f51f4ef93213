"""hvd.torch.elastic: Horovod's horovod.torch.elastic on libhvd's elastic
training (hvd.elastic has the loop and doc/elastic.md the whole story).

    import horovod.torch as hvd
    hvd.init()
    ...
    @hvd.elastic.run
    def train(state):
        for state.epoch in range(state.epoch, epochs):
            for state.batch, (x, y) in enumerate(loader, state.batch):
                ...
                state.sampler.record_batch(state.batch, batch_size)
                state.commit()
            state.batch = 0
            state.sampler.set_epoch(state.epoch + 1)

    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler,
                                   epoch=0, batch=0)
    train(state)

TorchState's commit copies the model's and the optimizer's state_dict()
(and a sampler's and a learning-rate scheduler's) into the tensors of the
previous commit (Horovod deep-copies them anew), restore loads them back, sync broadcasts them from rank 0
(broadcast_parameters, broadcast_optimizer_state, broadcast_object); other
keyword arguments are ObjectState attributes.  ElasticSampler splits what
is left of the epoch, from a position that is the same on every rank, over
the ranks there are now.
"""

import copy
import math
import random

import torch
import torch.utils.data

from hvd import elastic as _elastic
from hvd.elastic import (HostUpdateResult, ObjectState, State,  # noqa: F401
                         elastic_enabled, epoch)
from hvd.exceptions import (ElasticError, HorovodInternalError,  # noqa: F401
                            HostsUpdatedInterrupt)
from hvd.torch import _engine
from hvd.torch.functions import (broadcast_object, broadcast_optimizer_state,
                                 broadcast_parameters)
from hvd.torch.mpi_ops import rank, size

# A new world starts its handles and unnamed-tensor counters afresh on
# every rank, newcomers included (their counters start at 0).
_elastic._reset_hooks.append(_engine.reset)


def run(func):
    """Decorator: func(state, ...) runs under the elastic loop: on a
    failure the state is restored and the world re-formed; processes that
    join at a commit get the state by sync (hvd.elastic.run_fn)."""
    return _elastic.run_fn(func, _elastic.reset)


class ElasticSampler(torch.utils.data.Sampler):
    """A sampler that splits the rest of the epoch over the current ranks.

    Like DistributedSampler, but it knows how many samples of the epoch
    have been processed (record_batch), globally, and after a change of
    the world splits only the remaining ones over the new ranks; kept in a
    TorchState, that position is committed, restored and synced with the
    rest, so every sample of the epoch is used once across a change.  As
    DistributedSampler does, the epoch's last round is padded with
    repeated samples when what remains does not divide by the number of
    ranks.

    dataset: of constant length; shuffle: a permutation per epoch
    (seed + epoch, the same on every rank).  Call record_batch after each
    batch and set_epoch at the END of an epoch (it clears the position).
    """

    def __init__(self, dataset, shuffle=True, seed=0):
        self.dataset = dataset
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed_num = 0
        self.num_replicas = 0
        self.rank = 0
        self.remaining_indices = []
        self.num_samples = 0
        self.total_size = 0
        self.reset()

    def set_epoch(self, epoch):
        """The next epoch: its own order, nothing processed yet."""
        self.epoch = epoch
        self.processed_num = 0
        self.reset()

    def record_batch(self, batch_idx, batch_size):
        """batch_size samples were processed on every rank."""
        self.processed_num += batch_size * self.num_replicas

    def load_state_dict(self, state_dict):
        self.epoch = state_dict['epoch']
        self.processed_num = state_dict['processed_num']
        self.reset()

    def state_dict(self):
        return dict(epoch=self.epoch, processed_num=self.processed_num)

    def reset(self):
        """Split what is left of the epoch over the world as it is now."""
        self.num_replicas = size()
        self.rank = rank()
        order = list(range(len(self.dataset)))
        if self.shuffle:
            # Horovod's order: random.Random(seed + epoch).shuffle
            random.Random(self.seed + self.epoch).shuffle(order)
        self.remaining_indices = order[self.processed_num:]
        self.num_samples = int(math.ceil(
            len(self.remaining_indices) / float(self.num_replicas)))
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self):
        indices = self.remaining_indices[:]
        indices += indices[:(self.total_size - len(indices))]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples


class StateHandler:
    """How TorchState keeps one kind of object: save (to host memory),
    restore, sync (from rank 0)."""

    def __init__(self, value):
        self.value = value

    def save(self):
        raise NotImplementedError()

    def restore(self):
        raise NotImplementedError()

    def sync(self):
        raise NotImplementedError()

    def set_value(self, value):
        self.value = value
        self.save()


def _copy_into(saved, value):
    """A copy of value (a state_dict: nested dicts, lists and tensors),
    written into the tensors of saved, the previous copy, where their
    shape, dtype and device still match: a commit then costs one memory
    copy of the state, without allocating (and faulting in) it anew."""
    if torch.is_tensor(value):
        if torch.is_tensor(saved) and saved.shape == value.shape and \
                saved.dtype == value.dtype and saved.device == value.device \
                and saved.layout == value.layout == torch.strided \
                and saved.data_ptr() != value.data_ptr():
            with torch.no_grad():
                saved.copy_(value)
            return saved
        return value.detach().clone()
    if isinstance(value, dict):
        old = saved if isinstance(saved, dict) else {}
        out = type(value)()
        for k, v in value.items():
            out[k] = _copy_into(old.get(k), v)
        if hasattr(value, '_metadata'):  # a module's: versions per layer
            out._metadata = copy.deepcopy(value._metadata)
        return out
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        old = saved if isinstance(saved, type(value)) and \
            len(saved) == len(value) else [None] * len(value)
        return type(value)(_copy_into(o, v) for o, v in zip(old, value))
    return copy.deepcopy(value)


class _StateDictHandler(StateHandler):
    """An object with state_dict() / load_state_dict(): commit copies the
    state_dict (the tensors into the previous copy's), restore loads it."""

    def __init__(self, value):
        super().__init__(value)
        self._saved = None
        self.save()

    def save(self):
        self._saved = _copy_into(self._saved, self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self._saved)


class ModelStateHandler(_StateDictHandler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(_StateDictHandler):
    # (restore: torch's load_state_dict deep-copies, so the saved copy
    # stays apart from the optimizer's state)
    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class LRSchedulerStateHandler(_StateDictHandler):
    def sync(self):
        self.value.load_state_dict(broadcast_object(self.value.state_dict()))


class SamplerStateHandler(_StateDictHandler):
    def sync(self):
        self.value.load_state_dict(broadcast_object(self.value.state_dict()))


def _scheduler_types():
    lr = torch.optim.lr_scheduler
    return tuple(t for t in (getattr(lr, 'LRScheduler', None),
                             getattr(lr, '_LRScheduler', None)) if t)


_handler_registry = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (_scheduler_types(), LRSchedulerStateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry():
    return _handler_registry


def set_handler_registry(registry):
    global _handler_registry
    _handler_registry = registry


def _get_handler(v):
    for types, cls in _handler_registry:
        if types and isinstance(v, types):
            return cls(v)
    return None


class TorchState(ObjectState):
    """The state of a PyTorch training process: model, optimizer and any
    other keyword arguments (schedulers and ElasticSamplers get handlers
    of their own, everything else is an ObjectState attribute).  Horovod's
    TorchState(model, optimizer, **kwargs)."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(dict(model=model, optimizer=optimizer))
        self._handlers = {}
        rest = {}
        for k, v in kwargs.items():
            h = _get_handler(v)
            if h is not None:
                self._handlers[k] = h
            else:
                rest[k] = v
        for name, handler in self._handlers.items():
            setattr(self, name, handler.value)
        super().__init__(bcast_object=broadcast_object, get_rank=rank,
                         **rest)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        # The model last: syncing a newcomer's fresh optimizer steps it
        # once with zero gradients to make its state, which moves the
        # weights where there is weight decay.
        handlers = list(self._handlers.values())
        for handler in sorted(handlers, key=lambda h: isinstance(
                h, ModelStateHandler)):
            handler.sync()
        super().sync()

    def reset(self):
        # The sampler splits the rest of the epoch over the new world.
        for handler in self._handlers.values():
            if isinstance(handler, SamplerStateHandler):
                handler.value.reset()

    def __setattr__(self, name, value):
        if hasattr(self, name) and name in getattr(self, '_handlers', {}):
            self._handlers[name].set_value(value)
        super().__setattr__(name, value)


__all__ = ['run', 'TorchState', 'ObjectState', 'ElasticSampler', 'State',
           'StateHandler', 'HorovodInternalError', 'HostsUpdatedInterrupt',
           'ElasticError', 'get_handler_registry', 'set_handler_registry',
           'HostUpdateResult', 'elastic_enabled', 'epoch']
