/*
 * fake_request.h - one HTTP request to a fake service (its control
 * endpoints or its API) with curl's easy interface, for the tests' fake
 * clients (tests/e2b/fake_service.c, tests/k8s/k8s_stack.c).
 */
#ifndef SBX_TEST_FAKE_REQUEST_H
#define SBX_TEST_FAKE_REQUEST_H

#include <curl/curl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fake_request_body {
    char *p;
    size_t len;
};

static inline size_t fake_request_data(char *d, size_t sz, size_t n, void *ud)
{
    struct fake_request_body *b = ud;
    char *np = realloc(b->p, b->len + sz * n + 1);
    if (!np)
        return 0;
    memcpy(np + b->len, d, sz * n);
    b->p = np;
    b->len += sz * n;
    b->p[b->len] = '\0';
    return sz * n;
}

/*
 * method base+path with a JSON body (may be NULL) and one extra header
 * line (may be NULL); ca (may be NULL) the CA file for https, timeout_s 0
 * for none. The response body malloc'd (NUL-terminated) and the status in
 * *status (may be NULL); NULL on a transport failure.
 */
static inline char *fake_request(const char *base, const char *method, const char *path,
                                 const char *body, const char *header, const char *ca,
                                 long timeout_s, long *status)
{
    CURL *c = curl_easy_init();
    if (!c)
        return NULL;
    char url[1024];
    snprintf(url, sizeof url, "%s%s", base, path);
    struct fake_request_body b = {calloc(1, 1), 0};
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (header)
        h = curl_slist_append(h, header);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (ca)
        curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (timeout_s > 0)
        curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, fake_request_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (status)
        *status = code;
    if (rc != CURLE_OK) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

#endif
