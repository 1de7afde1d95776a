/* lms-trace plot: a memory timeline as a self-contained SVG.
 *
 * One panel per device: demanded, resident and host bytes as step lines, the soft limit
 * dashed, and two strips below for swap activity (out and in; darker = busier copy engine).
 * The trace is read twice (time range, then values) and every series is reduced to one
 * maximum per pixel column, so memory stays bounded whatever the length of the trace. */
#include "tools/commands.h"
#include "tools/trace_read.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define COLUMNS 900
#define MAX_PANELS 8
#define WIDTH 1080
#define LEFT 90
#define PANEL_HEIGHT 300
#define PLOT_HEIGHT 220
#define TOP 60

enum { DEMANDED, RESIDENT, HOST, SOFT_LIMIT, SERIES };
static const char *const series_names[SERIES] = { "demanded", "resident", "host", "soft limit" };
static const char *const series_colors[SERIES] = { "#d95f02", "#1b9e77", "#7570b3", "#e7298a" };

typedef struct {
    bool seen;
    uint64_t value[SERIES][COLUMNS];       /* max in the column */
    bool has[COLUMNS];
    double busy_us[2][COLUMNS];            /* swap out, swap in */
} panel;

typedef struct {
    int pass;
    double end_us;
    uint64_t max_bytes;
    int devices[MAX_PANELS];               /* device of each panel */
    int panel_count;
    panel *panels;
} plot;

static int panel_of(plot *p, int device)
{
    for (int i = 0; i < p->panel_count; i++)
        if (p->devices[i] == device) return i;
    if (p->panel_count == MAX_PANELS) return -1;
    p->devices[p->panel_count] = device;
    return p->panel_count++;
}

static int column_of(const plot *p, double us)
{
    int c = p->end_us > 0 ? (int)(us / p->end_us * COLUMNS) : 0;
    return c < 0 ? 0 : c >= COLUMNS ? COLUMNS - 1 : c;
}

static void add_busy(plot *p, panel *pan, int dir, double start, double dur)
{
    double column_us = p->end_us / COLUMNS;
    if (column_us <= 0) return;
    for (int c = column_of(p, start); c < COLUMNS; c++) {
        double lo = c * column_us, hi = lo + column_us;
        double overlap = fmin(hi, start + dur) - fmax(lo, start);
        if (overlap > 0) pan->busy_us[dir][c] += overlap;
        if (start + dur <= hi) break;
    }
}

static int on_event(void *ctx, const trace_event *ev)
{
    plot *p = ctx;
    if (ev->kind != TRACE_COUNTERS && ev->kind != TRACE_SWAP_OUT && ev->kind != TRACE_SWAP_IN) return 0;
    if (p->pass == 1) {
        if (ev->ts_us + ev->dur_us > p->end_us) p->end_us = ev->ts_us + ev->dur_us;
        if (ev->kind == TRACE_COUNTERS) {
            uint64_t values[] = { ev->demanded, ev->resident_bytes, ev->host, ev->soft_limit };
            for (int s = 0; s < SERIES; s++) if (values[s] > p->max_bytes) p->max_bytes = values[s];
        }
        panel_of(p, ev->device);
        return 0;
    }
    int i = panel_of(p, ev->device);
    if (i < 0) return 0;
    panel *pan = &p->panels[i];
    pan->seen = true;
    if (ev->kind == TRACE_COUNTERS) {
        int c = column_of(p, ev->ts_us);
        uint64_t values[] = { ev->demanded, ev->resident_bytes, ev->host, ev->soft_limit };
        for (int s = 0; s < SERIES; s++)
            if (!pan->has[c] || values[s] > pan->value[s][c]) pan->value[s][c] = values[s];
        pan->has[c] = true;
    } else {
        add_busy(p, pan, ev->kind == TRACE_SWAP_IN, ev->ts_us, ev->dur_us);
    }
    return 0;
}

/* A round step giving about `want` intervals over [0, max]. */
static double nice_step(double max, int want)
{
    double raw = max / want, power = pow(10, floor(log10(raw)));
    double fraction = raw / power;
    return (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * power;
}

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: if ((unsigned char)*s >= 0x20) fputc(*s, f);
        }
    }
}

