package suites

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gangbench/gangbench/scenarios"
	"github.com/gangbench/gangbench/suites/framework"
)

// Jobs that ask for gang scheduling (WorkloadWithJob, alpha, off by default: workload-features-v1.37
// §3). The job controller writes one Workload and one PodGroup per new root Job, owned by it, and
// puts its pods in the group; the scheduler then treats them as any gang. The suite runs where the
// apiserver and the scheduler report the gate on (`--features jobs`; the controller-manager gets it
// from the same flag, and without it no group appears, which JOB-01 would report).

const jobRef = "workload-features §3"

var jobGates = []string{"WorkloadWithJob"}

func jobFeatures() []framework.Feature {
	one := framework.LaneSpec{Nodes: 1, GPUsPerNode: 8}
	var (
		pgName string
		wlName string
	)
	return []framework.Feature{
		{
			Suite: "jobs", Name: "jobs: a gang Job gets its Workload and PodGroup", Lane: one, NeedsGates: jobGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "JOB-01", Statement: "a Job with spec.scheduling.schedulingPolicy.gang (minCount unset, parallelism = completions = 4, 2 GPUs each) gets exactly one Workload (controllerRef kind Job, one template <job>-pgt-0 of minCount 4) and exactly one PodGroup (workloadRef to that template, minCount 4, owned by the Job as controller and by the Workload, with the protection finalizer)", Ref: jobRef + ".2-3.3 (job_scheduling_manager.go:443-569; minCount defaults to parallelism, util.go:115-126)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						jobCreate(ctx, t, l, "train", 4, 2, nil)
						pg, wl := jobObjects(ctx, t, l, "train")
						pgName, wlName = pg.Name, wl.Name
						if wl.Spec.ControllerRef == nil || wl.Spec.ControllerRef.Kind != "Job" || wl.Spec.ControllerRef.Name != "train" {
							t.Errorf("Workload %s: spec.controllerRef %+v, want the Job train", wl.Name, wl.Spec.ControllerRef)
						}
						if len(wl.Spec.PodGroupTemplates) != 1 || wl.Spec.PodGroupTemplates[0].Name != "train-pgt-0" || jobTemplateMinCount(wl) != 4 {
							t.Errorf("Workload %s: templates %+v, want one, train-pgt-0, gang minCount 4", wl.Name, wl.Spec.PodGroupTemplates)
						}
						if pg.Spec.WorkloadRef == nil || pg.Spec.WorkloadRef.WorkloadName != wl.Name || pg.Spec.WorkloadRef.TemplateName != "train-pgt-0" {
							t.Errorf("PodGroup %s: workloadRef %+v, want %s/train-pgt-0", pg.Name, pg.Spec.WorkloadRef, wl.Name)
						}
						if g := pg.Spec.SchedulingPolicy.Gang; g == nil || g.MinCount != 4 {
							t.Errorf("PodGroup %s: schedulingPolicy %+v, want gang minCount 4", pg.Name, pg.Spec.SchedulingPolicy)
						}
						if !jobOwnedBy(pg.OwnerReferences, "Job", "train", true) || !jobOwnedBy(pg.OwnerReferences, "Workload", wl.Name, false) {
							t.Errorf("PodGroup %s: ownerReferences %+v, want the Job train (controller) and the Workload %s", pg.Name, pg.OwnerReferences, wl.Name)
						}
						if !strings.Contains(strings.Join(pg.Finalizers, ","), ProtectionFinalizer) {
							t.Errorf("PodGroup %s: finalizers %v, want %s", pg.Name, pg.Finalizers, ProtectionFinalizer)
						}
					}},
				// Not asserted: the PodGroup ownerReference the job controller appends to its pod
				// template (job_controller.go:1875-1886) never reaches the pods in v1.37.2, because
				// GetPodFromTemplate (controller_utils.go:567-590) copies the template's labels,
				// annotations, finalizers and spec but not its ownerReferences. Membership is the
				// schedulingGroup, which is what the scheduler reads.
				{A: framework.Assertion{ID: "JOB-02", Statement: "the Job's 4 pods carry spec.schedulingGroup.podGroupName of that PodGroup, and all 4 bind (8 GPUs on the 8-GPU node)", Ref: jobRef + ".2 (job_controller.go:1870-1874)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						if pgName == "" {
							t.Fatal("no PodGroup (JOB-01 failed early)")
						}
						pods := jobPods(ctx, t, l, "train", 4)
						for _, p := range pods {
							if !jobInGroup(&p, pgName) {
								t.Errorf("pod %s: schedulingGroup %+v, want podGroupName %s", p.Name, p.Spec.SchedulingGroup, pgName)
							}
						}
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), jobNames(pods)...)
					}},
				{A: framework.Assertion{ID: "JOB-03", Statement: "deleting the Job (background propagation) takes its Workload, PodGroup and pods with it within 60s", Ref: jobRef + ".4 (garbage collection through the controller ownerRefs)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						if pgName == "" {
							t.Fatal("no PodGroup (JOB-01 failed early)")
						}
						bg := metav1.DeletePropagationBackground
						if err := l.Client.BatchV1().Jobs(l.Name).Delete(ctx, "train", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
							t.Fatalf("delete Job train: %v", err)
						}
						framework.Eventually(ctx, t, l.Env.Scaled(60*time.Second), "the Job's Workload, PodGroup and pods gone", func(ctx context.Context) (bool, string, error) {
							var left []string
							if _, err := l.Client.SchedulingV1beta1().Workloads(l.Name).Get(ctx, wlName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
								left = append(left, "Workload "+wlName)
							}
							if _, err := l.Gang.PodGroups(l.Name).Get(ctx, pgName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
								left = append(left, "PodGroup "+pgName)
							}
							pods, err := l.Client.CoreV1().Pods(l.Name).List(ctx, metav1.ListOptions{LabelSelector: "job-name=train"})
							if err != nil {
								return false, "", err
							}
							if n := len(pods.Items); n > 0 {
								left = append(left, fmt.Sprintf("%d pods", n))
							}
							return len(left) == 0, fmt.Sprintf("left: %v", left), nil
						})
					}},
			},
		},
		jobAllOrNothingFeature(one),
		jobSuspendFeature(one),
		{
			Suite: "jobs", Name: "jobs: a failed member's replacement joins the group", Lane: one, NeedsGates: jobGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "JOB-09", Statement: "one of a running gang Job's 2 pods (2 GPUs each) fails: the job controller's replacement names the same PodGroup and binds within 60s (the running member and the replacement make the quorum)", Ref: jobRef + ".4 (a failed pod leaves the gang's counts; its replacement joins the same PodGroup, filterControlledByJob)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						jobCreate(ctx, t, l, "flaky", 2, 2, nil)
						pg, _ := jobObjects(ctx, t, l, "flaky")
						pods := jobPods(ctx, t, l, "flaky", 2)
						l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), jobNames(pods)...)
						failed := pods[0].Name
						bmFinish(ctx, t, l, failed, corev1.PodFailed)
						var replacement string
						framework.Eventually(ctx, t, l.Env.Scaled(60*time.Second), "a replacement pod of Job flaky bound", func(ctx context.Context) (bool, string, error) {
							list, err := l.Client.CoreV1().Pods(l.Name).List(ctx, metav1.ListOptions{LabelSelector: "job-name=flaky"})
							if err != nil {
								return false, "", err
							}
							var state []string
							for _, p := range list.Items {
								state = append(state, fmt.Sprintf("%s %s on %q", p.Name, p.Status.Phase, p.Spec.NodeName))
								if p.Name == failed || p.Name == pods[1].Name {
									continue
								}
								replacement = p.Name
								if !jobInGroup(&p, pg.Name) {
									t.Fatalf("replacement %s: schedulingGroup %+v, want podGroupName %s", p.Name, p.Spec.SchedulingGroup, pg.Name)
								}
								if p.Spec.NodeName != "" {
									return true, "", nil
								}
							}
							return false, fmt.Sprint(state), nil
						})
						t.Logf("replacement %s of failed pod %s bound", replacement, failed)
					}},
			},
		},
		jobGateFeature(one),
		{
			Suite: "jobs", Name: "jobs: validation", Lane: one, NeedsGates: jobGates,
			Steps: []framework.Step{
				{A: framework.Assertion{ID: "JOB-06", Statement: "a Job with gang minCount 5 and parallelism 4 is refused: \"must not be greater than parallelism (4)\"", Ref: jobRef + ".1 (validation.go:656-688)"},
					Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
						five := int32(5)
						_, err := l.Client.BatchV1().Jobs(l.Name).Create(ctx, jobBuild(l, "toomany", 4, 1, &five), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
						if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "must not be greater than parallelism (4)") {
							t.Errorf("Job with minCount 5 and parallelism 4: %v, want Invalid \"must not be greater than parallelism (4)\"", err)
						}
					}},
			},
		},
	}
}

