// Package monitor watches every PodGroup in a cluster for a whole conformance run, records each change
// of the scheduler's PodGroupInitiallyScheduled condition, and checks the recorded timeline for
// monotonicity violations. Per-test assertions only see the objects a test created and only while it
// polls; a regression that happens between polls, or to an object of another test, is caught here.
package monitor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/gangbench/gangbench/scenarios/gangapi"
)

// DefaultConditionType is the only PodGroup condition the v1.37 scheduler writes.
const DefaultConditionType = "PodGroupInitiallyScheduled"

// defaultSyncTimeout bounds Start when the caller's context has no deadline, so a cluster whose
// watch never syncs fails the run instead of hanging it.
const defaultSyncTimeout = time.Minute

// Event names, as stored in Transition.Event and in recorded JSON timelines.
const (
	EventAdded    = "added"
	EventModified = "modified"
	EventDeleted  = "deleted"
)

// Options configures a Monitor.
type Options struct {
	// ConditionType is the condition to follow; empty means DefaultConditionType.
	ConditionType string
	// Clock stamps observations; nil means time.Now. Tests replace it to get stable timelines.
	Clock func() time.Time
	// Gang reaches PodGroups in the version the cluster serves; nil means v1beta1 through cs. Its
	// conversion maps the served condition type (v1.36's PodGroupScheduled) to v1beta1's.
	Gang *gangapi.Client
	// Members also watches pods, to record when each PodGroup member first appeared (Members). A
	// conformance run wants that evidence; a benchmark leaves it off, as it adds a watch of every pod.
	Members bool
}

// Stats summarises what a Monitor saw, so a report can show that the monitor was actually watching
// (zero PodGroups seen during a run that created hundreds means the watch was broken, not clean).
type Stats struct {
	PodGroups   int // distinct UIDs observed
	Transitions int // entries in the timeline
	EverTrue    int // UIDs whose condition was True at least once
	Deleted     int // UIDs observed being deleted
	WatchErrors int // list/watch failures the informer reported (it retries by itself)
}

// uidState is what Observe needs to decide whether an observation is new.
type uidState struct {
	last     *metav1.Condition
	everTrue bool
	deleted  bool
}

// Monitor records PodGroup condition transitions. The zero value is not usable; call New.
type Monitor struct {
	cs    kubernetes.Interface
	gang  *gangapi.Client
	ctype string
	clock func() time.Time
	// watchMembers: see Options.Members.
	watchMembers bool

	mu          sync.Mutex
	transitions []Transition
	state       map[types.UID]*uidState
	watchErrors int
	members     []Member
	memberSeen  map[types.UID]bool

	lifecycle    sync.Mutex // serialises Start and Stop, which must not hold mu (handlers take it)
	started      bool
	stopCh       chan struct{}
	stopOnce     sync.Once
	informerDone chan struct{}
}

// New returns a Monitor over cs. It does nothing until Start; Observe works without Start, which is
// how recorded timelines are replayed.
func New(cs kubernetes.Interface, opts Options) *Monitor {
	m := &Monitor{
		cs:    cs,
		gang:  opts.Gang,
		ctype: opts.ConditionType,
		clock: opts.Clock,
		state: map[types.UID]*uidState{},

		memberSeen:   map[types.UID]bool{},
		watchMembers: opts.Members,
	}
	if m.ctype == "" {
		m.ctype = DefaultConditionType
	}
	if m.clock == nil {
		m.clock = time.Now
	}
	return m
}

// Start begins watching PodGroups in all namespaces and returns once the informer's initial list has
// been delivered, so every PodGroup that exists at return has been observed. ctx bounds only this
// start-up (a minute if it has no deadline); the watch runs until Stop.
func (m *Monitor) Start(ctx context.Context) error {
	m.lifecycle.Lock()
	defer m.lifecycle.Unlock()
	if m.started {
		return errors.New("monitor: Start called twice; a Monitor is single-use")
	}
	if m.cs == nil && m.gang == nil {
		return errors.New("monitor: no clientset")
	}
	gang := m.gang
	if gang == nil {
		var err error
		if gang, err = gangapi.NewClient(gangapi.V1beta1(), m.cs, nil); err != nil {
			return fmt.Errorf("monitor: %w", err)
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultSyncTimeout)
		defer cancel()
	}

	// The reflector retries a missing resource forever and only logs; probing first turns "API not
	// served" into an immediate, explicit error instead of a sync timeout.
	if _, err := gang.PodGroups(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("monitor: %s podgroups is not served by this apiserver (GenericWorkload feature gate and runtime-config off?): %w", gang.API(), err)
		}
		return fmt.Errorf("monitor: list %s podgroups: %w", gang.API(), err)
	}

	// Resync 0: a periodic resync would replay unchanged objects, which Observe drops anyway, so it
	// would only cost CPU.
	inf := cache.NewSharedIndexInformer(gang.PodGroupListWatch(metav1.NamespaceAll), &schedv1beta1.PodGroup{}, 0, cache.Indexers{})
	if err := inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		m.mu.Lock()
		m.watchErrors++
		m.mu.Unlock()
		cache.DefaultWatchErrorHandler(ctx, r, err)
	}); err != nil {
		return fmt.Errorf("monitor: %w", err)
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.observeObject(obj, EventAdded) },
		UpdateFunc: func(_, obj any) { m.observeObject(obj, EventModified) },
		DeleteFunc: func(obj any) { m.observeObject(obj, EventDeleted) },
	})
	if err != nil {
		return fmt.Errorf("monitor: add handler: %w", err)
	}

	// Pods too, but only when they first appear: which members of a group existed when its
	// condition changed is the evidence that tells a known scheduler race from a real regression.
	var podsSynced cache.InformerSynced = func() bool { return true }
	var podInf cache.SharedIndexInformer
	if m.watchMembers && m.cs != nil {
		podInf = cache.NewSharedIndexInformer(cache.NewListWatchFromClient(m.cs.CoreV1().RESTClient(), "pods", metav1.NamespaceAll, fields.Everything()), &corev1.Pod{}, 0, cache.Indexers{})
		// Only the identity is kept: the cache would otherwise hold every pod of the run.
		if err := podInf.SetTransform(stripPod); err != nil {
			return fmt.Errorf("monitor: %w", err)
		}
		preg, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: m.observePod})
		if err != nil {
			return fmt.Errorf("monitor: add pod handler: %w", err)
		}
		podsSynced = preg.HasSynced
	}

	stopCh, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		if podInf != nil {
			wg.Go(func() { podInf.Run(stopCh) })
		}
		inf.Run(stopCh)
		wg.Wait()
	}()
	m.started, m.stopCh, m.informerDone = true, stopCh, done
	// The registration, not the informer: it syncs only once our handler has been called for the
	// initial list, which is what "observed at return" promises.
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced, podsSynced) {
		m.stopLocked()
		return fmt.Errorf("monitor: PodGroup informer did not sync: %w", context.Cause(ctx))
	}
	return nil
}

