package plugin

import (
	"bytes"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// lockedBuffer is a bytes.Buffer written by the plugin's gRPC goroutines and read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var testTime = time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)

func TestParseAllocations(t *testing.T) {
	const good = `fakegpu-allocation {"time":"2025-01-02T03:04:05.123456789Z","node":"kind-worker","resource":"nvidia.com/gpu","deviceIDs":["GPU-a-0","GPU-a-1"],"call":1,"container":0}`
	want := Allocation{Time: testTime, Node: "kind-worker", Resource: "nvidia.com/gpu", DeviceIDs: []string{"GPU-a-0", "GPU-a-1"}, Call: 1}
	second := want
	second.Call, second.Container, second.DeviceIDs = 2, 1, []string{"GPU-a-7"}
	for _, tc := range []struct {
		name    string
		in      string
		want    []Allocation
		wantErr []string // substrings; nil means no error
	}{
		{name: "empty", in: ""},
		{name: "one record", in: good + "\n", want: []Allocation{want}},
		{name: "no final newline", in: good, want: []Allocation{want}},
		{name: "CRLF", in: good + "\r\n", want: []Allocation{want}},
		{
			name: "garbage lines ignored",
			in: "time=... level=INFO msg=\"serving device plugin\"\n" +
				good + "\n" +
				"fake logs\n\n" +
				" fakegpu-allocation {not at the start of the line}\n" +
				"fakegpu-allocation{no space}\n" +
				`fakegpu-allocation {"time":"2025-01-02T03:04:05.123456789Z","node":"kind-worker","resource":"nvidia.com/gpu","deviceIDs":["GPU-a-7"],"call":2,"container":1,"future":true}` + "\n",
			want: []Allocation{want, second},
		},
		{name: "truncated record", in: "hello\n" + good[:60] + "\n", wantErr: []string{"line 2", "fakegpu-allocation record"}},
		{name: "not JSON", in: "fakegpu-allocation hello\n", wantErr: []string{"line 1", "invalid character"}},
		{name: "trailing data", in: good + " extra\n", wantErr: []string{"line 1"}},
		{name: "missing fields", in: "a\nb\nc\nfakegpu-allocation {\"call\":1}\n", wantErr: []string{"line 4", "missing time, node, resource, deviceIDs"}},
		{name: "bad call", in: strings.Replace(good, `"call":1`, `"call":0`, 1), wantErr: []string{"line 1", "call 0"}},
		{name: "bad time", in: strings.Replace(good, "2025-01-02T03:04:05.123456789Z", "yesterday", 1), wantErr: []string{"line 1", "yesterday"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAllocations(strings.NewReader(tc.in))
			if tc.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("got %+v, want %+v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("got %+v and no error, want error %q", got, tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestRecordAllocation checks the written lines read back as the in-memory records (the writer and
// the parser agree on the format), and that memory stays bounded.
func TestRecordAllocation(t *testing.T) {
	var log lockedBuffer
	p, err := New(Options{Inventory: twoDomains, NodeName: testNode, AllocationLog: &log})
	if err != nil {
		t.Fatal(err)
	}
	p.now = func() time.Time { return testTime.In(time.FixedZone("CET", 3600)) }
	ids := p.DeviceIDs()
	p.recordAllocation([]*pluginapi.ContainerAllocateRequest{{DevicesIds: ids[:2]}, {DevicesIds: ids[7:]}})
	p.recordAllocation([]*pluginapi.ContainerAllocateRequest{{DevicesIds: ids[3:4]}})

	want := []Allocation{
		{Time: testTime, Node: testNode, Resource: "nvidia.com/gpu", DeviceIDs: ids[:2], Call: 1, Container: 0},
		{Time: testTime, Node: testNode, Resource: "nvidia.com/gpu", DeviceIDs: ids[7:], Call: 1, Container: 1},
		{Time: testTime, Node: testNode, Resource: "nvidia.com/gpu", DeviceIDs: ids[3:4], Call: 2, Container: 0},
	}
	if got := p.Allocations(); !reflect.DeepEqual(got, want) {
		t.Errorf("Allocations() = %+v, want %+v", got, want)
	}
	parsed, err := ParseAllocations(strings.NewReader(log.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(parsed, want) {
		t.Errorf("parsed log = %+v, want %+v; log:\n%s", parsed, want, log.String())
	}
	if !strings.HasPrefix(log.String(), AllocationPrefix+`{"time":"2025-01-02T03:04:05.123456789Z","node":"kind-worker",`) {
		t.Errorf("record not in the documented form (UTC, RFC 3339 nanoseconds):\n%s", log.String())
	}

	for range maxAllocations {
		p.recordAllocation([]*pluginapi.ContainerAllocateRequest{{DevicesIds: ids[:1]}})
	}
	got := p.Allocations()
	if len(got) != maxAllocations || got[0].Call != 3 || got[len(got)-1].Call != maxAllocations+2 {
		t.Errorf("after %d more calls: %d records, calls %d..%d; want %d, 3..%d",
			maxAllocations, len(got), got[0].Call, got[len(got)-1].Call, maxAllocations, maxAllocations+2)
	}
	if n := strings.Count(log.String(), "\n"); n != maxAllocations+3 {
		t.Errorf("log has %d lines, want every record (%d)", n, maxAllocations+3)
	}
}
