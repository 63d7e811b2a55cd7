package perf

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/perf/measure"
	"github.com/gangbench/gangbench/perf/scenario"
	"github.com/gangbench/gangbench/results"
)

// GPUs claimed through DRA (scenario.Cluster.GPUAPI, --gpu-api dra): the clusters publish them in
// ResourceSlices, the load generator's pods claim them, claimAllocation measures the claims, and a
// run that holds a scenario and its twin on the device plugin (the same workload on the same
// cluster shape but for the GPU API, e.g. gpu-gang-8x8 and gpu-dra-gangs) sets the two side by
// side in ItemGPUAPIRatio.

// LabelGPUAPI is the label every item of a repetition carries: the GPU API of its cluster
// (device-plugin or dra), so an SLO can hold each API's figures to thresholds of their own:
// bindingRate{gpuAPI=dra}.avg >= …
const LabelGPUAPI = "gpuAPI"

// ItemGPUAPIRatio is a DRA scenario's figures against its device-plugin twin's in the same run,
// device plugin over DRA (labels scenario: the DRA scenario, against: the twin): BindingRate
// (above 1: DRA binds slower), GangLatencyP99 and SchedulerCPUPerPod (below 1: DRA takes longer,
// or costs the scheduler more CPU per pod), each beside the two figures it divides, averaged over
// repetitions.
const ItemGPUAPIRatio = "gpuAPIRatio"

// LabelAgainst names the twin a ratio item divides by.
const LabelAgainst = "against"

// CheckGPUAPIs refuses, before any cluster starts, scenarios asking for a GPU API the provider
// cannot publish (kind's nodes have the device plugin only), and GPU faults on DRA scenarios: the
// fault waits for nvidia.com/gpu allocatable to drop and come back, which a DRA node does not have.
func CheckGPUAPIs(scs []*scenario.Scenario, caps clusters.Capabilities, faults []Fault) error {
	var errs []error
	for _, sc := range scs {
		api := sc.Cluster.GPUAPI
		if api == "" {
			continue // the source's base spec decides; the provider validated it
		}
		if !slices.Contains(caps.GPUAPIs, api) {
			var names []string
			for _, a := range caps.GPUAPIs {
				names = append(names, string(a))
			}
			errs = append(errs, fmt.Errorf("scenario %s (%s): cluster.gpuAPI %s: the %s provider publishes GPUs as %s", sc.Name, sc.File, api, caps.Provider, strings.Join(names, ", ")))
			continue
		}
		for _, f := range faults {
			if f.Action == FaultUnhealthy && api.DRA() {
				errs = append(errs, fmt.Errorf("fault %s: scenario %s claims its GPUs through DRA; the GPU fault follows nvidia.com/gpu allocatable, which its nodes do not publish", f.Spec, sc.Name))
			}
		}
	}
	return errors.Join(errs...)
}

// Twins reports whether two scenarios run the same workload on the same cluster shape and differ
// only in the GPU API: their figures then differ by what the API costs.
func Twins(a, b *scenario.Scenario) bool {
	ca, cb := a.Cluster, b.Cluster
	ca.GPUAPI, cb.GPUAPI = "", ""
	if ca != cb || a.Scheduler != b.Scheduler || len(a.Phases) != len(b.Phases) {
		return false
	}
	for i := range a.Phases {
		pa, pb := a.Phases[i], b.Phases[i]
		// Quantities compare by value: one parsed from "100m" and one already printed are equal.
		if pa.CPU.Cmp(pb.CPU) != 0 || pa.Memory.Cmp(pb.Memory) != 0 {
			return false
		}
		pa.CPU, pb.CPU, pa.Memory, pb.Memory = resource.Quantity{}, resource.Quantity{}, resource.Quantity{}, resource.Quantity{}
		if !reflect.DeepEqual(pa, pb) {
			return false
		}
	}
	return true
}

// GPUAPIRatios pairs each DRA scenario that ran with a device-plugin twin that ran (apis: the GPU
// API each scenario's cluster had) and returns one ItemGPUAPIRatio per pair, from the items of the
// run. A pair without both binding rates has no item.
func GPUAPIRatios(scs []*scenario.Scenario, apis map[string]clusters.GPUAPI, items []results.DataItem) []results.DataItem {
	var out []results.DataItem
	for _, dra := range scs {
		if !apis[dra.Name].DRA() {
			continue
		}
		for _, dp := range scs {
			api, ran := apis[dp.Name]
			if !ran || api.DRA() || !Twins(dp, dra) {
				continue
			}
			if it, ok := gpuAPIRatio(dra.Name, dp.Name, items); ok {
				out = append(out, it)
			}
			break // one twin is enough; a second would repeat the comparison
		}
	}
	return out
}

// windowFigures are a scenario's figures averaged over its repetitions.
type windowFigures struct {
	bindingRate, gangP99, cpuPerPod float64
	hasRate, hasP99, hasCPU         bool
}

