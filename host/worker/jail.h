/* host/worker/jail.h -- the jail of a moonbox worker process (part of moonbox-worker only). */
#ifndef MBX_HOST_WORKER_JAIL_H
#define MBX_HOST_WORKER_JAIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Right after the fork: die with the zygote (parent: getppid() while it lives; 0 in a pid
   namespace the zygote is not in), close every fd but keep_fd, no new privileges,
   not dumpable (no ptrace, no /proc/pid/mem of it), an unprivileged uid (as root: setuid to
   65534 "nobody" with no groups; otherwise the same non-root uid in the zygote's user
   namespace, mbxH_jail_user_namespace), no capabilities, no core dumps, a CPU-seconds limit
   over its life, no fd beyond keep_fd can be opened. 0, or -1 (the worker must exit). */
int mbxH_jail_process(int keep_fd, pid_t parent);
/* In the zygote, before any fork: the uid its workers and init drop to as root (the zygote's
   own, from the parent's exec.uids range; without it, nobody). */
void mbxH_jail_set_uid(uint32_t uid);
/* In a non-root zygote, once, before any fork: a new user namespace (with flags, e.g.
   CLONE_NEWNET | CLONE_NEWPID, made in the same call) mapping only its own uid and gid, and
   then no capability in it; every worker forked after inherits the namespace, so a worker
   costs a fork, as for root. 0; -1 when the kernel refuses (nothing changed: the workers
   keep the host's uid, seccomp is then the whole jail); -2 when the namespace was made but
   could not be completed (the zygote must exit). */
int mbxH_jail_user_namespace(int flags);
/* With the sandbox's limits known, under the filter: the address space (its slot plus
   overhead; none under ASan, whose shadow memory dwarfs any limit). 0, or -1 with why
   filled. */
int mbxH_jail_limits(size_t slot_bytes, size_t memory_limit, char *why, size_t why_size);
/* In the zygote, once, before any fork: warm glibc's lazy paths and compile the seccomp
   allow-list to BPF (libseccomp's compile costs about 0.7 ms; a worker then only patches its
   own pid into the program and loads it). 0, or -1 (workers then compile their own). */
int mbxH_jail_prepare(void);
/* The last step: glibc's lazy paths warmed, then the seccomp allow-list (anything else
   kills the process). 0, or -1 with why filled. */
int mbxH_jail_seccomp(char *why, size_t why_size);
/* The pid namespace's init, after mbxH_jail_process: a filter that lets it only wait for
   signals and exit (anything else kills it). 0, 1 (no filter for this architecture), or -1. */
int mbxH_jail_init_filter(void);

/* What the jail applied in this process so far (the zygote's probe child reports it): the
   MBXH_JAIL_* bits of the protocol (host/backend/worker_proto.h). */
int mbxH_jail_applied(void);

#endif
