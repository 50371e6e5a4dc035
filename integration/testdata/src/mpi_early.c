/*
 * mpi_early - one rank leaves after MPI_Init without MPI_Finalize, with
 * status 0; the others wait in MPI_Barrier for it, which never comes.
 * Arg rank=<leaving rank, default 1>. Expected: the launcher notices the
 * rank that ended before finalize and ends the job with a failure, rather
 * than leave the others waiting (their alarm would fire after
 * GOPMI_TEST_ALARM seconds and exit 3).
 */
#include <mpi.h>

#include "gopmi_test.h"

int main(int argc, char **argv)
{
    int rank = -1, size = 0;
    int who = atoi(gt_arg(argc, argv, "rank", "1"));

    gt_setup("early");
    gt_mpi_init("early", &argc, &argv, &rank, &size);
    who = who % size;
    if (rank == who) {
        printf("leaving rank=%d\n", rank);
        fflush(stdout);
        return 0;
    }
    printf("waiting rank=%d\n", rank);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    gt_fail("early", rank, "barrier-completed-without-rank-%d", who);
    return 0;
}
