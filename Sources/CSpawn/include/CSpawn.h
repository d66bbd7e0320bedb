#ifndef FLEETSET_CSPAWN_H
#define FLEETSET_CSPAWN_H

#include <spawn.h>

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34+), which glibc declares only with
/// _GNU_SOURCE: the child starts with no descriptor from `from` up.
int fleetset_spawn_close_from(posix_spawn_file_actions_t *actions, int from);

/// posix_spawn_file_actions_addchdir_np (glibc 2.29+), declared only with _GNU_SOURCE too: the
/// child starts in `path`.
int fleetset_spawn_chdir(posix_spawn_file_actions_t *actions, const char *path);

/// pipe2(ends, O_CLOEXEC), declared only with _GNU_SOURCE: a pipe whose ends no child inherits.
int fleetset_pipe_cloexec(int ends[2]);

#endif
