package scenario

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/perf/internal/strictyaml"
)

// Options are what the command line adds to a file.
type Options struct {
	// Params override $param defaults (--param name=value). Names the file does not declare are
	// ignored here; the caller checks that every override was declared by some file it loaded.
	Params map[string]string
	// Nodes overrides cluster.nodes when > 0 (--nodes).
	Nodes int
	// GPUsPerNode and Product override cluster.gpusPerNode and cluster.product when set.
	GPUsPerNode int
	Product     string
	// GPUAPI is --gpu-api when given: the GPU API of every scenario whose file names none. A file
	// that names one is written for that API only, and a different GPUAPI is an error there.
	GPUAPI clusters.GPUAPI
	// Measurements are the measurement names a file may list; a file that lists none takes them all.
	Measurements []string
}

// LoadFile reads and decodes a scenario file.
func LoadFile(path string, opts Options) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Load(path, data, opts)
}

// Load decodes, validates and resolves a scenario. Every problem is reported in one error, one
// "FILE:LINE: FIELD: message" per line, in line order.
func Load(file string, data []byte, opts Options) (*Scenario, error) {
	root, err := strictyaml.Parse(file, data)
	if err != nil {
		return nil, err
	}
	if err := strictyaml.Header(file, root, APIVersion, Kind); err != nil {
		return nil, err
	}
	d := strictyaml.NewDecoder(file)
	s := &Scenario{
		File:        file,
		Repetitions: 1,
		Timeout:     DefaultTimeout,
		Settle:      DefaultSettle,
		Cluster:     Cluster{GPUsPerNode: DefaultGPUsPerNode},
		Scheduler:   Scheduler{KubeAPIQPS: DefaultKubeAPIQPS, KubeAPIBurst: DefaultKubeAPIBurst},
	}
	// Params first, wherever they are in the file: every other field may refer to them.
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "params" {
			d.DeclareParams(root.Content[i+1], "params", opts.Params)
		}
	}
	pos := positions{}
	var phaseNodes []*yaml.Node
	var measurementsNode *yaml.Node
	// measurementFields is the field ("measurements[i]") of each s.Measurements entry: items that fail
	// to decode are skipped, so an entry's index in s.Measurements is not its index in the file.
	var measurementFields []string
	d.Map(root, "", []string{"apiVersion", "kind", "metadata", "description", "source", "reference", "params", "cluster", "scheduler", "repetitions", "timeout", "settle", "measurements", "phases"},
		func(key string, k, v *yaml.Node) {
			switch key {
			case "apiVersion", "kind", "params":
				// Header and DeclareParams read them.
			case "metadata":
				pos["metadata"] = v
				d.Map(v, "metadata", []string{"name", "labels"}, func(key string, _, v *yaml.Node) {
					pos["metadata."+key] = v
					switch key {
					case "name":
						s.Name, _ = d.String(v, "metadata.name")
					case "labels":
						s.Labels = d.Strings(v, "metadata.labels")
					}
				})
			case "description":
				s.Description, _ = d.String(v, key)
			case "source":
				s.Source, _ = d.String(v, key)
			case "reference":
				s.Reference = decodeReference(d, v)
			case "cluster":
				d.Map(v, "cluster", []string{"nodes", "gpusPerNode", "product", "nodesPerRack", "racksPerBlock", "gpuAPI"}, func(key string, _, v *yaml.Node) {
					pos["cluster."+key] = v
					switch key {
					case "nodes":
						s.Cluster.Nodes, _ = d.Int(v, "cluster.nodes")
					case "gpusPerNode":
						s.Cluster.GPUsPerNode, _ = d.Int(v, "cluster.gpusPerNode")
					case "product":
						s.Cluster.Product, _ = d.String(v, "cluster.product")
					case "nodesPerRack":
						s.Cluster.NodesPerRack, _ = d.Int(v, "cluster.nodesPerRack")
					case "racksPerBlock":
						s.Cluster.RacksPerBlock, _ = d.Int(v, "cluster.racksPerBlock")
					case "gpuAPI":
						s.Cluster.GPUAPI = decodeGPUAPI(d, v)
					}
				})
				pos["cluster"] = v
			case "scheduler":
				d.Map(v, "scheduler", []string{"kubeAPIQPS", "kubeAPIBurst"}, func(key string, _, v *yaml.Node) {
					pos["scheduler."+key] = v
					switch key {
					case "kubeAPIQPS":
						s.Scheduler.KubeAPIQPS, _ = d.Int(v, "scheduler.kubeAPIQPS")
					case "kubeAPIBurst":
						s.Scheduler.KubeAPIBurst, _ = d.Int(v, "scheduler.kubeAPIBurst")
					}
				})
			case "repetitions":
				pos[key] = v
				s.Repetitions, _ = d.Int(v, key)
			case "timeout":
				pos[key] = v
				s.Timeout, _ = d.Duration(v, key)
			case "settle":
				pos[key] = v
				s.Settle, _ = d.Duration(v, key)
			case "measurements":
				pos[key] = v
				measurementsNode = v
				d.Seq(v, key, func(_ int, item *yaml.Node, f string) {
					m, ok := d.String(item, f)
					if !ok {
						return
					}
					if slices.Contains(s.Measurements, m) {
						d.Errorf(item, f, "%q listed twice", m)
						return
					}
					pos[f] = item
					s.Measurements = append(s.Measurements, m)
					measurementFields = append(measurementFields, f)
				})
			case "phases":
				pos[key] = v
				d.Seq(v, key, func(i int, item *yaml.Node, field string) {
					phaseNodes = append(phaseNodes, item)
					s.Phases = append(s.Phases, decodePhase(d, item, field, pos))
				})
			}
		})
	d.CheckUnusedParams("params")
	s.Params = map[string]string{}
	for _, p := range d.Declared() {
		s.Params[p.Name] = p.Value.Value
	}
	if opts.Nodes > 0 {
		s.Cluster.Nodes = opts.Nodes
	}
	if opts.GPUsPerNode > 0 {
		s.Cluster.GPUsPerNode = opts.GPUsPerNode
	}
	if opts.Product != "" {
		s.Cluster.Product = opts.Product
	}
	applyGPUAPI(d, s, root, pos, opts)
	validate(d, s, root, pos, opts, measurementFields)
	switch {
	case measurementsNode == nil:
		s.Measurements = slices.Clone(opts.Measurements)
	case len(s.Measurements) == 0 && measurementsNode.Kind == yaml.SequenceNode:
		d.Errorf(measurementsNode, "measurements", "empty; list what to measure, or leave the field out to take every measurement")
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	s.Hash = hash(data, s)
	return s, nil
}

