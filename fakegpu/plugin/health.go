package plugin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gangbench/gangbench/fakegpu"
)

// source is a bit set of what marked a device unhealthy. A device is unhealthy while any source
// says so: marking it healthy through the API does not override the health file, and removing it
// from the file does not override the API.
type source uint8

const (
	sourceAPI  source = 1 << iota // SetHealth / the HTTP API
	sourceFile                    // Options.HealthFile
)

func (s source) names() []string {
	var n []string
	if s&sourceAPI != 0 {
		n = append(n, "api")
	}
	if s&sourceFile != 0 {
		n = append(n, "file")
	}
	return n
}

// Health is which of one node's fake GPUs are unhealthy, and who says so: the API (Set, the HTTP
// API's POST) and the health file. The device plugin reports it to the kubelet in ListAndWatch; the
// DRA plugin (fakegpu/draplugin) withdraws unhealthy devices from its ResourceSlice. When both run in
// one process they share one Health, so a device marked unhealthy leaves both APIs at once.
type Health struct {
	node  string
	inv   fakegpu.Inventory
	ids   []string       // device IDs in index order
	index map[string]int // device ID → index
	file  string         // the health file ("" for none)
	log   *slog.Logger

	mu        sync.Mutex
	unhealthy map[string]source // absent: healthy
	// changed is closed (and replaced) whenever a device's effective health changes; every watcher
	// (ListAndWatch streams, the DRA plugin's republisher) waits on it, so one close wakes them all.
	changed chan struct{}
	// fileContent is the health file as last applied, to skip re-parsing (and re-logging) on ticks.
	fileContent *string
}

// NewHealth returns the health of node's GPUs of inventory inv (WithDefaults applied), all healthy.
// file, if not empty, is the health file ReloadFile reads: one unhealthy device ID per line; relative
// paths are made absolute now. log may be nil.
func NewHealth(node string, inv fakegpu.Inventory, file string, log *slog.Logger) (*Health, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if file != "" {
		abs, err := filepath.Abs(file)
		if err != nil {
			return nil, fmt.Errorf("plugin: health file: %w", err)
		}
		file = abs
	}
	inv = inv.WithDefaults()
	ids := inv.DeviceIDs(node)
	index := make(map[string]int, len(ids))
	for i, id := range ids {
		index[id] = i
	}
	return &Health{
		node: node, inv: inv, ids: ids, index: index, file: file, log: log,
		unhealthy: map[string]source{}, changed: make(chan struct{}),
	}, nil
}

// IDs returns the device IDs in index order (a new slice).
func (h *Health) IDs() []string { return slices.Clone(h.ids) }

// snapshot returns a copy of the unhealthy set and the channel closed at the next change.
func (h *Health) snapshot() (map[string]source, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.unhealthy), h.changed
}

// Unhealthy returns the IDs of the unhealthy devices (sorted) and a channel closed at the next
// change of any device's effective health.
func (h *Health) Unhealthy() ([]string, <-chan struct{}) {
	m, changed := h.snapshot()
	return slices.Sorted(maps.Keys(m)), changed
}

// Devices returns every device's status, in index order.
func (h *Health) Devices() []DeviceStatus {
	unhealthy, _ := h.snapshot()
	out := make([]DeviceStatus, len(h.ids))
	for i, id := range h.ids {
		d := DeviceStatus{ID: id, Index: i, NVLinkDomain: h.inv.DomainOf(i), Health: pluginapi.Healthy}
		if src := unhealthy[id]; src != 0 {
			d.Health, d.UnhealthyBy = pluginapi.Unhealthy, src.names()
		}
		out[i] = d
	}
	return out
}

// update sets src on exactly the IDs in set among all and clears it on the others, then wakes the
// watchers if any device's effective health changed. It reports whether one did.
func (h *Health) update(src source, all []string, set func(id string) bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	changed := false
	for _, id := range all {
		old := h.unhealthy[id]
		next := old &^ src
		if set(id) {
			next |= src
		}
		if next == 0 {
			delete(h.unhealthy, id)
		} else {
			h.unhealthy[id] = next
		}
		changed = changed || (old == 0) != (next == 0)
	}
	if changed {
		close(h.changed)
		h.changed = make(chan struct{})
	}
	return changed
}

// Set marks device id healthy or unhealthy through the API and, if that changes its effective
// health, wakes every watcher. A device the health file lists stays unhealthy until it leaves the
// file too. Unknown IDs are an error.
func (h *Health) Set(id string, healthy bool) error {
	if _, ok := h.index[id]; !ok {
		return fmt.Errorf("plugin: unknown device %q: node %q has devices %s..%s",
			id, h.node, h.ids[0], h.ids[len(h.ids)-1])
	}
	if h.update(sourceAPI, []string{id}, func(string) bool { return !healthy }) {
		h.log.Info("device health changed", "device", id, "healthy", healthy, "by", "api")
	}
	return nil
}

// SetHealth marks device id healthy or unhealthy through the API (Health.Set) and, if that changes
// its effective health, sends every ListAndWatch stream a new list.
func (p *Plugin) SetHealth(id string, healthy bool) error { return p.health.Set(id, healthy) }

// Health is the plugin's device health, for a DRA plugin in the same process to share.
func (p *Plugin) Health() *Health { return p.health }

