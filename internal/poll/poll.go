// Package poll waits for a condition by looking at it again and again, with a deadline, and on
// failure says what it waited for and what it last saw: "timed out" alone sends users digging.
// It is the poll loop the suites, the lab and both cluster providers share; where a watch exists
// for what is awaited, use it instead.
package poll

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Cond is one look at the awaited state. done ends the wait; seen describes what the look found, for
// the error if the wait times out ("" keeps the previous description); err is a look that failed,
// which does not end the wait (the next look may succeed) unless it is wrapped by Stop.
type Cond func(ctx context.Context) (done bool, seen string, err error)

// Until calls cond at once and then every interval until it reports done, timeout passes or ctx
// ends. cond is always called at least once, even with a timeout of zero, so a condition that
// already holds never fails. On timeout or ctx end the error is a *TimeoutError; a look that
// returned Stop(err) ends the wait with err as it is.
func Until(ctx context.Context, what string, interval, timeout time.Duration, cond Cond) error {
	start := time.Now()
	pctx := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last string
	var lastErr error
	for {
		done, seen, err := cond(ctx)
		var stop *stopError
		if errors.As(err, &stop) {
			return stop.err
		}
		if done && err == nil {
			return nil
		}
		// A look that failed keeps the last description that came without error: the final look
		// often fails only because the deadline hit, and "context deadline exceeded" says nothing
		// about what was awaited.
		if err != nil {
			lastErr = err
		} else if seen != "" {
			last = seen
		}
		select {
		case <-ctx.Done():
			e := &TimeoutError{What: what, Timeout: timeout, Elapsed: time.Since(start), Seen: last, LastErr: lastErr, ctxErr: ctx.Err()}
			// Our own deadline is a timeout; the caller's ctx ending (cancelled, or its shorter
			// deadline) is said as such, since then the timeout did not pass.
			if pctx.Err() != nil {
				e.ctxErr = pctx.Err()
				e.Cancelled = true
			}
			return e
		case <-tick.C:
		}
	}
}

// TimeoutError is a wait that ended before its condition held.
type TimeoutError struct {
	What    string
	Timeout time.Duration
	// Elapsed is how long the wait ran.
	Elapsed time.Duration
	// Seen is the last description a look gave without error; "" if none did.
	Seen string
	// LastErr is the error of the last look that failed, if any did.
	LastErr error
	// Cancelled says the caller's context ended before the timeout passed.
	Cancelled bool
	ctxErr    error
}

func (e *TimeoutError) Error() string {
	seen := e.Seen
	if seen == "" {
		seen = "nothing"
	}
	var msg string
	if e.Cancelled {
		msg = fmt.Sprintf("gave up after %s waiting for %s (%v); last seen: %s", e.Elapsed.Round(time.Millisecond), e.What, e.ctxErr, seen)
	} else {
		msg = fmt.Sprintf("timed out after %s waiting for %s; last seen: %s", e.Timeout, e.What, seen)
	}
	if e.LastErr != nil {
		msg += fmt.Sprintf(" (last error: %v)", e.LastErr)
	}
	return msg
}

// Unwrap gives the context's error (context.DeadlineExceeded or context.Canceled), so callers can
// tell a timeout from other failures with errors.Is.
func (e *TimeoutError) Unwrap() error { return e.ctxErr }

// Stop wraps an error that makes further looks pointless (the process being waited for has exited,
// say): returned by a Cond, it ends Until at once with err. Stop(nil) is nil.
func Stop(err error) error {
	if err == nil {
		return nil
	}
	return &stopError{err: err}
}

type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }
func (e *stopError) Unwrap() error { return e.err }