// jobAllOrNothingFeature: a gang Job with room for half its pods binds none, until its minCount is
// lowered on the Job.
func jobAllOrNothingFeature(lane framework.LaneSpec) framework.Feature {
	var waiting []string
	return framework.Feature{
		Suite: "jobs", Name: "jobs: all or nothing, and minCount changed on the Job", Lane: lane, NeedsGates: jobGates,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "JOB-04", Statement: "a gang Job of 4 pods × 4 GPUs (minCount unset, so 4) on one 8-GPU node binds none of them for 10s", Ref: jobRef + ".3 (minCount defaults to parallelism); gang-semantics §3.4"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					jobCreate(ctx, t, l, "big", 4, 4, nil)
					jobObjects(ctx, t, l, "big")
					pods := jobPods(ctx, t, l, "big", 4)
					l.WaitEvent(ctx, t, l.Env.Scaled(60*time.Second), pods[0].Name, "FailedScheduling")
					bmHoldFor(ctx, t, l, l.Env.Scaled(bmHoldWindow), bmHold{Unbound: jobNames(pods)})
					l.Canary(ctx, t)
					waiting = jobNames(pods)
				}},
			{A: framework.Assertion{ID: "JOB-05", Statement: fmt.Sprintf("minCount lowered to 2 on the Job: the Workload's template and the PodGroup follow within 30s, and 2 of the pods bind within %s of the change, the other 2 never", 60*time.Second), Ref: jobRef + ".3 (syncGangMinCount, job_scheduling_manager.go:169-255); gang-semantics §3.3 (a lower minCount requeues the gang)"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if len(waiting) == 0 {
						t.Fatal("the Job's pods did not wait (JOB-04 failed early)")
					}
					patch := []byte(`{"spec":{"scheduling":{"schedulingPolicy":{"gang":{"minCount":2}}}}}`)
					if _, err := l.Client.BatchV1().Jobs(l.Name).Patch(ctx, "big", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
						t.Fatalf("lower minCount of Job big: %v", err)
					}
					framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), "the Job's Workload and PodGroup at minCount 2", func(ctx context.Context) (bool, string, error) {
						pg, wl := jobObjects(ctx, t, l, "big")
						got := 0
						if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
							got = int(g.MinCount)
						}
						return got == 2 && jobTemplateMinCount(wl) == 2, fmt.Sprintf("PodGroup %s minCount %d, Workload %s template minCount %d", pg.Name, got, wl.Name, jobTemplateMinCount(wl)), nil
					})
					framework.Eventually(ctx, t, l.Env.Scaled(60*time.Second), "2 of the Job's pods bound", func(ctx context.Context) (bool, string, error) {
						o, err := l.Observe(ctx)
						if err != nil {
							return false, "", err
						}
						bound := 0
						for _, n := range waiting {
							if o.Pods[n] == framework.Bound {
								bound++
							}
						}
						if bound > 2 {
							t.Fatalf("%d pods of 4 GPUs bound on one 8-GPU node: %s", bound, o)
						}
						return bound == 2, o.String(), nil
					})
				}},
		},
	}
}

