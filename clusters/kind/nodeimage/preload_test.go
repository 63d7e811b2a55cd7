package nodeimage

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gangbench/gangbench/internal/proc"
)

// waitSocket stops as soon as the server is gone (not at its 30 s timeout), and passes once the
// socket accepts a connection.
func TestWaitSocket(t *testing.T) {
	start := func(t *testing.T, script string) *proc.Child {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		c := proc.WatchGroup(cmd)
		t.Cleanup(func() { _ = c.Stop(syscall.SIGKILL, time.Second) })
		return c
	}
	sock := filepath.Join(t.TempDir(), "s.sock")

	t.Run("server exits", func(t *testing.T) {
		began := time.Now()
		err := waitSocket(context.Background(), sock, start(t, "exit 3"), 30*time.Second)
		if err == nil || !strings.Contains(err.Error(), "exited before serving") || !strings.Contains(err.Error(), "exit status 3") {
			t.Errorf("waitSocket = %v, want an early exit with the status", err)
		}
		if d := time.Since(began); d > 10*time.Second {
			t.Errorf("waitSocket took %s for a server that exited at once", d)
		}
	})
	t.Run("served", func(t *testing.T) {
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := waitSocket(context.Background(), sock, start(t, "exec sleep 60"), 30*time.Second); err != nil {
			t.Errorf("waitSocket = %v on a served socket", err)
		}
	})
}
