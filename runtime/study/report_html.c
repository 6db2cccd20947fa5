/* The group report, one HTML page that needs nothing but itself and the pictures beside it:
 * inline CSS, an inline script that sorts the tables (the page reads whole without it), no
 * fonts, scripts or styles from elsewhere.  Every text from a qc file is escaped; picture
 * paths are percent-encoded and relative to group/, so the folder can be moved or served. */
#include "study/report_html.h"
#include "util/error.h"

#include <math.h>
#include <string.h>

/* The table's numbers as text, the same in the page and in the TSV (qc_group.c). */
const char *dm_qc_format(char *buf, size_t size, double v, int is_count)
{
    if (isnan(v))
        snprintf(buf, size, "n/a");
    else if (isinf(v))
        snprintf(buf, size, v > 0 ? "inf" : "-inf");
    else if (is_count)
        snprintf(buf, size, "%.0f", v);
    else
        snprintf(buf, size, "%.6g", v);
    return buf;
}

const char *dm_qc_format_z(char *buf, size_t size, double z)
{
    if (isnan(z) || isinf(z)) return dm_qc_format(buf, size, z, 0);
    snprintf(buf, size, "%.3f", z == 0 ? 0.0 : z); /* no "-0.000" */
    if (!strcmp(buf, "-0.000")) snprintf(buf, size, "0.000");
    return buf;
}

#ifndef DIMOC_VERSION
#define DIMOC_VERSION "unknown"
#endif

static const char page_style[] =
    "*{box-sizing:border-box}\n"
    "body{margin:0 auto;max-width:1500px;padding:1.2rem 1.5rem 3rem;color:#1d2330;"
    "background:#fff;font:15px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',"
    "'Liberation Sans',sans-serif}\n"
    "h1{font-size:1.6rem;margin:.2rem 0 .4rem}\n"
    "h2{font-size:1.2rem;margin:2rem 0 .5rem;padding-bottom:.2rem;border-bottom:1px solid "
    "#d6dae3}\n"
    "h3{font-size:1rem;margin:0 0 .5rem;word-break:break-all}\n"
    "code{font:13px/1.3 ui-monospace,'DejaVu Sans Mono','Liberation Mono',monospace}\n"
    "a{color:#1a55b0}\n"
    ".lede{color:#3d4556;max-width:75rem}\n"
    ".hint{color:#5d6577;font-size:.85rem;margin:.2rem 0 .5rem}\n"
    ".scroll{overflow-x:auto;border:1px solid #d6dae3;border-radius:6px}\n"
    "table.qc{border-collapse:collapse;width:100%;font-size:13px}\n"
    "table.qc th,table.qc td{padding:.3rem .55rem;border-bottom:1px solid #e6e9ef;"
    "white-space:nowrap;text-align:left}\n"
    "table.qc thead th{position:sticky;top:0;background:#eef1f6;cursor:pointer;"
    "user-select:none;font-weight:600}\n"
    "table.qc thead th:hover{background:#e0e6f0}\n"
    "table.qc thead th[aria-sort=ascending]::after{content:' \\25B2';font-size:.7em}\n"
    "table.qc thead th[aria-sort=descending]::after{content:' \\25BC';font-size:.7em}\n"
    "table.qc td.num,table.qc tfoot td{text-align:right;font-variant-numeric:tabular-nums}\n"
    "table.qc tbody tr:nth-child(even){background:#f8f9fb}\n"
    "table.qc tbody tr.outlier{background:#fff3f2;box-shadow:inset 4px 0 0 #c62828}\n"
    "table.qc td.beyond{background:#fbd3d0;color:#8e0000;font-weight:700}\n"
    "table.qc td.na{color:#9aa1ad}\n"
    "table.qc td[data-column=outlier]{white-space:normal;min-width:18rem;color:#8e0000}\n"
    "table.qc td[data-column=outlier].na{color:#9aa1ad}\n"
    "table.qc tfoot th,table.qc tfoot td{background:#f2f4f8;color:#3d4556;font-style:italic}\n"
    ".flag{display:inline-block;background:#c62828;color:#fff;border-radius:3px;"
    "padding:0 .4rem;font-size:.8rem;font-weight:600;margin-left:.4rem}\n"
    ".tag{display:inline-block;background:#e3e8f1;color:#2d3a52;border-radius:3px;"
    "padding:0 .4rem;font-size:.8rem;margin-left:.4rem;font-weight:500}\n"
    ".ok{color:#2e7d32}\n"
    ".run{border:1px solid #d6dae3;border-radius:6px;padding:.8rem;margin:0 0 1rem}\n"
    ".run.outlier{border-color:#c62828;box-shadow:inset 4px 0 0 #c62828}\n"
    ".gallery{display:grid;grid-template-columns:repeat(auto-fill,minmax(380px,1fr));gap:.8rem}\n"
    ".gallery figure{margin:0}\n"
    ".gallery img{display:block;width:100%;height:auto;background:#000;border-radius:3px}\n"
    ".gallery figcaption{font-size:.85rem;color:#3d4556;margin-top:.2rem}\n"
    ".missing{color:#8e0000;font-size:.9rem;margin:.6rem 0 0}\n"
    "ul.skipped li,ul.beyond li{margin:.2rem 0}\n"
    "footer{margin-top:2.5rem;color:#5d6577;font-size:.85rem}\n";

