package kind

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
	kwokcfg "github.com/gangbench/gangbench/clusters/kwok"
	"github.com/gangbench/gangbench/internal/poll"
	"github.com/gangbench/gangbench/internal/proc"
)

// kwokLaunch is how the kwok controller of one cluster is started.
type kwokLaunch struct {
	Binary  string   `json:"binary"`
	Args    []string `json:"args"`
	LogPath string   `json:"logPath"`
	// Port is the --server-address port whose /healthz says kwok is up.
	Port    int           `json:"port"`
	Timeout time.Duration `json:"timeout"`
}

// kwokProc is a started kwok controller.
type kwokProc struct {
	Ref proc.Ref
}

// kwokArgs renders the kwok controller's flags; Spec.ExtraArgs[kwok-controller] override them.
func kwokArgs(kubeconfig, config string, port int, extra map[string]string) []string {
	flags := map[string]string{
		"kubeconfig": kubeconfig,
		"config":     config,
		// Only nodes we created as simulated: the kind nodes' real kubelets are never touched.
		"manage-nodes-with-annotation-selector": kwokcfg.ManageNodesAnnotationSelector,
		"server-address":                        fmt.Sprintf("127.0.0.1:%d", port),
		"cidr":                                  "10.0.0.0/16",
		"node-ip":                               "127.0.0.1",
	}
	maps.Copy(flags, trimmedArgs(extra))
	args := make([]string, 0, len(flags))
	for _, k := range slices.Sorted(maps.Keys(flags)) {
		args = append(args, "--"+k+"="+flags[k])
	}
	return args
}

// startKwokProcess starts the kwok controller in its own session, so that it keeps simulating the
// nodes of a cluster that outlives this process (Options.Keep, `cluster create`); Delete stops it by
// its recorded pid and start time. It returns once kwok's /healthz answers, or with the log tail.
func startKwokProcess(ctx context.Context, l kwokLaunch) (*kwokProc, error) {
	logf, err := os.OpenFile(l.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	// Not CommandContext: the controller must not die with ctx once the cluster is up. A failed start
	// is stopped explicitly below.
	cmd := exec.Command(l.Binary, l.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start kwok controller %s: %w", l.Binary, err)
	}
	// Watched so that it is reaped if it exits while we run; once we exit it is re-parented and
	// reaped by init.
	child := proc.Watch(cmd)
	ref := proc.RefOf(cmd.Process.Pid)
	p := &kwokProc{Ref: ref}

	url := fmt.Sprintf("http://127.0.0.1:%d%s", l.Port, kwokcfg.HealthzPath)
	client := &http.Client{Timeout: 2 * time.Second}
	err = poll.Until(ctx, "kwok controller healthz "+url, 200*time.Millisecond, l.Timeout, func(ctx context.Context) (bool, string, error) {
		if !child.Running() {
			// No point waiting out the timeout for a controller that is gone.
			return false, "", poll.Stop(fmt.Errorf("kwok controller exited before it was ready (%s)\n--- last lines of %s ---\n%s", child.ExitSummary(), l.LogPath, proc.LogTail(l.LogPath, 20)))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			return false, "", err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	})
	var timeout *poll.TimeoutError
	if errors.As(err, &timeout) {
		_ = ref.Stop(context.WithoutCancel(ctx), syscall.SIGTERM, kwokGrace)
		return nil, fmt.Errorf("%w\n--- last lines of %s ---\n%s", err, l.LogPath, proc.LogTail(l.LogPath, 20))
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// freeLoopbackPort asks the kernel for a free 127.0.0.1 port. It is closed before use, so in theory
// another process can take it in between; a clash shows as a failed bind with the port named.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("allocate a loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// resolveKwokBinary returns the kwok controller binary and its version: Options.KwokBinary, or the
// k8sbin cache entry (<cache>/kwok/<version>/kwok), built there with k8sbin's GoBuilder when missing.
// k8sbin.Ensure would also build all of Kubernetes (20 minutes on two cores) that a kind cluster
// does not need, so only the kwok target is built, into the same cache layout (temp dir, then rename).
func resolveKwokBinary(ctx context.Context, o Options) (string, string, error) {
	if o.KwokBinary != "" {
		v, err := k8sbin.ProbeVersion(ctx, o.KwokBinary)
		if err != nil {
			return "", "", fmt.Errorf("kwok binary: %w", err)
		}
		return o.KwokBinary, v, nil
	}
	version := o.Bins.KwokVersion
	if version == "" {
		version = k8sbin.DefaultKwokVersion
	}
	cache := o.Bins.CacheDir
	if cache == "" {
		d, err := k8sbin.DefaultCacheDir()
		if err != nil {
			return "", "", err
		}
		cache = d
	}
	parent := filepath.Join(cache, k8sbin.TargetKwok)
	final := filepath.Join(parent, version)
	bin := filepath.Join(final, k8sbin.KwokBinary)
	if v, err := k8sbin.ProbeVersion(ctx, bin); err == nil {
		return bin, v, nil
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", "", fmt.Errorf("kwok cache: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-"+version+"-")
	if err != nil {
		return "", "", fmt.Errorf("kwok cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	var b k8sbin.Builder = &k8sbin.GoBuilder{}
	if o.Bins.Builder != nil {
		b = o.Bins.Builder
	}
	if err := b.Build(ctx, k8sbin.Target{Name: k8sbin.TargetKwok, Version: version}, tmp, func(string, bool) {}); err != nil {
		return "", "", fmt.Errorf("building kwok %s: %w", version, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		// Someone else (k8sbin or another gangbench) installed it meanwhile: use theirs if it works.
		if _, verr := k8sbin.ProbeVersion(ctx, bin); verr != nil {
			return "", "", fmt.Errorf("installing kwok %s into cache: %w", version, err)
		}
	}
	v, err := k8sbin.ProbeVersion(ctx, bin)
	if err != nil {
		return "", "", err
	}
	return bin, v, nil
}

// errKwokNotReady wraps node readiness failures with the kwok log, the usual culprit.
func errKwokNotReady(err error, logPath string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w\n--- last lines of %s log (%s) ---\n%s", err, clusters.Kwok, logPath, proc.LogTail(logPath, 15))
}