func figuresOf(scenarioName string, items []results.DataItem) windowFigures {
	var f windowFigures
	var rates, p99s []float64
	var cpu float64
	var pods float64
	for _, it := range items {
		if it.Labels["scenario"] != scenarioName {
			continue
		}
		switch {
		case it.Name == measure.ItemBindingRate:
			if v, ok := it.Data["Average"]; ok {
				rates = append(rates, v)
			}
		case it.Name == measure.ItemGangLatency && it.Labels["phase"] == "":
			if v, ok := it.Data["Perc99"]; ok {
				p99s = append(p99s, v)
			}
		case it.Name == measure.ItemSchedulerCPUPerPod:
			cpu += it.Data["CPUSeconds"]
			pods += it.Data["Pods"]
		}
	}
	f.bindingRate, f.hasRate = mean(rates)
	f.gangP99, f.hasP99 = mean(p99s)
	if pods > 0 {
		f.cpuPerPod, f.hasCPU = 1000*cpu/pods, true
	}
	return f
}

func mean(vs []float64) (float64, bool) {
	if len(vs) == 0 {
		return 0, false
	}
	s := 0.0
	for _, v := range vs {
		s += v
	}
	return s / float64(len(vs)), true
}

func gpuAPIRatio(dra, dp string, items []results.DataItem) (results.DataItem, bool) {
	d, p := figuresOf(dra, items), figuresOf(dp, items)
	if !d.hasRate || !p.hasRate || d.bindingRate <= 0 {
		return results.DataItem{}, false
	}
	data := map[string]float64{
		"BindingRate": p.bindingRate / d.bindingRate, "DevicePluginBindingRate": p.bindingRate, "DRABindingRate": d.bindingRate,
	}
	if d.hasP99 && p.hasP99 && d.gangP99 > 0 {
		data["GangLatencyP99"] = p.gangP99 / d.gangP99
		data["DevicePluginGangLatencyP99"], data["DRAGangLatencyP99"] = p.gangP99, d.gangP99
	}
	if d.hasCPU && p.hasCPU && d.cpuPerPod > 0 {
		data["SchedulerCPUPerPod"] = p.cpuPerPod / d.cpuPerPod
		data["DevicePluginSchedulerCPUPerPod"], data["DRASchedulerCPUPerPod"] = p.cpuPerPod, d.cpuPerPod
	}
	return results.DataItem{Name: ItemGPUAPIRatio, Unit: "ratio", Labels: map[string]string{"scenario": dra, LabelAgainst: dp, LabelGPUAPI: string(clusters.GPUAPIDRA)}, Data: data}, true
}

// draCaption heads the DRA lines of the reports.
const draCaption = "GPUs claimed through DRA: claims allocated per second in each window (from a ResourceClaim watch, over the binding rate's window) and the scheduler's CPU per pod; then each DRA scenario against its device-plugin twin in this run, device plugin over DRA (binding rate above 1, gang latency and CPU below 1: DRA is slower or costlier)"

// DRALines are one line per DRA window and one per twin ratio.
func DRALines(r *results.Run) []string {
	var out []string
	for _, win := range itemsByWindow(r, measure.ItemClaimAllocationRate, measure.ItemSchedulerCPUPerPod) {
		var claims string
		var cpu []string
		for _, it := range win.items {
			d := it.Data
			switch it.Name {
			case measure.ItemClaimAllocationRate:
				claims = fmt.Sprintf("claims allocated %.1f/s (%.0f of %.0f claims over %.1f s", d["Average"], d["Count"], d["Claims"], d["DurationSeconds"])
				for _, k := range []struct{ key, name string }{{"Perc50", "p50"}, {"Perc99", "p99"}, {"Max", "max"}} {
					if v, ok := d[k.key]; ok {
						claims += fmt.Sprintf(", %s %.0f/s", k.name, v)
					}
				}
				claims += ")"
			case measure.ItemSchedulerCPUPerPod:
				cpu = append(cpu, fmt.Sprintf("%s %.2f ms", it.Labels["phase"], d[measure.Value]))
			}
		}
		if claims == "" {
			continue // a device-plugin window: its CPU per pod is in the twin line
		}
		if len(cpu) > 0 {
			claims += "; scheduler CPU per pod " + strings.Join(cpu, ", ")
		}
		out = append(out, fmt.Sprintf("%s rep %s: %s", win.scenario, win.rep, claims))
	}
	for _, it := range r.DataItems {
		if it.Name != ItemGPUAPIRatio {
			continue
		}
		d := it.Data
		parts := []string{fmt.Sprintf("binding rate %.2f× (%.1f vs %.1f pods/s)", d["BindingRate"], d["DevicePluginBindingRate"], d["DRABindingRate"])}
		if v, ok := d["GangLatencyP99"]; ok {
			parts = append(parts, fmt.Sprintf("gang latency p99 %.2f× (%.2f vs %.2f s)", v, d["DevicePluginGangLatencyP99"], d["DRAGangLatencyP99"]))
		}
		if v, ok := d["SchedulerCPUPerPod"]; ok {
			parts = append(parts, fmt.Sprintf("scheduler CPU per pod %.2f× (%.2f vs %.2f ms)", v, d["DevicePluginSchedulerCPUPerPod"], d["DRASchedulerCPUPerPod"]))
		}
		out = append(out, fmt.Sprintf("%s against %s, device plugin/DRA: %s", it.Labels["scenario"], it.Labels[LabelAgainst], strings.Join(parts, "; ")))
	}
	return out
}
