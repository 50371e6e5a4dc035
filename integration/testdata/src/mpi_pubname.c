/*
 * mpi_pubname - MPI name service with a made-up port (Debian's ch4:ucx MPICH
 * cannot MPI_Open_port, but publish/lookup reach PMI and work):
 * rank 0 publishes "gopmi-svc" -> "fake-port-string#1", barrier, rank 1
 * looks it up and compares, then looks up a missing service, which must
 * fail; barrier; rank 0 unpublishes. Needs at least 2 ranks.
 * Prints "ok pubname rank=R step=<publish|lookup|lookup-missing|unpublish>"
 * and "ok pubname rank=R size=N" at the end.
 *
 * Across two runs (through gopmi's node daemon), on 1 rank or more:
 *   serve   rank 0 publishes "gopmi-xsvc" -> "xport-<pid>", looks
 *           "gopmi-xsvc-ack" up until it is there (60s), unpublishes
 *   client  rank 0 looks "gopmi-xsvc" up until it is there (60s), publishes
 *           "gopmi-xsvc-ack", waits until "gopmi-xsvc" is gone, unpublishes
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

/* lookup_until looks svc up every 20 ms until it is there (want) or gone
 * (!want), 60 s at most. */
static void lookup_until(int rank, const char *svc, int want, char *port)
{
    for (int i = 0; i < 3000; i++) {
        memset(port, 0, MPI_MAX_PORT_NAME + 1);
        int rc = MPI_Lookup_name(svc, MPI_INFO_NULL, port);
        if ((rc == MPI_SUCCESS) == want) return;
        usleep(20000);
    }
    gt_fail("pubname", rank, "lookup-%s-still-%s-after-60s", svc, want ? "missing" : "there");
}

/* across runs the name service of two runs at once: see the header */
static void across(int rank, int size, int serve)
{
    char port[MPI_MAX_PORT_NAME + 1], mine[64];
    int rc;

    if (rank == 0 && serve) {
        snprintf(mine, sizeof mine, "xport-%d", (int) getpid());
        rc = MPI_Publish_name("gopmi-xsvc", MPI_INFO_NULL, mine);
        if (rc != MPI_SUCCESS) gt_fail("pubname", rank, "xpublish-%s", errstr(rc));
        printf("ok pubname rank=%d step=xpublish port=%s\n", rank, mine);
        fflush(stdout);
        lookup_until(rank, "gopmi-xsvc-ack", 1, port);
        printf("ok pubname rank=%d step=xack value=%s\n", rank, port);
        rc = MPI_Unpublish_name("gopmi-xsvc", MPI_INFO_NULL, mine);
        if (rc != MPI_SUCCESS) gt_fail("pubname", rank, "xunpublish-%s", errstr(rc));
    } else if (rank == 0) {
        lookup_until(rank, "gopmi-xsvc", 1, port);
        printf("ok pubname rank=%d step=xlookup port=%s\n", rank, port);
        fflush(stdout);
        snprintf(mine, sizeof mine, "ack-%d", (int) getpid());
        rc = MPI_Publish_name("gopmi-xsvc-ack", MPI_INFO_NULL, mine);
        if (rc != MPI_SUCCESS) gt_fail("pubname", rank, "xack-publish-%s", errstr(rc));
        lookup_until(rank, "gopmi-xsvc", 0, port);
        rc = MPI_Unpublish_name("gopmi-xsvc-ack", MPI_INFO_NULL, mine);
        if (rc != MPI_SUCCESS) gt_fail("pubname", rank, "xack-unpublish-%s", errstr(rc));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("ok pubname rank=%d size=%d mode=%s\n", rank, size, serve ? "serve" : "client");
}

int main(int argc, char **argv)
{
    int rank = -1, size = 0, rc;
    char port[MPI_MAX_PORT_NAME + 1];

    gt_setup("pubname");
    gt_mpi_init("pubname", &argc, &argv, &rank, &size);
    /* Name-service calls have no communicator; MPI-4 raises their errors
     * on MPI_COMM_SELF, older MPICH on MPI_COMM_WORLD: cover both. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (argc > 1 && (strcmp(argv[1], "serve") == 0 || strcmp(argv[1], "client") == 0)) {
        across(rank, size, strcmp(argv[1], "serve") == 0);
        gt_mpi_finalize("pubname", rank);
        return 0;
    }
    if (size < 2) gt_fail("pubname", rank, "needs-2-ranks-got-%d", size);

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