/* Sorts a table by the clicked column: numbers by data-value, texts as text, n/a last. */
static const char page_script[] =
    "(function () {\n"
    "  'use strict';\n"
    "  function sortKey(cell, numeric) {\n"
    "    if (!numeric) return cell.textContent;\n"
    "    var v = parseFloat(cell.getAttribute('data-value'));\n"
    "    return isNaN(v) ? null : v;\n"
    "  }\n"
    "  function sortBy(table, th, col) {\n"
    "    var numeric = th.getAttribute('data-kind') === 'number';\n"
    "    var ascending = th.getAttribute('aria-sort') !== 'ascending';\n"
    "    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) {\n"
    "      h.removeAttribute('aria-sort');\n"
    "    });\n"
    "    th.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');\n"
    "    var body = table.tBodies[0];\n"
    "    var rows = Array.prototype.slice.call(body.rows);\n"
    "    rows.sort(function (a, b) {\n"
    "      var x = sortKey(a.cells[col], numeric), y = sortKey(b.cells[col], numeric);\n"
    "      if (x === null || y === null) return (x === null ? 1 : 0) - (y === null ? 1 : 0);\n"
    "      var c = numeric ? x - y : x.localeCompare(y);\n"
    "      return ascending ? c : -c;\n"
    "    });\n"
    "    rows.forEach(function (r) { body.appendChild(r); });\n"
    "  }\n"
    "  Array.prototype.forEach.call(document.querySelectorAll('table.qc'), function (table) {\n"
    "    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {\n"
    "      th.tabIndex = 0;\n"
    "      th.addEventListener('click', function () { sortBy(table, th, col); });\n"
    "      th.addEventListener('keydown', function (e) {\n"
    "        if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); sortBy(table, th, col); "
    "}\n"
    "      });\n"
    "    });\n"
    "  });\n"
    "})();\n";

/* Text for HTML content and attribute values. */
static void put_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A relative URL: every byte but unreserved ones and '/' percent-encoded (no '&' is left for
 * the attribute to escape). */
static void put_url(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("-._~/", c))
            fputc(c, f);
        else
            fprintf(f, "%%%02X", c);
    }
}

/* Whether pipeline p's table shows figure k: the fixed figures and seconds always, a median
 * only where one of its runs reports it. */
static int shows_figure(const dm_qc_table *t, int p, int k)
{
    if (k < DM_QC_FIXED_FIGURES || k == t->n_figures - 1) return 1;
    for (int i = 0; i < t->n_runs; i++)
        if (t->run[i].pipeline_index == p && !isnan(t->run[i].value[k])) return 1;
    return 0;
}

static int is_beyond(const dm_qc_table *t, double z)
{
    return fabs(z) > t->z_limit;
}

static void put_beyond_list(FILE *f, const dm_qc_table *t, const dm_qc_run *r)
{
    char b[64];
    int listed = 0;
    for (int k = 0; k < t->n_figures; k++) {
        if (!is_beyond(t, r->z[k])) continue;
        fputs(listed++ ? ", " : "", f);
        put_text(f, t->figure[k]);
        fprintf(f, " (z %s)", dm_qc_format_z(b, sizeof b, r->z[k]));
    }
}

static void put_header(FILE *f, const dm_qc_table *t)
{
    int subjects = 0;
    for (int i = 0; i < t->n_runs; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = !strcmp(t->run[i].subject, t->run[j].subject);
        subjects += !seen;
    }
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta name=\"generator\" content=\"dimoc " DIMOC_VERSION "\">\n"
          "<title>dimoc group report</title>\n<style>\n",
          f);
    fputs(page_style, f);
    fputs("</style>\n</head>\n<body>\n<header>\n<h1>dimoc group report</h1>\n<p class=\"lede\">",
          f);
    fputs("The output folder <code>", f);
    put_text(f, t->output_dir);
    fprintf(f, "</code>: %d run%s of %d subject%s, pipeline%s ", t->n_runs,
            t->n_runs == 1 ? "" : "s", subjects, subjects == 1 ? "" : "s",
            t->n_pipelines == 1 ? "" : "s");
    for (int p = 0; p < t->n_pipelines; p++) {
        fputs(p ? ", <code>" : "<code>", f);
        put_text(f, t->pipeline[p]);
        fputs("</code>", f);
    }
    fprintf(f,
            ". Each figure's robust z = (x &minus; median) / (1.4826 &times; MAD) over the runs "
            "of its pipeline; a figure with |z| &gt; %g is marked (where the MAD is 0, any value "
            "other than the median is). The same numbers are in <a href=\"dimoc_qc.tsv\">"
            "dimoc_qc.tsv</a>.</p>\n</header>\n",
            t->z_limit);
}

