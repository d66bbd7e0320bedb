/* Baseline for the HTTP client benchmark: libcurl used directly from C.
 *
 * One easy handle, reused for every request (so its connection is kept alive), sends
 * `If-None-Match` and gets 304. Prints, per round, the process CPU time (user + system) per
 * request in microseconds, the way CurlBenchmark measures the Swift client.
 *
 * usage: bench304 URL CAFILE ETAG REQUESTS ROUNDS
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "baseline.h"

int main(int argc, char **argv) {
    if (argc != 6) { fprintf(stderr, "usage: %s URL CAFILE ETAG REQUESTS ROUNDS\n", argv[0]); return 2; }
    long requests = atol(argv[4]), rounds = atol(argv[5]);
    char condition[256];
    snprintf(condition, sizeof condition, "If-None-Match: %s", argv[3]);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURL *easy = curl_easy_init();
    struct curl_slist *headers = curl_slist_append(NULL, condition);
    curl_easy_setopt(easy, CURLOPT_URL, argv[1]);
    curl_easy_setopt(easy, CURLOPT_CAINFO, argv[2]);
    curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(easy, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, discard);
    for (long round = 0; round <= rounds; round++) {  /* round 0 warms up */
        double start = cpu_microseconds();
        for (long i = 0; i < requests; i++) {
            long status = 0;
            CURLcode code = curl_easy_perform(easy);
            curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
            if (code != CURLE_OK || status != 304) {
                fprintf(stderr, "request %ld: %s, status %ld\n", i, curl_easy_strerror(code), status);
                return 1;
            }
        }
        if (round > 0) printf("%.2f\n", (cpu_microseconds() - start) / requests);
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    curl_global_cleanup();
    return 0;
}
