package timeline

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// PhaseLabel is the pod label carrying the scenario phase a pod belongs to.
const PhaseLabel = "gangbench.dev/phase"

// ControllerLabel marks pods a controller creates (a Job's), whose creation no create call of this
// process returns: the recorder adds their PodCreated when it first sees them.
const ControllerLabel = "gangbench.dev/made-by"

// Recorder watches the pods of one namespace and adds PodBound and PodDeleted events to a Timeline.
// It keeps only the few fields it needs of each pod, so 10 000 pods cost a few MB, not the ~10 KB
// each a full object would.
type Recorder struct {
	cs        kubernetes.Interface
	namespace string
	tl        *Timeline
	clock     func() time.Time

	mu      sync.Mutex
	deleted map[string]bool
	seen    map[string]bool // controller-made pods already recorded as created

	stop    chan struct{}
	factory informers.SharedInformerFactory
}

// NewRecorder returns a recorder of namespace's pods into tl.
func NewRecorder(cs kubernetes.Interface, namespace string, tl *Timeline) *Recorder {
	return &Recorder{cs: cs, namespace: namespace, tl: tl, clock: time.Now, deleted: map[string]bool{}, seen: map[string]bool{}}
}

// Start begins the watch and returns once the initial list has been delivered, or when ctx ends.
func (r *Recorder) Start(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(r.cs, 0, informers.WithNamespace(r.namespace))
	inf := f.Core().V1().Pods().Informer()
	if err := inf.SetTransform(slimPod); err != nil {
		return fmt.Errorf("pod recorder: %w", err)
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.observe(obj, false) },
		UpdateFunc: func(_, obj any) { r.observe(obj, false) },
		DeleteFunc: func(obj any) { r.observe(obj, true) },
	})
	if err != nil {
		return fmt.Errorf("pod recorder: %w", err)
	}
	r.stop = make(chan struct{})
	r.factory = f
	f.Start(r.stop)
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		r.Stop()
		return fmt.Errorf("pod recorder: the pod watch of namespace %s did not sync: %w", r.namespace, context.Cause(ctx))
	}
	return nil
}

// Stop ends the watch; the timeline stays readable. Safe to call more than once.
func (r *Recorder) Stop() {
	if r.stop == nil {
		return
	}
	close(r.stop)
	r.factory.Shutdown()
	r.stop = nil
}

func (r *Recorder) observe(obj any, gone bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	now := r.clock()
	group := ""
	if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		group = *sg.PodGroupName
	}
	phase := p.Labels[PhaseLabel]
	if _, made := p.Labels[ControllerLabel]; made {
		r.mu.Lock()
		first := !r.seen[p.Name]
		r.seen[p.Name] = true
		r.mu.Unlock()
		if first {
			r.tl.Add(Event{Time: now, Kind: PodCreated, Phase: phase, Group: group, Pod: p.Name})
		}
	}
	if p.Spec.NodeName != "" {
		// Timeline.Add drops repeats: the first sighting is the bind time.
		r.tl.Add(Event{Time: now, Kind: PodBound, Phase: phase, Group: group, Pod: p.Name, Node: p.Spec.NodeName})
	}
	if gone || p.DeletionTimestamp != nil {
		r.mu.Lock()
		seen := r.deleted[p.Name]
		r.deleted[p.Name] = true
		r.mu.Unlock()
		if !seen {
			r.tl.Add(Event{Time: now, Kind: PodDeleted, Phase: phase, Group: group, Pod: p.Name, Node: p.Spec.NodeName})
		}
	}
}

// slimPod drops everything the recorder does not read. The informer needs name, namespace and
// resourceVersion; the recorder reads the phase label, the group, the node and deletion.
func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec: corev1.PodSpec{NodeName: p.Spec.NodeName, SchedulingGroup: p.Spec.SchedulingGroup},
	}
	for _, k := range []string{PhaseLabel, ControllerLabel} {
		if v, ok := p.Labels[k]; ok {
			if slim.Labels == nil {
				slim.Labels = map[string]string{}
			}
			slim.Labels[k] = v
		}
	}
	return slim, nil
}
