package kind

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/gangbench/gangbench/clusters"
	"github.com/gangbench/gangbench/internal/proc"
)

// Components inside a kind node that are not control-plane components but spend the node's CPU.
const (
	containerd clusters.Component = "containerd"
	// nodeOther is everything else inside the nodes: pods' containers (the device plugin, pause,
	// the test pods), systemd, the CNI.
	nodeOther clusters.Component = "node-other"
)

// componentOfComm maps a process's command name inside a node (at most 15 bytes, so
// kube-controller-manager reads "kube-controller") to the component it belongs to.
func componentOfComm(comm string) clusters.Component {
	switch {
	case comm == "kube-apiserver":
		return clusters.APIServer
	case comm == "etcd":
		return clusters.Etcd
	case comm == "kube-scheduler":
		return clusters.Scheduler
	case strings.HasPrefix(comm, "kube-controller"):
		return clusters.ControllerManager
	case comm == "kubelet":
		return clusters.Kubelet
	case strings.HasPrefix(comm, "containerd"):
		return containerd // containerd and its shims
	}
	return nodeOther
}

// processes finds the cluster's processes on the host: every process below each node container's
// init (the engine reports its host pid), classified by command name, and the kwok controller.
func (p *Provider) processes(ctx context.Context, st *state, root proc.Root) (map[clusters.Component][]int, error) {
	var ids bytes.Buffer
	if err := p.opts.Runner(ctx, &ids, st.Engine, "ps", "-q", "--filter", "label="+kindClusterLabel+"="+st.Name); err != nil {
		return nil, err
	}
	out := map[clusters.Component][]int{}
	var errs []error
	for _, id := range strings.Fields(ids.String()) {
		var pid bytes.Buffer
		if err := p.opts.Runner(ctx, &pid, st.Engine, "inspect", "-f", "{{.State.Pid}}", id); err != nil {
			errs = append(errs, err)
			continue
		}
		init, err := strconv.Atoi(strings.TrimSpace(pid.String()))
		if err != nil || init <= 0 {
			errs = append(errs, errors.New("node "+id+": no host pid ("+strings.TrimSpace(pid.String())+")"))
			continue
		}
		below, err := root.Descendants(init)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[nodeOther] = append(out[nodeOther], init)
		for _, pid := range below {
			comm, err := root.Comm(pid)
			if err != nil {
				continue // exited since the listing
			}
			c := componentOfComm(comm)
			out[c] = append(out[c], pid)
		}
	}
	if st.Kwok != nil && st.Kwok.Alive() {
		out[clusters.Kwok] = []int{st.Kwok.PID}
	}
	return out, errors.Join(errs...)
}
