package kwok

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/gangbench/gangbench/clusters"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/gangbench/gangbench/fakegpu"
)

// configDocs splits Config into its YAML documents, each parsed into a map.
func configDocs(t *testing.T) []map[string]any {
	t.Helper()
	return docsOf(t, Config())
}

// docsOf splits a rendered configuration into its YAML documents, each parsed into a map.
func docsOf(t *testing.T, cfg []byte) []map[string]any {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(cfg)))
	var docs []map[string]any
	for {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("split config: %v", err)
		}
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal(raw, &m); err != nil {
			t.Fatalf("parse config document: %v\n%s", err, raw)
		}
		if m == nil { // a document of only comments
			continue
		}
		docs = append(docs, m)
	}
	return docs
}

// stages returns the Stage documents by name.
func stages(t *testing.T) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, d := range configDocs(t) {
		if d["kind"] == "Stage" {
			name, _ := d["metadata"].(map[string]any)["name"].(string)
			out[name] = d
		}
	}
	return out
}

func get(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

func TestConfigDocuments(t *testing.T) {
	docs := configDocs(t)
	var kinds, names []string
	for _, d := range docs {
		kind, _ := d["kind"].(string)
		kinds = append(kinds, kind)
		switch kind {
		case "KwokConfiguration":
			if d["apiVersion"] != "config.kwok.x-k8s.io/v1alpha1" {
				t.Errorf("KwokConfiguration apiVersion = %v", d["apiVersion"])
			}
			if got := get(d, "options", "manageNodesWithAnnotationSelector"); got != ManageNodesAnnotationSelector {
				t.Errorf("manageNodesWithAnnotationSelector = %v", got)
			}
			if got := get(d, "options", "nodeLeaseDurationSeconds"); got != float64(40) {
				t.Errorf("nodeLeaseDurationSeconds = %v (%T)", got, got)
			}
		case "Stage":
			if d["apiVersion"] != "kwok.x-k8s.io/v1alpha1" {
				t.Errorf("Stage apiVersion = %v", d["apiVersion"])
			}
			name, _ := get(d, "metadata", "name").(string)
			names = append(names, name)
			if strings.Contains(name, "complete") {
				t.Errorf("stage %q completes pods; gang pods must stay Running", name)
			}
			if get(d, "spec", "resourceRef", "kind") == nil || get(d, "spec", "next") == nil {
				t.Errorf("stage %q lacks spec.resourceRef.kind or spec.next", name)
			}
		default:
			t.Errorf("unexpected kind %q", kind)
		}
	}
	if want := "KwokConfiguration,Stage,Stage,Stage,Stage"; strings.Join(kinds, ",") != want {
		t.Errorf("kinds = %v, want %s", kinds, want)
	}
	if want := "node-initialize,node-heartbeat-with-lease,pod-ready,pod-delete"; strings.Join(names, ",") != want {
		t.Errorf("stages = %v, want %s", names, want)
	}
	// The fakegpu annotation and the selector must agree, or kwok ignores every node.
	if want := fakegpu.AnnotationKwokNode + "=" + fakegpu.AnnotationKwokNodeValue; ManageNodesAnnotationSelector != want {
		t.Errorf("selector %q != fakegpu annotation %q", ManageNodesAnnotationSelector, want)
	}
	del := stages(t)["pod-delete"]
	if get(del, "spec", "next", "delete") != true || get(del, "spec", "next", "finalizers", "empty") != true {
		t.Errorf("pod-delete must empty finalizers and delete: %v", get(del, "spec", "next"))
	}
	// The suites hold a victim Terminating with this label (a preemption still under way).
	if sel := fmt.Sprint(get(del, "spec", "selector")); !strings.Contains(sel, `.metadata.labels["`+SlowTerminationLabel+`"]`) || !strings.Contains(sel, "DoesNotExist") {
		t.Errorf("pod-delete must leave pods labelled %s Terminating: selector %s", SlowTerminationLabel, sel)
	}
	// Config hands out copies: changing one must not change the next.
	c := Config()
	c[0] = 'X'
	if Config()[0] == 'X' {
		t.Error("Config returned shared memory")
	}
}

func TestWriteConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kwok.yaml")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteConfig(path, Options{}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, Config()) {
		t.Error("file content differs from Config()")
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", st.Mode().Perm())
	}
	if err := WriteConfig(filepath.Join(t.TempDir(), "missing", "kwok.yaml"), Options{}); err == nil {
		t.Error("want error for a missing directory")
	}
}

