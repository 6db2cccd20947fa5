/* Collects diagnostics and prints them with the offending source line and a caret, or hands
 * them as records to the sink a caller set on its thread (dm_front_capture). */
#include "diag.h"
#include "compiler.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct dm_diag_note {
    struct dm_diag_note *next;
    dm_loc loc;
    char text[];
} dm_diag_note;

struct dm_diag_msg {
    dm_loc loc;
    int is_error;
    int seq; /* report order, to keep the sort stable */
    char *text;
    dm_diag_note *notes; /* in the order added */
};

/* The sink of this thread's front-end runs, and its argument (dm_front_capture). */
static _Thread_local dm_diagnostic_sink capture_sink;
static _Thread_local void *capture_user;

void dm_front_capture(dm_diagnostic_sink sink, void *user)
{
    capture_sink = sink;
    capture_user = user;
}

void dm_diag_init(dm_diag *d, FILE *out, const char *file, const char *source, size_t len)
{
    memset(d, 0, sizeof *d);
    d->out = out ? out : stderr;
    d->file = file;
    d->source = source;
    d->source_len = len;
}

static void add(dm_diag *d, dm_loc loc, int is_error, const char *fmt, va_list ap)
{
    if (is_error)
        d->nerrors++;
    else
        d->nwarnings++;
    /* Beyond the cap nothing more is printed; keep memory bounded on hostile input. */
    if (d->nmsgs >= 4 * DM_MAX_ERRORS) return;
    if (d->nmsgs == d->cap) {
        int cap = d->cap ? 2 * d->cap : 16;
        dm_diag_msg *m = realloc(d->msgs, (size_t)cap * sizeof *m);
        if (!m) abort();
        d->msgs = m;
        d->cap = cap;
    }
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    /* The same mistake reached twice (a definition inlined at two calls): said once. */
    for (int i = 0; i < d->nmsgs; i++) {
        const dm_diag_msg *o = &d->msgs[i];
        if (o->loc.file == loc.file && o->loc.line == loc.line && o->loc.col == loc.col &&
            o->is_error == is_error && strcmp(o->text, buf) == 0) {
            if (is_error)
                d->nerrors--;
            else
                d->nwarnings--;
            return;
        }
    }
    dm_diag_msg *m = &d->msgs[d->nmsgs];
    size_t len = strlen(buf) + 1;
    m->text = malloc(len);
    if (!m->text) abort();
    memcpy(m->text, buf, len);
    m->loc = loc;
    m->is_error = is_error;
    m->notes = NULL;
    m->seq = d->nmsgs++;
}

int dm_diag_mark(const dm_diag *d)
{
    return d->nmsgs;
}

void dm_note_since(dm_diag *d, int mark, dm_loc loc, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (int i = mark; i < d->nmsgs; i++) {
        dm_diag_msg *m = &d->msgs[i];
        dm_diag_note *n = malloc(sizeof *n + strlen(buf) + 1);
        if (!n) abort();
        n->next = NULL;
        n->loc = loc;
        strcpy(n->text, buf);
        dm_diag_note **end = &m->notes;
        while (*end) end = &(*end)->next;
        *end = n;
    }
}

void dm_error(dm_diag *d, dm_loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add(d, loc, 1, fmt, ap);
    va_end(ap);
}

void dm_warning(dm_diag *d, dm_loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add(d, loc, 0, fmt, ap);
    va_end(ap);
}

int dm_diag_full(const dm_diag *d)
{
    return d->nerrors >= DM_MAX_ERRORS;
}

static int by_position(const void *pa, const void *pb)
{
    const dm_diag_msg *a = pa, *b = pb;
    if (a->loc.file != b->loc.file) return a->loc.file < b->loc.file ? -1 : 1;
    if (a->loc.line != b->loc.line) return a->loc.line < b->loc.line ? -1 : 1;
    if (a->loc.col != b->loc.col) return a->loc.col < b->loc.col ? -1 : 1;
    return a->seq - b->seq;
}

/* The name of the file that LOC points into. */
static const char *file_name(const dm_diag *d, dm_loc loc)
{
    if (loc.file > 0 && d->model && loc.file < d->model->sources.n)
        return d->model->sources.items[loc.file]->path;
    return d->file;
}

