//go:build pmix

/* The rendezvous gopmi owns. libpmix 4.2 makes its own TCP listener in
 * PMIx_server_init (socket, bind, listen) and accepts on it from a thread
 * of its own; it has no way to take a listener that exists already. A
 * task of a job whose server starts only once a task asks for it (gopmi
 * run and mpi/gopmi give every task the PMIx variables and a listener of
 * theirs, and start the server at the first connection) connects before
 * the server exists: the kernel queues its connection on the listener,
 * and the task waits for its handshake's answer. So this executable
 * defines bind and accept, which the dynamic linker gives libpmix
 * instead of libc's (an executable's symbols come first):
 *
 *  - bind, while gopmi_adopt_listener gave a descriptor: the socket
 *    libpmix made for its listener becomes that one (dup2), bound and
 *    listening already, its queued connections with it; every other bind
 *    is the system call.
 *  - accept waits until gopmi_open_gate (the job is registered: a client
 *    of a job libpmix does not know is refused), then takes the next
 *    connection and asks gopmi (goVetPeer) whether libpmix may have it:
 *    the kernel says who holds its other end, and only the server's own
 *    user and root may; one that says nothing for a while is dropped too
 *    (libpmix reads a handshake blocking, its whole listener waiting).
 *    A refused connection is closed before libpmix reads a byte of it,
 *    and the next one queued is taken. libpmix takes a TCP client's uid
 *    on its word: this is where another user stops.
 *
 * Go's own sockets make their system calls directly, never through
 * these. */

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "face.h"
#include "_cgo_export.h"

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open = 1;  /* closed only while a job is registered after an adoption */
static int adopt_fd = -1;  /* the listener libpmix's next AF_INET/AF_INET6 bind adopts */

void gopmi_adopt_listener(int fd)
{
    pthread_mutex_lock(&gate_mu);
    adopt_fd = fd;
    gate_open = 0;
    pthread_mutex_unlock(&gate_mu);
}

int gopmi_adopted(void)
{
    pthread_mutex_lock(&gate_mu);
    int left = adopt_fd;
    pthread_mutex_unlock(&gate_mu);
    return left < 0;
}

void gopmi_open_gate(void)
{
    pthread_mutex_lock(&gate_mu);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

int bind(int sockfd, const struct sockaddr *addr, socklen_t addrlen)
{
    pthread_mutex_lock(&gate_mu);
    int from = adopt_fd;
    if (from >= 0 && addr != NULL && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6)) {
        adopt_fd = -1;
        pthread_mutex_unlock(&gate_mu);
        if (dup3(from, sockfd, O_CLOEXEC) < 0) {
            return -1;
        }
        close(from);
        return 0;
    }
    pthread_mutex_unlock(&gate_mu);
    return (int) syscall(SYS_bind, sockfd, addr, addrlen);
}

int accept(int sockfd, struct sockaddr *addr, socklen_t *addrlen)
{
    socklen_t room = addrlen ? *addrlen : 0;
    int refused = 0;

    pthread_mutex_lock(&gate_mu);
    while (!gate_open) {
        pthread_cond_wait(&gate_cv, &gate_mu);
    }
    pthread_mutex_unlock(&gate_mu);
    for (;;) {
        if (addrlen)
            *addrlen = room;
        int fd = (int) syscall(SYS_accept4, sockfd, addr, addrlen, 0);
        if (fd < 0) {
            if (refused && (errno == EAGAIN || errno == EWOULDBLOCK))
                errno = ECONNABORTED; /* libpmix's listener goes on; EAGAIN would end it */
            return -1;
        }
        if (goVetPeer(fd))
            return fd;
        close(fd);
        refused = 1;
    }
}
