/*
 * mpi_abort - one rank calls MPI_Abort(MPI_COMM_WORLD, code); the others
 * block in MPI_Barrier until the launcher kills them (or the alarm fires).
 * Args: code=<exit code, default 7> rank=<aborting rank, default 1; taken
 * modulo the job size>. Expected: the launcher exits with <code>.
 * Prints "aborting rank=R code=C" just before the call.
 */
#include <mpi.h>

#include "gopmi_test.h"

int main(int argc, char **argv)
{
    int rank = -1, size = 0, rc;
    int code = atoi(gt_arg(argc, argv, "code", "7"));
    int who = atoi(gt_arg(argc, argv, "rank", "1"));

    gt_setup("abort");
    rc = MPI_Init(&argc, &argv);
    if (rc != MPI_SUCCESS) gt_fail("abort", gt_rank_hint(), "MPI_Init-rc-%d", rc);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    who = who % size;

    if (rank == who) {
        printf("aborting rank=%d size=%d code=%d\n", rank, size, code);
        fflush(stdout);
        MPI_Abort(MPI_COMM_WORLD, code);
        gt_fail("abort", rank, "MPI_Abort-returned");
    }
    printf("waiting rank=%d size=%d\n", rank, size);
    MPI_Barrier(MPI_COMM_WORLD);
    /* Reaching here means the abort did not take the job down. */
    gt_fail("abort", rank, "barrier-completed-after-abort");
    return 0;
}
