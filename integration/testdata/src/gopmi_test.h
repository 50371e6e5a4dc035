/*
 * gopmi_test.h - shared helpers for the gopmi real-client test programs.
 *
 * Every program prints machine-checkable lines on stdout:
 *   ok <what> rank=R size=N ...      a step passed
 *   fail <what> rank=R reason=...    a step failed (the program then exits 1)
 *   cpu_us=<n> rank=R                the task's own CPU time (getrusage SELF)
 *
 * Every blocking wait is bounded by alarm(2): GOPMI_TEST_ALARM seconds
 * (default GT_DEFAULT_ALARM). When it fires the program prints a fail line
 * and exits 3, so a broken server makes the test fail instead of hang.
 */
#ifndef GOPMI_TEST_H
#define GOPMI_TEST_H

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define GT_UNUSED __attribute__((unused))
#define GT_DEFAULT_ALARM 300
#define GT_EXIT_FAIL 1
#define GT_EXIT_TIMEOUT 3

/* Preformatted so the signal handler only needs write(2). */
static char gt_alarm_msg[256];
static size_t gt_alarm_len;

static GT_UNUSED void gt_on_alarm(int sig)
{
    (void)sig;
    if (gt_alarm_len > 0) {
        ssize_t w = write(STDOUT_FILENO, gt_alarm_msg, gt_alarm_len);
        (void)w;
    }
    _exit(GT_EXIT_TIMEOUT);
}

/* gt_rank_hint is the rank from the launcher's environment, known before
 * any PMI call, so a timeout during init can still say which rank hung. */
static GT_UNUSED int gt_rank_hint(void)
{
    const char *s = getenv("PMI_RANK");
    if (s == NULL) s = getenv("PMI_ID");
    return s ? atoi(s) : -1;
}

/* gt_setup makes stdout line-buffered (the launcher reads a pipe and a task
 * killed by abort must not lose lines) and arms the alarm. */
static GT_UNUSED void gt_setup(const char *prog)
{
    unsigned secs = GT_DEFAULT_ALARM;
    const char *s = getenv("GOPMI_TEST_ALARM");
    struct sigaction sa;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (s != NULL && atoi(s) > 0) secs = (unsigned)atoi(s);
    snprintf(gt_alarm_msg, sizeof gt_alarm_msg,
             "fail %s rank=%d reason=timeout-after-%us\n", prog, gt_rank_hint(), secs);
    gt_alarm_len = strlen(gt_alarm_msg);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = gt_on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    alarm(secs);
}

/* gt_fail prints a fail line (reason must be one token or quoted by the
 * caller) and exits non-zero. */
static GT_UNUSED void gt_fail(const char *prog, int rank, const char *fmt, ...)
{
    va_list ap;
    printf("fail %s rank=%d reason=", prog, rank);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    /* Launchers such as hydra tear the job down as soon as one task exits
     * non-zero and may drop output they have not forwarded yet; a short
     * pause lets this line (and the other ranks' lines) reach the user. */
    usleep(200000);
    exit(GT_EXIT_FAIL);
}

static GT_UNUSED long long gt_cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000LL +
           (long long)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static GT_UNUSED long long gt_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* gt_print_cpu is the line the benchmark sums to subtract the tasks' own CPU
 * from the launcher tree's CPU; call it as the very last thing. */
static GT_UNUSED void gt_print_cpu(int rank)
{
    printf("cpu_us=%lld rank=%d\n", gt_cpu_us(), rank);
    fflush(stdout);
}

/* gt_arg returns the value of "name=value" among argv, or def. */
static GT_UNUSED const char *gt_arg(int argc, char **argv, const char *name, const char *def)
{
    size_t n = strlen(name);
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], name, n) == 0 && argv[i][n] == '=') return argv[i] + n + 1;
    }
    return def;
}

static GT_UNUSED int gt_has(int argc, char **argv, const char *word)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], word) == 0) return 1;
    }
    return 0;
}

/* Helpers for the two client libraries; each is compiled only when the
 * program included the library's header before this one. */

#ifdef MPI_VERSION
/* gt_mpi_init runs MPI_Init and reads the rank and size of MPI_COMM_WORLD;
 * a failed init is a fail line with the launcher's rank. */
static GT_UNUSED void gt_mpi_init(const char *prog, int *argc, char ***argv, int *rank, int *size)
{
    int rc = MPI_Init(argc, argv);
    if (rc != MPI_SUCCESS) gt_fail(prog, gt_rank_hint(), "MPI_Init-rc-%d", rc);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
}

static GT_UNUSED void gt_mpi_finalize(const char *prog, int rank)
{
    int rc = MPI_Finalize();
    if (rc != MPI_SUCCESS) gt_fail(prog, rank, "MPI_Finalize-rc-%d", rc);
}
#endif

#ifdef PMI2_H_INCLUDED
/* gt_pmi2_init runs PMI2_Init and reads the job id into jobid. */
static GT_UNUSED void gt_pmi2_init(const char *prog, int *spawned, int *size, int *rank, int *appnum,
                                   char *jobid, int jobidlen)
{
    int rc = PMI2_Init(spawned, size, rank, appnum);
    if (rc != PMI2_SUCCESS) gt_fail(prog, gt_rank_hint(), "PMI2_Init-rc-%d", rc);
    rc = PMI2_Job_GetId(jobid, jobidlen);
    if (rc != PMI2_SUCCESS) gt_fail(prog, *rank, "Job_GetId-rc-%d", rc);
}

/* gt_pmi2_fence is PMI2_KVS_Fence; why names the fence in a fail line. */
static GT_UNUSED void gt_pmi2_fence(const char *prog, int rank, const char *why)
{
    int rc = PMI2_KVS_Fence();
    if (rc != PMI2_SUCCESS) gt_fail(prog, rank, "fence-%s-rc-%d", why, rc);
}
#endif

#endif
