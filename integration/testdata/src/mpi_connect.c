/*
 * mpi_connect - MPI_Comm_accept and MPI_Comm_connect between two jobs
 * started apart (two gopmi runs, or two srun steps), found through the
 * name service:
 *   accept   MPI_Open_port, publish it as "gopmi-conn", MPI_Comm_accept
 *            (collective over the job), unpublish
 *   connect  look "gopmi-conn" up (every 20 ms, 60 s at most), then
 *            MPI_Comm_connect
 * Then, over the inter-communicator, every rank sends its rank + 100 to
 * the other side's rank 0 and the two rank 0s check the sum of what
 * they got; an Allreduce over the merged communicator checks its size;
 * MPI_Comm_disconnect.
 * Prints "ok connect rank=R role=<accept|connect> remote=M merged=S sum=X"
 * or "fail connect rank=R reason=...".
 */
#include <mpi.h>

#include "gopmi_test.h"

#define P "connect"

int main(int argc, char **argv)
{
    char port[MPI_MAX_PORT_NAME + 1];
    int rank, size, remote, rc, accept;
    MPI_Comm inter, merged;

    gt_setup(P);
    gt_mpi_init(P, &argc, &argv, &rank, &size);
    accept = gt_has(argc, argv, "accept");
    memset(port, 0, sizeof port);
    if (accept) {
        if (rank == 0) {
            if ((rc = MPI_Open_port(MPI_INFO_NULL, port)) != MPI_SUCCESS) gt_fail(P, rank, "open-port-rc-%d", rc);
            if ((rc = MPI_Publish_name("gopmi-conn", MPI_INFO_NULL, port)) != MPI_SUCCESS)
                gt_fail(P, rank, "publish-rc-%d", rc);
        }
        rc = MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
        if (rc != MPI_SUCCESS) gt_fail(P, rank, "accept-rc-%d", rc);
        if (rank == 0) MPI_Unpublish_name("gopmi-conn", MPI_INFO_NULL, port);
    } else {
        if (rank == 0) {
            int i;
            /* A name not published yet is an error to retry, not fatal
             * (Open MPI's default handler aborts). */
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
            for (i = 0; i < 3000; i++) {
                if (MPI_Lookup_name("gopmi-conn", MPI_INFO_NULL, port) == MPI_SUCCESS) break;
                usleep(20000);
            }
            if (i == 3000) gt_fail(P, rank, "lookup-gopmi-conn-missing-after-60s");
        }
        rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter);
        if (rc != MPI_SUCCESS) gt_fail(P, rank, "connect-rc-%d", rc);
    }
    MPI_Comm_remote_size(inter, &remote);
    /* Every rank sends rank+100 to the other side's rank 0. */
    int mine = rank + 100, sum = 0, got;
    MPI_Request req;
    MPI_Isend(&mine, 1, MPI_INT, 0, 7, inter, &req);
    if (rank == 0) {
        for (int i = 0; i < remote; i++) {
            MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 7, inter, MPI_STATUS_IGNORE);
            sum += got;
        }
        if (sum != remote * 100 + remote * (remote - 1) / 2) gt_fail(P, rank, "sum-%d-from-%d-remote-ranks", sum, remote);
    }
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Intercomm_merge(inter, accept ? 0 : 1, &merged);
    int one = 1, total = 0, msize;
    MPI_Comm_size(merged, &msize);
    MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, merged);
    if (total != size + remote || msize != total) gt_fail(P, rank, "merged-size-%d-allreduce-%d", msize, total);
    MPI_Comm_free(&merged);
    MPI_Comm_disconnect(&inter);
    printf("ok connect rank=%d role=%s remote=%d merged=%d sum=%d\n", rank, accept ? "accept" : "connect", remote, total, sum);
    fflush(stdout);
    gt_mpi_finalize(P, rank);
    return 0;
}
