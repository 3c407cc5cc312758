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
	now   func() time.Time
}

// progress returns a bar for total steps, drawing only when standard error
// is a terminal.
func (a *app) progress(label string, total uint64) *progressBar {
	if !a.io.errTerminal {
		return &progressBar{}
	}
	return newProgressBar(a.io.err, label, total, time.Now)
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
	fmt.Fprint(p.w, "\r"+p.line(n))
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
	return fmt.Sprintf("%s [%s] %3d%%  %d/%d", p.label, bar, int(frac*100), n, total)
}

// done erases the bar.
func (p *progressBar) done() {
	if p.w == nil || !p.shown {
		return
	}
	fmt.Fprint(p.w, "\r"+strings.Repeat(" ", len(p.line(p.total)))+"\r")
	p.shown = false
}
