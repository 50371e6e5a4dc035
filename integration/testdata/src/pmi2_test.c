/*
 * pmi2_test - exercises a PMI-2 server through Slurm's libpmi2
 * (#include <slurm/pmi2.h>, -lpmi2), the PMI-2 client real Slurm jobs use.
 *
 * Mode (first argument, default "default"):
 *   default  init, job id, 3 rounds of KVS all-to-all with values holding
 *            ';', '=' and spaces, a missing-key get that must fail, job
 *            attributes PMI_process_mapping and universeSize, node attribute
 *            put (the first rank of each node) + get(wait) (all ranks)
 *   ns       rank 0 publishes "gopmi-svc", fence, the other ranks look it up
 *            and look up a missing name (must fail), fence, rank 0 unpublishes
 *   spawn    rank 0 spawns 2 copies of this program with argument "child" and
 *            the preput key gopmi-preput=preput-val
 *   child    (used by spawn) checks the spawned flag and the preput key
 *   spawn-multi  rank 0 spawns two commands at once: 1 copy, then 2 copies,
 *            of this program with argument "mchild"
 *   spawn-multi-wdir  spawn-multi whose commands ask for their own wdir
 *            and env (/tmp and GOPMI_MCHILD=one, / and GOPMI_MCHILD=two)
 *   wchild   (used by spawn-multi-wdir) prints its cwd and GOPMI_MCHILD
 *   mchild   (used by spawn-multi) checks the spawned flag and the size (3),
 *            fences, and prints its appnum (0 for rank 0, 1 for ranks 1-2)
 *   connect  rank 0 spawns 2 copies of this program with argument
 *            "connect-child" and puts the new job id; after a fence every
 *            rank checks that PMI2_Job_Connect to a job that does not exist
 *            fails, connects to the children's job, reads their keys with
 *            PMI2_KVS_Get(childjob, PMI2_ID_NULL, ...) and by rank, and
 *            disconnects; after another fence rank 0 checks that a second
 *            disconnect fails (every connect is undone) and publishes
 *            "gopmi-connect-done-<childjob>"
 *   connect-child  (used by connect) puts conn-k<rank>, fences, then looks
 *            the parent's done name up until it appears (60s at most), so
 *            the job is still running while the parent connects
 *   abort    rank 1 (modulo size) calls PMI2_Abort(1, "boom"); the others
 *            wait in a fence. Expected: the launcher exits non-zero.
 *   ring     PMIX_Ring, checks rank, count and the neighbours' values
 *   long     put/get of values of PMI2_MAX_VALLEN bytes (len=N overrides),
 *            one plain and one holding ';'
 *   ns-serve rank 0 publishes "gopmi-xrun" (another run looks it up through the
 *            node daemon), waits up to 60s for "gopmi-xrun-ack", and
 *            unpublishes "gopmi-xrun"; the others wait in a fence
 *   ns-client  rank 0 looks "gopmi-xrun" up until it is there (60s at most),
 *            publishes "gopmi-xrun-ack", and waits until "gopmi-xrun" is gone
 *            (so the ack outlives the other run's lookup)
 *   ns-peek  rank 0 looks "gopmi-xrun" up once and prints the return code
 *   xconnect-serve  every rank puts xk-<rank>=xv-<rank>, fence; rank 0
 *            publishes its job id as "gopmi-xjob", waits up to 60s for
 *            "gopmi-xjob-ack", unpublishes
 *   xconnect-hold  rank 0 connects to the "gopmi-xjob" job as xconnect-client
 *            does, publishes "gopmi-xjob-connected", then connects again
 *            every 20 ms until a connect fails (the other run was killed;
 *            60s at most) and prints how long that took
 *   xconnect-client  rank 0 looks "gopmi-xjob" up (60s at most), connects
 *            to that job (another run's, through gopmi's node daemon), reads
 *            its xk-1 with PMI2_ID_NULL, disconnects, publishes
 *            "gopmi-xjob-ack" and waits until "gopmi-xjob" is gone
 *   hwloc    the job attribute PMI_hwloc_xmlfile must name a readable hwloc
 *            topology (an XML file with a <topology> element)
 *   nohwloc  the job attribute PMI_hwloc_xmlfile must not be set (Slurm
 *            25.05 and later write no topology for a plugin to hand on)
 *   late     every rank puts late-k<rank>, fences; the upper half of the
 *            ranks (rank >= size/2: the last node's, in block order)
 *            prints its pid and finalizes at once (once the file named
 *            by hold=PATH exists, if given), and each lower rank r reads
 *            late-k<size/2 + r % (size - size/2)> only once that rank is
 *            gone: when the file named by wait=PATH exists (the test
 *            makes it once it saw the finished node's ranks and server
 *            exit), or after sleep=MS (default 300) without wait=. Data
 *            put in a job stays readable until the job ends.
 * Options after the mode: "nosemi" keeps ';' out of every value (hydra cuts
 * values at the first ';'), "len=N" sets the long value length.
 *
 * Lines: "ok pmi2 rank=R step=S ..." per step, "ok pmi2 rank=R size=N
 * mode=M" at the end, "fail pmi2 rank=R reason=..." (exit 1) on any error.
 */
