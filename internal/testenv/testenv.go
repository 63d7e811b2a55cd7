// Package testenv says which tier of the project's own tests is running. `make test` (what CI runs)
// proves every behaviour once; `make test-long` sets GANGBENCH_TEST_LONG=1 and also runs what
// repeats a proof `make test` already makes elsewhere (the same proof on the other provider, a
// report that is not a proof), so that the long tier stays runnable and nothing is deleted to keep
// `make test` within its budget.
package testenv

import (
	"os"
	"testing"
	"time"
)

// LongEnv is the variable `make test-long` sets.
const LongEnv = "GANGBENCH_TEST_LONG"

// Long reports whether this is a `make test-long` run.
func Long() bool { return os.Getenv(LongEnv) == "1" }

// SkipUnlessLong skips t outside `make test-long`; why names where `make test` proves the same
// thing, so the skip line says what still covers it.
func SkipUnlessLong(t testing.TB, why string) {
	t.Helper()
	if !Long() {
		t.Skipf("runs in make test-long (%s=1): %s", LongEnv, why)
	}
}

// Eventually polls cond every 10 ms until it holds, failing t once timeout has passed: for the
// tests' state that changes without an event they could wait on (a socket appearing, bookkeeping
// done after an RPC returned).
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out after %s waiting until %s", timeout, what)
		case <-tick.C:
		}
	}
}

// ShortTempDir is a temp dir with a short path, removed when t ends: t.TempDir() is long enough
// (the test's name is in it) to overflow the 107 bytes a unix socket path may have.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
