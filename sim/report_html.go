package sim

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

// WriteHTML writes a self-contained HTML report a person reads at a glance: the headline
// figures first, then one row per step with its few key metrics (every metric behind a
// toggle), then inline SVG plots: request and lookup latency, broadcast propagation, the
// liveness timeline, the cost per node step by step, and, in virtual time, the virtual clock
// against the wall clock. It loads nothing from elsewhere and runs no script.
func (r *Report) WriteHTML(w io.Writer) error {
	data := struct {
		R                       *Report
		Headline                []Figure
		CDF, Propagation, Lives template.HTML
		Cost, Memory, Clock     template.HTML
	}{R: r, Headline: r.Headline(),
		CDF:         plot("Latency CDF", "milliseconds", "fraction", cdfSeries(r), false),
		Propagation: plot("Broadcast and group propagation", "milliseconds since sent", "fraction of receivers reached", r.Propagation, false),
		Lives:       livenessPlot(r),
		Cost: plot("CPU per node, step by step (steps of a second or more)", "seconds since the run began (end of each step)",
			"CPU seconds per node per minute", costSeries(r), false),
		Memory: plot("Memory per node, step by step", "seconds since the run began (end of each step)", "MiB per node",
			stepSeries(r, "rss_per_node_mib", "resident", "heap_per_node_mib", "live heap"), false),
	}
	if r.Clock == ClockVirtual {
		data.Clock = plot("The virtual clock against the wall clock", "wall-clock seconds", "virtual seconds", clockSeries(r), false)
	}
	return htmlPage.Execute(w, data)
}

// stepSeries draws metrics of the steps (pairs of metric and label) against the time each
// step ended.
func stepSeries(r *Report, metricsAndLabels ...string) []Series {
	return stepSeriesOver(r, 0, metricsAndLabels...)
}

