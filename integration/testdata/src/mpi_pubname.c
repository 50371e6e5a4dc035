/*
 * mpi_pubname - MPI name service with a made-up port (Debian's ch4:ucx MPICH
 * cannot MPI_Open_port, but publish/lookup reach PMI and work):
 * rank 0 publishes "gopmi-svc" -> "fake-port-string#1", barrier, rank 1
 * looks it up and compares, then looks up a missing service, which must
 * fail; barrier; rank 0 unpublishes. Needs at least 2 ranks.
 * Prints "ok pubname rank=R step=<publish|lookup|lookup-missing|unpublish>"
 * and "ok pubname rank=R size=N" at the end.
 */
#include <mpi.h>

#include "gopmi_test.h"

#define SVC "gopmi-svc"
#define PORT "fake-port-string#1"

/* errstr names the error class only: the full MPICH error stack is long and
 * varies with the PM. */
static const char *errstr(int rc)
{
    static char buf[MPI_MAX_ERROR_STRING + 1];
    int len = 0, cls = rc;
    MPI_Error_class(rc, &cls);
    MPI_Error_string(cls, buf, &len);
    for (int i = 0; i < len; i++)
        if (buf[i] == ' ' || buf[i] == '\n') buf[i] = '_';
    buf[len] = 0;
    return buf;
}

int main(int argc, char **argv)
{
    int rank = -1, size = 0, rc;
    char port[MPI_MAX_PORT_NAME + 1];

    gt_setup("pubname");
    gt_mpi_init("pubname", &argc, &argv, &rank, &size);
    if (size < 2) gt_fail("pubname", rank, "needs-2-ranks-got-%d", size);
    /* Name-service calls have no communicator; MPI-4 raises their errors
     * on MPI_COMM_SELF, older MPICH on MPI_COMM_WORLD: cover both. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);

    if (rank == 0) {
        rc = MPI_Publish_name(SVC, MPI_INFO_NULL, PORT);
        if (rc != MPI_SUCCESS) gt_fail("pubname", rank, "publish-%s", errstr(rc));
        printf("ok pubname rank=%d step=publish\n", rank);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        memset(port, 0, sizeof port);
        rc = MPI_Lookup_name(SVC, MPI_INFO_NULL, port);
        if (rc != MPI_SUCCESS) gt_fail("pubname", rank, "lookup-%s", errstr(rc));
        if (strcmp(port, PORT) != 0) gt_fail("pubname", rank, "lookup-got-%s", port);
        printf("ok pubname rank=%d step=lookup port=%s\n", rank, port);
        rc = MPI_Lookup_name("no-such-svc", MPI_INFO_NULL, port);
        if (rc == MPI_SUCCESS) gt_fail("pubname", rank, "lookup-missing-succeeded-%s", port);
        printf("ok pubname rank=%d step=lookup-missing err=%s\n", rank, errstr(rc));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        rc = MPI_Unpublish_name(SVC, MPI_INFO_NULL, PORT);
        if (rc != MPI_SUCCESS) gt_fail("pubname", rank, "unpublish-%s", errstr(rc));
        printf("ok pubname rank=%d step=unpublish\n", rank);
    }
    printf("ok pubname rank=%d size=%d\n", rank, size);
    gt_mpi_finalize("pubname", rank);
    return 0;
}
