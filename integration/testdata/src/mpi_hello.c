/*
 * mpi_hello - MPI_Init, rank/size, Allreduce(SUM of rank+1) checked against
 * n(n+1)/2. Prints "ok hello rank=R size=N sum=S".
 * Arg "cpu": also print "cpu_us=<n> rank=R" (own getrusage) after
 * MPI_Finalize, for the benchmark's process-manager CPU accounting.
 */
#include <mpi.h>

#include "gopmi_test.h"

int main(int argc, char **argv)
{
    int rank = -1, size = 0, rc;
    long long mine, sum = 0, want;

    gt_setup("hello");
    gt_mpi_init("hello", &argc, &argv, &rank, &size);

    mine = rank + 1;
    rc = MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) gt_fail("hello", rank, "MPI_Allreduce-rc-%d", rc);
    want = (long long)size * (size + 1) / 2;
    if (sum != want) gt_fail("hello", rank, "sum-%lld-want-%lld", sum, want);
    printf("ok hello rank=%d size=%d sum=%lld\n", rank, size, sum);

    gt_mpi_finalize("hello", rank);
    if (gt_has(argc, argv, "cpu")) gt_print_cpu(rank);
    return 0;
}