// render executes a stage's statusTemplate the way kwok v0.8.0's gotpl renderer does (trim, object
// through JSON with UseNumber, text/template, result read as YAML), with kwok's template functions
// stubbed. It catches template syntax errors, unknown functions and YAML the apiserver would reject,
// without running kwok.
func render(t *testing.T, stage string, obj any) map[string]any {
	t.Helper()
	text, _ := get(stages(t)[stage], "spec", "next", "statusTemplate").(string)
	if text == "" {
		t.Fatalf("stage %s has no statusTemplate", stage)
	}
	funcs := template.FuncMap{
		// Quote is kwok's: JSON-encode, so any value becomes a valid YAML scalar.
		"Quote": func(s any) string {
			data, err := json.Marshal(s)
			if err != nil {
				return strconv.Quote(fmt.Sprint(s))
			}
			if len(data) == 0 {
				return `""`
			}
			if data[0] == '"' {
				return string(data)
			}
			return strconv.Quote(string(data))
		},
		"Now":     func() string { return "2026-01-02T15:04:05Z" },
		"Version": func() string { return "v0.8.0" },
		"YAML": func(s any, indent ...int) (string, error) {
			d, err := yaml.Marshal(s)
			if err != nil {
				return "", err
			}
			data := string(d)
			if len(indent) == 1 && indent[0] > 0 {
				pad := strings.Repeat(" ", indent[0]*2)
				data = strings.ReplaceAll("\n"+data, "\n", "\n"+pad)
			}
			return data, nil
		},
		"NodeConditions": func() any {
			var out []any
			for _, c := range []struct{ typ, status, reason string }{
				{"Ready", "True", "KubeletReady"},
				{"MemoryPressure", "False", "KubeletHasSufficientMemory"},
				{"DiskPressure", "False", "KubeletHasNoDiskPressure"},
				{"PIDPressure", "False", "KubeletHasSufficientPID"},
				{"NetworkUnavailable", "False", "RouteCreated"},
			} {
				out = append(out, map[string]any{"type": c.typ, "status": c.status, "reason": c.reason, "message": "m"})
			}
			return out
		},
		"NodeIP":      func() string { return "10.9.9.9" },
		"NodeName":    func() string { return "kwok-node" },
		"NodePort":    func() int { return 10247 },
		"NodeIPsWith": func(string) []string { return []string{"127.0.0.1"} },
		"PodIPsWith": func(string, bool, string, string, string) []string {
			return []string{"10.0.0.7"}
		},
	}
	tpl, err := template.New(stage).Funcs(funcs).Parse(strings.TrimSpace(text))
	if err != nil {
		t.Fatalf("stage %s: parse template: %v", stage, err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var data any
	if err := dec.Decode(&data); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := tpl.Execute(&out, data); err != nil {
		t.Fatalf("stage %s: execute: %v", stage, err)
	}
	var status map[string]any
	if err := yaml.Unmarshal(out.Bytes(), &status); err != nil {
		t.Fatalf("stage %s: rendered status is not YAML: %v\n%s", stage, err, out.String())
	}
	return status
}

// asStatus converts a rendered status into the typed one, as the apiserver would decode the patch.
func asStatus[T any](t *testing.T, m map[string]any) T {
	t.Helper()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var s T
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("rendered status does not decode as %T: %v\n%s", s, err, raw)
	}
	return s
}

func TestNodeStagesKeepGPUs(t *testing.T) {
	node := fakegpu.SimulatedNode("gpu-node-000", fakegpu.Default(), fakegpu.NodeOptions{})
	st := asStatus[corev1.NodeStatus](t, render(t, "node-initialize", node))

	gpu := st.Capacity[fakegpu.DefaultResourceName]
	agpu := st.Allocatable[fakegpu.DefaultResourceName]
	if gpu.Value() != 8 || agpu.Value() != 8 {
		t.Errorf("GPU capacity/allocatable = %v/%v, want 8/8", st.Capacity, st.Allocatable)
	}
	if cpu := st.Capacity[corev1.ResourceCPU]; cpu.Value() != 32 {
		t.Errorf("cpu capacity = %v, want 32 (kwok's 1k default must not apply)", st.Capacity)
	}
	conds := map[corev1.NodeConditionType]corev1.ConditionStatus{}
	for _, c := range st.Conditions {
		conds[c.Type] = c.Status
	}
	for typ, want := range map[corev1.NodeConditionType]corev1.ConditionStatus{
		corev1.NodeReady: corev1.ConditionTrue, corev1.NodeMemoryPressure: corev1.ConditionFalse,
		corev1.NodeDiskPressure: corev1.ConditionFalse, corev1.NodePIDPressure: corev1.ConditionFalse,
		corev1.NodeNetworkUnavailable: corev1.ConditionFalse,
	} {
		if conds[typ] != want {
			t.Errorf("condition %s = %q, want %q", typ, conds[typ], want)
		}
	}
	if st.NodeInfo.KubeletVersion != "fake" || st.NodeInfo.ContainerRuntimeVersion != "fake" {
		t.Errorf("nodeInfo not kept: %+v", st.NodeInfo)
	}
	if st.Phase != corev1.NodeRunning || st.DaemonEndpoints.KubeletEndpoint.Port != 10247 {
		t.Errorf("phase %q / port %d", st.Phase, st.DaemonEndpoints.KubeletEndpoint.Port)
	}
	// Both addresses present: the status must not touch them (a merge patch would replace the list).
	if st.Addresses != nil {
		t.Errorf("addresses rewritten although complete: %v", st.Addresses)
	}

	// A node with only an InternalIP keeps it and gains a Hostname.
	node.Status.Addresses = node.Status.Addresses[:1]
	st = asStatus[corev1.NodeStatus](t, render(t, "node-initialize", node))
	if len(st.Addresses) != 2 || st.Addresses[0].Address != "127.0.0.1" || st.Addresses[1].Type != corev1.NodeHostName {
		t.Errorf("addresses = %v, want the InternalIP kept and a Hostname added", st.Addresses)
	}

	// The heartbeat refreshes conditions and keeps addresses.
	hb := asStatus[corev1.NodeStatus](t, render(t, "node-heartbeat-with-lease", node))
	if len(hb.Conditions) != 5 || len(hb.Addresses) != 1 || hb.Addresses[0].Address != "127.0.0.1" {
		t.Errorf("heartbeat status = %+v", hb)
	}
}

func TestPodReadyStage(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Namespace: "gang", UID: "u1"},
		Spec: corev1.PodSpec{
			NodeName:       "gpu-node-000",
			Containers:     []corev1.Container{{Name: "main", Image: "img:1"}, {Name: "side", Image: "img:2"}},
			InitContainers: []corev1.Container{{Name: "init", Image: "init:1"}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	st := asStatus[corev1.PodStatus](t, render(t, "pod-ready", pod))
	if st.Phase != corev1.PodRunning {
		t.Errorf("phase = %q", st.Phase)
	}
	conds := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range st.Conditions {
		conds[c.Type] = c.Status
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady} {
		if conds[typ] != corev1.ConditionTrue {
			t.Errorf("condition %s = %q, want True", typ, conds[typ])
		}
	}
	if len(st.ContainerStatuses) != 2 || st.ContainerStatuses[1].State.Running == nil || !st.ContainerStatuses[1].Ready {
		t.Errorf("containerStatuses = %+v", st.ContainerStatuses)
	}
	if len(st.InitContainerStatuses) != 1 || st.InitContainerStatuses[0].State.Terminated == nil {
		t.Errorf("initContainerStatuses = %+v", st.InitContainerStatuses)
	}
	if st.PodIP != "10.0.0.7" || st.HostIP != "127.0.0.1" || st.StartTime == nil {
		t.Errorf("podIP %q hostIP %q startTime %v", st.PodIP, st.HostIP, st.StartTime)
	}
	sel := get(stages(t)["pod-ready"], "spec", "selector")
	if !strings.Contains(fmt.Sprint(sel), ".spec.nodeName") || !strings.Contains(fmt.Sprint(sel), ".metadata.deletionTimestamp") {
		t.Errorf("pod-ready must select bound, not terminating pods: %v", sel)
	}
}

// TestConfigWithLease: a longer lease reaches kwok's options, and the controller-manager's grace
// period the providers derive from it outlasts the renewal interval (a quarter of the lease).
func TestConfigWithLease(t *testing.T) {
	if !bytes.Contains(ConfigWithLease(3600), []byte("nodeLeaseDurationSeconds: 3600\n")) || bytes.Contains(ConfigWithLease(3600), []byte("nodeLeaseDurationSeconds: 40\n")) {
		t.Error("ConfigWithLease(3600) does not set the lease")
	}
	if !bytes.Equal(ConfigWithLease(0), Config()) {
		t.Error("ConfigWithLease(0) must be the default config")
	}
	if g := clusters.NodeMonitorGracePeriod(3600); g != "3610s" {
		t.Errorf("grace period for a 3600 s lease: %q", g)
	}
	if g := clusters.NodeMonitorGracePeriod(0); g != "" {
		t.Errorf("the default lease keeps the controller-manager's default grace period, got %q", g)
	}
}

// TestRenderPodsStayPending: the quiet profile's configuration drops only the pod-ready stage, keeps
// deleting pods and the lease, and parses as kwok's documents.
func TestRenderPodsStayPending(t *testing.T) {
	docs := docsOf(t, Render(Options{LeaseSeconds: 3600, PodsStayPending: true}))
	var names []string
	for _, d := range docs {
		switch d["kind"] {
		case "Stage":
			name, _ := get(d, "metadata", "name").(string)
			names = append(names, name)
		case "KwokConfiguration":
			if got := get(d, "options", "nodeLeaseDurationSeconds"); got != float64(3600) {
				t.Errorf("nodeLeaseDurationSeconds = %v", got)
			}
		default:
			t.Errorf("unexpected document %v", d)
		}
	}
	if want := "node-initialize,node-heartbeat-with-lease,pod-delete"; strings.Join(names, ",") != want {
		t.Errorf("stages = %v, want %s", names, want)
	}
	if !bytes.Equal(Render(Options{}), Config()) {
		t.Error("Render of no options must be the default config")
	}
}