/* The source line of LOC and its length, or NULL past the end. */
static const char *find_line(const dm_diag *d, dm_loc loc, size_t *len)
{
    const char *source = d->source;
    size_t source_len = d->source_len;
    if (loc.file > 0 && d->model && loc.file < d->model->sources.n) {
        source = d->model->sources.items[loc.file]->text;
        source_len = d->model->sources.items[loc.file]->len;
    }
    int line = loc.line;
    if (!source || line < 1) return NULL;
    const char *p = source, *end = source + source_len;
    for (int l = 1; l < line; l++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) return NULL;
        p = nl + 1;
    }
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    *len = (size_t)((nl ? nl : end) - p);
    if (*len > 0 && p[*len - 1] == '\r') (*len)--;
    return p;
}

/* The line as it is (control characters but tabs shown as spaces), then a caret under
 * byte column COL: tabs are kept so that the caret lines up however wide a tab is, and
 * UTF-8 continuation bytes take no room. */
static void print_caret(FILE *out, const char *line, size_t len, int col)
{
    fputs("    ", out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)line[i];
        fputc(c == '\t' || c >= 0x20 ? c : ' ', out);
    }
    fputs("\n    ", out);
    for (size_t i = 0; i + 1 < (size_t)col && i < len; i++) {
        unsigned char c = (unsigned char)line[i];
        if (c == '\t')
            fputc('\t', out);
        else if ((c & 0xC0) != 0x80)
            fputc(' ', out);
    }
    fputs("^\n", out);
}

/* "file:line:col: KIND: text", the line and a caret, on OUT. */
static void print_message_to(FILE *out, const dm_diag *d, dm_loc loc, const char *kind,
                             const char *text)
{
    fprintf(out, "%s:%d:%d: %s: %s\n", file_name(d, loc), loc.line, loc.col, kind, text);
    size_t len;
    const char *line = find_line(d, loc, &len);
    if (line) print_caret(out, line, len, loc.col);
}

/* One message printed, or handed to the thread's sink as a record with its printed text. */
static void emit(const dm_diag *d, dm_loc loc, const char *kind, const char *text)
{
    if (!capture_sink) {
        print_message_to(d->out, d, loc, kind, text);
        return;
    }
    char *printed = NULL;
    size_t size = 0;
    FILE *mem = open_memstream(&printed, &size);
    if (!mem) abort();
    print_message_to(mem, d, loc, kind, text);
    fclose(mem);
    dm_diagnostic rec = {file_name(d, loc), loc.line, loc.col, kind, text, printed};
    capture_sink(capture_user, &rec);
    free(printed);
}

void dm_diag_flush(dm_diag *d)
{
    if (d->nmsgs > 1) qsort(d->msgs, (size_t)d->nmsgs, sizeof *d->msgs, by_position);
    int shown_errors = 0;
    for (int i = 0; i < d->nmsgs; i++) {
        dm_diag_msg *m = &d->msgs[i];
        if (m->is_error && shown_errors == DM_MAX_ERRORS) continue;
        shown_errors += m->is_error;
        emit(d, m->loc, m->is_error ? "error" : "warning", m->text);
        for (const dm_diag_note *n = m->notes; n; n = n->next) emit(d, n->loc, "note", n->text);
    }
    if (d->nerrors >= DM_MAX_ERRORS) {
        char line[160];
        snprintf(line, sizeof line, "too many errors: stopped after the first %d", DM_MAX_ERRORS);
        if (capture_sink) {
            /* a line about the file as a whole: no position */
            char printed[1200];
            snprintf(printed, sizeof printed, "%s: %s\n", d->file, line);
            dm_diagnostic rec = {d->file, 0, 0, "error", line, printed};
            capture_sink(capture_user, &rec);
        } else {
            fprintf(d->out, "%s: %s\n", d->file, line);
        }
    }
    for (int i = 0; i < d->nmsgs; i++) {
        free(d->msgs[i].text);
        for (dm_diag_note *n = d->msgs[i].notes, *next; n; n = next) {
            next = n->next;
            free(n);
        }
    }
    free(d->msgs);
    d->msgs = NULL;
    d->nmsgs = d->cap = 0;
}
