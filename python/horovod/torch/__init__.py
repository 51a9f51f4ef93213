"""horovod.torch is hvd.torch (the module itself, not a copy)."""

import sys

import hvd.torch

sys.modules[__name__] = hvd.torch
