/*
 * mpi_spawn - MPI_Comm_spawn of the program itself: the parent job (any
 * size) spawns n=<N> children (default 2) with the argument "child"; each
 * child finds its parent (MPI_Comm_get_parent) and sends its rank + 1000
 * to the parents' rank 0, which checks the sum; an Allreduce over the
 * merged communicator checks its size; both sides disconnect. With
 * cmd=<command>, the parents spawn that instead of argv[0] (a bare name,
 * as MPICH's own tests spawn themselves, is found as mpiexec would).
 * Prints "ok spawn rank=R role=<parent|child> remote=M merged=S" per rank
 * (the parents' rank 0 also "sum=X"), or "fail spawn rank=R reason=...".
 */
#include <mpi.h>

#include "gopmi_test.h"

#define P "spawn"

int main(int argc, char **argv)
{
    int rank, size, remote, rc, n = atoi(gt_arg(argc, argv, "n", "2"));
    const char *cmd = gt_arg(argc, argv, "cmd", argv[0]);
    MPI_Comm parent, inter, merged;

    gt_setup(P);
    gt_mpi_init(P, &argc, &argv, &rank, &size);
    MPI_Comm_get_parent(&parent);
    int child = parent != MPI_COMM_NULL;
    if (child) {
        inter = parent;
    } else {
        char *args[] = {"child", NULL};
        int errs[64];
        if (n < 1 || n > 64) gt_fail(P, rank, "bad-n-%d", n);
        rc = MPI_Comm_spawn((char *) cmd, args, n, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter, errs);
        if (rc != MPI_SUCCESS) gt_fail(P, rank, "spawn-rc-%d", rc);
    }
    MPI_Comm_remote_size(inter, &remote);
    int sum = 0;
    if (child) {
        int mine = rank + 1000;
        MPI_Send(&mine, 1, MPI_INT, 0, 9, inter);
    } else if (rank == 0) {
        for (int i = 0; i < remote; i++) {
            int got;
            MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 9, inter, MPI_STATUS_IGNORE);
            sum += got;
        }
        if (sum != remote * 1000 + remote * (remote - 1) / 2) gt_fail(P, rank, "sum-%d-from-%d-children", sum, remote);
    }
    MPI_Intercomm_merge(inter, child, &merged);
    int one = 1, total = 0, msize;
    MPI_Comm_size(merged, &msize);
    MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, merged);
    if (total != size + remote || msize != total) gt_fail(P, rank, "merged-size-%d-allreduce-%d", msize, total);
    MPI_Comm_free(&merged);
    MPI_Comm_disconnect(&inter);
    if (!child && rank == 0)
        printf("ok spawn rank=%d role=parent remote=%d merged=%d sum=%d\n", rank, remote, total, sum);
    else
        printf("ok spawn rank=%d role=%s remote=%d merged=%d\n", rank, child ? "child" : "parent", remote, total);
    fflush(stdout);
    gt_mpi_finalize(P, rank);
    return 0;
}
