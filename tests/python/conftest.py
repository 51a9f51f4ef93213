"""pytest plugin for the Python binding's tests (tests/python/).

Every rank of a launch (hvdrun -np N, mpirun, srun) runs the same pytest
session over the same files, so each test is a collective: the ranks run
it together.  Horovod is initialized once per session, with static process
sets for the tests of process sets, and shut down at the end.

Results are per rank: each test's outcome goes to
$HVD_TEST_RESULTS/rank<R>.jsonl as it finishes, and tests/python/tapmerge.py
turns the files of all ranks into one TAP stream after the launch (a test
passes when it passed on every rank; a rank that died leaves its remaining
tests without a result, which fails them).  Debian has no pytest-tap.

Tests call collectives before they assert, so that a failing assertion on
one rank does not leave the others waiting in a collective.
"""

import json
import os
import sys
import time

import pytest

_results = None


def _rank():
    for var in ('PMIX_RANK', 'OMPI_COMM_WORLD_RANK', 'SLURM_PROCID'):
        if os.environ.get(var, '').isdigit():
            return int(os.environ[var])
    return 0


def pytest_configure(config):
    global _results
    d = os.environ.get('HVD_TEST_RESULTS')
    if d:
        _results = open(os.path.join(d, 'rank%d.jsonl' % _rank()), 'w',
                        buffering=1)


def pytest_collection_finish(session):
    if _results:
        _results.write(json.dumps({'plan': [i.nodeid for i in session.items]})
                       + '\n')


_outcomes = {}


def pytest_runtest_logreport(report):
    o = _outcomes.setdefault(report.nodeid, {'outcome': 'passed', 'msg': ''})
    if report.failed:
        o['outcome'] = 'failed'
        o['msg'] += '%s: %s\n' % (report.when, report.longreprtext[-3000:])
    elif report.skipped and o['outcome'] == 'passed':
        o['outcome'] = 'skipped'
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) \
            else str(report.longrepr)
        o['msg'] = reason.replace('Skipped: ', '')
    if report.when == 'teardown' and _results:
        _results.write(json.dumps(dict(id=report.nodeid, **o)) + '\n')


# ------------------------------------------------------------ fixtures

@pytest.fixture(scope='session', autouse=True)
def horovod():
    import hvd.torch as hvd
    sets = []
    n = _world_size()
    if n >= 2:
        sets = [hvd.ProcessSet(list(range(0, n, 2))),
                hvd.ProcessSet(list(range(1, n, 2)))]
    if n >= 3:
        sets.append(hvd.ProcessSet([0, 1]))
    hvd.init(process_sets=sets)
    hvd._test_sets = sets
    t0 = time.time()
    yield hvd
    hvd.shutdown()
    sys.stderr.write('rank %d: session %.1f s\n' % (_rank(), time.time() - t0))


def _world_size():
    for var in ('PMIX_SIZE', 'OMPI_COMM_WORLD_SIZE', 'SLURM_NTASKS',
                'WORLD_SIZE', 'HVD_TEST_NP'):
        if os.environ.get(var, '').isdigit():
            return int(os.environ[var])
    return 1


@pytest.fixture
def hvd(horovod):
    return horovod
