package perf

import (
	"io"
	"sync"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Progress draws live bars (nodes created, PodGroups and pods created, pods bound with rate and
// ETA). A nil *Progress draws nothing, which is what a run whose stdout is not a terminal gets.
type Progress struct {
	p    *mpb.Progress
	mu   sync.Mutex
	bars []*mpb.Bar
}

// NewProgress draws on w; callers pass nil (no bars) unless w is a terminal.
func NewProgress(w io.Writer) *Progress {
	if w == nil {
		return nil
	}
	return &Progress{p: mpb.New(mpb.WithOutput(w), mpb.WithWidth(40))}
}

// Bar is a nil-safe handle on one bar.
type Bar struct{ b *mpb.Bar }

// Set sets the bar's count.
func (b Bar) Set(n int) {
	if b.b != nil {
		b.b.SetCurrent(int64(n))
	}
}

// Inc adds one.
func (b Bar) Inc() {
	if b.b != nil {
		b.b.Increment()
	}
}

func (p *Progress) add(name, unit string, total int, rate bool) Bar {
	if p == nil {
		return Bar{}
	}
	app := []decor.Decorator{decor.Percentage(decor.WCSyncSpace)}
	if rate {
		app = []decor.Decorator{
			decor.AverageSpeed(0, "%6.1f "+unit+"/s", decor.WCSyncSpace),
			decor.OnComplete(decor.AverageETA(decor.ET_STYLE_GO, decor.WCSyncSpace), "done"),
		}
	}
	b := p.p.AddBar(int64(total),
		mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR), decor.CountersNoUnit("%d / %d", decor.WCSyncWidth)),
		mpb.AppendDecorators(app...))
	p.mu.Lock()
	p.bars = append(p.bars, b)
	p.mu.Unlock()
	return Bar{b}
}

// Nodes is the bar of nodes created for a cluster.
func (p *Progress) Nodes(name string, total int) Bar {
	return p.add(name+" nodes", "nodes", total, false)
}

// Repetition returns the bars of one repetition: PodGroups created, pods created, pods bound.
func (p *Progress) Repetition(name string, groups, pods int) (groupBar, podBar, boundBar Bar) {
	return p.add(name+" podgroups", "groups", groups, false),
		p.add(name+" pods created", "pods", pods, true),
		p.add(name+" pods bound", "pods", pods, true)
}

// Settle ends every bar that did not complete (a repetition that timed out, or an error), keeping
// it on screen, so Wait does not wait for counts that will never come.
func (p *Progress) Settle() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.bars {
		if !b.Completed() {
			b.Abort(false)
		}
	}
	p.bars = nil
}

// Write prints a line above the bars, so log lines do not tear them while they are drawn.
func (p *Progress) Write(b []byte) (int, error) { return p.p.Write(b) }

// Wait flushes the bars; call it before printing the report.
func (p *Progress) Wait() {
	if p == nil {
		return
	}
	p.Settle()
	p.p.Wait()
}
