/*
 * mpi_dpm - MPI's dynamic process management within one job, across its
 * nodes. Mode (first argument):
 *   split    COMM_WORLD splits in two halves (rank < size/2: the first
 *            node's, in block order); the first half's rank 0 opens a
 *            port and sends its name over COMM_WORLD to the second half's
 *            rank 0; the first half accepts on its communicator, the
 *            second connects on its own; then every rank sends its rank
 *            to the other side's rank 0, which checks the sum, an
 *            Allreduce over the merged communicator checks its size, and
 *            both sides disconnect. "ok dpm rank=R mode=split remote=M
 *            merged=S"
 *   join     rank 0 listens on a TCP socket (127.0.0.1), sends its port to
 *            the last rank over COMM_WORLD, which connects; both call
 *            MPI_Comm_join on the socket, exchange their ranks over the
 *            inter-communicator and disconnect. The others wait in a
 *            barrier. "ok dpm rank=R mode=join peer=P"
 *   spawndc  every rank spawns one copy of this program (mode "child")
 *            on MPI_COMM_SELF, one after the other in rank order, sends
 *            the child its rank, gets it back + 1000 and disconnects
 *            (MPI_Comm_disconnect), then barriers. "ok dpm rank=R
 *            mode=spawndc child=X"
 *   spawnall as spawndc, every rank at once: parents on several nodes
 *            spawn at the same time. "ok dpm rank=R mode=spawnall
 *            child=X"
 *   child    (spawndc's) gets its parent's rank, sends it back + 1000,
 *            disconnects.
 *   segv     the last rank dies of SIGSEGV after MPI_Init; the others wait
 *            in a barrier, which the launcher must end at once (their
 *            alarm exits 3 after GOPMI_TEST_ALARM seconds).
 * A failure prints "fail dpm rank=R reason=..." and exits 1.
 */
#include <mpi.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gopmi_test.h"

#define P "dpm"

static int rank, size;

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        for (int i = 0; i < len; i++)
            if (msg[i] == ' ') msg[i] = '_';
        gt_fail(P, rank, "%s-%.*s", what, len, msg);
    }
}

static void mode_split(void)
{
    char port[MPI_MAX_PORT_NAME + 1] = "";
    int first = rank < size / 2, remote, msize, sum = 0, mine;
    MPI_Comm half, inter, merged;

    if (size < 2) gt_fail(P, rank, "split-needs-2-ranks");
    check(MPI_Comm_split(MPI_COMM_WORLD, first, rank, &half), "split");
    if (first) {
        if (rank == 0) {
            check(MPI_Open_port(MPI_INFO_NULL, port), "open-port");
            check(MPI_Send(port, MPI_MAX_PORT_NAME, MPI_CHAR, size / 2, 1, MPI_COMM_WORLD), "send-port");
        }
        check(MPI_Comm_accept(port, MPI_INFO_NULL, 0, half, &inter), "accept");
        if (rank == 0) check(MPI_Close_port(port), "close-port");
    } else {
        if (rank == size / 2)
            check(MPI_Recv(port, MPI_MAX_PORT_NAME, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "recv-port");
        check(MPI_Comm_connect(port, MPI_INFO_NULL, 0, half, &inter), "connect");
    }
    MPI_Comm_remote_size(inter, &remote);
    mine = rank;
    check(MPI_Send(&mine, 1, MPI_INT, 0, 2, inter), "send-rank");
    if (rank == 0 || rank == size / 2) {
        int want = 0;
        for (int i = 0; i < remote; i++) {
            int got;
            check(MPI_Recv(&got, 1, MPI_INT, MPI_ANY_SOURCE, 2, inter, MPI_STATUS_IGNORE), "recv-rank");
            sum += got;
        }
        for (int r = first ? size / 2 : 0; r < (first ? size : size / 2); r++) want += r;
        if (sum != want) gt_fail(P, rank, "sum-%d-want-%d", sum, want);
    }
    check(MPI_Intercomm_merge(inter, !first, &merged), "merge");
    MPI_Comm_size(merged, &msize);
    int one = 1, total = 0;
    check(MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, merged), "allreduce");
    if (total != size || msize != size) gt_fail(P, rank, "merged-%d-total-%d", msize, total);
    MPI_Comm_free(&merged);
    check(MPI_Comm_disconnect(&inter), "disconnect");
    MPI_Comm_free(&half);
    printf("ok " P " rank=%d mode=split remote=%d merged=%d\n", rank, remote, msize);
}

