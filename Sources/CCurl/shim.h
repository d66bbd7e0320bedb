// CCurl: libcurl for Swift.
//
// Swift cannot call C variadic functions, so this header holds one typed, non-variadic
// `static inline` wrapper per argument type of libcurl's three variadic calls. Nothing else
// lives here: all logic is in the `Curl` Swift target, the only module that imports CCurl.

#ifndef FLEETSET_CCURL_SHIM_H
#define FLEETSET_CCURL_SHIM_H

#include <curl/curl.h>

// MARK: - curl_easy_setopt

/// Replaces `curl_easy_setopt(handle, option, long)` for CURLOPTTYPE_LONG options.
static inline CURLcode ccurl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

/// Replaces `curl_easy_setopt(handle, option, curl_off_t)` for CURLOPTTYPE_OFF_T options.
static inline CURLcode ccurl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/// Replaces `curl_easy_setopt(handle, option, char *)` for CURLOPTTYPE_STRINGPOINT options
/// (libcurl copies the string) and for CURLOPT_COPYPOSTFIELDS.
static inline CURLcode ccurl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

/// Replaces `curl_easy_setopt(handle, option, void *)` for CURLOPTTYPE_CBPOINT / OBJECTPOINT
/// options that carry callback context (CURLOPT_WRITEDATA, CURLOPT_HEADERDATA, CURLOPT_PRIVATE, ...).
static inline CURLcode ccurl_easy_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

/// Replaces `curl_easy_setopt(handle, option, struct curl_slist *)` for CURLOPTTYPE_SLISTPOINT options.
static inline CURLcode ccurl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

/// Replaces `curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION or CURLOPT_HEADERFUNCTION, fn)`.
static inline CURLcode ccurl_easy_setopt_write_callback(CURL *handle, CURLoption option, curl_write_callback value) {
    return curl_easy_setopt(handle, option, value);
}

/// Replaces `curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, fn)`.
static inline CURLcode ccurl_easy_setopt_xferinfo_callback(CURL *handle, CURLoption option, curl_xferinfo_callback value) {
    return curl_easy_setopt(handle, option, value);
}

// MARK: - curl_easy_getinfo

/// Replaces `curl_easy_getinfo(handle, info, long *)` for CURLINFO_LONG values.
static inline CURLcode ccurl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// Replaces `curl_easy_getinfo(handle, info, curl_off_t *)` for CURLINFO_OFF_T values.
static inline CURLcode ccurl_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

/// Replaces `curl_easy_getinfo(handle, info, char **)` for CURLINFO_STRING values.
static inline CURLcode ccurl_easy_getinfo_string(CURL *handle, CURLINFO info, char **value) {
    return curl_easy_getinfo(handle, info, value);
}

// MARK: - curl_multi_setopt

/// Replaces `curl_multi_setopt(handle, option, long)` for CURLMOPTTYPE_LONG options.
static inline CURLMcode ccurl_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

/// Replaces `curl_multi_setopt(handle, option, void *)` for CURLMOPT_SOCKETDATA and CURLMOPT_TIMERDATA.
static inline CURLMcode ccurl_multi_setopt_pointer(CURLM *handle, CURLMoption option, void *value) {
    return curl_multi_setopt(handle, option, value);
}

/// Replaces `curl_multi_setopt(handle, CURLMOPT_SOCKETFUNCTION, fn)`.
static inline CURLMcode ccurl_multi_setopt_socket_callback(CURLM *handle, curl_socket_callback value) {
    return curl_multi_setopt(handle, CURLMOPT_SOCKETFUNCTION, value);
}

/// Replaces `curl_multi_setopt(handle, CURLMOPT_TIMERFUNCTION, fn)`.
static inline CURLMcode ccurl_multi_setopt_timer_callback(CURLM *handle, curl_multi_timer_callback value) {
    return curl_multi_setopt(handle, CURLMOPT_TIMERFUNCTION, value);
}

#endif