static void put_summary(FILE *f, const dm_qc_table *t)
{
    int n_out = 0;
    for (int i = 0; i < t->n_runs; i++) n_out += t->run[i].n_beyond > 0;
    fputs("<section id=\"summary\">\n<h2>Runs beyond the limit</h2>\n", f);
    if (n_out == 0) {
        fprintf(f, "<p class=\"ok\">No run has a figure with |z| &gt; %g.</p>\n", t->z_limit);
    } else {
        fprintf(f, "<p>%d of %d runs:</p>\n<ul class=\"beyond\">\n", n_out, t->n_runs);
        for (int i = 0; i < t->n_runs; i++) {
            const dm_qc_run *r = &t->run[i];
            if (!r->n_beyond) continue;
            fprintf(f, "<li><a href=\"#run-%d\">", i);
            put_text(f, r->run_prefix);
            fputs("</a> <span class=\"tag\">", f);
            put_text(f, r->pipeline);
            fputs("</span>: ", f);
            put_beyond_list(f, t, r);
            fputs("</li>\n", f);
        }
        fputs("</ul>\n", f);
    }
    fputs("</section>\n", f);
    if (t->n_skipped) {
        fprintf(f,
                "<section id=\"skipped\">\n<h2>Quality files not read (%d)</h2>\n"
                "<ul class=\"skipped\">\n",
                t->n_skipped);
        for (int i = 0; i < t->n_skipped; i++) {
            fputs("<li><code>", f);
            put_text(f, t->skipped[i]);
            fputs("</code></li>\n", f);
        }
        fputs("</ul>\n</section>\n", f);
    }
}

static void put_text_cell(FILE *f, const char *column, const char *text, int link_run)
{
    fputs("<td data-column=\"", f);
    put_text(f, column);
    fputs(text ? "\">" : "\" class=\"na\">", f);
    if (link_run >= 0) fprintf(f, "<a href=\"#run-%d\">", link_run);
    put_text(f, text ? text : "n/a");
    if (link_run >= 0) fputs("</a>", f);
    fputs("</td>", f);
}

