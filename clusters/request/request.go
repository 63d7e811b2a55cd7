// Package request is one resolved cluster request: the clusters.Spec plus the provider and its
// options. gangbench's commands build it from their flags, and `gangbench e2e` hands it to the
// suites binary as a JSON file (cluster-request.json in the run directory), so every flag reaches
// the cluster the same way whichever process creates it, instead of being flattened into a flag of
// each process on the way.
package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
	"github.com/gangbench/gangbench/clusters/kind"
	"github.com/gangbench/gangbench/clusters/local"
)

// FileName is the request's name in a run directory.
const FileName = "cluster-request.json"

// APIVersion and Kind identify a request file, so that a file of another shape is refused by name
// rather than read as an empty request.
const (
	APIVersion = "gangbench.dev/v1alpha1"
	Kind       = "ClusterRequest"
)

// Request is a cluster to create (or, with Held, one a holder process created already).
type Request struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Provider is "local" or "kind": resolved, never "auto".
	Provider string        `json:"provider"`
	Spec     clusters.Spec `json:"spec"`
	// CacheDir is where Kubernetes binaries are built and cached; "" means k8sbin's default.
	CacheDir string `json:"cacheDir,omitempty"`
	// KindOptions are the kind provider's own options; nil on local.
	KindOptions *KindOptions `json:"kindOptions,omitempty"`
	// Keep leaves the cluster running after the run, until `gangbench cluster delete`.
	Keep bool `json:"keep,omitempty"`
	// Held says the cluster named Spec.Name already runs, held by a `gangbench cluster create`
	// holder process: users of the request attach to it by name and never create or delete it.
	Held bool `json:"held,omitempty"`
}

// KindOptions are the serialisable part of kind.Options.
type KindOptions struct {
	Engine         string `json:"engine,omitempty"`
	Workers        int    `json:"workers,omitempty"`
	NodeImage      string `json:"nodeImage,omitempty"`
	SchedulerImage string `json:"schedulerImage,omitempty"`
	KwokNodes      int    `json:"kwokNodes,omitempty"`
	// PlainWorkers are kind workers without GPUs (the seed lab's second worker).
	PlainWorkers int `json:"plainWorkers,omitempty"`
}

// New returns a request for provider with the identifying fields set.
func New(provider string, spec clusters.Spec) Request {
	return Request{APIVersion: APIVersion, Kind: Kind, Provider: provider, Spec: spec}
}

// Validate checks the request with the rules of its provider, before anything is built or started.
// Errors name the field and its value.
func (r Request) Validate() error {
	if r.APIVersion != APIVersion || r.Kind != Kind {
		return fmt.Errorf("cluster request: apiVersion %q, kind %q: want %s, %s", r.APIVersion, r.Kind, APIVersion, Kind)
	}
	switch r.Provider {
	case local.ProviderName:
		if r.KindOptions != nil && *r.KindOptions != (KindOptions{}) {
			return fmt.Errorf("cluster request: kindOptions %+v given with provider local: engine, workers, node image, scheduler image and kwok nodes are kind options", *r.KindOptions)
		}
		if err := local.Validate(r.Spec); err != nil {
			return fmt.Errorf("cluster request: %w", err)
		}
	case kind.ProviderName:
		if r.Held {
			return errors.New("cluster request: held: only local clusters have a holder process (kind clusters outlive every process by themselves)")
		}
		o := r.kindOptions()
		if o.Engine != "" && !slices.Contains(kind.Engines(), o.Engine) {
			return fmt.Errorf("cluster request: kind engine %q: accepted %s", o.Engine, strings.Join(kind.Engines(), ", "))
		}
		if err := kind.Validate(r.Spec, o); err != nil {
			return fmt.Errorf("cluster request: %w", err)
		}
	default:
		return fmt.Errorf("cluster request: provider %q: accepted local, kind", r.Provider)
	}
	if r.Held && r.Spec.Name == "" {
		return errors.New("cluster request: held without a cluster name")
	}
	return nil
}

// Binaries are the k8sbin options of the request, with progress going to progress.
func (r Request) Binaries(progress io.Writer) k8sbin.Options {
	return k8sbin.Options{CacheDir: r.CacheDir, KubeBinDir: r.Spec.KubeBinDir, SchedulerBinary: r.Spec.SchedulerBinary, Progress: progress}
}

func (r Request) kindOptions() kind.Options {
	var o kind.Options
	if k := r.KindOptions; k != nil {
		o = kind.Options{Engine: k.Engine, Workers: k.Workers, NodeImage: k.NodeImage, SchedulerImage: k.SchedulerImage, KwokNodes: k.KwokNodes, PlainWorkers: k.PlainWorkers}
	}
	o.Keep = r.Keep
	return o
}

// KindProviderOptions are the kind provider's options of the request (binaries from bins).
// They are one option per field, so that options a caller appends after them (perf sets workers
// and kwok nodes per scenario) win, and options before them survive.
func (r Request) KindProviderOptions(bins k8sbin.Options) []kind.Option {
	o := r.kindOptions()
	return []kind.Option{
		kind.WithEngine(o.Engine), kind.WithWorkers(o.Workers), kind.WithNodeImage(o.NodeImage),
		kind.WithSchedulerImage(o.SchedulerImage), kind.WithKwokNodes(o.KwokNodes), kind.WithPlainWorkers(o.PlainWorkers), kind.WithKeep(o.Keep), kind.WithBinaries(bins),
	}
}

// NewProvider builds the request's provider. log receives progress (nil discards it); local options
// such as a detached owner or a state dir come as extra.
func (r Request) NewProvider(log *slog.Logger, progress io.Writer, extra ...local.Option) (clusters.Provider, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bins := r.Binaries(progress)
	if r.Provider == kind.ProviderName {
		return kind.New(append(r.KindProviderOptions(bins), kind.WithLogger(log))...)
	}
	return local.New(append([]local.Option{local.WithBinaries(bins), local.WithLogger(log)}, extra...)...)
}

// Write writes the request as indented JSON to path (mode 0644: it holds no secret).
func (r Request) Write(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Decode reads a request strictly (unknown fields are an error, so a misspelt field is never
// silently dropped) and validates it.
func Decode(rd io.Reader) (Request, error) {
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	var r Request
	if err := dec.Decode(&r); err != nil {
		return Request{}, fmt.Errorf("cluster request: %w", err)
	}
	if err := r.Validate(); err != nil {
		return Request{}, err
	}
	return r, nil
}

// Read reads and validates the request file at path ("-" reads standard input).
func Read(path string) (Request, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return Request{}, fmt.Errorf("cluster request: %w", err)
	}
	r, err := Decode(bytes.NewReader(b))
	if err != nil {
		return Request{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}