#include <errno.h>
#include <slurm/pmi2.h>

#include "gopmi_test.h"

#define P "pmi2"

static int rank = -1, size = 0, spawned = 0, appnum = -1;
/* nosemi: leave ';' out of values. MPICH's hydra 4.0.2 does not undo the
 * ";;" escape (it cuts the value at the first ';'), so without this flag
 * hydra can only be checked up to the first such value. */
static int nosemi;
static char jobid[256];

static void fence(const char *why) { gt_pmi2_fence(P, rank, why); }

static void kvs_value(char *buf, size_t len, int round, int r)
{
    /* ';' is escaped as ";;" on the PMI-2 wire and '=' separates keys from
     * values: both must survive a round trip, as must spaces. */
    if (nosemi)
        snprintf(buf, len, "v r=%d rank %d=x==y end", round, r);
    else
        snprintf(buf, len, "v;r=%d; rank %d=x;;y end", round, r);
}

static void init_common(void)
{
    gt_pmi2_init(P, &spawned, &size, &rank, &appnum, jobid, sizeof jobid);
    printf("ok " P " rank=%d step=init size=%d spawned=%d appnum=%d\n", rank, size, spawned,
           appnum);
    printf("ok " P " rank=%d step=jobid jobid=%s\n", rank, jobid);
}

static void get_key(const char *key, char *val, int maxlen, int *vallen, const char *step)
{
    int rc = PMI2_KVS_Get(jobid, PMI2_ID_NULL, key, val, maxlen, vallen);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "%s-get-%s-rc-%d", step, key, rc);
}

static int local_leader(void)
{
    /* hydra and gopmi say MPI_LOCALRANKID; Slurm's own mpi/pmi2 only
     * SLURM_LOCALID. */
    const char *s = getenv("MPI_LOCALRANKID");
    if (s == NULL)
        s = getenv("SLURM_LOCALID");
    return s != NULL ? atoi(s) == 0 : rank == 0;
}

static void mode_default(void)
{
    char key[PMI2_MAX_KEYLEN], val[PMI2_MAX_VALLEN + 1], want[PMI2_MAX_VALLEN + 1];
    int rc, vallen = 0, found = 0;

    for (int round = 0; round < 3; round++) {
        snprintf(key, sizeof key, "r%d-k%d", round, rank);
        kvs_value(val, sizeof val, round, rank);
        rc = PMI2_KVS_Put(key, val);
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "put-%s-rc-%d", key, rc);
        fence("kvs");
        for (int r = 0; r < size; r++) {
            if (r == rank) continue;
            snprintf(key, sizeof key, "r%d-k%d", round, r);
            kvs_value(want, sizeof want, round, r);
            memset(val, 0, sizeof val);
            get_key(key, val, sizeof val, &vallen, "kvs");
            if (strcmp(val, want) != 0) gt_fail(P, rank, "kvs-%s-got-[%s]-want-[%s]", key, val, want);
            if (vallen != (int)strlen(want))
                gt_fail(P, rank, "kvs-%s-vallen-%d-want-%zu", key, vallen, strlen(want));
        }
        printf("ok " P " rank=%d step=kvs round=%d peers=%d\n", rank, round, size - 1);
    }

    rc = PMI2_KVS_Get(jobid, PMI2_ID_NULL, "no-such-key", val, sizeof val, &vallen);
    if (rc == PMI2_SUCCESS) gt_fail(P, rank, "get-missing-key-succeeded-[%s]", val);
    printf("ok " P " rank=%d step=get-missing rc=%d\n", rank, rc);

    memset(val, 0, sizeof val);
    rc = PMI2_Info_GetJobAttr("PMI_process_mapping", val, sizeof val, &found);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "jobattr-mapping-rc-%d", rc);
    if (!found) gt_fail(P, rank, "jobattr-mapping-not-found");
    printf("ok " P " rank=%d step=jobattr key=PMI_process_mapping value=%s\n", rank, val);

    memset(val, 0, sizeof val);
    found = 0;
    rc = PMI2_Info_GetJobAttr("universeSize", val, sizeof val, &found);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "jobattr-universeSize-rc-%d", rc);
    printf("ok " P " rank=%d step=jobattr key=universeSize found=%d value=%s\n", rank, found,
           found ? val : "unset");

    /* Node attributes are visible on their node only: the first rank of
     * each node puts (MPI_LOCALRANKID, set by hydra and gopmi; rank 0 when
     * the launcher does not say). */
    if (local_leader()) {
        rc = PMI2_Info_PutNodeAttr("gopmi-node-attr", "node-val");
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "putnodeattr-rc-%d", rc);
    }
    memset(val, 0, sizeof val);
    found = 0;
    /* wait=1: ranks other than 0 may ask before rank 0 has put. */
    rc = PMI2_Info_GetNodeAttr("gopmi-node-attr", val, sizeof val, &found, 1);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "getnodeattr-rc-%d", rc);
    if (!found || strcmp(val, "node-val") != 0)
        gt_fail(P, rank, "getnodeattr-found-%d-value-[%s]", found, val);
    printf("ok " P " rank=%d step=nodeattr value=%s\n", rank, val);
}

