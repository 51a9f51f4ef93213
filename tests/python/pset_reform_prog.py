"""Process sets across a re-forming (tests/python/test_elastic.py,
test_stale_process_sets): 3 ranks under hvdrun --elastic with dynamic
process sets add a = [1, 2] (id 1) and b = [1] (id 2) and check an
allreduce over each; rank 2 SIGKILLs itself at step 10.  The reset
callback adds c = [0], which libhvd numbers 1 again (its table starts
over).  After the loop, at size 2, every rank checks that using a or b
(size(), rank(), included(), an allreduce, a broadcast) raises ValueError
saying the world re-formed and to create the set again in a reset
callback; that c works with the right sum; and that b passed to
add_process_set() again is registered for the new world and sums right.

Output: "start rank R size S pid P", "ok NAME" per check (rank 0 with
"rank 0"), "done rank R size S" at the end; exit 1 on the first failure.
"""

import os
import signal
import sys

import torch

import horovod.torch as hvd

hvd.init()
print('start rank %d size %d pid %d' % (hvd.rank(), hvd.size(), os.getpid()),
      flush=True)


def sum_over(ps, ranks):
    """rank + 1 summed over ps on its members; None elsewhere."""
    if hvd.rank() not in ranks:
        return None
    t = hvd.allreduce(torch.tensor([float(hvd.rank() + 1)]), op=hvd.Sum,
                      process_set=ps, name='ps%s' % ps.process_set_id)
    return t.item()


def check(cond, what):
    if not cond:
        print('FAILED rank %d: %s' % (hvd.rank(), what), flush=True)
        sys.exit(1)
    print('ok rank %d %s' % (hvd.rank(), what), flush=True)


a = hvd.add_process_set([1, 2])
b = hvd.add_process_set([1])
check(a.process_set_id == 1 and b.process_set_id == 2, 'ids before')
s = sum_over(a, [1, 2])
check(s in (None, 5.0), 'sum over a before (%s)' % s)
s = sum_over(b, [1])
check(s in (None, 2.0), 'sum over b before (%s)' % s)

fresh = {}


def on_reset():
    fresh['c'] = hvd.add_process_set([0])


state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, step=0)
state.register_reset_callbacks([on_reset])


@hvd.elastic.run
def train(state):
    while state.step < 30:
        if state.step == 10 and hvd.size() == 3 and hvd.rank() == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        hvd.allreduce(torch.ones(1), name='step')
        state.step += 1
        state.commit()


train(state)
check(hvd.size() == 2 and hvd.elastic.epoch() == 1, 'size 2 at epoch 1')


def raises_stale(fn):
    try:
        fn()
    except ValueError as e:
        msg = str(e)
        return ('re-formed' in msg and 'reset callback' in msg and
                'epoch 0 -> 1' in msg)
    return False


for name, ps in (('a', a), ('b', b)):
    check(ps.process_set_id is None, '%s has no id' % name)
    check(raises_stale(ps.size), '%s.size() raises' % name)
    check(raises_stale(ps.rank), '%s.rank() raises' % name)
    check(raises_stale(ps.included), '%s.included() raises' % name)
    check(raises_stale(lambda: hvd.allreduce(torch.ones(1), process_set=ps)),
          'allreduce over %s raises' % name)
    check(raises_stale(lambda: hvd.broadcast(torch.ones(1), 0,
                                             process_set=ps)),
          'broadcast over %s raises' % name)
c = fresh['c']
check(c.process_set_id == 1, 'c took id 1 (a had it)')
s = sum_over(c, [0])
check(s in (None, 1.0), 'sum over c (%s)' % s)
hvd.add_process_set(b)
check(b.process_set_id == 2 and b.size() == 1, 'b registered again')
s = sum_over(b, [1])
check(s in (None, 2.0), 'sum over b again (%s)' % s)
print('done rank %d size %d' % (hvd.rank(), hvd.size()), flush=True)
hvd.shutdown()