// positions remembers the node of each field, so checks that span fields can point at one of them.
type positions map[string]*yaml.Node

func (p positions) at(field string, fallback *yaml.Node) *yaml.Node {
	if n, ok := p[field]; ok {
		return n
	}
	return fallback
}

func decodePhase(d *strictyaml.Decoder, n *yaml.Node, field string, pos positions) Phase {
	ph := Phase{Policy: Gang, Start: AfterCreated}
	pos[field] = n
	minCountSet := false
	d.Map(n, field, []string{"name", "groups", "fill", "podsPerGroup", "gpusPerPod", "cpu", "memory", "policy", "minCount", "priorityClass", "priority", "disruptionMode", "arrival", "prefill", "start", "topology", "via"},
		func(key string, _, v *yaml.Node) {
			f := field + "." + key
			pos[f] = v
			switch key {
			case "name":
				ph.Name, _ = d.String(v, f)
			case "groups":
				ph.Groups, _ = d.Int(v, f)
			case "fill":
				ph.Fill, _ = d.Float(v, f)
			case "podsPerGroup":
				ph.PodsPerGroup, _ = d.Int(v, f)
			case "gpusPerPod":
				ph.GPUsPerPod, _ = d.Int(v, f)
			case "cpu", "memory":
				s, ok := d.String(v, f)
				if !ok {
					return
				}
				q, err := resource.ParseQuantity(s)
				if err != nil || q.Sign() <= 0 {
					d.Errorf(v, f, "want a positive quantity such as 100m or 100Mi, got %q", s)
					return
				}
				if key == "cpu" {
					ph.CPU = q
				} else {
					ph.Memory = q
				}
			case "policy":
				if c, ok := choice(d, v, f, "a policy", string(Gang), string(Basic)); ok {
					ph.Policy = Policy(c)
				}
			case "minCount":
				minCountSet = true
				ph.MinCount, _ = d.Int(v, f)
			case "priorityClass":
				ph.PriorityClass, _ = d.String(v, f)
			case "priority":
				p, ok := d.Int(v, f)
				if ok && (p < -2147483648 || p > 1000000000) {
					d.Errorf(v, f, "%d is out of range (user PriorityClasses go up to 1000000000)", p)
					return
				}
				ph.Priority = int32(p)
			case "disruptionMode":
				c, _ := choice(d, v, f, "a disruption mode", "single", "all")
				ph.DisruptionAll = c == "all"
			case "arrival":
				decodeArrival(d, v, f, &ph)
			case "prefill":
				ph.Prefill, _ = d.Bool(v, f)
			case "topology":
				decodeTopology(d, v, f, &ph)
			case "via":
				c, _ := choice(d, v, f, "a way to create groups", "podGroup", "job")
				ph.ViaJob = c == "job"
			case "start":
				if c, ok := choice(d, v, f, "a start mode", string(AfterCreated), string(AfterBound), string(WithPrevious)); ok {
					ph.Start = Start(c)
				}
			}
		})
	if ph.Policy == Gang && !minCountSet {
		// The upstream shapes set minCount = podsPerGroup; so does a file that says nothing.
		ph.MinCount = ph.PodsPerGroup
	}
	if ph.Policy == Basic && minCountSet {
		d.Errorf(pos[field+".minCount"], field+".minCount", "only gang groups have a quorum; remove minCount or set policy: gang")
	}
	return ph
}

