"""Init, ranks, probes, timeline, the compatibility package."""

import json
import os

import pytest
import torch


def test_ranks(hvd):
    r, n = hvd.rank(), hvd.size()
    got = hvd.allgather(torch.tensor([[r, hvd.local_rank(), hvd.local_size(),
                                       hvd.cross_rank(), hvd.cross_size()]]))
    assert 0 <= r < n
    assert hvd.is_initialized()
    assert got[:, 0].tolist() == list(range(n))
    # every rank knows the same layout
    for row in got.tolist():
        assert 0 <= row[1] < row[2]
        assert 0 <= row[3] < row[4]
    assert sum(1 for row in got.tolist() if row[1] == 0) == \
        max(row[4] for row in got.tolist() if row[1] == 0)


def test_rank_matches_launcher(hvd):
    for var in ('RANK', 'OMPI_COMM_WORLD_RANK', 'SLURM_PROCID'):
        if var in os.environ:
            assert int(os.environ[var]) == hvd.rank(), var
    for var in ('WORLD_SIZE', 'OMPI_COMM_WORLD_SIZE', 'SLURM_NTASKS'):
        if var in os.environ:
            assert int(os.environ[var]) == hvd.size(), var


def test_probes(hvd):
    assert hvd.mpi_built() is False
    assert hvd.mpi_enabled() is False
    assert hvd.mpi_threads_supported() is True
    assert hvd.gloo_built() is False and hvd.gloo_enabled() is False
    assert hvd.rocm_built() is False
    assert hvd.ddl_built() is False and hvd.ccl_built() is False
    assert isinstance(hvd.cuda_built(), bool)
    assert isinstance(hvd.nccl_built(), int)
    # the truth about this build: config.h of the build tree
    cfg = os.path.join(os.environ.get('top_builddir', ''), 'config.h')
    if os.path.exists(cfg):
        cuda = '#define HVD_HAVE_CUDA 1' in open(cfg).read()
        assert hvd.cuda_built() == cuda
        assert (hvd.nccl_built() > 0) == cuda
    assert hvd.is_homogeneous() in (True, False)


def test_op_values(hvd):
    # Horovod's numbering (scripts print and compare them)
    assert (hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max,
            hvd.Product) == (0, 1, 2, 3, 4, 5)


def test_init_twice_is_noop(hvd):
    r = hvd.rank()
    hvd.init()
    assert hvd.rank() == r and hvd.is_initialized()


def test_init_subset_comm_refused(hvd):
    if hvd.size() == 1:
        pytest.skip('needs 2 ranks')
    # a list naming every rank is the world: accepted
    hvd.init(comm=list(range(hvd.size())))
    assert hvd.is_initialized()


def test_timeline(hvd, tmp_path_factory):
    d = os.environ['HVD_TEST_RESULTS']
    path = os.path.join(d, 'timeline.json')
    hvd.start_timeline(path)
    hvd.allreduce(torch.ones(4), name='timeline.t')
    hvd.stop_timeline()
    hvd.barrier()
    if hvd.rank() == 0:
        events = json.load(open(path))
        assert any('timeline.t' in json.dumps(e) for e in events)


def test_compat_package(hvd):
    import horovod.torch as h
    import hvd.torch as t
    assert h is t
    assert h.allreduce is t.allreduce
    from horovod.torch import DistributedOptimizer  # noqa: F401
    from horovod.common.exceptions import HorovodInternalError
    assert HorovodInternalError is t.HorovodInternalError


def test_handles_are_ints(hvd):
    h = hvd.allreduce_async(torch.ones(2), name='handles.int')
    assert isinstance(h, int)
    out = hvd.synchronize(h)
    assert out.tolist() == [1.0, 1.0]
    assert hvd.synchronize(h) is None  # as Horovod: unknown handle
    assert hvd.poll(h) is True


