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
    int rank = -1, size = 0;
    int code = atoi(gt_arg(argc, argv, "code", "7"));
    int who = atoi(gt_arg(argc, argv, "rank", "1"));

    gt_setup("abort");
    gt_mpi_init("abort", &argc, &argv, &rank, &size);
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
