#ifndef FLEETSET_CSPAWN_H
#define FLEETSET_CSPAWN_H

#include <spawn.h>

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34+), which glibc declares only with
/// _GNU_SOURCE: the child starts with no descriptor from `from` up.
int fleetset_spawn_close_from(posix_spawn_file_actions_t *actions, int from);

#endif