def test_fast_path(hvd):
    from hvd import _lib
    want = os.environ.get('HVD_FAST', '')
    if want == '0':
        assert _lib.fast is None  # the ctypes path is under test
    elif want:
        assert _lib.fast is not None, 'hvd._fast did not load from ' + want


def test_compat_never_shadows(hvd, tmp_path):
    """A Horovod the user installed wins over the compatibility package,
    wherever it is on sys.path."""
    import subprocess
    import sys
    import hvd as core
    ours = os.path.dirname(os.path.dirname(os.path.abspath(core.__file__)))
    fake = tmp_path / 'site'
    (fake / 'horovod').mkdir(parents=True)
    (fake / 'horovod' / '__init__.py').write_text('REAL = True\n')
    code = ('import warnings; warnings.simplefilter("ignore"); '
            'import horovod; print(getattr(horovod, "REAL", False))')
    env = dict(os.environ, PYTHONPATH='%s:%s' % (ours, fake))
    env.pop('HVD_HOROVOD_COMPAT', None)
    out = subprocess.run([sys.executable, '-c', code], env=env,
                         capture_output=True, text=True, timeout=60)
    forced = subprocess.run([sys.executable, '-c', code],
                            env=dict(env, HVD_HOROVOD_COMPAT='1'),
                            capture_output=True, text=True, timeout=60)
    alone = subprocess.run([sys.executable, '-c', code],
                           env=dict(env, PYTHONPATH=ours),
                           capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == 'True', out.stderr
    assert forced.stdout.strip() == 'False', forced.stderr
    assert alone.stdout.strip() == 'False', alone.stderr


def test_compat_two_copies(hvd, tmp_path):
    """Two copies of the compatibility package on sys.path (an installed
    slurm-horovod and a source tree) take each other for no Horovod: the
    first is used, without a warning, and a real Horovod behind both still
    wins.  (Each took the other for a Horovod and imported it, without
    end: RecursionError.)"""
    import shutil
    import subprocess
    import sys
    import hvd as core
    ours = os.path.dirname(os.path.dirname(os.path.abspath(core.__file__)))
    copy = tmp_path / 'copy'
    shutil.copytree(os.path.join(ours, 'horovod'), copy / 'horovod',
                    ignore=shutil.ignore_patterns('__pycache__'))
    fake = tmp_path / 'site'
    (fake / 'horovod').mkdir(parents=True)
    (fake / 'horovod' / '__init__.py').write_text('REAL = True\n')
    code = ('import horovod; '
            'print(getattr(horovod, "REAL", False), horovod.__file__)')
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE='1')
    env.pop('HVD_HOROVOD_COMPAT', None)
    runs = (([ours, copy], 'False', str(ours)),
            ([copy, ours], 'False', str(copy)),
            ([ours, copy, fake], 'True', str(fake)))
    for path, real, where in runs:
        args = [sys.executable] + ([] if real == 'True' else ['-W', 'error'])
        out = subprocess.run(
            args + ['-c', code],
            env=dict(env, PYTHONPATH=':'.join(str(p) for p in path)),
            capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr[-2000:]
        got, origin = out.stdout.split()
        assert got == real, (path, out.stdout)
        assert origin.startswith(where), (path, origin)


def test_compat_submodules(hvd):
    """horovod.torch's submodules are hvd.torch's (one handle map)."""
    import horovod.torch.mpi_ops as m
    from horovod.torch.optimizer import DistributedOptimizer
    import hvd.torch.mpi_ops as ours
    assert m is ours
    assert DistributedOptimizer is hvd.DistributedOptimizer
    h = m.allreduce_async(torch.ones(1), name='compat.sub')
    assert hvd.synchronize(h).tolist() == [1.0]


def test_elastic_there(hvd):
    # (was refused before elastic training; test_elastic_api.py has more)
    import horovod.torch.elastic as e
    assert e is hvd.elastic and isinstance(hvd.elastic.TorchState, type)
    assert callable(e.run) and callable(e.ElasticSampler)
