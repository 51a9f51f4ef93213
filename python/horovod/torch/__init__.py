"""horovod.torch is hvd.torch (the module itself, not a copy), and so are
its submodules: `from horovod.torch.mpi_ops import allreduce` must not
load a second copy of hvd.torch.mpi_ops with handles of its own."""

import importlib
import sys

import hvd.torch

for _sub in ('mpi_ops', 'optimizer', 'functions', 'compression',
             'sync_batch_norm', 'checkpoint', 'elastic'):
    sys.modules[__name__ + '.' + _sub] = importlib.import_module(
        'hvd.torch.' + _sub)
sys.modules[__name__] = hvd.torch