static void mode_ns(void)
{
    char port[PMI2_MAX_VALLEN + 1];
    int rc;

    if (rank == 0) {
        rc = PMI2_Nameserv_publish("gopmi-svc", NULL, "port-xyz");
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "publish-rc-%d", rc);
        printf("ok " P " rank=%d step=publish\n", rank);
    }
    fence("publish");
    if (rank != 0) {
        memset(port, 0, sizeof port);
        rc = PMI2_Nameserv_lookup("gopmi-svc", NULL, port, sizeof port);
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "lookup-rc-%d", rc);
        if (strcmp(port, "port-xyz") != 0) gt_fail(P, rank, "lookup-got-[%s]", port);
        printf("ok " P " rank=%d step=lookup port=%s\n", rank, port);
        rc = PMI2_Nameserv_lookup("no-such-svc", NULL, port, sizeof port);
        if (rc == PMI2_SUCCESS) gt_fail(P, rank, "lookup-missing-succeeded-[%s]", port);
        printf("ok " P " rank=%d step=lookup-missing rc=%d\n", rank, rc);
    }
    fence("lookup");
    if (rank == 0) {
        rc = PMI2_Nameserv_unpublish("gopmi-svc", NULL);
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "unpublish-rc-%d", rc);
        printf("ok " P " rank=%d step=unpublish\n", rank);
    }
}

/* spawn_self starts 2 copies of this program with the one argument arg
 * and, when preput is not NULL, that preput key; the new job id goes to
 * newjob. */
static void spawn_self(const char *arg, const struct MPID_Info *preput, char *newjob, int len)
{
    char exe[4096];
    const char *cmds[1], *argv0[1], **argvs[1];
    int argcs[1] = {1}, maxprocs[1] = {2}, infosizes[1] = {0}, errors[2] = {-1, -1};
    const struct MPID_Info *infos[1] = {NULL};
    const struct MPID_Info *preputs[1] = {preput};
    ssize_t n;
    int rc;

    /* An absolute path: the spawned job may start in another directory. */
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) gt_fail(P, rank, "readlink-self");
    exe[n] = 0;
    cmds[0] = exe;
    argv0[0] = arg;
    argvs[0] = argv0;
    memset(newjob, 0, len);
    rc = PMI2_Job_Spawn(1, cmds, argcs, argvs, maxprocs, infosizes, infos, preput != NULL ? 1 : 0,
                        preputs, newjob, len, errors);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "spawn-rc-%d", rc);
    if (errors[0] != 0 || errors[1] != 0)
        gt_fail(P, rank, "spawn-errors-%d,%d", errors[0], errors[1]);
    printf("ok " P " rank=%d step=spawn jobid=%s errors=%d,%d\n", rank, newjob, errors[0],
           errors[1]);
}

static void mode_spawn(void)
{
    char newjob[256];
    struct MPID_Info pp;

    if (rank != 0) return;
    memset(&pp, 0, sizeof pp);
    pp.key = "gopmi-preput";
    pp.value = "preput-val";
    spawn_self("child", &pp, newjob, sizeof newjob);
}

/* lookup_until looks name up every 20 ms until it is there (want_found)
 * or gone (!want_found), for 60 s at most; it returns the last rc. */
static int lookup_until(const char *name, int want_found, char *port, int len)
{
    int rc = PMI2_FAIL;
    for (int i = 0; i < 3000; i++) {
        memset(port, 0, len);
        rc = PMI2_Nameserv_lookup(name, NULL, port, len);
        if ((rc == PMI2_SUCCESS) == want_found) return rc;
        usleep(20000);
    }
    gt_fail(P, rank, "lookup-%s-still-%s-after-60s-rc-%d", name, want_found ? "missing" : "there", rc);
    return rc;
}

