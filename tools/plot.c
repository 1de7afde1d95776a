/* lms-trace plot: a memory timeline as a self-contained SVG.
 *
 * One panel per device: demanded, resident and host bytes as step lines, the soft limit
 * dashed over them, markers for out-of-memory errors and dumps, and three strips below for
 * swap activity (out and in) and restore stalls (darker = busier). A trace that stops early is
 * marked where it stops.
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
#define PANEL_HEIGHT 330
#define PLOT_HEIGHT 220
#define TOP 84

/* Drawn in this order, each over the ones before: demanded widest, so that resident stays
 * visible on it, and the soft limit thin and dashed on top, so that neither hides the other. */
enum { DEMANDED, HOST, RESIDENT, SOFT_LIMIT, SERIES };
static const char *const series_names[SERIES] = { "demanded", "host", "resident", "soft limit" };
static const char *const series_colors[SERIES] = { "#d95f02", "#7570b3", "#1b9e77", "#e7298a" };
static const double series_widths[SERIES] = { 5, 2, 2.5, 1.5 };
enum { STRIP_OUT, STRIP_IN, STRIP_STALL, STRIPS };

typedef struct {
    bool seen;
    uint64_t value[SERIES][COLUMNS];       /* max in the column */
    bool has[COLUMNS];
    double busy_us[STRIPS][COLUMNS];
    bool oom[COLUMNS], dump[COLUMNS];
} panel;

