"""DistributedOptimizer: Horovod's wrapper around a torch optimizer.

A hook on each parameter's gradient accumulator starts that gradient's
allreduce (allreduce_async_, in place) the moment backward has produced it,
so communication overlaps the rest of the backward pass; step() (or
synchronize()) waits for them and then runs the wrapped optimizer's step.
The returned object is an instance of a class made on the fly from the
wrapped optimizer's class (same name, isinstance still true), as Horovod's.

With op=Adasum on more than one process, the update itself is reduced
instead of the gradient (Horovod's delta optimizer): each parameter's own
optimizer step runs in its hook, and step() combines the deltas with
Adasum.
"""

import os
import warnings
from contextlib import contextmanager

import torch

from hvd.process_sets import global_process_set
from hvd.torch.compression import Compression
from hvd.torch.functions import broadcast_object
from hvd.torch.mpi_ops import (Adasum, Average, allreduce_async_,
                               grouped_allreduce_async_, rocm_built, size,
                               sparse_allreduce_async, synchronize)


def _split_list(items, n):
    """items cut into n runs of nearly equal length (the first ones longer)."""
    d, r = divmod(len(items), n)
    return [items[i * d + min(i, r):(i + 1) * d + min(i + 1, r)]
            for i in range(n)]


def _find_duplicates(names):
    seen, dups = set(), set()
    for n in names:
        if n in seen:
            dups.add(n)
        seen.add(n)
    return dups


def _named_parameters(optimizer, named_parameters, fmt):
    if named_parameters is not None:
        named_parameters = list(named_parameters)
    else:
        named_parameters = [(fmt(i, j), v)
                            for i, group in enumerate(optimizer.param_groups)
                            for j, v in enumerate(group['params'])]
    if any(not isinstance(p, tuple) for p in named_parameters):
        raise ValueError('named_parameters should be a sequence of '
                         'tuples (name, parameter), usually produced by '
                         'model.named_parameters().')
    dups = _find_duplicates([k for k, _ in named_parameters])
    if dups:
        raise ValueError('Parameter names in named_parameters must be unique. '
                         'Found duplicates: %s' % ', '.join(sorted(dups)))
    all_ids = {id(v) for group in optimizer.param_groups
               for v in group['params']}
    named_ids = {id(v) for _, v in named_parameters}
    unnamed = all_ids - named_ids
    if unnamed:
        raise ValueError('named_parameters was specified, but one or more '
                         'model parameters were not named. Python object '
                         'ids: %s' % ', '.join(str(i) for i in unnamed))
    return named_parameters


def _grad_accumulator(p):
    # The AccumulateGrad node of p: its hooks run once p.grad holds the
    # new gradient (torch 1.13 and 2.x alike).
    with torch.enable_grad():
        return p.expand_as(p).grad_fn.next_functions[0][0]


def _pass_done(opt, p):
    """A gradient hook's count of backward passes: True when p's gradient
    is due for its allreduce (the backward_passes_per_step-th pass)."""
    if p in opt._handles and opt._handles[p][0] is not None:
        if opt._allreduce_delay[p] <= 0:
            raise AssertionError(
                'Gradients were computed more than '
                'backward_passes_per_step times before call '
                'to step(). Increase backward_passes_per_step to '
                'accumulate gradients locally.')
    assert not p.grad.requires_grad
    assert opt._allreduce_delay[p] > 0
    opt._allreduce_delay[p] -= 1
    return opt._allreduce_delay[p] == 0


