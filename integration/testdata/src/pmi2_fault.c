/*
 * pmi2_fault - a task of the fault matrix (integration/fault_test.go), over
 * Slurm's libpmi2.
 *
 * Args: phase=<init|fence|spawn|finalized> dir=<D> [die=<exit|kill|stop>]
 *       [child]
 * Every process writes D/task.<pid> (its rank, or "child") when it starts.
 * Each rank then goes to the phase and writes D/at.<phase>.<rank> there:
 *   init       before PMI2_Init
 *   fence      after init, before its first fence (rank 0 enters the fence
 *              at once, the others only once D/go exists: the fence stays
 *              open until then)
 *   spawn      after init: rank 0 spawns one copy of this program ("child",
 *              which writes D/at.spawn.child and waits for D/go before its
 *              own init), then writes its marker
 *   finalized  after init, a fence and PMI2_Finalize
 * Rank 1 dies there when die= is given (exit: exit(1); kill: SIGKILL
 * itself; stop: SIGSTOP itself, never resumed). In the spawn phase rank 1
 * waits for rank 0's marker first, so the spawn happened. The others wait
 * for D/go (30 s at most), then carry on to the end: init, fence, finalize.
 * With "ignore", a rank whose fence fails says so and hangs (30 s)
 * instead of exiting.
 * Lines: "ok fault rank=R phase=P" at the end.
 */
#include <errno.h>
#include <signal.h>
#include <slurm/pmi2.h>

#include "gopmi_test.h"

#define P "fault"

static const char *dir;

static int exists(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static void mark(const char *name, const char *what)
{
    char path[4096], tmp[4200];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    f = fopen(tmp, "w");
    if (!f) gt_fail(P, gt_rank_hint(), "marker-%s-errno-%d", name, errno);
    fprintf(f, "%s\n", what);
    fclose(f);
    rename(tmp, path);
}

static void wait_for(const char *name)
{
    for (int i = 0; i < 3000 && !exists(name); i++) usleep(10000);
}

static void die_here(const char *how)
{
    fflush(stdout);
    if (strcmp(how, "exit") == 0) exit(1);
    if (strcmp(how, "kill") == 0) kill(getpid(), SIGKILL);
    if (strcmp(how, "stop") == 0) {
        kill(getpid(), SIGSTOP);
        /* Resumed after all (the test kills stopped tasks it finds). */
        pause();
    }
    gt_fail(P, gt_rank_hint(), "die-%s-unknown", how);
}

int main(int argc, char **argv)
{
    const char *phase = gt_arg(argc, argv, "phase", "fence");
    const char *die = gt_arg(argc, argv, "die", "");
    int child = gt_has(argc, argv, "child");
    int spawned = 0, size = 0, rank = gt_rank_hint(), appnum = 0, rc;
    char jobid[256], name[512], self[64] = "";

    dir = gt_arg(argc, argv, "dir", ".");
    gt_setup(P);
    snprintf(name, sizeof name, "task.%d", (int)getpid());
    if (child)
        snprintf(self, sizeof self, "child");
    else
        snprintf(self, sizeof self, "%d", rank);
    mark(name, self);
    int victim = !child && rank == 1 && die[0] != 0;

    if (child) {
        mark("at.spawn.child", "child");
        wait_for("go");
        gt_pmi2_init(P, &spawned, &size, &rank, &appnum, jobid, sizeof jobid);
        rc = PMI2_Finalize();
        if (rc != PMI2_SUCCESS) gt_fail(P, rank, "child-finalize-rc-%d", rc);
        printf("ok " P " rank=%d phase=child\n", rank);
        return 0;
    }
    snprintf(name, sizeof name, "at.%s.%d", phase, rank);
    if (strcmp(phase, "init") == 0) {
        mark(name, self);
        if (victim) die_here(die);
        wait_for("go");
    }
    gt_pmi2_init(P, &spawned, &size, &rank, &appnum, jobid, sizeof jobid);
    if (strcmp(phase, "fence") == 0) {
        mark(name, self);
        if (victim) die_here(die);
        if (rank != 0) wait_for("go");
    } else if (strcmp(phase, "spawn") == 0) {
        if (rank == 0) {
            char dirarg[4200];
            const char *cargv[] = {"phase=spawn", dirarg, "child", NULL};
            int cargc[1] = {3}, cmaxprocs[1] = {1}, cinfokeys[1] = {0}, errcodes[1] = {0};
            const char *cmds[1] = {argv[0]};
            const char **cargvs[1] = {cargv};
            const struct MPID_Info *cinfos[1] = {NULL};
            char childjob[256];
            snprintf(dirarg, sizeof dirarg, "dir=%s", dir);
            rc = PMI2_Job_Spawn(1, cmds, cargc, cargvs, cmaxprocs, cinfokeys, cinfos, 0, NULL,
                                childjob, sizeof childjob, errcodes);
            if (rc != PMI2_SUCCESS) gt_fail(P, rank, "spawn-rc-%d", rc);
            mark(name, self);
        } else {
            snprintf(name, sizeof name, "at.%s.0", phase);
            wait_for(name);
            snprintf(name, sizeof name, "at.%s.%d", phase, rank);
            mark(name, self);
            if (victim) die_here(die);
        }
        wait_for("go");
    }
    rc = PMI2_KVS_Fence();
    if (rc != PMI2_SUCCESS) {
        if (gt_has(argc, argv, "ignore")) {
            /* A rank that goes on after its fence failed, and hangs. */
            printf("ok " P " rank=%d ignores its failed fence rc=%d\n", rank, rc);
            fflush(stdout);
            sleep(30);
        }
        gt_fail(P, rank, "fence-fault-rc-%d", rc);
    }
    rc = PMI2_Finalize();
    if (rc != PMI2_SUCCESS) gt_fail(P, rank, "finalize-rc-%d", rc);
    if (strcmp(phase, "finalized") == 0) {
        mark(name, self);
        if (victim) die_here(die);
        wait_for("go");
    }
    printf("ok " P " rank=%d phase=%s\n", rank, phase);
    return 0;
}