typedef struct {
    int pass;
    double end_us;
    bool dumps[COLUMNS];                   /* process-wide: shown on every panel */
    double stall_us[COLUMNS];
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

static void add_busy(const plot *p, double *busy_us, double start, double dur)
{
    double column_us = p->end_us / COLUMNS;
    if (column_us <= 0) return;
    for (int c = column_of(p, start); c < COLUMNS; c++) {
        double lo = c * column_us, hi = lo + column_us;
        double overlap = fmin(hi, start + dur) - fmax(lo, start);
        if (overlap > 0) busy_us[c] += overlap;
        if (start + dur <= hi) break;
    }
}

static int on_event(void *ctx, const trace_event *ev)
{
    plot *p = ctx;
    if (p->pass == 2 && ev->kind == TRACE_DUMP) p->dumps[column_of(p, ev->ts_us)] = true;
    if (p->pass == 2 && ev->kind == TRACE_STALL) add_busy(p, p->stall_us, ev->ts_us, ev->dur_us);
    if (ev->kind != TRACE_COUNTERS && ev->kind != TRACE_SWAP_OUT && ev->kind != TRACE_SWAP_IN && ev->kind != TRACE_OOM)
        return 0;
    if (p->pass == 1) {
        if (ev->kind == TRACE_COUNTERS) {
            uint64_t values[SERIES] = { [DEMANDED] = ev->demanded, [HOST] = ev->host, [RESIDENT] = ev->resident_bytes,
                                      [SOFT_LIMIT] = ev->soft_limit };
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
        uint64_t values[SERIES] = { [DEMANDED] = ev->demanded, [HOST] = ev->host, [RESIDENT] = ev->resident_bytes,
                                      [SOFT_LIMIT] = ev->soft_limit };
        for (int s = 0; s < SERIES; s++)
            if (!pan->has[c] || values[s] > pan->value[s][c]) pan->value[s][c] = values[s];
        pan->has[c] = true;
    } else if (ev->kind == TRACE_OOM) {
        pan->oom[column_of(p, ev->ts_us)] = true;
    } else {
        add_busy(p, pan->busy_us[ev->kind == TRACE_SWAP_IN ? STRIP_IN : STRIP_OUT], ev->ts_us, ev->dur_us);
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

/* A marker above the plot at x, in a row of its own: a small triangle with a tooltip. */
static void draw_marker(FILE *f, double x, int row, const char *color, const char *what)
{
    fprintf(f, "<path d=\"M%.1f,%d l-5,-8 h10 z\" fill=\"%s\"><title>%s</title></path>", x, -1 - 9 * row, color, what);
    fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"0\" y2=\"%d\" stroke=\"%s\" stroke-opacity=\"0.35\"/>\n", x, x,
            PLOT_HEIGHT, color);
}

static void draw_panel(FILE *f, const plot *p, int index, const panel *pan, const char *stop_note)
{
    double top = TOP + index * PANEL_HEIGHT, plot_w = WIDTH - LEFT - 40;
    bool gib = p->max_bytes >= (2ull << 30);
    double unit = gib ? 1073741824.0 : 1048576.0, y_max = p->max_bytes / unit * 1.08;
    if (y_max <= 0) y_max = 1;
    double y_step = nice_step(y_max, 5);
    y_max = ceil(y_max / y_step) * y_step;
    bool seconds = p->end_us >= 2e6;
    double t_unit = seconds ? 1e6 : 1e3, t_max = p->end_us / t_unit;
    double t_step = nice_step(t_max > 0 ? t_max : 1, 8);
    double column_w = plot_w / COLUMNS;

    fprintf(f, "<g transform=\"translate(%d,%.0f)\">\n", LEFT, top);
    fprintf(f, "<text x=\"0\" y=\"-24\" class=\"panel\">GPU %d</text>\n", p->devices[index]);
    fprintf(f, "<rect width=\"%.0f\" height=\"%d\" class=\"frame\"/>\n", plot_w, PLOT_HEIGHT);
    for (double v = 0; v <= y_max + y_step / 2; v += y_step) {
        double y = PLOT_HEIGHT - v / y_max * PLOT_HEIGHT;
        fprintf(f, "<line x1=\"0\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", plot_w, y, y);
        fprintf(f, "<text x=\"-8\" y=\"%.1f\" class=\"ytick\">%g</text>\n", y + 4, v);
    }
    fprintf(f, "<text transform=\"translate(-62,%d) rotate(-90)\" class=\"axis\">device memory (%s)</text>\n",
            PLOT_HEIGHT / 2, gib ? "GiB" : "MiB");
    /* Ticks inside the time range only; the last label ends at the frame rather than past it. */
    for (int i = 0; t_max > 0 && i * t_step <= t_max * (1 + 1e-9); i++) {
        double t = i * t_step, x = t / t_max * plot_w;
        bool last = x > plot_w - 30;
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#888\"/>", x, x, PLOT_HEIGHT,
                PLOT_HEIGHT + 4);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" class=\"xtick\"%s>%g</text>\n", x, PLOT_HEIGHT + 16,
                last ? " text-anchor=\"end\"" : "", t);
    }
    fprintf(f, "<text x=\"%.0f\" y=\"%d\" class=\"axis\">time since the trace started (%s)</text>\n", plot_w / 2,
            PLOT_HEIGHT + 82, seconds ? "s" : "ms");
    /* Step lines: a column without a counter keeps the value before it. */
    for (int s = 0; s < SERIES; s++) {
        fprintf(f, "<polyline class=\"%s\" stroke-width=\"%g\" points=\"", s == SOFT_LIMIT ? "limit" : "series",
                series_widths[s]);
        bool started = false;
        uint64_t last = 0;
        for (int c = 0; c < COLUMNS; c++) {
            if (!pan->has[c] && !started) continue;
            uint64_t v = pan->has[c] ? pan->value[s][c] : last;
            double y = PLOT_HEIGHT - v / unit / y_max * PLOT_HEIGHT;
            fprintf(f, "%.1f,%.1f %.1f,%.1f ", c * column_w, y, (c + 1) * column_w, y);
            started = true;
            last = v;
        }
        fprintf(f, "\" stroke=\"%s\"/>\n", series_colors[s]);
    }
    for (int c = 0; c < COLUMNS; c++) {
        if (pan->oom[c]) draw_marker(f, (c + 0.5) * column_w, 0, "#d7191c", "out of memory");
        if (p->dumps[c]) draw_marker(f, (c + 0.5) * column_w, 1, "#2c7bb6", "dump of live allocations");
    }
    if (stop_note) {
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"0\" y2=\"%d\" class=\"stop\"/>", plot_w, plot_w, PLOT_HEIGHT);
        fprintf(f, "<text x=\"%.1f\" y=\"14\" class=\"stoptext\">", plot_w - 6);
        xml_text(f, stop_note);
        fputs("</text>\n", f);
    }
    /* Strips: the share of each column the copy engines, or waiting calls, were busy. */
    static const char *const strip_names[STRIPS] = { "swap out", "swap in", "stalls" };
    static const char *const strip_colors[STRIPS] = { "#d95f02", "#1b9e77", "#d7191c" };
    double column_us = p->end_us / COLUMNS;
    for (int strip = 0; strip < STRIPS; strip++) {
        const double *busy_us = strip == STRIP_STALL ? p->stall_us : pan->busy_us[strip];
        double y = PLOT_HEIGHT + 24 + strip * 15;
        fprintf(f, "<text x=\"-8\" y=\"%.0f\" class=\"ytick\">%s</text>", y + 10, strip_names[strip]);
        fprintf(f, "<rect y=\"%.0f\" width=\"%.0f\" height=\"12\" class=\"strip\"/>\n", y, plot_w);
        for (int c = 0; c < COLUMNS && column_us > 0; c++) {
            double busy = fmin(1, busy_us[c] / column_us);
            if (busy <= 0) continue;
            fprintf(f, "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.2f\" height=\"12\" fill=\"%s\" fill-opacity=\"%.2f\"/>",
                    c * column_w, y, column_w, strip_colors[strip], 0.25 + 0.75 * busy);
        }
        fputc('\n', f);
    }
    fprintf(f, "</g>\n");
}

