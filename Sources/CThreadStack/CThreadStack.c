#define _GNU_SOURCE
#include <pthread.h>
#include "CThreadStack.h"

__attribute__((noinline)) void *cthreadstack_position(void) {
    return __builtin_frame_address(0);
}

int cthreadstack_current(void **lowest, size_t *size) {
    pthread_attr_t attributes;
    int result = pthread_getattr_np(pthread_self(), &attributes);
    if (result != 0) return result;
    result = pthread_attr_getstack(&attributes, lowest, size);
    pthread_attr_destroy(&attributes);
    return result;
}
