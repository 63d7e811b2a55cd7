package plugin

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"strings"
	"sync"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
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

// healthState is the unhealthy devices and a broadcast of changes to them.
type healthState struct {
	mu        sync.Mutex
	unhealthy map[string]source // absent: healthy
	// changed is closed (and replaced) whenever a device's effective health changes; every
	// ListAndWatch stream waits on it, so one close wakes them all.
	changed chan struct{}
	// fileContent is the health file as last applied, to skip re-parsing (and re-logging) on ticks.
	fileContent *string
}

func newHealthState() healthState {
	return healthState{unhealthy: map[string]source{}, changed: make(chan struct{})}
}

// snapshot returns a copy of the unhealthy set and the channel closed at the next change.
func (h *healthState) snapshot() (map[string]source, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.unhealthy), h.changed
}

// update sets src on exactly the IDs in set among all and clears it on the others, then wakes the
// watchers if any device's effective health changed. It reports whether one did.
func (h *healthState) update(src source, all []string, set func(id string) bool) bool {
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

// SetHealth marks device id healthy or unhealthy through the API and, if that changes its
// effective health, sends every ListAndWatch stream a new list. A device the health file lists stays
// unhealthy until it leaves the file too. Unknown IDs are an error.
func (p *Plugin) SetHealth(id string, healthy bool) error {
	if _, ok := p.index[id]; !ok {
		return fmt.Errorf("plugin: unknown device %q: node %q has %s devices %s..%s",
			id, p.opts.NodeName, p.inv.ResourceName, p.ids[0], p.ids[len(p.ids)-1])
	}
	if p.health.update(sourceAPI, []string{id}, func(string) bool { return !healthy }) {
		p.log.Info("device health changed", "device", id, "healthy", healthy, "by", "api")
	}
	return nil
}

// reloadHealthFile applies Options.HealthFile: every listed known ID is unhealthy, every other
// device is not (as far as the file is concerned). A missing file lists nothing. A file that cannot
// be read keeps the last state, since a transient error must not flip devices healthy.
func (p *Plugin) reloadHealthFile() {
	data, err := os.ReadFile(p.opts.HealthFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = nil
	case err != nil:
		p.log.Warn("cannot read health file; keeping the last state", "file", p.opts.HealthFile, "err", err)
		return
	}
	content := string(data)
	p.health.mu.Lock()
	same := p.health.fileContent != nil && *p.health.fileContent == content
	p.health.fileContent = &content
	p.health.mu.Unlock()
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
		if _, ok := p.index[line]; !ok {
			unknown = append(unknown, line)
			continue
		}
		listed[line] = true
	}
	if len(unknown) > 0 {
		p.log.Warn("health file lists unknown devices; ignoring them", "file", p.opts.HealthFile, "unknown", unknown)
	}
	if p.health.update(sourceFile, p.ids, func(id string) bool { return listed[id] }) {
		p.log.Info("device health changed", "by", "file", "file", p.opts.HealthFile, "unhealthy", len(listed))
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
	Node          string         `json:"node"`
	ResourceName  string         `json:"resourceName"`
	Product       string         `json:"product"`
	Registered    bool           `json:"registered"`
	RegisterError string         `json:"registerError,omitempty"`
	Registrations int            `json:"registrations"`
	Devices       []DeviceStatus `json:"devices"`
}

// Status returns the plugin's devices and registration state.
func (p *Plugin) Status() Status {
	unhealthy, _ := p.health.snapshot()
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
	st.Devices = make([]DeviceStatus, len(p.ids))
	for i, id := range p.ids {
		d := DeviceStatus{ID: id, Index: i, NVLinkDomain: p.inv.DomainOf(i), Health: pluginapi.Healthy}
		if src := unhealthy[id]; src != 0 {
			d.Health, d.UnhealthyBy = pluginapi.Unhealthy, src.names()
		}
		st.Devices[i] = d
	}
	return st
}

// Handler is the HTTP health API:
//
//	GET  /healthz                 200 while the process serves
//	GET  /readyz                  200 once registered with the kubelet, 503 otherwise
//	GET  /devices                 Status as JSON
//	POST /devices/{id}/unhealthy  SetHealth(id, false); the device's DeviceStatus as JSON
//	POST /devices/{id}/healthy    SetHealth(id, true); the device's DeviceStatus as JSON
//
// Unknown devices get 404. Errors are JSON {"error": "..."}.
func (p *Plugin) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if ok, err := p.Registered(); !ok {
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
		writeJSON(w, http.StatusOK, p.Status())
	})
	setHealth := func(healthy bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			id := r.PathValue("id")
			i, ok := p.index[id]
			if !ok {
				writeJSON(w, http.StatusNotFound, map[string]string{"error": fmt.Sprintf("unknown device %q", id)})
				return
			}
			if err := p.SetHealth(id, healthy); err != nil {
				writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
				return
			}
			writeJSON(w, http.StatusOK, p.Status().Devices[i])
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