static void put_table(FILE *f, const dm_qc_table *t, int p)
{
    char b[64], zb[64];
    int n = 0;
    for (int i = 0; i < t->n_runs; i++) n += t->run[i].pipeline_index == p;
    fprintf(f, "<section class=\"pipeline\" id=\"pipeline-%d\">\n<h2>Pipeline <code>", p);
    put_text(f, t->pipeline[p]);
    fprintf(f, "</code> &middot; %d run%s</h2>\n", n, n == 1 ? "" : "s");
    fputs("<p class=\"hint\">Click a column heading to sort by it; a figure's z is in its "
          "tooltip.</p>\n<div class=\"scroll\">\n<table class=\"qc\" data-pipeline=\"",
          f);
    put_text(f, t->pipeline[p]);
    fputs("\">\n<thead><tr>", f);
    static const char *const names[] = {"subject", "session", "run_prefix", "pipeline"};
    for (int c = 0; c < 4; c++)
        fprintf(f, "<th scope=\"col\" data-column=\"%s\" data-kind=\"text\">%s</th>", names[c],
                names[c]);
    for (int k = 0; k < t->n_figures; k++) {
        if (!shows_figure(t, p, k)) continue;
        fputs("<th scope=\"col\" data-kind=\"number\" data-column=\"", f);
        put_text(f, t->figure[k]);
        fputs("\">", f);
        put_text(f, t->figure[k]);
        fputs("</th>", f);
    }
    fputs("<th scope=\"col\" data-column=\"outlier\" data-kind=\"text\">outlier</th></tr></thead>"
          "\n<tbody>\n",
          f);
    for (int i = 0; i < t->n_runs; i++) {
        const dm_qc_run *r = &t->run[i];
        if (r->pipeline_index != p) continue;
        fprintf(f, "<tr%s data-run=\"", r->n_beyond ? " class=\"outlier\"" : "");
        put_text(f, r->run_prefix);
        fputs("\">", f);
        put_text_cell(f, "subject", r->subject, -1);
        put_text_cell(f, "session", r->session, -1);
        put_text_cell(f, "run_prefix", r->run_prefix, i);
        put_text_cell(f, "pipeline", r->pipeline, -1);
        for (int k = 0; k < t->n_figures; k++) {
            if (!shows_figure(t, p, k)) continue;
            const char *text = dm_qc_format(b, sizeof b, r->value[k], t->is_count[k]);
            const char *z = dm_qc_format_z(zb, sizeof zb, r->z[k]);
            int na = isnan(r->value[k]);
            fprintf(f, "<td class=\"num%s\" data-column=\"",
                    na                      ? " na"
                    : is_beyond(t, r->z[k]) ? " beyond"
                                            : "");
            put_text(f, t->figure[k]);
            if (!na) fprintf(f, "\" data-value=\"%s", text);
            fprintf(f, "\" data-z=\"%s\" title=\"z %s%s\">%s</td>", z, z,
                    isinf(r->z[k]) ? " (MAD 0)" : "", text);
        }
        /* The TSV's text; <wbr> lets a long list wrap after its commas. */
        fputs(r->n_beyond ? "<td data-column=\"outlier\">"
                          : "<td data-column=\"outlier\" class=\"na\">",
              f);
        int listed = 0;
        for (int k = 0; k < t->n_figures; k++) {
            if (!is_beyond(t, r->z[k])) continue;
            fputs(listed++ ? ",<wbr>" : "", f);
            put_text(f, t->figure[k]);
        }
        fputs(listed ? "</td></tr>\n" : "none</td></tr>\n", f);
    }
    fputs("</tbody>\n<tfoot>\n", f);
    for (int row = 0; row < 2; row++) {
        const double *stat = row ? t->spread : t->center;
        fprintf(f, "<tr><th scope=\"row\" colspan=\"4\">%s</th>", row ? "MAD" : "median");
        for (int k = 0; k < t->n_figures; k++) {
            if (!shows_figure(t, p, k)) continue;
            double v = stat[p * t->n_figures + k];
            fprintf(f, "<td>%s</td>",
                    dm_qc_format(b, sizeof b, v, t->is_count[k] && v == floor(v)));
        }
        fputs("<td></td></tr>\n", f);
    }
    fputs("</tfoot>\n</table>\n</div>\n</section>\n", f);
}

static void put_pictures(FILE *f, const dm_qc_table *t)
{
    fputs("<section id=\"pictures\">\n<h2>Quick-look pictures</h2>\n", f);
    for (int i = 0; i < t->n_runs; i++) {
        const dm_qc_run *r = &t->run[i];
        fprintf(f, "<article class=\"run%s\" id=\"run-%d\" data-run=\"",
                r->n_beyond ? " outlier" : "", i);
        put_text(f, r->run_prefix);
        fputs("\">\n<h3>", f);
        put_text(f, r->run_prefix);
        fputs("<span class=\"tag\">", f);
        put_text(f, r->pipeline);
        fputs("</span>", f);
        if (r->n_beyond) {
            fputs("<span class=\"flag\">beyond: ", f);
            put_beyond_list(f, t, r);
            fputs("</span>", f);
        }
        fputs("</h3>\n<div class=\"gallery\">\n", f);
        int missing = 0;
        for (int k = 0; k < r->n_pictures; k++) {
            const dm_qc_picture *pic = &r->picture[k];
            if (!pic->present) {
                missing++;
                continue;
            }
            fputs("<figure><a href=\"../", f);
            put_url(f, pic->path);
            fputs("\"><img src=\"../", f);
            put_url(f, pic->path);
            fputs("\" alt=\"", f);
            put_text(f, pic->caption);
            fputs("\"></a><figcaption>", f);
            put_text(f, pic->caption);
            fputs("</figcaption></figure>\n", f);
        }
        fputs("</div>\n", f);
        if (missing) {
            fputs("<p class=\"missing\">Missing: ", f);
            int listed = 0;
            for (int k = 0; k < r->n_pictures; k++) {
                if (r->picture[k].present) continue;
                fputs(listed++ ? ", <code>" : "<code>", f);
                put_text(f, r->picture[k].path);
                fputs("</code>", f);
            }
            fputs("</p>\n", f);
        }
        fputs("</article>\n", f);
    }
    fputs("</section>\n", f);
}

int dm_qc_report_html(const dm_qc_table *t, FILE *f)
{
    put_header(f, t);
    put_summary(f, t);
    for (int p = 0; p < t->n_pipelines; p++) put_table(f, t, p);
    put_pictures(f, t);
    fputs("<footer>Written by dimoc " DIMOC_VERSION " (<code>dimoc bids &hellip; group</code>)."
          "</footer>\n<script>\n",
          f);
    fputs(page_script, f);
    fputs("</script>\n</body>\n</html>\n", f);
    return ferror(f) ? dm_set_error("writing the report failed") : 0;
}
