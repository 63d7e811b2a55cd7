// Package speedprobe measures how fast the machine's CPUs run a fixed piece of work, over time.
//
// On a shared virtual machine the same instructions may take more CPU time in one minute than in
// the next (a busy sibling hyperthread on the host, or the host running something else on the vCPU
// without reporting it as steal time), and then every process's CPU time inflates alike. A
// benchmark that compares two tools run minutes apart would then compare the machine as much as
// the tools; the probe says whether that happened. It runs a small fixed work unit every interval on a thread of its own and records
// the thread CPU time the unit took: CPU time, not wall time, so a probe that waits for a CPU on a
// saturated machine is not counted slower, only one whose CPU ran slower.
package speedprobe

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Sample is one run of the work unit: when it ended and the thread CPU time it took.
type Sample struct {
	At   time.Time
	Took time.Duration
}

// Probe samples the work unit until its context ends. Its methods are safe for concurrent use.
type Probe struct {
	mu      sync.Mutex
	samples []Sample
	done    chan struct{}
	err     error
	// check folds in every unit's result, so the compiler cannot drop the work.
	check uint64
}

// DefaultInterval is how often Start runs the unit: a unit of about 2 ms every 250 ms costs under
// one percent of one core.
const DefaultInterval = 250 * time.Millisecond

// unitIterations sizes the work unit: about 2 ms on a 2 GHz core (1.8 to 1.95 ms measured here).
const unitIterations = 1 << 20

// Start runs the probe every interval until ctx ends; Wait waits for it to stop.
func Start(ctx context.Context, interval time.Duration) *Probe {
	p := &Probe{done: make(chan struct{})}
	go p.loop(ctx, interval)
	return p
}

func (p *Probe) loop(ctx context.Context, interval time.Duration) {
	defer close(p.done)
	// The thread CPU clock is per OS thread: the unit must not move threads while it runs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		took, x, err := measureUnit()
		p.mu.Lock()
		p.check ^= x
		if err != nil {
			p.err = err
			p.mu.Unlock()
			return
		}
		p.samples = append(p.samples, Sample{At: time.Now(), Took: took})
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// measureUnit runs the work unit once and returns the thread CPU time it took, and its result.
func measureUnit() (time.Duration, uint64, error) {
	// The clock is the calling thread's: a goroutine moved to another thread between the two
	// readings would subtract two threads' clocks (seen as a negative duration on a loaded machine).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var t0, t1 unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t0); err != nil {
		return 0, 0, err
	}
	x := work(unitIterations)
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t1); err != nil {
		return 0, 0, err
	}
	return time.Duration(t1.Nano() - t0.Nano()), x, nil
}

// work is integer arithmetic with a dependency chain (xorshift): it stays in registers, so it
// measures the core's speed, not memory's.
func work(n int) uint64 {
	x := uint64(88172645463325252)
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// Wait waits until the probe has stopped (its context ended) and returns why it stopped early, if
// it did.
func (p *Probe) Wait() error {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Between is the median CPU time of the units that ended in [from, to], and how many there were.
func (p *Probe) Between(from, to time.Time) (time.Duration, int) {
	if p == nil {
		return 0, 0
	}
	p.mu.Lock()
	var ds []time.Duration
	for _, s := range p.samples {
		if !s.At.Before(from) && !s.At.After(to) {
			ds = append(ds, s.Took)
		}
	}
	p.mu.Unlock()
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2], len(ds)
}
