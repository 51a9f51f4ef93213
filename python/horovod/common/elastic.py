"""horovod.common.elastic is hvd.elastic (State, ObjectState, run_fn)."""

import sys

import hvd.elastic

sys.modules[__name__] = hvd.elastic
