package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Progress bars appear only on a terminal, only for work that lasts, and
// redraw at most every redrawEvery.
const (
	progressDelay = 300 * time.Millisecond
	redrawEvery   = 100 * time.Millisecond
	barWidth      = 30
)

// progressBar draws "label [=====>     ]  45%  1234/2740" on one line of
// standard error. The zero value (and a bar off a terminal) draws nothing.
// It is not safe for concurrent use.
type progressBar struct {
	w     io.Writer
	label string
	total uint64
	start time.Time
	drawn time.Time
	shown bool
	width int // longest line drawn
	now   func() time.Time
	// counts, when set, renders what follows the percentage instead of
	// "n/total" (a bar measuring time shows what was done meanwhile).
	counts func(n, total uint64) string
}

// progress returns a bar for total steps, drawing only when standard error
// is a terminal.
func (a *app) progress(label string, total uint64) *progressBar {
	if !a.io.errTerminal {
		return &progressBar{}
	}
	now := a.clock
	if now == nil {
		now = time.Now
	}
	return newProgressBar(a.io.err, label, total, now)
}

func newProgressBar(w io.Writer, label string, total uint64, now func() time.Time) *progressBar {
	return &progressBar{w: w, label: label, total: total, start: now(), now: now}
}

// set reports that n steps are done.
func (p *progressBar) set(n uint64) {
	if p.w == nil {
		return
	}
	t := p.now()
	if t.Sub(p.start) < progressDelay || t.Sub(p.drawn) < redrawEvery {
		return
	}
	p.drawn, p.shown = t, true
	line := p.line(n) + p.eta(n, t)
	// Pad over a longer line drawn before (a count can shrink).
	pad := max(p.width-len(line), 0)
	p.width = max(p.width, len(line))
	fmt.Fprint(p.w, "\r"+line+strings.Repeat(" ", pad))
}

// line renders the bar for n steps done.
func (p *progressBar) line(n uint64) string {
	total := max(p.total, n)
	frac := 1.0
	if total > 0 {
		frac = float64(n) / float64(total)
	}
	fill := int(frac * barWidth)
	bar := strings.Repeat("=", fill)
	if fill < barWidth {
		bar += ">" + strings.Repeat(" ", barWidth-fill-1)
	}
	counts := fmt.Sprintf("%d/%d", n, total)
	if p.counts != nil {
		counts = p.counts(n, total)
	}
	return fmt.Sprintf("%s [%s] %3d%%  %s", p.label, bar, int(frac*100), counts)
}

// eta estimates the time left from the pace so far: "  ETA 1m05s", or ""
// before any step is done or once all are.
func (p *progressBar) eta(n uint64, t time.Time) string {
	if n == 0 || n >= p.total {
		return ""
	}
	elapsed := t.Sub(p.start)
	left := time.Duration(float64(elapsed) * float64(p.total-n) / float64(n))
	return "  ETA " + left.Round(time.Second).String()
}

// done erases the bar.
func (p *progressBar) done() {
	if p.w == nil || !p.shown {
		return
	}
	fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.width)+"\r")
	p.shown = false
}
