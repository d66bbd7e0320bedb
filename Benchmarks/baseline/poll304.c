/* Baseline for the agent's CPU per poll: libcurl used directly from C at the agent's cadence.
 *
 * One easy handle, reused (its connection kept alive), sends GET with `Authorization` and
 * `If-None-Match` every INTERVAL_MS milliseconds for SECONDS seconds, as fleetsetd does with
 * `longPollWait` 0 and `pollInterval` 0.1, and expects 304. Prints the number of polls and the
 * process's CPU time (user + system) per poll in microseconds.
 *
 * usage: poll304 URL TOKEN ETAG INTERVAL_MS SECONDS
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "baseline.h"
#include <time.h>

static double now_seconds(void) {
    struct timespec spec;
    clock_gettime(CLOCK_MONOTONIC, &spec);
    return spec.tv_sec + spec.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: %s URL TOKEN ETAG INTERVAL_MS SECONDS\n", argv[0]); return 2; }
    long interval = atol(argv[4]);
    double seconds = atof(argv[5]);
    char authorization[1024], condition[256];
    snprintf(authorization, sizeof authorization, "Authorization: Bearer %s", argv[2]);
    snprintf(condition, sizeof condition, "If-None-Match: %s", argv[3]);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *easy = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(curl_slist_append(NULL, authorization), condition);
    curl_easy_setopt(easy, CURLOPT_URL, argv[1]);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
    double start_cpu = cpu_microseconds(), end = now_seconds() + seconds;
    long polls = 0;
    while (now_seconds() < end) {
        long status = 0;
        CURLcode code = curl_easy_perform(easy);
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        if (code != CURLE_OK || status != 304) {
            fprintf(stderr, "poll %ld: %s, status %ld\n", polls, curl_easy_strerror(code), status);
            return 1;
        }
        polls++;
        struct timespec pause = {interval / 1000, (interval % 1000) * 1000000L};
        nanosleep(&pause, NULL);
    }
    printf("polls=%ld cpu_us_per_poll=%.0f\n", polls, (cpu_microseconds() - start_cpu) / polls);
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    curl_global_cleanup();
    return 0;
}