// choice decodes a string that must be one of accepted; the error names what it is and them all.
func choice(d *strictyaml.Decoder, v *yaml.Node, f, what string, accepted ...string) (string, bool) {
	s, ok := d.String(v, f)
	if !ok {
		return "", false
	}
	if !slices.Contains(accepted, s) {
		d.Errorf(v, f, "%q is not %s (accepted: %s)", s, what, strings.Join(accepted, ", "))
		return "", false
	}
	return s, true
}

// decodeTopology reads a phase's topology: rack, block or zone name the cluster's topology
// labels (clusters.Topology's keys); anything else must be a label key.
func decodeTopology(d *strictyaml.Decoder, v *yaml.Node, f string, ph *Phase) {
	s, ok := d.String(v, f)
	if !ok {
		return
	}
	switch s {
	case "rack":
		ph.TopologyKey = clusters.DefaultRackKey
	case "block":
		ph.TopologyKey = clusters.DefaultBlockKey
	case "zone":
		ph.TopologyKey = clusters.ZoneLabel
	default:
		if errs := validation.IsQualifiedName(s); len(errs) > 0 {
			d.Errorf(v, f, "%q is neither rack, block nor zone, nor a label key: %s", s, strings.Join(errs, "; "))
			return
		}
		ph.TopologyKey = s
	}
}

