"""Elastic training of an unchanged Horovod script (elastic_prog.py) under
hvdrun --elastic: uninterrupted; one rank SIGKILLed mid-training, rank 1
or rank 0 (the survivors finish at size 2 with the accuracy of the
uninterrupted run within ACC_TOL, every sample of every epoch seen
exactly once, nobody left behind, no hang); below HOROVOD_ELASTIC_MIN_SIZE (ElasticError on the
survivors); and a second hvdrun joining a running one (growing: the
newcomer starts from the survivors' model and optimizer state, bit for
bit: SHA-256 of their bytes).

This file runs in ONE pytest process (tests/python/elastic.sh), which
launches the trainings itself; it is not part of the collective suites.
"""

import os
import signal
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = os.path.join(HERE, 'elastic_prog.py')
HVDRUN = os.environ.get('HVD_TEST_HVDRUN', '')
# The uninterrupted run trains 3 epochs at size 3 (global batch 48); a run
# that loses a rank trains the rest at size 2 (global batch 32, the
# learning rate scaled by the reset callback): a different trajectory to
# the same optimum.  Measured: 0.896 (size 3), 0.897 (size 2 throughout),
# 0.893-0.910 with the kill at step 50.
ACC_TOL = float(os.environ.get('ELASTIC_ACC_TOL', '0.03'))
LIMIT = 240  # seconds one training may take (ranks import torch)
NTRAIN = 1920

pytestmark = pytest.mark.skipif(
    not os.access(HVDRUN, os.X_OK),
    reason='hvdrun not built (HVD_TEST_HVDRUN=%r)' % HVDRUN)


def _env(**extra):
    env = dict(os.environ)
    for var in ('HVD_TEST_RESULTS', 'HVD_TEST_NP', 'HOROVOD_ELASTIC',
                'HOROVOD_ELASTIC_DIR', 'HOROVOD_DYNAMIC_PROCESS_SETS'):
        env.pop(var, None)
    env.update(extra)
    return env


class Run:
    """One hvdrun of elastic_prog.py in the background; out: its stdout."""

    def __init__(self, tmp, label, np, step_ms=0, **env):
        self.out = str(tmp / label)
        self.err = self.out + '.err'
        self.proc = subprocess.Popen(
            [HVDRUN, '--elastic', '-np', str(np), sys.executable, PROG, '3'],
            stdout=open(self.out, 'w'), stderr=open(self.err, 'w'),
            env=_env(ELASTIC_STEP_MS=str(step_ms), **env))

    def lines(self, word):
        with open(self.out) as f:
            return [ln.split() for ln in f if ln.startswith(word + ' ')]

    def wait_for(self, word, pred, timeout=LIMIT):
        end = time.time() + timeout
        while time.time() < end:
            for ln in self.lines(word):
                if pred(ln):
                    return ln
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        pytest.fail('%s: no %r line came (%s)' % (self.out, word,
                                                   self.tail()))

    def pid(self, rank):
        ln = self.wait_for('start', lambda ln: int(ln[2]) == rank)
        return int(ln[6])

    def finish(self):
        try:
            return self.proc.wait(LIMIT)
        except subprocess.TimeoutExpired:
            where = _stacks()
            self.proc.kill()
            self.proc.wait()
            pytest.fail('%s: hung (killed after %d s): %s\n%s'
                        % (self.out, LIMIT, self.tail(), where))

    def tail(self):
        with open(self.err) as f:
            return ''.join(f.readlines()[-15:])

    def done(self):
        """{rank: (size, acc)} from the done lines."""
        return {int(ln[2]): (int(ln[4]), float(ln[10]))
                for ln in self.lines('done')}

    def epochs(self):
        """[(epoch, once, extra, missed)] from rank 0's epoch lines."""
        return [(int(ln[1]), int(ln[5]), int(ln[9]), int(ln[11]))
                for ln in self.lines('epoch')]


