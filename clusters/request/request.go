// Package request is one resolved cluster request: the clusters.Spec (the cluster's whole shape)
// plus the provider and its mechanics (engine, binary cache, keep). gangbench's commands build it
// from their flags, and `gangbench e2e` hands it to the suites binary as a JSON file
// (cluster-request.json in the run directory), so every flag reaches the cluster the same way
// whichever process creates it, instead of being flattened into a flag of each process on the way.
//
// The package knows no concrete provider: a Factory (clusters/providers.New, passed down from the
// program's edge) turns a request into a provider, so suites, perf and lab build clusters through
// one constructor and ask the provider's Capabilities instead of its name.
package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/clusters/k8sbin"
)

// FileName is the request's name in a run directory.
const FileName = "cluster-request.json"

// APIVersion and Kind identify a request file, so that a file of another shape is refused by name
// rather than read as an empty request. v1alpha2 moved the cluster's shape (workers, kwok nodes,
// node and scheduler images) from kindOptions into the spec's node groups and images.
const (
	APIVersion = "gangbench.dev/v1alpha2"
	Kind       = "ClusterRequest"
	// oldAPIVersion is refused by name: its kindOptions carried shape this version has in the spec.
	oldAPIVersion = "gangbench.dev/v1alpha1"
)

// Request is a cluster to create (or, with Held, one a holder process created already; with
// Kubeconfig, one someone else created).
type Request struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Provider is "local", "kind" or "existing": resolved, never "auto".
	Provider string        `json:"provider"`
	Spec     clusters.Spec `json:"spec"`
	// CacheDir is where Kubernetes binaries are built and cached; "" means k8sbin's default.
	CacheDir string `json:"cacheDir,omitempty"`
	// Engine is the container engine of a provider whose nodes are containers ("" detects one).
	Engine string `json:"engine,omitempty"`
	// Kubeconfig is the cluster of the existing provider.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// Keep leaves the cluster running after the run, until `gangbench cluster delete`.
	Keep bool `json:"keep,omitempty"`
	// Held says the cluster named Spec.Name already runs, held by a `gangbench cluster create`
	// holder process: users of the request attach to it by name and never create or delete it.
	Held bool `json:"held,omitempty"`
}

// Env is what the process building a provider adds to a request: where progress goes and the
// mechanics that are this process's, not the cluster's.
type Env struct {
	// Log receives progress; nil discards it.
	Log *slog.Logger
	// Progress receives the binary builds' output; nil discards it.
	Progress io.Writer
	// Holder marks clusters created by this process as held by it (`gangbench cluster create`),
	// so that other processes may ask it to restart components or delete the cluster.
	Holder bool
	// StateDir overrides the provider's state directory ("" is its default).
	StateDir string
}

// Factory builds the provider of a request. It is the one constructor of providers: the program's
// edge passes clusters/providers.New down as this value, so libraries import no concrete provider.
// Building a provider checks the request's mechanics (engine, held) but not its spec: that is
// Provider.Validate, run once up front by whoever hands the request on, and again by Create.
type Factory func(r Request, env Env) (clusters.Provider, error)

// New returns a request for provider with the identifying fields set.
func New(provider string, spec clusters.Spec) Request {
	return Request{APIVersion: APIVersion, Kind: Kind, Provider: provider, Spec: spec}
}

// Validate checks what the request says about itself: its version and that a held cluster is
// named. The provider's own rules are Provider.Validate's, so they run where the provider is.
func (r Request) Validate() error {
	if r.APIVersion == oldAPIVersion && r.Kind == Kind {
		return fmt.Errorf("cluster request: apiVersion %s is no longer read (kindOptions' workers, kwok nodes and images moved into spec.nodeGroups and spec.images in %s): write the request again with this gangbench", oldAPIVersion, APIVersion)
	}
	if r.APIVersion != APIVersion || r.Kind != Kind {
		return fmt.Errorf("cluster request: apiVersion %q, kind %q: want %s, %s", r.APIVersion, r.Kind, APIVersion, Kind)
	}
	if r.Provider == "" {
		return errors.New("cluster request: provider: empty")
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
	b, err := io.ReadAll(rd)
	if err != nil {
		return Request{}, fmt.Errorf("cluster request: %w", err)
	}
	// The version first, leniently: a file of an older version is refused by its name, not by
	// the first of its fields this version does not know.
	var head struct{ APIVersion, Kind string }
	if json.Unmarshal(b, &head) == nil && head.APIVersion != APIVersion {
		if err := (Request{APIVersion: head.APIVersion, Kind: head.Kind}).Validate(); err != nil {
			return Request{}, err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
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
