package procstat

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func write(t *testing.T, root string, rel, body string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// stat is a /proc/<pid>/stat line with the given parent, utime, stime (ticks) and start time.
func stat(pid, comm string, ppid, utime, stime, start int) string {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
	// cutime cstime priority nice threads itrealvalue starttime …
	return pid + " (" + comm + ") S " + strconv.Itoa(ppid) + " 1 1 0 -1 0 0 0 0 0 " + strconv.Itoa(utime) + " " + strconv.Itoa(stime) + " 0 0 20 0 4 0 " + strconv.Itoa(start) + " 1000 100\n"
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	// A command with a space and a parenthesis, as the kernel allows.
	write(t, dir, "42/stat", stat("42", "kube sched)uler", 1, 250, 50, 9000))
	write(t, dir, "42/status", "Name:\tkube-scheduler\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n")
	write(t, dir, "42/task/42/schedstat", "1000 2000000000 5\n")
	write(t, dir, "42/task/43/schedstat", "1000 500000000 5\n")
	u, err := Root(dir).Read(42)
	if err != nil {
		t.Fatal(err)
	}
	if u.CPU != 3*time.Second || u.RSS != 100<<20 || u.Peak != 200<<20 || u.Wait != 2500*time.Millisecond || u.Start != 9000 {
		t.Errorf("Read = %+v, want 3 s CPU, 100 MiB RSS, 200 MiB peak, 2.5 s wait, start 9000", u)
	}
	if _, err := Root(dir).Read(7); err == nil {
		t.Error("a missing process must be an error")
	}
	write(t, dir, "8/stat", "8 (short) S 1 2\n")
	if _, err := Root(dir).Read(8); err == nil {
		t.Error("a truncated stat line must be an error")
	}
}

func TestReadMachine(t *testing.T) {
	dir := t.TempDir()
	// user nice system idle iowait irq softirq steal guest guest_nice: guest is inside user, so
	// the 7 ticks of guest time are not counted twice; the 20 of steal are busy (not idle here).
	write(t, dir, "stat", "cpu  100 0 50 800 50 0 0 20 7 0\ncpu0 50 0 25 400 25 0 0 10 7 0\ncpu1 50 0 25 400 25 0 0 10 0 0\nintr 1\n")
	m, err := Root(dir).ReadMachine()
	if err != nil {
		t.Fatal(err)
	}
	if m.Busy != 1700*time.Millisecond || m.Total != 10200*time.Millisecond || m.Steal != 200*time.Millisecond || m.CPUs != 2 {
		t.Errorf("ReadMachine = %+v, want 1.7 s busy (0.2 s of it stolen) of 10.2 s on 2 CPUs", m)
	}
}

// TestReadSelf reads this test process from the real /proc: the fields are where Read expects them.
func TestReadSelf(t *testing.T) {
	u, err := Proc.Read(os.Getpid())
	if err != nil {
		t.Skipf("no /proc here: %v", err)
	}
	if u.RSS <= 0 || u.Peak < u.RSS || u.Start == 0 {
		t.Errorf("Read(self) = %+v", u)
	}
	if _, err := Proc.ReadMachine(); err != nil {
		t.Error(err)
	}
}
