package lab

// What the lab reports, copied from its text (seeds/, the Traditional Chinese lab) for the report's
// "lab" column. The lab ran scheduling.k8s.io/v1alpha2, whose condition was PodGroupScheduled.
var (
	labControlPods = []string{
		"NAME       GROUP    PHASE     NODE",
		"team-a-0   team-a   Running   gpu-lab-worker",
		"team-a-1   team-a   Running   gpu-lab-worker",
		"team-a-2   team-a   Pending   <none>",
		"team-b-0   team-b   Running   gpu-lab-worker",
		"team-b-1   team-b   Running   gpu-lab-worker",
		"team-b-2   team-b   Pending   <none>",
	}
	labControlGPUs = []string{"  nvidia.com/gpu     8            8"}
	labCleanGPUs   = []string{"  nvidia.com/gpu     0            0"}
	labGangPods    = []string{
		"NAME       GROUP    PHASE     NODE",
		"team-a-0   team-a   Running   gpu-lab-worker",
		"team-a-1   team-a   Running   gpu-lab-worker",
		"team-a-2   team-a   Running   gpu-lab-worker",
		"team-b-0   team-b   Pending   <none>",
		"team-b-1   team-b   Pending   <none>",
		"team-b-2   team-b   Pending   <none>",
	}
	labGangGPUs    = []string{"  nvidia.com/gpu     6            6"}
	labBasicGroups = []string{
		"NAME     POLICY             STATUS",
		"team-a   map[basic:map[]]   map[conditions:[map[lastTransitionTime:2026-09-25T11:00:19Z message: reason:Scheduled status:True type:PodGroupScheduled]]]",
		"team-b   map[basic:map[]]   map[conditions:[map[lastTransitionTime:2026-09-25T11:00:19Z message: reason:Scheduled status:True type:PodGroupScheduled]]]",
	}
	labGangGroups = []string{
		"team-a  minCount 3  PodGroupScheduled  True   Scheduled      \"\"",
		"team-b  minCount 3  PodGroupScheduled  False  Unschedulable  \"pod group is unschedulable\"",
	}
	labEvents = []string{
		"POD        MSG",
		"team-b-0   " + labResourceMessage + " no new claims to deallocate, preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.",
		"team-b-1   " + labResourceMessage + " no new claims to deallocate, preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling.",
		"team-b-2   pod group is unschedulable, waiting for minCount pods from a gang to be scheduled, one or more plugins asked to wait and no plugin rejected pod",
	}
	labElasticPods = []string{
		"NAME       PHASE     NODE",
		"team-c-0   Running   gpu-lab-worker",
		"team-c-1   Running   gpu-lab-worker",
		"team-c-2   Running   gpu-lab-worker",
		"team-c-3   Running   gpu-lab-worker",
		"team-c-4   Pending   <none>",
	}
	labElasticGroups = []string{
		"NAME     MIN   STATUS",
		"team-c   3     Scheduled",
	}
	labElasticGPUs = []string{"  nvidia.com/gpu     8            8"}
)

// labResourceMessage is the resource part of the pending team's FailedScheduling message in the
// lab: three nodes, the tainted control plane and two without room for 2 GPUs. On a cluster of that
// shape v1.37 must say the same.
const labResourceMessage = "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 Insufficient nvidia.com/gpu."

// draResourceMessage is labResourceMessage with DRA GPUs, as v1.37.2 words it on the lab's three
// nodes (seen on local, kwok nodes, and on kind, real kubelets with the DRA plugin): the DRA
// plugin's Filter rejects the worker without room and the worker without GPUs alike, "cannot
// allocate all claims", where the lab's NodeResourcesFit said "Insufficient nvidia.com/gpu".
const draResourceMessage = "0/3 nodes are available: 1 node(s) had untolerated taint(s), 2 " + draResourceReason + "."

// gangMessagePrefix starts every gang-level FailedScheduling message, in the lab's version and in
// v1.37 (whose wording goes on with "minCount (3) cannot be satisfied: …").
const gangMessagePrefix = "pod group is unschedulable"
