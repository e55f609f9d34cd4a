/* SPDX-License-Identifier: MIT */
/* trace.c - Chrome/Perfetto trace-event JSON ("X" complete events, one
 * track per worker). */
#include <time.h>

#include "base/exi_trace.h"

uint64_t exi_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *const kind_names[] = { "run", "steal", "park" };

/* Writes s as the contents of a JSON string. */
static void put_json_string(FILE *f, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
}

int exi_trace_write(const char *path, const exi_trace_buf *bufs, const char *const *names, unsigned n,
                    uint64_t origin_ns) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"cexec pool\"}}");
    for (unsigned w = 0; w < n; w++) {
        fprintf(f, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"args\":{\"name\":\"", w);
        put_json_string(f, names[w]);
        fprintf(f, "\"}}");
        if (bufs[w].dropped)
            fprintf(f, ",\n{\"name\":\"dropped %llu events\",\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":%u,\"ts\":0}",
                    (unsigned long long)bufs[w].dropped, w);
        for (uint32_t i = 0; i < bufs[w].count; i++) {
            const exi_trace_event *e = &bufs[w].events[i];
            double ts = (double)(e->begin_ns - origin_ns) / 1000.0;
            double dur = (double)(e->end_ns - e->begin_ns) / 1000.0;
            fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"pool\",\"ph\":\"X\",\"pid\":1,\"tid\":%u,\"ts\":%.3f,\"dur\":%.3f}",
                    kind_names[e->kind], w, ts, dur);
        }
    }
    fprintf(f, "\n]}\n");
    return fclose(f) == 0 ? 0 : -1;
}