// ReloadFile applies the health file: every listed known ID is unhealthy, every other device is not
// (as far as the file is concerned). A missing file lists nothing. A file that cannot be read keeps
// the last state, since a transient error must not flip devices healthy. Without a file it does
// nothing.
func (h *Health) ReloadFile() {
	if h.file == "" {
		return
	}
	data, err := os.ReadFile(h.file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = nil
	case err != nil:
		h.log.Warn("cannot read health file; keeping the last state", "file", h.file, "err", err)
		return
	}
	content := string(data)
	h.mu.Lock()
	same := h.fileContent != nil && *h.fileContent == content
	h.fileContent = &content
	h.mu.Unlock()
	if same {
		return
	}

	listed := map[string]bool{}
	var unknown []string
	sc := bufio.NewScanner(strings.NewReader(content))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if _, ok := h.index[line]; !ok {
			unknown = append(unknown, line)
			continue
		}
		listed[line] = true
	}
	if len(unknown) > 0 {
		h.log.Warn("health file lists unknown devices; ignoring them", "file", h.file, "unknown", unknown)
	}
	if h.update(sourceFile, h.ids, func(id string) bool { return listed[id] }) {
		h.log.Info("device health changed", "by", "file", "file", h.file, "unhealthy", len(listed))
	}
}

// WatchFile applies the health file now and whenever it changes (a filesystem event in its
// directory, or every interval as a fallback for events fsnotify cannot deliver) until ctx ends.
// It is for a process without a device plugin, whose Run watches the file itself. Without a file it
// returns at once.
func (h *Health) WatchFile(ctx context.Context, interval time.Duration) {
	if h.file == "" {
		return
	}
	h.ReloadFile()
	var events <-chan fsnotify.Event
	if w, err := fsnotify.NewWatcher(); err != nil {
		h.log.Warn("cannot watch the filesystem; polling the health file instead", "err", err, "interval", interval)
	} else {
		defer func() { _ = w.Close() }()
		if err := w.Add(filepath.Dir(h.file)); err != nil {
			h.log.Warn("cannot watch the health file's directory; polling it instead", "dir", filepath.Dir(h.file), "err", err, "interval", interval)
		} else {
			events = w.Events
		}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if filepath.Clean(ev.Name) == h.file {
				h.ReloadFile()
			}
		case <-t.C:
			h.ReloadFile()
		}
	}
}

// DeviceStatus is one device as the HTTP API reports it.
type DeviceStatus struct {
	ID           string `json:"id"`
	Index        int    `json:"index"`
	NVLinkDomain int    `json:"nvlinkDomain"`
	// Health is pluginapi.Healthy or pluginapi.Unhealthy.
	Health string `json:"health"`
	// UnhealthyBy names what marks it unhealthy: "api" and/or "file".
	UnhealthyBy []string `json:"unhealthyBy,omitempty"`
}

// Status is the plugin as GET /devices reports it.
type Status struct {
	Node string `json:"node"`
	// ResourceName is the extended resource the device plugin advertises; empty when only the DRA
	// plugin runs.
	ResourceName string `json:"resourceName"`
	// Driver is the DRA driver name when the DRA plugin runs (fakegpu.DRADriver).
	Driver        string         `json:"driver,omitempty"`
	Product       string         `json:"product"`
	Registered    bool           `json:"registered"`
	RegisterError string         `json:"registerError,omitempty"`
	Registrations int            `json:"registrations"`
	Devices       []DeviceStatus `json:"devices"`
}

// Status returns the plugin's devices and registration state.
func (p *Plugin) Status() Status {
	p.mu.Lock()
	st := Status{
		Node:          p.opts.NodeName,
		ResourceName:  p.inv.ResourceName,
		Product:       p.inv.Product,
		Registered:    p.registered,
		Registrations: p.registrations,
	}
	if p.registerErr != nil {
		st.RegisterError = p.registerErr.Error()
	}
	p.mu.Unlock()
	st.Devices = p.health.Devices()
	return st
}

// Controller is what the HTTP health API serves: a plugin's status, whether it is registered with
// the kubelet, and the API side of its devices' health. *Plugin is one; the DRA plugin
// (fakegpu/draplugin) is another, and a process running both serves one that combines them.
type Controller interface {
	Status() Status
	Registered() (bool, error)
	SetHealth(id string, healthy bool) error
}

// Handler is the HTTP health API of the plugin (NewHandler(p)).
func (p *Plugin) Handler() http.Handler { return NewHandler(p) }

// NewHandler is the HTTP health API of c:
//
//	GET  /healthz                 200 while the process serves
//	GET  /readyz                  200 once registered with the kubelet, 503 otherwise
//	GET  /devices                 Status as JSON
//	POST /devices/{id}/unhealthy  SetHealth(id, false); the device's DeviceStatus as JSON
//	POST /devices/{id}/healthy    SetHealth(id, true); the device's DeviceStatus as JSON
//
// Unknown devices get 404. Errors are JSON {"error": "..."}.
func NewHandler(c Controller) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ok, err := c.Registered(); !ok {
			msg := "not registered with the kubelet"
			if err != nil {
				msg += ": " + err.Error()
			}
			http.Error(w, msg, http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /devices", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, c.Status())
	})
	device := func(id string) (DeviceStatus, bool) {
		for _, d := range c.Status().Devices {
			if d.ID == id {
				return d, true
			}
		}
		return DeviceStatus{}, false
	}
	setHealth := func(healthy bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			id := r.PathValue("id")
			if _, ok := device(id); !ok {
				writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("unknown device %q", id)})
				return
			}
			if err := c.SetHealth(id, healthy); err != nil {
				writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
				return
			}
			d, _ := device(id)
			writeJSON(w, http.StatusOK, d)
		}
	}
	mux.HandleFunc("POST /devices/{id}/unhealthy", setHealth(false))
	mux.HandleFunc("POST /devices/{id}/healthy", setHealth(true))
	return mux
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v) // the client went away; nothing to do
}