static void mode_ns_serve(void)
{
    char port[PMI2_MAX_VALLEN + 1], val[320];
    int rc;

    if (rank == 0) {
        snprintf(val, sizeof val, "served-by-%s", jobid);
        rc = PMI2_Nameserv_publish("gopmi-xrun", NULL, val);
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "xrun-publish-rc-%d", rc);
        printf("ok " P " rank=%d step=xrun-publish\n", rank);
        fflush(stdout);
        lookup_until("gopmi-xrun-ack", 1, port, sizeof port);
        printf("ok " P " rank=%d step=xrun-ack value=%s\n", rank, port);
        rc = PMI2_Nameserv_unpublish("gopmi-xrun", NULL);
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "xrun-unpublish-rc-%d", rc);
    }
    fence("xrun");
}

static void mode_ns_client(void)
{
    char port[PMI2_MAX_VALLEN + 1], val[320];
    int rc;

    if (rank == 0) {
        lookup_until("gopmi-xrun", 1, port, sizeof port);
        printf("ok " P " rank=%d step=xrun-lookup value=%s\n", rank, port);
        snprintf(val, sizeof val, "ack-from-%s", jobid);
        rc = PMI2_Nameserv_publish("gopmi-xrun-ack", NULL, val);
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "xrun-ack-publish-rc-%d", rc);
        lookup_until("gopmi-xrun", 0, port, sizeof port);
        rc = PMI2_Nameserv_unpublish("gopmi-xrun-ack", NULL);
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "xrun-ack-unpublish-rc-%d", rc);
    }
    fence("xrun");
}

static void mode_ns_peek(void)
{
    char port[PMI2_MAX_VALLEN + 1] = "";
    if (rank == 0) {
        int rc = PMI2_Nameserv_lookup("gopmi-xrun", NULL, port, sizeof port);
        printf("ok " P " rank=%d step=xrun-peek rc=%d value=%s\n", rank, rc, port);
    }
}

static void mode_xconnect_serve(void)
{
    char key[64], val[64], port[PMI2_MAX_VALLEN + 1];
    int rc;

    snprintf(key, sizeof key, "xk-%d", rank);
    snprintf(val, sizeof val, "xv-%d", rank);
    rc = PMI2_KVS_Put(key, val);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "xput-rc-%d", rc);
    fence("xconnect");
    if (rank == 0) {
        rc = PMI2_Nameserv_publish("gopmi-xjob", NULL, jobid);
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "xjob-publish-rc-%d", rc);
        printf("ok " P " rank=%d step=xjob-publish jobid=%s\n", rank, jobid);
        fflush(stdout);
        lookup_until("gopmi-xjob-ack", 1, port, sizeof port);
        printf("ok " P " rank=%d step=xjob-ack value=%s\n", rank, port);
        rc = PMI2_Nameserv_unpublish("gopmi-xjob", NULL);
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "xjob-unpublish-rc-%d", rc);
    }
    fence("xconnect-done");
}

/* connect_xjob looks the job "gopmi-xjob" names up, connects to it and
 * reads its xk-1, which must be xv-1; other gets the job id. */
static void connect_xjob(char *other, int len)
{
    char val[PMI2_MAX_VALLEN + 1] = "";
    PMI2_Connect_comm_t conn;
    int vallen = 0, rc;

    lookup_until("gopmi-xjob", 1, other, len);
    rc = PMI2_Job_Connect(other, &conn);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "xjob-connect-rc-%d", rc);
    rc = PMI2_KVS_Get(other, PMI2_ID_NULL, "xk-1", val, sizeof val, &vallen);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "xjob-get-rc-%d", rc);
    if (strcmp(val, "xv-1") != 0) gt_fail(P, rank, "xjob-get-[%s]", val);
    printf("ok " P " rank=%d step=xjob-get job=%s value=%s\n", rank, other, val);
}

static void mode_xconnect_client(void)
{
    char other[PMI2_MAX_VALLEN + 1], port[PMI2_MAX_VALLEN + 1];
    int rc;

    if (rank == 0) {
        connect_xjob(other, sizeof other);
        rc = PMI2_Job_Disconnect(other);
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "xjob-disconnect-rc-%d", rc);
        rc = PMI2_Nameserv_publish("gopmi-xjob-ack", NULL, "ack");
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "xjob-ack-rc-%d", rc);
        lookup_until("gopmi-xjob", 0, port, sizeof port);
        rc = PMI2_Nameserv_unpublish("gopmi-xjob-ack", NULL);
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "xjob-ack-unpublish-rc-%d", rc);
    }
    fence("xconnect");
}

