package kind

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"sigs.k8s.io/kind/pkg/cluster"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	kindlog "sigs.k8s.io/kind/pkg/log"
)

// kindAPI is the part of *cluster.Provider gangbench uses; tests substitute a fake because nothing
// behind the real one works without a container engine.
type kindAPI interface {
	Create(name string, options ...cluster.CreateOption) error
	Delete(name, explicitKubeconfigPath string) error
	List() ([]string, error)
	ListNodes(name string) ([]nodes.Node, error)
}

var _ kindAPI = (*cluster.Provider)(nil)

// newKindProvider returns kind's provider for an engine that DetectEngine accepted. The runtime is
// always given explicitly: with none, kind guesses and falls back to docker.
func newKindProvider(engine string, l *slog.Logger) kindAPI {
	opts := []cluster.ProviderOption{cluster.ProviderWithLogger(slogAdapter{l: l})}
	switch engine {
	case "podman":
		opts = append(opts, cluster.ProviderWithPodman())
	case "nerdctl":
		opts = append(opts, cluster.ProviderWithNerdctl("nerdctl"))
	default:
		opts = append(opts, cluster.ProviderWithDocker())
	}
	return engineKind{kindAPI: cluster.NewProvider(opts...), engine: engine}
}

// slogAdapter makes an slog.Logger a kind log.Logger: V(0) messages (kind's user-facing progress,
// "Ensuring node image", "Starting control-plane") are Info, higher verbosity is Debug.
type slogAdapter struct{ l *slog.Logger }

var _ kindlog.Logger = slogAdapter{}

func (a slogAdapter) Warn(m string)                { a.l.Warn(strings.TrimSpace(m), "from", "kind") }
func (a slogAdapter) Warnf(f string, args ...any)  { a.Warn(fmt.Sprintf(f, args...)) }
func (a slogAdapter) Error(m string)               { a.l.Error(strings.TrimSpace(m), "from", "kind") }
func (a slogAdapter) Errorf(f string, args ...any) { a.Error(fmt.Sprintf(f, args...)) }
func (a slogAdapter) V(v kindlog.Level) kindlog.InfoLogger {
	lvl := slog.LevelInfo
	if v > 0 {
		lvl = slog.LevelDebug
	}
	return slogInfo{l: a.l, lvl: lvl}
}

type slogInfo struct {
	l   *slog.Logger
	lvl slog.Level
}

func (i slogInfo) Info(m string) {
	if m = strings.TrimSpace(m); m != "" {
		i.l.Log(context.Background(), i.lvl, m, "from", "kind")
	}
}
func (i slogInfo) Infof(f string, args ...any) { i.Info(fmt.Sprintf(f, args...)) }
func (i slogInfo) Enabled() bool               { return i.l.Enabled(context.Background(), i.lvl) }