static void draw_panel(FILE *f, const plot *p, int index, const panel *pan)
{
    double top = TOP + index * PANEL_HEIGHT, plot_w = WIDTH - LEFT - 30;
    bool gib = p->max_bytes >= (2ull << 30);
    double unit = gib ? 1073741824.0 : 1048576.0, y_max = p->max_bytes / unit * 1.08;
    if (y_max <= 0) y_max = 1;
    double y_step = nice_step(y_max, 5);
    y_max = ceil(y_max / y_step) * y_step;
    bool seconds = p->end_us >= 2e6;
    double t_unit = seconds ? 1e6 : 1e3, t_max = p->end_us / t_unit;
    double t_step = nice_step(t_max > 0 ? t_max : 1, 8);

    fprintf(f, "<g transform=\"translate(%d,%.0f)\">\n", LEFT, top);
    fprintf(f, "<text x=\"0\" y=\"-12\" class=\"panel\">GPU %d</text>\n", p->devices[index]);
    fprintf(f, "<rect width=\"%.0f\" height=\"%d\" class=\"frame\"/>\n", plot_w, PLOT_HEIGHT);
    for (double v = 0; v <= y_max + y_step / 2; v += y_step) {
        double y = PLOT_HEIGHT - v / y_max * PLOT_HEIGHT;
        fprintf(f, "<line x1=\"0\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", plot_w, y, y);
        fprintf(f, "<text x=\"-8\" y=\"%.1f\" class=\"ytick\">%g %s</text>\n", y + 4, v, gib ? "GiB" : "MiB");
    }
    for (double t = 0; t <= t_max + t_step / 2 && t_max > 0; t += t_step) {
        double x = t / t_max * plot_w;
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"xtick\">%g %s</text>\n", x, PLOT_HEIGHT + 52, t,
                seconds ? "s" : "ms");
    }
    /* Step lines: a column without a counter keeps the value before it. */
    for (int s = 0; s < SERIES; s++) {
        fprintf(f, "<polyline class=\"%s\" points=\"", s == SOFT_LIMIT ? "limit" : "series");
        bool started = false;
        uint64_t last = 0;
        for (int c = 0; c < COLUMNS; c++) {
            if (!pan->has[c] && !started) continue;
            uint64_t v = pan->has[c] ? pan->value[s][c] : last;
            double x0 = c * plot_w / COLUMNS, x1 = (c + 1) * plot_w / COLUMNS;
            double y = PLOT_HEIGHT - v / unit / y_max * PLOT_HEIGHT;
            fprintf(f, "%.1f,%.1f %.1f,%.1f ", x0, y, x1, y);
            started = true;
            last = v;
        }
        fprintf(f, "\" stroke=\"%s\"/>\n", series_colors[s]);
    }
    /* Swap strips. */
    static const char *const strip_names[2] = { "swap out", "swap in" };
    static const char *const strip_colors[2] = { "#d95f02", "#1b9e77" };
    double column_us = p->end_us / COLUMNS;
    for (int dir = 0; dir < 2; dir++) {
        double y = PLOT_HEIGHT + 8 + dir * 16;
        fprintf(f, "<text x=\"-8\" y=\"%.0f\" class=\"ytick\">%s</text>", y + 11, strip_names[dir]);
        fprintf(f, "<rect y=\"%.0f\" width=\"%.0f\" height=\"13\" class=\"strip\"/>\n", y, plot_w);
        for (int c = 0; c < COLUMNS && column_us > 0; c++) {
            double busy = fmin(1, pan->busy_us[dir][c] / column_us);
            if (busy <= 0) continue;
            fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.2f\" height=\"13\" fill=\"%s\" fill-opacity=\"%.2f\"/>",
                    c * plot_w / COLUMNS, y, plot_w / COLUMNS, strip_colors[dir], 0.25 + 0.75 * busy);
        }
        fputc('\n', f);
    }
    fprintf(f, "</g>\n");
}

static void draw(FILE *f, const plot *p, const trace_settings *settings, const char *path)
{
    int height = TOP + p->panel_count * PANEL_HEIGHT + 30;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n", WIDTH, height, WIDTH, height);
    fputs("<style>.frame{fill:#fff;stroke:#888}.grid{stroke:#e6e6e6}.series{fill:none;stroke-width:2}"
          ".limit{fill:none;stroke-width:2;stroke-dasharray:8 5}.strip{fill:#f4f4f4}"
          ".ytick{text-anchor:end;fill:#444}.xtick{text-anchor:middle;fill:#444}"
          ".title{font-size:17px;font-weight:bold}.panel{font-weight:bold}</style>\n", f);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fafafa\"/>\n", WIDTH, height);
    fputs("<text x=\"20\" y=\"28\" class=\"title\">liblms memory: ", f);
    xml_text(f, settings->program);
    fprintf(f, " (pid %ju, policy ", (uintmax_t)settings->pid);
    xml_text(f, settings->policy);
    fputs(")</text>\n<text x=\"20\" y=\"46\" fill=\"#666\">", f);
    xml_text(f, path);
    fputs("</text>\n", f);
    for (int s = 0; s < SERIES; s++) {
        double x = WIDTH - 480 + s * 115;
        fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"24\" y2=\"24\" stroke=\"%s\" stroke-width=\"3\"%s/>"
                   "<text x=\"%.0f\" y=\"28\">%s</text>\n", x, x + 24, series_colors[s],
                s == SOFT_LIMIT ? " stroke-dasharray=\"6 4\"" : "", x + 30, series_names[s]);
    }
    for (int i = 0; i < p->panel_count; i++) draw_panel(f, p, i, &p->panels[i]);
    fputs("</svg>\n", f);
}

int command_plot(int argc, char **argv)
{
    const char *path, *output_path;
    int status = parse_trace_and_output(argc, argv, "plot TRACE -o OUT.svg", &path, &output_path);
    if (status) return status;
    if (!output_path) { print_error("plot: no output file (-o OUT.svg)"); return 2; }
    plot *p = calloc(1, sizeof *p);
    if (!p) { print_error("out of memory"); return 1; }
    trace_settings settings;
    char err[600] = "";
    p->pass = 1;
    if (trace_read(path, &settings, on_event, p, err, sizeof err) == 0) {
        if (p->panel_count == 0) snprintf(err, sizeof err, "%s: no counter or swap events to plot", path);
        else if (!(p->panels = calloc((size_t)p->panel_count, sizeof *p->panels))) snprintf(err, sizeof err, "out of memory");
        p->pass = 2;
        if (!err[0] && trace_read(path, &settings, on_event, p, err, sizeof err) != 0 && !err[0])
            snprintf(err, sizeof err, "%s: read failed", path);
    }
    output out;
    if (err[0]) print_error("%s", err);
    else if ((status = output_start(&out, output_path, path)) == 0) {
        draw(out.file, p, &settings, path);
        status = output_finish(&out, 1);
    }
    free(p->panels);
    free(p);
    return err[0] ? 1 : status;
}