// jobSuspendFeature: a suspended Job's pods go, its Workload and PodGroup stay, and resumed it
// brings pods back into the same PodGroup.
func jobSuspendFeature(lane framework.LaneSpec) framework.Feature {
	ref := jobRef + ".4 (suspend and resume keep the same Workload and PodGroup; integration TestJobGangSchedulingSuspendResume)"
	var pgUID, wlUID types.UID
	var pgName string
	return framework.Feature{
		Suite: "jobs", Name: "jobs: suspend and resume keep the group", Lane: lane, NeedsGates: jobGates,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "JOB-07", Statement: "a running gang Job (2 pods × 2 GPUs) is suspended: its pods are deleted within 60s and its Workload and PodGroup stay, same UIDs", Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					jobCreate(ctx, t, l, "pause", 2, 2, nil)
					pg, wl := jobObjects(ctx, t, l, "pause")
					pgUID, wlUID, pgName = pg.UID, wl.UID, pg.Name
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), jobNames(jobPods(ctx, t, l, "pause", 2))...)
					jobSetSuspend(ctx, t, l, "pause", true)
					jobPods(ctx, t, l, "pause", 0)
					pg, wl = jobObjects(ctx, t, l, "pause")
					if pg.UID != pgUID || wl.UID != wlUID {
						t.Errorf("suspending replaced the group: PodGroup %s uid %s→%s, Workload %s uid %s→%s", pg.Name, pgUID, pg.UID, wl.Name, wlUID, wl.UID)
					}
				}},
			{A: framework.Assertion{ID: "JOB-08", Statement: "resumed, the Job's 2 new pods name the same PodGroup and bind within 60s", Ref: ref},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					if pgName == "" {
						t.Fatal("no PodGroup (JOB-07 failed early)")
					}
					jobSetSuspend(ctx, t, l, "pause", false)
					pods := jobPods(ctx, t, l, "pause", 2)
					for _, p := range pods {
						if !jobInGroup(&p, pgName) {
							t.Errorf("pod %s after resume: schedulingGroup %+v, want podGroupName %s", p.Name, p.Spec.SchedulingGroup, pgName)
						}
					}
					l.WaitBound(ctx, t, l.Env.Scaled(60*time.Second), jobNames(pods)...)
					if pg, _ := jobObjects(ctx, t, l, "pause"); pg.UID != pgUID {
						t.Errorf("resuming replaced PodGroup %s: uid %s→%s", pg.Name, pgUID, pg.UID)
					}
				}},
		},
	}
}

