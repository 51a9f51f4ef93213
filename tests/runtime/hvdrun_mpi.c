/*
 * hvdrun_mpi.c - an Open MPI program for tests/runtime/hvdrun_mpi.sh: Open
 * MPI must see hvdrun's job (rank, size) and complete collectives.
 *
 *   hvdrun_mpi [abort RANK]
 *
 * Prints "mpi rank R/N: ok" when MPI_COMM_WORLD has the size PMIx gives
 * (PMIX_SIZE is not in the environment, so the check is the result of an
 * allreduce and allgather against the rank/size MPI reports).  With
 * "abort RANK", that rank calls MPI_Abort(MPI_COMM_WORLD, 6) after init.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int rank, size, sum = 0, bad = 0, i, *all;
	const char *env_rank = getenv("PMIX_RANK");

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc == 3 && !strcmp(argv[1], "abort") && rank == atoi(argv[2]))
		MPI_Abort(MPI_COMM_WORLD, 6);

	if (!env_rank || atoi(env_rank) != rank) {
		printf("mpi rank %d: PMIX_RANK is %s\n", rank,
		       env_rank ? env_rank : "unset");
		bad++;
	}
	MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (sum != size * (size - 1) / 2) {
		printf("mpi rank %d: allreduce sum %d, expected %d\n", rank,
		       sum, size * (size - 1) / 2);
		bad++;
	}
	all = calloc((size_t)size, sizeof(*all));
	MPI_Allgather(&rank, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
	for (i = 0; i < size; i++)
		if (all[i] != i) {
			printf("mpi rank %d: allgather[%d] = %d\n", rank, i,
			       all[i]);
			bad++;
		}
	free(all);
	MPI_Barrier(MPI_COMM_WORLD);
	if (argc == 3) /* abort mode: the survivors wait */
		sleep(30);
	MPI_Finalize();
	if (!bad)
		printf("mpi rank %d/%d: ok\n", rank, size);
	return bad ? 1 : 0;
}
