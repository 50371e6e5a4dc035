/*
 * mpi_alltoall - every rank sends a distinct message to every other rank:
 * MPI_Alltoall of ints (value from r to d is r*size+d) and a point-to-point
 * ring of strings naming sender and receiver. Prints
 * "ok alltoall rank=R size=N".
 */
#include <mpi.h>

#include "gopmi_test.h"

int main(int argc, char **argv)
{
    int rank = -1, size = 0, rc;
    int *sendbuf, *recvbuf;
    char out[64], in[64], want[64];
    int right, left;

    gt_setup("alltoall");
    gt_mpi_init("alltoall", &argc, &argv, &rank, &size);

    sendbuf = calloc((size_t)size, sizeof(int));
    recvbuf = calloc((size_t)size, sizeof(int));
    if (sendbuf == NULL || recvbuf == NULL) gt_fail("alltoall", rank, "calloc");
    for (int d = 0; d < size; d++) sendbuf[d] = rank * size + d;
    rc = MPI_Alltoall(sendbuf, 1, MPI_INT, recvbuf, 1, MPI_INT, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) gt_fail("alltoall", rank, "MPI_Alltoall-rc-%d", rc);
    for (int s = 0; s < size; s++) {
        if (recvbuf[s] != s * size + rank)
            gt_fail("alltoall", rank, "from-%d-got-%d-want-%d", s, recvbuf[s], s * size + rank);
    }

    right = (rank + 1) % size;
    left = (rank - 1 + size) % size;
    snprintf(out, sizeof out, "ring-from-%d-to-%d", rank, right);
    snprintf(want, sizeof want, "ring-from-%d-to-%d", left, rank);
    memset(in, 0, sizeof in);
    rc = MPI_Sendrecv(out, (int)sizeof out, MPI_CHAR, right, 17, in, (int)sizeof in, MPI_CHAR,
                      left, 17, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) gt_fail("alltoall", rank, "MPI_Sendrecv-rc-%d", rc);
    if (strcmp(in, want) != 0) gt_fail("alltoall", rank, "ring-got-%s-want-%s", in, want);

    printf("ok alltoall rank=%d size=%d\n", rank, size);
    free(sendbuf);
    free(recvbuf);
    gt_mpi_finalize("alltoall", rank);
    return 0;
}