static void mode_join(void)
{
    int last = size - 1, fd = -1, peer = -1, other;
    MPI_Comm inter;

    if (size < 2) gt_fail(P, rank, "join-needs-2-ranks");
    if (rank == 0) {
        struct sockaddr_in a = { .sin_family = AF_INET };
        socklen_t alen = sizeof(a);
        int ls = socket(AF_INET, SOCK_STREAM, 0), port;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (ls < 0 || bind(ls, (struct sockaddr *) &a, sizeof(a)) || listen(ls, 1) || getsockname(ls, (struct sockaddr *) &a, &alen))
            gt_fail(P, rank, "listen");
        port = ntohs(a.sin_port);
        check(MPI_Send(&port, 1, MPI_INT, last, 3, MPI_COMM_WORLD), "send-port");
        fd = accept(ls, NULL, NULL);
        if (fd < 0) gt_fail(P, rank, "accept");
        close(ls);
    } else if (rank == last) {
        struct sockaddr_in a = { .sin_family = AF_INET };
        int port;
        check(MPI_Recv(&port, 1, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "recv-port");
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons(port);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *) &a, sizeof(a))) gt_fail(P, rank, "connect");
    }
    if (rank == 0 || rank == last) {
        check(MPI_Comm_join(fd, &inter), "join");
        other = rank;
        check(MPI_Sendrecv(&other, 1, MPI_INT, 0, 4, &peer, 1, MPI_INT, 0, 4, inter, MPI_STATUS_IGNORE), "exchange");
        if (peer != (rank == 0 ? last : 0)) gt_fail(P, rank, "peer-%d", peer);
        check(MPI_Comm_disconnect(&inter), "disconnect");
        close(fd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    printf("ok " P " rank=%d mode=join peer=%d\n", rank, peer);
}

static void mode_spawndc(char *self, int together)
{
    char *args[] = {"child", NULL};
    int child = -1, mine = rank;
    MPI_Comm inter;

    for (int turn = 0; turn < size; turn++) {
        if (turn == rank || (together && turn == 0)) {
            check(MPI_Comm_spawn(self, args, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &inter, MPI_ERRCODES_IGNORE), "spawn");
            check(MPI_Send(&mine, 1, MPI_INT, 0, 5, inter), "send-child");
            check(MPI_Recv(&child, 1, MPI_INT, 0, 6, inter, MPI_STATUS_IGNORE), "recv-child");
            if (child != rank + 1000) gt_fail(P, rank, "child-said-%d", child);
            check(MPI_Comm_disconnect(&inter), "disconnect");
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    printf("ok " P " rank=%d mode=%s child=%d\n", rank, together ? "spawnall" : "spawndc", child);
}

static void mode_child(void)
{
    MPI_Comm parent;
    int got;

    MPI_Comm_get_parent(&parent);
    if (parent == MPI_COMM_NULL) gt_fail(P, rank, "no-parent");
    check(MPI_Recv(&got, 1, MPI_INT, 0, 5, parent, MPI_STATUS_IGNORE), "child-recv");
    got += 1000;
    check(MPI_Send(&got, 1, MPI_INT, 0, 6, parent), "child-send");
    check(MPI_Comm_disconnect(&parent), "child-disconnect");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "split";

    gt_setup(P);
    gt_mpi_init(P, &argc, &argv, &rank, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    if (strcmp(mode, "split") == 0)
        mode_split();
    else if (strcmp(mode, "join") == 0)
        mode_join();
    else if (strcmp(mode, "spawndc") == 0)
        mode_spawndc(argv[0], 0);
    else if (strcmp(mode, "spawnall") == 0)
        mode_spawndc(argv[0], 1);
    else if (strcmp(mode, "child") == 0)
        mode_child();
    else if (strcmp(mode, "segv") == 0) {
        if (rank == size - 1) {
            printf("ok " P " rank=%d mode=segv dying\n", rank);
            fflush(stdout);
            raise(SIGSEGV);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        gt_fail(P, rank, "barrier-passed-without-the-dead-rank");
    } else
        gt_fail(P, rank, "unknown-mode-%s", mode);
    MPI_Finalize();
    return 0;
}