static void mode_xconnect_hold(void)
{
    char other[PMI2_MAX_VALLEN + 1];
    PMI2_Connect_comm_t conn;
    int rc;

    if (rank == 0) {
        connect_xjob(other, sizeof other);
        rc = PMI2_Nameserv_publish("gopmi-xjob-connected", NULL, "yes");
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "xjob-connected-rc-%d", rc);
        printf("ok " P " rank=%d step=xjob-connected\n", rank);
        fflush(stdout);
        for (int i = 0;; i++) {
            if (i == 3000) gt_fail(P, rank, "xjob-still-connectable-after-60s");
            rc = PMI2_Job_Connect(other, &conn);
            if (rc != PMI2_SUCCESS) break;
            PMI2_Job_Disconnect(other);
            usleep(20000);
        }
        printf("ok " P " rank=%d step=xjob-gone rc=%d\n", rank, rc);
    }
}

/* spawn_two spawns two commands of this program at once, 1 copy then 2,
 * each with the one argument child and its infos; rank 0 only. */
static void spawn_two(const char *step, const char *child, const struct MPID_Info *infos[2], int infosizes[2])
{
    char exe[4096], newjob[256];
    const char *cmds[2], *argv0[1] = {child}, **argvs[2] = {argv0, argv0};
    int argcs[2] = {1, 1}, maxprocs[2] = {1, 2}, errors[3] = {-1, -1, -1};
    ssize_t n;
    int rc;

    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) gt_fail(P, rank, "readlink-self");
    exe[n] = 0;
    cmds[0] = cmds[1] = exe;
    memset(newjob, 0, sizeof newjob);
    rc = PMI2_Job_Spawn(2, cmds, argcs, argvs, maxprocs, infosizes, infos, 0, NULL, newjob,
                        sizeof newjob, errors);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "%s-rc-%d", step, rc);
    printf("ok " P " rank=%d step=%s jobid=%s\n", rank, step, newjob);
}

static void mode_spawn_multi(void)
{
    const struct MPID_Info *infos[2] = {NULL, NULL};
    int infosizes[2] = {0, 0};

    if (rank != 0) return;
    spawn_two("spawn-multi", "mchild", infos, infosizes);
}

/* mode_spawn_multi_wdir is spawn-multi whose two commands each ask for
 * their own working directory and environment (MPICH's spawnminfo1 does
 * the wdir): /tmp with GOPMI_MCHILD=one, then / with GOPMI_MCHILD=two. */
static void mode_spawn_multi_wdir(void)
{
    struct MPID_Info i0[2], i1[2];
    const struct MPID_Info *infos[2] = {i0, i1};
    int infosizes[2] = {2, 2};

    if (rank != 0) return;
    memset(i0, 0, sizeof i0);
    memset(i1, 0, sizeof i1);
    i0[0].key = "wdir"; i0[0].value = "/tmp"; i0[1].key = "env"; i0[1].value = "GOPMI_MCHILD=one";
    i1[0].key = "wdir"; i1[0].value = "/";    i1[1].key = "env"; i1[1].value = "GOPMI_MCHILD=two";
    spawn_two("spawn-multi-wdir", "wchild", infos, infosizes);
}

/* mode_wchild prints where it runs and what GOPMI_MCHILD says. */
static void mode_wchild(void)
{
    char cwd[4096];
    const char *v = getenv("GOPMI_MCHILD");
    if (!spawned) gt_fail(P, rank, "wchild-not-spawned");
    if (getcwd(cwd, sizeof cwd) == NULL) gt_fail(P, rank, "getcwd");
    fence("wchild");
    printf("ok " P "-wchild rank=%d appnum=%d cwd=%s env=%s\n", rank, appnum, cwd, v ? v : "unset");
}

static void mode_mchild(void)
{
    if (!spawned) gt_fail(P, rank, "mchild-not-spawned");
    if (size != 3) gt_fail(P, rank, "mchild-size-%d-want-3", size);
    fence("mchild");
    printf("ok " P "-mchild rank=%d size=%d appnum=%d\n", rank, size, appnum);
}

static void mode_child(void)
{
    char val[PMI2_MAX_VALLEN + 1], key[PMI2_MAX_KEYLEN], want[64];
    int vallen = 0, found = 0, rc;

    if (!spawned) gt_fail(P, rank, "child-not-spawned");
    if (size != 2) gt_fail(P, rank, "child-size-%d-want-2", size);
    memset(val, 0, sizeof val);
    get_key("gopmi-preput", val, sizeof val, &vallen, "preput");
    if (strcmp(val, "preput-val") != 0) gt_fail(P, rank, "preput-got-[%s]", val);

    snprintf(key, sizeof key, "child-k%d", rank);
    snprintf(want, sizeof want, "child-v%d", rank);
    rc = PMI2_KVS_Put(key, want);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "child-put-rc-%d", rc);
    fence("child");
    snprintf(key, sizeof key, "child-k%d", (rank + 1) % size);
    snprintf(want, sizeof want, "child-v%d", (rank + 1) % size);
    memset(val, 0, sizeof val);
    get_key(key, val, sizeof val, &vallen, "child");
    if (strcmp(val, want) != 0) gt_fail(P, rank, "child-kvs-got-[%s]-want-[%s]", val, want);

    memset(val, 0, sizeof val);
    rc = PMI2_Info_GetJobAttr("PMI_process_mapping", val, sizeof val, &found);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "child-jobattr-rc-%d", rc);
    printf("ok " P "-child rank=%d size=%d spawned=%d appnum=%d preput=preput-val jobid=%s "
           "mapping=%s\n",
           rank, size, spawned, appnum, jobid, found ? val : "unset");
}