class _DistributedOptimizer(torch.optim.Optimizer):
    # step() collective; broadcast_optimizer_state steps the wrapped one
    _hvd_collective_step = True

    def __init__(self, params, named_parameters, compression,
                 backward_passes_per_step=1, op=Average,
                 gradient_predivide_factor=1.0, groups=None,
                 sparse_as_dense=False, process_set=global_process_set):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        named_parameters = _named_parameters(
            self, named_parameters,
            lambda i, j: 'allreduce.noname.%d.%d' % (i, j))
        self._parameter_names = {v: k for k, v in sorted(
            named_parameters, key=lambda kv: kv[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: self.backward_passes_per_step
                                 for _, v in named_parameters}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True

        if groups is not None:
            if not (isinstance(groups, list) or groups > 0):
                raise ValueError('groups should be a non-negative integer or '
                                 'a list of list of torch.Tensor.')
            if isinstance(groups, list):
                seen = set()
                for group in groups:
                    for p in group:
                        if not isinstance(p, torch.Tensor):
                            raise ValueError(
                                'groups must consist of torch.Tensor.')
                        if id(p) in seen:
                            raise ValueError('A parameter can only appear '
                                             'once in groups.')
                        seen.add(id(p))
        self._groups = groups
        self._p_to_group = {}
        self._group_counts = {}

        if self.process_set.included() and \
                (size() > 1 or os.environ.get('HOROVOD_ELASTIC') == '1'):
            self._register_hooks()

    def load_state_dict(self, *args, **kwargs):
        self._handles = {}
        self._synchronized = False
        self._should_synchronize = True
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        # (hvd.elastic's restore comes here after a failed step: its
        # grouped allreduces start from nothing too)
        for group in self._group_counts:
            self._group_counts[group] = 0
        super(self.__class__, self).load_state_dict(*args, **kwargs)

    @staticmethod
    def find_duplicates(lst):
        return _find_duplicates(lst)

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step

    def _register_hooks(self):
        if self._groups is not None:
            p_list = [p for group in self.param_groups
                      for p in group['params'] if p.requires_grad]
            # Every rank must form the same groups in the same order: take
            # rank 0's order of the parameter names.
            names = [self._parameter_names.get(p) for p in p_list]
            names = broadcast_object(names, root_rank=0,
                                     process_set=self.process_set)
            p_list = sorted(p_list, key=lambda p: names.index(
                self._parameter_names.get(p)))
            if isinstance(self._groups, list):
                p_groups = []
                grouped = set()
                listed = {id(p) for p in p_list}
                for group in self._groups:
                    p_groups.append([p for p in group if id(p) in listed])
                    grouped.update(id(p) for p in p_groups[-1])
                p_groups.extend([p] for p in p_list if id(p) not in grouped)
            else:
                p_groups = _split_list(p_list, self._groups)
            for group in (tuple(g) for g in p_groups):
                for p in group:
                    self._p_to_group[p] = group
                self._group_counts[group] = 0

        for group in self.param_groups:
            for p in group['params']:
                if p.requires_grad:
                    self._requires_update.add(p)
                    acc = _grad_accumulator(p)
                    acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(acc)

    def _allreduce_grad_async(self, p):
        if p.grad is None:
            # No gradient here (a branch this rank did not take), but the
            # other ranks may have one: contribute zeros.
            p.grad = p.data.new(p.size()).zero_()
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if self.sparse_as_dense:
                tensor = tensor.to_dense()
            else:
                return self._sparse_allreduce_grad_async(p, name)
        tensor_compressed, ctx = self._compression.compress(tensor)
        if self.op == Average:
            # The average divides by the set size after the sum; the
            # predivide factor splits it around the sum.
            prescale_factor = 1.0 / self.gradient_predivide_factor
            postscale_factor = self.gradient_predivide_factor
        else:
            prescale_factor = 1.0
            postscale_factor = 1.0
        handle = allreduce_async_(tensor_compressed, name=name, op=self.op,
                                  prescale_factor=prescale_factor,
                                  postscale_factor=postscale_factor,
                                  process_set=self.process_set)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, ps):
        name = self._parameter_names.get(ps[0])
        tensors_compressed, ctxs = zip(*[self._compression.compress(p.grad)
                                         for p in ps])
        handle = grouped_allreduce_async_(list(tensors_compressed), name=name,
                                          op=self.op,
                                          process_set=self.process_set)
        return handle, ctxs

    def _sparse_allreduce_grad_async(self, p, name):
        handle = sparse_allreduce_async(p.grad, name=name, op=self.op,
                                        process_set=self.process_set)
        return handle, None

    def _make_hook(self, p):
        def hook(*ignore):
            handle, ctx = None, None
            if _pass_done(self, p):
                if self._groups is not None:
                    group = self._p_to_group[p]
                    self._group_counts[group] += 1
                    if self._group_counts[group] == len(group):
                        handle, ctxs = self._grouped_allreduce_grad_async(
                            group)
                        self._handles[group] = (handle, ctxs)
                        for gp in group:
                            self._handles.pop(gp, None)
                        self._group_counts[group] = 0
                        return
                else:
                    handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        """Wait for every gradient's allreduce (starting those whose hook
        did not run) and write the results into the gradients."""
        if not self.process_set.included():
            self._synchronized = True
            return
        completed = set()
        for x in self._handles.keys():
            if isinstance(x, tuple):
                completed.update(x)
            else:
                completed.add(x)
        for p in self._requires_update - completed:
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if handle is None:
                self._handles[p] = self._allreduce_grad_async(p)
        try:
            self._wait_all()
        except BaseException:
            # A failed step (a peer died): forget its handles, so that the
            # next step - after hvd.elastic's reset and restore - starts as
            # if this one never ran.
            self._handles.clear()
            for p in self._allreduce_delay:
                self._allreduce_delay[p] = self.backward_passes_per_step
            raise
        self._handles.clear()
        self._synchronized = True

    def _wait_all(self):
        for p, (handle, ctx) in self._handles.items():
            if isinstance(p, tuple):
                outputs = synchronize(handle)
                for gp, output, gctx in zip(p, outputs, ctx):
                    self._allreduce_delay[gp] = self.backward_passes_per_step
                    gp.grad.set_(self._compression.decompress(output, gctx))
                if self._groups is not None and self._group_counts[p] != 0:
                    self._group_counts[p] = 0
            else:
                # a sparse allreduce gives a callable
                output = handle() if callable(handle) else \
                    synchronize(handle)
                self._allreduce_delay[p] = self.backward_passes_per_step
                if self._groups is not None:
                    group = self._p_to_group[p]
                    if self._group_counts[group] != 0:
                        self._group_counts[group] = 0
                if p.grad.is_sparse:
                    aggregated = self._compression.decompress(output, ctx)
                    if not aggregated.is_sparse:
                        aggregated = aggregated.to_sparse()
                    # sparse gradients have no set_()
                    p.grad.zero_().add_(aggregated)
                else:
                    p.grad.set_(self._compression.decompress(output, ctx))

    @contextmanager
    def skip_synchronize(self):
        """step() inside this context does not synchronize (for code that
        called synchronize() itself, e.g. to clip gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn('optimizer.step() called without '
                              'optimizer.skip_synchronize() context after '
                              'optimizer.synchronize(). This can cause '
                              'training slowdown. You may want to consider '
                              'using optimizer.skip_synchronize() context if '
                              'you use optimizer.synchronize() in your code.')
            self.synchronize()
        self._synchronized = False
        return super(self.__class__, self).step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError('optimizer.zero_grad() was called after '
                                 'loss.backward() but before optimizer.step() '
                                 'or optimizer.synchronize(). This is '
                                 'prohibited as it can cause a race '
                                 'condition.')
        return super(self.__class__, self).zero_grad(*args, **kwargs)


class _DistributedAdasumOptimizer(torch.optim.Optimizer):
    # step() collective; broadcast_optimizer_state steps the wrapped one
    _hvd_collective_step = True

    def __init__(self, params, named_parameters, compression,
                 backward_passes_per_step=1):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        named_parameters = _named_parameters(
            self, named_parameters, lambda i, j: 'allreduce.noname.%d' % j)
        self._parameter_names = {v: k for k, v in sorted(
            named_parameters, key=lambda kv: kv[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {v: self.backward_passes_per_step
                                 for _, v in named_parameters}
        self._handles = {}
        self._grad_accs = []
        self._requires_update = set()
        self._synchronized = False
        self._should_synchronize = True
        self._starting_models = {p: torch.zeros_like(p, requires_grad=False)
                                 for _, p in named_parameters}
        self._register_hooks()

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step

    def _register_hooks(self):
        for group in self.param_groups:
            for p in group['params']:
                if p.requires_grad:
                    p.grad = p.data.new(p.size()).zero_()
                    self._requires_update.add(p)
                    acc = _grad_accumulator(p)
                    acc.register_hook(self._make_hook(p))
                    self._grad_accs.append(acc)

    def _allreduce_grad_async(self, p):
        # The delta of this parameter's update: with start set to p, the
        # wrapped step computes p - lr*f(g); delta = that - start.  Only p
        # is stepped (the other parameters are hidden from the groups).
        name = self._parameter_names.get(p)
        start = self._starting_models[p]
        stashed = []
        for group in self.param_groups:
            stashed.append(group['params'])
            group['params'] = [p] if any(p is v for v in group['params']) \
                else []
        start.data.copy_(p)
        super(self.__class__, self).step()
        p.data.sub_(start)
        tensor_compressed, ctx = self._compression.compress(p)
        handle = allreduce_async_(tensor_compressed.data, name=name,
                                  op=Adasum)
        for params, group in zip(stashed, self.param_groups):
            group['params'] = params
        return handle, ctx

    def _make_hook(self, p):
        def hook(*ignore):
            handle, ctx = None, None
            if _pass_done(self, p):
                handle, ctx = self._allreduce_grad_async(p)
            self._handles[p] = (handle, ctx)
        return hook

    def synchronize(self):
        pass

    @contextmanager
    def skip_synchronize(self):
        raise AssertionError('Skipping synchronization is not supported when '
                             'using Adasum optimizer.')
        yield  # pragma: no cover

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()
        for p in self._requires_update - set(self._handles.keys()):
            self._handles[p] = self._allreduce_grad_async(p)
        for p, (handle, ctx) in list(self._handles.items()):
            if not handle:
                handle, ctx = self._allreduce_grad_async(p)
                self._handles[p] = (handle, ctx)
            delta = self._compression.decompress(synchronize(handle), ctx)
            start = self._starting_models[p]
            start.data.add_(delta.data)
            p.data.copy_(start)
            self._allreduce_delay[p] = self.backward_passes_per_step
        self._handles.clear()
        return loss

    def zero_grad(self, *args, **kwargs):
        if self._handles:
            raise AssertionError('optimizer.zero_grad() was called after '
                                 'loss.backward() but before optimizer.step() '
                                 'or optimizer.synchronize(). This is '
                                 'prohibited as it can cause a race '
                                 'condition.')
        return super(self.__class__, self).zero_grad(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None,
                         compression=Compression.none,
                         backward_passes_per_step=1, op=Average,
                         gradient_predivide_factor=1.0, num_groups=0,
                         groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wrap a torch optimizer so that gradients are allreduced (averaged by
    default) over process_set before each step, each gradient's allreduce
    starting as soon as backward produced it.

    named_parameters: (name, parameter) pairs naming the allreduces
    (``model.named_parameters()``); compression: Compression.none or fp16;
    backward_passes_per_step: local accumulation before each reduction;
    op: Average, Sum or Adasum; gradient_predivide_factor: with Average,
    gradients are scaled by 1/f before the sum and f/size after; groups: an
    int (that many groups of parameters, each reduced as one group) or a
    list of lists of parameters; sparse_as_dense: reduce sparse gradients
    as dense ones.  Call synchronize() to wait early (then step() inside
    skip_synchronize())."""
    if gradient_predivide_factor != 1.0:
        if rocm_built():
            raise ValueError('gradient_predivide_factor not supported yet '
                             'with ROCm')
        if op != Average:
            raise ValueError('gradient_predivide_factor not supported with '
                             'op != Average')
    if num_groups != 0:
        warnings.warn('Parameter `num_groups` has been replaced by `groups` '
                      'and will be removed in v0.23.0.', DeprecationWarning)
        if groups is None:
            groups = num_groups
    if backward_passes_per_step <= 0:
        raise ValueError('backward_passes_per_step must be > 0')
    if op != Adasum or size() == 1:
        cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
                   dict(_DistributedOptimizer.__dict__))
        return cls(optimizer.param_groups, named_parameters, compression,
                   backward_passes_per_step, op, gradient_predivide_factor,
                   groups, sparse_as_dense, process_set)
    if process_set != global_process_set:
        raise NotImplementedError('Adasum does not support non-global process '
                                  'sets yet.')
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedAdasumOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, compression,
               backward_passes_per_step)
