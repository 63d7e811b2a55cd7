package poll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestUntilDone(t *testing.T) {
	n := 0
	err := Until(context.Background(), "the third look", time.Millisecond, 5*time.Second, func(context.Context) (bool, string, error) {
		n++
		return n == 3, fmt.Sprintf("look %d", n), nil
	})
	if err != nil || n != 3 {
		t.Fatalf("Until = %v after %d looks, want nil after 3", err, n)
	}
}

// A condition that already holds passes even when no time is left: the first look always happens.
func TestUntilZeroTimeoutStillLooks(t *testing.T) {
	looked := false
	err := Until(context.Background(), "x", time.Hour, 0, func(context.Context) (bool, string, error) {
		looked = true
		return true, "", nil
	})
	if err != nil || !looked {
		t.Fatalf("Until = %v, looked %v; want nil after one look", err, looked)
	}
}

func TestUntilTimeoutReportsLastSeen(t *testing.T) {
	for _, tc := range []struct {
		name string
		cond Cond
		want []string
		seen string
		err  bool
	}{
		{
			name: "last description wins",
			cond: counting(func(n int) (string, error) { return fmt.Sprintf("%d bound", n), nil }),
			want: []string{"timed out after 50ms waiting for pods bound; last seen: ", " bound"},
		},
		{
			// The final look failing (typically because the deadline hit) must not hide what the
			// looks before it saw.
			name: "failed look keeps earlier description",
			cond: counting(func(n int) (string, error) {
				if n == 1 {
					return "2 of 3 bound", nil
				}
				return "", errors.New("connection refused")
			}),
			want: []string{"last seen: 2 of 3 bound (last error: connection refused)"},
			seen: "2 of 3 bound",
			err:  true,
		},
		{
			name: "empty description keeps earlier one",
			cond: counting(func(n int) (string, error) {
				if n == 1 {
					return "first", nil
				}
				return "", nil
			}),
			want: []string{"last seen: first"},
			seen: "first",
		},
		{
			name: "never seen",
			cond: counting(func(int) (string, error) { return "", errors.New("no route") }),
			want: []string{"last seen: nothing (last error: no route)"},
			err:  true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Until(context.Background(), "pods bound", 5*time.Millisecond, 50*time.Millisecond, tc.cond)
			var te *TimeoutError
			if !errors.As(err, &te) {
				t.Fatalf("Until = %v (%T), want a *TimeoutError", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.seen != "" && te.Seen != tc.seen {
				t.Errorf("Seen = %q, want %q", te.Seen, tc.seen)
			}
			if (te.LastErr != nil) != tc.err {
				t.Errorf("LastErr = %v, want an error: %v", te.LastErr, tc.err)
			}
			if !errors.Is(err, context.DeadlineExceeded) || te.Cancelled {
				t.Errorf("a timeout must unwrap to DeadlineExceeded and not count as cancelled: %v", err)
			}
		})
	}
}

// counting adapts a description-per-look function to a Cond that never holds.
func counting(f func(n int) (string, error)) Cond {
	n := 0
	return func(context.Context) (bool, string, error) {
		n++
		s, err := f(n)
		return false, s, err
	}
}

// The caller's context ending stops the wait long before its own timeout, and says so.
func TestUntilHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	start := time.Now()
	err := Until(ctx, "never", time.Millisecond, time.Hour, func(context.Context) (bool, string, error) {
		n++
		if n == 3 {
			cancel()
		}
		return false, fmt.Sprintf("look %d", n), nil
	})
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Until ran %s after its context was cancelled", d)
	}
	var te *TimeoutError
	if !errors.As(err, &te) || !te.Cancelled || !errors.Is(err, context.Canceled) {
		t.Fatalf("Until = %v, want a cancelled *TimeoutError unwrapping to context.Canceled", err)
	}
	if !strings.Contains(err.Error(), "gave up after") || !strings.Contains(err.Error(), "last seen: look 3") {
		t.Errorf("error %q should say it gave up and what it last saw", err)
	}
}

// The ctx a look gets carries the wait's deadline, so a slow look cannot outlast the wait.
func TestUntilLookHasDeadline(t *testing.T) {
	err := Until(context.Background(), "a slow look", time.Millisecond, 20*time.Millisecond, func(ctx context.Context) (bool, string, error) {
		if _, ok := ctx.Deadline(); !ok {
			return false, "", Stop(errors.New("look without deadline"))
		}
		<-ctx.Done()
		return false, "", ctx.Err()
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Until = %v, want a timeout", err)
	}
}

func TestStop(t *testing.T) {
	gone := errors.New("process exited")
	n := 0
	err := Until(context.Background(), "x", time.Millisecond, time.Hour, func(context.Context) (bool, string, error) {
		n++
		if n == 2 {
			return false, "", Stop(fmt.Errorf("kwok: %w", gone))
		}
		return false, "starting", nil
	})
	if !errors.Is(err, gone) || n != 2 || err.Error() != "kwok: process exited" {
		t.Fatalf("Until = %v after %d looks, want the stopping error as it is after 2", err, n)
	}
	var te *TimeoutError
	if errors.As(err, &te) {
		t.Error("a stopped wait is not a timeout")
	}
	if Stop(nil) != nil {
		t.Error("Stop(nil) must be nil")
	}
}
