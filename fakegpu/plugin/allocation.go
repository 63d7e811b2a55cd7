package plugin

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// AllocationPrefix starts every allocation record line. A record is the prefix followed by an
// Allocation as one JSON object and a newline:
//
//	fakegpu-allocation {"time":"2025-01-02T03:04:05.123456789Z","node":"kind-worker","resource":"nvidia.com/gpu","deviceIDs":["GPU-…-0"],"call":1,"container":0}
//
// The format is stable: fields may be added, never renamed or removed, and ParseAllocations ignores
// fields it does not know.
const AllocationPrefix = "fakegpu-allocation "

// maxAllocations bounds the records a Plugin keeps in memory; the log has every one.
const maxAllocations = 1024

// Allocation records one container's devices as Allocate granted them. A record exists only because
// the kubelet called Allocate, so finding one proves a container really got fake GPUs through the
// device plugin API.
type Allocation struct {
	// Time is the wall time the plugin answered, in UTC (RFC 3339 with nanoseconds in the record).
	Time time.Time `json:"time"`
	// Node is the node the plugin serves.
	Node string `json:"node"`
	// Resource is the extended resource name, e.g. nvidia.com/gpu.
	Resource string `json:"resource"`
	// DeviceIDs are the devices the kubelet asked for, in its order.
	DeviceIDs []string `json:"deviceIDs"`
	// Call numbers the Allocate calls the plugin process granted, from 1. It starts again when the
	// process does; Time orders records across restarts.
	Call int64 `json:"call"`
	// Container is the index of the container request within the call, from 0.
	Container int `json:"container"`
}

// validate checks what every record the plugin writes has, so that a truncated or hand-made line is
// caught rather than read as an allocation of nothing.
func (a Allocation) validate() error {
	var missing []string
	if a.Time.IsZero() {
		missing = append(missing, "time")
	}
	if a.Node == "" {
		missing = append(missing, "node")
	}
	if a.Resource == "" {
		missing = append(missing, "resource")
	}
	if len(a.DeviceIDs) == 0 {
		missing = append(missing, "deviceIDs")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	if a.Call < 1 || a.Container < 0 {
		return fmt.Errorf("call %d and container %d must be at least 1 and 0", a.Call, a.Container)
	}
	return nil
}

// ParseAllocations reads the records in r, the plugin's output (container logs, typically). Lines
// without AllocationPrefix are skipped; a line with it that is not a valid record is an error naming
// its line number, because a record that cannot be read is an allocation that would go unseen.
func ParseAllocations(r io.Reader) ([]Allocation, error) {
	// bufio.Reader rather than Scanner: another program's line may be longer than any fixed limit.
	br := bufio.NewReader(r)
	var out []Allocation
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return out, fmt.Errorf("reading line %d: %w", n, err)
		}
		if rest, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), AllocationPrefix); ok {
			var a Allocation
			perr := json.Unmarshal([]byte(rest), &a)
			if perr == nil {
				perr = a.validate()
			}
			if perr != nil {
				return out, fmt.Errorf("line %d: %srecord: %w", n, AllocationPrefix, perr)
			}
			out = append(out, a)
		}
		if err != nil { // io.EOF, after the last (possibly unterminated) line
			return out, nil
		}
	}
}

// allocations is the bounded in-memory record and the call counter. Its mutex also serializes the
// writes to Options.AllocationLog, so records of concurrent calls never interleave and their Call
// numbers appear in order.
type allocations struct {
	calls   int64
	records []Allocation // the latest maxAllocations
}

// recordAllocation numbers a granted Allocate call and records each of its container requests: one
// write of all its lines to Options.AllocationLog, and the in-memory list. A failing write is logged,
// not returned: the container must still get its devices.
func (p *Plugin) recordAllocation(reqs []*pluginapi.ContainerAllocateRequest) {
	p.allocMu.Lock()
	defer p.allocMu.Unlock()
	p.allocs.calls++
	now := p.now().UTC()
	var buf bytes.Buffer
	for i, cr := range reqs {
		a := Allocation{
			Time:      now,
			Node:      p.opts.NodeName,
			Resource:  p.inv.ResourceName,
			DeviceIDs: append([]string(nil), cr.GetDevicesIds()...),
			Call:      p.allocs.calls,
			Container: i,
		}
		b, err := json.Marshal(a)
		if err != nil { // only a time outside years 0-9999 could do this
			p.log.Error("cannot encode allocation record", "err", err, "call", a.Call, "container", i)
			continue
		}
		buf.WriteString(AllocationPrefix)
		buf.Write(b)
		buf.WriteByte('\n')
		p.allocs.records = append(p.allocs.records, a)
	}
	if over := len(p.allocs.records) - maxAllocations; over > 0 {
		p.allocs.records = append(p.allocs.records[:0], p.allocs.records[over:]...)
	}
	if w := p.opts.AllocationLog; w != nil {
		if _, err := w.Write(buf.Bytes()); err != nil {
			p.log.Warn("cannot write allocation record", "err", err, "call", p.allocs.calls)
		}
	}
}

// Allocations returns the latest granted allocations (at most maxAllocations, 1024), oldest first
// (a new slice). Tests read them; the log is the complete record.
func (p *Plugin) Allocations() []Allocation {
	p.allocMu.Lock()
	defer p.allocMu.Unlock()
	out := make([]Allocation, len(p.allocs.records))
	for i, a := range p.allocs.records {
		a.DeviceIDs = append([]string(nil), a.DeviceIDs...)
		out[i] = a
	}
	return out
}