// Stop ends the watch and waits for the informer's goroutines. The recorded timeline stays readable.
// It is safe to call more than once, and without Start.
func (m *Monitor) Stop() {
	m.lifecycle.Lock()
	defer m.lifecycle.Unlock()
	m.stopLocked()
}

func (m *Monitor) stopLocked() {
	if !m.started {
		return
	}
	m.stopOnce.Do(func() {
		close(m.stopCh)
		<-m.informerDone
	})
}

// Member is a pod of a PodGroup, as the monitor first saw it.
type Member struct {
	Namespace, Group, Name string
	UID                    types.UID
	// Seen is when the watch delivered the pod: within milliseconds of its creation during a run
	// (creationTimestamp has whole seconds only, too coarse for the windows it is compared with).
	Seen time.Time
}

// stripPod keeps what observePod reads.
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion}}
	out.Spec.SchedulingGroup = p.Spec.SchedulingGroup
	return out, nil
}

func (m *Monitor) observePod(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.SchedulingGroup == nil || p.Spec.SchedulingGroup.PodGroupName == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.memberSeen[p.UID] {
		return
	}
	m.memberSeen[p.UID] = true
	m.members = append(m.members, Member{Namespace: p.Namespace, Group: *p.Spec.SchedulingGroup.PodGroupName, Name: p.Name, UID: p.UID, Seen: m.clock()})
}

// Members returns every PodGroup member seen so far, in the order they appeared.
func (m *Monitor) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Member(nil), m.members...)
}

// observeObject turns an informer callback into an observation.
func (m *Monitor) observeObject(obj any, event string) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		// The last state the cache held: the best evidence left of what the object looked like.
		obj = tomb.Obj
	}
	pg, ok := obj.(*schedv1beta1.PodGroup)
	if !ok {
		return
	}
	t := Transition{
		Namespace:       pg.Namespace,
		Name:            pg.Name,
		UID:             pg.UID,
		ResourceVersion: pg.ResourceVersion,
		Generation:      pg.Generation,
		Event:           event,
	}
	if c := meta.FindStatusCondition(pg.Status.Conditions, m.ctype); c != nil {
		t.To = c.DeepCopy()
	}
	m.Observe(t)
}

// Observe records t if it is news: the first observation of a UID, a deletion, or a condition that
// differs from the last one recorded for that UID (status, reason, message, observedGeneration,
// lastTransitionTime). Relists and no-op status writes therefore leave no trace. Observe overwrites
// t.From with the monitor's own last state for the UID, so the timeline is consistent whatever the
// caller passed, and stamps t.Time from the clock when it is zero.
func (m *Monitor) Observe(t Transition) {
	if t.Event == "" {
		t.Event = EventModified
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, seen := m.state[t.UID]
	if seen && t.Event != EventDeleted && sameCondition(st.last, t.To) {
		return
	}
	if t.Time.IsZero() {
		// Under the lock so timeline order and time order agree, and a test clock need not be
		// safe for concurrent use.
		t.Time = m.clock()
	}
	if !seen {
		st = &uidState{}
		m.state[t.UID] = st
	}
	t.From = st.last.DeepCopy()
	t.To = t.To.DeepCopy() // the caller's pointer must not alias the timeline
	st.last = t.To
	if t.To != nil && t.To.Status == metav1.ConditionTrue {
		st.everTrue = true
	}
	if t.Event == EventDeleted {
		st.deleted = true
	}
	m.transitions = append(m.transitions, t)
}

// sameCondition compares exactly the fields that make a transition worth recording.
func sameCondition(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Type == b.Type &&
		a.Status == b.Status &&
		a.Reason == b.Reason &&
		a.Message == b.Message &&
		a.ObservedGeneration == b.ObservedGeneration &&
		a.LastTransitionTime.Equal(&b.LastTransitionTime)
}

// Transitions returns a copy of the timeline in observation order.
func (m *Monitor) Transitions() []Transition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Transition, len(m.transitions))
	for i, t := range m.transitions {
		out[i] = t.deepCopy()
	}
	return out
}

// Violations checks the timeline recorded so far; see Check.
func (m *Monitor) Violations() []Violation {
	return Check(m.Transitions())
}

// Stats reports counts over the timeline recorded so far.
func (m *Monitor) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Stats{PodGroups: len(m.state), Transitions: len(m.transitions), WatchErrors: m.watchErrors}
	for _, st := range m.state {
		if st.everTrue {
			s.EverTrue++
		}
		if st.deleted {
			s.Deleted++
		}
	}
	return s
}
