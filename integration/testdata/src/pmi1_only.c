/*
 * pmi1_only - a PMI-1 client without MPI, speaking the wire protocol itself.
 *
 * Why by hand: Debian ships no PMI-1 client library that talks the wire.
 * MPICH 4.0.2 links its simple-PMI client into libmpich without exporting
 * PMI_* symbols, and Slurm's libpmi (libpmi0) talks to srun over Slurm's own
 * RPCs, not PMI_FD. The protocol is a few newline-terminated text commands,
 * so this client speaks exactly what MPICH's simple PMI sends
 * (reference/lab-real-clients.md section 1.1).
 *
 * Connection: PMI_FD (+ PMI_RANK, PMI_SIZE), or PMI_PORT=host:port + PMI_ID
 * with the "initack" handshake (hydra's -pmi-port mode).
 * Steps: init, get_maxes, get_appnum, get_my_kvsname, put of "k-<rank>",
 * barrier, get of G peers' keys (r+1..r+G mod N, G default 16, capped at
 * N-1) with value check, a get of a missing key (must fail), barrier,
 * finalize. Args: g=<peers>, "cpu" prints "cpu_us=<n> rank=R" last.
 * Lines: "ok pmi1 rank=R size=N kvsname=K peers=G".
 */
#include <errno.h>
#include <netdb.h>
#include <sys/socket.h>

#include "gopmi_test.h"

#define P "pmi1"
#define LINE_MAX_LEN 4096

static int fd = -1, rank = -1, size = -1;
static char rbuf[LINE_MAX_LEN * 2];
static size_t rlen;

static void send_line(const char *fmt, ...)
{
    char line[LINE_MAX_LEN];
    va_list ap;
    int n;
    size_t off = 0;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof line) gt_fail(P, rank, "line-too-long");
    while (off < (size_t)n) {
        ssize_t w = write(fd, line + off, (size_t)n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) gt_fail(P, rank, "write-errno-%d", errno);
        off += (size_t)w;
    }
}

/* read_line returns the next reply line without its newline. Several lines
 * may arrive in one read (hydra's initack does that), so extra bytes stay
 * buffered for the next call. */
static char *read_line(void)
{
    static char line[LINE_MAX_LEN * 2];
    for (;;) {
        char *nl = memchr(rbuf, '\n', rlen);
        if (nl != NULL) {
            size_t n = (size_t)(nl - rbuf);
            memcpy(line, rbuf, n);
            line[n] = 0;
            memmove(rbuf, nl + 1, rlen - n - 1);
            rlen -= n + 1;
            return line;
        }
        if (rlen == sizeof rbuf) gt_fail(P, rank, "reply-line-too-long");
        ssize_t r = read(fd, rbuf + rlen, sizeof rbuf - rlen);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) gt_fail(P, rank, "server-closed-connection");
        if (r < 0) gt_fail(P, rank, "read-errno-%d", errno);
        rlen += (size_t)r;
    }
}

/* field copies the value of " name=" (or a leading "name=") in line;
 * values run to the next space. Returns 0 when absent. */
static int field(const char *line, const char *name, char *out, size_t outlen)
{
    size_t n = strlen(name);
    const char *p = line;
    while ((p = strstr(p, name)) != NULL) {
        if ((p == line || p[-1] == ' ') && p[n] == '=') {
            const char *v = p + n + 1;
            size_t l = strcspn(v, " ");
            if (l >= outlen) l = outlen - 1;
            memcpy(out, v, l);
            out[l] = 0;
            return 1;
        }
        p += n;
    }
    return 0;
}

/* expect reads a reply, checks its cmd= and, if the reply carries rc=, that
 * rc is 0 (barrier_out, maxes and friends carry none on hydra). */
static char *expect(const char *cmd, const char *step)
{
    char got[128], rc[32];
    char *line = read_line();
    if (!field(line, "cmd", got, sizeof got) || strcmp(got, cmd) != 0)
        gt_fail(P, rank, "%s-want-cmd-%s-got-[%s]", step, cmd, line);
    if (field(line, "rc", rc, sizeof rc) && strcmp(rc, "0") != 0)
        gt_fail(P, rank, "%s-rc-%s-[%s]", step, rc, line);
    return line;
}