def _children(pid):
    kids = []
    try:
        for task in os.listdir('/proc/%d/task' % pid):
            with open('/proc/%d/task/%s/children' % (pid, task)) as f:
                kids += [int(k) for k in f.read().split()]
    except OSError:
        pass
    return kids


def _stacks():
    """Where every rank of every hvdrun this test started waits (gdb,
    where it is installed): what a hang's report needs."""
    gdb = shutil.which('gdb')
    if not gdb:
        return '(no gdb: no stacks)'
    text = []
    for kid in _children(os.getpid()):
        for rank in _children(kid):
            try:
                bt = subprocess.run(
                    [gdb, '-q', '-batch', '-nx', '-p', str(rank),
                     '-ex', 'thread apply all bt 25'],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    text=True, timeout=60).stdout
            except subprocess.TimeoutExpired:
                bt = '(gdb timed out)'
            text.append('=== hvdrun %d, rank pid %d\n' % (kid, rank) +
                        '\n'.join(ln for ln in bt.splitlines()
                                  if ln.startswith(('#', 'Thread'))))
    return '\n'.join(text) or '(no ranks alive)'


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
    r = Run(tmp_path_factory.mktemp('elastic'), 'ref', 3)
    rc = r.finish()
    return r, rc


def test_uninterrupted(reference):
    r, rc = reference
    assert rc == 0, r.tail()
    done = r.done()
    assert sorted(done) == [0, 1, 2]
    assert {s for s, _ in done.values()} == {3}
    assert len({a for _, a in done.values()}) == 1, done
    assert r.epochs() == [(e, NTRAIN, 0, 0) for e in range(3)]
    assert r.lines('reset') == []
    # every rank started from rank 0's state
    assert len({ln[6] for ln in r.lines('enter')}) == 1


# rank 0 too: the coordinator of the agreement and the root of the sync
@pytest.mark.parametrize('victim', [1, 0])
def test_kill_one_rank(reference, tmp_path, victim):
    ref, ref_rc = reference
    assert ref_rc == 0
    ref_acc = ref.done()[0][1]
    r = Run(tmp_path, 'kill', 3, step_ms=30)
    pids = [r.pid(k) for k in range(3)]
    # mid-epoch 1 (an epoch is 40 steps at size 3)
    r.wait_for('step', lambda ln: int(ln[1]) >= 50)
    t_kill = time.time()
    os.kill(pids[victim], signal.SIGKILL)
    rc = r.finish()
    assert rc == 0, r.tail()
    done = r.done()
    assert sorted(done) == [0, 1], done  # renumbered 0 and 1
    assert {s for s, _ in done.values()} == {2}
    acc = done[0][1]
    assert abs(acc - ref_acc) <= ACC_TOL, (acc, ref_acc)
    # The rollback to the last commit and the global sampler position:
    # every sample of every epoch exactly once, across the change too.
    assert r.epochs() == [(e, NTRAIN, 0, 0) for e in range(3)]
    assert len(r.lines('reset')) == 2
    assert len({ln[6] for ln in r.lines('enter') if ln[4] == '2'}) == 1
    assert not any(_alive(p) for p in pids)
    # the survivors recover from the failure: they say so in a warning,
    # not in an error
    with open(r.err) as f:
        said = f.read()
    assert '] error:' not in said, said[-3000:]
    first = [float(ln[6][2:]) for ln in r.lines('step') if ln[5] == '2']
    assert first
    sys.stderr.write('elastic: kill of rank %d -> first step at size 2: '
                     '%.3f s, accuracy %.4f (uninterrupted %.4f)\n'
                     % (victim, first[0] - t_kill, acc, ref_acc))