// decodeArrival accepts `burst`, `schedulerPerf` or `{groupsPerSecond: N}`.
func decodeArrival(d *strictyaml.Decoder, v *yaml.Node, f string, ph *Phase) {
	if v.Kind == yaml.ScalarNode {
		s, ok := d.String(v, f)
		if !ok {
			return
		}
		switch s {
		case "burst":
		case "schedulerPerf":
			ph.InOrder = true
		default:
			d.Errorf(v, f, "%q is not an arrival (accepted: burst, schedulerPerf, or {groupsPerSecond: N})", s)
		}
		return
	}
	d.Map(v, f, []string{"groupsPerSecond"}, func(_ string, _, v *yaml.Node) {
		r, ok := d.Float(v, f+".groupsPerSecond")
		if ok && r <= 0 {
			d.Errorf(v, f+".groupsPerSecond", "%g: want a rate above 0 (or arrival: burst)", r)
			return
		}
		ph.GroupsPerSecond = r
	})
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// maxNameLen keeps "<scenario>-<rep>-<rand>" a valid namespace name (63 characters).
const maxNameLen = 40

// MaxNodes is the largest cluster a scenario may ask for (the local provider's limit too).
const MaxNodes = 20000

// maxPods is the most pods the largest cluster can hold. Counts above it can never fit, and bounding
// them here keeps the products the capacity check computes (groups × pods × GPUs) far from overflow:
// unbounded, a huge groups value wrapped around to a small product and passed the check.
const maxPods = MaxNodes * NodePods

func validate(d *strictyaml.Decoder, s *Scenario, root *yaml.Node, pos positions, opts Options, measurementFields []string) {
	switch {
	case pos["metadata.name"] == nil:
		d.Errorf(pos.at("metadata", root), "metadata.name", "missing; every scenario needs a name")
	case !nameRE.MatchString(s.Name) || len(s.Name) > maxNameLen:
		d.Errorf(pos["metadata.name"], "metadata.name", "%q: want lowercase letters, digits and '-', at most %d characters (it names namespaces and benchmark lines)", s.Name, maxNameLen)
	}
	nodesField := "cluster.nodes"
	nodesNode := pos.at(nodesField, pos.at("cluster", root))
	via := ""
	switch {
	case opts.Nodes > 0 && opts.GPUsPerNode > 0:
		via = fmt.Sprintf(" (--nodes %d --gpus-per-node %d)", opts.Nodes, opts.GPUsPerNode)
	case opts.Nodes > 0:
		via = fmt.Sprintf(" (--nodes %d)", opts.Nodes)
	case opts.GPUsPerNode > 0:
		via = fmt.Sprintf(" (--gpus-per-node %d)", opts.GPUsPerNode)
	}
	switch {
	case pos[nodesField] == nil && opts.Nodes == 0:
		d.Errorf(nodesNode, nodesField, "missing; how many simulated nodes does the scenario need?")
	case d.Failed(nodesField) && opts.Nodes == 0:
	case s.Cluster.Nodes < 1 || s.Cluster.Nodes > MaxNodes:
		d.Errorf(nodesNode, nodesField, "%d%s is out of range (accepted: 1 to %d)", s.Cluster.Nodes, via, MaxNodes)
	}
	if !d.Failed("cluster.gpusPerNode") && (s.Cluster.GPUsPerNode < 1 || s.Cluster.GPUsPerNode > 64) {
		d.Errorf(pos.at("cluster.gpusPerNode", pos.at("cluster", root)), "cluster.gpusPerNode", "%d%s is out of range (accepted: 1 to 64)", s.Cluster.GPUsPerNode, via)
	}
	// The product becomes the nvidia.com/gpu.product node label: a value the apiserver would refuse
	// must fail here, not after a cluster has been started for it.
	if p := s.Cluster.Product; p != "" && !d.Failed("cluster.product") {
		if errs := validation.IsValidLabelValue(p); len(errs) > 0 {
			d.Errorf(pos.at("cluster.product", pos.at("cluster", root)), "cluster.product", "%q%s is not a valid label value: %s", p, productVia(opts), strings.Join(errs, "; "))
		}
	}
	validateRacks(d, s, root, pos)
	if !d.Failed("scheduler.kubeAPIQPS") && s.Scheduler.KubeAPIQPS < 1 {
		d.Errorf(pos.at("scheduler.kubeAPIQPS", root), "scheduler.kubeAPIQPS", "%d: want at least 1 (the stock kube-scheduler uses %d)", s.Scheduler.KubeAPIQPS, StockKubeAPIQPS)
	}
	if !d.Failed("scheduler.kubeAPIBurst") && s.Scheduler.KubeAPIBurst < 1 {
		d.Errorf(pos.at("scheduler.kubeAPIBurst", root), "scheduler.kubeAPIBurst", "%d: want at least 1 (the stock kube-scheduler uses %d)", s.Scheduler.KubeAPIBurst, StockKubeAPIBurst)
	}
	if !d.Failed("repetitions") && (s.Repetitions < 1 || s.Repetitions > 100) {
		d.Errorf(pos.at("repetitions", root), "repetitions", "%d is out of range (accepted: 1 to 100)", s.Repetitions)
	}
	if !d.Failed("timeout") && s.Timeout <= 0 {
		d.Errorf(pos.at("timeout", root), "timeout", "%s: want a positive duration", s.Timeout)
	}
	if !d.Failed("timeout") && !d.Failed("settle") && (s.Settle <= 0 || s.Settle >= s.Timeout) {
		d.Errorf(pos.at("settle", root), "settle", "%s: want a positive duration shorter than timeout (%s)", s.Settle, s.Timeout)
	}
	for i, m := range s.Measurements {
		if !slices.Contains(opts.Measurements, m) {
			f := measurementFields[i]
			d.Errorf(pos[f], f, "unknown measurement %q (accepted: %s)", m, strings.Join(opts.Measurements, ", "))
		}
	}
	if pos["phases"] == nil || len(s.Phases) == 0 {
		d.Errorf(pos.at("phases", root), "phases", "a scenario needs at least one phase")
		return
	}
	// Checks of a phase against the cluster's shape are only meaningful when that shape is valid;
	// otherwise they would repeat the cluster error as a symptom on every phase.
	clusterOK := !d.Failed(nodesField) && !d.Failed("cluster.gpusPerNode")
	validatePhases(d, s, pos, via, clusterOK)
}

// validateRacks checks cluster.nodesPerRack and cluster.racksPerBlock.
func validateRacks(d *strictyaml.Decoder, s *Scenario, root *yaml.Node, pos positions) {
	at := func(key string) *yaml.Node { return pos.at("cluster."+key, pos.at("cluster", root)) }
	if pos["cluster.nodesPerRack"] != nil && !d.Failed("cluster.nodesPerRack") && (s.Cluster.NodesPerRack < 1 || s.Cluster.NodesPerRack > MaxNodes) {
		d.Errorf(at("nodesPerRack"), "cluster.nodesPerRack", "%d is out of range (accepted: 1 to %d)", s.Cluster.NodesPerRack, MaxNodes)
	}
	if pos["cluster.racksPerBlock"] == nil {
		if s.Cluster.NodesPerRack > 0 {
			s.Cluster.RacksPerBlock = 1
		}
		return
	}
	switch {
	case d.Failed("cluster.racksPerBlock"):
	case pos["cluster.nodesPerRack"] == nil:
		d.Errorf(at("racksPerBlock"), "cluster.racksPerBlock", "set cluster.nodesPerRack too: blocks are made of racks")
	case s.Cluster.RacksPerBlock < 1 || s.Cluster.RacksPerBlock > MaxNodes:
		d.Errorf(at("racksPerBlock"), "cluster.racksPerBlock", "%d is out of range (accepted: 1 to %d)", s.Cluster.RacksPerBlock, MaxNodes)
	}
}

// productVia says a product came from --gpu-product rather than the file.
func productVia(opts Options) string {
	if opts.Product != "" {
		return " (--gpu-product)"
	}
	return ""
}

func validatePhases(d *strictyaml.Decoder, s *Scenario, pos positions, via string, clusterOK bool) {
	names := map[string]string{}
	classes := map[string]int32{}
	measured := false
	nodeCPU, nodeMem := resource.MustParse(NodeCPU), resource.MustParse(NodeMemory)
	// Phases are resolved first (fill → groups), then checked against each other for capacity.
	shapeOK := make([]bool, len(s.Phases))
	for i := range s.Phases {
		ph := &s.Phases[i]
		f := fmt.Sprintf("phases[%d]", i)
		at := func(key string) *yaml.Node { return pos.at(f+"."+key, pos[f]) }
		ok := true
		bad := func(key, format string, args ...any) {
			ok = false
			if d.Failed(f + "." + key) {
				return // the value did not decode; that error says it all
			}
			d.Errorf(at(key), f+"."+key, format, args...)
		}
		for _, key := range []string{"podsPerGroup", "groups", "fill", "gpusPerPod", "minCount", "priority"} {
			if d.Failed(f + "." + key) {
				ok = false
			}
		}
		switch {
		case pos[f+".name"] == nil:
			bad("name", "missing; every phase needs a name")
		case !nameRE.MatchString(ph.Name) || len(ph.Name) > 20:
			bad("name", "%q: want lowercase letters, digits and '-', at most 20 characters (it prefixes object names)", ph.Name)
		case names[ph.Name] != "":
			bad("name", "%q is also the name of %s", ph.Name, names[ph.Name])
		default:
			names[ph.Name] = f
		}
		switch {
		case pos[f+".podsPerGroup"] == nil:
			bad("podsPerGroup", "missing; how many pods does each group have?")
		case ph.PodsPerGroup < 1:
			bad("podsPerGroup", "%d: want at least 1", ph.PodsPerGroup)
		case ph.PodsPerGroup > maxPods:
			bad("podsPerGroup", "%d is out of range (accepted: 1 to %d, the pods %d nodes × %d pods per node hold)", ph.PodsPerGroup, maxPods, MaxNodes, NodePods)
		}
		if ph.GPUsPerPod < 0 {
			bad("gpusPerPod", "%d: want 0 or more", ph.GPUsPerPod)
		}
		if ph.GPUsPerPod == 0 && ph.CPU.IsZero() && ph.Memory.IsZero() && !d.Failed(f+".cpu") && !d.Failed(f+".memory") {
			bad("gpusPerPod", "0 and no cpu or memory: a pod must request something, or it measures nothing a scheduler decides")
		}
		if !d.Failed("cluster.gpusPerNode") && ph.GPUsPerPod > s.Cluster.GPUsPerNode {
			bad("gpusPerPod", "%d is more than cluster.gpusPerNode (%d%s): no node can hold such a pod", ph.GPUsPerPod, s.Cluster.GPUsPerNode, via)
		}
		if !ph.CPU.IsZero() && ph.CPU.Cmp(nodeCPU) > 0 {
			bad("cpu", "%s is more than a simulated node's %s CPUs", ph.CPU.String(), NodeCPU)
		}
		if !ph.Memory.IsZero() && ph.Memory.Cmp(nodeMem) > 0 {
			bad("memory", "%s is more than a simulated node's %s", ph.Memory.String(), NodeMemory)
		}
		if ph.Policy == Gang && ph.PodsPerGroup >= 1 && !d.Failed(f+".podsPerGroup") {
			switch {
			case ph.MinCount < 1:
				bad("minCount", "%d: want at least 1", ph.MinCount)
			case ph.MinCount > ph.PodsPerGroup:
				bad("minCount", "%d is more than podsPerGroup (%d): the gang could never reach its quorum", ph.MinCount, ph.PodsPerGroup)
			}
		}
		if (ph.PriorityClass == "") != (pos[f+".priority"] == nil) {
			if ph.PriorityClass == "" {
				bad("priority", "set priorityClass too: the class is created with this value")
			} else {
				bad("priorityClass", "set priority too: the class is created with that value")
			}
		} else if ph.PriorityClass != "" {
			if !nameRE.MatchString(ph.PriorityClass) || len(ph.PriorityClass) > 253 {
				bad("priorityClass", "%q is not a valid PriorityClass name (lowercase letters, digits and '-', at most 253 characters)", ph.PriorityClass)
			} else if strings.HasPrefix(ph.PriorityClass, "system-") {
				// The apiserver reserves the prefix for its own classes and refuses to create one.
				bad("priorityClass", "%q: the system- prefix is reserved for Kubernetes' own PriorityClasses", ph.PriorityClass)
			} else if v, seen := classes[ph.PriorityClass]; seen && v != ph.Priority {
				bad("priority", "%d, but priorityClass %q has priority %d in an earlier phase", ph.Priority, ph.PriorityClass, v)
			}
			classes[ph.PriorityClass] = ph.Priority
		}
		checkTopology(s, ph, bad)
		if ph.ViaJob && ph.InOrder {
			bad("arrival", "schedulerPerf creates PodGroups ahead of their pods, and a Job's PodGroup is the job controller's to create; use burst or groupsPerSecond")
		}
		if ph.Start == WithPrevious && i == 0 {
			bad("start", "withPrevious on the first phase: there is no previous phase")
		}
		if ph.Prefill {
			if measured {
				bad("prefill", "prefill phases build the starting state and must come before every measured phase")
			}
			if ph.GroupsPerSecond > 0 {
				bad("arrival", "prefill phases are not measured; pacing them only makes the run longer")
			}
		} else {
			measured = true
		}
		groupsSet, fillSet := pos[f+".groups"] != nil, pos[f+".fill"] != nil
		switch {
		case groupsSet && fillSet:
			bad("fill", "set groups or fill, not both")
		case !groupsSet && !fillSet:
			bad("groups", "missing; set groups (a count) or fill (a fraction of the cluster's GPUs)")
		case groupsSet && ph.Groups < 1:
			bad("groups", "%d: want at least 1", ph.Groups)
		case groupsSet && ph.Groups > maxPods:
			bad("groups", "%d is out of range (accepted: 1 to %d, the pods %d nodes × %d pods per node hold)", ph.Groups, maxPods, MaxNodes, NodePods)
		case fillSet && (ph.Fill <= 0 || ph.Fill > 1):
			bad("fill", "%g: want a fraction of the cluster's GPUs above 0 and at most 1", ph.Fill)
		case d.Failed(f+".groups") || d.Failed(f+".fill"):
			ok = false
		case fillSet && ph.GPUsPerPod == 0:
			bad("fill", "fill is a fraction of the cluster's GPUs, and this phase's pods ask for none; set groups")
		case fillSet && !clusterOK:
			ok = false // no cluster size to take a fraction of; the cluster error says why
		case fillSet && ok:
			per := ph.PodsPerGroup * ph.GPUsPerPod
			ph.Groups = int(math.Floor(ph.Fill * float64(s.Cluster.GPUs()) / float64(per)))
			if ph.Groups < 1 {
				bad("fill", "%g of %d nodes × %d GPUs%s is %d GPUs, less than one group (%d GPUs)", ph.Fill, s.Cluster.Nodes, s.Cluster.GPUsPerNode, via, int(ph.Fill*float64(s.Cluster.GPUs())), per)
			}
		}
		shapeOK[i] = ok
	}
	if !measured {
		d.Errorf(pos["phases"], "phases", "every phase is a prefill: a scenario must measure something")
	}
	if clusterOK {
		checkCapacity(d, s, pos, shapeOK, via)
	}
}

// checkTopology rejects a topology constraint the cluster's layout cannot serve: a rack, block or
// zone key without racks, or a gang whose quorum no single domain holds (it would never bind, and
// the run would measure nothing but the timeout).
func checkTopology(s *Scenario, ph *Phase, bad func(key, format string, args ...any)) {
	known := ph.TopologyKey == clusters.DefaultRackKey || ph.TopologyKey == clusters.DefaultBlockKey || ph.TopologyKey == clusters.ZoneLabel
	if !known {
		return
	}
	if s.Cluster.NodesPerRack < 1 {
		bad("topology", "%s needs the cluster in racks: set cluster.nodesPerRack", ph.TopologyKey)
		return
	}
	domain := s.Cluster.NodesPerRack
	if ph.TopologyKey != clusters.DefaultRackKey {
		domain *= max(1, s.Cluster.RacksPerBlock)
	}
	domain = min(domain, s.Cluster.Nodes)
	need := ph.PodsPerGroup
	if ph.Policy == Gang {
		need = ph.MinCount
	}
	if ph.GPUsPerPod > 0 && s.Cluster.GPUsPerNode > 0 && need > 0 {
		if fits := domain * (s.Cluster.GPUsPerNode / ph.GPUsPerPod); fits < need {
			bad("topology", "one domain of %s holds %d nodes, room for %d pods of %d GPUs, fewer than the %d each group needs in one domain", ph.TopologyKey, domain, fits, ph.GPUsPerPod, need)
		}
	}
}

// checkCapacity rejects workloads the cluster cannot hold, counted in GPUs and in pod slots: each
// phase must fit next to every earlier phase it cannot preempt (those of equal or higher priority).
// A lower-priority phase may be overrun on purpose (a preemption wave), so it is not added in.
func checkCapacity(d *strictyaml.Decoder, s *Scenario, pos positions, shapeOK []bool, via string) {
	if s.Cluster.Nodes < 1 || s.Cluster.GPUsPerNode < 1 {
		return
	}
	for i, ph := range s.Phases {
		if !shapeOK[i] {
			continue
		}
		f := fmt.Sprintf("phases[%d]", i)
		gpus, pods := ph.GPUs(), ph.Pods()
		for j := range i {
			// Stop adding once over capacity: the verdict is settled, and the sum stays small
			// however many phases a file has.
			if gpus > s.Cluster.GPUs() || pods > s.Cluster.Nodes*NodePods {
				break
			}
			if shapeOK[j] && s.Phases[j].Priority >= ph.Priority {
				gpus += s.Phases[j].GPUs()
				pods += s.Phases[j].Pods()
			}
		}
		field, n := f+".groups", pos.at(f+".groups", pos.at(f+".fill", pos[f]))
		if pos[f+".fill"] != nil {
			field = f + ".fill"
		}
		need := fmt.Sprintf("%d groups × %d pods × %d GPUs = %d GPUs", ph.Groups, ph.PodsPerGroup, ph.GPUsPerPod, ph.GPUs())
		if gpus > ph.GPUs() {
			need += fmt.Sprintf(", %d with the earlier phases it cannot preempt", gpus)
		}
		if gpus > s.Cluster.GPUs() {
			d.Errorf(n, field, "%s, but %d nodes × %d GPUs%s hold %d; lower it or raise cluster.nodes",
				need, s.Cluster.Nodes, s.Cluster.GPUsPerNode, via, s.Cluster.GPUs())
			continue
		}
		if slots := s.Cluster.Nodes * NodePods; pods > slots {
			d.Errorf(n, field, "%d pods (with the earlier phases it cannot preempt) exceed %d nodes × %d pods per node%s; lower it or raise cluster.nodes",
				pods, s.Cluster.Nodes, NodePods, via)
		}
	}
}

// hash identifies what ran: the file's bytes, the effective params and the resolved cluster shape.
func hash(data []byte, s *Scenario) string {
	h := sha256.New()
	h.Write(data)
	keys := make([]string, 0, len(s.Params))
	for k := range s.Params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(h, "\x00%s=%s", k, s.Params[k])
	}
	fmt.Fprintf(h, "\x00nodes=%d\x00gpusPerNode=%d\x00product=%s", s.Cluster.Nodes, s.Cluster.GPUsPerNode, s.Cluster.Product)
	if s.Cluster.GPUAPI != "" {
		// Only when set, so the hashes of runs from before the field existed stay as they were.
		fmt.Fprintf(h, "\x00gpuAPI=%s", s.Cluster.GPUAPI)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Peek reads only metadata.name and metadata.labels, without validating anything else, so a set of
// files can be filtered by label before the selected ones are resolved (which may fail for files
// that were not asked for, e.g. at a --nodes they do not fit).
func Peek(data []byte) (name string, labels []string) {
	var doc struct {
		Metadata struct {
			Name   string   `yaml:"name"`
			Labels []string `yaml:"labels"`
		} `yaml:"metadata"`
	}
	if yaml.Unmarshal(data, &doc) != nil {
		return "", nil
	}
	return doc.Metadata.Name, doc.Metadata.Labels
}

// GPUAPIs are the GPU APIs a scenario can be written for. clusters.GPUAPIBoth is not one: a node
// publishing its GPUs both ways lets a pod take a GPU each way, so neither the capacity a scenario
// is checked against nor the free capacity the invariants judge would be true, and a workload's
// pods ask one way anyway.
func GPUAPIs() []clusters.GPUAPI {
	return []clusters.GPUAPI{clusters.GPUAPIDevicePlugin, clusters.GPUAPIDRA}
}

func gpuAPINames() []string {
	var out []string
	for _, a := range GPUAPIs() {
		out = append(out, string(a))
	}
	return out
}

// decodeGPUAPI reads cluster.gpuAPI: device-plugin or dra.
func decodeGPUAPI(d *strictyaml.Decoder, v *yaml.Node) clusters.GPUAPI {
	const f = "cluster.gpuAPI"
	s, ok := d.String(v, f)
	if !ok {
		return ""
	}
	if s == string(clusters.GPUAPIBoth) {
		d.Errorf(v, f, "%q: a scenario's pods claim their GPUs one way; nodes publishing both would let a pod take a GPU each way, and no capacity check would hold (accepted: %s)", s, strings.Join(gpuAPINames(), ", "))
		return ""
	}
	if !slices.Contains(gpuAPINames(), s) {
		d.Errorf(v, f, "%q is not a GPU API (accepted: %s)", s, strings.Join(gpuAPINames(), ", "))
		return ""
	}
	return clusters.GPUAPI(s)
}

// applyGPUAPI resolves the scenario's GPU API: the file's, which is a requirement (the scenario is
// written for that API alone), else --gpu-api. A flag that contradicts the file is an error at the
// file's field, so a label-selected set skips the scenario with that reason (LoadScenarios).
func applyGPUAPI(d *strictyaml.Decoder, s *Scenario, root *yaml.Node, pos positions, opts Options) {
	switch {
	case opts.GPUAPI == "":
	case !slices.Contains(GPUAPIs(), opts.GPUAPI):
		d.Errorf(pos.at("cluster.gpuAPI", pos.at("cluster", root)), "cluster.gpuAPI", "--gpu-api %s: a scenario runs on %s GPUs", opts.GPUAPI, strings.Join(gpuAPINames(), " or "))
	case pos["cluster.gpuAPI"] == nil:
		s.Cluster.GPUAPI = opts.GPUAPI
	case d.Failed("cluster.gpuAPI"):
	case s.Cluster.GPUAPI != opts.GPUAPI:
		d.Errorf(pos["cluster.gpuAPI"], "cluster.gpuAPI", "%s, but --gpu-api %s was given: the scenario is written for %s GPUs only; leave the flag out or select other scenarios",
			s.Cluster.GPUAPI, opts.GPUAPI, s.Cluster.GPUAPI)
	}
}

// referenceName is a scheduler_perf test case or workload name.
var referenceName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// decodeReference reads reference: {schedulerPerf: {package, config, testCase, workload}}.
func decodeReference(d *strictyaml.Decoder, v *yaml.Node) *Reference {
	var r *Reference
	d.Map(v, "reference", []string{"schedulerPerf"}, func(_ string, _, v *yaml.Node) {
		r = &Reference{}
		const f = "reference.schedulerPerf"
		got := map[string]*yaml.Node{}
		d.Map(v, f, []string{"package", "config", "testCase", "workload"}, func(key string, _, v *yaml.Node) {
			got[key] = v
			val, ok := d.String(v, f+"."+key)
			if !ok {
				return
			}
			switch key {
			case "package":
				r.Package = val
				if !referencePackage.MatchString(val) {
					d.Errorf(v, f+".package", "%q: want a package below test/integration/scheduler_perf, e.g. podgroup/gangscheduling", val)
				}
			case "config":
				r.Config = val
				if !strings.HasSuffix(val, ".yaml") || strings.Contains(val, "/") {
					d.Errorf(v, f+".config", "%q: want a workload file of the package, e.g. performance-config.yaml", val)
				}
			case "testCase", "workload":
				if !referenceName.MatchString(val) {
					d.Errorf(v, f+"."+key, "%q: want a scheduler_perf name (letters, digits, _)", val)
				}
				if key == "testCase" {
					r.TestCase = val
				} else {
					r.Workload = val
				}
			}
		})
		for _, key := range []string{"package", "config", "testCase", "workload"} {
			if got[key] == nil {
				d.Errorf(v, f+"."+key, "missing")
			}
		}
	})
	return r
}

// referencePackage is a package path below test/integration/scheduler_perf.
var referencePackage = regexp.MustCompile(`^[a-z0-9_]+(/[a-z0-9_]+)*$`)
