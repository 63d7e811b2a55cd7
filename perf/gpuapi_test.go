package perf

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/results"
)

// TestDRAScenariosLoad: gpu-dra-gangs is in the default set and is gpu-gang-8x8's twin; --gpu-api
// dra turns every scenario that names no API into a DRA one, and --gpu-api device-plugin skips the
// DRA-only scenario of a label-selected set with the decoder's reason, but refuses it when named.
func TestDRAScenariosLoad(t *testing.T) {
	scs, skipped, err := LoadScenarios(Selection{}, scenario.Options{Nodes: 500})
	if err != nil || len(skipped) > 0 {
		t.Fatalf("default set: %v, skipped %+v", err, skipped)
	}
	byName := map[string]*scenario.Scenario{}
	for _, s := range scs {
		byName[s.Name] = s
	}
	dra, dp := byName["gpu-dra-gangs"], byName["gpu-gang-8x8"]
	if dra == nil || dp == nil {
		t.Fatalf("default set lacks gpu-dra-gangs or gpu-gang-8x8: %v", slices.Collect(func(yield func(string) bool) {
			for n := range byName {
				if !yield(n) {
					return
				}
			}
		}))
	}
	if !Twins(dp, dra) || !Twins(dra, dp) || Twins(dp, byName["gpu-gang-16x8"]) {
		t.Error("gpu-dra-gangs must be gpu-gang-8x8's twin, and only a scenario of the same workload is one")
	}
	if ShapeOf(dra) == ShapeOf(dp) || ShapeOf(dra).GPUAPI != clusters.GPUAPIDRA {
		t.Errorf("shapes %+v %+v: the DRA scenario needs a cluster of its own", ShapeOf(dra), ShapeOf(dp))
	}
	// The preemption wave is written for the device plugin: v1.37.2 does not preempt for devices.
	scs, skipped, err = LoadScenarios(Selection{}, scenario.Options{Nodes: 500, GPUAPI: clusters.GPUAPIDRA})
	if err != nil || len(skipped) != 1 || skipped[0].Name != "gpu-preemption-wave" ||
		!strings.Contains(skipped[0].Reason, "cluster.gpuAPI: device-plugin, but --gpu-api dra was given") {
		t.Fatalf("default set with --gpu-api dra: %v, skipped %+v", err, skipped)
	}
	for _, s := range scs {
		if s.Cluster.GPUAPI != clusters.GPUAPIDRA {
			t.Errorf("%s: GPU API %q with --gpu-api dra", s.Name, s.Cluster.GPUAPI)
		}
	}
	scs, skipped, err = LoadScenarios(Selection{Labels: []string{"gpu"}}, scenario.Options{GPUAPI: clusters.GPUAPIDevicePlugin})
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 1 || skipped[0].Name != "gpu-dra-gangs" || !strings.Contains(skipped[0].Reason, "perf/scenarios/gpu-dra-gangs.yaml:19: cluster.gpuAPI: dra, but --gpu-api device-plugin was given") {
		t.Errorf("skipped %+v", skipped)
	}
	if slices.ContainsFunc(scs, func(s *scenario.Scenario) bool { return s.Name == "gpu-dra-gangs" }) {
		t.Error("the DRA-only scenario ran with --gpu-api device-plugin")
	}
	if _, _, err := LoadScenarios(Selection{Refs: []string{"gpu-dra-gangs"}}, scenario.Options{GPUAPI: clusters.GPUAPIDevicePlugin}); err == nil {
		t.Error("a DRA-only scenario named with --gpu-api device-plugin must be refused")
	}
}