static void mode_connect(void)
{
    char child[256], key[PMI2_MAX_KEYLEN], want[64], val[PMI2_MAX_VALLEN + 1], name[300];
    PMI2_Connect_comm_t conn;
    int vallen = 0, rc;

    if (rank == 0) {
        spawn_self("connect-child", NULL, child, sizeof child);
        rc = PMI2_KVS_Put("gopmi-child-jobid", child);
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "put-child-jobid-rc-%d", rc);
    }
    fence("child-jobid");
    memset(child, 0, sizeof child);
    get_key("gopmi-child-jobid", child, sizeof child, &vallen, "connect");

    /* Not a hang, not a success: the job does not exist. */
    memset(&conn, 0, sizeof conn);
    rc = PMI2_Job_Connect("gopmi-no-such-job", &conn);
    if (rc == PMI2_SUCCESS) gt_fail(P, rank, "connect-to-missing-job-succeeded");
    printf("ok " P " rank=%d step=connect-missing rc=%d\n", rank, rc);

    memset(&conn, 0, sizeof conn);
    rc = PMI2_Job_Connect(child, &conn);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "connect-rc-%d", rc);
    printf("ok " P " rank=%d step=connect jobid=%s\n", rank, child);

    /* Any child (PMI2_ID_NULL), then the owner by rank. The children put
     * before their first fence; the server waits for that fence. */
    for (int r = 0; r < 2; r++) {
        int src = r == 0 ? PMI2_ID_NULL : r;
        snprintf(key, sizeof key, "conn-k%d", r);
        snprintf(want, sizeof want, "conn-v%d", r);
        memset(val, 0, sizeof val);
        rc = PMI2_KVS_Get(child, src, key, val, sizeof val, &vallen);
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "connect-get-%s-src-%d-rc-%d", key, src, rc);
        if (strcmp(val, want) != 0)
            gt_fail(P, rank, "connect-get-%s-got-[%s]-want-[%s]", key, val, want);
        printf("ok " P " rank=%d step=connect-get key=%s src=%d value=%s\n", rank, key, src, val);
    }

    rc = PMI2_Job_Disconnect(child);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "disconnect-rc-%d", rc);
    printf("ok " P " rank=%d step=disconnect\n", rank);
    fence("disconnect");
    if (rank != 0) return;
    /* Every rank's connect is undone: one more disconnect is an error. */
    rc = PMI2_Job_Disconnect(child);
    if (rc == PMI2_SUCCESS) gt_fail(P, rank, "disconnect-unconnected-succeeded");
    printf("ok " P " rank=%d step=disconnect-again rc=%d\n", rank, rc);

    snprintf(name, sizeof name, "gopmi-connect-done-%s", child);
    rc = PMI2_Nameserv_publish(name, NULL, "done");
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "publish-done-rc-%d", rc);
}

static void mode_connect_child(void)
{
    char key[PMI2_MAX_KEYLEN], val[64], name[300], port[PMI2_MAX_VALLEN + 1];
    long long deadline;
    int rc, tries = 0;

    if (!spawned) gt_fail(P, rank, "connect-child-not-spawned");
    snprintf(key, sizeof key, "conn-k%d", rank);
    snprintf(val, sizeof val, "conn-v%d", rank);
    rc = PMI2_KVS_Put(key, val);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "connect-child-put-rc-%d", rc);
    fence("connect-child");

    /* Stay up until the parent has read our keys: the server refuses a
     * connect to a job that has finished. */
    snprintf(name, sizeof name, "gopmi-connect-done-%s", jobid);
    deadline = gt_now_us() + 60LL * 1000000LL;
    for (;;) {
        memset(port, 0, sizeof port);
        rc = PMI2_Nameserv_lookup(name, NULL, port, sizeof port);
        tries++;
        if (rc == PMI2_SUCCESS) break;
        if (gt_now_us() > deadline)
            gt_fail(P, rank, "connect-child-no-done-name-after-%d-lookups-rc-%d", tries, rc);
        usleep(20000);
    }
    if (strcmp(port, "done") != 0) gt_fail(P, rank, "connect-child-done-got-[%s]", port);
    printf("ok " P "-connect-child rank=%d size=%d jobid=%s lookups=%d\n", rank, size, jobid,
           tries);
}

