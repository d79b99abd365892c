package sim

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
)

// WriteHTML writes a self-contained HTML report: the summary table and three inline SVG
// plots (request and lookup latency CDFs, broadcast propagation over time, and the liveness
// timeline). It loads nothing from elsewhere.
func (r *Report) WriteHTML(w io.Writer) error {
	data := struct {
		R                       *Report
		CDF, Propagation, Lives template.HTML
	}{R: r,
		CDF:         plot("Latency CDF", "milliseconds", "fraction", cdfSeries(r), false),
		Propagation: plot("Broadcast and group propagation", "milliseconds since sent", "fraction of receivers reached", r.Propagation, false),
		Lives:       livenessPlot(r),
	}
	return htmlPage.Execute(w, data)
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

var htmlPage = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>iacp-node sim: {{.R.Scenario}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;vertical-align:top}
.fail{color:#b00;font-weight:bold}.ok{color:#070}code{font-size:12px}
</style></head><body>
<h1>{{.R.Scenario}}: {{if .R.Passed}}<span class="ok">passed</span>{{else}}<span class="fail">failed</span>{{end}}</h1>
<p>{{.R.Description}}</p>
<p>{{.R.Nodes}} nodes on {{.R.Transport}}, trust {{.R.Trust}}, seed {{.R.Seed}}, {{printf "%.1f" .R.DurationMS}} ms in all;
peak heap in use {{printf "%.2f" .R.PeakHeapPerNodeMiB}} MiB per node; {{.R.DroppedItems}} gossip items dropped by the observers.</p>
<table><tr><th>#</th><th>step</th><th>result</th><th>ms</th><th>metrics</th><th>expectations</th><th>errors</th></tr>
{{range .R.Steps}}<tr><td>{{.Index}}</td><td>{{.Name}}</td>
<td>{{if .Passed}}<span class="ok">ok</span>{{else}}<span class="fail">FAIL</span>{{end}}{{if .Error}}<br>{{.Error}}{{end}}</td>
<td>{{printf "%.0f" .DurationMS}}</td>
<td><code>{{range $k, $v := .Metrics}}{{$k}}={{$v}} {{end}}</code></td>
<td>{{range .Checks}}<span class="{{if .OK}}ok{{else}}fail{{end}}">{{.Metric}} {{.Want}} (got {{.Got}}{{if .Missing}}, not measured{{end}})</span><br>{{end}}</td>
<td>{{range $k, $v := .Errors}}{{$k}}: {{$v}}<br>{{end}}</td></tr>
{{end}}</table>
<h2>Latency</h2>{{.CDF}}
<h2>Propagation</h2>{{.Propagation}}
<h2>Liveness</h2>{{.Lives}}
</body></html>
`))