// stepSeriesOver is stepSeries over the steps that lasted at least least ms (a rate per
// minute of a step that took an instant means nothing).
func stepSeriesOver(r *Report, least float64, metricsAndLabels ...string) []Series {
	var out []Series
	for i := 0; i+1 < len(metricsAndLabels); i += 2 {
		s := Series{Label: metricsAndLabels[i+1]}
		for _, st := range r.Steps {
			if v, ok := st.Metrics[metricsAndLabels[i]]; ok && st.DurationMS >= least {
				s.Points = append(s.Points, Point{X: (st.StartMS + st.DurationMS) / 1000, Y: v})
			}
		}
		if len(s.Points) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// costSeries is the process's CPU per node per minute of each step that lasted a second or
// more and, in virtual time, what the cost model charged.
func costSeries(r *Report) []Series {
	return stepSeriesOver(r, 1000, "cpu_s_per_node_min", "the simulator's CPU", "model_cpu_s_per_node_min", "charged by the cost model")
}

// clockSeries puts the virtual clock at the end of each step against the wall clock, with the
// real clock's own pace (one second a second) beside it.
func clockSeries(r *Report) []Series {
	run := Series{Label: "this run", Points: []Point{{}}}
	wall := 0.0
	for _, st := range r.Steps {
		wall += st.WallMS / 1000
		run.Points = append(run.Points, Point{X: wall, Y: (st.StartMS + st.DurationMS) / 1000})
	}
	top := max(wall, r.DurationMS/1000)
	return []Series{run, {Label: "real time (1 s a second)", Points: []Point{{}, {X: top, Y: top}}}}
}

func cdfSeries(r *Report) []Series {
	var out []Series
	if len(r.RequestCDF) > 0 {
		out = append(out, Series{Label: "request round trip", Points: r.RequestCDF})
	}
	if len(r.LookupCDF) > 0 {
		out = append(out, Series{Label: "lookup", Points: r.LookupCDF})
	}
	return out
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

const plotW, plotH, padL, padB, padT, padR = 760.0, 300.0, 60.0, 40.0, 30.0, 20.0

// plot draws series as lines in an SVG with axes; scatter draws dots instead.
func plot(title, xlabel, ylabel string, series []Series, scatter bool) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" role="img"><title>%s</title>`, plotW, plotH, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<text x="%g" y="18" font-size="14" font-weight="bold">%s</text>`, padL, template.HTMLEscapeString(title))
	maxX, maxY := 0.0, 0.0
	for _, s := range series {
		for _, p := range s.Points {
			maxX, maxY = math.Max(maxX, p.X), math.Max(maxY, p.Y)
		}
	}
	if len(series) == 0 || maxX == 0 {
		b.WriteString(`<text x="60" y="150" font-size="12">nothing measured</text></svg>`)
		return template.HTML(b.String())
	}
	maxY = math.Max(maxY, 1e-9)
	sx := func(x float64) float64 { return padL + x/maxX*(plotW-padL-padR) }
	sy := func(y float64) float64 { return plotH - padB - y/maxY*(plotH-padB-padT) }
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`, padL, plotH-padB, plotW-padR, plotH-padB)
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`, padL, padT, padL, plotH-padB)
	for k := 0; k <= 4; k++ {
		x, y := maxX*float64(k)/4, maxY*float64(k)/4
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="middle">%.4g</text>`, sx(x), plotH-padB+14, x)
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="end">%.3g</text>`, padL-4, sy(y)+3, y)
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="11" text-anchor="middle">%s</text>`, (plotW+padL)/2, plotH-6, template.HTMLEscapeString(xlabel))
	fmt.Fprintf(&b, `<text x="12" y="%g" font-size="11" transform="rotate(-90 12 %g)" text-anchor="middle">%s</text>`, plotH/2, plotH/2, template.HTMLEscapeString(ylabel))
	for i, s := range series {
		col := palette[i%len(palette)]
		if scatter {
			for _, p := range s.Points {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, sx(p.X), sy(p.Y), col)
			}
		} else {
			var pts []string
			for _, p := range s.Points {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", sx(p.X), sy(p.Y)))
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, col, strings.Join(pts, " "))
			if len(s.Points) <= 40 { // few points: each is a measurement, show it
				for _, p := range s.Points {
					fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, sx(p.X), sy(p.Y), col)
				}
			}
		}
		if i < 8 {
			fmt.Fprintf(&b, `<text x="%g" y="%d" font-size="10" fill="%s" text-anchor="end">%s</text>`, plotW-padR, 34+12*i, col, template.HTMLEscapeString(s.Label))
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// livenessPlot is the liveness timeline: one dot per transition, at its time (x) and the
// subject's node index (y), coloured by the new state.
func livenessPlot(r *Report) template.HTML {
	by := map[string]*Series{}
	var order []string
	for _, t := range r.Liveness {
		s, ok := by[t.To]
		if !ok {
			s = &Series{Label: "→ " + t.To}
			by[t.To] = s
			order = append(order, t.To)
		}
		s.Points = append(s.Points, Point{X: t.AtMS / 1000, Y: float64(t.Subject)})
	}
	var series []Series
	for _, k := range order {
		series = append(series, *by[k])
	}
	return plot("Liveness timeline (transitions seen by any node)", "seconds since start", "subject node", series, true)
}

var htmlPage = template.Must(template.New("report").Funcs(template.FuncMap{"div1000": func(v float64) float64 { return v / 1000 }}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>iacp-node sim: {{.R.Scenario}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
.figures{display:flex;flex-wrap:wrap;gap:10px;margin:1em 0}
.figure{border:1px solid #ccc;border-radius:6px;padding:8px 12px;min-width:130px}
.figure .label{font-size:12px;color:#666}.figure .value{font-size:22px;font-weight:bold}.figure .note{font-size:11px;color:#777}
.figure.bad{border-color:#b00}.figure.bad .value{color:#b00}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:4px 7px;text-align:left;vertical-align:top}
.k{font-size:11px;color:#666;display:block}.v{font-weight:bold}
.keys{display:flex;flex-wrap:wrap;gap:4px 16px}.keys div{min-width:90px}
.fail{color:#b00;font-weight:bold}.ok{color:#070}
details table{font-size:12px;margin-top:4px}details td{padding:1px 5px}
summary{cursor:pointer;color:#036}
</style></head><body>
<h1>{{.R.Scenario}}: {{if .R.Passed}}<span class="ok">passed</span>{{else}}<span class="fail">failed</span>{{end}}</h1>
{{if .R.Description}}<p>{{.R.Description}}</p>{{end}}
<div class="figures" id="headline">{{range .Headline}}<div class="figure{{if .Bad}} bad{{end}}"><div class="label">{{.Label}}</div><div class="value">{{.Value}}</div><div class="note">{{.Note}}</div></div>
{{end}}</div>
{{if eq .R.Clock "virtual"}}<p>Virtual time: a latency is the links' ({{.R.Network.Latency}}{{if .R.Network.Jitter}} ± {{.R.Network.Jitter}}{{end}} one way{{if .R.Network.Tick}}, arriving on a {{.R.Network.Tick}} tick{{end}}) plus the timers'{{if .R.CostModel}}, plus what the {{.R.CostModel}} charged the nodes{{else}}; CPU costs no virtual time (cost model off){{end}}. How late the simulator's timers fired, and how busy its cores were, mean nothing here and are left out.</p>{{end}}
<h2>Steps</h2>
<table id="steps"><tr><th>#</th><th>step</th><th>result</th><th>time</th><th>wall</th><th>CPU</th><th>key figures</th><th>all metrics</th></tr>
{{range .R.Steps}}<tr><td>{{.Index}}</td><td>{{.Name}}{{if ne .Name .Action}} <span class="k">{{.Action}}</span>{{end}}</td>
<td>{{if .Passed}}<span class="ok">ok</span>{{else}}<span class="fail">FAIL</span>{{end}}{{range .Checks}}{{if not .OK}}<br><span class="fail">{{.Metric}} {{.Want}}: got {{.Got}}{{if .Missing}} (not measured){{end}}</span>{{end}}{{if .Excused}}<br><span class="k">{{.Metric}} excused: {{.Excused}}</span>{{end}}{{end}}{{if .Error}}<br><span class="fail">{{.Error}}</span>{{end}}{{range $k, $v := .Errors}}<br><span class="k">{{$k}}: {{$v}}</span>{{end}}</td>
<td>{{printf "%.1f" (div1000 .DurationMS)}} s</td><td>{{printf "%.1f" (div1000 .WallMS)}} s</td><td>{{printf "%.2f" (div1000 (index .Metrics "cpu_ms"))}} s</td>
<td><div class="keys">{{range .KeyMetrics}}<div><span class="k">{{.Label}}</span><span class="v">{{.Value}}</span></div>{{end}}</div></td>
<td><details><summary>{{len .Metrics}} metrics</summary><table>{{range .AllMetrics}}<tr><td>{{.Label}}</td><td>{{.Value}}</td></tr>{{end}}</table></details></td></tr>
{{end}}</table>
<p>{{.R.DroppedItems}} gossip items dropped by the simulator's observers.</p>
{{if .R.Reproduction}}<h2>Against an earlier run</h2><pre>{{.R.Reproduction.Text}}</pre>{{end}}
<h2>Cost per node</h2>{{.Cost}}{{.Memory}}
{{if .Clock}}<h2>Clock</h2>{{.Clock}}{{end}}
<h2>Latency</h2>{{.CDF}}
<h2>Propagation</h2>{{.Propagation}}
<h2>Liveness</h2>{{.Lives}}
</body></html>
`))
