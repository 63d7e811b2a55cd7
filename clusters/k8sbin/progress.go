package k8sbin

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"
)

// reporter shows per-component progress. On a terminal it draws one mpb
// spinner line per component with its elapsed time; elsewhere (CI logs,
// files, pipes) it prints one plain line when a component starts and one
// when it finishes, because cursor-moving redraws are garbage in a log and
// mpb renders nothing at all to a non-terminal.
//
// All methods are safe for concurrent use and do nothing on a nil writer.
type reporter struct {
	w   io.Writer
	tty bool
	now func() time.Time

	mu    sync.Mutex
	p     *mpb.Progress // created on first start in tty mode
	items map[string]*item
	order []string // keys of unfinished items, oldest first
}

type item struct {
	label, doneMsg, failMsg string
	started                 time.Time
	bar                     *mpb.Bar
	ended                   atomic.Int64 // UnixNano when finished, 0 while running
}

// elapsed is the item's running time, frozen once it finished. It is read
// from mpb's render goroutine, hence the atomic.
func (it *item) elapsed(now func() time.Time) time.Duration {
	if e := it.ended.Load(); e != 0 {
		return time.Unix(0, e).Sub(it.started)
	}
	return now().Sub(it.started)
}

// newReporter decides between live and plain output. forceTTY exists for
// tests, which cannot easily obtain a terminal.
func newReporter(w io.Writer, forceTTY bool) *reporter {
	r := &reporter{w: w, now: time.Now, items: map[string]*item{}}
	if w != nil {
		r.tty = forceTTY || isTerminal(w)
	}
	return r
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// start shows that the component identified by key began: label names it
// (e.g. "kube-scheduler v1.37.2"), doing/doneMsg/failMsg describe the
// running, finished and failed states.
func (r *reporter) start(key, label string, msgs ...string) {
	if r == nil || r.w == nil {
		return
	}
	doing, done, fail := "building", "built", "FAILED"
	if len(msgs) > 0 {
		doing = msgs[0]
	}
	if len(msgs) > 1 {
		done = msgs[1]
	}
	if len(msgs) > 2 {
		fail = msgs[2]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.items[key]; dup {
		return
	}
	it := &item{label: label, doneMsg: done, failMsg: fail, started: r.now()}
	r.items[key] = it
	r.order = append(r.order, key)
	if !r.tty {
		fmt.Fprintf(r.w, "%s: %s\n", label, doing)
		return
	}
	if r.p == nil {
		// The container is not tied to the caller's ctx: close() finishes
		// every bar explicitly, so the final frame always shows the real
		// outcome instead of being cut off by a cancellation.
		// ForceTTY+WithAutoRefresh: we already decided this is a terminal (also
		// for wrappers exposing Fd, which mpb only recognises on *os.File).
		r.p = mpb.New(mpb.WithOutput(r.w), mpb.ForceTTY(), mpb.WithAutoRefresh(), mpb.WithRefreshRate(200*time.Millisecond))
	}
	bar, err := r.p.Add(1, mpb.SpinnerStyle().PositionLeft().Build(),
		mpb.BarWidth(1),
		mpb.BarFillerOnComplete("✓"),
		mpb.BarFillerOnAbort("✗"),
		mpb.PrependDecorators(decor.Name(label, decor.WCSyncSpaceR), decor.Name(" ")),
		mpb.AppendDecorators(
			decor.OnAbort(decor.OnComplete(decor.Name(" "+doing+" "), " "+done+" "), " "+fail+" "),
			// Like decor.Elapsed, but frozen from our own timestamps:
			// decor.Elapsed shows nothing for a bar that finishes before
			// its first render (e.g. a quick cache step).
			decor.Any(func(decor.Statistics) string { return it.elapsed(r.now).Round(time.Second).String() }),
		),
	)
	if err == nil { // err only after the container shut down: show nothing
		it.bar = bar
	}
}

// finish marks key as done (ok) or failed.
func (r *reporter) finish(key string, ok bool) {
	if r == nil || r.w == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finishLocked(key, ok)
}

func (r *reporter) finishLocked(key string, ok bool) {
	it, found := r.items[key]
	if !found {
		return
	}
	delete(r.items, key)
	for i, k := range r.order {
		if k == key {
			r.order = append(r.order[:i], r.order[i+1:]...)
			break
		}
	}
	it.ended.Store(r.now().UnixNano())
	if !r.tty {
		msg := it.doneMsg
		if !ok {
			msg = it.failMsg
		}
		fmt.Fprintf(r.w, "%s: %s (%.1fs)\n", it.label, msg, it.elapsed(r.now).Seconds())
		return
	}
	if it.bar != nil {
		if ok {
			it.bar.Increment() // total is 1: completes the bar
		} else {
			it.bar.Abort(false)
		}
	}
}

// build runs fn, translating the Builder's progress callbacks into lines
// labelled with the target version, and marks whatever the builder started
// but did not finish as failed (on error) or done (on success).
func (r *reporter) build(t Target, fn func(progress func(component string, done bool)) error) error {
	prefix := t.Name + " " + t.cacheKey() + "/"
	label := t.Version
	if t.Patch != nil {
		label += " patched (" + t.Patch.Name + ")"
	}
	var mu sync.Mutex
	started := []string{}
	progress := func(component string, done bool) {
		key := prefix + component
		if done {
			r.finish(key, true)
			return
		}
		mu.Lock()
		started = append(started, key)
		mu.Unlock()
		r.start(key, component+" "+label)
	}
	err := fn(progress)
	mu.Lock()
	defer mu.Unlock()
	for _, key := range started {
		r.finish(key, err == nil) // no-op for already finished keys
	}
	return err
}

// close fails anything still running and, in tty mode, waits for mpb to
// draw its final frame so later output does not interleave with it.
func (r *reporter) close() {
	if r == nil || r.w == nil {
		return
	}
	r.mu.Lock()
	for len(r.order) > 0 {
		r.finishLocked(r.order[0], false)
	}
	p := r.p
	r.p = nil
	r.mu.Unlock()
	if p != nil {
		p.Wait()
	}
}