static void mode_abort(void)
{
    int who = 1 % size;
    if (rank == who) {
        printf("aborting " P " rank=%d size=%d\n", rank, size);
        fflush(stdout);
        PMI2_Abort(1, "boom");
        gt_fail(P, rank, "PMI2_Abort-returned");
    }
    printf("waiting " P " rank=%d size=%d\n", rank, size);
    /* The fence cannot complete: the aborting rank never joins it. A PM may
     * kill this task or fail the fence; completing it is a bug. */
    int rc = PMI2_KVS_Fence();
    if (rc == PMI2_SUCCESS) gt_fail(P, rank, "fence-completed-after-abort");
    gt_fail(P, rank, "fence-failed-after-abort-rc-%d", rc);
}

static void mode_ring(void)
{
    char mine[64], left[PMI2_MAX_VALLEN + 1], right[PMI2_MAX_VALLEN + 1], wl[64], wr[64];
    int rrank = -1, ranks = -1, rc;

    snprintf(mine, sizeof mine, "ring-%d", rank);
    memset(left, 0, sizeof left);
    memset(right, 0, sizeof right);
    rc = PMIX_Ring(mine, &rrank, &ranks, left, right, PMI2_MAX_VALLEN);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "ring-rc-%d", rc);
    if (ranks != size) gt_fail(P, rank, "ring-ranks-%d-want-%d", ranks, size);
    if (rrank < 0 || rrank >= size) gt_fail(P, rank, "ring-rank-%d-out-of-range", rrank);
    /* Servers assign ring rank = PMI rank in practice; then the neighbours'
     * values are known exactly. */
    if (rrank == rank) {
        snprintf(wl, sizeof wl, "ring-%d", (rank - 1 + size) % size);
        snprintf(wr, sizeof wr, "ring-%d", (rank + 1) % size);
        if (strcmp(left, wl) != 0) gt_fail(P, rank, "ring-left-[%s]-want-[%s]", left, wl);
        if (strcmp(right, wr) != 0) gt_fail(P, rank, "ring-right-[%s]-want-[%s]", right, wr);
    }
    printf("ok " P " rank=%d step=ring ring-rank=%d ranks=%d left=%s right=%s\n", rank, rrank,
           ranks, left, right);
}

static void long_value(char *buf, int len, int r, int semi)
{
    for (int i = 0; i < len; i++) buf[i] = (char)('a' + (i + r) % 26);
    if (semi) {
        /* every 100th byte a ';': escaped to ";;" on the wire, so the line
         * is longer than the value */
        for (int i = 50; i < len; i += 100) buf[i] = ';';
    }
    snprintf(buf, 16, "<%d>", r);
    buf[strlen(buf)] = '-';
    buf[len] = 0;
}

static void mode_long(int len)
{
    static char val[PMI2_MAX_VALLEN * 2 + 2], want[PMI2_MAX_VALLEN * 2 + 2];
    char key[PMI2_MAX_KEYLEN];
    int vallen = 0, rc, peer = (rank + 1) % size;

    if (len < 16 || len > PMI2_MAX_VALLEN * 2) gt_fail(P, rank, "bad-len-%d", len);
    int nvar = nosemi ? 1 : 2;

    for (int semi = 0; semi < nvar; semi++) {
        snprintf(key, sizeof key, "long%d-%d", semi, rank);
        long_value(val, len, rank, semi);
        rc = PMI2_KVS_Put(key, val);
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "long-put-len-%d-semi-%d-rc-%d", len, semi, rc);
    }
    fence("long");
    for (int semi = 0; semi < nvar; semi++) {
        snprintf(key, sizeof key, "long%d-%d", semi, peer);
        long_value(want, len, peer, semi);
        memset(val, 0, sizeof val);
        get_key(key, val, sizeof val, &vallen, "long");
        if (vallen != len || strcmp(val, want) != 0)
            gt_fail(P, rank, "long-%s-vallen-%d-want-%d-match-%d", key, vallen, len,
                    strcmp(val, want) == 0);
        printf("ok " P " rank=%d step=long key=%s len=%d\n", rank, key, vallen);
    }
}

/* await_file waits up to 60 s for path to exist. */
static void await_file(const char *path, const char *why)
{
    for (int i = 0; access(path, F_OK) != 0; i++) {
        if (i == 6000) gt_fail(P, rank, "%s-no-%s-in-60s", why, path);
        usleep(10000);
    }
}