static int connect_port(const char *spec)
{
    char host[256];
    const char *colon = strrchr(spec, ':');
    struct addrinfo hints, *res, *ai;
    int s = -1;

    if (colon == NULL || (size_t)(colon - spec) >= sizeof host) gt_fail(P, rank, "bad-PMI_PORT");
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = 0;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0) gt_fail(P, rank, "resolve-%s", spec);
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        s = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (s < 0) continue;
        if (connect(s, ai->ai_addr, ai->ai_addrlen) == 0) break;
        close(s);
        s = -1;
    }
    freeaddrinfo(res);
    if (s < 0) gt_fail(P, rank, "connect-%s", spec);
    return s;
}

static void connect_pm(void)
{
    const char *s;
    char v[64];

    if ((s = getenv("PMI_FD")) != NULL) {
        fd = atoi(s);
        rank = getenv("PMI_RANK") ? atoi(getenv("PMI_RANK")) : -1;
        size = getenv("PMI_SIZE") ? atoi(getenv("PMI_SIZE")) : -1;
        if (rank < 0 || size < 1) gt_fail(P, rank, "PMI_FD-without-PMI_RANK-or-PMI_SIZE");
        return;
    }
    if ((s = getenv("PMI_PORT")) == NULL) gt_fail(P, -1, "no-PMI_FD-or-PMI_PORT");
    fd = connect_port(s);
    send_line("cmd=initack pmiid=%s\n", getenv("PMI_ID") ? getenv("PMI_ID") : "0");
    expect("initack", "initack");
    for (int i = 0; i < 3; i++) {
        char *line = expect("set", "initack-set");
        if (field(line, "size", v, sizeof v)) size = atoi(v);
        if (field(line, "rank", v, sizeof v)) rank = atoi(v);
    }
    if (rank < 0 || size < 1) gt_fail(P, rank, "initack-no-rank-or-size");
}

int main(int argc, char **argv)
{
    int g = atoi(gt_arg(argc, argv, "g", "16"));
    char kvsname[300], key[64], val[256], want[256], *line;

    gt_setup(P);
    connect_pm();

    send_line("cmd=init pmi_version=1 pmi_subversion=1\n");
    expect("response_to_init", "init");
    send_line("cmd=get_maxes\n");
    expect("maxes", "get_maxes");
    send_line("cmd=get_appnum\n");
    expect("appnum", "get_appnum");
    send_line("cmd=get_my_kvsname\n");
    line = expect("my_kvsname", "get_my_kvsname");
    if (!field(line, "kvsname", kvsname, sizeof kvsname)) gt_fail(P, rank, "no-kvsname");

    snprintf(key, sizeof key, "k-%d", rank);
    snprintf(val, sizeof val, "value-of-rank-%d", rank);
    send_line("cmd=put kvsname=%s key=%s value=%s\n", kvsname, key, val);
    expect("put_result", "put");
    send_line("cmd=barrier_in\n");
    expect("barrier_out", "barrier-1");

    if (g > size - 1) g = size - 1;
    for (int p = 1; p <= g; p++) {
        int peer = (rank + p) % size;
        snprintf(key, sizeof key, "k-%d", peer);
        snprintf(want, sizeof want, "value-of-rank-%d", peer);
        send_line("cmd=get kvsname=%s key=%s\n", kvsname, key);
        line = expect("get_result", "get");
        if (!field(line, "value", val, sizeof val) || strcmp(val, want) != 0)
            gt_fail(P, rank, "get-%s-[%s]", key, line);
    }

    /* A missing key must come back with rc != 0 (hydra -1, Slurm 1). */
    send_line("cmd=get kvsname=%s key=no-such-key\n", kvsname);
    line = read_line();
    if (!field(line, "rc", val, sizeof val) || strcmp(val, "0") == 0)
        gt_fail(P, rank, "get-missing-key-[%s]", line);

    send_line("cmd=barrier_in\n");
    expect("barrier_out", "barrier-2");
    send_line("cmd=finalize\n");
    expect("finalize_ack", "finalize");
    printf("ok " P " rank=%d size=%d kvsname=%s peers=%d\n", rank, size, kvsname, g);
    if (gt_has(argc, argv, "cpu")) gt_print_cpu(rank);
    return 0;
}