static void draw(FILE *f, const plot *p, const trace_info *info, const char *path)
{
    int height = TOP + p->panel_count * PANEL_HEIGHT + 30;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">\n", WIDTH, height, WIDTH, height);
    fputs("<style>.frame{fill:#fff;stroke:#888}.grid{stroke:#e6e6e6}.series{fill:none;stroke-linejoin:round}"
          ".limit{fill:none;stroke-dasharray:7 4}.strip{fill:#f4f4f4}"
          ".ytick{text-anchor:end;fill:#444}.xtick{text-anchor:middle;fill:#444}.axis{text-anchor:middle;fill:#222}"
          ".stop{stroke:#000;stroke-width:2;stroke-dasharray:3 3}.stoptext{text-anchor:end;font-weight:bold}"
          ".title{font-size:17px;font-weight:bold}.panel{font-weight:bold}</style>\n", f);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fafafa\"/>\n", WIDTH, height);
    fputs("<text x=\"20\" y=\"28\" class=\"title\">liblms memory: ", f);
    xml_text(f, info->program);
    fprintf(f, " (pid %ju, policy ", (uintmax_t)info->pid);
    xml_text(f, info->policy);
    fputs(")</text>\n<text x=\"20\" y=\"46\" fill=\"#666\">", f);
    xml_text(f, path);
    fputs("</text>\n", f);
    for (int s = 0; s < SERIES; s++) {
        double x = WIDTH - 480 + s * 115;
        fprintf(f, "<line x1=\"%.0f\" x2=\"%.0f\" y1=\"24\" y2=\"24\" stroke=\"%s\" stroke-width=\"3\"%s/>"
                   "<text x=\"%.0f\" y=\"28\">%s</text>\n", x, x + 24, series_colors[s],
                s == SOFT_LIMIT ? " stroke-dasharray=\"6 4\"" : "", x + 30, series_names[s]);
    }
    fprintf(f, "<path d=\"M%d,45 l-5,-8 h10 z\" fill=\"#d7191c\"/><text x=\"%d\" y=\"45\">out of memory</text>\n",
            WIDTH - 365, WIDTH - 355);
    fprintf(f, "<path d=\"M%d,45 l-5,-8 h10 z\" fill=\"#2c7bb6\"/><text x=\"%d\" y=\"45\">dump</text>\n", WIDTH - 250,
            WIDTH - 240);
    const char *stop = info->cut ? "trace cut here (process killed?)" : info->truncated ? "recording stopped (LMS_TRACE_MAX_MB)" : NULL;
    for (int i = 0; i < p->panel_count; i++) draw_panel(f, p, i, &p->panels[i], stop);
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
    trace_info info;
    char err[600] = "";
    p->pass = 1;
    if (trace_read(path, &info, on_event, p, err, sizeof err) == 0) {
        p->end_us = info.last_us;
        if (p->panel_count == 0) snprintf(err, sizeof err, "%s: no counter or swap events to plot", path);
        else if (!(p->panels = calloc((size_t)p->panel_count, sizeof *p->panels))) snprintf(err, sizeof err, "out of memory");
        p->pass = 2;
        if (!err[0] && trace_read(path, &info, on_event, p, err, sizeof err) != 0 && !err[0])
            snprintf(err, sizeof err, "%s: read failed", path);
    }
    output out;
    if (err[0]) print_error("%s", err);
    else if ((status = output_start(&out, output_path, path)) == 0) {
        draw(out.file, p, &info, path);
        status = output_finish(&out, 1);
    }
    free(p->panels);
    free(p);
    return err[0] ? 1 : status;
}