static void mode_late(const char *hold, const char *wait, int sleep_ms)
{
    char key[PMI2_MAX_KEYLEN], val[PMI2_MAX_VALLEN + 1], want[PMI2_MAX_VALLEN + 1];
    int vallen = 0, half = size / 2;

    snprintf(key, sizeof key, "late-k%d", rank);
    snprintf(val, sizeof val, "late value of rank %d", rank);
    if (PMI2_KVS_Put(key, val) != PMI2_SUCCESS) gt_fail(P, rank, "late-put");
    fence("late");
    if (rank >= half) {
        printf("ok " P " rank=%d step=late-gone pid=%d\n", rank, (int)getpid());
        if (hold[0]) await_file(hold, "late-hold");
        return;
    }
    if (wait[0]) {
        await_file(wait, "late-wait");
    } else {
        usleep(sleep_ms * 1000);
    }
    int peer = half + rank % (size - half);
    snprintf(key, sizeof key, "late-k%d", peer);
    snprintf(want, sizeof want, "late value of rank %d", peer);
    memset(val, 0, sizeof val);
    get_key(key, val, sizeof val, &vallen, "late");
    if (strcmp(val, want) != 0) gt_fail(P, rank, "late-%s-got-[%s]", key, val);
    printf("ok " P " rank=%d step=late-read peer=%d\n", rank, peer);
}

static void mode_hwloc(void)
{
    char val[PMI2_MAX_VALLEN + 1] = "", buf[4096];
    int found = 0, rc;
    size_t n;
    FILE *f;

    rc = PMI2_Info_GetJobAttr("PMI_hwloc_xmlfile", val, sizeof val, &found);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "jobattr-hwloc-rc-%d", rc);
    if (!found) gt_fail(P, rank, "jobattr-hwloc-not-found");
    f = fopen(val, "r");
    if (!f) gt_fail(P, rank, "hwloc-open-%s-errno-%d", val, errno);
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (!strstr(buf, "<?xml") || !strstr(buf, "<topology"))
        gt_fail(P, rank, "hwloc-not-a-topology-%s", val);
    printf("ok " P " rank=%d step=hwloc file=%s\n", rank, val);
}

static void mode_nohwloc(void)
{
    char val[PMI2_MAX_VALLEN + 1] = "";
    int found = 0, rc;

    rc = PMI2_Info_GetJobAttr("PMI_hwloc_xmlfile", val, sizeof val, &found);
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "jobattr-hwloc-rc-%d", rc);
    if (found) gt_fail(P, rank, "jobattr-hwloc-found-%s", val);
    printf("ok " P " rank=%d step=nohwloc\n", rank);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 && strchr(argv[1], '=') == NULL ? argv[1] : "default";
    int rc;

    gt_setup(P);
    nosemi = gt_has(argc, argv, "nosemi");
    init_common();
    if (strcmp(mode, "default") == 0)
        mode_default();
    else if (strcmp(mode, "ns") == 0)
        mode_ns();
    else if (strcmp(mode, "spawn") == 0)
        mode_spawn();
    else if (strcmp(mode, "child") == 0)
        mode_child();
    else if (strcmp(mode, "ns-serve") == 0)
        mode_ns_serve();
    else if (strcmp(mode, "ns-client") == 0)
        mode_ns_client();
    else if (strcmp(mode, "ns-peek") == 0)
        mode_ns_peek();
    else if (strcmp(mode, "xconnect-serve") == 0)
        mode_xconnect_serve();
    else if (strcmp(mode, "xconnect-client") == 0)
        mode_xconnect_client();
    else if (strcmp(mode, "xconnect-hold") == 0)
        mode_xconnect_hold();
    else if (strcmp(mode, "spawn-multi") == 0)
        mode_spawn_multi();
    else if (strcmp(mode, "spawn-multi-wdir") == 0)
        mode_spawn_multi_wdir();
    else if (strcmp(mode, "wchild") == 0)
        mode_wchild();
    else if (strcmp(mode, "mchild") == 0)
        mode_mchild();
    else if (strcmp(mode, "connect") == 0)
        mode_connect();
    else if (strcmp(mode, "connect-child") == 0)
        mode_connect_child();
    else if (strcmp(mode, "abort") == 0)
        mode_abort();
    else if (strcmp(mode, "ring") == 0)
        mode_ring();
    else if (strcmp(mode, "hwloc") == 0)
        mode_hwloc();
    else if (strcmp(mode, "nohwloc") == 0)
        mode_nohwloc();
    else if (strcmp(mode, "late") == 0)
        mode_late(gt_arg(argc, argv, "hold", ""), gt_arg(argc, argv, "wait", ""), atoi(gt_arg(argc, argv, "sleep", "300")));
    else if (strcmp(mode, "long") == 0)
        mode_long(atoi(gt_arg(argc, argv, "len", "1024")));
    else
        gt_fail(P, rank, "unknown-mode-%s", mode);

    rc = PMI2_Finalize();
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "finalize-rc-%d", rc);
    printf("ok " P " rank=%d size=%d mode=%s\n", rank, size, mode);
    return 0;
}