def test_grow(reference, tmp_path):
    rdv = str(tmp_path / 'rdv')
    # From step 10 the two wait for a third (ELASTIC_GROW_TO): a fixed
    # time to train on (10 s at 60 ms a step) was not always enough for
    # the newcomer's Python and torch to start under make -j2 distcheck.
    a = Run(tmp_path, 'grow', 2, step_ms=30, HOROVOD_ELASTIC_DIR=rdv,
            ELASTIC_GROW_TO='3')
    pids = [a.pid(k) for k in range(2)]
    a.wait_for('step', lambda ln: int(ln[1]) >= 10)
    b = Run(tmp_path, 'grow.b', 1, step_ms=30, HOROVOD_ELASTIC_DIR=rdv)
    rc_b = b.finish()
    rc_a = a.finish()
    assert (rc_a, rc_b) == (0, 0), a.tail() + b.tail()
    new = b.lines('start')
    assert [ln[2:5] for ln in new] == [['2', 'size', '3']]
    # The newcomer entered train() with the survivors' model and optimizer
    # state, bit for bit (momentum buffers included), and all three
    # finished at size 3 with the same weights.
    enters = [ln for ln in a.lines('enter') + b.lines('enter')
              if ln[4] == '3']
    assert sorted(ln[2] for ln in enters) == ['0', '1', '2']
    assert len({ln[6] for ln in enters}) == 1, enters
    done = a.done()
    done.update(b.done())
    assert sorted(done) == [0, 1, 2]
    assert {s for s, _ in done.values()} == {3}
    assert len({acc for _, acc in done.values()}) == 1, done
    # Nothing missed; at most the padding of the last round at size 3
    # (what remained did not divide by 3) seen twice.
    eps = a.epochs()
    assert [e for e, _, _, _ in eps] == [0, 1, 2]
    assert all(missed == 0 and extra <= 2 and once + extra == NTRAIN
               for _, once, extra, missed in eps), eps
    assert len(a.lines('reset')) == 2 and b.lines('reset') == []
    assert not any(_alive(p) for p in pids)


def test_too_few_ranks(tmp_path):
    # Below HOROVOD_ELASTIC_MIN_SIZE the unchanged script's run loop
    # raises ElasticError (HVD-5010) on both survivors: they exit, nobody
    # hangs or trains on.
    r = Run(tmp_path, 'min', 3, step_ms=30, HOROVOD_ELASTIC_MIN_SIZE='3')
    pids = [r.pid(k) for k in range(3)]
    r.wait_for('step', lambda ln: int(ln[1]) >= 20)
    os.kill(pids[2], signal.SIGKILL)
    rc = r.finish()
    with open(r.err) as f:
        err = f.read()
    assert rc == 1, err[-2000:]
    assert err.count('hvd.exceptions.ElasticError: HVD-5010') == 2, \
        err[-2000:]
    assert 'fewer than HOROVOD_ELASTIC_MIN_SIZE=3' in err
    assert r.done() == {}
    assert not any(_alive(p) for p in pids)


def test_stale_process_sets(tmp_path):
    """Process sets made before a re-forming (pset_reform_prog.py): using
    one raises a clear error on every survivor, a set made in the reset
    callback (with an id an old one had) and an old object registered
    again work."""
    out = str(tmp_path / 'psets')
    proc = subprocess.Popen(
        [HVDRUN, '--elastic', '-np', '3', sys.executable,
         os.path.join(HERE, 'pset_reform_prog.py')],
        stdout=open(out, 'w'), stderr=open(out + '.err', 'w'),
        env=_env(HOROVOD_DYNAMIC_PROCESS_SETS='1'))
    try:
        rc = proc.wait(LIMIT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail('hung (killed after %d s)' % LIMIT)
    with open(out) as f:
        text = f.read()
    with open(out + '.err') as f:
        err = f.readlines()[-15:]
    assert rc == 0, text + ''.join(err)
    assert 'FAILED' not in text, text
    for r in (0, 1):
        assert 'done rank %d size 2' % r in text, text + ''.join(err)
        assert 'ok rank %d allreduce over a raises' % r in text, text
