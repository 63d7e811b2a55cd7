package measure

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/gangbench/gangbench/observe/timeline"
	"github.com/gangbench/gangbench/results"
)

// On a cluster whose GPUs are claimed through DRA, each pod's ResourceClaim is allocated (the
// scheduler writes status.allocation in the gang's PreBind) before the pod is bound, and the
// allocation rate is the DRA side of the binding rate: claims/s from a ResourceClaim watch, over
// the same window as bindingRate. A claim counts for the phase of the pod that owns it (the
// resourceclaim-controller makes one per pod, owned by the pod): claim templates are shared by
// phases of equal GPU count, so the claim itself does not say its phase.

// ClaimAllocation is the measurement's name; it measures nothing on clusters without DRA.
const ClaimAllocation = "claimAllocation"

// ItemClaimAllocationRate is claims allocated per second (Average over the window, percentiles of
// 1-second samples, Count), as bindingRate is for binds; Claims counts the measured pods' claims
// seen, allocated or not.
const ItemClaimAllocationRate = "claimAllocationRate"

// UnitClaimsPerSecond is the unit of ItemClaimAllocationRate.
const UnitClaimsPerSecond = "claims/s"

// ClaimSeen is what the watch records of one claim: the pod it was made for, when it was first
// seen, and when first seen allocated (zero while it is not).
type ClaimSeen struct {
	Claim, Pod        string
	Seen, AllocatedAt time.Time
}

type claimAllocation struct {
	env   *Env
	start time.Time
	clock func() time.Time

	mu     sync.Mutex
	claims map[string]*ClaimSeen

	stop    chan struct{}
	factory informers.SharedInformerFactory
}

func newClaimAllocation(env *Env) Measurement {
	return &claimAllocation{env: env, clock: time.Now, claims: map[string]*ClaimSeen{}}
}

// Start begins the ResourceClaim watch of the repetition's namespace and returns once its initial
// list is delivered. Without DRA there are no claims to watch, and no watch is opened.
func (m *claimAllocation) Start(ctx context.Context) error {
	m.start = m.clock()
	if !m.env.GPUAPI.DRA() {
		return nil
	}
	f := informers.NewSharedInformerFactoryWithOptions(m.env.Client, 0, informers.WithNamespace(m.env.Namespace))
	inf := f.Resource().V1().ResourceClaims().Informer()
	// The informer keeps only what observe reads, so thousands of claims with their allocation
	// results cost little memory.
	if err := inf.SetTransform(slimClaim); err != nil {
		return fmt.Errorf("%s: %w", ClaimAllocation, err)
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    m.observe,
		UpdateFunc: func(_, obj any) { m.observe(obj) },
	})
	if err != nil {
		return fmt.Errorf("%s: %w", ClaimAllocation, err)
	}
	m.stop = make(chan struct{})
	m.factory = f
	f.Start(m.stop)
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		m.shutdown()
		return fmt.Errorf("%s: the ResourceClaim watch of namespace %s did not sync: %w", ClaimAllocation, m.env.Namespace, context.Cause(ctx))
	}
	return nil
}

func (m *claimAllocation) shutdown() {
	if m.stop == nil {
		return
	}
	close(m.stop)
	m.factory.Shutdown()
	m.stop = nil
}

// observe records a claim when first seen and when first seen allocated; later updates (the
// reservation, a deallocation after the pod is gone) do not move either time.
func (m *claimAllocation) observe(obj any) {
	c, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return
	}
	now := m.clock()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.claims[c.Name]
	if s == nil {
		s = &ClaimSeen{Claim: c.Name, Pod: ownerPod(c), Seen: now}
		m.claims[c.Name] = s
	}
	if c.Status.Allocation != nil && s.AllocatedAt.IsZero() {
		s.AllocatedAt = now
	}
}

// ownerPod is the pod a claim was made for: its controlling owner of kind Pod ("" for a claim
// made by hand).
func ownerPod(c *resourcev1.ResourceClaim) string {
	for _, o := range c.OwnerReferences {
		if o.Kind == "Pod" && o.Controller != nil && *o.Controller {
			return o.Name
		}
	}
	return ""
}

// slimClaim drops everything observe does not read: name, owners and whether it is allocated (an
// empty allocation stands for any).
func slimClaim(obj any) (any, error) {
	c, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return obj, nil
	}
	slim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
		Name: c.Name, Namespace: c.Namespace, UID: c.UID, ResourceVersion: c.ResourceVersion, OwnerReferences: c.OwnerReferences,
	}}
	if c.Status.Allocation != nil {
		slim.Status.Allocation = &resourcev1.AllocationResult{}
	}
	return slim, nil
}

func (m *claimAllocation) Gather(context.Context) ([]results.DataItem, error) {
	if !m.env.GPUAPI.DRA() {
		return nil, nil
	}
	m.shutdown()
	m.mu.Lock()
	seen := make([]ClaimSeen, 0, len(m.claims))
	for _, s := range m.claims {
		seen = append(seen, *s)
	}
	m.mu.Unlock()
	events := m.env.Timeline.Events()
	start := FirstCreation(events, m.env.Measured, m.start)
	it, withheld, unowned := ClaimAllocationItem(start, seen, PodPhases(events), m.env.Measured)
	if it.Data["Claims"] == 0 && unowned == 0 {
		// The measured pods claim nothing (they ask for CPU only, as the upstream shapes' do): a
		// rate of 0 claims/s would read as DRA stalling.
		return nil, nil
	}
	if withheld != "" {
		m.env.note("%s: %s", ItemClaimAllocationRate, withheld)
	}
	if unowned > 0 {
		m.env.note("%s: %d claims in the namespace belong to no pod of the run; not counted", ItemClaimAllocationRate, unowned)
	}
	if left := it.Data["Claims"] - it.Data["Count"]; left > 0 {
		m.env.note("%s: %.0f of the measured pods' %.0f claims were not allocated by the end", ItemClaimAllocationRate, left, it.Data["Claims"])
	}
	return []results.DataItem{it}, nil
}

// PodPhases maps each pod the timeline knows (created, bound or deleted) to its phase.
func PodPhases(events []timeline.Event) map[string]string {
	out := map[string]string{}
	for _, e := range events {
		if e.Pod != "" && e.Phase != "" {
			out[e.Pod] = e.Phase
		}
	}
	return out
}

// ClaimAllocationItem computes ItemClaimAllocationRate from what the watch saw: the claims of the
// measured phases' pods allocated at or after start, as WatchRate computes the binding rate from
// binds (same window rule, same percentile rule; withheld says which percentiles were left out).
// unowned counts claims whose pod the timeline does not know.
func ClaimAllocationItem(start time.Time, seen []ClaimSeen, podPhase map[string]string, measured []string) (it results.DataItem, withheld string, unowned int) {
	var allocs []time.Time
	claims := 0
	for _, s := range seen {
		ph, ok := podPhase[s.Pod]
		switch {
		case !ok:
			unowned++
			continue
		case !slices.Contains(measured, ph):
			continue
		}
		claims++
		if !s.AllocatedAt.IsZero() && !s.AllocatedAt.Before(start) {
			allocs = append(allocs, s.AllocatedAt)
		}
	}
	data, withheld := watchRate(start, allocs, "allocations")
	data["Claims"] = float64(claims)
	return results.DataItem{Name: ItemClaimAllocationRate, Unit: UnitClaimsPerSecond, Data: data}, withheld, unowned
}
