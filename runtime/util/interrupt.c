/* SIGINT/SIGTERM as a flag that long loops poll, critical sections, child processes that
 * stop with us, and threads beside the path (see interrupt.h). */
#define _GNU_SOURCE
#include "util/interrupt.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal, taken_signal;

static void on_signal(int sig)
{
    if (!stop_signal) stop_signal = sig;
}

void dm_interrupt_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* SA_RESETHAND: a second signal kills at once; SA_RESTART: reads and writes go on. */
    sa.sa_flags = SA_RESETHAND | SA_RESTART;
    const int sigs[] = {SIGINT, SIGTERM};
    for (int i = 0; i < 2; i++) {
        struct sigaction old;
        /* A signal ignored by the parent (nohup, a background job) stays ignored. */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
}

int dm_stop_requested(void)
{
    return stop_signal;
}

int dm_stop_take(void)
{
    int sig = stop_signal;
    if (sig) {
        taken_signal = sig;
        stop_signal = 0;
    }
    return sig;
}

int dm_stop_taken(void)
{
    return taken_signal;
}

int dm_stop_error(void)
{
    int sig = stop_signal ? stop_signal : taken_signal;
    return dm_set_error("interrupted by %s", sig == SIGTERM  ? "SIGTERM"
                                             : sig == SIGINT ? "SIGINT"
                                                             : "a signal");
}

void dm_interrupt_block(sigset_t *saved)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, saved);
}

void dm_interrupt_unblock(const sigset_t *saved)
{
    pthread_sigmask(SIG_SETMASK, saved, NULL);
}

int dm_run_child(char *const argv[], const char *log_path)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return dm_set_error("cannot start %s: %s", argv[0], strerror(errno));
    if (pid == 0) {
        /* Its own group: a signal reaches the child and its children through us only, so
         * that we know of it and wait for them. */
        setpgid(0, 0); /* exec resets our handlers; a signal ignored stays ignored */
        if (log_path) {
            int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
            if (fd >= 0) {
                dup2(fd, 1);
                dup2(fd, 2);
                close(fd);
            }
        }
        execvp(argv[0], argv);
        fprintf(stderr, "dimoc: error: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so that the group exists before any kill below */
    int forwarded = 0, status = 0;
    for (;;) {
        pid_t got = waitpid(pid, &status, WNOHANG);
        if (got == pid) break;
        if (got < 0 && errno != EINTR)
            return dm_set_error("waiting for %s: %s", argv[0], strerror(errno));
        int sig = stop_signal;
        if (sig && !forwarded) {
            kill(-pid, sig);
            forwarded = 1;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    /* The child's own children (a pipeline's dimoc commands) may still be removing their
     * temporary outputs: wait for the group to empty (at most 30 s). */
    for (int i = 0; forwarded && i < 1500 && kill(-pid, 0) == 0; i++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

void dm_thread_background(void)
{
    const id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    const int nice_now = getpriority(PRIO_PROCESS, tid);
    if (nice_now == -1 && errno != 0) return;
    const int lower = nice_now + 10;
    (void)setpriority(PRIO_PROCESS, tid, lower > 19 ? 19 : lower);
}
