"""mpi4py: hvd.init(comm) and process sets from communicators (under
mpirun only)."""

import os

import pytest
import torch

pytestmark = pytest.mark.skipif('OMPI_COMM_WORLD_SIZE' not in os.environ,
                                reason='needs mpirun (mpi4py communicators)')


def test_init_with_comm_and_comm_sets(hvd):
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    sub = comm.Split(color=comm.rank % 2, key=comm.rank)
    ps = hvd.ProcessSet(sub)
    hvd.shutdown()
    hvd.init(comm, process_sets=[ps])
    try:
        assert hvd.size() == comm.size and hvd.rank() == comm.rank
        assert ps.ranks == list(range(comm.rank % 2, comm.size, 2))
        assert ps.process_set_id is not None and ps.included()
        assert hvd.global_process_set.mpi_comm is comm
        out = hvd.allreduce(torch.ones(3), op=hvd.Sum, process_set=ps,
                            name='mpi.sub')
        assert out.tolist() == [float(len(ps.ranks))] * 3
        # MPI itself still works next to libhvd
        assert comm.allreduce(1) == comm.size
    finally:
        # back to the session's sets for the tests that follow
        hvd.shutdown()
        hvd.init(process_sets=hvd._test_sets)
        sub.Free()


def test_init_with_subcomm_refused(hvd):
    from mpi4py import MPI
    if MPI.COMM_WORLD.size < 2:
        pytest.skip('needs 2 ranks')
    sub = MPI.COMM_WORLD.Split(color=MPI.COMM_WORLD.rank % 2)
    try:
        with pytest.raises(NotImplementedError, match='MPI_COMM_WORLD'):
            hvd.init(sub)
    finally:
        sub.Free()