// jobSetSuspend suspends or resumes a Job.
func jobSetSuspend(ctx context.Context, t *testing.T, l *framework.Lane, job string, suspend bool) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"suspend":%t}}`, suspend)
	if _, err := l.Client.BatchV1().Jobs(l.Name).Patch(ctx, job, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatalf("set suspend=%t on Job %s: %v", suspend, job, err)
	}
}

// jobBuild is a Job of the lane: parallelism = completions = n pods of gpus GPUs each, pinned to the
// lane's nodes as every suite pod is, with gang scheduling (minCount when set, else the default).
func jobBuild(l *framework.Lane, name string, n int32, gpus int64, minCount *int32) *batchv1.Job {
	pod := l.Pod(scenarios.Member{Name: name, GPUs: gpus})
	spec := pod.Spec
	spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.Name},
		Spec: batchv1.JobSpec{
			Parallelism: &n, Completions: &n,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: pod.Labels}, Spec: spec},
			Scheduling: &batchv1.JobSchedulingConfiguration{
				SchedulingPolicy: &schedv1alpha3.WorkloadPodGroupSchedulingPolicy{Gang: &schedv1alpha3.WorkloadPodGroupGangSchedulingPolicy{MinCount: minCount}},
			},
		},
	}
}

// jobCreate creates the Job and fails if the apiserver dropped spec.scheduling (gate off there).
func jobCreate(ctx context.Context, t *testing.T, l *framework.Lane, name string, n int32, gpus int64, minCount *int32) {
	t.Helper()
	j, err := l.Client.BatchV1().Jobs(l.Name).Create(ctx, jobBuild(l, name, n, gpus, minCount), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Job %s: %v", name, err)
	}
	if j.Spec.Scheduling == nil {
		t.Fatalf("the apiserver dropped Job %s's spec.scheduling (WorkloadWithJob off on the apiserver?)", name)
	}
}

// jobObjects waits until the Job has exactly one PodGroup and one Workload it controls, and returns
// them.
func jobObjects(ctx context.Context, t *testing.T, l *framework.Lane, job string) (*schedv1beta1.PodGroup, *schedv1beta1.Workload) {
	t.Helper()
	var pg *schedv1beta1.PodGroup
	var wl *schedv1beta1.Workload
	framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), "one PodGroup and one Workload of Job "+job, func(ctx context.Context) (bool, string, error) {
		pgs, err := l.Gang.PodGroups(l.Name).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		wls, err := l.Client.SchedulingV1beta1().Workloads(l.Name).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var mine []string
		pg, wl = nil, nil
		for i := range pgs.Items {
			if jobOwnedBy(pgs.Items[i].OwnerReferences, "Job", job, true) {
				pg = &pgs.Items[i]
				mine = append(mine, "PodGroup "+pg.Name)
			}
		}
		for i := range wls.Items {
			if jobOwnedBy(wls.Items[i].OwnerReferences, "Job", job, true) {
				wl = &wls.Items[i]
				mine = append(mine, "Workload "+wl.Name)
			}
		}
		if len(mine) > 2 {
			t.Fatalf("Job %s controls more than one PodGroup or Workload: %v", job, mine)
		}
		return pg != nil && wl != nil, fmt.Sprintf("objects controlled by Job %s: %v", job, mine), nil
	})
	return pg, wl
}

// jobPods waits until the Job has n pods and returns them.
func jobPods(ctx context.Context, t *testing.T, l *framework.Lane, job string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	framework.Eventually(ctx, t, l.Env.Scaled(30*time.Second), fmt.Sprintf("%d pods of Job %s", n, job), func(ctx context.Context) (bool, string, error) {
		list, err := l.Client.CoreV1().Pods(l.Name).List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + job})
		if err != nil {
			return false, "", err
		}
		pods = list.Items
		return len(pods) == n, fmt.Sprintf("%d pods", len(pods)), nil
	})
	return pods
}

func jobNames(pods []corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

// jobInGroup says whether the pod's spec.schedulingGroup names the PodGroup.
func jobInGroup(p *corev1.Pod, group string) bool {
	sg := p.Spec.SchedulingGroup
	return sg != nil && sg.PodGroupName != nil && *sg.PodGroupName == group
}

// jobOwnedBy says whether refs hold an owner of that kind and name, as the controller when asked.
func jobOwnedBy(refs []metav1.OwnerReference, kind, name string, controller bool) bool {
	for _, r := range refs {
		if r.Kind == kind && r.Name == name && (!controller || (r.Controller != nil && *r.Controller)) {
			return true
		}
	}
	return false
}

// jobTemplateMinCount is the gang minCount of the Workload's first template (0 when none).
func jobTemplateMinCount(wl *schedv1beta1.Workload) int32 {
	if len(wl.Spec.PodGroupTemplates) == 0 || wl.Spec.PodGroupTemplates[0].SchedulingPolicy.Gang == nil {
		return 0
	}
	return wl.Spec.PodGroupTemplates[0].SchedulingPolicy.Gang.MinCount
}

// jobGateFeature runs whatever the gate: the apiserver's own kubernetes_feature_enabled metric says
// which behaviour is right (the apiserver half of §7 item 40; the controller-manager half, no
// Workload without its gate, is not observable from the apiserver's metrics). The Job is suspended,
// so no pod is made either way.
func jobGateFeature(lane framework.LaneSpec) framework.Feature {
	return framework.Feature{
		Suite: "jobs", Name: "jobs: spec.scheduling follows the apiserver's gate", Lane: lane,
		Steps: []framework.Step{
			{A: framework.Assertion{ID: "JOB-10", Statement: "with WorkloadWithJob off on the apiserver (its kubernetes_feature_enabled metric), a Job created with spec.scheduling (gang) reads back without it; with it on, the field is kept", Ref: jobRef + ".1 (DropDisabledFields on create, pkg/api/job/util.go:34-39); workload-features §7 item 40"},
				Fn: func(ctx context.Context, t *testing.T, l *framework.Lane) {
					on := l.APIServerGate(ctx, t, jobGates[0])
					j := jobBuild(l, "gated", 2, 1, nil)
					suspend := true
					j.Spec.Suspend = &suspend
					if _, err := l.Client.BatchV1().Jobs(l.Name).Create(ctx, j, metav1.CreateOptions{}); err != nil {
						t.Fatalf("create Job gated: %v", err)
					}
					got, err := l.Client.BatchV1().Jobs(l.Name).Get(ctx, "gated", metav1.GetOptions{})
					if err != nil {
						t.Fatalf("get Job gated: %v", err)
					}
					switch {
					case !on && got.Spec.Scheduling != nil:
						t.Errorf("gate off: Job gated reads back spec.scheduling %+v, want the field dropped", got.Spec.Scheduling)
					case on && (got.Spec.Scheduling == nil || got.Spec.Scheduling.SchedulingPolicy == nil || got.Spec.Scheduling.SchedulingPolicy.Gang == nil):
						t.Errorf("gate on: Job gated reads back spec.scheduling %+v, want the gang policy it was created with", got.Spec.Scheduling)
					}
				}},
		},
	}
}