// TestProviderSourceDRA: a DRA shape gets DRA node groups (racked ones too), the
// resourceclaim-controller beside the quiet profile's controllers, and says so; a shape that names
// no API takes the base spec's (compare's --gpu-api).
func TestProviderSourceDRA(t *testing.T) {
	var got clusters.Spec
	s := &ProviderSource{Provider: fakeProvider{spec: &got, caps: capsOf("local")},
		Base: clusters.Spec{Name: "perf-1", ExtraArgs: map[clusters.Component]map[string]string{clusters.ControllerManager: {"controllers": "namespace-controller"}}}}
	_, info, err := s.Create(context.Background(), Shape{Nodes: 4, GPUsPerNode: 8, GPUAPI: clusters.GPUAPIDRA}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gs := got.Groups()
	if len(gs) != 1 || gs[0].GPUs.API != clusters.GPUAPIDRA || !got.PublishesDRA() || info.GPUAPI != clusters.GPUAPIDRA {
		t.Errorf("groups %+v, info %+v", gs, info)
	}
	if c := got.ExtraArgs[clusters.ControllerManager]["controllers"]; c != "namespace-controller,resourceclaim-controller" {
		t.Errorf("controllers %q", c)
	}
	if s.Base.ExtraArgs[clusters.ControllerManager]["controllers"] != "namespace-controller" {
		t.Error("the base spec's controllers were changed")
	}
	if !slices.ContainsFunc(info.Notes, func(n string) bool { return strings.Contains(n, "GPUs published through DRA") }) {
		t.Errorf("notes %q", info.Notes)
	}
	if _, _, err := s.Create(context.Background(), Shape{Nodes: 5, GPUsPerNode: 8, NodesPerRack: 2, GPUAPI: clusters.GPUAPIDRA}, nil); err != nil {
		t.Fatal(err)
	}
	for _, g := range got.NodeGroups {
		if g.GPUs == nil || g.GPUs.API != clusters.GPUAPIDRA || got.SimulatedNodeOptions(g).Clique != g.Labels[clusters.DefaultRackKey] {
			t.Errorf("racked group %+v: want DRA GPUs whose clique is the rack", g)
		}
	}
	// No API in the shape: the base spec's, else the device plugin's.
	s.Base.GPUAPI = clusters.GPUAPIDRA
	if _, info, _ = s.Create(context.Background(), Shape{Nodes: 4, GPUsPerNode: 8}, nil); info.GPUAPI != clusters.GPUAPIDRA || got.Groups()[0].GPUs.API != clusters.GPUAPIDRA {
		t.Errorf("base dra: info %+v, groups %+v", info, got.Groups())
	}
	s.Base.GPUAPI = ""
	if _, info, _ = s.Create(context.Background(), Shape{Nodes: 4, GPUsPerNode: 8}, nil); info.GPUAPI != clusters.GPUAPIDevicePlugin || got.PublishesDRA() ||
		strings.Contains(got.ExtraArgs[clusters.ControllerManager]["controllers"], "resourceclaim") {
		t.Errorf("device plugin: info %+v, controllers %q", info, got.ExtraArgs[clusters.ControllerManager]["controllers"])
	}
	// On kind (real kubelets) both node groups, the real workers' and the simulated ones, carry it.
	s.Provider = fakeProvider{spec: &got, caps: capsOf("kind")}
	if _, _, err := s.Create(context.Background(), Shape{Nodes: 4, GPUsPerNode: 8, GPUAPI: clusters.GPUAPIDRA}, nil); err != nil {
		t.Fatal(err)
	}
	for _, g := range got.NodeGroups {
		if g.GPUs.API != clusters.GPUAPIDRA {
			t.Errorf("kind group %+v", g)
		}
	}
}

// TestCheckGPUAPIs: a scenario asking for an API the provider cannot publish, or a GPU fault on a
// DRA scenario, is refused before any cluster starts.
func TestCheckGPUAPIs(t *testing.T) {
	dra := &scenario.Scenario{Name: "d", File: "d.yaml", Cluster: scenario.Cluster{Nodes: 4, GPUsPerNode: 8, GPUAPI: clusters.GPUAPIDRA}}
	plain := &scenario.Scenario{Name: "p", File: "p.yaml", Cluster: scenario.Cluster{Nodes: 4, GPUsPerNode: 8}}
	if err := CheckGPUAPIs([]*scenario.Scenario{dra, plain}, capsOf("local"), nil); err != nil {
		t.Errorf("local publishes DRA: %v", err)
	}
	// A provider that has the device plugin only (as kind had before its DRA plugin).
	dpOnly := clusters.Capabilities{Provider: "old", GPUAPIs: []clusters.GPUAPI{clusters.GPUAPIDevicePlugin}}
	err := CheckGPUAPIs([]*scenario.Scenario{dra, plain}, dpOnly, nil)
	if err == nil || err.Error() != "scenario d (d.yaml): cluster.gpuAPI dra: the old provider publishes GPUs as device-plugin" {
		t.Errorf("device plugin only: %v", err)
	}
	err = CheckGPUAPIs([]*scenario.Scenario{dra, plain}, capsOf("local"), []Fault{mustFault(t, "gpu-unhealthy:8x1:5s@50%"), mustFault(t, "scheduler-kill@50%")})
	if err == nil || !strings.Contains(err.Error(), "scenario d claims its GPUs through DRA") || strings.Contains(err.Error(), "scheduler-kill") {
		t.Errorf("gpu fault on DRA: %v", err)
	}
}

// TestGPUAPIRatios: a DRA scenario and its device-plugin twin in one run give one ratio item,
// device plugin over DRA, averaged over repetitions; the report prints it and the DRA windows.
func TestGPUAPIRatios(t *testing.T) {
	dp := &scenario.Scenario{Name: "dp", Cluster: scenario.Cluster{Nodes: 4, GPUsPerNode: 8}, Phases: []scenario.Phase{{Name: "gangs", Groups: 3, PodsPerGroup: 8, GPUsPerPod: 8}}}
	dra := *dp
	dra.Name, dra.Cluster.GPUAPI = "dra", clusters.GPUAPIDRA
	other := dra
	other.Name, other.Phases = "other", []scenario.Phase{{Name: "gangs", Groups: 2, PodsPerGroup: 8, GPUsPerPod: 8}}
	l := func(sc, rep string, extra ...string) map[string]string {
		m := map[string]string{"scenario": sc, "repetition": rep}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	items := []results.DataItem{
		{Name: measure.ItemBindingRate, Labels: l("dp", "1"), Data: map[string]float64{"Average": 100}},
		{Name: measure.ItemBindingRate, Labels: l("dp", "2"), Data: map[string]float64{"Average": 80}},
		{Name: measure.ItemGangLatency, Labels: l("dp", "1"), Data: map[string]float64{"Perc99": 2}},
		{Name: measure.ItemPhaseGangLatency, Labels: l("dp", "1", "phase", "gangs"), Data: map[string]float64{"Perc99": 50}},
		{Name: measure.ItemSchedulerCPUPerPod, Labels: l("dp", "1", "phase", "gangs"), Data: map[string]float64{"CPUSeconds": 0.2, "Pods": 100}},
		{Name: measure.ItemBindingRate, Labels: l("dra", "1", LabelGPUAPI, "dra"), Data: map[string]float64{"Average": 45}},
		{Name: measure.ItemGangLatency, Labels: l("dra", "1", LabelGPUAPI, "dra"), Data: map[string]float64{"Perc99": 4}},
		{Name: measure.ItemSchedulerCPUPerPod, Labels: l("dra", "1", "phase", "gangs", LabelGPUAPI, "dra"), Data: map[string]float64{measure.Value: 8, "CPUSeconds": 0.8, "Pods": 100}},
		{Name: measure.ItemClaimAllocationRate, Labels: l("dra", "1", LabelGPUAPI, "dra"), Data: map[string]float64{"Average": 45.5, "Count": 24, "Claims": 24, "DurationSeconds": 0.5, "Max": 60}},
	}
	apis := map[string]clusters.GPUAPI{"dp": clusters.GPUAPIDevicePlugin, "dra": clusters.GPUAPIDRA, "other": clusters.GPUAPIDRA}
	got := GPUAPIRatios([]*scenario.Scenario{dp, &dra, &other}, apis, items)
	if len(got) != 1 {
		t.Fatalf("ratios %+v: want one, for dra against dp (other has no twin)", got)
	}
	r := got[0]
	if r.Name != ItemGPUAPIRatio || r.Labels["scenario"] != "dra" || r.Labels[LabelAgainst] != "dp" ||
		r.Data["BindingRate"] != 2 || r.Data["GangLatencyP99"] != 0.5 || r.Data["SchedulerCPUPerPod"] != 0.25 || r.Data["DRASchedulerCPUPerPod"] != 8 {
		t.Errorf("ratio %+v", r)
	}
	if len(GPUAPIRatios([]*scenario.Scenario{dp, &dra}, map[string]clusters.GPUAPI{"dra": clusters.GPUAPIDRA}, items)) != 0 {
		t.Error("a twin that did not run gives no ratio")
	}
	run := &results.Run{DataItems: append(items, r)}
	lines := DRALines(run)
	want := []string{
		"dra rep 1: claims allocated 45.5/s (24 of 24 claims over 0.5 s, max 60/s); scheduler CPU per pod gangs 8.00 ms",
		"dra against dp, device plugin/DRA: binding rate 2.00× (90.0 vs 45.0 pods/s); gang latency p99 0.50× (2.00 vs 4.00 s); scheduler CPU per pod 0.25× (2.00 vs 8.00 ms)",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// The ratio is not a row of the figures table; the claims rate is in the benchmark line.
	for _, rw := range rows(run) {
		if rw.rep == "" {
			t.Errorf("a row without a repetition: %+v", rw)
		}
	}
	if bl := BenchLines(run); !slices.ContainsFunc(bl, func(l string) bool { return strings.Contains(l, "45.5 claims/s") }) {
		t.Errorf("bench lines %q", bl)
	}
}
