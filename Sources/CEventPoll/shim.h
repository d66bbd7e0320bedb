// CEventPoll: Linux's epoll and eventfd for Swift (Glibc's module map does not export them).
//
// Only the `Curl` target imports this: its transfer thread waits on the sockets libcurl's
// multi_socket API asks it to watch, and on an eventfd that other threads write to wake it.

#ifndef FLEETSET_CEVENTPOLL_SHIM_H
#define FLEETSET_CEVENTPOLL_SHIM_H

#include <sys/epoll.h>
#include <sys/eventfd.h>

#endif
